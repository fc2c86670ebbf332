"""Python definitions of the real benchmarks; ``scripts/make_real_manifests.py`` writes them to ``splits/*.json``.

Each module returns a :class:`~drake_bench.benchmarks.spec.BenchmarkSpec` built from the FedMosaic paper's tables
(see ``_common.PAPER``). Anything the paper does not state is tagged [I]/[R] in
the BenchmarkSpec's ``choices`` list (longer reasons: docs/design-notes.md) and in the per-task ``provenance`` map.
"""

from __future__ import annotations

from collections.abc import Callable

from drake_bench.benchmarks.definitions.drake import drake
from drake_bench.benchmarks.definitions.hflb import hflb
from drake_bench.benchmarks.definitions.text import fed_aya, fed_llm_large, fed_scope
from drake_bench.benchmarks.spec import BenchmarkSpec

REAL_BENCHMARKS: dict[str, Callable[[], BenchmarkSpec]] = {
    "drake": drake,
    "hflb": hflb,
    "fed-llm-large": fed_llm_large,
    "fed-aya": fed_aya,
    "fed-scope": fed_scope,
}

__all__ = ["REAL_BENCHMARKS", "drake", "hflb", "fed_llm_large", "fed_aya", "fed_scope"]
