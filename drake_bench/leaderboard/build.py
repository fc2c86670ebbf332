"""``drake-bench leaderboard build``: a board from scratch, or only what it is missing.

The plan lists every entry of the board with its state, read from disk: ``done`` (a complete result file with the
board's seeds), ``resume`` (checkpoints or a partial result: the evaluator's own resume continues it), ``missing``,
``stale`` (a result file the board cannot use as it is: made under other numerics or scoring rules, or priced by an
older compute probe, which ``drake-bench leaderboard reprobe`` carries over where the steps stay the same).
Building runs the entries that are not done, grouped as ``drake-bench run`` commands (one per results folder), each
printed before it runs so any of them can be run by hand; the evaluator's checkpoints make a killed build resume
where it stopped. Nothing here computes a number: the evaluator writes the result files, :mod:`.render` reads them.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from drake_bench.evaluation.compute import PROBE_VERSION, probe_is_current, recorded_probe_version
from drake_bench.errors import DrakeBenchError
from drake_bench.results.result_file import RunResult, read_result, result_path
from drake_bench.leaderboard.boards import DEFAULT_ROOT, BoardDefinition, BoardEntry


@dataclass
class PlannedEntry:
    """One board entry and where it stands."""

    entry: BoardEntry
    version: str
    out: Path
    result: Path
    state: str  # done | resume | missing | stale
    why: str = ""
    seeds_done: int = 0  # the board's seeds a result file already holds (a partial file keeps its finished seeds)
    seed_seconds: list[float] = field(default_factory=list)  # recorded wall seconds of each of those seeds


def _seed_seconds(result: RunResult, seeds: list[int]) -> list[float]:
    """The wall seconds a result file records for each of ``seeds`` it holds (``fl.extra.phase_seconds``, summed over
    phases; a seed resumed from a checkpoint counts the time before it too, where the checkpoint kept it)."""
    phases = result.fl.extra.get("phase_seconds") or {}  # evaluator.PHASE_SECONDS_KEY; `list` does not import the evaluator
    return [float(sum(phases[str(s)].values())) for s in seeds if str(s) in phases and phases[str(s)]]


def entry_seconds_left(board: BoardDefinition, planned: list[PlannedEntry]) -> list[float | None]:
    """Per entry, an estimate of the wall seconds its missing seeds take, one process each, from the seconds the
    board's finished seeds recorded: the entry's own mean where it has finished seeds, else the board's mean over
    every finished seed. None before any seed of the board has recorded its time. Read it as the machine that made
    the files ran."""
    recorded = [t for p in planned for t in p.seed_seconds]
    if not recorded:
        return [None] * len(planned)
    board_mean = sum(recorded) / len(recorded)
    return [(len(board.seeds) - p.seeds_done) * (sum(p.seed_seconds) / len(p.seed_seconds) if p.seed_seconds
                                                 else board_mean) for p in planned]


def seconds_left(board: BoardDefinition, planned: list[PlannedEntry]) -> float | None:
    """The board's estimate (:func:`entry_seconds_left`, summed); None before any seed has recorded its time."""
    left = entry_seconds_left(board, planned)
    return None if None in left else sum(left)  # type: ignore[arg-type]  # all None or all numbers


def method_version(name: str) -> str:
    """The installed method's version (boards key on name + version)."""
    from drake_bench.plugins.registry import method_class

    return method_class(name).meta.version


def needs_reprobe(board: BoardDefinition, result: RunResult) -> bool:
    """A compute-matched board's result file priced by an older compute probe than the evaluator's."""
    version = recorded_probe_version(result.fl.extra.get("compute"))
    return board.compute_matched and version is not None and not probe_is_current(result)


def plan(board: BoardDefinition, root: str | Path = DEFAULT_ROOT) -> list[PlannedEntry]:
    """Every entry's state on disk, in the board's order."""
    out: list[PlannedEntry] = []
    for entry in board.entries:
        version = method_version(entry.method)
        folder = board.entry_out(entry, root)
        path = result_path(folder, board.benchmark_name, board.scenario_tag, entry.method, version)
        ckpt = folder / "checkpoints" / board.benchmark_name / board.scenario_tag / entry.method
        state, why, seeds_done, seconds = "missing", "", 0, []
        if path.is_file():
            try:
                res = read_result(path)
            except DrakeBenchError as exc:
                raise DrakeBenchError(f"board {board.name}: {path} cannot be read ({exc}); move it away to rebuild it") from None
            numerics = res.numerics or "native"
            if numerics != board.numerics:  # no resume across numerics: the evaluator refuses to mix them
                state, why = "stale", (f"made under numerics {numerics!r}, the board's is {board.numerics!r}: "
                                       "move the file (and its checkpoints) away to rebuild it")
            elif res.evaluation.scorer_version != board.scorer_version:  # nor across scoring rules (the fingerprint)
                state, why = "stale", (f"scored by rules {res.evaluation.scorer_version!r}, the board's are "
                                       f"{board.scorer_version!r}: move the file (and its checkpoints) away to "
                                       "rebuild it")
            elif needs_reprobe(board, res):
                state, why = "stale", ("priced by compute probe version "
                                       f"{recorded_probe_version(res.fl.extra.get('compute'))}, the evaluator's is "
                                       f"{PROBE_VERSION}: `drake-bench leaderboard reprobe {board.name}` keeps it if "
                                       "the current probe matches the same local steps, else move it away to rebuild")
            else:
                if res.status == "complete" and sorted(res.seeds) == board.seeds:
                    state = "done"
                else:
                    state, why = "resume", f"{res.status}, seeds {res.seeds}"
                held = sorted(set(res.seeds) & set(board.seeds))  # a partial file keeps its finished seeds
                seeds_done, seconds = len(held), _seed_seconds(res, held)
        elif ckpt.is_dir() and any(ckpt.iterdir()):
            state, why = "resume", "checkpoints in " + str(ckpt)
        out.append(PlannedEntry(entry, version, folder, path, state, why, seeds_done, seconds))
    return out


def board_command(board: BoardDefinition, entries: Sequence[BoardEntry], out: str | Path,
                  jobs: int | None = None) -> list[str]:
    """The ``drake-bench run`` command that runs ``entries`` on ``board``'s configuration, writing under ``out``.

    The one place a board's command is assembled, from every flag its rules check: ``build`` prints it before it
    runs that configuration, ``build --dry-run --methods X`` prints it for any method (a plugin not on the board
    too), and the web page shows it as a row's Reproduce command. A second assembly drifts: the page's own once
    dropped ``--compute-matched`` and so described a run the board refuses."""
    cmd = ["drake-bench", "run", "--benchmark", board.pinned_benchmark, "--scenario", board.scenario]
    if board.allocation:
        cmd += ["--allocation", board.allocation]
    cmd += ["--seeds", ",".join(map(str, board.seeds)), "--rounds", str(board.rounds), "--local-steps",
            str(board.local_steps), "--eval-every", str(board.eval_every_rounds)]
    if board.others_subsample is not None:
        cmd += ["--others-subsample", str(board.others_subsample)]
    if board.fast_adaptation:
        cmd += ["--adaptation-tasks", str(board.fast_adaptation_tasks or 0)]
    else:
        cmd += ["--no-fast-adaptation"]
    if board.compute_matched:
        cmd += ["--compute-matched"]
    cmd += ["--numerics", board.numerics, "--scorer-version", board.scorer_version]
    if board.data_dir:
        cmd += ["--data-dir", board.data_dir]
    cmd += ["--methods", ",".join(e.method for e in entries)]
    for e in entries:
        for k, v in sorted(e.settings.items()):
            cmd += ["--set", f"{e.method}.{k}={v if isinstance(v, str) else _json(v)}"]
    if jobs:
        cmd += ["--jobs", str(jobs)]
    return cmd + ["--out", str(out)]


def commands(board: BoardDefinition, entries: list[PlannedEntry], jobs: int | None = None) -> list[list[str]]:
    """:func:`board_command` for ``entries``: one per results folder (an ablation's settings get their own)."""
    by_out: dict[Path, list[PlannedEntry]] = {}
    for p in entries:
        by_out.setdefault(p.out, []).append(p)
    return [board_command(board, [p.entry for p in group], out, jobs) for out, group in by_out.items()]


def _json(v: Any) -> str:
    import json

    return json.dumps(v)


def reproduce_command(board: BoardDefinition, entry: BoardEntry, root: str | Path = DEFAULT_ROOT) -> str:
    """The one command that makes ``entry`` on ``board`` (a board entry, or any method with its settings), into
    the folder ``build`` would write it to: what ``build --dry-run --methods`` and the web page show."""
    return shlex.join(board_command(board, [entry], board.entry_out(entry, root)))


def run_configs(board: BoardDefinition, entries: list[PlannedEntry]) -> list[Any]:
    """The RunConfigs the commands stand for (what ``drake-bench run`` would build from them)."""
    return [board_run_config(board, p.entry.method, p.entry.settings, p.out) for p in entries]


def board_run_config(board: BoardDefinition, method: str, settings: dict[str, Any], out: str | Path) -> Any:
    """The RunConfig of ``method`` with ``settings`` under ``board``'s run settings, writing under ``out`` (what
    ``build`` runs for an entry, and what ``drake-bench tune --board`` scores on validation)."""
    from drake_bench.evaluator.run_config import RunConfig

    return RunConfig(
        benchmark=board.pinned_benchmark, scenario=board.scenario, method=method, seeds=list(board.seeds),
        allocation=board.allocation, out=str(out), rounds=board.rounds, local_steps=board.local_steps,
        eval_every_rounds=board.eval_every_rounds, others_subsample=board.others_subsample,
        compute_matched=board.compute_matched, fast_adaptation=board.fast_adaptation,
        fast_adaptation_tasks=board.adaptation_task_list if board.fast_adaptation else None,
        resume=True, data_dir=board.data_dir, method_config=dict(settings), isolation="process",
        numerics=board.numerics, scorer_version=board.scorer_version,
    )


def off_board(board: BoardDefinition, methods: Sequence[str]) -> list[str]:
    """The ``methods`` that are no entry of ``board`` (a plugin's, or a typo): ``build --dry-run --methods`` prints
    the board's command for them, since that is how a method's author runs the board's settings for a submission;
    ``build`` itself runs only the entries the board's definition lists."""
    entries = {e.method for e in board.entries}
    return [m for m in methods if m not in entries]


def require_entries(board: BoardDefinition, methods: Sequence[str], root: str | Path = DEFAULT_ROOT) -> None:
    """Refuse, before anything runs, ``methods`` that are no entry of ``board``, with the board's command for them:
    filtering them out silently would run nothing and say "nothing to run", as if they were done."""
    other = off_board(board, methods)
    if other:
        cmd = shlex.join(board_command(board, [BoardEntry(method=m) for m in other],
                                       board.entry_out(BoardEntry(method=other[0]), root)))
        raise DrakeBenchError(
            f"board {board.name} has no entry {', '.join(other)} (its entries: "
            f"{', '.join(sorted({e.method for e in board.entries}))}); build runs only those. To run "
            f"{'it' if len(other) == 1 else 'them'} on the board's settings, e.g. for a submission "
            f"(docs/leaderboard.md): {cmd}")


def build(board: BoardDefinition, root: str | Path = DEFAULT_ROOT, *, jobs: int | None = None,
          methods: list[str] | None = None, console: Any = None) -> list[PlannedEntry]:
    """Run every entry that is not done (``methods``: only these, each an entry of the board), then return the plan
    as it stands after."""
    from drake_bench.runner import run_methods

    require_entries(board, methods or [], root)
    planned = [p for p in plan(board, root) if not methods or p.entry.method in methods]
    stale = [p for p in planned if p.state == "stale"]
    if stale:  # rebuilding them means replacing committed results: the user decides, by moving them
        raise DrakeBenchError(f"board {board.name}: " + "; ".join(f"{p.result}: {p.why}" for p in stale))
    todo = [p for p in planned if p.state != "done"]
    by_out: dict[Path, list[PlannedEntry]] = {}
    for p in todo:
        by_out.setdefault(p.out, []).append(p)
    for group in by_out.values():
        if console is not None:
            console.print(f"$ {shlex.join(commands(board, group, jobs)[0])}", highlight=False, soft_wrap=True)
        run_methods(run_configs(board, group), jobs=jobs, console=console)
    return plan(board, root)
