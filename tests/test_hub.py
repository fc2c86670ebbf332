"""Publish and fetch through the real huggingface_hub code paths, without network.

Publishing is checked on its dry-run operations (real ``CommitOperationAdd`` objects)
and on the calls it makes to an HfApi stand-in. Fetching runs ``hf_hub_download``'s
real offline path over a Hub cache laid out exactly as huggingface_hub does
(``blobs/``, ``refs/``, ``snapshots/<commit>/``), which ``scan_cache_dir`` must accept.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import toy_spec

from drake_bench.benchmarks.hub import (
    RevisionNotFound,
    add_to_hf_cache,
    fetch_benchmark,
    fetch_tasks_for_clients,
    index_rel,
    publish,
    repo_cache_folder,
)
from drake_bench.benchmarks.manifest import manifest_dict, parse_manifest
from drake_bench.benchmarks.spec import BenchmarkSpec
from drake_bench.benchmarks.store import BUILD_INFO, BuiltBenchmark, file_sha256, shard_path
from drake_bench.errors import DataNotBuiltError, IntegrityError, SourceError

REPO = "drake-test/toy"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
NC_TASK = "c1-t1"  # published as an index only


def licensed_spec() -> BenchmarkSpec:
    """2 clients x 2 tasks + 1 unseen; one task's source forbids redistribution."""
    data = manifest_dict(toy_spec(n_clients=2, tasks_per_client=2))
    data.pop("content_hash")
    data["hub_repo"] = REPO
    for t in data["tasks"]:
        if t["id"] == NC_TASK:
            t["source"].update(license="CC BY-NC-ND 4.0", redistributable=False, citation="@misc{nc, title={NC}}")
        else:
            t["source"].update(license="cc-by-4.0", citation=f"@misc{{{t['id'].replace('-', '')}, title={{T}}}}")
    return parse_manifest(data, where="licensed toy")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, toy_loader) -> tuple[BenchmarkSpec, Path]:
    from drake_bench.benchmarks.build import build_benchmark

    spec = licensed_spec()
    root = build_benchmark(spec, out=tmp_path_factory.mktemp("lic") / "built", show_progress=False)
    return spec, root


@pytest.fixture()
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """HF_HUB_OFFLINE on (env and the constant huggingface_hub read at import) and a private Hub cache."""
    from huggingface_hub import constants

    cache = tmp_path / "hf-cache"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("DRAKE_BENCH_HOME", str(tmp_path / "home"))
    return cache


@pytest.fixture()
def cached(built, offline: Path) -> tuple[BenchmarkSpec, Path, Path]:
    spec, root = built
    add_to_hf_cache(root, REPO, commit=COMMIT, refs=("main", "v1.0"), cache_dir=offline, spec=spec)
    return spec, root, offline


class NoNetworkApi:
    """An HfApi stand-in that fails the test if anything tries to reach the Hub."""

    def __getattr__(self, name):
        raise AssertionError(f"dry run called HfApi.{name}")


# --------------------------------------------------------------------------- publish
def test_dry_run_lists_exact_operations(built) -> None:
    from huggingface_hub import CommitOperationAdd

    spec, root = built
    ops = publish(root, REPO, "v1.0", dry_run=True, spec=spec, api=NoNetworkApi())
    assert all(isinstance(op, CommitOperationAdd) for op in ops)
    paths = [op.path_in_repo for op in ops]
    content_tasks = ["c1-t0", "c2-t0", "c2-t1", "unseen-0"]
    expected = ["README.md", BUILD_INFO] + sorted(
        [shard_path(Path(""), t, s).as_posix() for t in content_tasks for s in ("train", "test")] + [index_rel(NC_TASK)]
    )
    assert paths == expected
    # shard sizes and hashes are those of the local files
    for op in ops:
        if op.path_in_repo.endswith(".parquet"):
            assert op.upload_info.size == (root / op.path_in_repo).stat().st_size
            assert op.upload_info.sha256.hex() == file_sha256(root / op.path_in_repo)
    # nothing of the non-redistributable task's content leaves the machine
    assert not any(p.startswith(f"data/{NC_TASK}/") and p.endswith(".parquet") for p in paths)
    index_op = ops[paths.index(index_rel(NC_TASK))]
    index = json.loads(index_op.path_or_fileobj)
    assert index["source"]["redistributable"] is False and index["source"]["license"] == "CC BY-NC-ND 4.0"
    built_info = BuiltBenchmark.open(root).info
    assert len(index["splits"]["train"]["ids"]) == built_info["sizes"][NC_TASK]["train"]
    raw = index_op.path_or_fileobj.decode()
    assert f"q {NC_TASK} " not in raw and "yes" not in raw  # no questions, no answers
    # the published build_info lists exactly the uploaded data files, with matching hashes
    published = json.loads(ops[1].path_or_fileobj)
    assert sorted(published["files"]) == paths[2:]
    assert published["index_tasks"] == [NC_TASK]
    assert published["files"][index_rel(NC_TASK)] == index_op.upload_info.sha256.hex()
    # the published card has no config for the index-only task, nor for client 1 who needs it
    card = ops[0].path_or_fileobj.decode()
    assert f"config_name: {NC_TASK}\n" not in card and "config_name: client_1\n" not in card
    assert "config_name: client_2\n" in card and "config_name: c1-t0\n" in card


def test_publish_creates_repo_commits_and_tags(built) -> None:
    spec, root = built
    calls: list[tuple[str, tuple, dict]] = []

    class RecordingApi:
        def create_repo(self, *a, **k):
            calls.append(("create_repo", a, k))

        def create_commit(self, *a, **k):
            calls.append(("create_commit", a, k))
            return type("CommitInfo", (), {"oid": "f" * 40})()

        def create_tag(self, *a, **k):
            calls.append(("create_tag", a, k))

    ops = publish(root, REPO, "v1.0", spec=spec, api=RecordingApi())
    assert [c[0] for c in calls] == ["create_repo", "create_commit", "create_tag"]
    assert calls[0][1] == (REPO,) and calls[0][2]["repo_type"] == "dataset" and calls[0][2]["exist_ok"] is True
    assert calls[1][1] == (REPO, ops) and calls[1][2]["repo_type"] == "dataset"
    assert (
        calls[2][2]["tag"] == "v1.0" and calls[2][2]["revision"] == "f" * 40 and calls[2][2]["repo_type"] == "dataset"
    )


def test_publish_refuses_a_tampered_build(built, tmp_path: Path) -> None:
    spec, root = built
    copy = tmp_path / "copy"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns(".arrow_cache"))
    shard = shard_path(copy, "c2-t0", "train")
    shard.write_bytes(shard.read_bytes() + b"x")
    with pytest.raises(IntegrityError, match="c2-t0/train"):
        publish(copy, REPO, "v1.0", dry_run=True, spec=spec)


# --------------------------------------------------------------------------- HF cache layout
def test_cache_layout_is_huggingface_hubs(cached) -> None:
    from huggingface_hub import scan_cache_dir

    spec, root, cache = cached
    folder = repo_cache_folder(REPO, cache)
    assert folder.name == "datasets--drake-test--toy"
    assert (folder / "refs" / "main").read_text() == COMMIT
    assert (folder / "refs" / "v1.0").read_text() == COMMIT
    pointer = folder / "snapshots" / COMMIT / shard_path(Path(""), "c2-t0", "train")
    assert pointer.is_symlink() and Path(os.path.realpath(pointer)).parent == (folder / "blobs").resolve()
    info = scan_cache_dir(cache)
    assert not info.warnings
    (repo,) = info.repos
    assert repo.repo_id == REPO and repo.repo_type == "dataset"
    (rev,) = repo.revisions
    assert rev.commit_hash == COMMIT and set(rev.refs) == {"main", "v1.0"}


# --------------------------------------------------------------------------- fetch
@pytest.mark.parametrize("revision", ["v1.0", "main", COMMIT])
def test_fetch_resolves_revision_offline_and_fetches_only_requested_tasks(
    cached, revision: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import huggingface_hub

    spec, root, cache = cached
    asked: list[tuple[str, str]] = []
    real = huggingface_hub.hf_hub_download

    def spy(repo_id, filename, **kwargs):
        asked.append((filename, kwargs["revision"]))
        return real(repo_id, filename, **kwargs)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", spy)
    out = fetch_benchmark(
        spec, revision, tasks=["c2-t0"], cache_dir=cache, local_dir=tmp_path / "view", show_progress=False
    )
    shards = [shard_path(Path(""), "c2-t0", s).as_posix() for s in ("train", "test")]
    assert sorted(f for f, _ in asked) == sorted([BUILD_INFO, *shards])
    assert all(rev == COMMIT for f, rev in asked if f != BUILD_INFO)  # pinned to the resolved commit
    store = BuiltBenchmark.open(out)
    store.verify()
    assert store.info["commit"] == COMMIT and store.info["revision"] == revision
    assert sorted(store.info["files"]) == sorted(shards)
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*.parquet")) == sorted(shards)
    original = BuiltBenchmark.open(root)
    n = original.size("c2-t0", "test")
    assert [s.id for s in store.samples("c2-t0", "test", range(n))] == [
        s.id for s in original.samples("c2-t0", "test", range(n))
    ]
    with pytest.raises(DataNotBuiltError, match="shard missing"):
        store.table("c1-t0", "train")


def test_fetch_default_folder_accumulates_tasks(cached) -> None:
    spec, root, cache = cached
    tasks = fetch_tasks_for_clients(spec, [2])
    assert tasks == ["c2-t0", "c2-t1"]
    first = fetch_benchmark(spec, "v1.0", tasks=tasks[:1], cache_dir=cache, show_progress=False)
    second = fetch_benchmark(spec, "v1.0", tasks=tasks[1:], cache_dir=cache, show_progress=False)
    assert first == second and first.name == COMMIT
    store = BuiltBenchmark.open(second)
    assert store.info["fetched_tasks"] == tasks
    store.verify()
    assert len(store.info["files"]) == 4


def test_fetch_works_from_a_partial_cache_and_names_what_is_missing(cached, tmp_path: Path) -> None:
    spec, root, cache = cached
    snap = repo_cache_folder(REPO, cache) / "snapshots" / COMMIT
    shutil.rmtree(snap / "data" / "c1-t0")
    out = fetch_benchmark(
        spec, "v1.0", tasks=["unseen-0"], cache_dir=cache, local_dir=tmp_path / "a", show_progress=False
    )
    BuiltBenchmark.open(out).verify()
    with pytest.raises(DataNotBuiltError, match=r"data/c1-t0/\w+-00000-of-00001.parquet.*offline mode"):
        fetch_benchmark(spec, "v1.0", tasks=["c1-t0"], cache_dir=cache, local_dir=tmp_path / "b", show_progress=False)


def test_missing_revision_is_a_clear_error(cached) -> None:
    spec, root, cache = cached
    with pytest.raises(RevisionNotFound, match=r"revision 'v9\.9'.*drake-test/toy.*offline.*v1\.0"):
        fetch_benchmark(spec, "v9.9", tasks=["c2-t0"], cache_dir=cache, show_progress=False)
    with pytest.raises(RevisionNotFound):
        fetch_benchmark(spec, "f" * 40, tasks=["c2-t0"], cache_dir=cache, show_progress=False)


def test_tampered_cached_shard_is_caught(cached, tmp_path: Path) -> None:
    spec, root, cache = cached
    pointer = repo_cache_folder(REPO, cache) / "snapshots" / COMMIT / "data" / "c2-t1" / "test-00000-of-00001.parquet"
    blob = Path(os.path.realpath(pointer))
    data = bytearray(blob.read_bytes())
    data[len(data) // 2] ^= 0xFF
    blob.write_bytes(bytes(data))
    with pytest.raises(
        IntegrityError, match=r"data/c2-t1/test-00000-of-00001\.parquet of drake-test/toy@v1\.0.*modified or corrupted"
    ):
        fetch_benchmark(spec, "v1.0", tasks=["c2-t1"], cache_dir=cache, local_dir=tmp_path / "v", show_progress=False)
    # untouched tasks still fetch
    fetch_benchmark(spec, "v1.0", tasks=["c2-t0"], cache_dir=cache, local_dir=tmp_path / "w", show_progress=False)


def test_tampering_after_fetch_is_caught_by_verify(cached, tmp_path: Path) -> None:
    spec, root, cache = cached
    out = fetch_benchmark(spec, "v1.0", tasks=["c2-t0"], cache_dir=cache, local_dir=tmp_path / "v", show_progress=False)
    blob = Path(os.path.realpath(out / "data" / "c2-t0" / "train-00000-of-00001.parquet"))
    blob.write_bytes(blob.read_bytes()[:-1] + b"\0")
    with pytest.raises(IntegrityError, match="train-00000-of-00001.parquet"):
        BuiltBenchmark.open(out).verify()


def test_a_fetched_folder_is_verified_when_read_without_hashing_twice(cached, tmp_path: Path, monkeypatch) -> None:
    """Fetch hashed the shards already: the first read only checks their stat; a later edit is refused on read,
    and the folder keeps citing the published data hash (which a partial fetch cannot recompute from its files)."""
    from drake_bench.benchmarks import store as store_mod
    from drake_bench.errors import DataIntegrityError

    spec, root, cache = cached
    out = fetch_benchmark(spec, "v1.0", tasks=["c2-t0"], cache_dir=cache, local_dir=tmp_path / "v", show_progress=False)
    published = json.loads((repo_cache_folder(REPO, cache) / "snapshots" / COMMIT / BUILD_INFO).read_text())
    calls: list[Path] = []
    real = store_mod.file_sha256
    monkeypatch.setattr(store_mod, "file_sha256", lambda p: (calls.append(Path(p)), real(p))[1])
    view = BuiltBenchmark.open(out)
    assert view.data_hash == published["data_hash"] and len(view.samples("c2-t0", "train", [0])) == 1
    assert calls == [] and view.verified_files == {
        "data/c2-t0/train-00000-of-00001.parquet": published["files"]["data/c2-t0/train-00000-of-00001.parquet"]
    }
    blob = Path(os.path.realpath(out / "data" / "c2-t0" / "test-00000-of-00001.parquet"))
    blob.write_bytes(blob.read_bytes()[:-1] + b"\0")
    with pytest.raises(
        DataIntegrityError, match=r"test-00000-of-00001\.parquet: sha256 .*drake-bench download toy --revision v1\.0"
    ):
        BuiltBenchmark.open(out).samples("c2-t0", "test", [0])


def test_publish_without_network_is_a_hub_error(built) -> None:
    from conftest import hub_httpx

    from drake_bench.errors import HubError

    httpx = hub_httpx()

    class Offline:
        def create_repo(self, *args, **kwargs):
            raise httpx.ConnectError("[Errno -3] Temporary failure in name resolution")

    spec, root = built
    with pytest.raises(
        HubError,
        match=r"^publishing toy to datasets/drake-test/toy failed \(nothing was uploaded\): "
        r"ConnectError: \[Errno -3\] Temporary failure in name resolution\. Check",
    ):
        publish(root, REPO, "v1.0", spec=spec, api=Offline())


def test_revision_built_from_another_manifest_is_refused(cached) -> None:
    spec, root, cache = cached
    data = manifest_dict(spec)
    data.pop("content_hash")
    data["version"] = "9.9.9"
    other = parse_manifest(data, where="edited")
    with pytest.raises(IntegrityError, match="built from manifest"):
        fetch_benchmark(other, "v1.0", tasks=["c2-t0"], cache_dir=cache, show_progress=False)


def test_unknown_task_and_missing_repo_id(cached) -> None:
    spec, root, cache = cached
    with pytest.raises(KeyError, match="unknown task 'nope'"):
        fetch_benchmark(spec, "v1.0", tasks=["nope"], cache_dir=cache)
    with pytest.raises(Exception, match="no hub_repo"):
        fetch_benchmark(toy_spec(), "v1.0", tasks=["c1-t0"], cache_dir=cache)


# --------------------------------------------------------------------------- index-only tasks
def test_index_task_needs_the_users_copy(cached, tmp_path: Path) -> None:
    spec, root, cache = cached
    with pytest.raises(DataNotBuiltError, match=r"index only.*CC BY-NC-ND 4.0.*--source-dir"):
        fetch_benchmark(spec, "v1.0", tasks=[NC_TASK], cache_dir=cache, local_dir=tmp_path / "v", show_progress=False)


def test_index_task_is_rebuilt_from_the_users_copy(cached, tmp_path: Path) -> None:
    spec, root, cache = cached
    src = tmp_path / "my-copy"
    src.mkdir()
    out = fetch_benchmark(
        spec,
        "v1.0",
        tasks=[NC_TASK, "c1-t0"],
        cache_dir=cache,
        source_dir=src,
        local_dir=tmp_path / "v",
        show_progress=False,
    )
    store = BuiltBenchmark.open(out)
    store.verify()
    assert store.info["rebuilt_tasks"] == [NC_TASK]
    original = BuiltBenchmark.open(root)
    for split in ("train", "test"):
        n = original.size(NC_TASK, split)
        got = store.samples(NC_TASK, split, range(n))
        want = original.samples(NC_TASK, split, range(n))
        assert [(s.id, s.question, s.answer) for s in got] == [(s.id, s.question, s.answer) for s in want]
        assert not (out / shard_path(Path(""), NC_TASK, split)).is_symlink()  # a local file, not a cache link


def test_index_task_rebuilt_from_a_copy_with_other_metadata_reads(
    cached, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, toy_loader
) -> None:
    """The published index checks what a model sees and is scored on; `source` and `meta` may differ between two
    copies of a dataset (another release of its annotations), so the publisher's full content digest is not held
    against the rebuilt shard when it is read."""
    spec, root, cache = cached
    real_load = toy_loader.load

    def annotated(task, source_dir):
        for s in real_load(task, source_dir):
            yield s.model_copy(update={"meta": {**s.meta, "release": "2.1"}})

    monkeypatch.setattr(toy_loader, "load", annotated)
    out = fetch_benchmark(
        spec,
        "v1.0",
        tasks=[NC_TASK],
        cache_dir=cache,
        source_dir=tmp_path,
        local_dir=tmp_path / "v",
        show_progress=False,
    )
    store = BuiltBenchmark.open(out)
    store.verify()
    assert store.samples(NC_TASK, "train", [0])[0].meta["release"] == "2.1"


def test_index_task_rebuild_detects_a_different_source(
    cached, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, toy_loader
) -> None:
    spec, root, cache = cached
    real_load = toy_loader.load

    def altered(task, source_dir):
        for s in real_load(task, source_dir):
            yield s.model_copy(update={"answer": "maybe"})

    monkeypatch.setattr(toy_loader, "load", altered)
    with pytest.raises(IntegrityError, match=r"content digest.*differs"):
        fetch_benchmark(
            spec,
            "v1.0",
            tasks=[NC_TASK],
            cache_dir=cache,
            source_dir=tmp_path,
            local_dir=tmp_path / "v",
            show_progress=False,
        )

    def truncated(task, source_dir):
        yield from list(real_load(task, source_dir))[:3]

    monkeypatch.setattr(toy_loader, "load", truncated)
    with pytest.raises(SourceError, match=r"lacks \d+ of the \d+ train items"):
        fetch_benchmark(
            spec,
            "v1.0",
            tasks=[NC_TASK],
            cache_dir=cache,
            source_dir=tmp_path,
            local_dir=tmp_path / "w",
            show_progress=False,
        )


# --------------------------------------------------------------------------- stream integration
def test_load_client_stream_with_revision_goes_through_fetch(cached) -> None:
    stream_mod = pytest.importorskip("drake_bench.streams.stream")
    spec, root, cache = cached
    store = stream_mod.open_built(spec, revision="v1.0", tasks=["c2-t0", "c2-t1"])
    assert store.info["commit"] == COMMIT and store.info["fetched_tasks"] == ["c2-t0", "c2-t1"]
    assert store.size("c2-t1", "train") == BuiltBenchmark.open(root).size("c2-t1", "train")


def test_online_revision_and_repo_errors_are_named(monkeypatch: pytest.MonkeyPatch, built) -> None:
    """The online error path: the Hub's RevisionNotFoundError / RepositoryNotFoundError become drake_bench errors."""
    import huggingface_hub
    from conftest import hub_httpx
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

    httpx = hub_httpx()  # the hub builds its errors on this module's responses
    spec, root = built
    # an error object only, never sent: the request just has to exist
    response = httpx.Response(404, request=httpx.Request("HEAD", "http://127.0.0.1/datasets/x/y/resolve/v9/f"))

    def raiser(exc):
        def fake(*args, **kwargs):
            raise exc

        return fake

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", raiser(RevisionNotFoundError("404", response=response)))
    with pytest.raises(RevisionNotFound, match=r"revision 'v9' does not exist in Hub dataset repo 'drake-test/toy'"):
        fetch_benchmark(spec, "v9", tasks=["c2-t0"], show_progress=False)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", raiser(RepositoryNotFoundError("404", response=response)))
    with pytest.raises(DataNotBuiltError, match=r"repo 'drake-test/toy' not found"):
        fetch_benchmark(spec, "v9", tasks=["c2-t0"], show_progress=False)
