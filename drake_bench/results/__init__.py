"""Result files: the typed record of a run (``result_file``), how its raw score tables are laid out
(``encoding``).

``from drake_bench.results import read_result, RunResult, ...`` keeps working: those names resolve from
:mod:`drake_bench.results.result_file`.
"""

from __future__ import annotations

import importlib
from typing import Any

_PUBLIC_HOME = "drake_bench.results.result_file"


def __getattr__(name: str) -> Any:
    """Names that were importable from ``drake_bench.results`` before it became a package keep resolving, lazily (importing
    this package does not load the schema and its dependencies), so ``from drake_bench.results import read_result`` works as before."""
    if name.startswith("__"):
        raise AttributeError(name)
    module = importlib.import_module(_PUBLIC_HOME)
    try:
        return getattr(module, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
