"""Checks on a source folder before (and during) a build: ``drake-bench sources check`` and the build's size rules.

For every task of a benchmark, :func:`check_sources` asks the task's loader for its layout
(:class:`~drake_bench.loaders._common.Need`: the files it reads, the publisher's documented place first)
and reports which files are present (with their record counts), which are missing, where a missing
file sits if it is elsewhere in the folder (a wrong layout), and what to download from where (the
manifest's ``source.rule["download"]`` entries). Nothing is loaded or decoded beyond counting records.

The build uses :func:`check_pool_size`: a task that yields no items, or fewer than
``EXPECTED_FRACTION`` of the pool its manifest expects (``source.rule["expected_items"]``), is an
error naming the task, the files read and what was expected; and :func:`warn_unconfirmed` warns once
per loader whose source format could not be confirmed against the publisher's files.
"""

from __future__ import annotations

import fnmatch
import os
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from drake_bench.benchmarks.spec import BenchmarkSpec, TaskSpec, TestSourceSpec
from drake_bench.errors import SourceError

EXPECTED_FRACTION = 0.5
"""A pool below this fraction of the manifest's ``expected_items`` is "far fewer": an error, not a smaller benchmark."""

_WALK_LIMIT = 200_000  # directory entries looked at when searching for misplaced files
_BIG_DIR = 2_000  # folders with more entries (image folders) are not descended into


class UnconfirmedFormatWarning(UserWarning):
    """A loader reads part of its source in a format that could not be confirmed against the publisher's files."""


def warn_unconfirmed(loaders: Iterable[Any]) -> list[str]:
    """Warn once per loader that declares ``unconfirmed`` parts; returns the messages."""
    messages = []
    for loader in loaders:
        for note in getattr(loader, "unconfirmed", ()) or ():
            msg = f"source loader {loader.name!r}: format not confirmed against the publisher's files: {note} (see docs/data-sources.md)"
            warnings.warn(UnconfirmedFormatWarning(msg), stacklevel=3)
            messages.append(msg)
    return messages


def _short(value: Any) -> str:
    if isinstance(value, dict) and len(repr(value)) > 80:
        return "{" + ", ".join(map(repr, list(value)[:4])) + (", ..." if len(value) > 4 else "") + "}"
    if isinstance(value, list) and len(repr(value)) > 80:
        return "[" + ", ".join(map(repr, value[:4])) + f", ... ({len(value)} in all)]"
    return repr(value)


def _rule_summary(task: TaskSpec) -> str:
    """The task's partition rule in one line (long lists and keyword maps shortened; download and size left out)."""
    return ", ".join(f"{k}={_short(v)}" for k, v in task.source.rule.items() if k not in ("download", "expected_items"))


def expected_description(task: TaskSpec, loader: Any) -> str:
    from drake_bench.loaders import loader_layout
    from drake_bench.loaders._common import describe_needs

    needs = loader_layout(loader, task)
    parts = [describe_needs(needs)] if needs else []
    if task.source.rule.get("expected_items"):
        parts.append(f"about {task.source.rule['expected_items']} items")
    parts.append(f"items matching {_rule_summary(task)}")
    return "; ".join(parts)


def check_pool_size(
    task: TaskSpec,
    loader: Any,
    n_items: int,
    files_read: Sequence[Path],
    source_dir: Path | None,
    check_expected: bool = True,
) -> None:
    """Raise SourceError when ``n_items`` is 0, or far below the manifest's ``expected_items`` (unless disabled)."""
    read = ", ".join(str(f) for f in files_read) or "no annotation files"
    where = f" under {source_dir}" if source_dir is not None else ""
    expected = task.source.rule.get("expected_items")
    if n_items == 0:
        raise SourceError(
            f"task {task.id!r}: source loader {loader.name!r} yielded 0 items{where}; files read: {read}; "
            f"expected: {expected_description(task, loader)}"
        )
    if check_expected and expected and n_items < EXPECTED_FRACTION * int(expected):
        raise SourceError(
            f"task {task.id!r}: source loader {loader.name!r} yielded {n_items} items{where}, far fewer than the "
            f"{expected} the manifest expects (at least {int(EXPECTED_FRACTION * int(expected))}); files read: {read}; "
            f"expected: {expected_description(task, loader)}. A sample of the sources? build with --allow-small"
        )


# --------------------------------------------------------------------------- sources check
@dataclass
class NeedReport:
    what: str
    paths: tuple[str, ...]
    kind: str
    required: bool
    found: list[Path]
    records: int | None = None
    elsewhere: list[Path] = field(default_factory=list)
    error: str | None = None

    @property
    def missing(self) -> bool:
        return not self.found


@dataclass
class TaskReport:
    task_id: str
    loader: str
    needs: list[NeedReport]
    downloads: list[str]
    expected_items: int | None
    unconfirmed: list[str]
    note: str = ""
    test_set: str = ""  # the evaluation set this entry reads for the task's test split ("" for its own source)

    @property
    def label(self) -> str:
        return self.task_id + (f" (test set: {self.test_set})" if self.test_set else "")

    @property
    def ok(self) -> bool:
        return all(not n.missing or not n.required for n in self.needs) and not any(n.error for n in self.needs)


@dataclass
class SourcesReport:
    benchmark: str
    source_dir: Path
    tasks: list[TaskReport]

    @property
    def ok(self) -> bool:
        return all(t.ok for t in self.tasks)


class _FileIndex:
    """File names under the source folder (bounded walk), to point at misplaced files."""

    def __init__(self, root: Path):
        self.root = root
        self._names: dict[str, list[Path]] | None = None

    def names(self) -> dict[str, list[Path]]:
        if self._names is None:
            self._names = {}
            seen = 0
            for dirpath, dirnames, filenames in os.walk(self.root):
                seen += len(dirnames) + len(filenames)
                if seen > _WALK_LIMIT:
                    break
                dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
                if len(filenames) > _BIG_DIR:
                    dirnames[:] = []
                    continue
                for f in filenames:
                    self._names.setdefault(f, []).append(Path(dirpath) / f)
        return self._names

    def find(self, pattern: str) -> list[Path]:
        return sorted(p for name, paths in self.names().items() if fnmatch.fnmatchcase(name, pattern) for p in paths)[
            :5
        ]


def check_sources(
    benchmark: str | BenchmarkSpec, source_dir: str | Path, tasks: Sequence[str] | None = None, count: bool = True
) -> SourcesReport:
    """Report, per task, the files found (with record counts), missing and misplaced, and what to download."""
    from drake_bench.benchmarks.manifest import load_benchmark
    from drake_bench.loaders import get_loader, loader_layout
    from drake_bench.loaders._common import GLOB_CHARS, count_records

    spec = load_benchmark(benchmark)
    src = Path(source_dir)
    if not src.is_dir():
        raise SourceError(f"source folder {src} does not exist")
    wanted = [spec.task(t) for t in tasks] if tasks else list(spec.tasks)
    # a task tested on a published evaluation set reads two sources: its own, then the test source's (same task id)
    wanted = [v for t in wanted for v in ([t, t.as_test_source()] if t.test_source is not None else [t])]
    index = _FileIndex(src)
    counts: dict[Path, int | str] = {}
    reports = []
    for task in wanted:
        test_set = task.source.dataset if isinstance(task.source, TestSourceSpec) else ""
        loader = get_loader(task.source.loader)
        downloads = [f"{what}: {url}" for what, url in task.source.rule.get("download", [])]
        unconfirmed = list(getattr(loader, "unconfirmed", ()) or ())
        needs = loader_layout(loader, task)
        if needs is None:
            note = (
                "generated on the fly: nothing to download"
                if spec.embedded or task.source.loader == "synth"
                else f"loader {loader.name!r} does not describe its files"
            )
            reports.append(
                TaskReport(
                    task.id,
                    loader.name,
                    [],
                    downloads,
                    task.source.rule.get("expected_items"),
                    unconfirmed,
                    note,
                    test_set,
                )
            )
            continue
        nreports = []
        for need in needs:
            found = need.find(src)
            rep = NeedReport(need.what, need.paths, need.kind, need.required, found)
            if found and count and need.kind == "records":
                total = 0
                for f in found:
                    if f not in counts:
                        try:
                            counts[f] = count_records(f)
                        except Exception as exc:  # a damaged file is reported, not raised
                            counts[f] = f"unreadable ({type(exc).__name__}: {exc})"
                    if isinstance(counts[f], str):
                        rep.error = f"{f}: {counts[f]}"
                    else:
                        total += int(counts[f])
                rep.records = total
            if not found and need.kind != "images":
                name = Path(need.paths[0]).name
                rep.elsewhere = index.find(name) if not GLOB_CHARS.search(str(Path(need.paths[0]).parent)) else []
            nreports.append(rep)
        reports.append(
            TaskReport(
                task.id,
                loader.name,
                nreports,
                downloads,
                task.source.rule.get("expected_items"),
                unconfirmed,
                test_set=test_set,
            )
        )
    return SourcesReport(spec.name, src, reports)


def render(report: SourcesReport, verbose: bool = False) -> str:
    """Plain-text report: one block per task (complete tasks in one line unless ``verbose``), then a summary."""
    lines: list[str] = []
    src = report.source_dir

    def rel(p: Path) -> str:
        try:
            return str(p.relative_to(src))
        except ValueError:
            return str(p)

    for t in report.tasks:
        status = "ok" if t.ok else "MISSING"
        if t.note and not t.needs:
            lines.append(f"{t.label} [{t.loader}]: {t.note}")
            continue
        head = f"{t.label} [{t.loader}]: {status}"
        if t.expected_items:
            head += f" (manifest expects about {t.expected_items} items)"
        lines.append(head)
        if t.ok and not verbose:
            found = [n for n in t.needs if n.found]
            lines.append(
                "  found: "
                + "; ".join(
                    f"{rel(n.found[0])}{f' (+{len(n.found) - 1} more)' if len(n.found) > 1 else ''}"
                    + (f" [{n.records} records]" if n.records is not None else "")
                    for n in found
                )
            )
            continue
        for n in t.needs:
            if n.found:
                more = f" (+{len(n.found) - 1} more)" if len(n.found) > 1 else ""
                recs = f", {n.records} records" if n.records is not None else ""
                lines.append(f"  found    {n.what}: {rel(n.found[0])}{more}{recs}")
                if n.error:
                    lines.append(f"  ERROR    {n.error}")
            else:
                tag = "missing " if n.required else "absent  "
                lines.append(
                    f"  {tag} {n.what}: expected at {' or '.join(n.paths)}" + ("" if n.required else " (optional)")
                )
                for p in n.elsewhere:
                    lines.append(f"           found elsewhere: {rel(p)} -> move it to {n.paths[0]}")
        if not t.ok:
            for d in t.downloads:
                lines.append(f"  download {d}")
        for u in t.unconfirmed:
            lines.append(f"  note     format not confirmed: {u}")
    # a task tested on an evaluation set has two entries (its source and its test set): count it once
    tasks = list(dict.fromkeys(t.task_id for t in report.tasks))
    bad = list(dict.fromkeys(t.task_id for t in report.tasks if not t.ok))
    lines.append("")
    lines.append(
        f"{report.benchmark}: {len(tasks) - len(bad)} of {len(tasks)} tasks have every required file under {src}"
        + (
            ""
            if not bad
            else f"; missing files for {len(bad)}: " + ", ".join(bad[:12]) + (" ..." if len(bad) > 12 else "")
        )
    )
    return "\n".join(lines)
