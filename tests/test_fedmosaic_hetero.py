"""FedMosaic with clients of different LoRA ranks (App. A.24, Eq. 24-25) through the real plugin and evaluator.

The toy_mixed benchmark (4 clients: llama-s, qwen2-s, llama-m, qwen2-s; random tiny models) with ranks 4, 4, 8, 16:
P/Q travel across all three ranks and the two qwen2-s clients (ranks 4 and 16) share one base, so their conventional
LoRA goes through HETLoRA's padding within the architecture. The expected messages are recomputed here from the
uploads and the server's recorded RELA weights, independently of methods/fedmosaic/hetlora.py.
"""

from __future__ import annotations

import pytest
import test_fedmosaic_plugin  # noqa: F401  (registers fedmosaic-crash, which records uploads in the server state)
import torch
from conftest import torch_threads  # noqa: E402

from drake_bench.evaluator.checkpoint import load as load_progress
from drake_bench.evaluator.standard import RunConfig, run
from drake_bench.methods.fedmosaic.config import FedMosaicConfig, parse_client_ranks
from drake_bench.plugins.registry import create_method

RANKS = {1: 4, 2: 4, 3: 8, 4: 16}
RANKS_TEXT = "1+2=4,3=8,4=16"
METHOD_CFG = {"model_loader": "testing", "public_size": 16, "grad_interval": 1}

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _run(bench, out, **method_cfg):
    manifest, root = bench
    cfg = RunConfig(
        benchmark=manifest,
        method="fedmosaic-crash",
        data_dir=root,
        out=str(out),
        seeds=[0],
        rounds=2,
        local_steps=2,
        others_subsample=1,
        self_subsample=2,
        fast_adaptation=False,
        eval_every_rounds=2,
        method_config={**METHOD_CFG, **method_cfg},
    )
    with torch_threads(1):
        res = run(cfg)
    return res, load_progress(next(out.rglob("progress.json")).parent)


@pytest.fixture(scope="module")
def mixed(toy_mixed, tmp_path_factory):
    return _run(toy_mixed, tmp_path_factory.mktemp("mixed"), hetlora=True, client_ranks=RANKS_TEXT)


def _uploads(prog):
    order = prog.server.metadata["clients"]
    return order, {
        c: {
            k[len(f"upload.{c}.") :]: v.float()
            for k, v in prog.server.tensors.items()
            if k.startswith(f"upload.{c}.") and not k.startswith(f"upload.{c}.rela.")
        }
        for c in order
    }


def test_a_mixed_rank_run_completes_and_each_message_has_its_client_s_rank(mixed):
    res, prog = mixed
    assert prog.server.metadata["ranks"] == [RANKS[c] for c in prog.server.metadata["clients"]]
    for c, msg in prog.messages.items():
        r = RANKS[c]
        pq = {k: v for k, v in msg.tensors.items() if k.startswith("pq.")}
        conv = {k: v for k, v in msg.tensors.items() if k.startswith("conv.")}
        assert pq and conv
        for k, v in pq.items():
            assert tuple(v.shape) == ((r, r) if k.endswith(".P") else (r,)), (c, k)
        for k, v in conv.items():
            assert (v.shape[0] if k.endswith(".A") else v.shape[1]) == r, (c, k)
        # the client's own state holds adapters of its rank, and they trained
        st = prog.clients[c].tensors
        assert all(v.shape == (r, r) for k, v in st.items() if k.endswith(".lora_P"))
        assert any(float(v.abs().sum()) > 0 for k, v in st.items() if k.endswith(".lora_P"))
    assert res.raw.costs  # the evaluator measured every message


def _hetlora_expected(ups, order, w, ranks, keys_p, norm_of):
    """Eq. 25 by hand: zero-pad to r_max, w^_ij = w_ij a_j / sum_n w_in a_n with a_j = norm_j / sum norms, truncate."""
    r_max = max(ranks)
    out = {}
    for i, c in enumerate(order):
        for kp in keys_p:
            norms = torch.tensor([norm_of(ups[cj], kp) for cj in order], dtype=torch.float64)
            alpha = norms / norms.sum()
            what = w[i].double() * alpha
            what = what / what.sum()
            for key in (kp, kp[:-2] + ".Q"):
                padded = []
                for cj in order:
                    v = ups[cj][key].double()
                    z = torch.zeros((r_max, r_max) if key.endswith(".P") else (r_max,), dtype=torch.float64)
                    z[tuple(slice(0, s) for s in v.shape)] = v
                    padded.append(z)
                full = sum(what[j] * padded[j] for j in range(len(order)))
                r = ranks[i]
                out[(c, key)] = full[:r, :r] if key.endswith(".P") else full[:r]
    return out


def test_each_message_is_the_truncated_eq25_weighted_padded_sum(mixed):
    _, prog = mixed
    order, ups = _uploads(prog)
    w = torch.tensor(prog.server.metadata["weights"])
    ranks = [RANKS[c] for c in order]
    keys_p = [k for k in ups[order[0]] if k.startswith("pq.") and k.endswith(".P")]
    expected = _hetlora_expected(ups, order, w, ranks, keys_p, lambda s, k: float(torch.linalg.norm(s[k].double())))
    plain_differs = False
    for (c, key), exp in expected.items():
        got = prog.messages[c].tensors[key].float()
        assert torch.allclose(got, exp.float().to(torch.bfloat16).float(), rtol=1e-2, atol=1e-6), (c, key)
        # RELA alone (no norm weights) on the padded P would give something else
        if key.endswith(".P"):
            i = order.index(c)
            plain = sum(
                w[i, j].double()
                * torch.nn.functional.pad(ups[cj][key].double(), (0, 16 - RANKS[cj], 0, 16 - RANKS[cj]))
                for j, cj in enumerate(order)
            )[: RANKS[c], : RANKS[c]]
            plain_differs |= not torch.allclose(got, plain.float().to(torch.bfloat16).float(), rtol=1e-2, atol=1e-6)
    assert plain_differs
    # conventional LoRA of the two qwen2-s clients (ranks 4 and 16): padded A rows / B columns, norm ||B A||_F
    qwen = [c for c in order if c in (2, 4)]
    idx = [order.index(c) for c in qwen]
    conv_a = [k for k in ups[2] if k.startswith("conv.") and k.endswith(".A")]
    assert conv_a
    for ka in conv_a:
        kb = ka[:-2] + ".B"
        norms = torch.tensor([float(torch.linalg.norm(ups[c][kb].double() @ ups[c][ka].double())) for c in qwen])
        alpha = norms / norms.sum()
        for i, c in zip(idx, qwen):
            row = w[i, idx].double() / w[i, idx].double().sum()
            what = row * alpha.double()
            what = what / what.sum()
            a_full = sum(
                what[t] * torch.nn.functional.pad(ups[cj][ka].double(), (0, 0, 0, 16 - RANKS[cj]))
                for t, cj in enumerate(qwen)
            )
            b_full = sum(
                what[t] * torch.nn.functional.pad(ups[cj][kb].double(), (0, 16 - RANKS[cj]))
                for t, cj in enumerate(qwen)
            )
            r = RANKS[c]
            for key, exp in ((ka, a_full[:r]), (kb, b_full[:, :r])):
                got = prog.messages[c].tensors[key].float()
                assert torch.allclose(got, exp.float().to(torch.bfloat16).float(), rtol=1e-2, atol=1e-6), (c, key)


def test_smaller_ranks_start_from_the_leading_block_of_the_aligned_bases(mixed):
    """Alignment across ranks: client 2 (qwen2-s, r 4) holds the first 4 rows of A / columns of B of client 4
    (qwen2-s, r 16), whose bases are the architecture's aligned E[k]; both stay frozen through the run."""
    _, prog = mixed
    s2, s4 = prog.clients[2].tensors, prog.clients[4].tensors
    mods = [k[: -len(".lora_P")] for k in s4 if k.endswith(".lora_P") and not k.startswith("rela.")]
    assert mods
    for m in mods:
        a2, a4 = s2[f"{m}.lora_A.weight"], s4[f"{m}.lora_A.weight"]
        b2, b4 = s2[f"{m}.lora_B.weight"], s4[f"{m}.lora_B.weight"]
        assert a2.shape[0] == 4 and a4.shape[0] == 16
        assert torch.equal(a2, a4[:4]) and torch.equal(b2, b4[:, :4])
        assert torch.allclose(a4 @ a4.T, torch.eye(16), atol=1e-4)


def test_equal_ranks_with_hetlora_reproduce_the_default_run_bit_for_bit(toy_mixed, tmp_path):
    _, default = _run(toy_mixed, tmp_path / "default")
    _, het = _run(toy_mixed, tmp_path / "het", hetlora=True, client_ranks="all=8")
    assert sorted(default.messages) == sorted(het.messages)
    for c in default.messages:
        a, b = default.messages[c].tensors, het.messages[c].tensors
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), c
        sa, sb = default.clients[c].tensors, het.clients[c].tensors
        assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa), c


def test_rank_options_parse_and_refuse_what_cannot_run():
    assert parse_client_ranks("1-3=4, 4+6=8,all=16") == {1: 4, 2: 4, 3: 4, 4: 8, 6: 8, -1: 16}
    cfg = FedMosaicConfig(hetlora=True, client_ranks="1-2=4,3=8")
    assert cfg.client_ranks == {1: 4, 2: 4, 3: 8}
    with pytest.raises(ValueError, match="hetlora"):
        FedMosaicConfig(client_ranks="1=4,2=8")  # mixed ranks cannot be aggregated without HETLoRA
    with pytest.raises(Exception, match="hetlora"):
        create_method("fedmosaic", {"hetlora": True})  # nothing to pad without client_ranks
    with pytest.raises(Exception, match="het_norm"):
        create_method("fedmosaic", {"het_norm": "PQ"})
    with pytest.raises(ValueError, match="client_ranks"):
        FedMosaicConfig(hetlora=True, client_ranks="1=4,1=8")
    with pytest.raises(ValueError, match="client_ranks"):
        FedMosaicConfig(hetlora=True, client_ranks="1=x")
    assert FedMosaicConfig.toy().conv_alpha_for(16) == 32.0  # alpha = 2r keeps the LoRA scale 2
