"""Shared-prefix choice scoring: the same scores as running every prompt + option in full, whatever the grouping.

``engine.choice_scores`` runs each prompt once and continues every option from the prompt's KV cache. These tests
check it against the plain full forward (``engine.score_targets``: prompt + target + eos, one row per option) on
items of every choice task of drake-synth and hflb-synth, with the shipped zoo's weights (real, peaked
distributions, where a wrong position or a leaked pad token would show), and check that one call per item, per
task and for everything at once give the same answers.
"""

from __future__ import annotations

import pytest

from drake_bench.benchmarks.sample import AnswerType
from drake_bench.benchmarks.synth.definitions import drake_synth_spec, hflb_synth_spec
from drake_bench.benchmarks.synth.loader import fresh_items
from drake_bench.models import engine, load_base
from drake_bench.models.prompting import candidate_targets

pytestmark = pytest.mark.usefixtures("one_torch_thread")

CHOICE = (AnswerType.MULTIPLE_CHOICE, AnswerType.YES_NO)
ITEMS_PER_TASK = 2


def _choice_items(spec) -> list:
    items = []
    for task in spec.tasks:
        if task.answer_type in CHOICE:
            items += fresh_items(task, ITEMS_PER_TASK, seed=777)
    return items


@pytest.fixture(scope="module")
def llava():
    return load_base("tiny-llava-llama-s", source="shipped")


@pytest.fixture(scope="module")
def items():
    return _choice_items(drake_synth_spec()) + _choice_items(hflb_synth_spec())


def test_every_choice_task_scores_as_the_full_forward(llava, items):
    model, proc = llava
    tok = engine.tokenizer_of(proc)
    assert len({s.task_id for s in items}) >= 25  # both benchmarks' choice tasks are here
    shared = engine.choice_scores(model, proc, items)
    multi = 0
    for s, got in zip(items, shared):
        cands = candidate_targets(s)
        ids = [tok(c, add_special_tokens=False)["input_ids"] for c in cands]
        if all(len(i) == 1 for i in ids):
            # one token each: the answer position's log-probability; the full forward gives it as the target's
            # log-likelihood minus its eos term
            full = engine.score_targets(model, proc, [(s, c) for c in cands])
            eos_terms = [_eos_term(model, proc, s, c) for c in cands]
            want = [f - e for f, e in zip(full, eos_terms)]
        else:
            multi += 1
            want = engine.score_targets(model, proc, [(s, c) for c in cands])
        assert got == pytest.approx(want, abs=2e-4), f"{s.id}: {cands}"
    assert multi >= 5  # the continuation path is exercised, not only the one-token path


def _eos_term(model, proc, sample, cand: str) -> float:
    """log p(eos | prompt, cand) from a full forward: the target's last token."""
    import torch

    tok = engine.tokenizer_of(proc)
    p_ids, pv = engine._encode_prompt(proc, sample)
    t_ids = tok(cand, add_special_tokens=False)["input_ids"]
    inputs = engine._collate([p_ids + t_ids], None, [pv], engine._pad_id(tok), False, model.device, torch.float32)
    with torch.inference_mode():
        logits = model(**inputs, logits_to_keep=1).logits
    return float(torch.log_softmax(logits[0, -1].float(), -1)[tok.eos_token_id])


def test_answers_do_not_depend_on_how_queries_are_grouped(llava, items):
    model, proc = llava
    together = engine.choose(model, proc, items, batch_size=64)
    alone = [engine.choose(model, proc, [s])[0] for s in items]
    by_task: dict[str, list] = {}
    for s in items:
        by_task.setdefault(s.task_id, []).append(s)
    per_task = {s.id: a for group in by_task.values() for s, a in zip(group, engine.choose(model, proc, group))}
    assert together == alone == [per_task[s.id] for s in items]
    # and the scores themselves agree to float tolerance, not only their argmax
    scores_1 = [x for s in items[:20] for x in engine.choice_scores(model, proc, [s])[0]]
    batched = [x for sc in engine.choice_scores(model, proc, items[:20], batch_size=7) for x in sc]
    assert batched == pytest.approx(scores_1, abs=2e-4)


def test_text_models_take_the_same_path():
    model, tok = load_base("tiny-llama-s", source="shipped")
    from drake_bench.models.testing import toy_samples

    items = [s for s in toy_samples(12, seed=8, with_images=False) if s.choices]
    got = engine.choice_scores(model, tok, items)
    for s, sc in zip(items, got):
        assert len(sc) == len(s.choices)
    alone = [x for s in items for x in engine.choice_scores(model, tok, [s])[0]]
    assert alone == pytest.approx([x for sc in got for x in sc], abs=2e-4)


def test_the_prompt_cache_goes_in_under_the_models_own_keyword(llava, items):
    """transformers renamed the cache keyword (``past_key_values`` -> ``cache``) and will remove the old name; a
    removed keyword would be swallowed by ``**kwargs`` and options scored without their prompt, so the engine asks
    the model class which name its forward takes, and passes no deprecated alias."""
    import inspect
    import warnings

    model, proc = llava
    for m in (model, load_base("tiny-llama-s", source="shipped")[0]):
        params = inspect.signature(type(m).forward).parameters
        assert engine._cache_keyword(type(m)) in params
        assert engine._cache_keyword(type(m)) == ("cache" if "cache" in params else "past_key_values")
    multi = [s for s in items if not all(len(c) == 1 for c in _token_ids(proc, s))]
    assert multi  # options of several tokens: these read the cache
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        engine.choice_scores(model, proc, multi)
    assert not [w for w in caught if "past_key_values" in str(w.message)]


def _token_ids(proc, sample) -> list[list[int]]:
    tok = engine.tokenizer_of(proc)
    return [tok(c, add_special_tokens=False)["input_ids"] for c in candidate_targets(sample)]
