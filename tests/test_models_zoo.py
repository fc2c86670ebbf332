"""Zoo: every tiny model builds, trains one step and generates; shapes differ as declared; names resolve."""

from __future__ import annotations

import pytest
import torch

from drake_bench.errors import UnknownNameError
from drake_bench.models import engine
from drake_bench.models.testing import toy_processor, toy_samples, toy_tokenizer
from drake_bench.models.zoo import (
    FAMILIES,
    REAL_MODELS,
    SIZES,
    architecture_key,
    build_tiny,
    model_info,
    tiny_config,
    tiny_names,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_names_follow_one_scheme():
    assert len(tiny_names()) == 12
    assert set(tiny_names(multimodal=True)) == {f"tiny-llava-{f}-{s}" for f in FAMILIES for s in SIZES}
    assert set(tiny_names(multimodal=False)) == {f"tiny-{f}-{s}" for f in FAMILIES for s in SIZES}
    assert architecture_key("tiny-llava-llama-s") == "llava-llama-s"
    assert architecture_key("tiny-qwen2-l") == "qwen2-l"
    assert len({architecture_key(n) for n in tiny_names()}) == 12


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("multimodal", [True, False])
def test_sizes_differ_in_width_and_depth(family, multimodal):
    prefix = "tiny-llava-" if multimodal else "tiny-"
    cfgs = [tiny_config(f"{prefix}{family}-{s}") for s in SIZES]
    texts = [c.text_config if multimodal else c for c in cfgs]
    widths = [c.hidden_size for c in texts]
    depths = [c.num_hidden_layers for c in texts]
    assert widths == sorted(set(widths)) and depths == sorted(set(depths))
    models = [build_tiny(f"{prefix}{family}-{s}") for s in SIZES]
    counts = [sum(p.numel() for p in m.parameters()) for m in models]
    assert counts == sorted(set(counts))
    for m, w, d in zip(models, widths, depths):  # the built modules really have these shapes
        lm = m.model.language_model if multimodal else m.model
        assert len(lm.layers) == d and lm.embed_tokens.embedding_dim == w


def test_families_are_real_transformers_classes():
    from transformers import LlamaForCausalLM, LlavaForConditionalGeneration, Qwen2ForCausalLM

    assert isinstance(build_tiny("tiny-llama-s"), LlamaForCausalLM)
    assert isinstance(build_tiny("tiny-qwen2-s"), Qwen2ForCausalLM)
    mm = build_tiny("tiny-llava-qwen2-m")
    assert isinstance(mm, LlavaForConditionalGeneration)
    assert mm.config.text_config.model_type == "qwen2" and mm.config.vision_config.model_type == "swin"
    # Llama and Qwen2 widths differ, so cross-family adapters face mismatched shapes.
    assert tiny_config("tiny-llama-s").hidden_size != tiny_config("tiny-qwen2-s").hidden_size


def test_build_is_deterministic_and_seeded():
    a, b, c = build_tiny("tiny-qwen2-s"), build_tiny("tiny-qwen2-s"), build_tiny("tiny-qwen2-s", seed=1)
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not all(torch.equal(sa[k], sc[k]) for k in sa)


@pytest.mark.parametrize("name", tiny_names())
def test_every_model_trains_one_step_and_generates(name):
    mm = model_info(name).multimodal
    proc = toy_processor() if mm else toy_tokenizer()
    batch = toy_samples(4, seed=1, with_images=mm)
    model = build_tiny(name)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = engine.train_step(model, proc, batch, opt)
    assert loss == loss and 3.0 < loss < 12.0  # finite, about ln(vocab) for a fresh model
    changed = [k for k, v in model.state_dict().items() if not torch.equal(v, before[k])]
    assert any("layers.0" in k for k in changed)
    if mm:
        assert any("vision_tower" in k for k in changed) and any("multi_modal_projector" in k for k in changed)
    outs = engine.generate(model, proc, batch[:2], max_new_tokens=3)
    assert len(outs) == 2 and all(isinstance(o, str) for o in outs)


def test_real_names_resolve_without_network():
    info = model_info("llava-1.5-7b")
    assert info.source == "llava-hf/llava-1.5-7b-hf" and info.multimodal and not info.tiny
    assert model_info("llama-3.2-1b").source == "meta-llama/Llama-3.2-1B"
    assert model_info("qwen2.5-0.5b").source == "Qwen/Qwen2.5-0.5B" and model_info("qwen2.5-0.5b").family == "qwen2"
    assert model_info("some-org/some-model").source == "some-org/some-model"
    assert architecture_key("llama-3.2-1b") == architecture_key("meta-llama/Llama-3.2-1B")
    assert set(REAL_MODELS) >= {"llava-1.5-7b", "llama-3.2-1b", "qwen2.5-0.5b"}


@pytest.mark.parametrize("bad", ["tiny-llama-xl", "tiny-gpt2-s", "tiny-llava-llama", "no_such_model"])
def test_unknown_names_are_named_in_the_error(bad):
    with pytest.raises(UnknownNameError, match=bad):
        model_info(bad)


def test_a_real_checkpoint_missing_offline_is_one_located_error(monkeypatch, tmp_path):
    """transformers' own error is a 60-line traceback; load_base names the checkpoint, the cache and the way out."""
    from huggingface_hub import constants

    from drake_bench.errors import DrakeBenchError
    from drake_bench.models import load_base

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    with pytest.raises(DrakeBenchError) as err:
        load_base("qwen2.5-0.5b")
    text = str(err.value)
    assert "'Qwen/Qwen2.5-0.5B' is not in the Hugging Face cache" in text and "hf download Qwen/Qwen2.5-0.5B" in text
    assert "\n" not in text
