"""Generators: determinism, formats the evaluator relies on, balanced labels, no answer leak in the text."""

from __future__ import annotations

from collections import Counter

import pytest

from drake_bench.benchmarks.manifest import load_benchmark
from drake_bench.benchmarks.sample import AnswerType
from drake_bench.benchmarks.synth.registry import iter_generators
from drake_bench.loaders import get_loader

GENS = list(iter_generators(every_version=True))  # superseded implementations still build archived manifests
IMAGE_GENS = [g for g in GENS if g.images != "none"]


def _pixels(item):
    return [im.tobytes() for im in item.images]


@pytest.mark.parametrize("gen", GENS, ids=lambda g: f"{g.name}-v{g.version}")
def test_generator_contract(gen):
    items = [gen.item(i, seed=0, task_id="t") for i in range(24)]
    again = gen.item(3, seed=0, task_id="t")
    assert (
        _pixels(again) == _pixels(items[3]) and again.question == items[3].question and again.answer == items[3].answer
    )
    for it in items:
        lo, hi = gen.num_images
        assert lo <= len(it.images) <= hi
        assert all(im.size == (64, 64) and im.mode == "RGB" for im in it.images)
        assert it.question.strip() and it.answer.strip()
        if gen.answer_type == AnswerType.YES_NO:
            assert it.choices == ["yes", "no"]
        if gen.answer_type in (AnswerType.MULTIPLE_CHOICE, AnswerType.YES_NO):
            assert it.answer in it.choices and len(set(it.choices)) == len(it.choices) >= 2
        if gen.answer_type == AnswerType.OPEN:
            assert 1 <= len(it.answer.split()) <= 3 and not it.choices


@pytest.mark.parametrize(
    "gen", [g for g in IMAGE_GENS if g.answer_type != AnswerType.OPEN], ids=lambda g: f"{g.name}-v{g.version}"
)
def test_labels_not_predictable_from_text(gen):
    """Answers are balanced and the most common answer given the exact question is not near-certain."""
    items = [gen.item(i, seed=1, task_id="bal") for i in range(160)]
    counts = Counter(it.answer for it in items)
    assert counts.most_common(1)[0][1] / len(items) < 0.75, counts
    if gen.answer_type == AnswerType.YES_NO:
        assert 0.3 < counts["yes"] / len(items) < 0.7


def test_images_differ_across_items_and_seeds():
    g = next(x for x in GENS if x.name == "rel-spatial")
    assert _pixels(g.item(0, seed=0, task_id="a")) != _pixels(g.item(0, seed=1, task_id="a"))
    assert _pixels(g.item(0, seed=0, task_id="a")) != _pixels(g.item(0, seed=0, task_id="b"))


def test_loader_pool_ids_unique_across_benchmark():
    spec = load_benchmark("drake-synth")
    loader = get_loader("synth")
    ids = []
    for t in spec.tasks[:6]:
        pool = list(
            loader.load(
                t.model_copy(
                    update={"source": t.source.model_copy(update={"rule": {**t.source.rule, "pool_size": 12}})}
                ),
                None,
            )
        )
        assert all(s.task_id == t.id and s.answer_type == t.answer_type for s in pool)
        ids += [s.id for s in pool]
    assert len(ids) == len(set(ids))


def test_fresh_items_are_the_pools_samples_under_another_seed():
    from drake_bench.benchmarks.manifest import load_benchmark
    from drake_bench.benchmarks.synth.loader import SYNTH_LOADER, fresh_items
    from drake_bench.errors import SourceError

    task = load_benchmark("drake-synth").task("rel-spatial")
    pool = list(SYNTH_LOADER.load(task, None))[:4]
    a, b = fresh_items(task, 4, seed=9001), fresh_items(task, 4, seed=9001)
    assert [s.question for s in a] == [s.question for s in b]  # deterministic
    assert [s.images[0].tobytes() for s in a] == [s.images[0].tobytes() for s in b]
    assert [s.images[0].tobytes() for s in a] != [s.images[0].tobytes() for s in pool]  # not the benchmark's items
    assert all(s.task_id == task.id and s.answer_type == task.answer_type for s in a)
    with pytest.raises(SourceError, match="the benchmark pool's own seed"):
        fresh_items(task, 2, seed=int(task.source.rule.get("seed", 0)))
