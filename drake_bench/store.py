"""On-disk layout of a built benchmark, shared by real, downloaded and embedded benchmarks.

::

    <root>/build_info.json                      # manifest hash, per-file sha256, sizes
    <root>/README.md                            # Hub dataset card
    <root>/data/<task_id>/train-00000-of-00001.parquet
    <root>/data/<task_id>/test-00000-of-00001.parquet

Parquet shards embed the images (``datasets.Image`` feature), so the folder is
exactly what is pushed to / pulled from a Hub dataset repo, with one config per
task. Reading goes through ``datasets`` (Arrow, memory-mapped, images decoded
lazily on row access), so clients share one table per task and hold only indices.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import DataNotBuiltError, IntegrityError, UnknownNameError
from .sample import AnswerType, Sample
from .spec import StorageRule

BUILD_INFO = "build_info.json"
ARROW_CACHE = ".arrow_cache"  # datasets' decoded copy of the shards, made on first read
ZSTD_LEVEL = 19  # shards are written once and read many times: spend the write time on size
SPLITS = ("train", "test")


def data_home() -> Path:
    """Root of drake_bench's local data (``$DRAKE_BENCH_HOME``, default ``~/.cache/drake_bench``)."""
    return Path(os.environ.get("DRAKE_BENCH_HOME", Path.home() / ".cache" / "drake_bench")).expanduser()


def built_root(benchmark: str, home: Path | None = None) -> Path:
    return (home or data_home()) / "built" / benchmark


def shard_path(root: Path, task_id: str, split: str) -> Path:
    return root / "data" / task_id / f"{split}-00000-of-00001.parquet"


def _quiet() -> None:
    """datasets prints a progress bar per shard; drake_bench shows its own progress instead."""
    import datasets

    datasets.disable_progress_bars()


def features():
    """Arrow schema of every built split (one place, so writer and Hub card agree)."""
    from datasets import Features, Image, List, Value

    return Features(
        {
            "id": Value("string"),
            "images": List(Image()),
            "question": Value("string"),
            "choices": List(Value("string")),
            "answer": Value("string"),
            "answer_type": Value("string"),
            "task_id": Value("string"),
            "source": Value("string"),
            "meta": Value("string"),
        }
    )


def encode_image(image: Any, encoding: str) -> Any:
    """A decoded picture as the bytes ``encoding`` asks for; anything else (bytes, paths) as it is.

    ``png`` leaves the encoding to datasets (PNG), as every build before ``StorageRule`` did. ``webp-lossless``
    covers RGB and RGBA, the modes WebP holds exactly; other modes stay PNG so they decode to the same mode.
    """
    from PIL import Image as PILImage

    if encoding == "png" or not isinstance(image, PILImage.Image) or image.mode not in ("RGB", "RGBA"):
        return image
    buf = io.BytesIO()
    image.save(buf, format="WEBP", lossless=True, quality=100, method=4, exact=True)
    return {"bytes": buf.getvalue(), "path": None}


def sample_to_row(s: Sample, image_encoding: str = "png") -> dict[str, Any]:
    return {
        "id": s.id,
        "images": [encode_image(im, image_encoding) for im in s.images],
        "question": s.question,
        "choices": list(s.choices),
        "answer": s.answer,
        "answer_type": s.answer_type.value,
        "task_id": s.task_id,
        "source": s.source,
        "meta": json.dumps(s.meta, sort_keys=True),
    }


def row_to_sample(row: dict[str, Any]) -> Sample:
    return Sample(
        id=row["id"],
        images=list(row["images"] or []),
        question=row["question"],
        choices=list(row["choices"] or []),
        answer=row["answer"],
        answer_type=AnswerType(row["answer_type"]),
        task_id=row["task_id"],
        source=row["source"],
        meta=json.loads(row["meta"]) if row.get("meta") else {},
    )


def write_split(root: Path, task_id: str, split: str, samples: Iterable[Sample],
                storage: StorageRule | None = None) -> Path:
    """Write one task split as a Parquet shard with embedded images, encoded as ``storage`` says (default: the
    encoding of manifests without a storage block); returns its path."""
    from datasets import Dataset

    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    storage = storage or StorageRule()
    _quiet()
    rows = [sample_to_row(s, storage.images) for s in samples]
    path = shard_path(Path(root), task_id, split)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".parquet.tmp")
    ds = Dataset.from_list(rows, features=features()) if rows else Dataset.from_dict(
        {k: [] for k in features()}, features=features()
    )
    if storage.parquet_compression == "zstd":
        import pyarrow.parquet as pq

        # datasets' writer fixes per-column codecs (image bytes uncompressed); pyarrow writes the same table and
        # its features metadata, so datasets reads the shard back with the same features
        pq.write_table(ds.data.table, str(tmp), compression="zstd", compression_level=ZSTD_LEVEL)
    else:
        ds.to_parquet(str(tmp))
    tmp.replace(path)  # atomic: an interrupted build never leaves a half-written shard
    return path


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def data_hash(files: dict[str, str]) -> str:
    """One hash over all shard hashes: what a result file cites as the data it ran on."""
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(f"{rel}:{files[rel]}\n".encode())
    return "sha256:" + h.hexdigest()


def finalize_build(root: Path, benchmark: str, manifest_hash: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Hash every shard and write ``build_info.json``; returns its content."""
    import pyarrow.parquet as pq

    root = Path(root)
    files: dict[str, str] = {}
    sizes: dict[str, dict[str, int]] = {}
    for path in sorted((root / "data").glob("*/*.parquet")):
        rel = path.relative_to(root).as_posix()
        files[rel] = file_sha256(path)
        task, split = path.parent.name, path.name.split("-")[0]
        sizes.setdefault(task, {})[split] = pq.ParquetFile(path).metadata.num_rows
    info = {
        "benchmark": benchmark,
        "manifest_hash": manifest_hash,
        "data_hash": data_hash(files),
        "files": files,
        "sizes": sizes,
        **(extra or {}),
    }
    (root / BUILD_INFO).write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")
    # datasets keys its Arrow cache by shard fingerprint, so each rebuild would add a full copy beside the stale
    # ones (85 MB after a few drake-synth rebuilds); the cache is derived data, the next read recreates it
    shutil.rmtree(root / ARROW_CACHE, ignore_errors=True)
    return info


@dataclass
class BuiltBenchmark:
    """Read access to a built benchmark folder. Tables are opened once and shared."""

    root: Path
    info: dict[str, Any]
    _tables: dict[tuple[str, str], Any] = field(default_factory=dict, repr=False)

    @classmethod
    def open(cls, root: Path, benchmark: str | None = None, hint: str = "") -> "BuiltBenchmark":
        root = Path(root)
        info_path = root / BUILD_INFO
        if not info_path.is_file():
            name = benchmark or root.name
            raise DataNotBuiltError(
                f"benchmark {name!r} has no built data at {root} (missing {BUILD_INFO}). {hint}".strip()
            )
        try:
            info = json.loads(info_path.read_text())
        except json.JSONDecodeError as exc:
            raise DataNotBuiltError(f"{info_path} is not valid JSON ({exc.msg}); rebuild or re-download") from None
        return cls(root=root, info=info)

    @property
    def data_hash(self) -> str:
        return self.info["data_hash"]

    def verify(self, files: Iterable[str] | None = None) -> None:
        """Check shard hashes against build_info.json (all, or the given relative paths)."""
        recorded: dict[str, str] = self.info["files"]
        for rel in sorted(files if files is not None else recorded):
            if rel not in recorded:
                raise IntegrityError(f"{self.root / rel}: not listed in {BUILD_INFO}")
            path = self.root / rel
            if not path.is_file():
                raise DataNotBuiltError(f"{path}: listed in {BUILD_INFO} but missing on disk")
            actual = file_sha256(path)
            if actual != recorded[rel]:
                raise IntegrityError(
                    f"{path}: sha256 {actual} does not match {recorded[rel]} recorded in {BUILD_INFO}; "
                    "the file was modified or corrupted (delete it and download or build again)"
                )

    def table(self, task_id: str, split: str):
        """The ``datasets.Dataset`` of one task split (images decode lazily on access)."""
        key = (task_id, split)
        if key not in self._tables:
            path = shard_path(self.root, task_id, split)
            if not path.is_file():
                if task_id not in self.info.get("sizes", {}):
                    raise UnknownNameError("built task", task_id, sorted(self.info.get("sizes", {})), where=str(self.root))
                raise DataNotBuiltError(f"{path}: shard missing; rebuild or re-download the benchmark")
            from datasets import Dataset

            _quiet()
            self._tables[key] = Dataset.from_parquet(
                str(path), cache_dir=str(self.root / ARROW_CACHE), keep_in_memory=False
            )
        return self._tables[key]

    def size(self, task_id: str, split: str) -> int:
        return int(self.info["sizes"][task_id][split])

    def samples(self, task_id: str, split: str, indices: Iterable[int]) -> list[Sample]:
        idx = list(indices)
        if not idx:
            return []
        tab = self.table(task_id, split)
        batch = tab[idx]
        return [row_to_sample({k: batch[k][i] for k in batch}) for i in range(len(idx))]
