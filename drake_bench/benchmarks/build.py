"""Build a benchmark from its sources into the shared on-disk layout (see :mod:`drake_bench.benchmarks.store`).

Real and embedded benchmarks take the same path: the manifest names a source loader
per task, the loader yields candidate items, this module applies the seeded
subsampling rule (10k/1k when large, else 8:2) and writes Parquet shards.
Builds are resumable (finished tasks are skipped) and a failing task does not
lose the others: they stay on disk and the error lists every failed task. A finished
task records its recipe (:func:`task_recipe`); a build over another version's build
keeps the tasks whose recipe did not change and rebuilds the others.
A task that yields no items, or far fewer than its manifest expects
(``source.rule["expected_items"]``), fails with the files it was read from
(:mod:`drake_bench.benchmarks.sources`); a loader whose source format could not be confirmed
against the publisher's files makes the build warn (``UnconfirmedFormatWarning``).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from drake_bench.benchmarks.card import write_card
from drake_bench.benchmarks.manifest import load_benchmark, manifest_dict
from drake_bench.benchmarks.sample import Sample
from drake_bench.benchmarks.spec import BenchmarkSpec, SubsamplingRule, TaskSpec
from drake_bench.benchmarks.store import BUILD_INFO, SPLITS, built_root, finalize_build, shard_path, write_split
from drake_bench.core.progress import progress
from drake_bench.errors import DrakeBenchError, SourceError

DONE_MARK = ".done"


def split_sizes(n: int, rule: SubsamplingRule) -> tuple[int, int]:
    """(train, test) sizes for a pool of ``n`` items: 10k/1k when large, else 8:2 (docs/design-notes.md#large-threshold)."""
    if n >= rule.large_threshold:
        return rule.train, rule.test
    n_train = int(round(n * rule.train_ratio))
    return n_train, n - n_train


def _seeded_order(pool: Sequence[Sample], rule: SubsamplingRule, task_id: str) -> list[Sample]:
    """The pool in the task's seeded order. Pools are first sorted by id so that loader order never matters."""
    items = sorted(pool, key=lambda s: s.id)
    ids = [s.id for s in items]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})[:5]
        raise SourceError(f"task {task_id!r}: duplicate item ids from the source, e.g. {dup}")
    seed = np.frombuffer(task_id.encode().ljust(8, b"\0")[:8], dtype=np.uint64)[0]
    perm = np.random.default_rng([rule.seed, int(seed) % (2**63)]).permutation(len(items))
    return [items[i] for i in perm]


def validation_size(n_train: int, rule: SubsamplingRule) -> int:
    """Items of a training draw of ``n_train`` held out as validation: the rule's share, rounded, at least one item
    wherever the rule asks for a validation split (a tuning run must have something to score)."""
    if rule.validation_ratio <= 0 or n_train < 2:
        return 0
    return min(n_train - 1, max(1, int(round(n_train * rule.validation_ratio))))


def carve_validation(drawn: Sequence[Sample], rule: SubsamplingRule) -> tuple[list[Sample], list[Sample]]:
    """(train, validation) of a seeded training draw: the validation items are its last :func:`validation_size`."""
    n_train = len(drawn) - validation_size(len(drawn), rule)
    return list(drawn[:n_train]), list(drawn[n_train:])


def subsample(
    pool: Sequence[Sample], rule: SubsamplingRule, task_id: str
) -> tuple[list[Sample], list[Sample], list[Sample]]:
    """Disjoint seeded (train, validation, test) draws. The test draw does not depend on the validation share: the
    validation items are the training draw's last ones, so adding a validation split leaves every test item in
    place and only shortens training."""
    items = _seeded_order(pool, rule, task_id)
    n_train, n_test = split_sizes(len(items), rule)
    return (*carve_validation(items[:n_train], rule), items[n_train : n_train + n_test])


def train_only_size(n: int, rule: SubsamplingRule) -> int:
    """Training size of a task whose test split comes from an external evaluation set: the whole pool, or the large
    rule's training draw (10k) when the pool is large. Nothing is held out, since nothing of the pool is tested."""
    return rule.train if n >= rule.large_threshold else n


def _read_pool(task: TaskSpec, source_dir: Path | None, check_expected: bool, what: str = "source") -> list[Sample]:
    """Every item the loader of ``task.source`` yields, checked: a loader failure becomes a SourceError naming the
    task (a loader bug or an unreadable file must not abort the other tasks), the pool's size against the manifest's
    expectation, every item of this task. ``what`` names the source in errors (the test source of a task reads
    through here too, as :meth:`TaskSpec.as_test_source`)."""
    from drake_bench.benchmarks.sources import check_pool_size
    from drake_bench.loaders import get_loader
    from drake_bench.loaders._common import recording

    loader = get_loader(task.source.loader)
    try:
        with recording() as files_read:
            pool = list(loader.load(task, source_dir))
    except DrakeBenchError:
        raise
    except Exception as exc:
        where = f" under {source_dir}" if source_dir else ""
        raise SourceError(
            f"task {task.id!r}: {what} loader {loader.name!r} failed reading its source{where}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    check_pool_size(task, loader, len(pool), files_read, source_dir, check_expected=check_expected)
    for s in pool:
        if s.task_id != task.id:
            raise SourceError(f"task {task.id!r}: loader {loader.name!r} yielded an item of task {s.task_id!r}")
    return pool


def _external_test(task: TaskSpec, source_dir: Path | None, check_expected: bool) -> list[Sample]:
    """The test split of a task with a ``test_source``: every item its loader yields (after the rule's own
    ``max_items`` cap, if any), sorted by id, each tagged with the scorer the manifest names (``meta["scorer"]``) so
    the built shard says how it is scored wherever it travels (the Hub, a user's stream)."""
    view = task.as_test_source()
    scorer = view.source.scorer  # type: ignore[attr-defined]
    items = _read_pool(view, source_dir, check_expected, what="test source")
    ids = [s.id for s in items]
    if len(set(ids)) != len(ids):
        raise SourceError(f"task {task.id!r}: duplicate item ids from its test source {view.source.dataset!r}")
    if scorer != "item":
        items = [s.model_copy(update={"meta": {**s.meta, "scorer": scorer}}) for s in items]
    return sorted(items, key=lambda s: s.id)


def task_recipe(spec: BenchmarkSpec, task: TaskSpec, extra: dict | None = None) -> str:
    """What a task's shards are a function of, as a digest: its manifest entry (source, rule, ids), the
    benchmark's subsampling and storage rules, and the builder's own inputs in ``extra`` (the synth scale).

    Two manifests (two versions of a benchmark) that define a task the same way build it to the same shards, so a
    rebuild over another version's build reuses it; the versioning contract that makes this safe (an unchanged
    definition builds byte for byte) is what tests/test_synth_versions.py checks against the boards' data hashes.
    """
    doc = [
        task.model_dump(mode="json"),
        spec.subsampling.model_dump(mode="json"),
        spec.storage.model_dump(mode="json"),
        extra or {},
    ]
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def _task_done(root: Path, task_id: str, recipe: str | None = None) -> bool:
    """The task's shards are complete and, when its mark records a recipe, built from ``recipe``. A mark without
    one (a build from before recipes were recorded) counts as done, as it always did: a real source may no longer
    be at hand to rebuild it."""
    mark = root / "data" / task_id / DONE_MARK
    if not (mark.is_file() and all(shard_path(root, task_id, s).is_file() for s in ("train", "test"))):
        return False
    done = read_task_mark(mark)
    if done is None:
        return False
    if done.get("validation") and not shard_path(root, task_id, "validation").is_file():
        return False
    if recipe is None:
        return True
    stored = done.get("recipe")
    return stored is None or stored == recipe


TASK_MARK_MAX_BYTES = 1 << 20
"""The most bytes of a task's done mark (1 MiB; one holds a few split sizes and a recipe hash, under 200 bytes)."""


def read_task_mark(mark: Path) -> dict[str, Any] | None:
    """The record in a task's done mark, or None where it holds none (missing, not UTF-8 or JSON, nested or sized past
    a mark, not a JSON object): the data folder may be shared or copied, and a task without a readable mark is simply
    built again."""
    from drake_bench.core.json_files import read_json
    from drake_bench.errors import JSONFileError

    try:
        done = read_json(mark, what="task done mark", max_bytes=TASK_MARK_MAX_BYTES)
    except JSONFileError:
        return None
    return done if isinstance(done, dict) else None


def _clear_task(root: Path, task_id: str) -> None:
    """Remove a task's marker and shards, so a failed task never leaves half its splits in build_info.json."""
    folder = root / "data" / task_id
    (folder / DONE_MARK).unlink(missing_ok=True)
    for split in SPLITS:
        shard_path(root, task_id, split).unlink(missing_ok=True)
    if folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()


def _drop_foreign_tasks(root: Path, spec: BenchmarkSpec) -> None:
    """Remove task folders the manifest does not list: a rebuild over another version's build (a task renamed or
    dropped) must not leave its shards behind, where build_info.json would hash them into the data hash."""
    known = {t.id for t in spec.tasks}
    data = root / "data"
    if data.is_dir():
        for folder in data.iterdir():
            if folder.is_dir() and folder.name not in known:
                shutil.rmtree(folder)


def manifest_hash(spec: BenchmarkSpec) -> str:
    """The manifest hash a build cites: the stamped one, else computed (specs built in code have none)."""
    return spec.content_hash or manifest_dict(spec)["content_hash"]


def build_task(
    spec: BenchmarkSpec,
    task: TaskSpec,
    source_dir: Path | None,
    root: Path,
    check_expected: bool = True,
    recipe: str | None = None,
) -> dict[str, int]:
    (root / "data" / task.id / DONE_MARK).unlink(missing_ok=True)
    pool = _read_pool(task, source_dir, check_expected)
    pool_note: dict[str, int] = {}
    validation: list[Sample] = []
    if task.test_source is None:
        train, validation, test = subsample(pool, spec.subsampling, task.id)
    else:
        test = _external_test(task, source_dir, check_expected)
        # Items are keyed by their text, so a training item with a test item's id asks the same question: it is
        # dropped from training (decontamination) rather than let the model see a test question with its answer.
        tested = {s.id for s in test}
        kept = [s for s in pool if s.id not in tested]
        drawn = _seeded_order(kept, spec.subsampling, task.id)[: train_only_size(len(kept), spec.subsampling)]
        train, validation = carve_validation(drawn, spec.subsampling)
        pool_note = {"decontaminated": len(pool) - len(kept)}
    shard_path(root, task.id, "validation").unlink(missing_ok=True)
    write_split(root, task.id, "train", train, spec.storage)
    if validation:
        write_split(root, task.id, "validation", validation, spec.storage)
    write_split(root, task.id, "test", test, spec.storage)
    sizes = {
        "pool": len(pool),
        "train": len(train),
        **({"validation": len(validation)} if validation else {}),
        "test": len(test),
        **pool_note,
    }
    (root / "data" / task.id / DONE_MARK).write_text(json.dumps({**sizes, "recipe": recipe or task_recipe(spec, task)}))
    return sizes


def build_benchmark(
    benchmark: str | BenchmarkSpec,
    source_dir: str | Path | None = None,
    out: str | Path | None = None,
    tasks: Sequence[str] | None = None,
    resume: bool = True,
    show_progress: bool = True,
    check_expected: bool = True,
    recipe_extra: dict | None = None,
) -> Path:
    """Build every task of ``benchmark`` (or the given ``tasks``) under ``out``; returns the built root.

    ``check_expected=False`` accepts pools far below the manifest's ``expected_items`` (a sample of the
    sources, e.g. test fixtures); a task with no items is an error either way. ``recipe_extra``: inputs of the
    build beyond the manifest (the synth scale), part of each task's recipe.
    """
    spec = load_benchmark(benchmark)
    root = Path(out) if out is not None else built_root(spec.name)
    with build_lock(root):
        return _build_locked(spec, root, source_dir, tasks, resume, show_progress, check_expected, recipe_extra)


def build_lock(root: Path) -> Any:
    """The lock a build of ``root`` holds: two processes building one folder at once (two runs starting on an
    embedded benchmark not built yet) would write the same shards; the second waits, then finds them done.
    Re-entrant in one process (a build inside an embedded build's lock)."""
    from filelock import FileLock

    root = Path(root)
    root.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(str(root.parent / f".{root.name}.build.lock"), is_singleton=True)


def _build_locked(
    spec: BenchmarkSpec,
    root: Path,
    source_dir: str | Path | None,
    tasks: Sequence[str] | None,
    resume: bool,
    show_progress: bool,
    check_expected: bool,
    recipe_extra: dict | None,
) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    _drop_foreign_tasks(root, spec)
    wanted = [t for t in spec.tasks if tasks is None or t.id in set(tasks)]
    if tasks is not None:
        for t in tasks:
            spec.task(t)  # clear error on an unknown task name
    failures: dict[str, str] = {}
    src = Path(source_dir) if source_dir is not None else None
    if src is not None:
        from drake_bench.benchmarks.sources import warn_unconfirmed
        from drake_bench.loaders import get_loader

        used = [t.source.loader for t in wanted] + [t.test_source.loader for t in wanted if t.test_source is not None]
        warn_unconfirmed({name: get_loader(name) for name in used}.values())
    for task in progress(wanted, description=f"building {spec.name}", enabled=show_progress):
        recipe = task_recipe(spec, task, recipe_extra)
        if resume and _task_done(root, task.id, recipe):
            continue
        try:
            build_task(spec, task, src, root, check_expected=check_expected, recipe=recipe)
        except DrakeBenchError as exc:
            failures[task.id] = str(exc)
            _clear_task(root, task.id)
    write_card(
        root,
        spec,
        finalize_build(
            root, spec.name, manifest_hash(spec), {"version": spec.version, "failed_tasks": sorted(failures)}
        ),
    )
    if failures:
        lines = "\n".join(f"  - {t}: {msg}" for t, msg in failures.items())
        raise SourceError(
            f"{len(failures)} of {len(wanted)} tasks of {spec.name!r} failed to build (the other "
            f"{len(wanted) - len(failures)} are kept in {root}; fix the sources and run again to resume):\n{lines}"
        )
    return root


def is_built(root: Path) -> bool:
    return (root / BUILD_INFO).is_file()
