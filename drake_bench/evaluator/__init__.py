"""The standard evaluator: the run's settings (``run_config``), the round loop that owns every number
(``standard``), per-round checkpoints (``checkpoint``) and the record of what a method was handed (``access``).

``from drake_bench.evaluator import Evaluator`` keeps working: it resolves from
:mod:`drake_bench.evaluator.standard`.
"""

from __future__ import annotations

import importlib
from typing import Any

_PUBLIC_HOME = "drake_bench.evaluator.standard"


def __getattr__(name: str) -> Any:
    """Names that were importable from ``drake_bench.evaluator`` before it became a package keep resolving, lazily (importing
    this package does not load the round loop and its backends), so ``from drake_bench.evaluator import Evaluator`` works as before."""
    if name.startswith("__"):
        raise AttributeError(name)
    module = importlib.import_module(_PUBLIC_HOME)
    try:
        return getattr(module, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
