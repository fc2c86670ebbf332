"""FedMosaic pure math: Theorems 1-2, Eq. 6 indices, orthonormal helpers, HETLoRA, accounting."""

from __future__ import annotations

import math

import pytest
import torch

from drake_bench.methods.fedmosaic import accounting as acc
from drake_bench.methods.fedmosaic.blocks import layer_index_from_key, layer_relative_name, pq_layer_indices
from drake_bench.methods.fedmosaic.config import FedMosaicConfig
from drake_bench.methods.fedmosaic.hetlora import aggregate_pq_hetero, combine_weights, pad_pq, truncate_pq
from drake_bench.methods.fedmosaic.linalg import (
    complete_orthonormal_rows,
    nearest_orthonormal_cols,
    nearest_orthonormal_rows,
    orthonormality_error_cols,
    orthonormality_error_rows,
    random_orthonormal_cols,
    random_orthonormal_rows,
)
from drake_bench.methods.fedmosaic.pqlora import pq_delta_weight
from drake_bench.methods.fedmosaic.rela import aggregate_pq

torch.set_num_threads(1)


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_theorem2_zero_pq_aggregation_error_vs_factorwise_lora() -> None:
    g = _gen()
    r, d_in, d_out, n = 4, 12, 10, 5
    a = random_orthonormal_rows(r, d_in, g)
    b = random_orthonormal_cols(d_out, r, g)
    ps = torch.randn(n, r, r, generator=g)
    w = torch.softmax(torch.randn(n, generator=g), 0)
    avg_of_deltas = sum(w[j] * pq_delta_weight(a, b, ps[j]) for j in range(n))
    delta_of_avg = pq_delta_weight(a, b, (w.view(-1, 1, 1) * ps).sum(0))
    assert torch.linalg.norm(avg_of_deltas - delta_of_avg) < 1e-5
    # conventional LoRA, A and B averaged factor by factor: non-zero aggregation error
    la = torch.randn(n, r, d_in, generator=g)
    lb = torch.randn(n, d_out, r, generator=g)
    avg_lora = sum(w[j] * lb[j] @ la[j] for j in range(n))
    factorwise = (w.view(-1, 1, 1) * lb).sum(0) @ (w.view(-1, 1, 1) * la).sum(0)
    assert torch.linalg.norm(avg_lora - factorwise) > 0.1


def test_theorem2_through_rela_aggregation_of_states() -> None:
    g = _gen(1)
    r, n = 3, 4
    a, b = random_orthonormal_rows(r, 9, g), random_orthonormal_cols(7, r, g)
    states = [
        {"pq.0.mlp.up_proj.P": torch.randn(r, r, generator=g), "pq.0.mlp.up_proj.Q": torch.randn(r, generator=g)}
        for _ in range(n)
    ]
    w = torch.softmax(torch.randn(n, n, generator=g), 1)
    glob = aggregate_pq(states, w)
    for i in range(n):
        expected = sum(w[i, j] * pq_delta_weight(a, b, states[j]["pq.0.mlp.up_proj.P"]) for j in range(n))
        assert torch.allclose(pq_delta_weight(a, b, glob[i]["pq.0.mlp.up_proj.P"]), expected, atol=1e-5)


def test_theorem1_r_squared_span_and_norm_preservation() -> None:
    g = _gen(2)
    r, d_in, d_out = 4, 12, 10
    a, b = random_orthonormal_rows(r, d_in, g), random_orthonormal_cols(d_out, r, g)
    basis = torch.stack([torch.outer(b[:, i], a[j]).reshape(-1) for i in range(r) for j in range(r)])
    assert int(torch.linalg.matrix_rank(basis)) == r * r
    p = torch.randn(r, r, generator=g)
    assert math.isclose(float(torch.linalg.norm(pq_delta_weight(a, b, p))), float(torch.linalg.norm(p)), rel_tol=1e-5)
    # a rank-deficient A collapses the span: the orthonormality assumption matters
    a_bad = a.clone()
    a_bad[1] = a_bad[0]
    basis_bad = torch.stack([torch.outer(b[:, i], a_bad[j]).reshape(-1) for i in range(r) for j in range(r)])
    assert int(torch.linalg.matrix_rank(basis_bad)) < r * r


@pytest.mark.parametrize(
    "layers,expected",
    [(16, [4, 8, 12, 16]), (28, [7, 14, 21, 28]), (32, [8, 16, 24, 32]), (24, [6, 12, 18, 24]), (36, [9, 18, 27, 36])],
)
def test_eq6_table_and_alg2_agree_when_divisible(layers: int, expected: list[int]) -> None:
    assert pq_layer_indices(layers, 4) == [i - 1 for i in expected]
    assert pq_layer_indices(layers, 4, rule="alg2") == [i - 1 for i in expected]


def test_eq6_vs_alg2_non_divisible_and_toy_models() -> None:
    assert pq_layer_indices(30, 4) == [6, 13, 20, 29]
    assert pq_layer_indices(30, 4, rule="alg2") == [8, 15, 22, 29]
    assert pq_layer_indices(4, 2) == [1, 3] and pq_layer_indices(8, 2) == [3, 7] and pq_layer_indices(6, 2) == [2, 5]
    with pytest.raises(ValueError):
        pq_layer_indices(3, 4)
    key = "base_model.model.model.layers.12.mlp.down_proj"
    assert layer_index_from_key(key) == 12 and layer_relative_name(key) == "mlp.down_proj"
    assert layer_index_from_key("lm_head") is None


def test_orthonormal_helpers() -> None:
    g = _gen(3)
    x = torch.randn(5, 20, generator=g)
    a = nearest_orthonormal_rows(x)
    assert orthonormality_error_rows(a) < 1e-5 and orthonormality_error_rows(x) > 1.0
    assert orthonormality_error_cols(nearest_orthonormal_cols(x.T)) < 1e-5
    # nearest: the projection of an already-orthonormal matrix is itself
    q = random_orthonormal_rows(5, 20, g)
    assert torch.allclose(nearest_orthonormal_rows(q), q, atol=1e-5)
    full = complete_orthonormal_rows(q[:3], 6, g)
    assert torch.allclose(full[:3], q[:3]) and orthonormality_error_rows(full) < 1e-5
    # deterministic given the seed
    assert torch.equal(random_orthonormal_rows(4, 9, _gen(7)), random_orthonormal_rows(4, 9, _gen(7)))


def test_hetlora_pad_truncate_and_eq25() -> None:
    g = _gen(4)
    p, q = torch.randn(3, 3, generator=g), torch.randn(3, generator=g)
    pp, qp = pad_pq(p, q, 5)
    assert pp.shape == (5, 5) and float(pp[3:].abs().sum() + pp[:, 3:].abs().sum() + qp[3:].abs().sum()) == 0.0
    tp, tq = truncate_pq(pp, qp, 3)
    assert torch.equal(tp, p) and torch.equal(tq, q)
    w = torch.softmax(torch.randn(3, 3, generator=g), 1)
    alpha = torch.tensor([0.2, 0.3, 0.5])
    w_hat = combine_weights(w, alpha)
    assert torch.allclose(w_hat.sum(1), torch.ones(3), atol=1e-6)
    assert torch.allclose(w_hat[0], w[0] * alpha / (w[0] * alpha).sum(), atol=1e-6)
    assert torch.allclose(combine_weights(w, torch.zeros(3)), w)  # all-zero norms -> RELA weights


def test_hetlora_aggregation_shapes_and_values() -> None:
    g = _gen(5)
    ranks = [2, 4, 3]
    states = [{"pq.0.x.P": torch.randn(r, r, generator=g), "pq.0.x.Q": torch.randn(r, generator=g)} for r in ranks]
    w = torch.softmax(torch.randn(3, 3, generator=g), 1)
    out = aggregate_pq_hetero(states, w, ranks)
    norms = torch.stack([torch.linalg.norm(s["pq.0.x.P"]) for s in states])
    w_hat = combine_weights(w, norms / norms.sum())
    for i, r in enumerate(ranks):
        assert out[i]["pq.0.x.P"].shape == (r, r) and out[i]["pq.0.x.Q"].shape == (r,)
        manual = sum(w_hat[i, j] * pad_pq(states[j]["pq.0.x.P"], states[j]["pq.0.x.Q"], 4)[0] for j in range(3))
        assert torch.allclose(out[i]["pq.0.x.P"], manual[:r, :r], atol=1e-6)


def test_accounting_reproduces_the_paper_communication_numbers() -> None:
    d3b = acc.decoder_linear_dims(3072, 8192, 24, 8, 128)
    assert acc.full_lora_elements(28, d3b, 128) == 194_510_848
    pay = acc.fedmosaic_payload(28, d3b, 128, 4, grad_numel=2048 * 8192, n_s=0.4)
    assert pay.down == 167_185_920
    assert pay.grad == math.ceil(0.4 * 16_777_216)
    assert pay.up == pay.down + pay.grad
    d1b = acc.decoder_linear_dims(2048, 8192, 32, 8, 64)
    assert acc.full_lora_elements(16, d1b, 128) == 90_177_536
    assert acc.fedmosaic_payload(16, d1b, 128, 4, 0, 0.4).down == 68_095_488
    assert acc.payload_bytes(10, 2) == 20
    assert acc.alignment_overhead(2, 5000, 4, 10, 20, 100) == pytest.approx(0.0625)


def test_config_defaults_and_profiles() -> None:
    c = FedMosaicConfig()
    assert (c.rank, c.n_blocks, c.tau, c.ema_alpha, c.n_s, c.mu, c.grad_interval) == (128, 4, 0.5, 0.5, 0.4, 1e-4, 10)
    assert (c.lr_pq, c.lr_other, c.conv_alpha, c.align_lambda) == (5e-5, 2e-5, 256.0, 0.5)
    assert FedMosaicConfig.paper_llm().rank == 16
    t = FedMosaicConfig.toy()
    assert (t.rank, t.n_blocks, t.conv_alpha, t.grad_interval) == (8, 2, 16.0, 5)
    assert "cca_features" in c.choices() and "tau" not in c.choices()
    with pytest.raises(Exception):
        FedMosaicConfig(tau=0.0)
