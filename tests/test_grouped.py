"""Client batching (drake_bench.models.grouped, ModelPool.use_group, LoraClients.train_group): several clients of one
architecture in one pass give what training them one after another gives, within float tolerance."""

from __future__ import annotations

import pytest
import torch

from drake_bench.errors import DrakeBenchError
from drake_bench.models import ModelPool, engine, lora_config
from drake_bench.models.grouped import group_losses, routed
from drake_bench.models.testing import toy_loader, toy_samples
from drake_bench.plugins.protocol import ClientContext

pytestmark = pytest.mark.usefixtures("one_torch_thread")

MODEL = "tiny-llava-qwen2-s"


def _pool(clients=(1, 2, 3), model=MODEL, **kw):
    return ModelPool({c: model for c in clients}, lora_config(r=4, alpha=8), loader=toy_loader, **kw)


def _distinct(pool, clients, scale=0.05):
    """Give every client its own adapter (a fresh pool's clients share one initialisation, and B starts at zero)."""
    g = torch.Generator().manual_seed(7)
    for c in clients:
        state = pool.get_state(c)
        pool.set_state(c, {k: v + scale * torch.randn(v.shape, generator=g) for k, v in state.items()})


def _grads(model):
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("model", ["tiny-llava-qwen2-s", "tiny-llama-s"])
def test_group_losses_and_gradients_equal_each_clients_own_step(model):
    clients = [1, 2, 3]
    pool = _pool(clients, model)
    _distinct(pool, clients)
    images = model.startswith("tiny-llava")
    batches = [toy_samples(n, seed=s, with_images=images) for n, s in ((4, 0), (2, 1), (3, 2))]
    proc = pool.processor(1)
    expected_loss, expected_grad = [], []
    for c, b in zip(clients, batches):
        with pool.use(c) as m:
            m.train()
            loss = engine.loss_on(m, proc, b, packed=True)
            loss.backward()
            expected_loss.append(float(loss.detach()))
            expected_grad.append({n.replace(".default.", "."): g for n, g in _grads(m).items()})
            m.zero_grad(set_to_none=True)
    with pool.use_group(clients) as (m, slots):
        m.train()
        losses = group_losses(m, proc, batches, slots)
        torch.stack(losses).sum().backward()
        grads = _grads(m)
        m.zero_grad(set_to_none=True)
    assert [float(x.detach()) for x in losses] == pytest.approx(expected_loss, rel=1e-5)
    for slot, want in zip(slots, expected_grad):
        got = {n.replace(f".{slot}.", "."): g for n, g in grads.items() if f".{slot}." in n}
        assert set(got) == set(want) and len(got) > 0
        for n in want:
            torch.testing.assert_close(got[n], want[n], rtol=1e-4, atol=1e-6)
    assert not any(".default." in n for n in grads)  # the pool's own slot was not touched


def test_rows_route_to_their_own_adapter():
    """Swapping two clients' adapters swaps their losses (routing is per row, not the active adapter)."""
    pool = _pool([1, 2])
    _distinct(pool, [1, 2], scale=0.5)
    b1, b2 = toy_samples(3, seed=0), toy_samples(3, seed=1)
    proc = pool.processor(1)
    with torch.no_grad():
        with pool.use_group([1, 2]) as (m, slots):
            a = [float(x) for x in group_losses(m, proc, [b1, b2], slots)]
            swapped = [float(x) for x in group_losses(m, proc, [b1, b2], slots[::-1])]
            with routed(m, slots[:1] * 2):
                pass  # hooks removed on exit: a plain forward afterwards needs no adapter_names
    assert a[0] != pytest.approx(swapped[0], rel=1e-3)
    with torch.no_grad(), pool.use(1) as m:
        assert float(engine.loss_on(m, proc, b1)) == pytest.approx(a[0], rel=1e-5)


def test_train_group_equals_sequential_training_over_uneven_steps():
    """Several steps (a client with fewer batches, an empty batch skipped) leave every client's adapter where its
    own sequential training leaves it; the pool's clients are saved back and the other clients are untouched."""
    from drake_bench.methods.lora_clients import LoraClients, LoraSettings

    settings = LoraSettings(rank=4, alpha=8, model_loader="testing")
    clients = [1, 2, 3]
    schedule = {
        1: [toy_samples(3, seed=0), toy_samples(2, seed=1), toy_samples(3, seed=2)],
        2: [toy_samples(2, seed=3), [], toy_samples(4, seed=4)],
        3: [toy_samples(4, seed=5)],
    }

    def run(grouped: bool):
        from drake_bench.plugins.protocol import FederationContext

        lc = LoraClients(settings)
        fed = FederationContext(
            benchmark="t",
            modality="multimodal",
            clients=clients + [4],
            allocation={c: MODEL for c in clients + [4]},
            architectures={c: "a" for c in clients + [4]},
            rounds=1,
            local_steps=3,
            batch_size=4,
            seed=0,
            device="cpu",
            public_data=None,
            workdir=None,
        )
        lc.setup(fed)
        _distinct(lc.pool, clients + [4])
        ctxs = [
            ClientContext(client_id=c, model_name=MODEL, architecture="a", round_idx=0, seed=0, device="cpu")
            for c in clients
        ]
        if grouped:
            losses = lc.train_group(ctxs, [schedule[c] for c in clients])
        else:
            losses = [lc.train(ctx, schedule[ctx.client_id]) for ctx in ctxs]
        return losses, {c: lc.pool.get_state(c) for c in clients + [4]}

    seq_losses, seq_states = run(False)
    grp_losses, grp_states = run(True)
    assert grp_losses == pytest.approx(seq_losses, rel=1e-5)
    for c in clients + [4]:
        for k in seq_states[c]:
            torch.testing.assert_close(grp_states[c][k], seq_states[c][k], rtol=1e-4, atol=1e-6)
    assert any(not torch.equal(seq_states[1][k], seq_states[2][k]) for k in seq_states[1])


def test_use_group_refuses_clients_of_two_architectures_and_repeated_clients():
    pool = ModelPool({1: MODEL, 2: "tiny-llava-llama-s"}, lora_config(r=4, alpha=8), loader=toy_loader)
    with pytest.raises(DrakeBenchError, match="span architectures"):
        with pool.use_group([1, 2]):
            pass
    with pytest.raises(DrakeBenchError, match="distinct"):
        with pool.use_group([1, 1]):
            pass


@pytest.mark.parametrize("method", ["fedprox"])
def test_a_client_batching_run_gives_the_sequential_runs_numbers(toy_mixed, tmp_path, method):
    """Through the evaluator (the worker process, the guard, the round): the toy allocation's two clients of one
    architecture train together, the others alone; scores, bytes and final adapters are the sequential run's.
    FedProx covers FedIT's round (it is FedIT's client side plus the proximal hooks train_group must keep); SFT's
    round differs only in where it starts, which the per-step tests cover."""
    from drake_bench.evaluator import checkpoint
    from drake_bench.evaluator.standard import Evaluator, RunConfig, run
    from drake_bench.results.result_file import comparable_differences

    manifest, root = toy_mixed

    def config(out, **extra):
        return RunConfig(
            benchmark=manifest,
            method=method,
            method_config={"model_loader": "testing"},
            data_dir=root,
            out=str(out),
            rounds=2,
            local_steps=2,
            eval_every_rounds=2,
            others_subsample=2,
            self_subsample=4,
            fast_adaptation=False,
            numerics="native",
            **extra,
        )  # the inline run
        # computes in this test process, whose kernels started long ago: only native numerics match across the two

    seq_cfg, grp_cfg = config(tmp_path / "seq", isolation="inline"), config(tmp_path / "grp", client_batching=True)
    seq, grp = run(seq_cfg), run(grp_cfg)
    first = _initial_adapters(seq_cfg)
    assert grp.fl.extra["run_config"]["client_batching"] is True
    phases = grp.fl.extra["phase_seconds"]["0"]  # the evaluator's wall seconds per phase (an execution field)
    assert {"setup", "training", "aggregation", "evaluation", "checkpoint"} <= set(phases)
    assert all(v >= 0 for v in phases.values()) and phases["training"] > 0
    assert [d for d in comparable_differences(grp, seq) if "client_batching" not in d] == []
    seq_states = checkpoint.load(Evaluator(seq_cfg).run_dir(0)).clients
    grp_states = checkpoint.load(Evaluator(grp_cfg).run_dir(0)).clients
    # AdamW divides by sqrt(v): on a near-zero gradient a float-level difference moves that weight by a visible
    # fraction of a step, so the check is on the whole update: the two runs' adapters differ by under 1% of how far
    # training moved them (a wrong routing, loss or optimiser differs by the update's own size)
    for c in seq_states:
        seq_w = torch.cat([v.flatten() for _, v in sorted(seq_states[c].tensors.items())])
        grp_w = torch.cat([grp_states[c].tensors[k].flatten() for k, _ in sorted(seq_states[c].tensors.items())])
        start = torch.cat([v.flatten() for _, v in sorted(first[c].items())])
        assert float((grp_w - seq_w).norm()) < 0.01 * float((seq_w - start).norm()), c


def _initial_adapters(cfg):
    """Every client's adapter before training (the method's init_client), to measure how far training moved it."""
    from drake_bench.evaluator.standard import Evaluator
    from drake_bench.plugins.registry import create_method

    ev = Evaluator(cfg)
    method = create_method(cfg.method, cfg.method_config)
    fed = ev.federated_data(0)
    ident = {m: method.model_identity(m) for m in set(ev.allocation.values())}
    ev._arch = {c: ident[m].architecture for c, m in ev.allocation.items()}
    method.setup(ev.federation_context(fed, 0, 2))
    return {c: method.init_client(ev.ctx(c, 0, 0)).tensors for c in fed.clients}


def test_client_batching_is_refused_with_flower():
    from drake_bench.evaluator.standard import RunConfig

    with pytest.raises(ValueError, match="client_batching"):
        RunConfig(client_batching=True, backend="flower")


def test_a_group_reply_of_the_wrong_shape_names_the_call_and_the_clients():
    from drake_bench.errors import PluginError
    from drake_bench.plugins.guard import GuardedMethod
    from drake_bench.plugins.protocol import Message, MethodMeta, State

    class Short:
        meta = MethodMeta(name="short", version="1.0")

        def client_update_group(self, ctxs, states, messages, batches):
            return [(Message(), State())] if len(ctxs) > 2 else [(Message(), "oops")] * len(ctxs)

    ctxs = [
        ClientContext(client_id=c, model_name="m", architecture="a", round_idx=1, seed=0, device="cpu")
        for c in (1, 2, 3)
    ]
    guarded = GuardedMethod(Short(), seed=0)
    assert guarded.trains_clients_together
    with pytest.raises(PluginError, match=r"client_update_group\(clients \[1, 2, 3\]\).*round 2.*3 \(upload"):
        guarded.client_update_group(ctxs, [State()] * 3, [None] * 3, [[]] * 3)
    with pytest.raises(PluginError, match=r"client 1, round 2.*new state"):
        guarded.client_update_group(ctxs[:2], [State()] * 2, [None] * 2, [[]] * 2)
