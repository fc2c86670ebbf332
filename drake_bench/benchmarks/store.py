"""On-disk layout of a built benchmark, shared by real, downloaded and embedded benchmarks.

::

    <root>/build_info.json                      # manifest hash, per-file sha256 and content digest, sizes
    <root>/README.md                            # Hub dataset card
    <root>/.verified.json                       # which shards were verified, by size and times (a cache)
    <root>/data/<task_id>/train-00000-of-00001.parquet
    <root>/data/<task_id>/test-00000-of-00001.parquet

Parquet shards embed the images (``datasets.Image`` feature), so the folder is
exactly what is pushed to / pulled from a Hub dataset repo, with one config per
task. Reading goes through ``datasets`` (Arrow, memory-mapped, images decoded
lazily on row access), so clients share one table per task and hold only indices.

**What is read is verified.** The first time a run or a stream opens a shard
(:meth:`BuiltBenchmark.table`), its sha256 is checked against ``build_info.json``; a
mismatch is a :class:`~drake_bench.errors.DataIntegrityError` naming the file, both hashes
and the rebuild command. The check is cached in ``.verified.json`` by the file's size,
mtime and ctime (ctime cannot be set back, so an edit that restores the mtime is still
seen), so an unchanged training shard is hashed once, not once per run. ``datasets``' decoded copy
(``.arrow_cache``) is what rows are actually read from: it lives in a folder named by the
verified shard hash, and a copy whose size or times changed since it was made from a
verified shard is dropped and made again. Test shards, which decide scores, skip both caches:
hashed and decoded afresh on every open (:meth:`BuiltBenchmark._fresh_arrow`). Reading or decoding errors of a shard are
:class:`~drake_bench.errors.DataError` naming the file (never a plugin's fault).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from drake_bench.benchmarks.sample import AnswerType, Sample
from drake_bench.benchmarks.spec import StorageRule
from drake_bench.errors import DataError, DataIntegrityError, DataNotBuiltError, DrakeBenchError, UnknownNameError

BUILD_INFO = "build_info.json"
ARROW_CACHE = ".arrow_cache"  # datasets' decoded copy of the shards, made on first read
VERIFIED = ".verified.json"  # shards whose hash matched, keyed by size and times, so unchanged files are not rehashed
ZSTD_LEVEL = 19  # shards are written once and read many times: spend the write time on size
SPLITS = ("train", "validation", "test")  # validation only where the manifest's subsampling rule asks for it
SCORED_SPLITS = ("validation", "test")  # splits whose answers decide a score (a board's, or a tuning run's)


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


def write_split(
    root: Path, task_id: str, split: str, samples: Iterable[Sample], storage: StorageRule | None = None
) -> Path:
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
    ds = (
        Dataset.from_list(rows, features=features())
        if rows
        else Dataset.from_dict({k: [] for k in features()}, features=features())
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


def task_of(rel: str) -> str | None:
    """The task a file of a built folder belongs to, from its relative path (``data/<task>/<split>-....parquet``);
    None for a file at the top or one level down."""
    parts = rel.split("/")
    return parts[1] if len(parts) >= 3 else None


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def data_hash(files: dict[str, str]) -> str:
    """One hash over all shard hashes: what a result file cites as the data it ran on.

    Over per-shard content digests instead of file hashes it gives the build's content hash (:func:`content_hash`)."""
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(f"{rel}:{files[rel]}\n".encode())
    return "sha256:" + h.hexdigest()


def content_hash(digests: dict[str, str]) -> str:
    """One hash over every shard's :func:`content_digest`: the same data gives the same content hash whichever
    pyarrow and Pillow wrote the files."""
    return data_hash(digests)


def image_digest(value: Any) -> bytes:
    """Pixel-level digest of one stored image (mode, size, decoded pixels): the same for any lossless encoding
    of the same picture, so it does not move with the encoder's version."""
    from PIL import Image

    if isinstance(value, dict):
        raw = value.get("bytes")
        img = Image.open(io.BytesIO(raw)) if raw is not None else Image.open(value["path"])
    else:
        img = value
    img.load()
    return hashlib.sha256(f"{img.mode}:{img.size}".encode() + img.tobytes()).digest()


def content_digest(path: Path) -> str:
    """Digest of everything a shard holds, as read back: every column of every row in order, images by their
    decoded pixels. The file's sha256 also covers how it was written (pyarrow writes its own version into every
    file, and Pillow's encoders change from release to release), so a rebuild with other library versions gives
    other file hashes for the same data; this digest does not move."""
    import pyarrow.parquet as pq

    names = sorted(pq.read_schema(path).names)
    h = hashlib.sha256(json.dumps(names).encode() + b"\n")
    for row in iter_rows(path):
        h.update(json.dumps([row[k] for k in names if k != "images"], sort_keys=True, ensure_ascii=False).encode())
        for img in row.get("images") or []:
            h.update(image_digest(img))
        h.update(b"\n")
    return "sha256:" + h.hexdigest()


def iter_rows(path: Path, columns: list[str] | None = None) -> Iterator[dict[str, Any]]:
    """A shard's rows in order, as dicts, read 256 at a time: a real task's shard can hold gigabytes of images,
    which a whole-table read would hold in memory twice (Arrow and Python)."""
    import pyarrow.parquet as pq

    for batch in pq.ParquetFile(path).iter_batches(batch_size=256, columns=columns):
        yield from batch.to_pylist()


def finalize_build(
    root: Path, benchmark: str, manifest_hash: str, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Hash every shard and write ``build_info.json``; returns its content.

    The hashes just computed also seed the verification cache, so the first run after a build does not hash
    the shards again.
    """
    import pyarrow.parquet as pq

    root = Path(root)
    previous = _previous_digests(root)
    files: dict[str, str] = {}
    digests: dict[str, str] = {}
    sizes: dict[str, dict[str, int]] = {}
    seen: dict[str, dict[str, Any]] = {}
    for path in sorted((root / "data").glob("*/*.parquet")):
        rel = path.relative_to(root).as_posix()
        before = _stat_key(path)
        files[rel] = file_sha256(path)
        # decoding every image is the slow part of finalizing: a shard kept from the last build keeps its digest
        digests[rel] = previous.get((rel, files[rel])) or content_digest(path)
        if before is not None and _stat_key(path) == before:
            seen[rel] = {**before, "sha256": files[rel], "content": digests[rel]}
        task, split = path.parent.name, path.name.split("-")[0]
        sizes.setdefault(task, {})[split] = pq.ParquetFile(path).metadata.num_rows
    info = {
        "benchmark": benchmark,
        "manifest_hash": manifest_hash,
        "data_hash": data_hash(files),
        "files": files,
        "content_hash": content_hash(digests),
        "content_digests": digests,
        "sizes": sizes,
        **(extra or {}),
    }
    (root / BUILD_INFO).write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")
    # datasets keys its Arrow cache by shard fingerprint, so each rebuild would add a full copy beside the stale
    # ones (85 MB after a few drake-synth rebuilds); the cache is derived data, the next read recreates it
    shutil.rmtree(root / ARROW_CACHE, ignore_errors=True)
    _VerifiedCache(root).replace(seen)
    return info


def _previous_digests(root: Path) -> dict[tuple[str, str], str]:
    """(shard, its sha256) -> content digest that drake_bench computed from those bytes (a build) or checked against
    them (a first read), as the folder's verification cache records it: a shard with the same bytes has the same
    content. ``build_info.json``'s digests are not read: one written there by hand must not reach the content hash
    that boards accept."""
    return {
        (rel, e["sha256"]): e["content"]
        for rel, e in _VerifiedCache(root).load()["files"].items()
        if isinstance(e, dict) and isinstance(e.get("sha256"), str) and isinstance(e.get("content"), str)
    }


# --------------------------------------------------------------------------- verification cache
def _stat_key(path: Path) -> dict[str, int] | None:
    """What identifies a file's content without reading it: size, mtime and ctime (ns). ctime moves on every
    write and cannot be set back, so an edit that restores the mtime (``touch -r``) still changes the key."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns}


class _VerifiedCache:
    """``<root>/.verified.json`` (or, when the folder is read-only, a file under ``data_home()/verified``).

    ``files``: shard rel path -> stat key + sha256 it had when its hash matched ``build_info.json``, and the content
    digest (``content``) drake_bench computed from it or checked against it, where the build records one.
    ``arrow``: shard rel path -> {arrow file path -> stat key} of datasets' decoded copy made from that verified
    shard. A cache only saves work: losing it (or a lost concurrent update) costs one rehash, never a wrong answer.
    """

    def __init__(self, root: Path):
        self.root = Path(root)
        self.path = self.root / VERIFIED
        if not os.access(self.root, os.W_OK):
            key = hashlib.sha1(str(self.root.resolve()).encode()).hexdigest()[:16]
            self.path = data_home() / "verified" / f"{key}.json"

    def load(self) -> dict[str, Any]:
        try:
            doc = json.loads(self.path.read_text())
        except (OSError, ValueError, RecursionError):  # a cache: anything unreadable is no cache
            return {"files": {}, "arrow": {}}
        if (
            not isinstance(doc, dict)
            or not isinstance(doc.get("files"), dict)
            or not isinstance(doc.get("arrow"), dict)
        ):
            return {"files": {}, "arrow": {}}
        return doc

    def _write(self, doc: dict[str, Any]) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=VERIFIED + ".", suffix=".tmp", dir=self.path.parent)
            with os.fdopen(fd, "w") as f:
                json.dump(doc, f, sort_keys=True)
            os.replace(tmp, self.path)
        except OSError:  # a cache: a read-only or full disk only costs a rehash next time
            pass

    def replace(self, files: dict[str, dict[str, Any]]) -> None:
        self._write({"files": files, "arrow": {}})

    def update(self, files: dict[str, Any] | None = None, arrow: dict[str, Any] | None = None) -> None:
        """Record shard entries (rel -> stat key + sha256) and decoded copies (rel -> their files' stat keys)."""
        doc = self.load()  # merge with what other processes recorded meanwhile
        doc["files"].update(files or {})
        doc["arrow"].update(arrow or {})
        self._write(doc)


# --------------------------------------------------------------------------- reading
@dataclass
class BuiltBenchmark:
    """Read access to a built benchmark folder. Tables are opened once and shared, each verified on first open.

    ``verified_files``: shard path (relative to the root) -> sha256 of every shard this object has verified
    against ``build_info.json`` (what a result cites as the files it read).
    """

    root: Path
    info: dict[str, Any]
    _tables: dict[tuple[str, str], Any] = field(default_factory=dict, repr=False)
    verified_files: dict[str, str] = field(default_factory=dict)

    @classmethod
    def open(cls, root: Path, benchmark: str | None = None, hint: str = "") -> "BuiltBenchmark":
        root = Path(root)
        info_path = root / BUILD_INFO
        if not info_path.is_file():
            name = benchmark or root.name
            raise DataNotBuiltError(
                f"benchmark {name!r} has no built data at {root} (missing {BUILD_INFO}). {hint}".strip()
            )
        from drake_bench.core.json_files import MANIFEST_MAX_BYTES, read_json
        from drake_bench.errors import JSONFileError

        try:  # a downloaded or copied folder's record: refused in one line whatever it holds
            info = read_json(info_path, what="build record", max_bytes=MANIFEST_MAX_BYTES)
        except JSONFileError as exc:
            raise DataNotBuiltError(f"{exc}; rebuild or re-download") from None
        if not isinstance(info, dict):
            raise DataNotBuiltError(f"{info_path} is not a build record (a JSON object); rebuild or re-download")
        bench = cls(root=root, info=info)
        bench._check_data_hash()
        return bench

    # -- what a result cites -------------------------------------------------------------
    @property
    def data_hash(self) -> str:
        return self.info["data_hash"]

    @property
    def content_hash(self) -> str | None:
        """Hash of the data as read back (:func:`content_hash`), equal across pyarrow / Pillow versions; None for
        a folder built before drake_bench recorded it."""
        return self.info.get("content_hash")

    def _check_data_hash(self) -> None:
        """The cited data hash must be the one over the recorded shard hashes: otherwise a shard's recorded hash
        could be edited (to match an edited shard) while results went on citing the original data hash."""
        info = self.info
        files = info.get("files")
        if not isinstance(files, dict) or not isinstance(info.get("data_hash"), str):
            raise DataIntegrityError(
                f"{self.root / BUILD_INFO}: no shard hashes ('files') or no 'data_hash'; {self.rebuild_hint()}"
            )
        published = info.get("published_files")  # a Hub fetch: the data hash is over every published file
        if isinstance(published, dict):
            expected = data_hash(published)
            stray = sorted(rel for rel, h in files.items() if rel in published and published[rel] != h)
            if stray:
                raise DataIntegrityError(
                    f"{self.root / BUILD_INFO}: recorded hashes of {stray[:3]} differ from the published ones; "
                    f"{self.rebuild_hint()}"
                )
        elif info.get("commit"):
            return  # fetched before published hashes were kept locally: checked at fetch time only
        else:
            expected = data_hash(files)
        if expected != info["data_hash"]:
            raise DataIntegrityError(
                f"{self.root / BUILD_INFO}: data_hash {info['data_hash']} is not the hash of the recorded shard "
                f"hashes ({expected}): the file was edited; {self.rebuild_hint()}"
            )
        self._check_content_hash()

    def _check_content_hash(self) -> None:
        """The content hash a result cites must be the one over the recorded per-shard content digests, which
        cover the same shards as the file hashes. Each digest is checked against its shard when the shard is first
        read (:meth:`verify_file`), as its file hash is, so the content hash holds for what a run reads."""
        info = self.info
        if "content_hash" not in info:
            return  # built before drake_bench recorded content; results from it cite the file-based hash only
        digests = info.get("content_digests")
        if not isinstance(digests, dict) or not isinstance(info["content_hash"], str):
            raise DataIntegrityError(
                f"{self.root / BUILD_INFO}: 'content_hash' without per-shard 'content_digests'; {self.rebuild_hint()}"
            )
        shards = {rel for rel in info["files"] if rel.endswith(".parquet")}
        if not shards <= set(digests):
            raise DataIntegrityError(
                f"{self.root / BUILD_INFO}: no content digest for {sorted(shards - set(digests))[:3]}; "
                f"{self.rebuild_hint()}"
            )
        if content_hash(digests) != info["content_hash"]:
            raise DataIntegrityError(
                f"{self.root / BUILD_INFO}: content_hash {info['content_hash']} is not the hash of the recorded "
                f"content digests ({content_hash(digests)}): the file was edited; {self.rebuild_hint()}"
            )

    def rebuild_hint(self, rel: str | None = None) -> str:
        """The command that makes this folder (or one shard's task) right again."""
        info, root = self.info, self.root
        name = str(info.get("benchmark") or root.name)
        task = task_of(rel) if rel else None
        if info.get("commit") or info.get("repo_id"):
            rev = info.get("revision") or info.get("commit")
            return (
                f"delete {root} and download it again: `drake-bench download {name} --revision {rev}"
                + (f" --repo {info['repo_id']}" if info.get("repo_id") else "")
                + "`"
            )
        pinned = f"{name}@{info['version']}" if info.get("version") else name
        out = "" if root.resolve() in _default_roots(name, info.get("version")) else f" --out {root}"
        if info.get("embedded"):
            what = root / "data" / task if task else root
            return f"delete {what} and rebuild: `drake-bench build {pinned}{out}` (or delete {root}: it is rebuilt on next use)"
        only = f" --task {task}" if task else ""
        return f"rebuild it: `drake-bench build {name}{only} --no-resume --source-dir DIR{out}`"

    # -- verification -----------------------------------------------------------------------
    def _recorded(self, rel: str) -> str:
        recorded: dict[str, str] = self.info["files"]
        if rel not in recorded:
            raise DataIntegrityError(f"{self.root / rel}: not listed in {BUILD_INFO}; {self.rebuild_hint(rel)}")
        return recorded[rel]

    def _mismatch(self, rel: str, actual: str, expected: str) -> DataIntegrityError:
        return DataIntegrityError(
            f"{self.root / rel}: sha256 {actual} does not match {expected} recorded in {self.root / BUILD_INFO} at "
            f"build time; the file was modified or corrupted and is not used. To fix it, {self.rebuild_hint(rel)}"
        )

    def _recorded_digest(self, rel: str) -> str | None:
        """The content digest ``build_info.json`` records for a shard; None where there is none to hold it to: a
        build from before drake_bench recorded content, a file that is not a Parquet shard, or a task the Hub
        publishes as an index only and the user rebuilt from their own copy. That shard was checked against the
        published index when it was rebuilt, on what a model sees and is scored on; its ``source`` and ``meta``
        columns, which the full digest also covers, may differ between two copies of a dataset."""
        digests = self.info.get("content_digests")
        if not isinstance(digests, dict) or not rel.endswith(".parquet"):
            return None
        if task_of(rel) in (self.info.get("rebuilt_tasks") or []):
            return None
        return digests.get(rel)

    def verify_file(self, rel: str, use_cache: bool = True) -> str:
        """Check one shard against ``build_info.json``: its sha256 and, where the build records one, its content
        digest (hashing and decoding it unless the cache says it is unchanged since both matched); returns its
        sha256 and records it in :attr:`verified_files`.

        The content digest is checked because boards accept another data hash with their content hash (the same
        data written by other pyarrow / Pillow versions): a digest taken on trust from ``build_info.json`` would let
        an edited shard, with its file hash rewritten to match, pass as the board's data. A build seeds the cache
        with the digests it computed, so only data from elsewhere (a download, a copied folder) is decoded here,
        once per shard."""
        expected = self._recorded(rel)
        digest = self._recorded_digest(rel)
        path = self.root / rel
        if not path.is_file():
            raise DataNotBuiltError(f"{path}: listed in {BUILD_INFO} but missing on disk; {self.rebuild_hint(rel)}")
        cache = _VerifiedCache(self.root)
        key = _stat_key(path)
        entry = cache.load()["files"].get(rel) if use_cache and key is not None else None
        entry = entry if isinstance(entry, dict) else {}
        hashed = key is not None and entry.get("sha256") == expected and {k: entry.get(k) for k in key} == key
        if hashed and (digest is None or entry.get("content") == digest):
            self.verified_files[rel] = expected
            return expected
        actual = expected if hashed else file_sha256(path)  # a download hashed it already; its content is left
        if actual != expected:
            raise self._mismatch(rel, actual, expected)
        if digest is not None:
            try:
                found = content_digest(path)
            except Exception as exc:  # a shard whose hash matches but that cannot be read back
                raise DataError(
                    f"{path}: cannot be read as a Parquet shard ({type(exc).__name__}: {exc}); {self.rebuild_hint(rel)}"
                ) from exc
            if found != digest:
                raise DataIntegrityError(
                    f"{path}: its content digest is {found}, not the {digest} recorded in {self.root / BUILD_INFO}, "
                    f"although its sha256 matches the recorded one: {BUILD_INFO} was edited; {self.rebuild_hint(rel)}"
                )
        if key is not None and _stat_key(path) == key:
            cache.update(files={rel: {**key, "sha256": actual, **({"content": digest} if digest else {})}})
        self.verified_files[rel] = actual
        return actual

    def verify(self, files: Iterable[str] | None = None) -> None:
        """Hash shards (all, or the given relative paths) and check them against build_info.json, ignoring the cache."""
        recorded: dict[str, str] = self.info["files"]
        for rel in sorted(files if files is not None else recorded):
            self.verify_file(rel, use_cache=False)

    # -- tables -------------------------------------------------------------------------------
    def table(self, task_id: str, split: str):
        """The ``datasets.Dataset`` of one task split (images decode lazily on access), verified on first open."""
        key = (task_id, split)
        if key not in self._tables:
            path = shard_path(self.root, task_id, split)
            if not path.is_file():
                if task_id not in self.info.get("sizes", {}):
                    raise UnknownNameError(
                        "built task", task_id, sorted(self.info.get("sizes", {})), where=str(self.root)
                    )
                raise DataNotBuiltError(
                    f"{path}: shard missing; {self.rebuild_hint(path.relative_to(self.root).as_posix())}"
                )
            rel = path.relative_to(self.root).as_posix()
            if split in SCORED_SPLITS:  # what decides scores: hashed and decoded afresh, never taken from a cache
                sha = self.verify_file(rel, use_cache=False)
                self._tables[key] = self._fresh_arrow(path)
            else:
                sha = self.verify_file(rel)
                self._tables[key] = self._open_arrow(rel, path, sha)
        return self._tables[key]

    def _fresh_arrow(self, path: Path):
        """A decoded copy of a just-verified shard, made by this process in a folder of its own and removed with it.

        The shared decoded copy and the verification record beside it are files anyone who can write the data folder
        can rewrite together: editing a test answer in ``.arrow_cache`` and the stat key in ``.verified.json`` made a
        plugin answering "42" score 1.0 while the result cited the clean data hash. Test splits are small beside
        training (a few MB in the embedded benchmarks), so they are re-hashed and decoded on every open instead.
        The folder lies inside the data root (or ``data_home()/built``), which a method's worker cannot see."""
        import weakref

        from drake_bench.core.lock import pid_alive

        base = self.root / ARROW_CACHE if os.access(self.root, os.W_OK) else data_home() / "built" / ARROW_CACHE
        base.mkdir(parents=True, exist_ok=True)
        for stale in base.glob("fresh-*-*"):  # left by a process that was killed before it could remove its own
            pid = stale.name.split("-")[1]
            if pid.isdigit() and not pid_alive(int(pid)):
                shutil.rmtree(stale, ignore_errors=True)
        folder = Path(tempfile.mkdtemp(prefix=f"fresh-{os.getpid()}-", dir=base))
        ds = self._from_parquet(path, folder)
        weakref.finalize(ds, shutil.rmtree, str(folder), True)  # when the table goes, or at exit
        return ds

    def _from_parquet(self, path: Path, cache_dir: Path):
        from datasets import Dataset

        _quiet()
        try:
            return Dataset.from_parquet(str(path), cache_dir=str(cache_dir), keep_in_memory=False)
        except DrakeBenchError:
            raise
        except Exception as exc:  # a shard whose hash matches but that datasets cannot read
            raise DataError(
                f"{path}: cannot be read as a Parquet shard ({type(exc).__name__}: {exc}); "
                f"{self.rebuild_hint(path.relative_to(self.root).as_posix())}"
            ) from exc

    def _arrow_files(self, ds: Any) -> dict[str, Any]:
        return {os.path.relpath(f["filename"], self.root): _stat_key(Path(f["filename"])) for f in ds.cache_files}

    def _open_arrow(self, rel: str, path: Path, sha: str):
        """Open datasets' decoded copy of a verified shard, made again when it changed since it was made.

        The copy is what rows are read from, so it must be the verified shard's: it sits in a folder named by
        the shard's hash, and its files' stat keys are recorded when made; a copy found with other stat keys
        (edited, or made before this check existed) is removed and decoded again from the verified shard.
        """
        from filelock import FileLock

        cache_dir = self.root / ARROW_CACHE / f"{task_of(rel)}.{path.name.split('-')[0]}.{sha[:16]}"
        cache_dir.parent.mkdir(parents=True, exist_ok=True)
        legacy = self.root / ARROW_CACHE / "parquet"  # the layout before copies were tied to verified shards
        if legacy.is_dir():
            shutil.rmtree(legacy, ignore_errors=True)
        cache = _VerifiedCache(self.root)
        with FileLock(str(cache_dir) + ".lock"):  # workers opening the same shard wait for the first to record it
            made_now = not cache_dir.exists()
            ds = self._from_parquet(path, cache_dir)
            found = self._arrow_files(ds)
            if not made_now:
                known = cache.load()["arrow"].get(rel)
                if isinstance(known, dict) and known.get("sha256") == sha and known.get("files") == found:
                    return ds
                del ds
                shutil.rmtree(cache_dir, ignore_errors=True)
                ds = self._from_parquet(path, cache_dir)
                found = self._arrow_files(ds)
            cache.update(arrow={rel: {"sha256": sha, "files": found}})
        return ds

    def size(self, task_id: str, split: str) -> int:
        """Rows of one task split, as ``build_info.json`` records them.

        A failed build keeps the tasks that built and records the others in ``failed_tasks`` (their shards are
        removed), so a task the manifest has can be absent here: that is the folder's fault and is said as a data
        error naming the file, the task and the rebuild, never a bare ``KeyError`` from inside a stream."""
        try:
            return int(self.info["sizes"][task_id][split])
        except (KeyError, TypeError):
            why = "its build failed" if task_id in (self.info.get("failed_tasks") or []) else "it was not built"
            raise DataNotBuiltError(
                f"{self.root / BUILD_INFO} records no {split} split of task {task_id!r} ({why}); "
                f"{self.rebuild_hint(f'data/{task_id}/{split}')}"
            ) from None

    def samples(self, task_id: str, split: str, indices: Iterable[int]) -> list[Sample]:
        idx = list(indices)
        if not idx:
            return []
        return decode_rows(self.table(task_id, split), idx, shard_path(self.root, task_id, split), self.rebuild_hint)


def decode_rows(dataset: Any, positions: list[int], path: Path, hint: Any = None) -> list[Sample]:
    """Rows ``positions`` of ``dataset`` (a table read from shard ``path``) as Samples.

    A row that cannot be decoded (an unreadable image, a malformed field) is the data's fault, not the caller's:
    it raises a :class:`DataError` naming the shard, also when the caller is a method iterating its batches.
    """
    try:
        batch = dataset[positions]
        return [row_to_sample({k: batch[k][i] for k in batch}) for i in range(len(positions))]
    except (DrakeBenchError, IndexError):
        raise
    except Exception as exc:
        shown = f"{positions[:5]}{'...' if len(positions) > 5 else ''}"
        fix = ""
        if callable(hint):
            try:
                fix = "; " + hint(f"data/{path.parent.name}/{path.name}")
            except Exception:  # the hint is a courtesy; never hide the data error behind another
                fix = ""
        raise DataError(f"{path}: rows {shown} cannot be decoded ({type(exc).__name__}: {exc}){fix}") from exc


def _default_roots(name: str, version: str | None) -> set[Path]:
    """Folders a plain ``drake-bench build NAME`` writes to (so the rebuild hint only adds --out elsewhere)."""
    roots = {built_root(name).resolve()}
    if version:
        roots.add(built_root(f"{name}@{version}").resolve())
    return roots
