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
    from ..store import data_home

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


def record_matches(path: Path, record: dict[str, Any]) -> bool:
    """Whether the entry at ``path`` exists and was built from ``record`` (extra recorded fields are ignored)."""
    f = path / RECIPE_FILE
    if not f.is_file():
        return False
    try:
        old = json.loads(f.read_text())
    except json.JSONDecodeError:
        return False
    return {k: old.get(k) for k in record} == record


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
        if record_matches(path, record):
            return path
        tmp = path.parent / f"{path.name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        extra = build(tmp)
        (tmp / RECIPE_FILE).write_text(json.dumps({**record, **extra}, indent=1))
        _publish(tmp, path)
        shutil.rmtree(progress_dir(path, record), ignore_errors=True)
    return path
