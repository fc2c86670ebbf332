"""Shipped synth manifests: regenerated equal, schema-valid, DRAKE/HFLB/Fed-LLM-Large structure."""

from __future__ import annotations

import importlib.util
from collections import Counter
from pathlib import Path

import pytest

from drake_bench.benchmarks.manifest import load_benchmark, read_manifest
from drake_bench.benchmarks.sample import AnswerType

ROOT = Path(__file__).resolve().parents[1]
NAMES = ["drake-synth", "hflb-synth", "fedllm-synth"]


def _script():
    spec = importlib.util.spec_from_file_location("make_synth_manifests", ROOT / "scripts" / "make_synth_manifests.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("name", NAMES)
def test_shipped_manifest_equals_regenerated(name):
    assert (ROOT / "splits" / f"{name}.json").read_text() == _script().render_manifest(name)


@pytest.mark.parametrize("name", NAMES)
def test_manifest_schema_and_hash(name):
    spec = read_manifest(ROOT / "splits" / f"{name}.json")  # jsonschema + pydantic + content hash
    assert spec.embedded and spec.content_hash.startswith("sha256:")
    assert all(t.source.loader == "synth" and t.source.rule["generator_version"] >= 1 for t in spec.tasks)
    assert spec.default_allocation in spec.model_allocations
    assert {c.id for c in spec.clients} == {int(k) for k in spec.allocation()}


def test_drake_synth_structure():
    s = load_benchmark("drake-synth")
    assert s.mirrors == "drake" and len(s.clients) == 10 and len(s.unseen_tasks) == 7
    assert all(len(c.tasks) == 4 for c in s.clients)
    groups = {c.id: c.group for c in s.clients}
    assert {c for c, g in groups.items() if g == "visual-relation"} == {1, 5, 6}
    assert {c for c, g in groups.items() if g == "multimodal-reasoning"} == {7, 8, 9}
    assert {c for c, g in groups.items() if g == "vqa"} == {2, 3, 4, 10}
    for c in s.clients:  # every task of a client belongs to the client's group
        assert {s.task(t).group for t in c.tasks} == {c.group}
    multi = {
        c.id
        for c in s.clients
        if all(
            s.task(t).images == "multi"
            or s.task(t).id == "rel-spatial"
            or s.task(t).id in ("rsn-figurative-verify", "rsn-phrase-select")
            for t in c.tasks
        )
    }
    assert {1, 5, 6, 7, 8, 9} <= multi  # relation/reasoning clients are (almost) all multi-image
    client_tasks = [t for c in s.clients for t in c.tasks]
    counts = Counter(s.task(t).answer_type for t in client_tasks)
    assert counts == {AnswerType.MULTIPLE_CHOICE: 20, AnswerType.YES_NO: 12, AnswerType.OPEN: 8}
    for t in s.tasks:
        lo, hi = t.num_images
        assert 1 <= lo <= hi <= 5
        assert (t.images == "multi") == (hi >= 2)
    assert set(s.scenarios.dirichlet.tasks) <= set(client_tasks) and len(s.scenarios.dirichlet.tasks) == 10
    assert [sum(p) for p in s.scenarios.asynchronous.patterns] == [8, 8, 8]
    assert Counter(s.allocation("hetero").values()) == {"tiny-llava-llama-s": 4, "tiny-llava-llama-m": 6}
    assert Counter(s.allocation("cross-family").values()) == {
        "tiny-llava-llama-m": 3,
        "tiny-llava-qwen2-m": 4,
        "tiny-llava-qwen2-l": 3,
    }
    assert Counter(s.allocation("three-sizes").values()) == {
        "tiny-llava-llama-s": 3,
        "tiny-llava-llama-m": 5,
        "tiny-llava-llama-l": 2,
    }


def test_hflb_and_fedllm_structure():
    h = load_benchmark("hflb-synth")
    assert len(h.clients) == 9 and all(len(c.tasks) == 4 for c in h.clients)
    assert all(t.images == "single" for t in h.tasks)
    assert Counter(h.allocation().values()) == {"tiny-llava-llama-s": 3, "tiny-llava-llama-m": 6}
    f = load_benchmark("fedllm-synth")
    assert f.modality == "text" and len(f.clients) == 52 and all(len(set(c.tasks)) == 2 for c in f.clients)
    assert all(t.answer_type == AnswerType.FREE_TEXT and t.metric == "rouge_l" and t.images == "none" for t in f.tasks)
    assert f.fl.rounds == 4 and f.fl.local_steps == 10 and f.fl.eval_every_rounds == 1
    assert Counter(f.allocation().values()) == {"tiny-llama-s": 26, "tiny-llama-m": 26}
    assert Counter(c.group.split("-")[0] for c in f.clients) == {"flan": 18, "aya": 24, "chatbot": 10}
