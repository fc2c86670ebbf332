"""Group skills: each drake-synth group has a visual skill that every one of its clients needs and no other group
draws (image quality for VQA, cracks for visual relation, object states for multimodal reasoning)."""

from __future__ import annotations

import numpy as np
import pytest

from drake_bench.benchmarks.manifest import load_benchmark
from drake_bench.benchmarks.synth import render as render_module
from drake_bench.benchmarks.synth.loader import fresh_items
from drake_bench.benchmarks.synth.render import render
from drake_bench.benchmarks.synth.world import COLORS, STATES, Obj, Scene, place, rng_for

N = 24


@pytest.fixture
def drawn(monkeypatch):
    """Record the (cracked, state) of every object drawn, one list per rendered image, in drawing order."""
    images: list[list[tuple[bool, str]]] = [[]]
    draw_obj, distort = render_module.draw_obj, render_module.distort

    def record(draw, o, *args, **kw):
        images[-1].append((o.cracked, o.state))
        return draw_obj(draw, o, *args, **kw)

    def close(img, *args, **kw):  # render() ends every image with distort()
        images.append([])
        return distort(img, *args, **kw)

    monkeypatch.setattr(render_module, "draw_obj", record)
    monkeypatch.setattr(render_module, "distort", close)

    def items_of(
        task_id: str, n: int = N, every_image: bool = True
    ) -> list[tuple[object, list[list[tuple[bool, str]]]]]:
        """Items with the objects of each of their images; ``every_image=False`` for tasks with charts or clocks,
        which are not drawn by render() (their objects are then only pooled)."""
        samples = fresh_items(load_benchmark("drake-synth").task(task_id), n, seed=11)
        drawn_images, images[:] = images[:-1], [[]]
        if not every_image:
            return [(None, drawn_images)]
        assert len(drawn_images) == sum(len(s.images) for s in samples)
        out, k = [], 0
        for s in samples:  # each item's images, in order
            out.append((s, drawn_images[k : k + len(s.images)]))
            k += len(s.images)
        return out

    return items_of


def _skills(task_id: str, items_of) -> set[str]:
    marks = {m for _, imgs in items_of(task_id, 8, every_image=False) for img in imgs for m in img}
    return {"crack" for cracked, _ in marks if cracked} | {"state" for _, st in marks if st != "calm"}


def test_each_group_skill_is_drawn_by_a_task_of_every_member_and_by_no_other_group(drawn):
    spec = load_benchmark("drake-synth")
    own = {"visual-relation": "crack", "multimodal-reasoning": "state"}
    for c in spec.clients:
        skills = {t: _skills(t, drawn) for t in c.tasks}
        used = set().union(*skills.values())
        if c.group in own:
            assert used == {own[c.group]}, (c.id, skills)
        else:
            assert not used, (c.id, skills)
    unseen = {t.id for t in spec.tasks} - {t for c in spec.clients for t in c.tasks}
    assert not any(_skills(t, drawn) for t in unseen)


def _any_cracked(img) -> bool:
    return any(cracked for cracked, _ in img)


def test_defect_answers_follow_the_drawn_cracks(drawn):
    for s, imgs in drawn("rel-defect-2"):
        assert len(imgs) == 2 and s.answer == ("yes" if any(map(_any_cracked, imgs)) else "no")
    for s, imgs in drawn("rel-statement-defect"):
        n = sum(map(_any_cracked, imgs))
        truth = n == 2 if "both" in s.question else n == 1
        assert s.answer == ("yes" if truth else "no"), (s.question, n)
    answers = [s.answer for s, _ in drawn("rel-statement-defect", 60)]
    assert 0.3 < answers.count("yes") / len(answers) < 0.7


def test_state_answers_follow_the_drawn_states(drawn):
    named = []
    for s, imgs in drawn("rsn-state-coherence", 60):
        states = [img[0][1] for img in imgs]
        named.append(s.question.removeprefix("Are all four objects ").removesuffix("?"))
        assert len(states) == 4 and named[-1] in STATES
        assert s.answer == ("yes" if states.count(named[-1]) == 4 else "no")
        assert s.answer == "yes" or 2 <= states.count(named[-1]) < 4  # a 'no' names the state most objects are in
    assert set(named) == set(STATES)
    for s, imgs in drawn("rsn-odd-one-out"):
        states = [img[0][1] for img in imgs]
        marked = [i for i, st in enumerate(states) if st != "calm"]
        assert len(marked) == 1 and s.answer == f"image {marked[0] + 1}"  # three calm, the odd one shines or shakes
    for s, imgs in drawn("rsn-bongard-concept"):
        has = [{st for _, st in img} for img in imgs]
        rule = (has[0] & has[1]) - {"calm"}
        assert len(rule) == 1 and has[2] == has[3] == {"calm"}, has  # one marked state; the negatives are calm
        assert s.answer == ("yes" if rule <= has[4] else "no") and has[4] <= rule | {"calm"}
    for s, imgs in drawn("rsn-common-state"):
        has = [[st for _, st in img] for img in imgs]
        assert all(len(h) == 2 for h in has)
        assert set.intersection(*map(set, has)) == {s.answer}, has  # only the answer is in every image


@pytest.mark.parametrize("state", [s for s in STATES if s != "calm"])
def test_state_marks_are_drawn_around_the_object_and_keep_it(state):
    calm = np.asarray(render(Scene([Obj("square", "blue", size="small")]))).astype(int)
    marked = np.asarray(render(Scene([Obj("square", "blue", size="small", state=state)]))).astype(int)
    ys, xs = np.nonzero((calm != marked).any(axis=2))
    assert len(ys) > 15  # visible marks
    assert (np.maximum(abs(ys - 32), abs(xs - 32)) > 7).all()  # all outside the object (small: radius 7)
    assert tuple(marked[32, 32]) == COLORS["blue"]


def test_the_two_states_look_different():
    a, b = (np.asarray(render(Scene([Obj("circle", "red", size="small", state=s)]))) for s in ("shining", "shaking"))
    assert (a != b).any(axis=2).sum() > 15
    with pytest.raises(ValueError, match="unknown object state 'asleep'"):
        render(Scene([Obj("circle", "red", state="asleep")]))


def test_place_pad_keeps_objects_clear_of_the_border():
    rng = rng_for("pad-test")
    for _ in range(50):
        (o,) = place(rng, [Obj("star", "red", size="small")], pad=8)
        assert 7 + 1 + 8 <= o.x < 64 - 7 - 8 and 7 + 1 + 8 <= o.y < 64 - 7 - 8
