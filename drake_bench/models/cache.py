"""Where the tiny zoo's cached artefacts live, and how one cache entry is built exactly once.

The tokenizer, the shared vision tower and every pretrained tiny checkpoint are cached under
:func:`models_home`, each in its own directory next to a record file (:data:`RECIPE_FILE`) that
says what it was built from. This module holds only those paths and the build-once helper, and
imports nothing else of :mod:`drake_bench.models`, so the modules that build cache entries
(:mod:`.pretrain`, :mod:`.vision`) and the one that names models (:mod:`.zoo`) can all use it
without importing each other.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

RECIPE_FILE = "drake_pretrain.json"
"""Record written next to every cache entry: what it was built from, plus what the build reported."""
TOKENIZER_DIR = "_tokenizer"
VISION_DIR = "_vision"


def models_home() -> Path:
    """Where tiny checkpoints are cached: ``$DRAKE_BENCH_MODELS`` or ``data_home()/models``."""
    env = os.environ.get("DRAKE_BENCH_MODELS")
    if env:
        return Path(env).expanduser()
    from drake_bench.benchmarks.store import data_home

    return data_home() / "models"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Exclusive file lock, so parallel processes build a cache entry once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


RECORD_MAX_BYTES = 16 << 20
"""The most bytes of a cache entry's record (16 MiB). One holds the recipe and the build's loss curves: 25 KB for a
shipped tiny model, so a recipe of hundreds of times the steps still fits; a larger file is no record of ours."""


def _read_record(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The record of the entry at ``path`` and, where there is a record file that holds none, why. The cache lies
    under :func:`models_home`, which may be shared or copied: a record that does not read (not UTF-8 or JSON, nested
    or sized past a record, not a JSON object) is no record, and the entry is built again."""
    from drake_bench.core.json_files import read_json
    from drake_bench.errors import JSONFileError

    f = path / RECIPE_FILE
    if not f.is_file():
        return None, None
    try:  # drake_bench wrote it with json.dumps, which writes NaN for a NaN loss: NaN reads back
        old = read_json(f, what="model cache record", max_bytes=RECORD_MAX_BYTES, allow_nan=True)
    except JSONFileError as exc:
        return None, str(exc)
    if not isinstance(old, dict):
        return None, f"{f} is not a JSON object"
    return old, None


def record_matches(path: Path, record: dict[str, Any]) -> bool:
    """Whether the entry at ``path`` exists and was built from ``record`` (extra recorded fields are ignored); an
    entry whose record does not read does not match (:func:`_read_record`)."""
    old, _ = _read_record(path)
    return old is not None and {k: old.get(k) for k in record} == record


def progress_dir(path: Path, record: dict[str, Any]) -> Path:
    """Where the build of the cache entry ``path`` for ``record`` keeps its resume snapshots (next to the entry,
    named by a digest of the record, so a changed recipe never resumes from another's snapshot). Removed by
    :func:`build_cached` once the entry is published."""
    digest = hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()[:12]
    return path.parent / f".{path.name}.progress-{digest}"


def _publish(tmp: Path, final: Path) -> None:
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)


def build_cached(path: Path, record: dict[str, Any], build: Callable[[Path], dict[str, Any]]) -> Path:
    """A cache entry built once: ``build(tmp)`` fills a temporary directory and returns extra record
    fields; the record is written next to it and the directory published atomically. Parallel
    processes wait on a file lock; an entry whose record matches is reused as is."""
    if record_matches(path, record):
        return path
    with _locked(path.parent / f".{path.name}.lock"):
        old, unreadable = _read_record(path)
        if old is not None and {k: old.get(k) for k in record} == record:
            return path
        if unreadable:
            warnings.warn(
                f"{unreadable}; not the record of a cache entry, so {path} is built again", RuntimeWarning, stacklevel=2
            )
        tmp = path.parent / f"{path.name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        extra = build(tmp)
        (tmp / RECIPE_FILE).write_text(json.dumps({**record, **extra}, indent=1))
        _publish(tmp, path)
        shutil.rmtree(progress_dir(path, record), ignore_errors=True)
    return path
