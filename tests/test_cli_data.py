"""``drake-bench build / publish / download`` end to end, in-process, offline."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from conftest import toy_spec
from typer.testing import CliRunner

from drake_bench.benchmarks.manifest import manifest_dict, parse_manifest
from drake_bench.benchmarks.store import BUILD_INFO, BuiltBenchmark, shard_path
from drake_bench.cli import app

REPO = "drake-test/cli-toy"


def _run(*args: str):
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result, result.output + (result.stderr if result.stderr_bytes is not None else "")


@pytest.fixture()
def manifest(tmp_path: Path, toy_loader) -> Path:
    data = manifest_dict(toy_spec(n_clients=2, tasks_per_client=2))
    data.pop("content_hash")
    data["hub_repo"] = REPO
    for t in data["tasks"]:
        if t["id"] == "c1-t1":
            t["source"].update(license="research-only", redistributable=False)
    data["content_hash"] = manifest_dict(parse_manifest(data))["content_hash"]
    path = tmp_path / "toy.json"
    path.write_text(json.dumps(data))
    return path


@pytest.fixture()
def offline_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("DRAKE_BENCH_HOME", str(tmp_path / "home"))
    return tmp_path / "hf-cache"


def test_build_publish_dry_run_download(manifest: Path, offline_cache: Path, tmp_path: Path) -> None:
    from drake_bench.benchmarks.hub import add_to_hf_cache

    out = tmp_path / "built"
    result, text = _run("build", manifest, "--out", out)
    assert result.exit_code == 0, text
    assert (out / BUILD_INFO).is_file() and (out / "README.md").is_file()
    built = json.loads((out / BUILD_INFO).read_text())
    assert f"data hash {built['data_hash']}, content hash {built['content_hash']}" in " ".join(text.split())

    # dry run: one row per file with its exact byte size, nothing of c1-t1 but its index
    result, text = _run("publish", manifest, "--root", out, "--tag", "v1.0", "--dry-run")
    assert result.exit_code == 0, text
    assert "would upload to datasets/drake-test/cli-toy @ v1.0" in text and "dry run: nothing uploaded" in text
    shard = shard_path(Path(""), "c2-t0", "train").as_posix()
    size = (out / shard).stat().st_size
    assert re.search(rf"{re.escape(shard)}\s*│\s*{size}\s*│", text)
    assert "data/c1-t1/index.json" in text and "data/c1-t1/train-" not in text
    assert re.search(r"^11 files, \d+ bytes", text, re.M)  # card + build_info + 4 tasks x 2 shards + 1 index

    # download one client offline from the cache: only its tasks arrive, verified
    add_to_hf_cache(
        out, REPO, refs=("v1.0",), cache_dir=offline_cache, spec=parse_manifest(json.loads(manifest.read_text()))
    )
    view = tmp_path / "view"
    result, text = _run(
        "download", manifest, "--revision", "v1.0", "--client", "2", "--cache-dir", offline_cache, "--out", view
    )
    assert result.exit_code == 0, text
    assert "all hashes verified" in text
    store = BuiltBenchmark.open(view)
    store.verify()
    assert store.content_hash == built["content_hash"]  # the publisher's build: its content hash travels with it
    assert f"content hash {built['content_hash']}" in " ".join(text.split())
    assert store.info["fetched_tasks"] == ["c2-t0", "c2-t1"]
    assert sorted({p.parent.name for p in view.rglob("*.parquet")}) == ["c2-t0", "c2-t1"]

    # the index-only task needs the user's copy; with it, it is rebuilt
    result, text = _run(
        "download", manifest, "--revision", "v1.0", "--task", "c1-t1", "--cache-dir", offline_cache, "--out", view
    )
    assert result.exit_code == 1 and "research-only" in text and "--source-dir" in text
    result, text = _run(
        "download",
        manifest,
        "--revision",
        "v1.0",
        "--task",
        "c1-t1",
        "--cache-dir",
        offline_cache,
        "--out",
        view,
        "--source-dir",
        tmp_path,
    )
    assert result.exit_code == 0, text
    assert BuiltBenchmark.open(view).info["rebuilt_tasks"] == ["c1-t1"]


def test_download_errors_are_one_clear_line(manifest: Path, offline_cache: Path, tmp_path: Path) -> None:
    result, text = _run("download", manifest, "--revision", "v7", "--client", "1", "--cache-dir", offline_cache)
    assert result.exit_code == 1
    assert "error:" in text and "revision 'v7'" in text and "not in the local Hub cache" in text
    assert "Traceback" not in text
    result, text = _run("download", manifest, "--revision", "v7", "--client", "9", "--cache-dir", offline_cache)
    assert result.exit_code == 1 and "unknown client 9" in text


def test_download_catches_tampering(manifest: Path, offline_cache: Path, tmp_path: Path) -> None:
    from drake_bench.benchmarks.build import build_benchmark
    from drake_bench.benchmarks.hub import add_to_hf_cache, repo_cache_folder

    spec = parse_manifest(json.loads(manifest.read_text()))
    out = build_benchmark(spec, out=tmp_path / "built", show_progress=False)
    commit = add_to_hf_cache(out, REPO, refs=("v1.0",), cache_dir=offline_cache, spec=spec)
    pointer = (
        repo_cache_folder(REPO, offline_cache) / "snapshots" / commit / "data" / "c1-t0" / "test-00000-of-00001.parquet"
    )
    blob = Path(os.path.realpath(pointer))
    blob.write_bytes(blob.read_bytes().replace(b"PAR1", b"PAR2", 1))
    result, text = _run("download", manifest, "--revision", "v1.0", "--task", "c1-t0", "--cache-dir", offline_cache)
    assert result.exit_code == 1 and "c1-t0/test-00000-of-00001.parquet" in text and "modified or corrupted" in text


def test_build_reports_failed_tasks_and_exits_1(
    manifest: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, toy_loader
) -> None:
    from drake_bench.errors import SourceError

    real = toy_loader.load

    def broken(task, source_dir):
        if task.id == "c2-t1":
            raise SourceError(f"{source_dir}/c2-t1.jsonl: line 4 is not valid JSON (expected one item per line)")
        return real(task, source_dir)

    monkeypatch.setattr(toy_loader, "load", broken)
    out = tmp_path / "built"
    result, text = _run("build", manifest, "--out", out, "--source-dir", tmp_path)
    assert result.exit_code == 1
    assert "c2-t1.jsonl: line 4" in text and "the other 4 are kept" in text
    assert BuiltBenchmark.open(out).info["failed_tasks"] == ["c2-t1"]


def test_publish_without_repo_is_refused(toy_loader, tmp_path: Path) -> None:
    data = manifest_dict(toy_spec(n_clients=1, tasks_per_client=1))
    path = tmp_path / "norepo.json"
    path.write_text(json.dumps(data))
    result, text = _run("publish", path, "--root", tmp_path, "--dry-run")
    assert result.exit_code == 1 and "--repo" in text


def test_embedded_synth_goes_through_build_publish_download(
    offline_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """drake-synth takes the same path as a real benchmark: CLI build, publish dry run, offline download of one client."""
    from drake_bench.benchmarks.hub import add_to_hf_cache
    from drake_bench.benchmarks.manifest import load_benchmark

    monkeypatch.setenv("DRAKE_BENCH_SYNTH_SCALE", "0.02")  # tiny pools: the path, not the volume, is under test
    spec = load_benchmark("drake-synth")
    repo = "drake-test/drake-synth"
    out = tmp_path / "synth"
    result, text = _run("build", "drake-synth", "--out", out)
    assert result.exit_code == 0, text
    info = BuiltBenchmark.open(out).info
    assert info["embedded"] is True and len(info["sizes"]) == len(spec.tasks)
    assert (out / "README.md").is_file()

    result, text = _run("publish", "drake-synth", "--root", out, "--repo", repo, "--tag", "v0", "--dry-run")
    assert result.exit_code == 0, text
    assert re.search(rf"^{2 + len(info['files'])} files, \d+ bytes", text, re.M)

    add_to_hf_cache(out, repo, refs=("v0",), cache_dir=offline_cache, spec=spec)
    view = tmp_path / "view"
    result, text = _run(
        "download",
        "drake-synth",
        "--revision",
        "v0",
        "--client",
        "1",
        "--repo",
        repo,
        "--cache-dir",
        offline_cache,
        "--out",
        view,
    )
    assert result.exit_code == 0, text
    store = BuiltBenchmark.open(view)
    store.verify()
    client_tasks = spec.client(1).tasks
    assert store.info["fetched_tasks"] == sorted(client_tasks)
    assert sorted({p.parent.name for p in view.rglob("*.parquet")}) == sorted(client_tasks)
    t = client_tasks[0]
    n = store.size(t, "train")
    assert [s.id for s in store.samples(t, "train", range(n))] == [
        s.id for s in BuiltBenchmark.open(out).samples(t, "train", range(n))
    ]


# --------------------------------------------------------------------------- network failures
def _connection_refused(*args, **kwargs):
    from conftest import hub_httpx  # the transport huggingface_hub raises from when a host cannot be reached

    raise hub_httpx().ConnectError("[Errno 111] Connection refused")


def test_publish_without_network_is_one_line(manifest: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub

    class NoNetworkApi:
        def __init__(self, *args, **kwargs) -> None: ...

        create_repo = create_commit = create_tag = staticmethod(_connection_refused)

    out = tmp_path / "built"
    assert _run("build", manifest, "--out", out)[0].exit_code == 0
    monkeypatch.setattr(huggingface_hub, "HfApi", NoNetworkApi)
    result, text = _run("publish", manifest, "--root", out, "--tag", "v1.0")
    assert result.exit_code == 1 and not isinstance(result.exception, huggingface_hub.errors.HTTPError)
    assert len(set(text.strip().splitlines())) == 1 and "Traceback" not in text  # stderr may be echoed in output
    assert text.startswith("error: publishing toy to datasets/drake-test/cli-toy failed (nothing was uploaded)")
    assert "ConnectError: [Errno 111] Connection refused" in text and "run the same command again" in text


def test_download_without_network_is_one_line(manifest: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub

    monkeypatch.setenv("DRAKE_BENCH_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", _connection_refused)
    result, text = _run("download", manifest, "--revision", "v1.0", "--client", "1", "--cache-dir", tmp_path / "hf")
    assert result.exit_code == 1 and len(set(text.strip().splitlines())) == 1 and "Traceback" not in text
    assert text.startswith("error: downloading build_info.json")
    assert "drake-test/cli-toy@v1.0" in text and "ConnectError" in text and "--offline" in text
