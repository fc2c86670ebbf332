"""Publish built benchmarks to the Hugging Face Hub and fetch pinned revisions back.

Publishing and fetching both go through ``huggingface_hub`` (``CommitOperationAdd`` +
``HfApi.create_commit``/``create_tag``; ``hf_hub_download``), so the Hub cache, offline
mode (``HF_HUB_OFFLINE=1``) and tokens behave exactly as users expect from other
Hub tools. Three promises:

* **Only what is asked.** :func:`fetch_benchmark` downloads ``build_info.json`` and
  the shards of the requested tasks, never the whole repo (a client needs a handful
  of tasks out of hundreds).
* **Pinned and verified.** A branch or tag is resolved once to its commit and every
  later file is fetched at that commit, so a branch moving mid-download cannot mix
  revisions; every shard's sha256 is checked against ``build_info.json``, and
  ``build_info.json``'s manifest hash against the manifest the user holds.
* **Licenses respected.** A task whose source forbids redistribution is published as
  ``data/<task>/index.json`` (item ids in row order, the source rule, a content
  digest; no content). Fetching it with ``source_dir=`` rebuilds the task from the
  user's own copy of the source and checks the result against the index.

The fetched benchmark is a small folder of links into the Hub cache (plus a local
``build_info.json`` listing what was fetched), outside the cache itself: reading a
task writes an Arrow cache next to the data, and rebuilt index tasks need a
writable place, neither of which belongs in ``~/.cache/huggingface``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from drake_bench.benchmarks.card import CARD_FILE, render_card
from drake_bench.benchmarks.manifest import load_benchmark, manifest_dict
from drake_bench.benchmarks.spec import BenchmarkSpec, TaskSpec
from drake_bench.benchmarks.store import (
    BUILD_INFO,
    SPLITS,
    BuiltBenchmark,
    _stat_key,
    _VerifiedCache,
    data_hash,
    data_home,
    file_sha256,
    image_digest,
    iter_rows,
    shard_path,
    task_of,
)
from drake_bench.core.json_files import json_bytes
from drake_bench.core.progress import progress
from drake_bench.errors import DataNotBuiltError, DrakeBenchError, HubError, IntegrityError, SourceError

REPO_TYPE = "dataset"
INDEX_FILE = "index.json"


class RevisionNotFound(DataNotBuiltError):
    """The requested revision (branch, tag or commit) is not on the Hub, or not in the cache when offline."""


def _network_errors() -> tuple[type[BaseException], ...]:
    """What a Hub call raises when the network, the token or the server fails: transport errors of the HTTP
    library huggingface_hub uses (its ``errors.HTTPError``), ``HfHubHTTPError`` (an OSError), connection errors
    (OSError), offline mode, and a malformed repo id."""
    from huggingface_hub import errors

    return (getattr(errors, "HTTPError", OSError), OSError, errors.HFValidationError)


def _one_line(exc: BaseException) -> str:
    """An exception as one short line (Hub errors carry multi-line server bodies and request ids)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text[:300]}{'...' if len(text) > 300 else ''}"


# --------------------------------------------------------------------------- content digests & indexes
def index_rel(task_id: str) -> str:
    """Repo path of a non-redistributable task's index."""
    return f"data/{task_id}/{INDEX_FILE}"


def shard_digest(path: Path) -> tuple[list[str], str]:
    """(ids in row order, content digest) of one Parquet shard.

    The digest covers what a model sees and is scored on (ids, question, choices,
    answer, answer type, decoded image pixels), not the file bytes: an index task
    rebuilt from the user's copy is checked against it, and Parquet bytes may differ
    across library versions while the content does not.
    """
    h = hashlib.sha256()
    ids: list[str] = []
    for row in iter_rows(path, columns=["id", "question", "choices", "answer", "answer_type", "images"]):
        ids.append(row["id"])
        h.update(json.dumps([row["id"], row["question"], row["choices"], row["answer"], row["answer_type"]]).encode())
        for img in row["images"] or []:
            h.update(image_digest(img))
        h.update(b"\n")
    return ids, "sha256:" + h.hexdigest()


def task_index(spec: BenchmarkSpec, root: Path, task: TaskSpec, info: dict[str, Any]) -> dict[str, Any]:
    """The published stand-in for a non-redistributable task: ids + source rule + digests, no content."""
    splits: dict[str, Any] = {}
    for split in SPLITS:
        path = shard_path(root, task.id, split)
        if split == "validation" and not path.is_file():  # a version without a validation split
            continue
        ids, digest = shard_digest(path)
        rel = path.relative_to(root).as_posix()
        splits[split] = {"ids": ids, "content_digest": digest, "file": rel, "sha256": info["files"].get(rel)}
    return {
        "benchmark": spec.name,
        "task": task.id,
        "source": task.source.model_dump(mode="json"),
        "subsampling": spec.subsampling.model_dump(mode="json"),
        "splits": splits,
        "note": (
            f"The license of {task.source.dataset} ({task.source.license}) does not allow redistribution. "
            f"Rebuild with `drake-bench download {spec.name} --task {task.id} --source-dir <your copy>`."
        ),
    }


# --------------------------------------------------------------------------- publish
def publish_plan(root: Path, spec: BenchmarkSpec | None = None) -> tuple[list[Any], dict[str, Any]]:
    """The exact ``CommitOperationAdd`` list a publish would send, and the published ``build_info``.

    Verifies the local build first (every shard's hash, the manifest hash, no failed
    tasks): publishing a broken build would pin a broken revision forever.
    """
    from huggingface_hub import CommitOperationAdd

    root = Path(root)
    bench = BuiltBenchmark.open(root)
    info = bench.info
    spec = load_benchmark(spec if spec is not None else info["benchmark"])
    if info.get("benchmark") != spec.name:
        raise DrakeBenchError(f"{root / BUILD_INFO}: built benchmark {info.get('benchmark')!r} is not {spec.name!r}")
    expected = spec.content_hash or manifest_dict(spec)["content_hash"]
    if info.get("manifest_hash") != expected:
        raise IntegrityError(
            f"{root / BUILD_INFO}: built from manifest {info.get('manifest_hash')}, but {spec.name!r} is now {expected}; "
            "rebuild before publishing"
        )
    if info.get("failed_tasks"):
        raise DrakeBenchError(
            f"{root}: tasks {info['failed_tasks']} failed to build; fix their sources and rebuild before publishing"
        )
    bench.verify()
    built = set(info.get("sizes", {}))
    index_tasks = sorted(t.id for t in spec.tasks if t.id in built and not t.source.redistributable)

    ops: list[Any] = []
    files: dict[str, str] = {}
    for rel in sorted(info["files"]):
        task_id = task_of(rel)
        if task_id in index_tasks:
            continue
        ops.append(CommitOperationAdd(path_in_repo=rel, path_or_fileobj=str(root / rel)))
        files[rel] = info["files"][rel]
    for task_id in index_tasks:
        payload = json_bytes(task_index(spec, root, spec.task(task_id), info))
        ops.append(CommitOperationAdd(path_in_repo=index_rel(task_id), path_or_fileobj=payload))
        files[index_rel(task_id)] = hashlib.sha256(payload).hexdigest()
    published = {
        **info,
        "files": dict(sorted(files.items())),
        "data_hash": data_hash(files),
        "built_data_hash": info["data_hash"],
        "index_tasks": index_tasks,
    }
    card = render_card(spec, published, index_tasks=index_tasks).encode()
    head = [
        CommitOperationAdd(path_in_repo=CARD_FILE, path_or_fileobj=card),
        CommitOperationAdd(path_in_repo=BUILD_INFO, path_or_fileobj=json_bytes(published)),
    ]
    ops = head + sorted(ops, key=lambda op: op.path_in_repo)
    return ops, published


def publish(
    root: str | Path,
    repo_id: str,
    revision_tag: str | None = None,
    dry_run: bool = False,
    *,
    spec: BenchmarkSpec | str | None = None,
    private: bool | None = None,
    commit_message: str | None = None,
    api: Any = None,
) -> list[Any]:
    """Publish a built benchmark as a Hub dataset repo; returns the commit operations.

    With ``dry_run`` nothing touches the network: the returned operations (paths
    and ``upload_info.size``) are exactly what would be uploaded. Otherwise the repo
    is created if needed, one commit uploads everything, and ``revision_tag`` tags
    that commit (tags are refused if they exist: a published revision is immutable).
    """
    ops, published = publish_plan(Path(root), load_benchmark(spec) if spec is not None else None)
    if dry_run:
        return ops
    if api is None:
        from huggingface_hub import HfApi

        api = HfApi()
    message = commit_message or (
        f"drake_bench: {published['benchmark']} {published.get('version', '')} (data {published['data_hash'][:19]})"
    )
    where = f"datasets/{repo_id}"
    done = "nothing was uploaded"
    try:
        api.create_repo(repo_id, repo_type=REPO_TYPE, exist_ok=True, private=private)
        commit = api.create_commit(repo_id, ops, commit_message=message, repo_type=REPO_TYPE)
        done = f"commit {commit.oid} was uploaded but not tagged {revision_tag!r}"
        if revision_tag:
            api.create_tag(
                repo_id,
                tag=revision_tag,
                revision=commit.oid,
                repo_type=REPO_TYPE,
                tag_message=f"{published['benchmark']} data {published['data_hash']}",
            )
    except DrakeBenchError:
        raise
    except _network_errors() as exc:
        raise HubError(
            f"publishing {published['benchmark']} to {where} failed ({done}): {_one_line(exc)}. Check the network "
            "and your token (`hf auth login`, write access to the repo), then run the same command again"
        ) from None
    return ops


# --------------------------------------------------------------------------- HF cache
def repo_cache_folder(repo_id: str, cache_dir: str | Path | None = None, repo_type: str = REPO_TYPE) -> Path:
    """``<cache>/datasets--<org>--<name>`` (``models--...`` for a model repo), as huggingface_hub lays it out."""
    from huggingface_hub import constants
    from huggingface_hub.file_download import repo_folder_name

    base = Path(cache_dir) if cache_dir is not None else Path(constants.HF_HUB_CACHE)
    return base / repo_folder_name(repo_id=repo_id, repo_type=repo_type)


def cached_revisions(repo_id: str, cache_dir: str | Path | None = None) -> list[str]:
    """Refs (branches, tags) and commits of ``repo_id`` present in the local Hub cache, for error messages."""
    folder = repo_cache_folder(repo_id, cache_dir)
    refs = (
        sorted(p.relative_to(folder / "refs").as_posix() for p in (folder / "refs").rglob("*") if p.is_file())
        if (folder / "refs").is_dir()
        else []
    )
    commits = sorted(p.name for p in (folder / "snapshots").iterdir()) if (folder / "snapshots").is_dir() else []
    return refs + commits


def add_to_hf_cache(
    root: str | Path,
    repo_id: str,
    commit: str | None = None,
    refs: Sequence[str] = ("main",),
    cache_dir: str | Path | None = None,
    spec: BenchmarkSpec | str | None = None,
) -> str:
    """Place a local build in the Hub cache as if ``repo_id`` had been downloaded at ``commit``; returns the commit.

    The files are exactly those :func:`publish` would upload, laid out as
    ``huggingface_hub`` does (``blobs/<etag>``, ``snapshots/<commit>/<path>`` symlinks,
    ``refs/<name>``). Uses: air-gapped clusters (copy a build in, then everything
    resolves through ``hf_hub_download`` with ``HF_HUB_OFFLINE=1``) and tests.
    Parquet blobs are named by sha256 (LFS etag), small files by git blob sha1.
    """
    ops, published = publish_plan(Path(root), load_benchmark(spec) if spec is not None else None)
    if commit is None:
        commit = hashlib.sha1(published["data_hash"].encode() + CARD_FILE.encode()).hexdigest()

    def payloads() -> Iterable[tuple[str, bytes]]:
        for op in ops:
            with op.as_file() as f:
                yield op.path_in_repo, f.read()

    return place_in_hf_cache(payloads(), repo_id, commit, refs=refs, cache_dir=cache_dir)


LFS_SUFFIXES = (".parquet", ".safetensors", ".bin")
"""Files the Hub stores through LFS: their cache blob is named by sha256, other files' by git blob sha1."""


def place_in_hf_cache(
    files: Iterable[tuple[str, bytes]],
    repo_id: str,
    commit: str,
    refs: Sequence[str] = ("main",),
    cache_dir: str | Path | None = None,
    repo_type: str = REPO_TYPE,
) -> str:
    """Write ``(path in repo, bytes)`` pairs into the Hub cache as revision ``commit`` of ``repo_id``; returns the commit.

    The layout is huggingface_hub's (``blobs/<etag>``, ``snapshots/<commit>/<path>`` symlinks, ``refs/<name>``),
    so ``hf_hub_download`` and ``from_pretrained`` find the files with ``HF_HUB_OFFLINE=1``. Shared by
    :func:`add_to_hf_cache` (a built benchmark, a dataset repo) and
    :func:`drake_bench.models.shipped.add_shipped_to_hf_cache` (a shipped tiny checkpoint, a model repo).
    """
    from huggingface_hub.utils.sha import git_hash

    folder = repo_cache_folder(repo_id, cache_dir, repo_type)
    (folder / "blobs").mkdir(parents=True, exist_ok=True)
    for path_in_repo, payload in files:
        etag = hashlib.sha256(payload).hexdigest() if path_in_repo.endswith(LFS_SUFFIXES) else git_hash(payload)
        blob = folder / "blobs" / etag
        if not blob.exists():
            blob.write_bytes(payload)
        pointer = folder / "snapshots" / commit / path_in_repo
        pointer.parent.mkdir(parents=True, exist_ok=True)
        if pointer.exists() or pointer.is_symlink():
            pointer.unlink()
        try:
            pointer.symlink_to(os.path.relpath(blob, pointer.parent))
        except OSError:  # no symlinks (Windows without developer mode): huggingface_hub copies too
            shutil.copyfile(blob, pointer)
    for ref in refs:
        path = folder / "refs" / ref
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(commit)
    return commit


# --------------------------------------------------------------------------- fetch
def _hub_errors() -> tuple[type[BaseException], ...]:
    from huggingface_hub.errors import (
        EntryNotFoundError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    return RevisionNotFoundError, RepositoryNotFoundError, EntryNotFoundError, LocalEntryNotFoundError


def _download(
    repo_id: str, filename: str, revision: str, cache_dir: str | Path | None, local_files_only: bool, what: str
) -> Path:
    """``hf_hub_download`` with errors that name the repo, revision and file at fault."""
    from huggingface_hub import constants, hf_hub_download
    from huggingface_hub.errors import (
        EntryNotFoundError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    offline = local_files_only or constants.is_offline_mode()
    where = f"{repo_id}@{revision}"
    try:
        return Path(
            hf_hub_download(
                repo_id,
                filename,
                repo_type=REPO_TYPE,
                revision=revision,
                cache_dir=cache_dir,
                local_files_only=local_files_only,
            )
        )
    except RevisionNotFoundError:
        raise RevisionNotFound(f"revision {revision!r} does not exist in Hub dataset repo {repo_id!r}") from None
    except RepositoryNotFoundError:
        raise DataNotBuiltError(
            f"Hub dataset repo {repo_id!r} not found (or private/gated without a valid token) while fetching {what}"
        ) from None
    except LocalEntryNotFoundError:
        known = cached_revisions(repo_id, cache_dir)
        cache = repo_cache_folder(repo_id, cache_dir)
        if offline and not _revision_cached(repo_id, revision, cache_dir):
            raise RevisionNotFound(
                f"revision {revision!r} of {repo_id!r} is not in the local Hub cache {cache} and offline mode is on "
                f"(HF_HUB_OFFLINE / local_files_only); cached revisions: {known or 'none'}. "
                "Go online once to download it, or pick a cached revision."
            ) from None
        mode = "offline mode is on" if offline else "the Hub could not be reached"
        raise DataNotBuiltError(
            f"{filename} ({what}) of {where} is not in the local Hub cache {cache} and {mode}; "
            "download it once online (drake-bench download) before working offline"
        ) from None
    except EntryNotFoundError:
        raise DataNotBuiltError(f"{where} has no file {filename} ({what})") from None
    except _network_errors() as exc:
        raise HubError(
            f"downloading {filename} ({what}) of Hub dataset {where} failed: {_one_line(exc)}. Check the network "
            "(and your token for a private or gated repo) and run again, or work from the local cache with --offline"
        ) from None


def _revision_cached(repo_id: str, revision: str, cache_dir: str | Path | None) -> bool:
    folder = repo_cache_folder(repo_id, cache_dir)
    return (folder / "refs" / revision).is_file() or (folder / "snapshots" / revision).is_dir()


def _check_sha256(path: Path, expected: str, rel: str, repo_id: str, revision: str, commit: str) -> None:
    actual = file_sha256(path)
    if actual != expected:
        blob = Path(os.path.realpath(path))
        raise IntegrityError(
            f"{rel} of {repo_id}@{revision} (commit {commit}) has sha256 {actual}, but {BUILD_INFO} of that "
            f"revision records {expected}: the cached file {blob} was modified or corrupted. Delete it (or run "
            "`hf cache delete`) and download again."
        )


def _link(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.is_symlink() or dst.exists():
        dst.unlink()
    try:
        dst.symlink_to(Path(os.path.realpath(src)))
    except OSError:
        shutil.copyfile(src, dst)


def default_fetch_dir(repo_id: str, commit: str) -> Path:
    """Where fetched revisions are assembled: ``$DRAKE_BENCH_HOME/hub/datasets--org--name/<commit>``."""
    from huggingface_hub.file_download import repo_folder_name

    return data_home() / "hub" / repo_folder_name(repo_id=repo_id, repo_type=REPO_TYPE) / commit


def _rebuild_index_task(
    spec: BenchmarkSpec, task: TaskSpec, index: dict[str, Any], source_dir: Path, out: Path, where: str
) -> dict[str, str]:
    """Rebuild a non-redistributable task from the user's copy, in the published row order; returns its shard hashes."""
    from drake_bench.benchmarks.store import write_split
    from drake_bench.loaders import get_loader

    loader = get_loader(task.source.loader)
    try:
        pool = {s.id: s for s in loader.load(task, source_dir)}
    except DrakeBenchError:
        raise
    except Exception as exc:
        raise SourceError(
            f"task {task.id!r}: source loader {loader.name!r} failed reading {source_dir}: {type(exc).__name__}: {exc}"
        ) from exc
    hashes: dict[str, str] = {}
    for split in (s for s in SPLITS if s in index["splits"]):  # an index of a version without validation has none
        entry = index["splits"][split]
        missing = [i for i in entry["ids"] if i not in pool]
        if missing:
            raise SourceError(
                f"task {task.id!r} ({where}): your copy of {task.source.dataset} under {source_dir} lacks "
                f"{len(missing)} of the {len(entry['ids'])} {split} items the index names, e.g. {missing[:5]}; "
                "check the source version against the index's source.revision"
            )
        path = write_split(out, task.id, split, [pool[i] for i in entry["ids"]], spec.storage)
        _, digest = shard_digest(path)
        if digest != entry["content_digest"]:
            raise IntegrityError(
                f"task {task.id!r} ({where}): {split} rebuilt from {source_dir} has content digest {digest}, but the "
                f"published index records {entry['content_digest']}: your copy of {task.source.dataset} differs from "
                "the one the benchmark was built from"
            )
        hashes[path.relative_to(out).as_posix()] = file_sha256(path)
    return hashes


def _previous_fetch(out: Path, commit: str) -> dict[str, Any]:
    """What an earlier fetch of the same commit into ``out`` holds (files still on disk), so fetches accumulate.

    ``out`` may be any folder (``--out``), and its record anything: one that does not read as a fetch's record (not
    UTF-8 or JSON, nested or sized past a build record, file paths out of the folder) is no earlier fetch. Only the
    tasks fetched now are then recorded (the others are fetched again when asked for), and a warning says so."""
    from drake_bench.core.json_files import MANIFEST_MAX_BYTES, read_json
    from drake_bench.errors import JSONFileError

    path = out / BUILD_INFO

    def none(why: str) -> dict[str, Any]:
        warnings.warn(
            f"{why}; not the record of an earlier fetch, so it is replaced by one of the tasks fetched now",
            RuntimeWarning,
            stacklevel=3,
        )
        return {}

    try:  # the limit every build record is read with
        prev = read_json(path, what="record of an earlier fetch", max_bytes=MANIFEST_MAX_BYTES)
    except JSONFileError as exc:
        return {} if exc.missing else none(str(exc))
    if not isinstance(prev, dict):
        return none(f"{path} is not a JSON object")
    if prev.get("commit") != commit:
        return {}
    files = prev.get("files", {})
    if not isinstance(files, dict) or not all(isinstance(h, str) and _inside(rel) for rel, h in files.items()):
        return none(f"{path}: its 'files' is not an object of paths inside {out} and their sha256")
    for key in ("fetched_tasks", "rebuilt_tasks"):
        if not isinstance(prev.get(key, []), list) or not all(isinstance(t, str) for t in prev.get(key, [])):
            return none(f"{path}: its {key!r} is not a list of task ids")
    prev["files"] = {rel: h for rel, h in files.items() if (out / rel).exists()}
    return prev


def _inside(rel: str) -> bool:
    """Whether ``rel`` is a relative path (posix) that stays inside the folder it is relative to."""
    parts = rel.split("/")
    return bool(rel) and not rel.startswith("/") and "\\" not in rel and ".." not in parts


TASK_INDEX_MAX_BYTES = 64 << 20
"""The most bytes of a published task index (64 MiB, the limit of a result file): it lists every item id of the
task's splits, a few MB for the largest pool a manifest draws; a larger file is no index."""


def _read_index(path: Path, where: str) -> dict[str, Any]:
    """A non-redistributable task's published index, downloaded: :class:`IntegrityError` naming the file if it does
    not read as one (its sha256 is the published one, but a publisher's file may hold anything)."""
    from drake_bench.core.json_files import read_json
    from drake_bench.errors import JSONFileError

    try:
        index = read_json(path, what=f"task index of {where}", max_bytes=TASK_INDEX_MAX_BYTES)
    except JSONFileError as exc:
        raise IntegrityError(f"{exc} (cached file {path})") from None
    splits = index.get("splits") if isinstance(index, dict) else None
    if not isinstance(splits, dict) or not all(
        isinstance(e, dict)
        and isinstance(e.get("ids"), list)
        and all(isinstance(i, str) for i in e["ids"])
        and isinstance(e.get("content_digest"), str)
        for e in splits.values()
    ):
        raise IntegrityError(
            f"{path} is not a task index of {where}: no 'splits' object of item ids and content digests"
        )
    return index


def fetch_benchmark(
    spec: BenchmarkSpec | str,
    revision: str,
    tasks: list[str] | None = None,
    cache_dir: str | Path | None = None,
    repo_id: str | None = None,
    *,
    source_dir: str | Path | None = None,
    local_dir: str | Path | None = None,
    local_files_only: bool = False,
    show_progress: bool = True,
) -> Path:
    """Fetch ``tasks`` (default: all) of a published revision; returns a folder :class:`BuiltBenchmark` can open.

    Downloads ``build_info.json`` and only the requested tasks' shards through
    ``hf_hub_download`` (Hub cache, offline mode and tokens as usual), pins every file
    to the commit the revision resolved to, and checks each shard's sha256 (and the
    manifest hash) before returning. Raises :class:`RevisionNotFound` for an unknown
    revision, :class:`IntegrityError` for a modified file or a build of another
    manifest, :class:`DataNotBuiltError` for a task the revision does not hold.
    """
    spec = load_benchmark(spec)
    repo_id = repo_id or spec.hub_repo
    if not repo_id:
        raise DrakeBenchError(
            f"benchmark {spec.name!r} has no hub_repo in its manifest; pass repo_id= (--repo) to fetch it"
        )
    if not revision:
        raise RevisionNotFound(
            f"a revision (tag, branch or commit) is required to fetch {spec.name!r} from {repo_id!r}"
        )
    wanted = list(dict.fromkeys(tasks)) if tasks is not None else [t.id for t in spec.tasks]
    for t in wanted:
        spec.task(t)  # clear error on an unknown task name

    info_path = _download(repo_id, BUILD_INFO, revision, cache_dir, local_files_only, "the build's file list")
    commit = info_path.parent.name
    where = f"{repo_id}@{revision}" + (f" (commit {commit})" if commit != revision else "")
    from drake_bench.core.json_files import MANIFEST_MAX_BYTES, read_json
    from drake_bench.errors import JSONFileError

    try:  # a file from the Hub: whatever it holds, one located error
        info = read_json(info_path, what=f"{BUILD_INFO} of {where}", max_bytes=MANIFEST_MAX_BYTES)
    except JSONFileError as exc:
        raise IntegrityError(f"{exc} (cached file {info_path})") from None
    if not isinstance(info, dict):
        raise IntegrityError(f"{BUILD_INFO} of {where} is not a JSON object: cached file {info_path}")
    if info.get("benchmark") != spec.name:
        raise IntegrityError(f"{where} holds benchmark {info.get('benchmark')!r}, not {spec.name!r}")
    expected = spec.content_hash or manifest_dict(spec)["content_hash"]
    if info.get("manifest_hash") != expected:
        raise IntegrityError(
            f"{where} was built from manifest {info.get('manifest_hash')}, but your {spec.name!r} manifest is "
            f"{expected}: this revision does not match your drake_bench version (upgrade, or fetch the revision "
            "published for this manifest)"
        )
    recorded: dict[str, str] = info.get("files", {})
    if data_hash(recorded) != info.get("data_hash"):
        raise IntegrityError(
            f"{BUILD_INFO} of {where}: data_hash {info.get('data_hash')} is not the hash of its file list "
            f"({data_hash(recorded)}); the revision or the cached file {info_path} was edited"
        )
    index_tasks = set(info.get("index_tasks", []))
    if info.get("failed_tasks"):
        bad = sorted(set(wanted) & set(info["failed_tasks"]))
        if bad:
            raise DataNotBuiltError(f"{where}: tasks {bad} failed to build in this revision and are absent")

    out = Path(local_dir) if local_dir is not None else default_fetch_dir(repo_id, commit)
    out.mkdir(parents=True, exist_ok=True)
    plan: list[tuple[str, str]] = []  # (task, rel)
    for t in wanted:
        rels = (
            [index_rel(t)]
            if t in index_tasks
            else sorted(r for r in recorded if r.startswith(f"data/{t}/") and r.endswith(".parquet"))
        )
        if not rels:
            raise DataNotBuiltError(
                f"{where} does not contain task {t!r} (built tasks: {sorted(info.get('sizes', {}))})"
            )
        plan += [(t, r) for r in rels]

    fetched: dict[str, str] = {}
    checked: dict[str, dict[str, Any]] = {}  # what was just hashed, so the first run does not hash it again
    for task_id, rel in progress(plan, description=f"fetching {spec.name}@{revision}", enabled=show_progress):
        path = _download(repo_id, rel, commit, cache_dir, local_files_only, f"task {task_id}")
        key = _stat_key(path)
        _check_sha256(path, recorded[rel], rel, repo_id, revision, commit)
        if task_id in index_tasks:
            if source_dir is None:
                task = spec.task(task_id)
                raise DataNotBuiltError(
                    f"task {task_id!r} of {where} is published as an index only: the license of "
                    f"{task.source.dataset} ({task.source.license}) forbids redistribution. Pass source_dir= "
                    "(--source-dir) pointing at your own copy of the source to rebuild it locally"
                )
            index = _read_index(path, where)
            fetched.update(_rebuild_index_task(spec, spec.task(task_id), index, Path(source_dir), out, where))
        else:
            _link(path, out / rel)
            fetched[rel] = recorded[rel]
            if key is not None and _stat_key(out / rel) == key:  # the link resolves to the blob just hashed
                checked[rel] = {**key, "sha256": recorded[rel]}

    previous = _previous_fetch(out, commit)
    fetched = {**previous.get("files", {}), **fetched}
    local_info = {
        **info,
        "files": dict(sorted(fetched.items())),
        "published_files": dict(sorted(recorded.items())),  # what the data hash is over (see BuiltBenchmark.open)
        "repo_id": repo_id,
        "revision": revision,
        "commit": commit,
        "fetched_tasks": sorted(set(wanted) | set(previous.get("fetched_tasks", []))),
        "rebuilt_tasks": sorted((set(wanted) & index_tasks) | set(previous.get("rebuilt_tasks", []))),
    }
    tmp = out / (BUILD_INFO + ".tmp")
    tmp.write_text(json.dumps(local_info, indent=2, sort_keys=True) + "\n")
    tmp.replace(out / BUILD_INFO)
    if checked:
        _VerifiedCache(out).update(files=checked)
    return out


def fetch_tasks_for_clients(spec: BenchmarkSpec, clients: Iterable[int], unseen: bool = False) -> list[str]:
    """Task ids a set of clients needs (their streams, in order), plus the unseen tasks when asked."""
    tasks: list[str] = []
    for cid in clients:
        tasks += spec.client(cid).tasks
    if unseen:
        tasks += spec.unseen_tasks
    return list(dict.fromkeys(tasks))
