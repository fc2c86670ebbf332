"""Which CPU instruction set the floating-point kernels use, so that one seed gives one set of numbers on every host.

torch (ATen's vectorised kernels), MKL (matrix multiplies) and oneDNN each pick their code path from the CPU they run
on: AVX-512 on a host that has it, AVX2 on one that has not. The paths round differently in the last bits. Evaluation
of a fixed model is unaffected, but two hundred optimiser steps amplify the difference. On drake-synth's main job, SFT's
scores agree with the AVX2 host's cell by cell after round 2, 4 of 200 cells differ at round 4, and 104 of 400 differ at
round 8. Self A_last is 37.08 on an AVX-512 host against 35.21 on an AVX2 one (docs/findings/cross-host-reproducibility.md).

``portable`` (the default) holds all three libraries to AVX2, the newest instruction set that nearly every x86-64 host
in use has: consumer Intel CPUs since Haswell, AMD since Zen. A result file then reproduces on any such host, bit for
bit. ``native`` lets each library take the host's best path: it may be faster, but its numbers are the host's own.
Every result file records the setting (``fl.extra.run_config.numerics``) and the capability torch reported in the
process that trained (``environment.cpu_capability``).

The variables must be in a process's environment before its first torch, MKL or oneDNN kernel runs, because each
library reads them once. drake_bench's method workers (:class:`~drake_bench.backends.worker_process.MethodProcess`) are where
training and scoring run, and they start with the environment :func:`environment_for` gives. An ``inline`` run, a
method inside the evaluator's own process, gets the variables only if no kernel has run there yet. The recorded
capability says which happened. A variable the user has set already is left as it is. On a host without AVX2 (or not
x86-64) nothing is set, and ``portable`` means the host's own path.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping
from functools import lru_cache
from typing import Literal, get_args

Numerics = Literal["portable", "native"]
NUMERICS: tuple[str, ...] = get_args(Numerics)

PORTABLE_ENV: dict[str, str] = {
    "ATEN_CPU_CAPABILITY": "avx2",  # torch's vectorised elementwise, reduction and softmax kernels
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",  # MKL's GEMM, which most of a linear layer's time is spent in
    "ONEDNN_MAX_CPU_ISA": "AVX2",  # oneDNN (mkldnn) primitives torch routes some convolutions and matmuls to
}
"""The variables ``portable`` sets, each capping one library at AVX2. On drake-synth's main job the three together
reproduce an AVX2 host's SFT scores cell by cell on an AVX-512 host (docs/findings/cross-host-reproducibility.md)."""


@lru_cache(maxsize=1)
def host_has_avx2() -> bool:
    """Whether this host can run the AVX2 paths: x86-64 with the avx2 and fma flags (Linux's /proc/cpuinfo; torch's
    own check where that file is absent)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return {"avx2", "fma"} <= flags
    except OSError:
        pass
    return cpu_capability() in ("AVX2", "AVX512")


def environment_for(numerics: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` (default: this process's) with ``numerics``' variables added. A process started with it computes
    under that setting. Variables already present are kept, so a user's explicit choice wins."""
    if numerics not in NUMERICS:
        raise ValueError(f"numerics must be one of {NUMERICS}, got {numerics!r}")
    env = dict(os.environ if environ is None else environ)
    if numerics == "portable" and host_has_avx2():
        for key, value in PORTABLE_ENV.items():
            env.setdefault(key, value)
    return env


def apply(numerics: str) -> None:
    """Put ``numerics``' variables into this process's environment. This affects only the libraries that have not
    run a kernel yet here, and every process started from here afterwards."""
    for key, value in environment_for(numerics).items():
        if os.environ.get(key) != value:
            os.environ[key] = value


def cpu_capability() -> str | None:
    """The instruction set torch's CPU kernels use in this process (``AVX2``, ``AVX512``, ``DEFAULT``, ...). The first
    call fixes it for the process, as the first kernel would."""
    import torch

    get = getattr(torch.backends.cpu, "get_cpu_capability", None)
    return str(get()) if get is not None else None


def cpu_model() -> str | None:
    """The CPU's model name as the OS reports it (``/proc/cpuinfo``), else :func:`platform.processor`; None if neither
    says."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip() or None
    except OSError:
        pass
    return platform.processor() or None


def shortfall(numerics: str, capability: str | None) -> str | None:
    """A sentence for the result file's notes when ``portable`` was asked for and not obtained. This happens to an
    ``inline`` method in a process whose kernels had already started, where the variables come too late. None when
    the setting held, or when it cannot hold on this host."""
    if numerics != "portable" or capability in (None, "AVX2") or not host_has_avx2():
        return None
    return (
        f"numerics 'portable' was asked for, but the method computed with {capability} kernels (it ran inline in a "
        "process whose kernels had already started, so the AVX2 cap came too late): these digits are this host's "
        "own, as under 'native'; run with process isolation (the default) to get the portable ones"
    )
