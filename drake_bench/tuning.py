"""Selecting a method's hyperparameters on the validation split, and the record that says so.

A board compares test scores, so nothing on it may have been chosen by looking at test items. Every benchmark version
that holds a validation split (``subsampling.validation_ratio`` in its manifest: a share of each task's training draw,
in no training stream) can score a run on it instead: :func:`tune` runs the standard evaluator once per point of a
grid with ``scored_split="validation"``, each point a full run under the board's settings (resumable from its own
checkpoints), and writes a :class:`TuningRecord` after every point: the grid, every point's score per seed, the
criterion and the point it selects. ``drake-bench run --tuning-record FILE`` (or :func:`apply_record`) then runs the
selected values on the test split and records where they came from (``RunConfig.selection``); the boards' ``selection``
rule refuses a run scored on validation and a selection made on test.

    drake-bench tune sft --grid learning_rate=1e-3,3e-3,1e-2 --seeds 0,1,2 --out tuning/sft
    drake-bench run --methods sft --tuning-record tuning/sft/tuning.json

The criterion is one of the summary's headline metrics (default Self A_last, the boards' first column), averaged
over the record's seeds; ties go to the earlier point in grid order, so the selection is deterministic.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from drake_bench.errors import DrakeBenchError
from drake_bench.evaluator.run_config import RunConfig, Selection

RECORD_FILE = "tuning.json"
RECORD_FORMAT = "drake-bench tuning record 1"
CRITERIA = ("self_last", "self_auc", "others_last", "others_auc", "unseen_last", "unseen_auc", "worst_client_self")


class TuningError(DrakeBenchError):
    """A grid, criterion or tuning record that cannot be used, named with what is wrong."""


class TuningPoint(BaseModel):
    """One grid point's validation scores."""

    model_config = ConfigDict(extra="forbid")

    settings: dict[str, Any] = Field(description="The grid's values at this point (merged into method_config).")
    score: float | None = Field(description="The criterion's mean over seeds, on the validation split ([0, 1]).")
    per_seed: list[float | None] = Field(description="The criterion per seed, in the record's seed order.")
    result: str = Field(description="The point's result file, relative to the record's folder.")


class TuningRecord(BaseModel):
    """What a tuning run tried, how each point scored on validation, and what it selected."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["drake-bench tuning record 1"] = RECORD_FORMAT
    method: str
    method_version: str
    benchmark: str
    benchmark_version: str
    manifest_hash: str | None
    scenario: str
    seeds: list[int]
    split: Literal["validation"] = Field(default="validation", description="The split every point was scored on.")
    criterion: str = Field(description="The summary metric maximised (drake_bench.tuning.CRITERIA).")
    grid: dict[str, list[Any]] = Field(description="Each tuned key's candidate values, in the order they were tried.")
    base_config: dict[str, Any] = Field(
        description="The RunConfig every point shares (its method_config before the grid's values)."
    )
    points: list[TuningPoint] = Field(default_factory=list, description="The points run so far, in grid order.")
    selected: dict[str, Any] | None = Field(
        default=None, description="The best point's settings once every point has run."
    )
    package_version: str


def parse_grid(items: Sequence[str]) -> dict[str, list[Any]]:
    """``["learning_rate=1e-3,3e-3", "rank=4,8"]`` as ``{"learning_rate": [0.001, 0.003], "rank": [4, 8]}``.

    Each value is read as JSON where it parses (numbers, ``true``, ``null``), else kept as a string; a key given
    twice, an empty key or a key without values is refused by name."""
    grid: dict[str, list[Any]] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key or not raw.strip():
            raise TuningError(f"--grid expects KEY=V1,V2,..., got {item!r}")
        if key in grid:
            raise TuningError(f"--grid names {key!r} twice")
        values = []
        for text in raw.split(","):
            try:
                values.append(json.loads(text))
            except ValueError:
                values.append(text.strip())
        if len({json.dumps(v, sort_keys=True) for v in values}) != len(values):
            raise TuningError(f"--grid {key}: a value is listed twice ({raw!r})")
        grid[key] = values
    if not grid:
        raise TuningError("a tuning grid needs at least one KEY=V1,V2,... (--grid)")
    return grid


def grid_points(grid: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Every combination of the grid's values, the first key varying slowest."""
    keys = list(grid)
    return [dict(zip(keys, values)) for values in itertools.product(*(grid[k] for k in keys))]


def _point_folder(index: int) -> str:
    return f"point-{index:03d}"


def _score(result: Any, criterion: str) -> tuple[float | None, list[float | None]]:
    per_seed = [getattr(s, criterion) for s in result.summary.per_seed]
    return getattr(result.summary.aggregate, criterion).mean, per_seed


def select(points: Sequence[TuningPoint]) -> dict[str, Any] | None:
    """The settings of the best-scoring point (the earliest among equals); None when no point has a score."""
    scored = [p for p in points if p.score is not None]
    if not scored:
        return None
    best = max(scored, key=lambda p: p.score)  # max keeps the first of equal scores: grid order decides ties
    return dict(best.settings)


def _write(record: TuningRecord, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(record.model_dump(mode="json"), indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


def tune(
    config: RunConfig,
    grid: dict[str, list[Any]],
    criterion: str = "self_last",
    out: str | Path | None = None,
    run: Callable[[RunConfig], Any] | None = None,
) -> TuningRecord:
    """Run ``config`` at every point of ``grid`` scored on the validation split, and write ``<out>/tuning.json``.

    ``config`` is the run to tune (its ``method_config`` holds the fixed settings; a key may not be both fixed and
    tuned); ``out`` defaults to ``config.out``. Each point runs in ``<out>/point-NNN`` and resumes from there, so an
    interrupted tuning run picks up where it stopped, and the record on disk always holds the points finished so far.
    A point the record on disk already holds (an earlier call with the same settings) is not run again.
    ``run`` is the function that runs one config (default :func:`drake_bench.evaluator.standard.run`)."""
    from drake_bench._version import __version__
    from drake_bench.benchmarks.manifest import load_benchmark
    from drake_bench.plugins.registry import create_method, method_class
    from drake_bench.streams.scenarios import parse_scenario
    from drake_bench.streams.stream import check_scored_split

    if criterion not in CRITERIA:
        raise TuningError(f"criterion {criterion!r} is not one of {', '.join(CRITERIA)}")
    both = sorted(set(grid) & set(config.method_config))
    if both:
        raise TuningError(f"{', '.join(both)}: given both as a fixed setting and in the grid")
    if config.selection is not None:
        raise TuningError("a tuning run selects its own values; drop the tuning record it was given")
    spec = load_benchmark(config.benchmark)
    check_scored_split(spec, "validation")
    points = grid_points(grid)
    for point in points:  # every point's config validates before the first runs
        create_method(config.method, {**config.method_config, **point})
    folder = Path(out if out is not None else config.out)
    scenario = parse_scenario(config.scenario if config.scenario is not None else spec.scenarios.default).tag()
    base = config.model_dump(mode="json", exclude={"out", "scored_split", "resume"})
    record = TuningRecord(
        method=config.method,
        method_version=str(method_class(config.method).meta.version),
        benchmark=spec.name,
        benchmark_version=spec.version,
        manifest_hash=spec.content_hash,
        scenario=scenario,
        seeds=list(config.seeds),
        criterion=criterion,
        grid=grid,
        base_config=base,
        package_version=__version__,
    )
    done = _finished_points(record, folder)
    record.points = done
    if run is None:
        from drake_bench.evaluator.standard import run as run_config

        run = run_config
    for index, point in enumerate(points):
        if index < len(done):
            continue
        point_out = folder / _point_folder(index)
        cfg = config.model_copy(
            update={
                "method_config": {**config.method_config, **point},
                "scored_split": "validation",
                "out": str(point_out),
            }
        )
        print(f"tuning {config.method}: point {index + 1} of {len(points)} {point} (validation split)", flush=True)
        result = run(cfg)
        score, per_seed = _score(result, criterion)
        rel = result.path(point_out).relative_to(folder).as_posix()
        record.points.append(TuningPoint(settings=point, score=score, per_seed=per_seed, result=rel))
        _write(record, folder / RECORD_FILE)
    record.selected = select(record.points)
    _write(record, folder / RECORD_FILE)
    return record


def _finished_points(record: TuningRecord, folder: Path) -> list[TuningPoint]:
    """The points an earlier run of this same tuning (same method, settings, grid, criterion and seeds) finished in
    ``folder``, whose result files are still there; a record of another tuning run there is refused, not replaced."""
    path = folder / RECORD_FILE
    if not path.is_file():
        return []
    earlier, _ = read_record(path)
    same = (
        "method",
        "benchmark",
        "benchmark_version",
        "manifest_hash",
        "scenario",
        "seeds",
        "criterion",
        "grid",
        "base_config",
    )
    differs = [k for k in same if getattr(earlier, k) != getattr(record, k)]
    if differs:
        raise TuningError(f"{path} records another tuning run (its {', '.join(differs)} differ); give another --out")
    return [p for p in earlier.points if (folder / p.result).is_file()]


def read_record(path: str | Path) -> tuple[TuningRecord, str]:
    """A tuning record and its file's sha256, or one :class:`TuningError` naming the file and what is wrong."""
    from drake_bench.core.json_files import SMALL_FILE_MAX_BYTES, read_json

    path = Path(path)
    data = read_json(path, what="tuning record", max_bytes=SMALL_FILE_MAX_BYTES)
    try:
        record = TuningRecord.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "<root>"
        raise TuningError(f"{path}: not a tuning record ({where}: {first['msg']})") from None
    return record, hashlib.sha256(path.read_bytes()).hexdigest()


def apply_record(config: RunConfig, path: str | Path) -> RunConfig:
    """``config`` with the record's selected values in its ``method_config`` and its ``selection`` stating where they
    come from. Refuses a record of another method or benchmark, one that selected nothing, and a setting given both
    by hand and by the record with another value."""
    from drake_bench.benchmarks.manifest import load_benchmark

    record, sha = read_record(path)
    spec = load_benchmark(config.benchmark)
    if record.method != config.method:
        raise TuningError(f"{path}: a tuning record of method {record.method!r}, not {config.method!r}")
    if record.benchmark != spec.name:
        raise TuningError(f"{path}: tuned on {record.benchmark!r}, not {spec.name!r}")
    if record.selected is None:
        raise TuningError(
            f"{path}: the record selected nothing (it holds {len(record.points)} of "
            f"{len(grid_points(record.grid))} points, or none scored); finish it with drake-bench tune"
        )
    clash = {
        k: (config.method_config[k], v)
        for k, v in record.selected.items()
        if k in config.method_config and config.method_config[k] != v
    }
    if clash:
        raise TuningError(
            f"{path}: selected {', '.join(f'{k}={v[1]!r}' for k, v in clash.items())}, but the run sets "
            f"{', '.join(f'{k}={v[0]!r}' for k, v in clash.items())}"
        )
    selection = Selection(
        split=record.split, record_sha256=sha, criterion=record.criterion, settings=dict(record.selected)
    )
    return config.model_copy(
        update={"method_config": {**config.method_config, **record.selected}, "selection": selection}
    )
