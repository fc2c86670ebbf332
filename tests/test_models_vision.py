"""The shared vision tower: labels, one cached tower per recipe, copied into every tiny LLaVA and kept frozen."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from conftest import TINY_RECIPE
from safetensors.torch import load_file

from drake_bench.benchmarks.synth.world import SHAPES, STATES, STYLES, Obj, Scene
from drake_bench.models import pretrain, vision


def test_targets_follow_what_is_drawn():
    from drake_bench.benchmarks.synth.public import PerceptionPicture

    star = Obj("star", "blue", size="small", style="striped", x=40, y=10)
    star.cracked, star.state = True, "shining"
    pic = PerceptionPicture(Scene(objects=[star], distortion="blur"), "paper", None)
    tokens = vision.token_targets(pic)
    cell = vision.cell_of(star)
    assert cell == 0 * vision.GRID + 2  # row 0 (y 10 < 16), column 2 (32 <= x 40 < 48)
    present, shape, color, size, style, cracked, state = tokens[cell].tolist()
    assert (present, SHAPES[shape], size, STYLES[style], cracked) == (1, "star", 0, "outlined", 1)
    assert STATES[state] == "shining"
    # the small star's bounding square (x 33-47, y 3-17) covers cell 2 (15 x 13 px) and cell 6 below it
    # (15 x 2 px >= 16), and nothing else
    covered = {k for k in range(vision.GRID**2) if tokens[k, 0] == 1}
    assert covered == {2, 6}
    others = [k for k in range(vision.GRID**2) if k not in covered]
    assert (tokens[others, 0] == 0).all() and (tokens[others, 1:] == vision.IGNORE).all()
    presence = vision.presence_targets(pic)
    assert presence.sum() == 4 and presence[SHAPES.index("star")] == 1 and presence[-3] == 1 and presence[-2] == 1
    count, domain, distortion, text = vision.image_targets(pic)
    vocab = vision.image_vocabularies()
    assert (vocab[0][count], vocab[1][domain], vocab[2][distortion], vocab[3][text]) == ("1", "paper", "blur", "none")
    plain = PerceptionPicture(pic.scene, "plain", None)
    assert STYLES[vision.token_targets(plain)[cell, 4]] == "striped"  # only paper draws outlines whatever the style


def test_heads_loss_is_finite_and_decreases_on_one_batch():
    from drake_bench.benchmarks.synth.public import perception_pictures

    torch.manual_seed(0)
    heads = vision.PerceptionHeads(8)
    pics = perception_pictures(0, 8)
    y = vision.targets(pics)
    x = torch.randn(8, vision.GRID**2, 8)
    opt = torch.optim.SGD(heads.parameters(), lr=0.5)
    first = heads.loss(x, *y)
    for _ in range(20):
        loss = heads.loss(x, *y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert torch.isfinite(first) and float(loss.detach()) < float(first.detach())


def test_tower_training_resumes_to_identical_weights(tmp_path, monkeypatch):
    from transformers import AutoModel

    from drake_bench.benchmarks.synth import public
    from drake_bench.models.tokenizer import make_image_processor
    from drake_bench.models.zoo import vision_config

    recipe = dataclasses.replace(TINY_RECIPE, tower_steps=4, tower_batch=2)

    def fresh():
        torch.manual_seed(0)
        return AutoModel.from_config(vision_config())

    straight = fresh()
    vision.train_tower(straight, make_image_processor(), recipe)
    real, calls = public.perception_pictures, {"n": 0}

    def interrupted_at_step_4(start, n, seed=0, **kwargs):
        calls["n"] += 1
        if calls["n"] == 4:
            raise KeyboardInterrupt
        return real(start, n, seed, **kwargs)

    monkeypatch.setattr(public, "perception_pictures", interrupted_at_step_4)
    with pytest.raises(KeyboardInterrupt):
        vision.train_tower(fresh(), make_image_processor(), recipe, resume_dir=tmp_path / "snap", snapshot_every=2)
    monkeypatch.setattr(public, "perception_pictures", real)
    resumed = fresh()  # a new process: fresh weights, then the snapshot after step 2
    report = vision.train_tower(resumed, make_image_processor(), recipe, resume_dir=tmp_path / "snap", snapshot_every=2)
    assert len(report["losses"]) == 4
    assert all(torch.equal(a, b) for a, b in zip(straight.state_dict().values(), resumed.state_dict().values()))


def test_probe_reports_every_attribute():
    from transformers import AutoModel

    from drake_bench.models.tokenizer import make_image_processor
    from drake_bench.models.zoo import vision_config

    torch.manual_seed(0)
    report = vision.probe_tower(AutoModel.from_config(vision_config()), make_image_processor(), n=60)
    expected = {
        "shape",
        "color",
        "size",
        "style",
        "cracked",
        "state",
        "count",
        "domain",
        "distortion",
        "text",
        "position",
    }
    assert set(report["accuracy"]) == expected == set(report["chance"])
    assert all(a is None or 0 <= a <= 1 for a in report["accuracy"].values())


def test_tower_is_trained_once_shared_by_every_tiny_llava_and_frozen(tiny_cache):
    home, _ = tiny_cache
    path = vision.ensure_vision_tower(TINY_RECIPE)
    report = vision.tower_report(path)
    assert len(report["losses"]) == TINY_RECIPE.tower_steps and "shape" in report["probe"]["accuracy"]
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
    other = load_file(
        str(vision.ensure_vision_tower(dataclasses.replace(TINY_RECIPE, tower_lr=5e-2)) / "model.safetensors")
    )
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
