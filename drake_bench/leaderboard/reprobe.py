"""``drake-bench leaderboard reprobe``: carry a board's entries over to a new compute probe, rerunning only those
whose matched steps change.

On a compute-matched board every entry ran the local steps that the evaluator's compute probe
(:mod:`drake_bench.evaluation.compute`) matched to SFT's training FLOPs. When the probe's procedure changes
(``PROBE_VERSION``), an entry made under the older one is still the run the board asks for exactly when the current
probe matches it to the same steps: same steps, seeds, data and weights make the same run, so the same numbers.
Reprobing measures the current probe for each such entry (two client rounds of one client per model, for the
method and for SFT, cached with the board's checkpoints, where a rebuild reads it back) and then:

* **same matched steps**: writes the current probe into the result file's ``fl.extra.compute`` and adds a note
  saying so; nothing else in the file changes;
* **other steps**: leaves the file as it is and says so. The entry ran a different amount of compute than the board
  now gives it; move its result file and checkpoints away and build the board to rerun it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from drake_bench.evaluation.compute import PROBE_VERSION, recorded_probe_version
from drake_bench.results.result_file import read_result, write_result
from drake_bench.leaderboard.boards import DEFAULT_ROOT, BoardDefinition
from drake_bench.leaderboard.build import PlannedEntry, needs_reprobe, plan, run_configs


@dataclass
class Reprobed:
    """What reprobing did to one entry."""

    entry: PlannedEntry
    old_version: int
    recorded_steps: int
    matched_steps: int
    measured_relative_compute: float

    @property
    def carried_over(self) -> bool:
        return self.recorded_steps == self.matched_steps


def reprobe(board: BoardDefinition, root: str | Path = DEFAULT_ROOT, *, methods: list[str] | None = None,
            console: Any = None) -> list[Reprobed]:
    """Reprobe every entry of ``board`` (``methods``: only these) priced by an older compute probe; see the module
    docstring. Returns what happened to each, in the board's order."""
    from drake_bench.evaluator.standard import Evaluator

    out: list[Reprobed] = []
    for p in plan(board, root):
        if (methods and p.entry.method not in methods) or not p.result.is_file():
            continue
        result = read_result(p.result)
        if not needs_reprobe(board, result):
            continue
        old_version = recorded_probe_version(result.fl.extra.get("compute"))
        assert old_version is not None  # needs_reprobe: the run was probed
        config = run_configs(board, [p])[0]
        if console is not None:
            console.print(f"{p.entry.key}: probing (compute probe {old_version} -> {PROBE_VERSION})", highlight=False)
        ev = Evaluator(config)
        method = ev.start_method(config.seeds[0])
        try:
            ev.describe_models(method)
            probe = ev.measure_compute(method)
        finally:
            method.close()
        done = Reprobed(p, old_version, result.fl.local_steps, probe.matched_local_steps,
                        probe.measured_relative_compute)
        if done.carried_over:
            result.fl.extra["compute"] = probe.summary()
            result.notes.append(f"compute probe carried over from version {done.old_version} to {PROBE_VERSION} by "
                                f"`drake-bench leaderboard reprobe`: it matches the same {done.matched_steps} local "
                                "steps, so the run is the one the current probe prescribes")
            write_result(result, p.result)
        out.append(done)
    return out
