"""Progress bars for long work (builds, runs), silent in CI logs and when disabled."""

from __future__ import annotations

import os
import sys
from collections.abc import Hashable, Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


def progress(items: Iterable[T], description: str = "", total: int | None = None, enabled: bool = True) -> Iterator[T]:
    """Iterate with a rich progress bar when attached to a terminal, plainly otherwise."""
    if not enabled or os.environ.get("DRAKE_BENCH_NO_PROGRESS") or not sys.stderr.isatty():
        yield from items
        return
    from rich.progress import track

    yield from track(items, description=description, total=total, transient=True)


class TimeLeft:
    """How long each of several runs has left, from the rounds this process has seen it finish.

    A run reports ``done`` of ``total`` rounds as each round starts. Rounds that finished before this process first
    heard of the run (seeds taken from a result file, a resumed checkpoint) took no time here, so the rate is
    measured from the first report on: the seconds since then over the rounds done since then. That average
    includes the evaluations between rounds, which are most of a round's time on the text boards.
    """

    def __init__(self) -> None:
        self._first: dict[Hashable, tuple[int, float]] = {}

    def estimate(self, run: Hashable, done: int, total: int, now: float) -> float | None:
        """Seconds left for ``run``, or None until it has finished a round in this process."""
        first_done, first_time = self._first.setdefault(run, (done, now))
        if done <= first_done:
            return None
        return (now - first_time) / (done - first_done) * (total - done)


def format_duration(seconds: float) -> str:
    """``about 40 s``, ``about 12 min``, ``about 3 h 05 min``: the precision an estimate has."""
    if seconds < 90:
        return f"about {max(1, round(seconds))} s"
    minutes = round(seconds / 60)
    if minutes < 90:
        return f"about {minutes} min"
    return f"about {minutes // 60} h {minutes % 60:02d} min"


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
