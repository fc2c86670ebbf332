"""The public mix (LLaVA-Instruct stand-in) and the public scenes of vision pretraining."""

import numpy as np

from drake_bench.models.vision import attribute_targets
from drake_bench.sample import AnswerType
from drake_bench.synth.public import public_item, public_scenes
from drake_bench.synth.registry import iter_generators
from drake_bench.synth.world import COLORS, DOMAINS, SHAPES


def test_public_items_are_deterministic_and_well_formed():
    a, b = public_item(17), public_item(17)
    assert (a.question, a.answer) == (b.question, b.answer)
    assert [np.asarray(x).tobytes() for x in a.images] == [np.asarray(x).tobytes() for x in b.images]
    items = [public_item(i) for i in range(300)]
    yn = [s for s in items if s.answer_type == AnswerType.YES_NO]
    assert yn and 0.3 < np.mean([s.answer == "yes" for s in yn]) < 0.7
    for s in items:
        if s.answer_type in (AnswerType.MULTIPLE_CHOICE, AnswerType.YES_NO):
            assert s.answer in s.choices


def test_public_questions_never_reuse_a_benchmark_question():
    public = {public_item(i).question for i in range(400)}
    for gen in iter_generators():
        for i in range(3):
            assert gen.item(i, seed=0).question not in public, gen.name


def test_attribute_targets_mark_one_count_and_one_domain():
    cols, shapes = len(COLORS), len(SHAPES)
    base = cols + shapes + cols * shapes
    for sc in public_scenes(20):
        v = attribute_targets(sc)
        assert v[:cols].sum() == len({o.color for o in sc.objects})
        assert v[base:base + 4].sum() == 1 and v[base + 4:base + 4 + len(DOMAINS)].sum() == 1


def test_public_objects_are_single_object_prefix_stable_and_start_indexed():
    from drake_bench.synth.public import public_objects

    first = public_objects(0, 12)
    assert all(len(sc.objects) == 1 for sc in first)
    assert [sc.objects[0].phrase() for sc in public_objects(5, 4)] == [sc.objects[0].phrase() for sc in first[5:9]]
    assert [sc.caption() for sc in public_scenes(3, start=4)] == [sc.caption() for sc in public_scenes(7)[4:]]
