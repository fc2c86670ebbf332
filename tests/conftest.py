"""Shared fixtures: a toy benchmark built from a throwaway source loader, so foundation tests need no real data."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

os.environ.setdefault("DRAKE_BENCH_NO_PROGRESS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Tests bring their own tiny models (the tiny_cache fixture pretrains 3-step ones, methods run with
# model_loader="testing"), so tiny names resolve through the local pretraining path, whether or not the
# package holds shipped weights; tests/test_shipped_weights.py exercises the shipped path on its own folder.
os.environ["DRAKE_BENCH_ZOO"] = "pretrain"

from drake_bench.benchmarks.manifest import manifest_dict, parse_manifest  # noqa: E402
from drake_bench.benchmarks.sample import AnswerType, Sample  # noqa: E402
from drake_bench.benchmarks.spec import (  # noqa: E402
    AsyncDefaults,
    BenchmarkSpec,
    ClientSpec,
    DirichletDefaults,
    FLConfig,
    ScenarioDefaults,
    SourceSpec,
    SubsamplingRule,
    TaskSpec,
)


class ToyLoader:
    """Deterministic items whose text says which task and row they are (so tests can trace them)."""

    name = "toy"

    def load(self, task: TaskSpec, source_dir: Path | None) -> Iterator[Sample]:
        from PIL import Image

        n = int(task.source.rule.get("pool_size", 20))
        for i in range(n):
            img = Image.new("RGB", (8, 8), ((i * 37) % 256, (i * 11) % 256, 90))
            yield Sample(
                id=f"{task.id}/{i:04d}",
                images=[img] if task.images != "none" else [],
                question=f"q {task.id} {i}",
                # free-text tasks (the judge's tests) get a sentence that names the row; every other task is yes/no
                choices=[] if task.answer_type == AnswerType.FREE_TEXT else ["yes", "no"],
                answer=f"row {i} of {task.id}"
                if task.answer_type == AnswerType.FREE_TEXT
                else "yes"
                if i % 2
                else "no",
                answer_type=task.answer_type if task.answer_type == AnswerType.FREE_TEXT else AnswerType.YES_NO,
                task_id=task.id,
                source=task.source.dataset,
            )


def toy_spec(
    n_clients: int = 3, tasks_per_client: int = 4, pool_size: int = 20, rounds: int = 8, local_steps: int = 5
) -> BenchmarkSpec:
    tasks, clients = [], []
    for c in range(1, n_clients + 1):
        ids = []
        for k in range(tasks_per_client):
            tid = f"c{c}-t{k}"
            ids.append(tid)
            tasks.append(
                TaskSpec(
                    id=tid,
                    name=tid,
                    group=f"g{c % 2}",
                    split="s",
                    images="single",
                    num_images=(1, 1),
                    answer_type=AnswerType.YES_NO,
                    source=SourceSpec(dataset="toy", loader="toy", rule={"pool_size": pool_size + k}),
                )
            )
        clients.append(ClientSpec(id=c, group=f"g{c % 2}", tasks=ids))
    tasks.append(
        TaskSpec(
            id="unseen-0",
            name="u",
            group="u",
            split="u",
            images="single",
            num_images=(1, 1),
            answer_type=AnswerType.YES_NO,
            source=SourceSpec(dataset="toy", loader="toy", rule={"pool_size": 10}),
        )
    )
    spec = BenchmarkSpec(
        name="toy",
        version="0.0.1",
        title="Toy",
        description="test benchmark",
        modality="multimodal",
        tasks=tasks,
        clients=clients,
        unseen_tasks=["unseen-0"],
        fl=FLConfig(rounds=rounds, local_steps=local_steps, batch_size=2, eval_every_rounds=2, others_subsample=3),
        scenarios=ScenarioDefaults(
            default="dynamic",
            asynchronous=AsyncDefaults(patterns=[[2, 2, 2, 2], [1, 3, 1, 3], [3, 1, 3, 1]]),
            dirichlet=DirichletDefaults(tasks=[t.id for t in tasks[: 2 * tasks_per_client]], alphas=[1.0, 0.1]),
        ),
        subsampling=SubsamplingRule(large_threshold=1000, train=500, test=100, train_ratio=0.8, seed=0),
    )
    return parse_manifest(manifest_dict(spec), where="toy")


def hub_httpx():
    """The httpx module the installed huggingface_hub builds its requests and errors on: ``httpx2`` from hub 2.x,
    ``httpx`` in 1.x (both are supported; `.ci/run-lowest` runs the oldest)."""
    try:
        import httpx2 as httpx
    except ImportError:
        import httpx
    return httpx


@contextlib.contextmanager
def torch_threads(n: int):
    """torch's intra-op thread count set to ``n`` inside the block, restored after it."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def one_embedded_round(benchmark: str, method: str, out: Path, **method_config):
    """One federated round of ``method`` on an embedded benchmark's own clients and allocation (built at whatever
    ``DRAKE_BENCH_HOME`` / ``DRAKE_BENCH_SYNTH_SCALE`` the caller set), in process, with the tiny testing models:
    every client trains one step of batch 2, then the server aggregates. Returns (evaluator, run, uploads)."""
    from drake_bench.evaluator.standard import Evaluator, RunConfig

    ev = Evaluator(
        RunConfig(
            benchmark=benchmark,
            method=method,
            scenario="static",
            rounds=1,
            local_steps=1,
            batch_size=2,
            isolation="inline",
            out=str(out),
            method_config={"model_loader": "testing", **method_config},
        )
    )
    run_ = ev.init_or_resume(0)
    try:
        uploads = ev.train_round(run_, 0)
        ev.aggregate_round(run_, 0, uploads)
    finally:
        run_.method.close()
    return ev, run_, uploads


@pytest.fixture(scope="session")
def _small_synth_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("small-synth-home")


@pytest.fixture
def small_synth(_small_synth_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``DRAKE_BENCH_HOME`` where the embedded benchmarks are built small (scale 0.05), one per test process:
    each benchmark is built on its first use and shared by every test that runs on a benchmark's own clients."""
    monkeypatch.setenv("DRAKE_BENCH_HOME", str(_small_synth_dir))
    monkeypatch.setenv("DRAKE_BENCH_SYNTH_SCALE", "0.05")
    return _small_synth_dir


@pytest.fixture
def one_torch_thread():
    """Tiny models run many times faster on one thread than on a contended pool (docs/models.md)."""
    with torch_threads(1):
        yield


@pytest.fixture(scope="session")
def toy_loader() -> ToyLoader:
    from drake_bench.loaders import _LOADERS, register_loader

    loader = _LOADERS.get("toy") or register_loader(ToyLoader())
    return loader  # type: ignore[return-value]


@pytest.fixture(scope="session")
def toy_built(tmp_path_factory: pytest.TempPathFactory, toy_loader: ToyLoader) -> tuple[BenchmarkSpec, Path]:
    from drake_bench.benchmarks.build import build_benchmark

    spec = toy_spec()
    root = tmp_path_factory.mktemp("toy") / "built"
    build_benchmark(spec, source_dir=None, out=root, show_progress=False)
    return spec, root


def build_toy(manifest: dict, name: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """Build a toy manifest a fixture edited (its stale ``content_hash`` dropped and stamped again) and write the
    manifest beside it: (manifest path, built root), what RunConfig's benchmark and data_dir take."""
    import json

    from drake_bench.benchmarks.build import build_benchmark

    spec = parse_manifest({k: v for k, v in manifest.items() if k != "content_hash"}, where=name)
    root = tmp_path_factory.mktemp(name) / "built"
    build_benchmark(spec, source_dir=None, out=root, show_progress=False)
    path = tmp_path_factory.mktemp("manifest") / f"{name}.json"
    path.write_text(json.dumps(manifest_dict(spec)))
    return str(path), str(root)


MIXED_ALLOCATION = {
    "1": "tiny-llava-llama-s",
    "2": "tiny-llava-qwen2-s",
    "3": "tiny-llava-llama-m",
    "4": "tiny-llava-qwen2-s",
}


@pytest.fixture(scope="session")
def toy_mixed(toy_loader, tmp_path_factory) -> tuple[str, str]:
    """A 4-client x 2-task toy benchmark whose clients hold tiny models of two families and two sizes.

    Returns (manifest path, built root). Methods run on it with ``model_loader="testing"``
    (random tiny models, no pretraining), so a whole federation takes seconds.
    """
    from drake_bench.benchmarks.spec import ModelAllocation

    d = manifest_dict(toy_spec(n_clients=4, tasks_per_client=2, pool_size=10))
    d["model_allocations"] = {
        "mix": ModelAllocation(
            description="two families, two sizes", source="test", clients=MIXED_ALLOCATION
        ).model_dump(mode="json")
    }
    d["default_allocation"] = "mix"
    return build_toy(d, "toy-mixed", tmp_path_factory)


@pytest.fixture(scope="session")
def toy_free_text(toy_loader, tmp_path_factory) -> tuple[str, str]:
    """Two clients, each with one yes/no task and one free-text task (the judge's and the evaluator's tests).

    Returns (manifest path, built root)."""
    d = manifest_dict(toy_spec(n_clients=2, tasks_per_client=2, pool_size=8))
    for task in d["tasks"]:
        if task["id"].endswith("-t1"):
            task["answer_type"] = AnswerType.FREE_TEXT.value
            task["metric"] = "rouge_l"
    return build_toy(d, "toy-free-text", tmp_path_factory)


# ---------------------------------------------------------------------- tiny pretraining cache
from drake_bench.models import pretrain as _pretrain  # noqa: E402
from drake_bench.models.testing import toy_samples  # noqa: E402

TINY_RECIPE = _pretrain.Recipe(
    steps_multimodal=3,
    steps_text=3,
    batch_multimodal=4,
    batch_text=4,
    vocab_size=512,
    vision_steps=2,
    vision_batch=4,
    vision_items=16,
    tower_steps=2,
    tower_batch=4,
    probe_pictures=40,
)


@pytest.fixture
def tiny_cache(tmp_path, monkeypatch):
    """Models dir in tmp, toy data instead of the synth mixes, a 3-step recipe; counts data requests."""
    calls = []
    monkeypatch.setenv("DRAKE_BENCH_MODELS", str(tmp_path / "models"))
    monkeypatch.setattr(_pretrain, "DEFAULT_RECIPE", TINY_RECIPE)
    monkeypatch.setattr(
        _pretrain, "tokenizer_corpus", lambda r: [s.question + " " + s.answer for s in toy_samples(32)] * 4
    )

    def data(multimodal, recipe):
        calls.append(multimodal)
        return toy_samples(16, seed=1, with_images=multimodal)

    monkeypatch.setattr(_pretrain, "training_data", data)
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield tmp_path / "models", calls
    torch.set_num_threads(n)


@pytest.fixture(scope="session")
def toy(toy_built, tmp_path_factory):
    """The toy benchmark as (manifest path, built folder): what RunConfig's benchmark and data_dir take."""
    import json

    spec, root = toy_built
    path = tmp_path_factory.mktemp("manifest") / "toy.json"
    path.write_text(json.dumps(manifest_dict(spec)))
    return str(path), str(root)


# ---------------------------------------------------------------------- the tiny leaderboard board
@pytest.fixture(scope="session")
def tiny_board(tmp_path_factory, worker_id) -> tuple[Path, Path]:
    """(board JSON, leaderboard root) of the built tiny board; one build for the whole session.

    The toy benchmark, the example plugin (``majority-answer``) and the minimal counter, 3 seeds x 2 rounds x 1
    step, built by ``drake-bench leaderboard build`` and shared by the xdist workers through a file lock: a second
    build of a built board runs nothing. Here so that every leaderboard test file uses the one build."""
    import json

    from filelock import FileLock
    from minimal_method import Counter
    from typer.testing import CliRunner

    from drake_bench.benchmarks.build import build_benchmark
    from drake_bench.cli import app
    from drake_bench.loaders import _LOADERS, register_loader
    from drake_bench.plugins.registry import register_method
    from drake_bench.streams.stream import open_built

    shared = tmp_path_factory.getbasetemp() if worker_id == "master" else tmp_path_factory.getbasetemp().parent
    base = shared / "tiny-board"
    with FileLock(str(shared / "tiny-board.lock")):
        if "toy" not in _LOADERS:
            register_loader(ToyLoader())
        base.mkdir(exist_ok=True)
        spec = toy_spec()
        if not (base / "built").exists():
            build_benchmark(spec, source_dir=None, out=base / "built", show_progress=False)
        (base / "toy.json").write_text(json.dumps(manifest_dict(spec)))
        built = open_built(spec, data_dir=base / "built")
        board = {
            "name": "tiny",
            "title": "Tiny test board",
            "description": "toy benchmark, model-free methods",
            "benchmark": str(base / "toy.json"),
            "benchmark_version": "0.0.1",
            "data_dir": str(base / "built"),
            "data_hash": built.data_hash,
            "content_hash": built.content_hash,
            "scenario": "static",
            "seeds": [0, 1, 2],
            "rounds": 2,
            "local_steps": 1,
            "eval_every_rounds": 1,
            "others_subsample": 2,
            "fast_adaptation": False,
            "fast_adaptation_tasks": None,
            "communication_budget_bytes": 1e6,
            "paper": {"key": "table-2-drake"},
            "entries": [{"method": "majority-answer"}, {"method": "counter"}],
        }
        (base / "tiny.json").write_text(json.dumps(board))
        register_method(Counter)  # idempotent: test_leaderboard.py registers it too
        r = CliRunner().invoke(
            app, ["leaderboard", "build", str(base / "tiny.json"), "--root", str(base / "lb"), "--jobs", "2"]
        )
        assert r.exit_code == 0, r.output
    return base / "tiny.json", base / "lb"
