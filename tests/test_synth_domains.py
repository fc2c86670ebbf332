"""Group visual domains: drake-synth's relation and reasoning clients each see their own visual domain."""

from __future__ import annotations

import numpy as np
import pytest

from drake_bench.benchmarks.manifest import load_benchmark
from drake_bench.benchmarks.synth.definitions import GROUP_DOMAIN
from drake_bench.benchmarks.synth.loader import DOMAIN_VERSION, fresh_items, task_generator
from drake_bench.benchmarks.synth.render import group_domain, render
from drake_bench.benchmarks.synth.world import COLORS, DOMAINS, GROUP_DOMAINS, Obj, Scene
from drake_bench.errors import SourceError


def _scene(domain: str = "plain") -> Scene:
    return Scene([Obj("square", "blue", x=20, y=20), Obj("circle", "red", size="small", x=44, y=24)], domain)


def _px(img) -> np.ndarray:
    return np.asarray(img.convert("RGB")).astype(int)


def _empty_pixel(domain: str, y: int, x: int) -> tuple:
    """Pixel (y, x) of an empty plain scene drawn in a group ``domain``."""
    with group_domain(domain):
        return tuple(_px(render(Scene([])))[y, x])


@pytest.mark.parametrize("domain", sorted(GROUP_DOMAINS))
def test_group_domain_restyles_plain_scenes_and_keeps_their_objects(domain):
    plain = _px(render(_scene()))
    with group_domain(domain):
        styled = _px(render(_scene()))
    assert (plain != styled).any(axis=2).mean() > 0.3  # other surroundings, not a recolouring of a few pixels
    for x, y, colour in ((20, 20, "blue"), (44, 24, "red")):  # the objects keep their fill colours and positions
        assert tuple(styled[y, x]) == tuple(plain[y, x]) == COLORS[colour]
    assert (_px(render(_scene())) == plain).all()  # the block ends with the with-statement


def test_scenes_with_their_own_domain_are_not_restyled():
    for own in ("paper", "table", "night"):
        before = _px(render(_scene(own)))
        with group_domain("studio"):
            assert (_px(render(_scene(own))) == before).all(), own


def test_the_two_group_domains_differ_from_each_other_and_from_every_shared_domain():
    assert len({_empty_pixel(d, 2, 8) for d in GROUP_DOMAINS}) == 2
    assert not set(GROUP_DOMAINS) & set(DOMAINS)  # the public mix and pretraining targets draw DOMAINS only
    with pytest.raises(ValueError, match="unknown group visual domain 'forest'"):
        with group_domain("forest"):
            pass


def test_manifest_gives_each_group_its_domain_and_no_other_task_one():
    spec = load_benchmark("drake-synth")
    group_of = {t: c.group for c in spec.clients for t in c.tasks}
    for t in spec.tasks:
        domain = t.source.rule.get("visual_domain")
        assert domain == GROUP_DOMAIN.get(group_of.get(t.id, "unseen")), t.id
        assert (t.source.rule["generator_version"] >= DOMAIN_VERSION) == (domain is not None), t.id
    assert set(GROUP_DOMAIN) == {"visual-relation", "multimodal-reasoning"}
    assert sum(1 for t in spec.tasks if t.source.rule.get("visual_domain")) == 24
    assert all("visual_domain" not in t.source.rule for t in load_benchmark("drake-synth@1.5.0").tasks)


def test_items_of_each_group_are_drawn_in_its_domain():
    """The corner pixel tells a client's group: studio wall, comic frame, or one of the shared backgrounds."""
    spec = load_benchmark("drake-synth")
    studio, comic = _empty_pixel("studio", 2, 8), _empty_pixel("comic", 0, 8)
    for c in spec.clients:
        for tid in c.tasks:
            for s in fresh_items(spec.task(tid), 3, seed=9):
                for img in s.images:
                    px = _px(img)
                    is_studio, is_comic = tuple(px[2, 8]) == studio, tuple(px[0, 8]) == comic
                    expect = GROUP_DOMAIN.get(c.group)
                    assert (is_studio, is_comic) == (expect == "studio", expect == "comic"), (c.id, tid)


def test_bad_visual_domain_in_a_manifest_is_refused_naming_the_field():
    task = load_benchmark("drake-synth").task("rel-spatial")

    def with_rule(**rule):
        return task.model_copy(update={"source": task.source.model_copy(update={"rule": {**task.source.rule, **rule}})})

    with pytest.raises(
        SourceError, match=r"task 'rel-spatial': source.rule.visual_domain 'forest'.*known: \['comic', 'studio'\]"
    ):
        fresh_items(with_rule(visual_domain="forest"), 1, seed=3)
    with pytest.raises(SourceError, match="needs generator_version >= 6"):
        fresh_items(with_rule(generator_version=5), 1, seed=3)
    gen, version = task_generator(task)
    assert version == DOMAIN_VERSION and gen.version < version  # the generator itself is unchanged since version 3
