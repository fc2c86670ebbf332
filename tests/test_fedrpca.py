"""FedRPCA (methods/fedrpca): the Robust-PCA solver, the server rules, the plugin's real aggregate call, the
client-side proximal term, and runs through the standard evaluator (a toy benchmark and the three embedded ones).

The six checks of the method's spec (beta = 1 is FedAvg; planted low-rank + sparse recovery on 3072 x 50; scale
equivariance; client-permutation invariance; ||beta mean(S)|| = ||mean(M)|| under adaptive beta; zeros in, zeros
out), plus: the ADMM stops at its cap and says so; architectures are never stacked together.

Mutations and bugs these tests catch (each tried on the code, the test failing on it and passing on the code as it
is):

* adaptive beta's numerator ||M 1|| taken over the whole stack of same-shaped matrices instead of per matrix
  (``mat.sum(dim=1)`` -> ``x.sum(dim=2)`` in :func:`fedrpca_updates`):
  test_adaptive_beta_is_per_matrix_in_a_stack_of_matrices and
  test_adaptive_beta_is_per_matrix_through_the_real_aggregate_call;
* the bug it fixed: a client's update formed against the server's *current* global instead of the global it was
  sent, wrong for a client that skipped rounds under partial participation:
  test_a_client_that_skipped_rounds_is_measured_from_the_global_it_was_sent (and, through the evaluator,
  test_fedrpca_runs_under_partial_participation_through_the_evaluator).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from conftest import one_embedded_round

from drake_bench import Message, ReportsDiagnostics
from drake_bench.evaluator.standard import RunConfig, run
from drake_bench.methods.fedrpca.plugin import FedRPCA, ProximalLoraClients, short_key
from drake_bench.methods.fedrpca.rpca import pcp, pcp_batch
from drake_bench.methods.fedrpca.rules import fedrpca_updates, mean_update, task_arithmetic_update, ties_update
from drake_bench.models.identity import architecture
from drake_bench.plugins.guard import GuardedMethod
from drake_bench.plugins.protocol import FederationContext
from drake_bench.plugins.registry import create_method
from drake_bench.results.result_file import check_result

pytestmark = pytest.mark.usefixtures("one_torch_thread")

F64 = torch.float64


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _structured(d: int, m: int, seed: int = 0, spikes: float = 0.05, noise: float = 0.0) -> torch.Tensor:
    """Client updates as FedRPCA pictures them: a shared direction (scaled per client), plus a few large
    client-specific entries, plus optional dense noise (which slows the ADMM down: with noise 0.01 these
    shapes need more than 1000 iterations)."""
    g = _gen(seed)
    common = torch.randn(d, 1, generator=g, dtype=F64) @ (1 + 0.1 * torch.randn(1, m, generator=g, dtype=F64))
    mask = torch.rand(d, m, generator=g) < spikes
    sparse = torch.where(mask, 5 * torch.randn(d, m, generator=g, dtype=F64), torch.zeros(d, m, dtype=F64))
    return common + sparse + noise * torch.randn(d, m, generator=g, dtype=F64)


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.linalg.norm(a.double() - b.double()) / torch.linalg.norm(b.double()))


# ------------------------------------------------------------------------------------------- the solver
def test_planted_low_rank_plus_sparse_is_recovered_on_3072_by_50():
    d, m = 3072, 50
    g = _gen(1)
    low0 = torch.randn(d, 1, generator=g, dtype=F64) @ (1 + 0.1 * torch.randn(1, m, generator=g, dtype=F64))
    mask = torch.rand(d, m, generator=g) < 0.05
    sparse0 = torch.where(mask, 10 * torch.randn(d, m, generator=g, dtype=F64), torch.zeros(d, m, dtype=F64))
    res = pcp(low0 + sparse0)
    assert res.converged and res.residual <= 1e-7 and res.rank == 1
    assert _rel(res.low_rank, low0) < 1e-2 and _rel(res.sparse, sparse0) < 1e-2
    cols = torch.nn.functional.normalize(res.low_rank, dim=0)
    cos = cols.T @ cols
    assert float(cos[~torch.eye(m, dtype=torch.bool)].mean()) > 0.999  # every client shares the one direction
    assert res.lam == pytest.approx(1 / math.sqrt(d))
    assert res.mu == pytest.approx(d * m / (4 * float((low0 + sparse0).abs().sum())))


def test_scale_equivariance():
    x = _structured(600, 8, seed=2)
    a, b = pcp(x), pcp(1e-3 * x)
    assert a.iterations == b.iterations and a.converged
    noisy = _structured(300, 5, seed=2, noise=0.01)  # stopped by the cap: the iterates scale all the same
    c, e = pcp(noisy, max_iter=200), pcp(1e-3 * noisy, max_iter=200)
    assert not c.converged and _rel(e.low_rank, 1e-3 * c.low_rank) < 1e-9 and e.residual == pytest.approx(c.residual)
    assert _rel(b.low_rank, 1e-3 * a.low_rank) < 1e-9 and _rel(b.sparse, 1e-3 * a.sparse) < 1e-9
    (ua, da), (ub, db) = fedrpca_updates(x[None]) + fedrpca_updates(1e-3 * x[None])
    assert _rel(ub, 1e-3 * ua) < 1e-9
    assert db["beta"] == pytest.approx(da["beta"], rel=1e-9) and db["energy_ratio"] == pytest.approx(
        da["energy_ratio"], rel=1e-9
    )


def test_client_permutation_leaves_the_aggregate_unchanged():
    x = _structured(500, 7, seed=3)
    perm = torch.tensor([3, 0, 6, 1, 5, 2, 4])
    (u, d), (up, dp) = fedrpca_updates(torch.stack([x, x[:, perm]]))
    assert _rel(up, u) < 1e-9 and dp["beta"] == pytest.approx(d["beta"], rel=1e-9)
    res, resp = pcp(x), pcp(x[:, perm])
    assert _rel(resp.low_rank, res.low_rank[:, perm]) < 1e-9  # the split itself is permuted along


def test_adaptive_beta_gives_the_sparse_term_the_norm_of_the_fedavg_update():
    x = _structured(800, 10, seed=4)
    ((update, diag),) = fedrpca_updates(x[None])
    res = pcp(x)
    scaled_sparse = update - res.low_rank.mean(dim=1)
    assert torch.allclose(scaled_sparse, diag["beta"] * res.sparse.mean(dim=1), rtol=1e-12, atol=1e-15)
    assert float(torch.linalg.norm(scaled_sparse)) == pytest.approx(float(torch.linalg.norm(x.mean(dim=1))), rel=1e-9)
    assert diag["beta"] == pytest.approx(1 / diag["energy_ratio"], rel=1e-12) and diag["beta"] > 1
    assert 0 < diag["sparse_fraction"] <= 1 and diag["clients"] == 10 and diag["admm_converged"]


def test_adaptive_beta_is_per_matrix_in_a_stack_of_matrices():
    """Three same-shaped matrices solved in one stack (as the plugin solves every LoRA A of one shape together), of
    very different scales and structures: each gets the update and beta it gets alone, beta = ||M_i 1|| / ||S_i 1||
    of its own M_i and S_i, and its scaled sparse term has the norm of its own FedAvg update."""
    xs = torch.stack(
        [
            _structured(300, 5, seed=11),
            50.0 * _structured(300, 5, seed=12, spikes=0.2),
            0.02 * _structured(300, 5, seed=13, spikes=0.01),
        ]
    )
    together = fedrpca_updates(xs)
    betas = []
    for x, (update, diag) in zip(xs, together):
        ((alone, alone_diag),) = fedrpca_updates(x[None])
        res = pcp(x)
        assert _rel(update, alone) < 1e-9 and diag["beta"] == pytest.approx(alone_diag["beta"], rel=1e-9)
        assert diag["beta"] == pytest.approx(
            float(torch.linalg.norm(x.sum(1)) / torch.linalg.norm(res.sparse.sum(1))), rel=1e-9
        )
        scaled = update - res.low_rank.mean(dim=1)
        assert float(torch.linalg.norm(scaled)) == pytest.approx(float(torch.linalg.norm(x.mean(dim=1))), rel=1e-9)
        betas.append(diag["beta"])
    assert max(betas) / min(betas) > 1.05  # the three betas do differ: one beta for the stack would not do


def test_zeros_in_zeros_out_without_nan():
    res = pcp(torch.zeros(64, 5))
    assert res.iterations == 0 and res.converged and res.residual == 0.0 and res.mu is None
    assert not res.low_rank.any() and not res.sparse.any()
    for beta in ("adaptive", 1.0, 3.0):
        ((update, diag),) = fedrpca_updates(torch.zeros(1, 64, 5), beta=beta)
        assert not update.any() and torch.isfinite(update).all()
        assert diag["energy_ratio"] is None and (diag["beta"] is None) == (beta == "adaptive")
    # updates that cancel exactly: ||M 1|| = 0, so adaptive FedRPCA leaves the matrix where FedAvg leaves it
    x = torch.randn(64, 1, generator=_gen(5), dtype=F64)
    ((update, diag),) = fedrpca_updates(torch.cat([x, -x], dim=1)[None])
    assert not update.any() and diag["beta"] is None


def test_the_admm_stops_at_its_cap_and_records_non_convergence():
    x = _structured(400, 6, seed=6, spikes=0.2)
    capped = pcp(x, max_iter=3)
    assert capped.iterations == 3 and not capped.converged and capped.residual > 1e-7
    free = pcp(x)
    assert free.converged and free.iterations > 3
    ((_, diag),) = fedrpca_updates(x[None], max_iter=3)
    assert diag["admm_iterations"] == 3 and diag["admm_converged"] is False and diag["admm_residual"] > 1e-7


def test_batched_problems_stop_each_at_their_own_tolerance_as_if_solved_alone():
    xs = torch.stack([_structured(300, 5, seed=s, spikes=0.02 + 0.1 * s) for s in range(4)])
    batch = pcp_batch(xs)
    alone = [pcp(x) for x in xs]
    assert len({r.iterations for r in batch}) > 1  # they do stop at different iterations
    for b, a in zip(batch, alone):
        assert (b.iterations, b.converged) == (a.iterations, a.converged)
        assert torch.allclose(b.low_rank, a.low_rank, rtol=0, atol=1e-12) and torch.allclose(
            b.sparse, a.sparse, atol=1e-12
        )


def test_solver_refuses_bad_input():
    with pytest.raises(ValueError, match="NaN"):
        pcp(torch.tensor([[1.0, float("nan")]]))
    with pytest.raises(ValueError, match="matrix"):
        pcp(torch.zeros(3))
    with pytest.raises(ValueError, match="beta"):
        fedrpca_updates(torch.zeros(1, 3, 2), beta=0)


# ------------------------------------------------------------------------------------------- other rules
def test_task_arithmetic_and_ties_by_hand():
    m = torch.tensor([[1.0, 2.0, -4.0], [0.5, -0.1, 0.2], [-3.0, -1.0, 2.0], [0.0, 0.0, 0.0]], dtype=F64)
    assert torch.equal(task_arithmetic_update(m, 2.0), 2 * mean_update(m))
    # no trimming: elected signs +, +, -, 0 (sums -1 -> -, 0.6 -> +, -2 -> -)
    assert torch.allclose(ties_update(m, 0.0), torch.tensor([-4.0, 0.35, -2.0, 0.0], dtype=F64))
    # trim half (keep the 2 largest |.| per client): col0 keeps 1, -3; col1 2, -1; col2 -4, 2
    # sums: row0 1+2-4 = -1 -> -, mean(-4); row1 nothing kept -> 0; row2 -3-1+2 -> -, mean(-3, -1) = -2
    assert torch.allclose(ties_update(m, 0.5), torch.tensor([-4.0, 0.0, -2.0, 0.0], dtype=F64))
    with pytest.raises(ValueError):
        ties_update(m, 1.0)


# ------------------------------------------------------------------------------------------- the plugin

SCALE = 0.1  # size of the pretend updates (float32 rounding of adapter + update is noise the ADMM must absorb)
ALLOC = {
    1: "tiny-llava-llama-s",
    2: "tiny-llava-llama-s",
    3: "tiny-llava-llama-s",
    4: "tiny-llava-qwen2-s",
    5: "tiny-llava-qwen2-s",
    6: "tiny-llava-qwen2-s",
}


def _setup(name: str, tmp_path: Path, **config):
    method = create_method(name, {"model_loader": "testing", **config})
    fed = FederationContext(
        benchmark="unit",
        modality="multimodal",
        clients=sorted(ALLOC),
        allocation=dict(ALLOC),
        architectures={c: architecture(n) for c, n in ALLOC.items()},
        rounds=2,
        local_steps=1,
        batch_size=2,
        seed=0,
        device="cpu",
        public_data=lambda n: [],
        workdir=tmp_path,
    )
    method.setup(fed)
    return method


def _uploads(method, seed: int = 0) -> dict[int, Message]:
    """Every client's adapter after a pretend round: its initial adapter plus a structured update (shared within
    the architecture, plus client-specific spikes)."""
    g = _gen(seed)
    out = {}
    shared: dict[tuple[str, str], torch.Tensor] = {}
    for c in sorted(ALLOC):
        arch = architecture(ALLOC[c])
        tensors = {}
        for k, v in method.clients.initial(c).items():
            common = shared.setdefault((arch, k), torch.randn(v.shape, generator=g))
            spikes = torch.where(
                torch.rand(v.shape, generator=g) < 0.05, torch.randn(v.shape, generator=g), torch.zeros(v.shape)
            )
            tensors[k] = v + SCALE * (common * (1 + 0.1 * torch.randn(1, generator=g)) + 3 * spikes)
        out[c] = Message(tensors=tensors)
    return out


@pytest.fixture(scope="module")
def plugin_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("fedrpca-plugin")


def test_beta_one_equals_fedavg_through_the_real_aggregate_call(plugin_dir):
    rpca = _setup("fedrpca", plugin_dir, beta=1.0)
    fedit = _setup("fedit", plugin_dir)
    uploads = _uploads(rpca)
    server = rpca.init_server()
    got, _ = GuardedMethod(rpca).aggregate(0, server, uploads)
    want, _ = GuardedMethod(fedit).aggregate(0, fedit.init_server(), uploads)
    rows = rpca.round_diagnostics(0)
    # (float32 uploads put rounding noise into the updates, so some matrices end a hair above tol at the cap)
    assert rows and all(r.values["beta"] == 1.0 and r.values["admm_residual"] < 1e-6 for r in rows)
    for c in ALLOC:
        assert set(got[c].tensors) == set(want[c].tensors)
        for k, t in want[c].tensors.items():
            assert _rel(got[c].tensors[k], t) <= 1e-6, (c, k)
            start = server.tensors[f"{architecture(ALLOC[c])}/{k}"]
            if torch.any(t != start):  # the update itself, not only the adapter, agrees
                assert _rel(got[c].tensors[k] - start, t - start) <= 1e-5, (c, k)
    # adaptive beta moves away from FedAvg (it amplifies the clients' spikes)
    adaptive = _setup("fedrpca", plugin_dir)
    moved, _ = adaptive.aggregate(0, adaptive.init_server(), uploads)
    assert any(_rel(moved[1].tensors[k], want[1].tensors[k]) > 1e-4 for k in want[1].tensors)


def test_architectures_are_never_stacked_together_and_clients_are_permutable(plugin_dir):
    method = _setup("fedrpca", plugin_dir, rpca_max_iter=300)
    seen: list[tuple[str, int]] = []
    real = method.merge_matrices

    def spy(arch, keys, stack):
        seen.append((arch, stack.shape[2]))
        assert all(short_key(k) for k in keys)
        return real(arch, keys, stack)

    method.merge_matrices = spy  # type: ignore[method-assign]
    server = method.init_server()
    uploads = _uploads(method)
    out, new_server = method.aggregate(0, server, uploads)
    members = {"llava-llama-s": 3, "llava-qwen2-s": 3}  # never 6: one stack per architecture
    assert {a for a, _ in seen} == set(members) and all(n == members[a] for a, n in seen)
    rows = method.round_diagnostics(0)
    assert {r.key.split("/")[0] for r in rows} == set(members)
    assert all(r.values["clients"] == members[r.key.split("/")[0]] for r in rows)
    assert len(rows) == sum(len(m.tensors) for m in (out[1], out[4]))
    # one message per architecture, identical for its clients; the server keeps it as that architecture's global
    assert all(torch.equal(out[1].tensors[k], out[c].tensors[k]) for c in (2, 3) for k in out[1].tensors)
    assert all(torch.equal(new_server.tensors[f"llava-qwen2-s/{k}"], v) for k, v in out[5].tensors.items())
    # changing the other architecture's uploads does not move this one's aggregate
    other = dict(uploads)
    other[4] = Message(tensors={k: v + 1.0 for k, v in uploads[4].tensors.items()})
    again, _ = method.aggregate(0, server, other)
    assert all(torch.equal(again[1].tensors[k], out[1].tensors[k]) for k in out[1].tensors)
    assert any(not torch.equal(again[4].tensors[k], out[4].tensors[k]) for k in out[4].tensors)
    # permuting which client sent which upload within an architecture leaves the aggregate unchanged
    swapped = {**uploads, 1: uploads[3], 3: uploads[2], 2: uploads[1]}
    perm, _ = method.aggregate(0, server, swapped)
    assert all(_rel(perm[1].tensors[k], out[1].tensors[k]) < 1e-9 for k in out[1].tensors)


def test_adaptive_beta_is_per_matrix_through_the_real_aggregate_call(plugin_dir):
    """The plugin stacks every LoRA matrix of one shape of an architecture into one batched solve; each matrix's row
    reports the beta of its own client updates (||M 1|| / ||S 1|| of that matrix alone), and its new global is the
    global plus that matrix's own FedRPCA update."""
    method = _setup("fedrpca", plugin_dir, rpca_max_iter=100)
    uploads = _uploads(method, seed=3)
    server = method.init_server()
    out, _ = method.aggregate(0, server, uploads)
    rows = {r.key: r.values for r in method.round_diagnostics(0)}
    arch, members = "llava-llama-s", [1, 2, 3]
    keys = [k for k in out[1].tensors if f"{arch}/{short_key(k)}" in rows]
    shapes: dict[tuple[int, ...], int] = {}
    for k in keys:
        shapes[tuple(out[1].tensors[k].shape)] = shapes.get(tuple(out[1].tensors[k].shape), 0) + 1
    shape = max(shapes, key=lambda sh: shapes[sh])
    assert shapes[shape] > 1  # matrices of one shape are solved in one stack: the case that matters
    betas = []
    for k in [k for k in keys if tuple(out[1].tensors[k].shape) == shape][:6]:  # six of that stack (each solved alone)
        start = server.tensors[f"{arch}/{k}"]
        m = torch.stack([uploads[c].tensors[k].double().reshape(-1) - start.double().reshape(-1) for c in members], 1)
        ((update, diag),) = fedrpca_updates(m[None], max_iter=100)
        row = rows[f"{arch}/{short_key(k)}"]
        assert row["beta"] == pytest.approx(diag["beta"], rel=1e-6), k
        assert _rel(out[1].tensors[k].double() - start.double(), update.view(start.shape)) < 1e-4, k
        betas.append(row["beta"])
    assert max(betas) / min(betas) > 1.05


def _delta_uploads(method, starts: dict, seed: int) -> dict[int, Message]:
    """Each client's upload: the adapter it started from plus a structured update (:func:`_uploads`'s)."""
    base = _uploads(method, seed)
    return {
        c: Message(tensors={k: starts[c][k] + (v - method.clients.initial(c)[k]) for k, v in base[c].tensors.items()})
        for c in starts
    }


def test_a_client_that_skipped_rounds_is_measured_from_the_global_it_was_sent(plugin_dir):
    """Partial participation. Round 1: clients 1, 2 (llama-s) and 4, 5 (qwen2-s) take part, 3 and 6 do not; round 2:
    clients 1 and 3, and 5 and 6. Client 3 (and 6) still holds the initial adapter, the global it was last sent,
    while the server's global has moved: its update is its upload minus that initial adapter, and the new global
    is the round-1 global plus the rule's merge of those updates (FedProx's server: their mean; FedRPCA: its rule on
    the same stack). The server keeps an older global only while some client holds it."""
    for name, cfg in (("fedprox", {}), ("fedrpca", {"rpca_max_iter": 100})):
        method = _setup(name, plugin_dir, **cfg)
        s0 = method.init_server()
        init = {c: method.clients.initial(c) for c in ALLOC}
        first = _delta_uploads(method, {c: init[c] for c in (1, 2, 4, 5)}, seed=1)
        messages, s1 = GuardedMethod(method).aggregate(0, s0, first)
        assert set(messages) == {1, 2, 4, 5}
        starts = {1: messages[1].tensors, 3: init[3], 5: messages[5].tensors, 6: init[6]}
        second = _delta_uploads(method, starts, seed=2)
        out, s2 = GuardedMethod(method).aggregate(1, s1, second)
        for arch, pair in (("llava-llama-s", (1, 3)), ("llava-qwen2-s", (5, 6))):
            checked = list(messages[pair[0]].tensors.items())
            for k, g1 in checked if name == "fedprox" else checked[:4]:  # FedRPCA: four matrices, each solved alone
                deltas = torch.stack(
                    [second[c].tensors[k].double().reshape(-1) - starts[c][k].double().reshape(-1) for c in pair], 1
                )
                stale = torch.stack(
                    [second[c].tensors[k].double().reshape(-1) - g1.double().reshape(-1) for c in pair], 1
                )
                if name == "fedprox":
                    want = g1.double() + mean_update(deltas).view(g1.shape)
                    wrong = g1.double() + mean_update(stale).view(g1.shape)
                else:
                    want = g1.double() + fedrpca_updates(deltas[None], max_iter=100)[0][0].view(g1.shape)
                    wrong = g1.double() + fedrpca_updates(stale[None], max_iter=100)[0][0].view(g1.shape)
                got = out[pair[0]].tensors[k].double()
                step = float(torch.linalg.norm(want - g1.double()))
                assert float(torch.linalg.norm(got - want)) <= 1e-4 * step, (name, arch, k)
                assert float(torch.linalg.norm(wrong - want)) > 1e-2 * step, (name, arch, k)  # the two do differ
        # the bookkeeping: after round 1 clients 3 and 6 held version 0 of their architecture's global, so the
        # server kept it (nothing older than the current global before that)
        assert not any(k.startswith("held@") for k in s0.tensors)
        assert {k.split("/", 2)[1] for k in s1.tensors if k.startswith("held@0/")} == {"llava-llama-s", "llava-qwen2-s"}
        assert s1.metadata["holds"] == {"1": 1, "2": 1, "3": 0, "4": 1, "5": 1, "6": 0}
        # version 0 is held by nobody now; version 1 still by clients 2 and 4, who skipped round 2
        assert not any(k.startswith("held@0/") for k in s2.tensors)
        assert {k.split("/", 2)[1] for k in s2.tensors if k.startswith("held@1/")} == {"llava-llama-s", "llava-qwen2-s"}
        assert all(torch.equal(s2.tensors[f"held@1/llava-llama-s/{k}"], v) for k, v in messages[2].tensors.items())
        # a round with every client brings them all to the current global: nothing older is kept
        now = {c: (out.get(c) or messages[c]).tensors for c in ALLOC}
        _, s3 = method.aggregate(2, s2, _delta_uploads(method, now, seed=3))
        assert not any(k.startswith("held@") for k in s3.tensors) and set(s3.metadata["holds"].values()) == {3}


def test_zero_updates_return_the_global_adapter_and_no_nan_through_the_plugin(plugin_dir):
    method = _setup("fedrpca", plugin_dir)
    server = method.init_server()
    same = {c: Message(tensors=method.clients.initial(c)) for c in ALLOC}
    out, _ = GuardedMethod(method).aggregate(0, server, same)  # the guard refuses NaN in any message
    for c in ALLOC:
        for k, v in out[c].tensors.items():
            assert torch.equal(v, server.tensors[f"{architecture(ALLOC[c])}/{k}"])
    rows = GuardedMethod(method).round_diagnostics(0)  # finite or None, never NaN
    assert all(r["values"]["beta"] is None and r["values"]["admm_iterations"] == 0 for r in rows)


def test_baselines_merge_as_their_rules_say(plugin_dir):
    uploads = None
    results = {}
    for name, cfg in (
        ("fedit", {}),
        ("fedprox", {}),
        ("task-arithmetic", {"scale": 3.0}),
        ("ties", {"trim_fraction": 0.0}),
    ):
        method = _setup(name, plugin_dir, **cfg)
        uploads = uploads or _uploads(method)
        server = method.init_server()
        results[name] = (method.aggregate(0, server, uploads)[0], server)
        assert not isinstance(method, ReportsDiagnostics)
    fedavg, _ = results["fedit"]
    prox, _ = results["fedprox"]
    ta, server = results["task-arithmetic"]
    ties, _ = results["ties"]
    k = next(iter(fedavg[1].tensors))
    start = server.tensors[f"llava-llama-s/{k}"]
    assert _rel(prox[1].tensors[k], fedavg[1].tensors[k]) < 1e-6  # FedProx's server is FedAvg
    assert _rel(ta[1].tensors[k] - start, 3 * (fedavg[1].tensors[k] - start)) < 1e-5
    deltas = torch.stack(
        [uploads[c].tensors[k].double().reshape(-1) - start.double().reshape(-1) for c in (1, 2, 3)], 1
    )
    assert _rel(ties[1].tensors[k], start.double() + ties_update(deltas, 0.0).view(start.shape)) < 1e-6


def test_architectures_below_min_clients_are_averaged_as_fedit_does(plugin_dir):
    method = _setup("fedrpca", plugin_dir, min_clients=4)  # both groups have 3 clients
    fedit = _setup("fedit", plugin_dir)
    uploads = _uploads(method)
    got, _ = method.aggregate(0, method.init_server(), uploads)
    want, _ = fedit.aggregate(0, fedit.init_server(), uploads)
    assert all(_rel(got[c].tensors[k], t) < 1e-6 for c in ALLOC for k, t in want[c].tensors.items())
    rows = method.round_diagnostics(0)
    assert rows and all(r.values["aggregated_by"] == "mean" and r.values["admm_iterations"] == 0 for r in rows)


def test_fast_adaptation_starts_from_the_architectures_global_adapter(plugin_dir):
    method = _setup("fedrpca", plugin_dir, rpca_max_iter=50)
    out, server = method.aggregate(0, method.init_server(), _uploads(method))
    start = method.adaptation_state("llava-qwen2-s", {4: None, 5: None}, server)
    assert set(start.tensors) == set(out[4].tensors)
    assert all(torch.equal(start.tensors[k], out[4].tensors[k]) for k in out[4].tensors)


# ------------------------------------------------------------------------------------------- FedProx
def test_proximal_term_adds_mu_times_the_distance_to_the_start_to_every_gradient():
    cfg = FedRPCA.Config(proximal_mu=0.5, model_loader="testing")
    clients = ProximalLoraClients(cfg)
    model = torch.nn.Linear(3, 2)
    start = [p.detach().clone() for p in model.parameters()]
    clients.param_groups(model)
    assert len(clients._hooks) == 2
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3)  # as if some steps had moved the weights
    x = torch.randn(4, 3, generator=_gen(7))
    model(x).pow(2).sum().backward()
    plain = torch.nn.Linear(3, 2)
    plain.load_state_dict(model.state_dict())
    plain(x).pow(2).sum().backward()
    for p, q, s in zip(model.parameters(), plain.parameters(), start):
        assert torch.allclose(p.grad, q.grad + 0.5 * (p.detach() - s), atol=1e-6)
    for h in clients._hooks:
        h.remove()
    no_prox = ProximalLoraClients(FedRPCA.Config(model_loader="testing"))
    no_prox.param_groups(model)
    assert no_prox._hooks == []


# ------------------------------------------------------------------------------------------- through the evaluator
def test_fedrpca_with_fedprox_runs_through_the_evaluator_and_reports_diagnostics_and_cost(toy_mixed, tmp_path):
    manifest, root = toy_mixed
    res = run(
        RunConfig(
            benchmark=manifest,
            method="fedrpca",
            data_dir=root,
            out=str(tmp_path),
            rounds=2,
            local_steps=2,
            scenario="static",
            fast_adaptation_iters=1,
            fast_adaptation_eval_every=1,
            fast_adaptation_test_items=2,
            others_subsample=1,
            self_subsample=2,
            method_config={"model_loader": "testing", "proximal_mu": 0.01, "rpca_max_iter": 200},
        )
    )
    assert check_result(res) == [] and res.status == "complete"
    assert res.method.config["proximal_mu"] == 0.01 and res.method.config["beta"] == "adaptive"
    assert [c.round for c in res.raw.server_costs] == [1, 2] and all(
        c.aggregate_seconds > 0 for c in res.raw.server_costs
    )
    assert res.summary.aggregate.aggregate_seconds_per_round.mean > 0
    # rows per round: every LoRA matrix of each of the three architectures (clients 2 and 4 share one)
    per_round = {r: [d for d in res.raw.diagnostics if d.round == r] for r in (1, 2)}
    archs = {d.key.split("/")[0] for d in per_round[2]}
    assert archs == {"llava-llama-s", "llava-qwen2-s", "llava-llama-m"} and len(per_round[1]) == len(per_round[2])
    for d in per_round[2]:  # clients alone in their architecture are averaged (min_clients 2), the pair is split
        pair = d.key.startswith("llava-qwen2-s/")
        assert (d.values["clients"], d.values["aggregated_by"]) == ((2, "rpca") if pair else (1, "mean"))
        assert (d.values["beta"] is not None) == pair and (d.values["admm_iterations"] > 0) == pair
    # uplink: FedIT's bytes (the whole float32 adapter plus "{}")
    fedit_like = {c.client: c.uplink_bytes for c in res.raw.costs if c.round == 1}
    assert fedit_like[2] == fedit_like[4] and fedit_like[1] != fedit_like[3]


def test_fedrpca_runs_under_partial_participation_through_the_evaluator(toy_mixed, tmp_path):
    """Three of the four clients a round, seed 0: rounds 1-3 draw [1, 2, 3], [2, 3, 4], [1, 3, 4]. In round 2 the
    qwen2-s pair (2, 4) is solved by Robust PCA while client 4, absent in round 1, still holds the initial adapter;
    the run (its server state checkpointed every round) completes and checks."""
    manifest, root = toy_mixed
    res = run(
        RunConfig(
            benchmark=manifest,
            method="fedrpca",
            data_dir=root,
            out=str(tmp_path),
            rounds=3,
            local_steps=1,
            scenario="static",
            fast_adaptation=False,
            others_subsample=1,
            self_subsample=1,
            clients_per_round=3,
            isolation="inline",
            method_config={"model_loader": "testing", "rpca_max_iter": 100},
        )
    )
    assert check_result(res) == [] and res.status == "complete"
    assert {(a.round, a.client) for a in res.raw.absences} == {(1, 4), (2, 1), (3, 2)}
    pair = [d for d in res.raw.diagnostics if d.round == 2 and d.key.startswith("llava-qwen2-s/")]
    assert pair and all(d.values["aggregated_by"] == "rpca" and d.values["clients"] == 2 for d in pair)


@pytest.mark.parametrize("name", ["fedprox", "task-arithmetic", "ties"])
def test_the_baselines_run_through_the_evaluator(toy_mixed, tmp_path, name):
    manifest, root = toy_mixed
    res = run(
        RunConfig(
            benchmark=manifest,
            method=name,
            data_dir=root,
            out=str(tmp_path),
            rounds=1,
            local_steps=1,
            scenario="static",
            fast_adaptation=False,
            others_subsample=1,
            self_subsample=1,
            method_config={"model_loader": "testing"},
        )
    )
    assert check_result(res) == [] and res.raw.diagnostics == [] and len(res.raw.server_costs) == 1


@pytest.mark.parametrize("embedded", ["drake-synth", "hflb-synth", "fedllm-synth"])
def test_one_round_on_each_embedded_benchmark(embedded, tmp_path, small_synth):
    """The benchmark's own clients, allocation and architectures (52 clients on fedllm-synth), built small: every
    client trains one step and the server aggregates within each architecture (evaluation is FedIT's, tested there)."""
    ev, run_, _ = one_embedded_round(embedded, "fedrpca", tmp_path / "runs", rpca_max_iter=20)
    members: dict[str, int] = {}
    for c in run_.clients:
        members[ev._arch[c]] = members.get(ev._arch[c], 0) + 1
    rows = run_.diagnostics
    assert {r.key.split("/")[0] for r in rows} == set(members)
    assert all(r.values["clients"] == members[r.key.split("/")[0]] for r in rows)
    assert len(run_.server_costs) == 1 and set(run_.messages) == set(run_.clients)
    assert all(torch.isfinite(t).all() for m in run_.messages.values() for t in m.tensors.values())


@pytest.mark.parametrize(
    "setting",
    [
        {"beta": float("inf")},
        {"beta": float("nan")},
        {"beta": 0.0},
        {"rpca_mu": float("inf")},
        {"rpca_lambda": float("nan")},
    ],
)
def test_a_config_that_would_scale_without_bound_is_refused_naming_the_field(setting):
    import pydantic

    with pytest.raises(pydantic.ValidationError, match=next(iter(setting))):
        FedRPCA.Config(**setting)
    assert FedRPCA.Config(beta=2.0).beta == 2.0
