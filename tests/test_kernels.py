"""Segment attention and native RMSNorm (drake_bench.models.kernels) compute what the paths they replace compute."""

from __future__ import annotations

import pytest
import torch

from drake_bench.models import engine
from drake_bench.models.kernels import SEGMENT_ATTENTION, packed_forward, use_native_rms_norm, use_segment_attention
from drake_bench.models.testing import toy_processor, toy_samples, toy_tokenizer
from drake_bench.models.zoo import build_tiny

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _grads(model, loss):
    loss.backward()
    out = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return out


@pytest.mark.parametrize(
    "name,multimodal",
    [("tiny-llava-llama-s", True), ("tiny-llava-qwen2-s", True), ("tiny-llama-s", False), ("tiny-qwen2-s", False)],
)
def test_segment_attention_and_native_rms_norm_give_the_packed_steps_loss_and_gradients(name, multimodal):
    torch.manual_seed(0)
    proc = toy_processor() if multimodal else toy_tokenizer()
    model = build_tiny(name)
    batch = toy_samples(5, seed=3, with_images=multimodal)
    model.train()
    loss = engine.loss_on(model, proc, batch, packed=True)
    want = _grads(model, loss)
    use_segment_attention(model)
    assert use_native_rms_norm(model) > 0
    assert engine.packs(model)
    loss2 = engine.loss_on(model, proc, batch, packed=True)
    got = _grads(model, loss2)
    assert float(loss2) == pytest.approx(float(loss), rel=1e-5)
    assert set(got) == set(want)
    for n in want:
        torch.testing.assert_close(got[n], want[n], rtol=1e-4, atol=1e-6)


def test_segment_attention_keeps_items_apart_and_padded_forwards_unchanged():
    """Outside a packed forward the implementation is SDPA with the model's mask (generation, scoring); inside, an
    item's logits do not depend on the item before it."""
    torch.manual_seed(0)
    tok = toy_tokenizer()
    model = build_tiny("tiny-llama-s")
    model.eval()
    items = toy_samples(4, seed=1, with_images=False)
    with torch.no_grad():
        before = engine.choice_scores(model, tok, [s for s in items if s.choices] or items[:1])
        use_segment_attention(model)
        assert model.config._attn_implementation == SEGMENT_ATTENTION
        after = engine.choice_scores(model, tok, [s for s in items if s.choices] or items[:1])
        alone, _, _ = engine.answer_logits(model, tok, items[1:2], packed=True)
        packed, _, counts = engine.answer_logits(model, tok, items[:2], packed=True)
    assert [x for row in after for x in row] == pytest.approx([x for row in before for x in row], rel=1e-5)
    torch.testing.assert_close(packed[counts[0] :], alone, rtol=1e-4, atol=1e-5)


def test_switching_back_restores_sdpa_and_the_modules_own_norm():
    model = build_tiny("tiny-qwen2-s")
    use_segment_attention(model)
    n = use_native_rms_norm(model)
    use_segment_attention(model, on=False)
    assert use_native_rms_norm(model, on=False) == n
    assert model.config._attn_implementation == "sdpa"
    assert not any("forward" in m.__dict__ for m in model.modules())


def test_packed_forward_is_scoped():
    from drake_bench.models import kernels

    assert not kernels._PACKED.get()
    with packed_forward():
        assert kernels._PACKED.get()
    assert not kernels._PACKED.get()
