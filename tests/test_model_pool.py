"""ModelPool: one base per architecture, exact adapter swaps, state API, memory grows by adapters only."""

from __future__ import annotations

import pytest
import torch

from drake_bench.errors import DrakeBenchError, UnknownNameError
from drake_bench.models import engine
from drake_bench.models.adapters import lora_config
from drake_bench.models.pool import ModelPool
from drake_bench.models.testing import toy_loader, toy_samples

NAME = "tiny-llava-qwen2-s"


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _logits(model, proc, batch):
    with torch.no_grad():
        return model(
            **{k: v for k, v in engine.encode_for_training(model, proc, batch).items() if k != "labels"}
        ).logits.clone()


def _train(pool, cid, batch, steps=2, lr=0.05):
    with pool.use(cid) as model:
        opt = torch.optim.SGD(pool.trainable_parameters(cid), lr=lr)
        for _ in range(steps):
            engine.train_step(model, pool.processor(cid), batch, opt)


def test_swap_restores_a_clients_exact_outputs():
    pool = ModelPool({0: NAME, 1: NAME}, lora_config(r=4), loader=toy_loader)
    batch = toy_samples(4, seed=1)
    proc = pool.processor(0)
    _train(pool, 0, batch, lr=0.5)
    out0 = _logits(pool.model_for(0), proc, batch)
    _train(pool, 1, toy_samples(4, seed=9), lr=0.5)  # swaps 0 out, trains 1 differently
    out1 = _logits(pool.model_for(1), proc, batch)
    assert not torch.equal(out0, out1)
    assert torch.equal(_logits(pool.model_for(0), proc, batch), out0)
    # both clients share one base model object
    assert pool.model_for(0) is pool.model_for(1)


def test_base_is_frozen_and_only_the_active_adapter_trains():
    pool = ModelPool({0: NAME}, lora_config(r=4), loader=toy_loader, adapter_names=("local", "global"))
    params = pool.trainable_parameters(0)
    names = {n for n, p in pool.model_for(0).named_parameters() if p.requires_grad}
    assert params and all("lora_" in n and ".local." in n for n in names)
    base = {n: p.clone() for n, p in pool.model_for(0).named_parameters() if "lora_" not in n}
    _train(pool, 0, toy_samples(4, seed=2))
    after = dict(pool.model_for(0).named_parameters())
    assert all(torch.equal(after[n], v) for n, v in base.items())
    assert not torch.equal(
        pool.get_state(0, "local")[next(k for k in pool.get_state(0, "local") if "lora_B" in k)],
        pool.initial_state(0, "local")[next(k for k in pool.initial_state(0, "local") if "lora_B" in k)],
    )
    # the untouched adapter kept its initial values
    g, g0 = pool.get_state(0, "global"), pool.initial_state(0, "global")
    assert all(torch.equal(g[k], g0[k]) for k in g)


def test_get_set_state_round_trip_and_validation():
    pool = ModelPool({3: NAME, 5: NAME}, lora_config(r=4), loader=toy_loader)
    _train(pool, 3, toy_samples(4, seed=3))
    st = pool.get_state(3)
    assert all(t.device.type == "cpu" for t in st.values())
    pool.set_state(5, st)
    assert all(torch.equal(pool.get_state(5)[k], st[k]) for k in st)
    batch = toy_samples(2, seed=4)
    a = _logits(pool.model_for(3), pool.processor(3), batch)
    b = _logits(pool.model_for(5), pool.processor(5), batch)
    assert torch.equal(a, b)
    st[next(iter(st))].zero_()  # get_state returns copies
    assert not torch.equal(pool.get_state(3)[next(iter(st))], st[next(iter(st))])
    with pytest.raises(DrakeBenchError, match="client 5"):
        pool.set_state(5, {k: v for k, v in list(st.items())[1:]})
    k0 = next(iter(st))
    with pytest.raises(DrakeBenchError, match="shape"):
        pool.set_state(5, {**st, k0: torch.zeros(1)})
    with pytest.raises(UnknownNameError, match="client"):
        pool.get_state(42)
    with pytest.raises(UnknownNameError, match="adapter"):
        pool.get_state(3, "global")


def test_one_base_per_architecture_and_grouping():
    calls = []

    def loader(name, device="cpu", dtype=None):
        calls.append(name)
        return toy_loader(name, device, dtype)

    alloc = {0: "tiny-llava-qwen2-s", 1: "tiny-llava-qwen2-s", 2: "tiny-qwen2-s", 3: "tiny-qwen2-s", 4: NAME}
    pool = ModelPool(alloc, lambda name: lora_config(r=2 if "llava" in name else 4), loader=loader)
    assert pool.architectures() == {"llava-qwen2-s": [0, 1, 4], "qwen2-s": [2, 3]}
    assert pool.architecture(2) == "qwen2-s"
    for c in alloc:
        pool.model_for(c)
    assert sorted(calls) == ["tiny-llava-qwen2-s", "tiny-qwen2-s"]
    assert pool.get_state(0)[next(k for k in pool.get_state(0) if "lora_A" in k)].shape[0] == 2
    assert pool.get_state(2)[next(k for k in pool.get_state(2) if "lora_A" in k)].shape[0] == 4
    text = toy_samples(4, seed=0, with_images=False)
    assert len(engine.predict(pool.model_for(2), pool.processor(2), text)) == 4


def test_memory_grows_by_adapters_only():
    reports = {}
    for n in (1, 10):
        pool = ModelPool({c: NAME for c in range(n)}, lora_config(r=4), loader=toy_loader)
        pool.model_for(0)
        reports[n] = pool.memory_report()
        per_client = sum(t.numel() * t.element_size() for t in pool.get_state(0).values())
    assert reports[1]["base_bytes"] == reports[10]["base_bytes"] > 0
    assert reports[1]["live_adapter_bytes"] == reports[10]["live_adapter_bytes"]
    assert reports[1]["client_adapter_bytes"] == per_client
    assert reports[10]["total_bytes"] - reports[1]["total_bytes"] == 9 * per_client
    assert per_client < reports[1]["base_bytes"] / 5


def test_offload_dir_keeps_client_state_on_disk(tmp_path):
    pool = ModelPool({0: NAME, 1: NAME}, lora_config(r=4), loader=toy_loader, offload_dir=tmp_path)
    _train(pool, 0, toy_samples(4, seed=5))
    files = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.safetensors"))
    assert files == ["client_0/default.safetensors", "client_1/default.safetensors"]
    assert pool.memory_report()["client_adapter_bytes"] == 0
    st = pool.get_state(0)
    pool.set_state(1, st)
    assert all(torch.equal(pool.get_state(1)[k], st[k]) for k in st)


def test_per_client_ranks_share_one_base_with_nested_slots():
    """client_ranks: one peft slot per rank on the shared base; use() activates the client's slot, only it trains,
    and a smaller rank starts from the leading rows of A / columns of B of the largest one."""
    pool = ModelPool({0: NAME, 1: NAME, 2: NAME}, lora_config(r=4), loader=toy_loader, client_ranks={0: 2, 1: 8})
    assert [pool.rank(c) for c in (0, 1, 2)] == [2, 8, 4]
    assert pool.slot(1) == "default" and pool.slot(0) == "default_r2" and pool.slot(2) == "default_r4"
    s0, s1 = pool.initial_state(0), pool.initial_state(1)
    ka = next(k for k in s0 if "lora_A" in k)
    kb = next(k for k in s0 if "lora_B" in k)
    assert s0[ka].shape[0] == 2 and s1[ka].shape[0] == 8 and torch.equal(s0[ka], s1[ka][:2])
    assert s0[kb].shape[1] == 2
    with pool.use(0) as model:
        assert model.active_adapter == "default_r2"
        names = {n for n, p in model.named_parameters() if p.requires_grad}
        assert names and all(".default_r2." in n for n in names)
        assert model.peft_config["default_r2"].lora_alpha / 2 == model.peft_config["default"].lora_alpha / 8
    _train(pool, 0, toy_samples(4, seed=3), lr=0.5)
    assert not torch.equal(pool.get_state(0)[kb], s0[kb])
    assert torch.equal(pool.get_state(1)[kb], s1[kb])
    assert pool.model_for(0) is pool.model_for(1)
    with pytest.raises(DrakeBenchError, match="client_ranks"):
        ModelPool({0: NAME}, lora_config(r=4), loader=toy_loader, client_ranks={5: 2})
