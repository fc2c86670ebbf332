"""RELA: relevance weights, temperature limits, shared mask, sanitisation, EMA, W_s gradient."""

from __future__ import annotations

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from drake_bench.methods.fedmosaic import accounting as acc
from drake_bench.methods.fedmosaic import rela

torch.set_num_threads(1)


def _grads(seed: int = 0, per_group: int = 3, d: int = 2000) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(2, d, generator=g)
    return torch.cat([centers[k] + 0.8 * torch.randn(per_group, d, generator=g) for k in range(2)])


def test_rows_sum_to_one_self_largest_and_groups() -> None:
    grads = _grads()
    w = rela.rela_weights(rela.relevance_matrix(grads), tau=0.5)
    assert torch.allclose(w.sum(1), torch.ones(6), atol=1e-6)
    assert torch.equal(w.argmax(1), torch.arange(6))
    same = torch.block_diag(torch.ones(3, 3), torch.ones(3, 3)).bool() & ~torch.eye(6, dtype=torch.bool)
    cross = ~torch.block_diag(torch.ones(3, 3), torch.ones(3, 3)).bool()
    assert w[same].mean() > w[cross].mean() + 0.02


def test_temperature_limits() -> None:
    s = rela.relevance_matrix(_grads(1))
    assert torch.allclose(rela.rela_weights(s, tau=1e-4), torch.eye(6), atol=1e-4)
    assert torch.allclose(rela.rela_weights(s, tau=1e6), torch.full((6, 6), 1 / 6), atol=1e-5)
    # self weight decreases monotonically with tau
    diag = [float(rela.rela_weights(s, t).diagonal().mean()) for t in (0.1, 0.5, 2.0)]
    assert diag[0] > diag[1] > diag[2]


def test_shared_mask_and_benign_sanitisation() -> None:
    m1, m2 = rela.shared_mask(1000, 0.4, seed=3), rela.shared_mask(1000, 0.4, seed=3)
    assert torch.equal(m1, m2) and m1.numel() == 400 and m1.unique().numel() == 400
    grads = _grads(2, d=1000)
    full = rela.relevance_matrix(grads)
    gen = torch.Generator().manual_seed(0)
    shared = rela.relevance_matrix(torch.stack([rela.sanitize(g, m1, 1e-4, gen) for g in grads]))
    assert (shared - full).abs().max() < 0.05
    # per-client masks destroy the cosine
    own = torch.stack([rela.sanitize(g, rela.shared_mask(1000, 0.4, seed=i), 0.0) for i, g in enumerate(grads)])
    assert (rela.relevance_matrix(own) - full).abs().max() > 0.2


def test_gradient_tracker_round_and_step_semantics() -> None:
    t = rela.GradientTracker(2, alpha=0.5, unit="round")
    t.add(torch.tensor([2.0, 0.0]))
    t.add(torch.tensor([0.0, 2.0]))
    assert torch.allclose(t.end_round(), torch.tensor([0.5, 0.5]))
    t.add(torch.tensor([1.0, 1.0]))
    assert torch.allclose(t.end_round(), torch.tensor([0.75, 0.75]))
    assert torch.allclose(t.end_round(), torch.tensor([0.75, 0.75]))  # no computations -> unchanged
    s = rela.GradientTracker(2, alpha=0.5, unit="step")
    s.add(torch.tensor([2.0, 0.0]))
    s.add(torch.tensor([0.0, 2.0]))
    assert torch.allclose(s.end_round(), torch.tensor([0.5, 1.0]))


def test_ema_captures_task_order() -> None:
    """Spec 13.5: clients trained A->B and B->A end with lower cos(ghat) than plain averaging."""
    g = torch.Generator().manual_seed(4)
    ga, gb = torch.randn(500, generator=g), torch.randn(500, generator=g)
    t1, t2 = rela.GradientTracker(500), rela.GradientTracker(500)
    for x, y in ((ga, gb), (ga, gb), (gb, ga), (gb, ga)):
        t1.add(x), t2.add(y)
        e1, e2 = t1.end_round(), t2.end_round()
    ema_cos = float(torch.nn.functional.cosine_similarity(e1, e2, dim=0))
    assert ema_cos < 0.9  # plain averaging of the same gradients gives cos = 1


def test_last_layer_gradient_of_frozen_small_model() -> None:
    torch.manual_seed(0)
    ws = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=300,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=4,
            num_attention_heads=4,
            num_key_value_heads=2,
            tie_word_embeddings=True,
        )
    )
    ws.requires_grad_(False)
    x = torch.randint(0, 300, (2, 8), generator=torch.Generator().manual_seed(1))
    g = rela.last_layer_gradient(ws, x, x)
    param = ws.model.layers[-1].mlp.down_proj.weight
    assert g.shape == (param.numel(),) == (64 * 128,) and float(g.abs().sum()) > 0
    assert not any(p.requires_grad for p in ws.parameters())
    # reference: full autograd on that weight
    param.requires_grad_(True)
    ws(input_ids=x, labels=x).loss.backward()
    assert torch.allclose(g, param.grad.reshape(-1), atol=1e-6)
    param.requires_grad_(False)
    # uplink accounting: the masked gradient has exactly the formula's size
    mask = rela.shared_mask(g.numel(), 0.4, 0)
    msg = {
        "pq.0.mlp.up_proj.P": torch.zeros(8, 8),
        "pq.0.mlp.up_proj.Q": torch.zeros(8),
        "rela.grad": rela.sanitize(g, mask, 1e-4),
    }
    measured = acc.measured_elements(msg)
    assert measured.grad == acc.fedmosaic_payload(4, {"mlp.up_proj": (64, 128)}, 8, 4, g.numel(), 0.4).grad
    assert measured.pq == 72
    # compute overhead of W_s gradient is reported as a ratio ~ (1/m) W_s cost / client cost
    n_ws = sum(p.numel() for p in ws.parameters())
    ws_f = acc.ws_gradient_flops(n_ws, 16, tail_params=300 * 64, last_numel=param.numel())
    ratio = acc.ws_overhead_ratio(ws_f, acc.client_iteration_flops(n_ws, 10_000, 10_000, 16), m=5)
    assert 0.0 < ratio < 0.2


def test_aggregate_conv_within_type_renormalised() -> None:
    states = [
        {"conv.0.x.A": torch.full((2, 3), float(i)), "conv.0.x.B": torch.full((3, 2), float(i))} for i in range(3)
    ]
    w = torch.tensor([[0.5, 0.2, 0.3], [0.1, 0.6, 0.3], [0.2, 0.2, 0.6]])
    out = rela.aggregate_conv(states, w, ["S", "L", "S"])
    assert torch.allclose(out[0]["conv.0.x.A"], torch.full((2, 3), (0.5 * 0 + 0.3 * 2) / 0.8))
    assert torch.allclose(out[1]["conv.0.x.A"], torch.full((2, 3), 1.0))  # alone in its type
    eq = rela.aggregate_conv(states, w, ["S", "L", "S"], mode="equal_within_type")
    assert torch.allclose(eq[2]["conv.0.x.B"], torch.full((3, 2), 1.0))
    assert rela.aggregate_conv(states, w, ["S", "L", "S"], mode="none") == [{}, {}, {}]
