"""The dataset card: front matter that huggingface_hub and datasets read, licenses, citations, choices."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import toy_spec

from drake_bench.benchmarks.card import CARD_FILE, card_licenses, card_metadata, render_card
from drake_bench.benchmarks.manifest import manifest_dict, parse_manifest
from drake_bench.benchmarks.sample import Sample
from drake_bench.benchmarks.spec import BenchmarkSpec, TaskSpec
from drake_bench.benchmarks.store import BUILD_INFO, BuiltBenchmark, shard_path
from drake_bench.errors import SourceError


def cited_spec() -> BenchmarkSpec:
    data = manifest_dict(toy_spec(n_clients=2, tasks_per_client=2))
    data.pop("content_hash")
    data["citation"] = "@article{drake, title={DRAKE}}"
    data["choices"] = [
        {"key": "split.ratio", "tag": "I", "decision": "8:2 when small", "reason": "paper silent"},
        {"key": "eval.others", "tag": "R", "decision": "cap Others at 3", "reason": "cost"},
    ]
    for t in data["tasks"]:
        t["source"]["license"] = "mit" if t["id"].startswith("c1") else "cc-by-4.0"
        t["source"]["citation"] = f"@misc{{src_{t['id'].replace('-', '_')}, title={{S}}}}"
    return parse_manifest(data, where="cited toy")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, toy_loader) -> tuple[BenchmarkSpec, Path]:
    from drake_bench.benchmarks.build import build_benchmark

    spec = cited_spec()
    return spec, build_benchmark(spec, out=tmp_path_factory.mktemp("card") / "built", show_progress=False)


def test_build_writes_a_card_huggingface_hub_can_parse(built) -> None:
    from huggingface_hub import DatasetCard

    spec, root = built
    card = DatasetCard.load(root / CARD_FILE)
    data = card.data.to_dict()
    names = [c["config_name"] for c in data["configs"]]
    assert names == [t.id for t in spec.tasks] + ["client_1", "client_2"]
    assert data["license"] == ["cc-by-4.0", "mit"]
    meta = data["drake_bench"]
    info = BuiltBenchmark.open(root).info
    assert meta["data_hash"] == info["data_hash"] and meta["manifest_hash"] == spec.content_hash
    assert [(c["key"], c["tag"]) for c in meta["choices"]] == [("split.ratio", "I"), ("eval.others", "R")]
    assert meta["tasks"]["c1-t0"]["license"] == "mit"
    # every data_files glob matches exactly the shards on disk
    for cfg in data["configs"]:
        for entry in cfg["data_files"]:
            globs = entry["path"] if isinstance(entry["path"], list) else [entry["path"]]
            for g in globs:
                assert len(list(root.glob(g))) == 1, g
    # body: every source citation, the benchmark citation, choices with their tags, every file hash
    for t in spec.tasks:
        assert t.source.citation in card.text
    assert "@article{drake" in card.text and "| split.ratio | [I] |" in card.text
    for rel, digest in info["files"].items():
        assert f"| `{rel}` | `{digest}` |" in card.text


def test_configs_load_with_datasets(built, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets

    spec, root = built
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "ds"))
    info = BuiltBenchmark.open(root).info
    task = datasets.load_dataset(str(root), "c2-t1", split="test", cache_dir=str(tmp_path / "ds"))
    assert len(task) == info["sizes"]["c2-t1"]["test"] and set(task["task_id"]) == {"c2-t1"}
    client = datasets.load_dataset(str(root), "client_1", split="train", cache_dir=str(tmp_path / "ds"))
    assert set(client["task_id"]) == {"c1-t0", "c1-t1"}
    assert len(client) == info["sizes"]["c1-t0"]["train"] + info["sizes"]["c1-t1"]["train"]
    assert client.features["images"].feature.__class__.__name__ == "Image"


def test_license_field() -> None:
    def with_licenses(*names: str):
        spec = toy_spec(n_clients=1, tasks_per_client=len(names))
        return [
            t.model_copy(update={"source": t.source.model_copy(update={"license": n})})
            for t, n in zip(spec.tasks, names)
        ]

    assert card_licenses(with_licenses("mit")) == "mit"
    assert card_licenses(with_licenses("mit", "apache-2.0", "mit")) == ["apache-2.0", "mit"]
    assert card_licenses(with_licenses("CC BY-NC 4.0", "mit")) == "other"
    assert card_licenses(with_licenses("unknown")) == "other"


def test_index_tasks_get_no_config_and_are_flagged(built) -> None:
    spec, root = built
    info = BuiltBenchmark.open(root).info
    meta = card_metadata(spec, info, index_tasks=["c1-t1"])
    names = [c["config_name"] for c in meta["configs"]]
    assert "c1-t1" not in names and "client_1" not in names and "client_2" in names
    text = render_card(spec, info, index_tasks=["c1-t1"])
    assert "| c1-t1 |" in text and "index (rebuild from your copy)" in text


class FlakyLoader:
    """Fails on one task the way real sources do: a missing file, then a loader crash."""

    name = "flaky-card-test"

    def __init__(self) -> None:
        self.mode = "missing"

    def load(self, task: TaskSpec, source_dir: Path | None) -> Iterator[Sample]:
        from drake_bench.loaders import get_loader

        if task.id == "c2-t0" and self.mode != "fixed":
            if self.mode == "missing":
                raise SourceError(
                    f"task {task.id!r}: expected {source_dir}/c2/questions.json (a JSON list), file not found"
                )
            raise ValueError("row 3: 'answer' is not a string")
        yield from get_loader("toy").load(task, source_dir)


@pytest.fixture(scope="module")
def flaky(toy_loader) -> FlakyLoader:
    from drake_bench.loaders import _LOADERS, register_loader

    return _LOADERS.get(FlakyLoader.name) or register_loader(FlakyLoader())  # type: ignore[return-value]


def test_failed_task_keeps_the_rest_and_the_card(flaky: FlakyLoader, tmp_path: Path) -> None:
    from drake_bench.benchmarks.build import build_benchmark

    data = manifest_dict(toy_spec(n_clients=2, tasks_per_client=2))
    data.pop("content_hash")
    for t in data["tasks"]:
        t["source"]["loader"] = FlakyLoader.name
    spec = parse_manifest(data, where="flaky")
    root = tmp_path / "built"
    flaky.mode = "missing"
    with pytest.raises(SourceError, match=r"(?s)1 of 5 tasks.*c2-t0.*questions\.json"):
        build_benchmark(spec, source_dir=tmp_path / "src", out=root, show_progress=False)
    info = BuiltBenchmark.open(root).info
    assert info["failed_tasks"] == ["c2-t0"] and "c2-t0" not in info["sizes"] and len(info["sizes"]) == 4
    assert not shard_path(root, "c2-t0", "train").exists()
    card = (root / CARD_FILE).read_text()
    assert "config_name: c2-t0\n" not in card and "config_name: client_2\n" not in card
    assert "config_name: c1-t0\n" in card and "failed to build" in card
    # a crash inside a loader is reported per task, naming the loader and the error
    flaky.mode = "crash"
    with pytest.raises(SourceError, match=r"(?s)flaky-card-test.*ValueError: row 3"):
        build_benchmark(spec, source_dir=tmp_path / "src", out=root, show_progress=False)
    # resume: once the source is fixed only the failed task is rebuilt, the others are untouched
    before = {p: p.stat().st_mtime_ns for p in (root / "data").glob("*/*.parquet")}
    flaky.mode = "fixed"
    build_benchmark(spec, source_dir=tmp_path / "src", out=root, show_progress=False)
    info = BuiltBenchmark.open(root).info
    assert info["failed_tasks"] == [] and len(info["sizes"]) == 5
    assert all(p.stat().st_mtime_ns == t for p, t in before.items())
    assert (root / BUILD_INFO).is_file() and "config_name: client_2\n" in (root / CARD_FILE).read_text()
