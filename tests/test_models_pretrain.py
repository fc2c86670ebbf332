"""Pretraining and loading: deterministic cached checkpoints, from_pretrained round trips, real names offline."""

from __future__ import annotations

import dataclasses

import torch
from conftest import TINY_RECIPE
from safetensors.torch import load_file

from drake_bench.models import load_base, pretrain
from drake_bench.models.testing import toy_samples
from drake_bench.models.zoo import REAL_MODELS, build_tiny


def _weights(path):
    return load_file(str(path / "model.safetensors"))


def test_load_base_builds_once_caches_and_loads_with_from_pretrained(tiny_cache):
    home, calls = tiny_cache
    model, proc = load_base("tiny-llava-llama-s")
    path = home / "tiny-llava-llama-s"
    assert (path / "config.json").is_file() and (path / "model.safetensors").is_file()
    assert (path / "processor_config.json").is_file() and (path / "tokenizer.json").is_file()
    assert type(proc).__name__ == "LlavaProcessor" and type(model).__name__ == "LlavaForConditionalGeneration"
    assert not any(p.requires_grad for p in model.parameters()) and not model.training
    assert calls == [True]
    load_base("tiny-llava-llama-s")  # cached: no retraining
    assert calls == [True]
    text_model, tok = load_base("tiny-qwen2-s")
    assert calls == [True, False]
    # AutoTokenizer may pick the family's class (Qwen2Tokenizer); ids and special ids must not change
    from transformers import AutoTokenizer

    shared = AutoTokenizer.from_pretrained(home / pretrain.TOKENIZER_DIR)
    text = "USER: The square is red. ASSISTANT: red</s>"
    assert tok(text)["input_ids"] == shared(text)["input_ids"] == proc.tokenizer(text)["input_ids"]
    assert (tok.pad_token_id, tok.bos_token_id, tok.eos_token_id) == (0, 1, 2)
    assert len(tok) <= text_model.get_input_embeddings().num_embeddings
    # pretraining changed the weights away from the random init
    init = build_tiny("tiny-qwen2-s").state_dict()
    loaded = text_model.state_dict()
    assert any(not torch.equal(loaded[k], init[k]) for k in init)


def test_pretraining_is_deterministic_and_rebuilt_on_demand(tiny_cache):
    home, calls = tiny_cache
    path = pretrain.ensure_pretrained("tiny-llava-qwen2-s")
    first = _weights(path)
    import shutil

    shutil.rmtree(path)
    again = _weights(pretrain.ensure_pretrained("tiny-llava-qwen2-s"))
    assert first.keys() == again.keys() and all(torch.equal(first[k], again[k]) for k in first)
    other = _weights(pretrain.ensure_pretrained("tiny-llava-qwen2-s", seed=1))
    assert any(not torch.equal(first[k], other[k]) for k in first)
    assert (home / "tiny-llava-qwen2-s-seed1").is_dir() and len(calls) == 3


def test_changed_recipe_triggers_a_rebuild(tiny_cache, monkeypatch):
    home, calls = tiny_cache
    pretrain.ensure_pretrained("tiny-qwen2-s")
    monkeypatch.setattr(pretrain, "DEFAULT_RECIPE", dataclasses.replace(TINY_RECIPE, lr=1e-3))
    pretrain.ensure_pretrained("tiny-qwen2-s")
    pretrain.ensure_pretrained("tiny-qwen2-s")
    assert calls == [False, False]


def test_pretrain_loop_same_seed_same_weights():
    tokfree = toy_samples(48, seed=3, with_images=False)
    from drake_bench.models.testing import toy_tokenizer

    outs = []
    for seed in (0, 0, 1):
        m = build_tiny("tiny-llama-s")
        losses = pretrain.pretrain(m, toy_tokenizer(), tokfree, TINY_RECIPE, multimodal=False, seed=seed, steps=4)
        outs.append((losses, m.state_dict()))
    assert outs[0][0] == outs[1][0]
    assert all(torch.equal(outs[0][1][k], outs[1][1][k]) for k in outs[0][1])
    assert outs[0][0] != outs[2][0]  # the seed changes the batch order


def test_local_directory_and_hub_name_load_offline(tmp_path, monkeypatch):
    """The real-checkpoint path: a local dir by path, and a short real name resolved from the HF cache."""
    import huggingface_hub.constants as hub_constants

    from drake_bench.models.testing import toy_loader

    model, tok = toy_loader("tiny-qwen2-s")
    local = tmp_path / "ckpt"
    model.save_pretrained(local)
    tok.save_pretrained(local)
    loaded, ltok = load_base(str(local))
    assert all(torch.equal(loaded.state_dict()[k], v) for k, v in model.state_dict().items())
    assert ltok("hello")["input_ids"] == tok("hello")["input_ids"]

    cache = tmp_path / "hub"
    repo = cache / ("models--" + REAL_MODELS["qwen2.5-0.5b"].replace("/", "--"))
    snap = repo / "snapshots" / ("0" * 40)
    model.save_pretrained(snap)
    tok.save_pretrained(snap)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0" * 40)
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(cache))
    by_name, _ = load_base("qwen2.5-0.5b")
    assert all(torch.equal(by_name.state_dict()[k], v) for k, v in model.state_dict().items())
    assert not any(p.requires_grad for p in by_name.parameters())


def test_is_pretrained_tracks_the_cache(tiny_cache):
    assert not pretrain.is_pretrained("tiny-qwen2-s")
    pretrain.ensure_pretrained("tiny-qwen2-s")
    assert pretrain.is_pretrained("tiny-qwen2-s") and not pretrain.is_pretrained("tiny-qwen2-s", seed=1)


def test_run_command_pretrains_only_missing_tiny_models_up_front(monkeypatch):
    from rich.console import Console

    from drake_bench import runner

    built = []
    monkeypatch.setattr(pretrain, "is_pretrained", lambda name, seed=0, recipe=None: name == "tiny-llama-s")
    monkeypatch.setattr(pretrain, "ensure_pretrained", lambda name, seed=0, recipe=None: built.append(name))
    console = Console(record=True, force_terminal=False)
    runner.prepare_tiny_models(["none", "tiny-llama-s", "tiny-llava-qwen2-m", "llava-1.5-7b"], console)
    assert built == ["tiny-llava-qwen2-m"]  # cached, unknown and real names are left alone
    assert "pretrained tiny-llava-qwen2-m" in console.export_text()
