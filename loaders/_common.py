"""Helpers shared by the source loaders: file reading with clear errors, layouts, images, seeded partitions.

Every loader reads ``<source_dir>/<root>/`` where ``<root>`` is :func:`source_root`'s folder name
(the Hub repo's basename when the source is a Hub dataset, else ``source.subset`` or the dataset
name). Without ``source_dir`` a loader goes to the Hub through :func:`hub_rows`.

A loader describes the files it needs with :class:`Need` (``layout(task)``): the same description
finds the files when loading, lets ``drake-bench sources check`` report what is present, missing or
misplaced, and names the expected files when a task comes out empty. Every annotation file read
through :func:`read_json` / :func:`read_jsonl` / :func:`read_parquet` / :func:`read_lines` is noted,
so a build error can name the files a task was read from (:func:`recording`).
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from drake_bench.benchmarks.sample import AnswerType, Sample
from drake_bench.benchmarks.spec import TaskSpec
from drake_bench.errors import SourceError

LETTERS = "ABCDEFGHIJKLMNOP"


def root_name(task: TaskSpec) -> str:
    """Folder under ``source_dir`` holding this task's source, as its publisher distributes it."""
    src = task.source
    if src.hub_repo:
        return src.hub_repo.split("/")[-1]
    return src.subset or src.dataset


def source_root(task: TaskSpec, source_dir: Path | None) -> Path:
    if source_dir is None:
        raise SourceError(
            f"task {task.id!r}: no source_dir given and source {task.source.dataset!r} has no Hub repo to download from"
        )
    root = Path(source_dir) / root_name(task)
    if not root.is_dir():
        raise SourceError(f"task {task.id!r}: expected the {task.source.dataset} source folder at {root} (not found)")
    return root


def hub_rows(task: TaskSpec, config: str | None = None, split: str | None = None) -> Iterable[dict[str, Any]]:
    """Rows of the task's Hub dataset at its pinned revision (network; not exercised offline)."""
    from datasets import load_dataset

    if not task.source.hub_repo:
        raise SourceError(f"task {task.id!r}: source {task.source.dataset!r} has no hub_repo; pass source_dir")
    ds = load_dataset(task.source.hub_repo, config, split=split, revision=task.source.revision)
    if split is None:
        for part in ds.values():
            yield from part
    else:
        yield from ds


_READS: contextvars.ContextVar[list[Path] | None] = contextvars.ContextVar("drake_bench_source_reads", default=None)


@contextlib.contextmanager
def recording() -> Iterator[list[Path]]:
    """Collect the annotation files read inside the block (in first-read order, no repeats)."""
    reads: list[Path] = []
    token = _READS.set(reads)
    try:
        yield reads
    finally:
        _READS.reset(token)


def note_read(path: Path | str) -> None:
    reads = _READS.get()
    if reads is not None and Path(path) not in reads:
        reads.append(Path(path))


GLOB_CHARS = re.compile(r"[*?\[]")


@dataclass(frozen=True)
class Need:
    """One file (or folder, or glob of files) a task needs, relative to ``source_dir``.

    ``paths`` lists the accepted locations, the publisher's documented one first; a path may be a glob.
    ``kind``: ``records`` (annotation files whose records ``sources check`` counts), ``images`` (a folder of
    images or an image archive unpacked), ``file`` (anything else). ``required=False``: used when present.
    ``download``: what to fetch and where from, shown when the need is missing.
    """

    what: str
    paths: tuple[str, ...]
    kind: str = "records"
    required: bool = True
    download: str = ""

    def find(self, source_dir: Path | str | None) -> list[Path]:
        """The files of the first accepted location that exists (every match of a glob), else []."""
        if source_dir is None:
            return []
        base = Path(source_dir)
        for p in self.paths:
            if GLOB_CHARS.search(p):
                hits = sorted(h for h in base.glob(p) if not h.name.startswith("."))
                if hits:
                    return hits
            elif (base / p).exists():
                return [base / p]
        return []

    def find_one(self, source_dir: Path | str | None, task: TaskSpec | None = None) -> Path:
        """The first match, or a SourceError naming every accepted location."""
        hits = self.find(source_dir)
        if not hits:
            who = f"task {task.id!r}: " if task is not None else ""
            raise SourceError(
                f"{who}{self.what} not found under {source_dir}; expected at "
                + " or ".join(self.paths)
                + (f" ({self.download})" if self.download else "")
            )
        return hits[0]


def describe_needs(needs: Iterable[Need]) -> str:
    return "; ".join(f"{n.what} at {' or '.join(n.paths)}" for n in needs)


def read_json(path: Path, expected: str) -> Any:
    note_read(path)
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SourceError(f"{path}: file not found (expected {expected})") from None
    except json.JSONDecodeError as exc:
        raise SourceError(f"{path}: not valid JSON at line {exc.lineno} (expected {expected})") from None


def read_jsonl(path: Path, expected: str) -> list[dict[str, Any]]:
    note_read(path)
    rows = []
    try:
        with _open_text(path) as f:
            for i, line in enumerate(f, start=1):
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError:
                        raise SourceError(f"{path}:{i}: not a JSON line (expected {expected})") from None
    except FileNotFoundError:
        raise SourceError(f"{path}: file not found (expected {expected})") from None
    return rows


def _open_text(path: Path | str) -> Any:
    """A text file for reading, gunzipped on the fly when its name ends in .gz (HumanEval ships HumanEval.jsonl.gz)."""
    if str(path).endswith(".gz"):
        import gzip

        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def read_records(path: Path, expected: str) -> list[dict[str, Any]]:
    """The records of a JSON lines (also gzipped), Parquet or JSON-list file, chosen by its name."""
    name = Path(path).name
    if name.endswith((".jsonl", ".jsonl.gz")):
        return read_jsonl(path, expected)
    if name.endswith(".parquet"):
        return read_parquet(path, expected)
    data = read_json(path, expected)
    if not isinstance(data, list):
        raise SourceError(f"{path}: expected a JSON list ({expected})")
    return data


def text_key(text: str) -> str:
    """A text item's stable key: sha1 of its text. Train and test sources keyed alike let the build recognise a
    training item that asks a test question (drake_bench.benchmarks.build drops it from training)."""
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def read_parquet(path: Path, expected: str, columns: list[str] | None = None) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    note_read(path)
    try:
        return pq.read_table(path, columns=columns).to_pylist()
    except FileNotFoundError:
        raise SourceError(f"{path}: file not found (expected {expected})") from None
    except Exception as exc:  # pyarrow raises several types for a damaged file
        raise SourceError(f"{path}: not a readable Parquet file ({exc}) (expected {expected})") from None


def read_lines(path: Path, expected: str) -> list[str]:
    note_read(path)
    try:
        return Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise SourceError(f"{path}: file not found (expected {expected})") from None


def count_records(path: Path) -> int:
    """Records in an annotation file, for ``sources check``: list items, ``questions``/``annotations`` lists,
    per-key lists of a ``{key: [records]}`` dict (summed), other dicts' keys, JSON lines, Parquet rows, text lines."""
    path = Path(path)
    if path.is_dir():
        return sum(1 for _ in path.iterdir())
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.ParquetFile(path).metadata.num_rows
    if suffix == ".jsonl" or path.name.endswith(".jsonl.gz"):
        with _open_text(path) as f:
            return sum(1 for line in f if line.strip())
    if suffix == ".txt":
        with open(path, encoding="utf-8") as f:
            return sum(1 for _ in f)
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError:  # JSON lines under a .json name (NLVR2's data/*.json)
        lines = [line for line in text.splitlines() if line.strip()]
        for line in lines:
            json.loads(line)
        return len(lines)
    if isinstance(data, list):
        return len(data)
    if isinstance(data, dict):
        for key in ("questions", "annotations"):
            if isinstance(data.get(key), list):
                return len(data[key])
        if data and all(isinstance(v, list) for v in data.values()):
            return sum(len(v) for v in data.values())
        return len(data)
    return 1


def url_file_name(url: str) -> str:
    """The file name a URL's path ends in: query (``?download``) and fragment dropped, %-escapes decoded."""
    return unquote(Path(urlsplit(url).path).name)


def field(row: dict[str, Any], key: str, path: Path | str, expected: str = "") -> Any:
    if not isinstance(row, dict) or key not in row:
        raise SourceError(
            f"{path}: record lacks field {key!r} ({expected or 'see the loader docstring'}); got keys {sorted(row)[:12] if isinstance(row, dict) else type(row).__name__}"
        )
    return row[key]


def open_image(path: Path, where: str = "") -> Any:
    """A fully loaded RGB PIL image (the file is closed before returning)."""
    from PIL import Image

    try:
        with Image.open(path) as im:
            return im.convert("RGB")
    except FileNotFoundError:
        raise SourceError(f"{path}: image not found{' (referenced by ' + where + ')' if where else ''}") from None
    except OSError as exc:
        raise SourceError(f"{path}: not a readable image ({exc})") from None


def image_from_value(value: Any, base: Path, where: str) -> Any:
    """Image from a path string or a datasets-style ``{'bytes', 'path'}`` dict."""
    import io

    from PIL import Image

    if isinstance(value, dict):
        if value.get("bytes"):
            with Image.open(io.BytesIO(value["bytes"])) as im:
                return im.convert("RGB")
        value = value.get("path")
    if hasattr(value, "convert"):
        return value.convert("RGB")
    if not isinstance(value, str):
        raise SourceError(f"{where}: image reference {value!r} is neither a path nor an image")
    return open_image(base / value, where)


def stable_unit(key: str, seed: int = 0) -> float:
    """Deterministic pseudo-uniform number in [0, 1) from a key (seeded hash partitions and caps)."""
    h = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    return int.from_bytes(h[:8], "big") / 2**64


def in_half(key: str, half: int, seed: int = 0) -> bool:
    return int(stable_unit(key, seed) * 2) == half


def in_shard(key: str, shard: list[int] | tuple[int, int], seed: int = 0) -> bool:
    index, count = shard
    return int(stable_unit(key, seed) * count) == index


def cap(samples: Iterable[Sample], max_items: int | None, seed: int = 0) -> list[Sample]:
    """Keep at most ``max_items`` items, chosen by a seeded hash of their ids (independent of order)."""
    items = list(samples)
    if max_items is None or len(items) <= max_items:
        return items
    return sorted(items, key=lambda s: stable_unit(s.id, seed))[:max_items]


_WORD = re.compile(r"[a-z0-9']+")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def has_keyword(text: str, keywords: Iterable[str]) -> bool:
    """Whole-word (or whole-phrase) match, case-insensitive."""
    padded = " " + " ".join(words(text)) + " "
    return any(" " + " ".join(words(k)) + " " in padded for k in keywords)


def categorize(text: str, categories: dict[str, list[str]], rest: str) -> str:
    """First category (in listed order) with a matching keyword, else ``rest`` (HFLB keyword rules)."""
    for name, kws in categories.items():
        if has_keyword(text, kws):
            return name
    return rest


def keyword_rule_matches(text: str, rule: dict[str, Any]) -> bool:
    """Apply a task's keyword rule: ``categories``+``rest``+``category``, or ``keywords`` / ``exclude_keywords``."""
    if "categories" in rule:
        return categorize(text, rule["categories"], rule["rest"]) == rule["category"]
    if "keywords" in rule and not has_keyword(text, rule["keywords"]):
        return False
    if "exclude_keywords" in rule and has_keyword(text, rule["exclude_keywords"]):
        return False
    return True


YES = {"yes", "true", "correct", "y"}
NO = {"no", "false", "incorrect", "n"}


def yes_no(answer: str) -> str | None:
    a = answer.strip().strip(".").lower()
    return "yes" if a in YES else "no" if a in NO else None


def make_sample(
    task: TaskSpec,
    key: str,
    question: str,
    answer: str,
    *,
    images: list[Any] | None = None,
    choices: list[str] | None = None,
    answer_type: AnswerType | None = None,
    meta: dict[str, Any] | None = None,
) -> Sample:
    return Sample(
        id=f"{task.id}/{key}",
        images=images or [],
        question=question,
        choices=choices or [],
        answer=answer,
        answer_type=answer_type or task.answer_type,
        task_id=task.id,
        source=task.source.dataset + (f" ({task.source.variant})" if task.source.variant else ""),
        meta=meta or {},
    )


def finish(task: TaskSpec, samples: Iterable[Sample]) -> Iterator[Sample]:
    """Apply the rule's seeded ``max_items`` cap and yield."""
    yield from cap(samples, task.source.rule.get("max_items"), task.source.rule.get("seed", 0))
