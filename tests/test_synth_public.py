"""The public mix (LLaVA-Instruct stand-in) and the public scenes of vision pretraining."""

import numpy as np

from drake_bench.benchmarks.sample import AnswerType
from drake_bench.benchmarks.synth.public import public_item
from drake_bench.benchmarks.synth.registry import iter_generators
from drake_bench.benchmarks.synth.world import COLORS, DISTORTIONS, SHAPES, STATES


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


def test_perception_pictures_draw_every_primitive_and_are_prefix_stable():
    from drake_bench.benchmarks.synth.public import PERCEPTION_DOMAINS, perception_picture, perception_pictures

    pics = perception_pictures(0, 300)
    objs = [o for p in pics for o in p.scene.objects]
    assert {p.domain for p in pics} == set(PERCEPTION_DOMAINS)
    assert {o.shape for o in objs} == set(SHAPES) and {o.color for o in objs} == set(COLORS)
    assert {o.state for o in objs} == set(STATES) and any(o.cracked for o in objs)
    assert {p.scene.distortion for p in pics} >= set(DISTORTIONS) and any(p.scene.text for p in pics)
    assert {len(p.scene.objects) for p in pics} == {0, 1, 2, 3, 4}
    again = perception_picture(17)
    assert np.asarray(again.image).tobytes() == np.asarray(pics[17].image).tobytes()
    assert [p.scene.objects for p in perception_pictures(5, 3)] == [p.scene.objects for p in pics[5:8]]


def test_public_mix_is_disjoint_from_benchmark_items():
    """No public question is a benchmark template (whatever the filled-in words) and no public picture is a
    benchmark picture: the mix teaches formats and primitives, never a task or one of its items."""
    import re

    from drake_bench.benchmarks.synth.public import public_mix

    def template(q: str) -> str:  # a question with its content words (colours, shapes, numbers) blanked
        words = set(COLORS) | set(SHAPES) | {"small", "large"}
        return " ".join(
            "_" if w.strip(".?,:").lower() in words or re.fullmatch(r"\d+", w.strip(".?,:")) else w for w in q.split()
        )

    mix = public_mix(600) + public_mix(600, generation=2)
    public_templates = {template(s.question) for s in mix}
    public_images = {np.asarray(im).tobytes() for s in mix[:200] for im in s.images}
    for gen in iter_generators():
        for i in range(4):
            item = gen.item(i, seed=0)
            assert template(item.question) not in public_templates, (gen.name, item.question)
            assert not any(np.asarray(im).tobytes() in public_images for im in item.images), gen.name
    assert {s.meta["kind"] for s in mix[:600]} == set(range(19)) and {s.meta["kind"] for s in mix[600:]} == set(
        range(24)
    )


def test_public_mix_names_no_group_skill():
    """Cracks, comic state marks and distortions are the groups' own skills: generation 1 of the public mix (the
    shipped zoo's) never asks about them; generation 2 does, in kinds 19-23 only."""
    from drake_bench.benchmarks.synth.public import public_mix

    banned = ("crack", "shining", "shaking", "calm", "blur", "noise", "darkness", "glare", "distort", "quality")
    for s in public_mix(600):
        text = " ".join([s.question, s.answer, *s.choices]).lower()
        assert not any(b in text for b in banned), s.question
    for s in public_mix(300, generation=2):
        text = " ".join([s.question, s.answer, *s.choices]).lower()
        assert any(b in text for b in banned) == (s.meta["kind"] >= 19), s.question
