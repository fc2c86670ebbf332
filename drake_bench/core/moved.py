"""Import paths that moved in 0.1's reorganisation keep working until 0.2, so plugins written against 0.1 still load.

Two cases: a module that moved stays importable under its old name as the *same* module object (so ``isinstance``
and monkeypatching agree across both names), with a ``DeprecationWarning``; a module that became a package
(``drake_bench.results``, ``drake_bench.evaluator``) resolves its old top-level names lazily from the module that now
holds them, so importing the package does not load that module."""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable
from typing import Any


def alias_moved_module(old: str, new: str) -> None:
    """Make ``old`` (the module being imported) the module ``new``, warning the importer that the path goes in 0.2."""
    warnings.warn(
        f"{old} moved to {new}; import from there (or from drake_bench itself): the old path goes in drake_bench 0.2",
        DeprecationWarning,
        stacklevel=3,  # the importer's line, above the shim module and this function
    )
    sys.modules[old] = importlib.import_module(new)


def names_from(package: str, home: str) -> Callable[[str], Any]:
    """A module ``__getattr__`` (PEP 562) for ``package`` that resolves a missing name from ``home`` on first use."""

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            return getattr(importlib.import_module(home), name)
        except AttributeError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None

    return __getattr__
