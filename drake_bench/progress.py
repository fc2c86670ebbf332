"""Progress bars for long work (builds, runs), silent in CI logs and when disabled."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


def progress(items: Iterable[T], description: str = "", total: int | None = None, enabled: bool = True) -> Iterator[T]:
    """Iterate with a rich progress bar when attached to a terminal, plainly otherwise."""
    if not enabled or os.environ.get("DRAKE_BENCH_NO_PROGRESS") or not sys.stderr.isatty():
        yield from items
        return
    from rich.progress import track

    yield from track(items, description=description, total=total, transient=True)


def quiet_libraries() -> None:
    """Silence per-shard / per-weight progress bars and deprecation chatter of the libraries we drive.

    drake_bench shows its own progress; transformers' "Loading weights" bars and warnings repeated
    for every client swap would bury it.
    """
    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")
    try:
        import transformers

        transformers.utils.logging.set_verbosity_error()
        transformers.utils.logging.disable_progress_bar()
    except ImportError:  # pragma: no cover
        pass
    try:
        import datasets

        datasets.disable_progress_bars()
    except ImportError:  # pragma: no cover
        pass
