"""The shipped real-benchmark manifests: regenerated == shipped, schema-valid, and faithful to the paper's tables."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import jsonschema
import pytest

from drake_bench.benchmarks.definitions import REAL_BENCHMARKS
from drake_bench.benchmarks.manifest import content_hash, load_benchmark, schema

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import make_real_manifests  # noqa: E402

TABLE_37 = {
    1: ["Fashion200K: ClothCombination", "FashionIQ", "VISION: 2_Img", "MagicBrush"],
    2: ["Co-Instruct: 2_ImgCompare", "SEED-Bench-2: KGQA", "IconQA: ShortAnswerEasy", "WCVQA: DishName"],
    3: ["Co-Instruct: HowWhat", "DVQA", "IconQA: ShortAnswerHard", "WCVQA: ContextDishName"],
    4: [
        "Co-Instruct: 3_ImgCompare",
        "SEED-Bench-2: InstanceQA",
        "IconQA: MultiChoiceEasy",
        "WCVQA: AdvContextDishName",
    ],
    5: ["Fashion200K: ColorConsistency", "NLVR2: Subset1", "VISION: 4_Img", "VSR"],
    6: ["Fashion200K: StyleConsistency", "NLVR2: Subset2", "CIRR", "SEED-Bench-2: TemporalQA"],
    7: ["IRFL: MetaphorSimileMatching", "Bongard-HOI: ActionDetection", "VizWiz", "MIT-States"],
    8: [
        "IRFL: FigurativeVerification",
        "IRFL: IdiomMatching",
        "Bongard-OpenWorld: ConceptDetection",
        "COMICS: Dialogue",
    ],
    9: [
        "IRFL: PhraseSelection",
        "Bongard-OpenWorld: ConceptQuery",
        "Bongard-HOI: ConceptQuery",
        "Bongard-HOI: ActionIncoherence",
    ],
    10: ["Co-Instruct: YesNo", "TQA", "IconQA: MultiChoiceHard", "WCVQA: Location"],
}


def _label(task) -> str:
    """Paper-style label 'Dataset: Variant' from the manifest's fields (independent of task ids)."""
    ds = {"WorldCuisines": "WCVQA"}.get(task.source.dataset, task.source.dataset)
    if task.source.variant in (None, "DEMON", "random split", "StateCoherence"):
        return ds
    variant = "YesNo" if task.source.variant == "YesNO" else task.source.variant
    return f"{ds}: {variant}"


@pytest.mark.parametrize("name", list(REAL_BENCHMARKS))
def test_shipped_equals_regenerated_and_validates(name: str) -> None:
    path = ROOT / "splits" / f"{name}.json"
    assert path.read_text() == make_real_manifests.render(name), f"{path} is stale: run scripts/make_real_manifests.py"
    data = json.loads(path.read_text())
    jsonschema.Draft202012Validator(schema()).validate(data)
    assert data["content_hash"] == content_hash(data)
    spec = load_benchmark(name)
    assert spec.content_hash == data["content_hash"]
    assert all(c.tag in "PIR" for c in spec.choices) and any(c.tag == "R" for c in spec.choices)


def test_check_mode_detects_stale(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(make_real_manifests, "SPLITS", tmp_path)
    assert make_real_manifests.main(["--check"]) == 1
    assert make_real_manifests.main([]) == 0
    assert make_real_manifests.main(["--check"]) == 0


def test_drake_client_order_is_table_37() -> None:
    spec = load_benchmark("drake")
    assert spec.client_ids == list(range(1, 11))
    for c in spec.clients:
        assert [_label(spec.task(t)) for t in c.tasks] == TABLE_37[c.id], f"client {c.id}"


def test_drake_groups_splits_and_unseen() -> None:
    spec = load_benchmark("drake")
    train = [t for t in spec.tasks if t.id not in spec.unseen_tasks]
    assert len(train) == 40 and len(spec.unseen_tasks) == 7
    assert Counter(t.group for t in train) == {"visual-relation": 12, "multimodal-reasoning": 12, "vqa": 16}
    splits = Counter((t.group, t.split) for t in train)
    assert splits == {
        ("visual-relation", "fashion-relation"): 4,
        ("visual-relation", "dual-image relation"): 6,
        ("visual-relation", "spatial/temporal"): 2,
        ("multimodal-reasoning", "visual figurative understanding"): 4,
        ("multimodal-reasoning", "context-dependent visual reasoning"): 5,
        ("multimodal-reasoning", "multi-image-text understanding"): 3,
        ("vqa", "image quality"): 4,
        ("vqa", "icon-domain"): 4,
        ("vqa", "cuisine-domain"): 4,
        ("vqa", "general VQA"): 4,
    }
    assert len({t.source.dataset for t in train}) == 19
    groups = {c.id: c.group for c in spec.clients}
    assert [c for c, g in groups.items() if g == "visual-relation"] == [1, 5, 6]
    assert [c for c, g in groups.items() if g == "multimodal-reasoning"] == [7, 8, 9]
    assert [c for c, g in groups.items() if g == "vqa"] == [2, 3, 4, 10]
    # every client's tasks come from its own group; VQA clients follow quality -> general -> icon -> cuisine
    for c in spec.clients:
        assert {spec.task(t).group for t in c.tasks} == {c.group}
        if c.group == "vqa":
            assert [spec.task(t).split for t in c.tasks] == [
                "image quality",
                "general VQA",
                "icon-domain",
                "cuisine-domain",
            ]
    unseen_splits = Counter(spec.task(t).split for t in spec.unseen_tasks)
    assert set(unseen_splits) == {"novel task type", "novel visual domain"}


def test_drake_fl_scenarios_allocations() -> None:
    spec = load_benchmark("drake")
    assert (spec.fl.rounds, spec.fl.local_steps, spec.fl.batch_size) == (20, 100, 4)
    assert spec.scenarios.asynchronous.patterns == [[5, 5, 5, 5], [3, 7, 3, 7], [7, 3, 7, 3]]
    assert spec.scenarios.dirichlet.alphas == [1.0, 0.5, 0.1] and len(spec.scenarios.dirichlet.tasks) == 10
    alloc = spec.allocation()
    assert [alloc[c] for c in range(1, 11)] == ["llava-llama3.2-1b"] * 4 + ["llava-llama3.2-3b"] * 6
    # FedMosaic paper Table 14 counts per experiment
    expected = {
        "tab4-llama-qwen": {"llava-llama3.2-3b": 3, "llava-qwen2.5-1.5b": 4, "llava-qwen2.5-3b": 3},
        "tab16-1b-3b-8b": {"llava-llama3.2-1b": 3, "llava-llama3.2-3b": 5, "llava-llama3.1-8b": 2},
        "tab17-homo-llama3b": {"llava-llama3.2-3b": 10},
        "tab18-homo-qwen3b": {"llava-qwen2.5-3b": 10},
        "tab18-hetero-qwen": {"llava-qwen2.5-0.5b": 3, "llava-qwen2.5-1.5b": 2, "llava-qwen2.5-3b": 5},
        "tab19-llama3b-qwen1.5b": {"llava-llama3.2-3b": 6, "llava-qwen2.5-1.5b": 4},
        "tab19-llama1b-3b-qwen1.5b": {"llava-llama3.2-1b": 2, "llava-llama3.2-3b": 5, "llava-qwen2.5-1.5b": 3},
    }
    for key, counts in expected.items():
        assert Counter(spec.allocation(key).values()) == counts, key
    assert spec.subsampling.train == 10000 and spec.subsampling.test == 1000 and spec.subsampling.train_ratio == 0.8


def test_hflb_table_13() -> None:
    spec = load_benchmark("hflb")
    assert len(spec.clients) == 9 and all(len(c.tasks) == 4 for c in spec.clients)
    datasets = [spec.task(c.tasks[0]).source.dataset for c in spec.clients]
    assert datasets == ["GQA", "GQA", "GQA", "Abstract VQA", "SNLI-VE", "COCO-QA", "NLVR2", "VizWiz", "AQUA"]
    assert [spec.task(t).source.variant for t in spec.client(1).tasks] == ["Attribute", "Relation", "Object", "Global"]
    assert [spec.task(t).source.rule["types"] for t in spec.client(6).tasks] == [[0], [1], [2], [3]]
    assert Counter(spec.allocation().values()) == {"llava-llama3.2-1b": 3, "llava-llama3.2-3b": 6}
    assert (spec.fl.rounds, spec.fl.local_steps) == (20, 100)


def test_text_benchmarks_table_12_and_14() -> None:
    large, aya, scope = (load_benchmark(n) for n in ("fed-llm-large", "fed-aya", "fed-scope"))
    assert len(large.clients) == 52 and all(len(c.tasks) == 2 for c in large.clients)
    assert (large.fl.rounds, large.fl.local_steps) == (4, 10)
    assert Counter(large.allocation().values()) == {"llama-3.2-1b": 26, "llama-3.2-3b": 26}
    assert len(aya.clients) == 8 and (aya.fl.rounds, aya.fl.local_steps) == (20, 50)
    langs = [l for c in aya.clients for l in aya.task(c.tasks[0]).source.rule["languages"]]
    assert len(langs) == 12 == len(set(langs))
    assert Counter(aya.allocation().values()) == {"llama-3.2-1b": 4, "llama-3.2-3b": 4}
    assert len(scope.clients) == 5 and (scope.fl.rounds, scope.fl.local_steps) == (20, 30)
    assert scope.scenarios.default == "static"
    assert [c.group for c in scope.clients] == ["code", "code", "math", "math", "general"]
    assert Counter(scope.allocation().values()) == {"llama-3.2-3b": 3, "llama-3.1-8b": 2}
    for spec in (large, aya, scope):
        assert spec.modality == "text" and all(t.images == "none" and t.metric == "rouge_l" for t in spec.tasks)
