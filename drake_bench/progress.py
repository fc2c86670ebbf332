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
