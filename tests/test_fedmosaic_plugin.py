"""FedMosaic plugin through the standard evaluator: measured bytes against the App. A.9 element count, protocol
invariants (identical P/Q shapes across families, customised messages, RELA rows), exact resume.

A 4-client toy benchmark (conftest's ToyLoader: yes/no items with 8x8 images) with tiny zoo models
of two families and two sizes, randomly initialised (``model_loader='testing'``: no pretraining).
"""

from __future__ import annotations

import json

import pytest
import torch
from conftest import MIXED_ALLOCATION as ALLOC  # noqa: E402
from conftest import torch_threads  # noqa: E402

from drake_bench import PluginError
from drake_bench.evaluator.checkpoint import load as load_progress
from drake_bench.evaluator.standard import RunConfig, run
from drake_bench.methods.fedmosaic import accounting as acc
from drake_bench.methods.fedmosaic.config import FedMosaicConfig
from drake_bench.methods.fedmosaic.plugin import FedITPQLoRA, FedMosaic
from drake_bench.models.zoo import tiny_config
from drake_bench.plugins.protocol import State
from drake_bench.plugins.registry import create_method, register_method

METHOD_CFG = {"model_loader": "testing", "public_size": 16, "grad_interval": 1}
ROUNDS = 4


pytestmark = pytest.mark.usefixtures("one_torch_thread")


class CrashingFedMosaic(FedMosaic):
    """FedMosaic that raises once in client_update at (client, round) - to test resume."""

    meta = FedMosaic.meta.model_copy(update={"name": "fedmosaic-crash"})
    FAIL_ON: tuple[int, int] | None = None  # a code-level fault: the fixed plugin resumes the same run

    def setup(self, federation):
        super().setup(federation)
        # the pool's dump of a client's adapter just before its local training (after G_i was loaded)
        train, self._starts = self.clients.train, {}

        def recording_train(ctx, batches, **kw):
            self._starts[ctx.client_id] = self.clients.dump(ctx.client_id)
            return train(ctx, batches, **kw)

        self.clients.train = recording_train

    def init_server(self):
        """The aligned initial adapter E of every architecture, kept for the tests beside the server's own state."""
        return State(
            tensors={f"init.{a}.{k}": v for a, init in self._init.items() for k, v in init.items()},
            metadata={"round": 0},
        )

    def client_update(self, ctx, state, message, batches):
        if type(self).FAIL_ON == (ctx.client_id, ctx.round_idx):
            raise RuntimeError("interrupted")
        up, new = super().client_update(ctx, state, message, batches)
        # plugin-owned prefix ("rela."), so FedMosaic's own loading ignores these test records
        start = self._starts[ctx.client_id]
        new.tensors = {k: v for k, v in new.tensors.items() if not k.startswith("rela.test.")}
        new.tensors.update({f"rela.test.start.{k}": v for k, v in start.items() if ".lora_P" in k or ".lora_gP" in k})
        new.tensors.update(
            {
                f"rela.test.prev.{k}": v
                for k, v in state.tensors.items()
                if k.endswith(".lora_P") and not k.startswith("rela.")
            }
        )
        return up, new

    def aggregate(self, round_idx, server_state, uploads):
        """FedMosaic's own aggregate; the round's uploads are kept in the server state (checkpointed with the run)
        so the tests can recompute each message from what was actually sent."""
        messages, state = super().aggregate(round_idx, server_state, uploads)
        state.tensors.update({k: v for k, v in server_state.tensors.items() if k.startswith("init.")})
        state.tensors.update({f"upload.{c}.{k}": v for c, up in uploads.items() for k, v in up.tensors.items()})
        return messages, state


register_method(CrashingFedMosaic)


@pytest.fixture(scope="module")
def bench(toy_mixed):
    return toy_mixed


def _cfg(bench, out, method="fedmosaic", **kw):
    manifest, root = bench
    base = dict(
        benchmark=manifest,
        method=method,
        data_dir=root,
        out=str(out),
        seeds=[0],
        rounds=ROUNDS,
        local_steps=2,
        others_subsample=1,
        self_subsample=2,
        fast_adaptation=False,
        eval_every_rounds=2,
        method_config=dict(METHOD_CFG),
        numerics="native",
    )  # some runs here are inline, in this test
    base.update(kw)  # process, whose kernels started long ago: only native numerics match across inline and process
    return RunConfig(**base)


@pytest.fixture(scope="module")
def clean(bench, tmp_path_factory):
    # module-scoped, so it runs before the function-scoped one_torch_thread: set the same thread count
    # here, or the reference run and the resumed run reduce floats in different orders
    out = tmp_path_factory.mktemp("clean")
    with torch_threads(1):
        res = run(_cfg(bench, out, method="fedmosaic-crash"))
    run_dir = next(out.rglob("progress.json")).parent
    return res, load_progress(run_dir), run_dir


def _expected_payload(name: str, ws_name: str, cfg: FedMosaicConfig, send_grad: bool = True) -> acc.Payload:
    """The App. A.9 element count from the zoo configs of the client's model and of W_s (not from the message)."""
    text = tiny_config(name).text_config
    layers, dims = acc.dims_from_hf_config(text)
    ws_text = tiny_config(ws_name).text_config
    d_g = ws_text.hidden_size * ws_text.intermediate_size  # down_proj of W_s's last decoder layer (grad_layer)
    return acc.fedmosaic_payload(layers, dims, cfg.rank, cfg.n_blocks, d_g if send_grad else 0, cfg.n_s)


def test_measured_uplink_and_downlink_equal_the_element_count(clean):
    res = clean[0]
    cfg = FedMosaic.Config(**METHOD_CFG)
    ws = "tiny-llava-qwen2-s"  # the smallest base of the allocation
    assert res.raw.costs and len(res.raw.costs) == ROUNDS * len(ALLOC)
    for rec in res.raw.costs:
        p = _expected_payload(ALLOC[str(rec.client)], ws, cfg)
        # bf16 payload (2 bytes/element) + the empty JSON metadata "{}" the evaluator also counts
        assert rec.uplink_bytes == acc.payload_bytes(p.up, cfg.bytes_per_element) + 2, rec
        assert rec.downlink_bytes == acc.payload_bytes(p.down, cfg.bytes_per_element) + 2, rec
        # the evaluator's element counts are the paper's element count, whatever precision the wire used
        assert sum(rec.uplink_elements.values()) == p.up and sum(rec.downlink_elements.values()) == p.down
        assert set(rec.uplink_elements) == {"bfloat16"}


def test_protocol_invariants_in_the_running_plugin(clean):
    prog = clean[1]
    msgs = prog.messages
    clients = sorted(msgs)
    pq = {c: {k: v for k, v in msgs[c].tensors.items() if k.startswith("pq.")} for c in clients}
    conv = {c: {k: v for k, v in msgs[c].tensors.items() if k.startswith("conv.")} for c in clients}
    # identical P/Q key sets and shapes across families and sizes (r x r and r)
    keys = set(pq[clients[0]])
    assert keys and all(set(pq[c]) == keys for c in clients)
    for k in keys:
        assert {tuple(pq[c][k].shape) for c in clients} == {(8, 8) if k.endswith(".P") else (8,)}
    # conventional parts differ in shape between architectures (never mixed across types)
    assert conv[1]["conv.0.mlp.down_proj.A"].shape != conv[3]["conv.0.mlp.down_proj.A"].shape
    # customised: every client's global P/Q differs from every other client's
    for i in clients:
        for j in clients:
            if i < j:
                assert any(not torch.equal(pq[i][k], pq[j][k]) for k in keys), (i, j)
    # the server recorded its client order and round (the weights themselves are checked against the messages in
    # test_each_message_is_the_recorded_weighted_sum_of_the_uploads)
    meta = prog.server.metadata
    assert meta["clients"] == clients and meta["round"] == ROUNDS
    # client state: EMA and counters carried (L_i's carry-over: test_local_adapter_carries_over_...)
    for c in clients:
        st = prog.clients[c]
        assert st.metadata["round"] == ROUNDS and st.metadata["grad_computations"] == ROUNDS * 2
        assert float(st.tensors["rela.ghat"].abs().sum()) > 0


def test_each_message_is_the_recorded_weighted_sum_of_the_uploads(clean):
    """Client i's global P/Q is sum_j w_ij P_j over what the clients uploaded, with the weights the server recorded
    (bf16 on the wire, summed in fp32); the uniform mean is not it, so the check tells RELA's weights apart."""
    prog = clean[1]
    meta, msgs = prog.server.metadata, prog.messages
    order, w = meta["clients"], torch.tensor(meta["weights"])
    ups = {
        c: {k[len(f"upload.{c}.") :]: v.float() for k, v in prog.server.tensors.items() if k.startswith(f"upload.{c}.")}
        for c in order
    }
    keys = [k for k in ups[order[0]] if k.startswith("pq.")]
    assert keys
    uniform_differs = False
    for i, c in enumerate(order):
        for k in keys:
            expected = sum(w[i, j] * ups[cj][k] for j, cj in enumerate(order))
            got = msgs[c].tensors[k].float()
            assert torch.allclose(got, expected.to(torch.bfloat16).float(), rtol=1e-2, atol=1e-6), (c, k)
            uniform = sum(ups[cj][k] for cj in order) / len(order)
            uniform_differs |= not torch.allclose(got, uniform.to(torch.bfloat16).float(), rtol=1e-2, atol=1e-6)
    assert uniform_differs


def _pq_bases(state):
    """(A, B) of every PQ module in a client state (modules that carry P), keyed by module path."""
    mods = [k[: -len(".lora_P")] for k in state.tensors if k.endswith(".lora_P") and not k.startswith("rela.")]
    return {m: (state.tensors[f"{m}.lora_A.weight"], state.tensors[f"{m}.lora_B.weight"]) for m in mods}


def test_same_architecture_clients_share_the_aligned_frozen_bases(clean):
    """Clients 2 and 4 (both qwen2-s) hold bit-identical frozen PQ A and B after the run, equal to their
    architecture's aligned initial adapter E; clients of other architectures hold other bases."""
    prog = clean[1]
    b2, b4, b1 = _pq_bases(prog.clients[2]), _pq_bases(prog.clients[4]), _pq_bases(prog.clients[1])
    assert b2 and b2.keys() == b4.keys()
    init = {k[len("init.") :]: v for k, v in prog.server.tensors.items() if k.startswith("init.")}
    qwen = next(a for a in {k.split(".", 1)[0] for k in init} if "qwen2-s" in a)
    for m, (a, b) in b2.items():
        assert torch.equal(a, b4[m][0]) and torch.equal(b, b4[m][1])
        assert torch.equal(a, init[f"{qwen}.{m}.lora_A.weight"]) and torch.equal(b, init[f"{qwen}.{m}.lora_B.weight"])
    assert any(m not in b1 or b1[m][0].shape != a.shape or not torch.equal(b1[m][0], a) for m, (a, _) in b2.items())


def test_theorem2_on_the_run_s_module_tensors(clean):
    """With shared frozen bases, averaging P is averaging the dense updates: || B (sum_j w_j P_j) A - sum_j w_j B P_j A ||
    is zero up to float error on the clients' real tensors; averaging conventional LoRA factor by factor is not."""
    prog = clean[1]
    w = (0.3, 0.7)
    s2, s4 = prog.clients[2], prog.clients[4]
    pq_err = conv_err = 0.0
    for m, (a, b) in _pq_bases(s2).items():
        p2, p4 = s2.tensors[f"{m}.lora_P"], s4.tensors[f"{m}.lora_P"]
        exact = w[0] * b @ p2 @ a + w[1] * b @ p4 @ a
        pq_err = max(pq_err, float((b @ (w[0] * p2 + w[1] * p4) @ a - exact).norm() / exact.norm()))
    conv = [
        k[: -len(".lora_A.weight")]
        for k in s2.tensors
        if k.endswith(".lora_A.weight")
        and not k.startswith("rela.")
        and f"{k[: -len('.lora_A.weight')]}.lora_P" not in s2.tensors
    ]
    assert conv
    for m in conv:
        (a2, b2), (a4, b4) = [(s.tensors[f"{m}.lora_A.weight"], s.tensors[f"{m}.lora_B.weight"]) for s in (s2, s4)]
        exact = w[0] * b2 @ a2 + w[1] * b4 @ a4
        if exact.norm() > 0:
            conv_err = max(
                conv_err, float(((w[0] * b2 + w[1] * b4) @ (w[0] * a2 + w[1] * a4) - exact).norm() / exact.norm())
            )
    assert pq_err < 1e-5 and conv_err > 1e-2, (pq_err, conv_err)


def test_local_adapter_carries_over_and_differs_from_the_global_one(clean):
    """At the start of the last round's training every client's local P is the one it ended the round before with
    (never overwritten by G_i), and differs from the global P_G it received."""
    prog = clean[1]
    for c, st in prog.clients.items():
        start = {k[len("rela.test.start.") :]: v for k, v in st.tensors.items() if k.startswith("rela.test.start.")}
        prev = {k[len("rela.test.prev.") :]: v for k, v in st.tensors.items() if k.startswith("rela.test.prev.")}
        local = [k for k in start if k.endswith(".lora_P")]
        assert local and set(local) == set(prev)
        for k in local:
            assert torch.equal(start[k], prev[k]), (c, k)
        assert any(not torch.equal(start[k], start[k[: -len(".lora_P")] + ".lora_gP"]) for k in local), c


def test_resume_after_interruption_is_exact(bench, clean, tmp_path, monkeypatch):
    res_clean, _, clean_dir = clean
    prog_clean = load_progress(clean_dir)  # fresh from disk
    out = tmp_path / "crash"
    cfg = _cfg(bench, out, method="fedmosaic-crash")
    monkeypatch.setattr(CrashingFedMosaic, "FAIL_ON", (3, 2))
    with pytest.raises(PluginError, match="interrupted"):  # inline: a worker would not see the patched class
        run(cfg.model_copy(update={"isolation": "inline"}))
    monkeypatch.setattr(CrashingFedMosaic, "FAIL_ON", None)
    assert json.loads(next(out.rglob("progress.json")).read_text())["completed_rounds"] == 2
    resumed = run(cfg)
    assert [r.model_dump() for r in resumed.raw.scores] == [r.model_dump() for r in res_clean.raw.scores]
    prog = load_progress(next(out.rglob("progress.json")).parent)
    for c, st in prog.clients.items():
        ref = prog_clean.clients[c]
        assert set(st.tensors) == set(ref.tensors)
        assert st.metadata["round"] == ref.metadata["round"]
        assert st.metadata["grad_computations"] == ref.metadata["grad_computations"]
        # same process, same thread count: the resumed run is bit for bit the uninterrupted one
        for k in st.tensors:
            assert torch.equal(st.tensors[k], ref.tensors[k]), (c, k)
    assert prog.server.metadata["relevance"] == prog_clean.server.metadata["relevance"]


@pytest.mark.parametrize("method", ["fedit-pqlora", "fedmosaic-equal"])
def test_equal_weight_ablations_send_no_gradient_and_average_uniformly(bench, tmp_path, method):
    """Table 7's two equal-weight steps: no relevance gradient travels and every client weighs the same;
    fedmosaic-equal keeps the dual path (its states hold gates), fedit-pqlora does not."""
    res = run(_cfg(bench, tmp_path, method=method))
    cfg = create_method(method, METHOD_CFG).config
    for rec in res.raw.costs:
        p = _expected_payload(ALLOC[str(rec.client)], "tiny-llava-qwen2-s", cfg, send_grad=False)
        assert rec.uplink_bytes == acc.payload_bytes(p.up, 2) + 2
    prog = load_progress(next(tmp_path.rglob("progress.json")).parent)
    w = torch.tensor(prog.server.metadata["weights"])
    assert torch.allclose(w, torch.full_like(w, 0.25))
    # P/Q averaged across all clients: every client receives the same P/Q
    msgs = prog.messages
    for k, v in msgs[1].tensors.items():
        if k.startswith("pq."):
            assert all(torch.equal(v, msgs[c].tensors[k]) for c in msgs)
    gates = [k for st in prog.clients.values() for k in st.tensors if "lora_beta" in k]  # the dual path's gate
    assert bool(gates) == (method == "fedmosaic-equal") == cfg.dual_path


def test_plugin_configs_take_their_defaults_from_the_toy_profile() -> None:
    from drake_bench.methods.fedmosaic.config import TOY_PROFILE, FedMosaicPluginConfig

    toy, paper = FedMosaic.Config(), FedMosaicConfig()
    assert toy.model_dump(include=set(TOY_PROFILE)) == FedMosaicConfig.toy().model_dump(include=set(TOY_PROFILE))
    assert any(getattr(toy, k) != getattr(paper, k) for k in TOY_PROFILE)
    # each field is declared once: same type, bounds and description as in config.py, only the default moves
    for cls in (FedMosaic.Config, FedITPQLoRA.Config):
        for name, info in cls.model_fields.items():
            ref = FedMosaicPluginConfig.model_fields[name]
            assert (info.annotation, info.description, info.metadata) == (ref.annotation, ref.description, ref.metadata)
    with pytest.raises(ValueError):
        FedMosaic.Config(rank=0)
    ablation = FedITPQLoRA.Config()
    assert (ablation.dual_path, ablation.weighting, ablation.conv_agg) == (False, "equal", "equal_within_type")
    assert ablation.rank == TOY_PROFILE["rank"]


def test_the_alignment_report_reaches_the_result_file(clean):
    """Every aligned (architecture, PQ module) has one row with round 1, none later; the fit lowers the A-code L2
    distance to the pivot on most modules (the median ratio after/before is below 1)."""
    rows = [d for d in clean[0].raw.diagnostics if d.key.startswith("alignment/")]
    assert rows and {d.round for d in rows} == {1}
    archs = {d.key.split("/")[1] for d in rows}
    assert len(archs) == len(set(ALLOC.values())) - 1  # every architecture but the pivot
    pivots = {d.values["pivot"] for d in rows}
    assert len(pivots) == 1 and pivots.isdisjoint(archs)  # one pivot, itself not aligned
    ratios = sorted(d.values["l2_ratio"] for d in rows)
    assert ratios[len(ratios) // 2] < 1.0, ratios
    assert all(d.values["orth_error"] < 1e-4 and 0.0 <= d.values["cca_corr_top"] <= 1.0 + 1e-6 for d in rows)


def test_the_alignment_is_audited_on_public_items_it_never_saw(clean):
    """The audit's held-out numbers are in every aligned module's row, measured with the bases from before and
    after alignment (so before != after: the bases moved), on items past the alignment's public_size."""
    rows = [d for d in clean[0].raw.diagnostics if d.key.startswith("alignment/")]
    for d in rows:
        v = d.values
        assert v["heldout_l2_before"] > 0 and v["heldout_l2_after"] != v["heldout_l2_before"]
        assert v["heldout_l2_ratio"] == pytest.approx(v["heldout_l2_after"] / v["heldout_l2_before"])
        assert -1.0 <= v["heldout_cca_corr_mean"] <= 1.0 and -1.0 <= v["heldout_cca_corr_top"] <= 1.0
        assert "cca_directions" not in v  # tensors stay in the plugin


@pytest.mark.parametrize("setting", [{"hetlora": True}, {"het_norm": "PQ"}])
def test_rank_heterogeneous_options_alone_are_refused_not_ignored(setting):
    """No dead options: hetlora without client_ranks has nothing to pad, het_norm without hetlora is never read;
    both raise, naming the field (the working rank-heterogeneous runs: tests/test_fedmosaic_hetero.py)."""
    with pytest.raises(Exception, match=next(iter(setting))):
        create_method("fedmosaic", setting)
