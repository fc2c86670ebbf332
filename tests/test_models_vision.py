"""The shared vision tower: labels, one cached tower per recipe, copied into every tiny LLaVA and kept frozen."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from safetensors.torch import load_file

from drake_bench.models import pretrain, vision
from drake_bench.synth.world import DOMAINS, SHAPES, STYLES, Obj, Scene

from conftest import TINY_RECIPE


def test_object_labels_follow_what_is_drawn():
    sc = Scene(objects=[Obj("star", "blue", size="small", style="striped")], domain="paper")
    shape, _, size, style, domain = vision.object_labels(sc)
    assert SHAPES[shape] == "star" and size == 0 and list(DOMAINS)[domain] == "paper"
    assert STYLES[style] == "outlined"  # the paper domain draws outlines whatever the object's style
    sc.domain = "plain"
    assert STYLES[vision.object_labels(sc)[3]] == "striped"


def test_heads_loss_is_finite_and_decreases_on_one_batch():
    from drake_bench.synth.public import public_objects, public_scenes

    torch.manual_seed(0)
    heads = vision.TowerHeads(8)
    objs, scenes = public_objects(0, 8), public_scenes(8)
    labels = torch.tensor([vision.object_labels(s) for s in objs])
    targets = torch.stack([vision.attribute_targets(s) for s in scenes])
    x, y = torch.randn(8, 8), torch.randn(8, 8)
    opt = torch.optim.SGD(heads.parameters(), lr=0.5)
    first = heads.loss(x, labels, y, targets)
    for _ in range(20):
        loss = heads.loss(x, labels, y, targets)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert torch.isfinite(first) and float(loss.detach()) < float(first.detach())
    assert set(heads.accuracy(x, labels)) == set(vision.HEADS)


def test_tower_is_trained_once_shared_by_every_tiny_llava_and_frozen(tiny_cache):
    home, _ = tiny_cache
    path = vision.ensure_vision_tower(TINY_RECIPE)
    report = vision.tower_report(path)
    assert len(report["losses"]) == TINY_RECIPE.tower_steps and set(report["held_out_accuracy"]) == set(vision.HEADS)
    tower = load_file(str(path / "model.safetensors"))
    mtime = (path / "model.safetensors").stat().st_mtime_ns
    for name in ("tiny-llava-llama-s", "tiny-llava-qwen2-m"):
        weights = load_file(str(pretrain.ensure_pretrained(name) / "model.safetensors"))
        mine = {k.split("vision_tower.", 1)[1]: v for k, v in weights.items() if "vision_tower." in k}
        assert mine.keys() == tower.keys()
        assert all(torch.equal(mine[k], tower[k]) for k in tower)  # copied, then frozen in both stages
    assert (path / "model.safetensors").stat().st_mtime_ns == mtime  # cached, not retrained


def test_tower_training_is_deterministic_and_recipe_keyed(tiny_cache):
    path = vision.ensure_vision_tower(TINY_RECIPE)
    first = load_file(str(path / "model.safetensors"))
    import shutil

    shutil.rmtree(path)
    again = load_file(str(vision.ensure_vision_tower(TINY_RECIPE) / "model.safetensors"))
    assert all(torch.equal(first[k], again[k]) for k in first)
    other = load_file(str(vision.ensure_vision_tower(dataclasses.replace(TINY_RECIPE, tower_lr=5e-2))
                          / "model.safetensors"))
    assert any(not torch.equal(first[k], other[k]) for k in first)


@pytest.mark.parametrize("name", ["tiny-llava-llama-s"])
def test_projector_alignment_leaves_the_tower_untouched(name):
    from drake_bench.models.testing import toy_tokenizer
    from drake_bench.models.tokenizer import make_processor
    from drake_bench.models.zoo import build_tiny

    model = build_tiny(name)
    before = {k: v.clone() for k, v in model.model.vision_tower.state_dict().items()}
    proj = {k: v.clone() for k, v in model.model.multi_modal_projector.state_dict().items()}
    recipe = dataclasses.replace(TINY_RECIPE, vision_steps=3, vision_items=8, vision_batch=4)
    losses = pretrain.align_vision(model, make_processor(toy_tokenizer()), recipe)
    assert len(losses) == 3
    assert all(torch.equal(before[k], v) for k, v in model.model.vision_tower.state_dict().items())
    assert any(not torch.equal(proj[k], v) for k, v in model.model.multi_modal_projector.state_dict().items())
