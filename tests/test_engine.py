"""Engine: answer-only loss, batched greedy generation, multiple-choice scoring, routing, errors."""

from __future__ import annotations

import pytest
import torch

from drake_bench.errors import DrakeBenchError
from drake_bench.models import engine
from drake_bench.models.testing import toy_processor, toy_samples, toy_tokenizer
from drake_bench.models.zoo import build_tiny
from drake_bench.sample import AnswerType


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
    assert [p for p, s in zip(preds, batch) if s.answer_type != AnswerType.FREE_TEXT] == \
        [s.answer for s in batch if s.answer_type != AnswerType.FREE_TEXT]


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


def test_text_model_rejects_images_naming_the_sample():
    tok = toy_tokenizer()
    model = build_tiny("tiny-llama-s")
    with pytest.raises(DrakeBenchError, match="toy/0/0"):
        engine.generate(model, tok, toy_samples(1, seed=0))
    with pytest.raises(DrakeBenchError, match="empty batch"):
        engine.loss_on(model, tok, [])
