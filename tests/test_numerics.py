"""Numerics: the instruction set a run's kernels use is chosen by the run config and recorded in the result file."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys

import pytest
from minimal_method import Counter

from drake_bench.core.numerics import PORTABLE_ENV, environment_for, host_has_avx2
from drake_bench.evaluator.standard import RunConfig, run
from drake_bench.plugins.registry import register_method

register_method(Counter)

needs_avx2 = pytest.mark.skipif(
    not host_has_avx2(), reason="the portable setting caps kernels at AVX2, which this host lacks"
)


def _cfg(toy, out, **kw) -> RunConfig:
    manifest, root = toy
    return RunConfig(
        benchmark=manifest, method="counter", data_dir=root, out=str(out), seeds=[0], fast_adaptation=False, **kw
    )


def _clean_environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in PORTABLE_ENV}


@needs_avx2
def test_portable_caps_every_library_and_keeps_a_users_own_choice():
    env = environment_for("portable", {"PATH": "/bin", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2"})
    assert env["ATEN_CPU_CAPABILITY"] == "avx2" and env["ONEDNN_MAX_CPU_ISA"] == "AVX2"
    assert env["MKL_ENABLE_INSTRUCTIONS"] == "SSE4_2"  # set by the user: kept
    assert env["PATH"] == "/bin"


def test_native_adds_nothing_and_an_unknown_setting_is_refused():
    assert environment_for("native", {"PATH": "/bin"}) == {"PATH": "/bin"}
    with pytest.raises(ValueError, match="numerics must be one of"):
        environment_for("fast", {})
    with pytest.raises(ValueError, match="numerics"):
        RunConfig(numerics="fast")


@needs_avx2
def test_a_portable_run_computes_on_avx2_kernels_and_the_result_says_so(toy, tmp_path, monkeypatch):
    for key in PORTABLE_ENV:
        monkeypatch.delenv(key, raising=False)
    res = run(_cfg(toy, tmp_path))
    assert res.fl.extra["run_config"]["numerics"] == "portable"
    assert res.environment.cpu_capability == "AVX2"  # also on an AVX-512 host: the method worker was capped
    assert res.environment.cpu_model is None or res.environment.cpu_model.strip()


def test_a_native_run_records_the_hosts_own_capability(toy, tmp_path, monkeypatch):
    for key in PORTABLE_ENV:
        monkeypatch.delenv(key, raising=False)
    fresh = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.backends.cpu.get_cpu_capability())"],
        env=_clean_environment(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    res = run(_cfg(toy, tmp_path, numerics="native"))
    assert res.environment.cpu_capability == fresh


def test_resume_does_not_mix_numerics(toy, tmp_path):
    """A portable run refuses to continue a native run's seeds (their trained digits differ on an AVX-512 host); a
    native rerun keeps them."""
    from drake_bench import DrakeBenchError

    out = tmp_path / "run"
    run(_cfg(toy, out, numerics="native"))
    with pytest.raises(DrakeBenchError, match="from a different run configuration"):
        run(_cfg(toy, out, numerics="portable"))
    again = run(_cfg(toy, out, numerics="native"))  # the finished seed is kept, not run again
    assert (
        again.fl.extra["seed_fingerprints"]
        == run(_cfg(toy, tmp_path / "other", numerics="native")).fl.extra["seed_fingerprints"]
    )


def test_an_inline_run_that_could_not_be_capped_says_so(toy, tmp_path):
    """Inline, the method computes in this test process, whose kernels started long ago: the AVX2 cap comes too late
    on an AVX-512 host, and the result file says so instead of passing the digits off as portable."""
    from drake_bench.core.numerics import cpu_capability

    with (
        pytest.warns(RuntimeWarning, match="came too late")
        if cpu_capability() != "AVX2" and host_has_avx2()
        else contextlib.nullcontext()
    ):
        res = run(_cfg(toy, tmp_path, isolation="inline"))
    noted = any("came too late" in n for n in res.notes)
    assert noted == (res.environment.cpu_capability != "AVX2" and host_has_avx2())
