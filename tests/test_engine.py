"""Engine: answer-only loss, batched greedy generation, multiple-choice scoring, routing, errors."""

from __future__ import annotations

import pytest
import torch

from drake_bench.benchmarks.sample import AnswerType
from drake_bench.errors import DrakeBenchError
from drake_bench.models import engine
from drake_bench.models.testing import toy_processor, toy_samples, toy_tokenizer
from drake_bench.models.zoo import build_tiny

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_labels_cover_answer_tokens_only():
    proc, tok = toy_processor(), toy_tokenizer()
    model = build_tiny("tiny-llava-qwen2-s")
    batch = toy_samples(4, seed=2)
    enc = engine.encode_for_training(model, proc, batch)
    for i, s in enumerate(batch):
        lab = enc["labels"][i]
        kept = lab[lab != engine.IGNORE_INDEX].tolist()
        assert kept == tok(engine.target(s), add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    assert not (enc["labels"] == 3).any()  # no image token is ever a target
    assert enc["pixel_values"].shape[0] == sum(len(s.images) for s in batch)


def test_loss_matches_transformers_loss():
    proc = toy_processor()
    model = build_tiny("tiny-llava-llama-s")
    batch = toy_samples(4, seed=3)
    ours = engine.loss_on(model, proc, batch)
    ref = model(**engine.encode_for_training(model, proc, batch)).loss
    assert torch.allclose(ours, ref, atol=1e-5)


def _trained(name, batch, proc, steps=60):
    model = build_tiny(name)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = [engine.train_step(model, proc, batch, opt) for _ in range(steps)]
    return model, losses


def test_training_memorises_a_batch_and_choose_and_generate_follow():
    tok = toy_tokenizer()
    batch = toy_samples(8, seed=4, with_images=False)
    # tiny-llama-s: the 48-wide Qwen2-s needs far more steps to tell apart two items that differ
    # only in the colour word they must copy (cloze targets)
    model, losses = _trained("tiny-llama-s", batch, tok, steps=100)
    assert losses[-1] < 0.2 * losses[0]
    choice = [s for s in batch if s.answer_type in (AnswerType.MULTIPLE_CHOICE, AnswerType.YES_NO)]
    assert engine.choose(model, tok, choice) == [s.answer for s in choice]
    opens = [s for s in batch if s.answer_type == AnswerType.OPEN]
    assert engine.generate(model, tok, opens) == [s.answer for s in opens]
    preds = engine.predict(model, tok, batch)
    assert [p for p, s in zip(preds, batch) if s.answer_type != AnswerType.FREE_TEXT] == [
        s.answer for s in batch if s.answer_type != AnswerType.FREE_TEXT
    ]


def test_generation_is_batch_invariant_with_left_padding():
    proc = toy_processor()
    batch = toy_samples(6, seed=5)  # 1-3 images each: prompts of different lengths
    model, _ = _trained("tiny-llava-qwen2-s", batch, proc, steps=15)
    together = engine.generate(model, proc, batch, max_new_tokens=6)
    alone = [engine.generate(model, proc, [s], max_new_tokens=6)[0] for s in batch]
    assert together == alone
    assert engine.generate(model, proc, batch, max_new_tokens=6) == together  # deterministic
    scores_b = engine.score_targets(model, proc, [(s, " A") for s in batch])
    scores_1 = [engine.score_targets(model, proc, [(s, " A")])[0] for s in batch]
    assert scores_b == pytest.approx(scores_1, abs=1e-4)


def test_choose_returns_option_text_and_model_mode_is_restored():
    proc = toy_processor()
    model = build_tiny("tiny-llava-llama-s")
    model.train()
    items = [s for s in toy_samples(8, seed=6) if s.choices]
    out = engine.choose(model, proc, items)
    assert all(o in s.choices for o, s in zip(out, items))
    assert model.training


def _lora_model():
    from peft import get_peft_model

    from drake_bench.models.adapters import lora_config

    return get_peft_model(build_tiny("tiny-llava-llama-s"), lora_config())


@pytest.mark.parametrize("mode", [False, True])
def test_set_training_leaves_the_flags_model_train_leaves(mode):
    import copy

    fast = _lora_model()
    fast.train(not mode)
    fast.get_submodule("base_model.model.model.vision_tower").train(
        mode
    )  # a submodule already in the target mode, the rest not
    slow = copy.deepcopy(fast)
    engine.set_training(fast, mode)
    slow.train(mode)
    flags = {n: m.training for n, m in fast.named_modules()}
    assert flags == {n: m.training for n, m in slow.named_modules()}
    assert set(flags.values()) == {mode}


def test_set_training_goes_through_a_train_that_does_more():
    class Counted(torch.nn.Identity):
        calls: list[bool] = []

        def train(self, mode=True):
            Counted.calls.append(mode)
            return super().train(mode)

    model = _lora_model()
    model.base_model.model.extra = Counted()
    engine.set_training(model, False)
    engine.set_training(model, True)
    assert Counted.calls == [False, True]
    assert all(m.training for m in model.modules())


def test_text_model_rejects_images_naming_the_sample():
    tok = toy_tokenizer()
    model = build_tiny("tiny-llama-s")
    with pytest.raises(DrakeBenchError, match="toy/0/0"):
        engine.generate(model, tok, toy_samples(1, seed=0))
    with pytest.raises(DrakeBenchError, match="empty batch"):
        engine.loss_on(model, tok, [])


# ------------------------------------------------------------------------------------------- packed training
PACKED = [("tiny-llava-llama-s", True), ("tiny-llava-qwen2-s", True), ("tiny-llama-s", False), ("tiny-qwen2-s", False)]


def _grads(model, loss):
    params = [p for p in model.parameters() if p.requires_grad]  # LLaVA's last vision layer is unused (features: -2)
    return [g if g is not None else torch.zeros(()) for g in torch.autograd.grad(loss, params, allow_unused=True)]


@pytest.mark.parametrize("name, multimodal", PACKED)
def test_packed_loss_and_gradients_equal_the_padded_step(name, multimodal):
    """Items of different lengths (0 to 3 images of 36 tokens): padding fills many slots, packing none, and the
    loss and every gradient agree within float tolerance."""
    proc = toy_processor() if multimodal else toy_tokenizer()
    model = build_tiny(name)
    model.train()
    batch = toy_samples(6, seed=5, with_images=multimodal)
    assert engine.packs(model)
    padded, packed = engine.loss_on(model, proc, batch, packed=False), engine.loss_on(model, proc, batch, packed=True)
    assert torch.allclose(packed, padded, rtol=1e-5, atol=1e-6)
    for a, b in zip(_grads(model, padded), _grads(model, packed)):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-6)
    enc = engine.encode_packed(model, proc, batch)
    slots = engine.encode_for_training(model, proc, batch)["attention_mask"]
    assert enc["input_ids"].numel() == int(slots.sum()) < slots.numel()  # exactly the real tokens: no padding


def test_packed_items_do_not_see_each_other():
    """The loss of two packed items is the token-weighted mean of each one's own loss: an item attending to the one
    packed before it would change it (here the second item alone would be scored differently)."""
    proc = toy_processor()
    model = build_tiny("tiny-llava-llama-s")
    model.eval()
    a, b = toy_samples(2, seed=6)
    n = [len(engine.encode_packed(model, proc, [s])["labels"][0].ne(engine.IGNORE_INDEX).nonzero()) for s in (a, b)]
    with torch.no_grad():
        alone = [engine.loss_on(model, proc, [s], packed=True) for s in (a, b)]
        both = engine.loss_on(model, proc, [a, b], packed=True)
    assert torch.allclose(both, (n[0] * alone[0] + n[1] * alone[1]) / sum(n), rtol=1e-5)


def test_a_model_type_that_cannot_pack_trains_padded(monkeypatch):
    proc = toy_tokenizer()
    model = build_tiny("tiny-llama-s")
    batch = toy_samples(3, seed=7, with_images=False)
    monkeypatch.setattr(engine, "PACKABLE_MODEL_TYPES", frozenset())
    assert not engine.packs(model)
    assert torch.equal(engine.loss_on(model, proc, batch), engine.loss_on(model, proc, batch, packed=False))
    with pytest.raises(DrakeBenchError, match="packed training is not supported for model type 'llama'"):
        engine.loss_on(model, proc, batch, packed=True)


def test_answer_logits_packed_equal_padded_rows_tokens_and_counts():
    """What the distillation entries and TAP read: the same rows, item after item, either way."""
    proc = toy_processor()
    model = build_tiny("tiny-llava-qwen2-s")
    model.eval()
    batch = toy_samples(5, seed=8)
    with torch.no_grad():
        a = engine.answer_logits(model, proc, batch, packed=False)
        b = engine.answer_logits(model, proc, batch, packed=True)
    assert torch.equal(a[1], b[1]) and a[2] == b[2] and sum(a[2]) == len(a[1])
    assert torch.allclose(a[0], b[0], rtol=1e-4, atol=1e-5)
