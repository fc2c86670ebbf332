"""SFT and FedIT (the first reference entries) through the public protocol on real tiny models."""

from __future__ import annotations

import pytest
import torch

from drake_bench.evaluator.standard import RunConfig, run
from drake_bench.plugins.registry import create_method

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _run(toy_mixed, tmp_path, method):
    manifest, root = toy_mixed
    return run(
        RunConfig(
            benchmark=manifest,
            method=method,
            method_config={"model_loader": "testing"},
            data_dir=root,
            out=str(tmp_path / method),
            rounds=4,
            local_steps=2,
            fast_adaptation_iters=2,
            fast_adaptation_eval_every=1,
            fast_adaptation_test_items=2,
        )
    )


def test_sft_shares_nothing_and_fedit_averages_within_each_architecture(toy_mixed, tmp_path):
    sft = _run(toy_mixed, tmp_path, "sft")
    fedit = _run(toy_mixed, tmp_path, "fedit")
    for res in (sft, fedit):
        assert res.status == "complete" and {r.role for r in res.raw.scores} == {"self", "others"}
        assert {(a.init, a.iteration) for a in res.raw.adaptation} >= {("method", 0), ("fresh", 2)}
    assert {c.uplink_bytes for c in sft.raw.costs} == {2}  # empty message: "{}" metadata only
    # FedIT uploads the whole LoRA adapter: 4 bytes per float32 parameter (+2 for "{}")
    m = create_method("fedit", {"model_loader": "testing"})
    from drake_bench.models import lora_config
    from drake_bench.models.pool import ModelPool
    from drake_bench.models.testing import toy_loader

    alloc = {1: "tiny-llava-llama-s", 2: "tiny-llava-qwen2-s"}
    pool = ModelPool(alloc, lora_config(r=m.config.rank, alpha=m.config.alpha), loader=toy_loader)
    expected = {c: 4 * sum(t.numel() for t in pool.initial_state(c).values()) + 2 for c in alloc}
    by_client = {c.client: c.uplink_bytes for c in fedit.raw.costs}
    assert by_client[1] == expected[1] and by_client[2] == expected[2] and expected[1] != expected[2]
    # the same traffic in elements, recorded beside the bytes: one dtype, 4 bytes each
    assert all(
        c.uplink_elements == {"float32": (expected[c.client] - 2) // 4} for c in fedit.raw.costs if c.client in expected
    )
    assert all(c.uplink_elements == {} for c in sft.raw.costs)
    assert fedit.summary.per_seed[0].wire_dtypes == ["float32"]


def test_fedit_messages_equal_within_architecture_and_differ_across(toy_mixed, tmp_path):
    from drake_bench.evaluator.checkpoint import load

    _run(toy_mixed, tmp_path, "fedit")
    prog = load(next((tmp_path / "fedit").rglob("progress.json")).parent)
    msgs = prog.messages
    # clients 2 and 4 share tiny-llava-qwen2-s: identical averaged adapter; 1 (llama-s) and 3 (llama-m) are alone
    assert all(torch.equal(msgs[2].tensors[k], msgs[4].tensors[k]) for k in msgs[2].tensors)
    assert set(msgs[1].tensors) != set(msgs[2].tensors) or any(
        msgs[1].tensors[k].shape != msgs[2].tensors[k].shape for k in msgs[1].tensors
    )
    # a lone client's "average" is its own upload, i.e. its state after local training
    assert all(torch.equal(msgs[1].tensors[k], prog.clients[1].tensors[k]) for k in msgs[1].tensors)


def test_zero_shot_answers_each_item_once_per_model_and_as_the_uncached_base(toy_mixed, tmp_path, monkeypatch):
    from drake_bench.methods.lora_clients import LoraMethod
    from drake_bench.methods.zero_shot import ZeroShot

    manifest, root = toy_mixed
    calls: list[tuple[str, str]] = []
    plain = LoraMethod.predict

    def counted(self, ctx, state, queries):
        calls.extend((ctx.model_name, q.uid) for q in queries)
        return plain(self, ctx, state, queries)

    def once(tag, patch_zero_shot=False):
        with monkeypatch.context() as m:
            m.setattr(LoraMethod, "predict", counted)
            if patch_zero_shot:  # the same method without its cache
                m.setattr(ZeroShot, "predict", counted)
            return run(
                RunConfig(
                    benchmark=manifest,
                    method="zero-shot",
                    method_config={"model_loader": "testing"},
                    data_dir=root,
                    out=str(tmp_path / tag),
                    rounds=4,
                    local_steps=2,
                    isolation="inline",
                    fast_adaptation_iters=2,
                    fast_adaptation_eval_every=1,
                    fast_adaptation_test_items=2,
                )
            )

    cached = once("cached")
    assert calls and len(calls) == len(set(calls))  # every (model, item) answered once
    _assert_untrained_base(cached, tmp_path / "cached")
    n_cached = len(calls)
    calls.clear()
    uncached = once("uncached", patch_zero_shot=True)
    assert len(calls) > n_cached  # the runs below differ in work, not in answers
    assert [r.model_dump() for r in cached.raw.scores] == [r.model_dump() for r in uncached.raw.scores]
    assert [r.model_dump() for r in cached.raw.adaptation] == [r.model_dump() for r in uncached.raw.adaptation]


def _assert_untrained_base(zs, out):
    """Zero-shot is the untrained base at every evaluation point: nothing uploaded, adapters never trained, the
    same items scored the same at every round."""
    from drake_bench.evaluator.checkpoint import load

    assert zs.status == "complete" and {c.uplink_bytes for c in zs.raw.costs} == {2}  # "{}" metadata only
    prog = load(next(out.rglob("progress.json")).parent)
    m = create_method("zero-shot", {"model_loader": "testing"})
    from drake_bench.models import lora_config
    from drake_bench.models.pool import ModelPool
    from drake_bench.models.testing import toy_loader

    pool = ModelPool(
        {1: "tiny-llava-llama-s"}, lora_config(r=m.config.rank, alpha=m.config.alpha), loader=toy_loader, seed=0
    )
    fresh = pool.initial_state(1)
    assert all(torch.equal(prog.clients[1].tensors[k], fresh[k]) for k in fresh)  # never trained
    by_item: dict[tuple, set] = {}
    for r in zs.raw.scores:
        by_item.setdefault((r.client, r.task, r.n), set()).add(r.score)
    assert all(len(v) == 1 for v in by_item.values())
    assert len({r.eval_round for r in zs.raw.scores}) > 1
