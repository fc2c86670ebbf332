"""drake_bench.core.progress: the time-left estimate a long build prints beside each round."""

from __future__ import annotations

import pytest

from drake_bench.core.progress import TimeLeft, format_duration


def test_time_left_is_measured_from_the_rounds_run_here() -> None:
    left = TimeLeft()
    # seeds 0-1 came from the result file: the first report is round 9 of 12, nothing has run here yet
    assert left.estimate("takfl", 8, 12, now=100.0) is None
    assert left.estimate("takfl", 8, 12, now=130.0) is None  # the same round again: still nothing measured
    # one round took 60 s here, so the three left take 180 s (the eight kept rounds count for nothing)
    assert left.estimate("takfl", 9, 12, now=160.0) == pytest.approx(180.0)
    # the rate is the average since the first report: 2 rounds in 300 s -> 150 s for each of the 2 left
    assert left.estimate("takfl", 10, 12, now=400.0) == pytest.approx(300.0)
    assert left.estimate("takfl", 12, 12, now=500.0) == 0.0
    # another run has a clock of its own
    assert left.estimate("ties", 0, 24, now=500.0) is None
    assert left.estimate("ties", 1, 24, now=520.0) == pytest.approx(460.0)


@pytest.mark.parametrize(
    "seconds, text",
    [
        (0.2, "about 1 s"),
        (42, "about 42 s"),
        (89, "about 89 s"),
        (90, "about 2 min"),
        (12 * 60 + 10, "about 12 min"),
        (89 * 60, "about 89 min"),
        (90 * 60, "about 1 h 30 min"),
        (3 * 3600 + 5 * 60, "about 3 h 05 min"),
    ],
)
def test_durations_are_written_at_the_precision_of_an_estimate(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_a_build_log_says_how_long_each_run_has_left(toy, tmp_path) -> None:
    """Not on a terminal (a log, CI, nohup), each round's plain line carries the estimate once a round has run."""
    import io

    from minimal_method import Counter
    from rich.console import Console

    from drake_bench import RunConfig, run_methods
    from drake_bench.plugins.registry import register_method

    register_method(Counter)
    manifest, root = toy
    log = io.StringIO()
    run_methods(
        [
            RunConfig(
                benchmark=manifest,
                method="counter",
                data_dir=root,
                out=str(tmp_path),
                rounds=4,
                fast_adaptation=False,
                seeds=[0],
            )
        ],
        console=Console(file=log, force_terminal=False, width=200),
    )
    rounds = [line for line in log.getvalue().splitlines() if "counter: seed 0 round" in line]
    assert len(rounds) == 4 and "left)" not in rounds[0], rounds  # the first round has nothing to measure
    assert all(line.endswith(" left)") and "(about " in line for line in rounds[1:]), rounds
