"""HeteroTune (methods/heterotune): the spec's exact results (its 8.3) through the plugin's real modules.

DeMA's merged forward (Eq. 3) equals its forward; round 0 is the bare base; local training on a type-j client moves
only its trainable set (local adapter, alpha, own slot), never the frozen slots or the base; CMGA's polar-factor
properties; with CMGA off (or one type) and a unit server step a round is FedAvg of the adapters; the evaluator's
measured uplink equals L_j (2 m_j r + M + 2 r^2); the relative-depth map reaches every native entry for every zoo
depth. Text models and toy items keep the file to seconds.

Mutations these tests catch (each tried on the plugin, the test failing on it and passing on the code as it is):

* the server applying each type's raw pseudo-gradient Delta_j to its share slot instead of the CMGA-aligned one
  (``aggregate``'s ``for j, update in aligned.items()`` fed the columns' own ``delta``):
  test_the_server_steps_each_slot_by_its_aligned_update_not_its_raw_one (two types of one depth: the applied
  updates are orthogonal, of equal norm and of the raw updates' total energy) and
  test_the_server_step_is_the_aligned_update_of_the_uploads_on_the_depth_grid (three depths: the step equals
  align_columns of the pseudo-gradients recomputed from the uploads);
* the bug it fixed: each type's pseudo-gradient formed against the server's *current* slot instead of the slot each
  client was sent, wrong for a client that skipped rounds under partial participation:
  test_a_client_that_skipped_rounds_is_measured_from_the_slot_it_was_sent (and, through the evaluator,
  test_heterotune_runs_under_partial_participation_through_the_evaluator); the fix leaves full participation bit for
  bit as it was: test_full_participation_gives_the_old_server_state_exactly.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from drake_bench import Message
from drake_bench.benchmarks.manifest import load_benchmark
from drake_bench.errors import DrakeBenchError
from drake_bench.evaluator.standard import RunConfig, run
from drake_bench.methods.heterotune import accounting
from drake_bench.methods.heterotune.cmga import Column, align_columns, cmga, geometry, polar_factor
from drake_bench.methods.heterotune.dema import dema_blocks, fold_state
from drake_bench.methods.heterotune.depths import grid_columns, model_shape, phi, read_entries
from drake_bench.methods.heterotune.plugin import HeteroTune, HomoTraining, share_key
from drake_bench.methods.lora_clients import average
from drake_bench.models.engine import encode_for_training
from drake_bench.models.identity import architecture
from drake_bench.models.testing import toy_loader, toy_samples
from drake_bench.models.zoo import tiny_names
from drake_bench.plugins.guard import GuardedMethod
from drake_bench.plugins.protocol import ClientContext, FederationContext, State
from drake_bench.plugins.registry import create_method, register_method
from drake_bench.results.result_file import check_result

register_method(HeteroTune)  # the installed metadata may predate the entry points; the worker imports them by path
register_method(HomoTraining)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

THREE = {1: "tiny-llama-s", 2: "tiny-llama-s", 3: "tiny-llama-m", 4: "tiny-llama-l"}  # text: fast
ONE_TYPE = {1: "tiny-llama-s", 2: "tiny-llama-s"}


def _method(tmp_path: Path, alloc: dict[int, str], name: str = "heterotune", **config):
    method = create_method(name, {"model_loader": "testing", **config})
    fed = FederationContext(
        benchmark="unit",
        modality="text",
        clients=sorted(alloc),
        allocation=dict(alloc),
        architectures={c: architecture(n) for c, n in alloc.items()},
        rounds=2,
        local_steps=2,
        batch_size=2,
        seed=0,
        device="cpu",
        public_data=lambda n: [],
        workdir=tmp_path,
    )
    method.setup(fed)
    return method


def _ctx(c: int, alloc: dict[int, str], r: int = 0) -> ClientContext:
    return ClientContext(client_id=c, model_name=alloc[c], architecture=architecture(alloc[c]), round_idx=r, seed=c)


def _batches(c: int, steps: int) -> list[list]:
    items = [s.for_method() for s in toy_samples(2 * steps, seed=c, with_images=False)]
    return [items[2 * i : 2 * i + 2] for i in range(steps)]


def _logits(model, processor, items) -> torch.Tensor:
    inputs = encode_for_training(model, processor, items)
    inputs.pop("labels")
    model.eval()
    with torch.no_grad():
        return model(**inputs).logits


# ------------------------------------------------------------------------------------------- depths
def test_the_depth_map_reaches_every_native_entry_for_every_zoo_size():
    depths = sorted({model_shape(n).blocks for n in tiny_names()}) + [12, 16, 24, 28, 32]  # + the paper's models
    assert depths[:3] == [4, 6, 8]
    for grid in depths:
        for L in (d for d in depths if d <= grid):
            cols = grid_columns(grid, L)
            assert sorted(set(cols)) == list(range(L)), (grid, L)  # surjective onto the native entries
            assert cols == sorted(cols)  # monotone: relative depth is kept
    assert read_entries(4, 8) == [0, 2, 4, 6] and read_entries(8, 4) == [0, 0, 1, 1, 2, 2, 3, 3]
    assert read_entries(6, 6) == list(range(6)) and phi(5, 6, 4) == 3
    with pytest.raises(ValueError):
        grid_columns(4, 8)


def test_real_checkpoints_are_placed_by_their_configs():
    """By name on real checkpoints: the shape comes from the config (LLaVA-1.5's Llama, a bare Llama-3.1-8B) and DeMA
    targets the language model's decoder blocks, never the vision tower's."""
    import re

    from transformers import CLIPVisionConfig, LlamaConfig, LlavaConfig

    from drake_bench.methods.heterotune.dema import DECODER_BLOCKS
    from drake_bench.methods.heterotune.depths import shape_of

    llava = LlavaConfig(
        vision_config=CLIPVisionConfig(num_hidden_layers=24),
        text_config=LlamaConfig(num_hidden_layers=32, hidden_size=4096),
    )
    assert (shape_of(llava).blocks, shape_of(llava).width) == (32, 4096)
    assert shape_of(LlamaConfig(num_hidden_layers=16, hidden_size=2048)).blocks == 16
    assert re.fullmatch(DECODER_BLOCKS, "model.language_model.layers.31")
    assert re.fullmatch(DECODER_BLOCKS, "model.layers.0")
    assert not re.fullmatch(DECODER_BLOCKS, "model.vision_tower.vision_model.encoder.layers.3")
    assert not re.fullmatch(DECODER_BLOCKS, "model.language_model.layers.3.mlp")


# ------------------------------------------------------------------------------------------- DeMA
def test_round_zero_is_the_bare_base_and_only_the_language_blocks_carry_dema(tmp_path):
    method = _method(tmp_path, THREE)
    base, tok = toy_loader("tiny-llama-m")  # the same seeded random weights as the pool's base
    items = [s.for_method() for s in toy_samples(3, seed=5, with_images=False)]
    with method.clients.pool.use(3) as model:
        assert torch.equal(_logits(model, tok, items), _logits(base, tok, items))
        blocks = list(dema_blocks(model))
        assert len(blocks) == 6 and all(".layers." in name for name, _ in blocks)
    state = method.init_client(_ctx(3, THREE)).tensors
    assert not any(state[f"up.{l}"].any() for l in range(6))  # W_up = 0: every DeMA is the identity
    assert torch.equal(state["bank_down.2"], torch.eye(16).expand(3, 16, 16)) and torch.allclose(
        state["mix.0"], torch.full((3,), 1 / 3)
    )


def _perturbed(state: dict[str, torch.Tensor], seed: int) -> dict[str, torch.Tensor]:
    """A DeMA state with every part active: random up-projections, alpha, own slot and bank rows (the down-projection
    keeps its random init)."""
    g = torch.Generator().manual_seed(seed)
    return {
        k: v + 0.3 * torch.randn(v.shape, generator=g) if k.startswith(("own", "bank", "mix", "up")) else v
        for k, v in state.items()
    }


def test_the_inference_merge_folds_the_slots_into_a_plain_adapter(tmp_path):
    """Eq. 3: A' = W_down P_down, B' = P_up W_up loaded into a Homo-Training model (the plain adapter of the same
    architecture) gives the DeMA model's outputs to 1e-5 in float32."""
    dema = _method(tmp_path / "dema", THREE)
    plain = _method(tmp_path / "plain", THREE, name="homo-training")
    state = _perturbed(dema.init_client(_ctx(3, THREE)).tensors, seed=3)
    _, tok = toy_loader("tiny-llama-m")
    items = [s.for_method() for s in toy_samples(3, seed=7, with_images=False)]
    dema.clients.load_canonical(3, state)
    with dema.clients.pool.use(3) as model:
        want = _logits(model, tok, items)
    folded = fold_state(state, own_type=dema.type_of[3])
    assert set(folded) == set(plain.init_client(_ctx(3, THREE)).tensors)
    plain.clients.load_canonical(3, folded)
    with plain.clients.pool.use(3) as model:
        got = _logits(model, tok, items)
    assert (got - want).abs().max() <= 1e-5
    base, _ = toy_loader("tiny-llama-m")
    assert (_logits(base, tok, items) - want).abs().max() > 1e-3  # the perturbed DeMA acts: no identity check


def test_local_training_moves_only_the_trainable_set(tmp_path):
    """A type-j client trains its local adapter, alpha and own slot j; the frozen slots i != j and the base stay
    bit for bit (with a bank whose rows differ, so a slip between rows would show)."""
    method = _method(tmp_path, THREE)
    c, j = 3, method.type_of[3]
    g = torch.Generator().manual_seed(0)
    server = method.init_server().tensors
    server = {
        k: (v + 0.1 * torch.randn(v.shape, generator=g) if k.startswith("share.") else v) for k, v in server.items()
    }
    message = Message(tensors=method.message_for(j, server))
    start = dict(method.init_client(_ctx(c, THREE)).tensors)
    method.apply_message(j, start, dict(message.tensors))
    reads = method.layout.reads(j)
    for l in range(6):  # the message lands where the depth map says
        assert torch.equal(start[f"bank_up.{l}"][0], server[share_key(0, reads[0][l], "up")])
        assert torch.equal(start[f"own_down.{l}"], server[share_key(j, l, "down")])
    with method.clients.pool.use(c) as model:
        base = {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" not in n}
        trainable = {n.split(".lora_")[1].split(".")[0] for n, p in model.named_parameters() if p.requires_grad}
    assert trainable == {"down", "up", "mix", "own_down", "own_up"}
    upload, end = method.client_update(
        _ctx(c, THREE), State(tensors=method.init_client(_ctx(c, THREE)).tensors), message, _batches(c, 2)
    )
    for k, v in end.tensors.items():
        moved = not torch.equal(v, start[k])
        assert moved == (not k.startswith("bank_")), k
    with method.clients.pool.use(c) as model:
        assert all(torch.equal(p, base[n]) for n, p in model.named_parameters() if "lora_" not in n)
    assert set(upload.tensors) == {k for k in end.tensors if not k.startswith("bank_")}


# ------------------------------------------------------------------------------------------- CMGA
def test_cmga_is_the_polar_factor_and_its_rescales_and_limits_hold():
    g = torch.Generator().manual_seed(0)
    G = torch.randn(256, 3, generator=g, dtype=torch.float64) + 0.8  # correlated columns
    raw = cmga(G, eps=1e-12, rescale="none")
    assert torch.allclose(raw.T @ raw, torch.eye(3, dtype=torch.float64), atol=1e-5)
    assert torch.allclose(raw, polar_factor(G), atol=1e-5)
    fro = cmga(G)  # the default: relative eps 1e-6, Frobenius rescale
    geo = geometry(fro)
    assert max(geo.norms) - min(geo.norms) < 1e-6 * max(geo.norms) and geo.max_abs_cos < 1e-5
    assert abs(fro.norm() - G.norm()) < 1e-9 * G.norm()  # the total update energy is kept
    col = cmga(G, rescale="column")
    assert torch.allclose(col.norm(dim=0), G.norm(dim=0))
    assert torch.equal(cmga(G[:, :1]), G[:, :1])  # M' = 1: a no-op
    assert (cmga(G, eps=1e6) - G).abs().max() < 1e-5 * G.abs().max()  # eps -> infinity: the plain updates (w/o CMGA)
    assert torch.allclose(cmga(7.5 * G), 7.5 * fro, rtol=1e-9)  # scale-equivariant (relative eps)
    Z = torch.cat([G[:, :2], torch.zeros(256, 1, dtype=torch.float64)], 1)  # a type that did not move
    out = cmga(Z)
    assert not out[:, 2].any() and geometry(out[:, :2]).max_abs_cos < 1e-5


def test_alignment_on_the_depth_grid_and_without_it():
    """Columns of depths 2 and 4 on the grid K = 4: aligned pairs at each position, scatter-mean back to the
    shallow type's entries; disabled, each type keeps its own update exactly."""
    g = torch.Generator().manual_seed(1)
    cols = [
        Column(
            t, 1.0, {k: [torch.randn(4, 4, generator=g, dtype=torch.float64) for _ in range(L)] for k in ("down", "up")}
        )
        for t, L in ((0, 2), (1, 4))
    ]
    off, _ = align_columns(
        cols, (2, 4), enabled=False, granularity="matrix", eps=1e-6, eps_mode="relative", rescale="frobenius"
    )
    assert all(
        torch.equal(off[t][k][e], c.delta[k][e])
        for t, c in enumerate(cols)
        for k in ("down", "up")
        for e in range(len(c.delta[k]))
    )
    on, reports = align_columns(
        cols, (2, 4), enabled=True, granularity="matrix", eps=1e-6, eps_mode="relative", rescale="frobenius"
    )
    assert len(reports) == 8 and all(r.after.max_abs_cos < 1e-6 for r in reports)
    pos = {
        c: cmga(torch.stack([cols[0].delta["up"][c // 2].reshape(-1), cols[1].delta["up"][c].reshape(-1)], 1))
        for c in range(4)
    }
    assert torch.allclose(on[1]["up"][3], pos[3][:, 1].reshape(4, 4))
    assert torch.allclose(on[0]["up"][1], (pos[2][:, 0] + pos[3][:, 0]).reshape(4, 4) / 2)  # entry 1 <- c = 2, 3
    _, whole = align_columns(
        cols, (2, 4), enabled=True, granularity="global", eps=1e-6, eps_mode="relative", rescale="frobenius"
    )
    assert [r.key for r in whole] == ["global"]


# ------------------------------------------------------------------------------------------- the round
def _round(method, alloc, messages=None, r=0, steps=None):
    states = {c: method.init_client(_ctx(c, alloc)) for c in alloc}
    uploads = {}
    for c in sorted(alloc):
        uploads[c], states[c] = method.client_update(
            _ctx(c, alloc, r), states[c], (messages or {}).get(c), _batches(c, (steps or {}).get(c, 1))
        )
    return uploads, states


@pytest.mark.parametrize("use_cmga", [False, True])
def test_one_type_and_a_unit_server_step_is_fedavg_of_the_adapters(use_cmga, tmp_path):
    """With one type (CMGA has nothing to align) or CMGA off, eta_s = 1: every uploaded tensor's sample-weighted
    mean, the share slot included, is what the server keeps and sends."""
    method = _method(tmp_path, ONE_TYPE, use_cmga=use_cmga)
    uploads, _ = _round(method, ONE_TYPE, steps={1: 1, 2: 3})
    messages, server = GuardedMethod(method).aggregate(0, method.init_server(), uploads)
    n = [2.0, 6.0]
    for k in uploads[1].tensors:
        mean = sum(w * uploads[c].tensors[k].double() for w, c in zip(n, (1, 2))) / sum(n)
        name = share_key(0, int(k.split(".")[1]), k.split("_")[1].split(".")[0]) if k.startswith("own_") else k
        got = messages[1].tensors[name]
        assert torch.allclose(got.double(), mean, rtol=0, atol=1e-7), k
        assert torch.equal(got, messages[2].tensors[name])


def test_a_heterogeneous_round_aligns_the_types_and_sends_each_its_part(tmp_path):
    method = _method(tmp_path, THREE)
    uploads, states = _round(method, THREE, steps={c: 2 for c in THREE})  # step 1 cannot move a slot: W_up = 0
    M, r = 3, 16
    for c, up in uploads.items():  # the formula, tensor by tensor
        shape = model_shape(THREE[c])
        assert sum(t.numel() for t in up.tensors.values()) == accounting.uplink_floats(shape.blocks, shape.width, r, M)
    start = method.init_server()
    messages, server = GuardedMethod(method).aggregate(0, start, uploads)
    rows = {row.key: row.values for row in method.round_diagnostics(0)}
    assert len([k for k in rows if k.startswith("cmga.")]) == 2 * 8  # down and up at each of K = 8 positions
    assert all(
        v["aligned"] and v["columns"] == 3 and v["max_abs_cos_after"] < 1e-5
        for k, v in rows.items()
        if k.startswith("cmga.")
    )
    norms = [rows["cmga.down.0"][f"norm_after.{a}"] for a in method.layout.architectures]
    assert max(norms) - min(norms) < 1e-6 * max(norms)
    assert (
        rows["communication.llama-l"]["uplink_floats_per_client"]
        == rows["communication.llama-l"]["uplink_floats_formula"]
        == 8 * (2 * 128 * 16 + 3 + 2 * 16 * 16)
    )
    assert rows["communication.llama-l"]["reduction_vs_full_model"] > 0.9
    for c in THREE:  # each client gets its type's average and exactly the share entries it reads
        j = method.type_of[c]
        want = {
            f"share.{i}.{e}.{k}" for i, es in method.layout.read_sets(j).items() for e in es for k in ("down", "up")
        }
        assert {k for k in messages[c].tensors if k.startswith("share.")} == want
        down = messages[c].tensors["down.0"]
        same = [d for d in THREE if method.type_of[d] == j]
        assert torch.allclose(down, sum(uploads[d].tensors["down.0"] for d in same) / len(same), atol=1e-7)
    moved = {i: server.tensors[share_key(i, 0, "down")] - start.tensors[share_key(i, 0, "down")] for i in range(3)}
    assert all(m.abs().max() > 0 for m in moved.values())
    # the final evaluation point scores each type's global model: the server's message written into the state
    final = method.post_federation(None, states, server)
    assert torch.equal(final[1].tensors["own_up.2"], server.tensors[share_key(0, 2, "up")])
    assert torch.equal(final[4].tensors["bank_down.5"][0], server.tensors[share_key(0, 2, "down")])  # phi(5;8->4)


TWO_OF_ONE_DEPTH = {1: "tiny-llama-s", 2: "tiny-llama-s", 3: "tiny-qwen2-s"}  # two types, both 4 blocks: grid = depth


def _pseudo_gradients(method, start: dict[str, torch.Tensor], uploads) -> dict[int, dict[str, list[torch.Tensor]]]:
    """Delta_j = S_j - sum_k (n_k / sum n) S_j,k per type, kind and entry, recomputed from the uploads (float64)."""
    out: dict[int, dict[str, list[torch.Tensor]]] = {}
    for j in range(method.layout.count):
        members = [c for c in sorted(uploads) if method.type_of[c] == j]
        n = [float(uploads[c].metadata["n"]) for c in members]
        out[j] = {
            kind: [
                start[share_key(j, e, kind)].double()
                - sum(w * uploads[c].tensors[f"own_{kind}.{e}"].double() for w, c in zip(n, members)) / sum(n)
                for e in range(method.layout.depths[j])
            ]
            for kind in ("down", "up")
        }
    return out


def _applied(method, start: dict[str, torch.Tensor], server: dict[str, torch.Tensor], eta: float):
    """(S_j before - S_j after) / eta_s per type, kind and entry: the update the server actually took."""
    return {
        j: {
            kind: [
                (start[share_key(j, e, kind)].double() - server[share_key(j, e, kind)].double()) / eta
                for e in range(method.layout.depths[j])
            ]
            for kind in ("down", "up")
        }
        for j in range(method.layout.count)
    }


def test_the_server_steps_each_slot_by_its_aligned_update_not_its_raw_one(tmp_path):
    """Two types of one depth (llama-s, qwen2-s: 4 blocks each, so grid position = entry): at every entry and kind the
    two updates the server applies are orthogonal and of equal norm (CMGA's polar factor with the Frobenius rescale),
    their total energy is the raw updates', and they are not the raw pseudo-gradients, which here are neither
    orthogonal nor of equal norm. Applying Delta_j itself breaks all three."""
    method = _method(tmp_path, TWO_OF_ONE_DEPTH, server_lr=0.5)
    uploads, _ = _round(method, TWO_OF_ONE_DEPTH, steps={1: 2, 2: 3, 3: 2})  # step 1 cannot move a slot: W_up = 0
    start = method.init_server()
    _, server = GuardedMethod(method).aggregate(0, start, uploads)
    raw = _pseudo_gradients(method, start.tensors, uploads)
    got = _applied(method, start.tensors, server.tensors, eta=0.5)
    raw_cos, raw_ratio = [], []
    for kind in ("down", "up"):
        for e in range(4):
            G = torch.stack([raw[j][kind][e].reshape(-1) for j in (0, 1)], 1)
            A = torch.stack([got[j][kind][e].reshape(-1) for j in (0, 1)], 1)
            assert float(G.norm()) > 0
            raw_cos.append(abs(float(torch.nn.functional.cosine_similarity(G[:, 0], G[:, 1], dim=0))))
            raw_ratio.append(float(G[:, 0].norm() / G[:, 1].norm()))
            cos = float(torch.nn.functional.cosine_similarity(A[:, 0], A[:, 1], dim=0))
            assert abs(cos) < 1e-4, (kind, e, cos)  # aligned: orthogonal
            assert abs(float(A[:, 0].norm() - A[:, 1].norm())) < 1e-4 * float(A.norm()), (kind, e)  # equal norms
            assert abs(float(A.norm() - G.norm())) < 1e-4 * float(G.norm()), (kind, e)  # the energy is kept
            assert float((A - G).norm()) > 1e-2 * float(G.norm()), (kind, e)  # and it is not the raw update
    # the raw updates overlap and differ in size, so orthogonality and equal norms are what CMGA did
    assert max(raw_cos) > 1e-2 and max(abs(r - 1) for r in raw_ratio) > 0.05, (raw_cos, raw_ratio)


def test_the_server_step_is_the_aligned_update_of_the_uploads_on_the_depth_grid(tmp_path):
    """Three depths (4, 6, 8 blocks): every type's slot moves by eta_s times the CMGA alignment, on the grid K = 8, of
    the pseudo-gradients recomputed here from the uploads and the round-start slots."""
    method = _method(tmp_path, THREE)
    uploads, _ = _round(method, THREE, steps={1: 2, 2: 3, 3: 2, 4: 2})
    start = method.init_server()
    _, server = GuardedMethod(method).aggregate(0, start, uploads)
    raw = _pseudo_gradients(method, start.tensors, uploads)
    cfg = method.config
    want, _ = align_columns(
        [Column(j, 1.0, raw[j]) for j in sorted(raw)],
        method.layout.depths,
        enabled=True,
        granularity=cfg.cmga_granularity,
        eps=cfg.cmga_eps,
        eps_mode=cfg.cmga_eps_mode,
        rescale=cfg.cmga_rescale,
    )
    got = _applied(method, start.tensors, server.tensors, eta=method.server_lr(0))
    for j in raw:
        for kind in ("down", "up"):
            for e, d in enumerate(got[j][kind]):
                scale = float(want[j][kind][e].norm())
                assert scale > 0 and float((d - want[j][kind][e]).norm()) < 1e-4 * scale, (j, kind, e)
                assert float((d - raw[j][kind][e]).norm()) > 1e-2 * scale, (j, kind, e)


# ------------------------------------------------------------------------------------------- partial participation
SMALL_THREE = {1: "tiny-llama-s", 2: "tiny-llama-s", 3: "tiny-llama-s", 4: "tiny-llama-m"}  # two types, 4 and 6 blocks


def _received(method, c: int, state: dict[str, torch.Tensor], message: Message | None) -> dict[str, torch.Tensor]:
    """Client ``c``'s state once the message it holds is written in (its state as it is when it holds none)."""
    tensors = dict(state)
    if message is not None:
        method.apply_message(method.type_of[c], tensors, dict(message.tensors))
    return tensors


def _synthetic_uploads(method, starts: dict[int, dict[str, torch.Tensor]], seed: int) -> dict[int, Message]:
    """Each client's upload: what it started from plus a seeded random update of every uploaded tensor, with
    unequal n_k (2 for odd clients, 6 for even ones). No training: the server rule alone is under test."""
    g = torch.Generator().manual_seed(seed)
    return {
        c: Message(
            tensors={
                k: v + 0.05 * torch.randn(v.shape, generator=g, dtype=v.dtype)
                for k, v in sorted(starts[c].items())
                if method.uploaded(k)
            },
            metadata={"n": 2 if c % 2 else 6},
        )
        for c in sorted(starts)
    }


def _slot(method, j: int, tensors: dict[str, torch.Tensor]) -> dict[str, list[torch.Tensor]]:
    return {kind: [tensors[share_key(j, e, kind)] for e in range(method.layout.depths[j])] for kind in ("down", "up")}


def _expected_slots(method, server: dict[str, torch.Tensor], uploads, starts, round_idx: int):
    """Every type's new slot under the rule as it should be: client k's part of the pseudo-gradient measured from the
    own slot it started from (``starts[k]``), sum_k w_k (S_j^(k) - S_j,k), aligned by CMGA, applied to the current
    slot. Recomputed here from the uploads (float64)."""
    cfg = method.config
    columns = []
    for j in range(method.layout.count):
        members = [c for c in sorted(uploads) if method.type_of[c] == j]
        n = [float(uploads[c].metadata["n"]) for c in members]
        parts = {
            c: {
                kind: [
                    starts[c][f"own_{kind}.{e}"].double() - uploads[c].tensors[f"own_{kind}.{e}"].double()
                    for e in range(method.layout.depths[j])
                ]
                for kind in ("down", "up")
            }
            for c in members
        }
        if cfg.cmga_over == "clients":
            columns += [Column(j, w / sum(n), parts[c]) for c, w in zip(members, n)]
        elif members:
            columns.append(
                Column(
                    j,
                    1.0,
                    {
                        kind: [
                            sum(w * parts[c][kind][e] for w, c in zip(n, members)) / sum(n)
                            for e in range(method.layout.depths[j])
                        ]
                        for kind in ("down", "up")
                    },
                )
            )
    aligned, _ = align_columns(
        columns,
        method.layout.depths,
        enabled=cfg.use_cmga,
        granularity=cfg.cmga_granularity,
        eps=cfg.cmga_eps,
        eps_mode=cfg.cmga_eps_mode,
        rescale=cfg.cmga_rescale,
    )
    eta = method.server_lr(round_idx)
    return {
        j: {
            kind: [server[share_key(j, e, kind)].double() - eta * d for e, d in enumerate(upd[kind])]
            for kind in ("down", "up")
        }
        for j, upd in aligned.items()
    }


@pytest.mark.parametrize("cmga_over", ["types", "clients"])
def test_a_client_that_skipped_rounds_is_measured_from_the_slot_it_was_sent(cmga_over, tmp_path):
    """Partial participation, three llama-s clients (type 0) and one llama-m (type 1). Round 1: clients 1, 2 and 4
    take part, 3 does not; round 2: clients 1, 3 and 4. Client 3 still holds the initial slot (the last it was
    sent: none, so its initial state) while the server's slot has moved: its part of type 0's pseudo-gradient is its
    upload minus that initial slot, and the new slot is the round-1 slot minus eta_s times the CMGA alignment of
    those pseudo-gradients. The server keeps an older slot only while some client of the type holds it."""
    method = _method(tmp_path, SMALL_THREE, cmga_over=cmga_over)
    s0 = method.init_server()
    init = {c: method.init_client(_ctx(c, SMALL_THREE)).tensors for c in SMALL_THREE}
    first = _synthetic_uploads(method, {c: init[c] for c in (1, 2, 4)}, seed=1)
    messages, s1 = GuardedMethod(method).aggregate(0, s0, first)
    assert set(messages) == {1, 2, 4}
    starts = {c: _received(method, c, init[c], messages.get(c)) for c in (1, 3, 4)}
    assert torch.equal(starts[3]["own_down.0"], s0.tensors[share_key(0, 0, "down")])  # client 3: the initial slot
    assert not torch.equal(starts[1]["own_down.0"], starts[3]["own_down.0"])  # client 1: the round-1 slot
    second = _synthetic_uploads(method, starts, seed=2)
    out, s2 = GuardedMethod(method).aggregate(1, s1, second)
    want = _expected_slots(method, s1.tensors, second, starts, 1)
    # the old rule: every client measured from the current (round-1) slot
    stale = _expected_slots(
        method, s1.tensors, second, {c: starts[1] if method.type_of[c] == 0 else starts[c] for c in starts}, 1
    )
    for j in (0, 1):
        got = _slot(method, j, s2.tensors)
        for kind in ("down", "up"):
            for e, g in enumerate(got[kind]):
                w, start = want[j][kind][e], s1.tensors[share_key(j, e, kind)].double()
                step = float((w - start).norm())
                assert step > 0 and float((g.double() - w).norm()) <= 1e-5 * step, (j, kind, e)
                if j == 0:  # the two rules do differ where a client was stale
                    assert float((stale[j][kind][e] - w).norm()) > 1e-2 * step, (j, kind, e)
    assert torch.equal(out[3].tensors[share_key(0, 2, "up")], s2.tensors[share_key(0, 2, "up")])
    # the bookkeeping: after round 1 client 3 held version 0 of type 0's slot, so the server kept it (type 1's
    # only client took part: nothing of it is kept; nothing was kept before round 1)
    held = lambda st, v: {k.split("/", 1)[1] for k in st.tensors if k.startswith(f"held@{v}/")}  # noqa: E731
    assert not any(k.startswith("held@") for k in s0.tensors)
    assert held(s1, 0) == {share_key(0, e, kind) for e in range(4) for kind in ("down", "up")}
    assert all(torch.equal(s1.tensors[f"held@0/{k}"], s0.tensors[k]) for k in held(s1, 0))
    assert s1.metadata["holds"] == {"1": 1, "2": 1, "3": 0, "4": 1} and s1.metadata["version"] == {"0": 1, "1": 1}
    # version 0 is held by nobody now; version 1 of type 0 still by client 2, who skipped round 2
    assert not held(s2, 0) and held(s2, 1) == held(s1, 0)
    assert all(torch.equal(s2.tensors[f"held@1/{k}"], messages[2].tensors[k]) for k in held(s2, 1))
    assert s2.metadata["holds"] == {"1": 2, "2": 1, "3": 2, "4": 2}
    # a server state that lost a version some client holds is refused, not silently measured from the current slot
    lost = State(tensors={k: v for k, v in s1.tensors.items() if not k.startswith("held@")}, metadata=s1.metadata)
    with pytest.raises(DrakeBenchError, match="version 0"):
        method.aggregate(1, lost, second)
    # a round with every client brings them all to the current slot: nothing older is kept
    now = {c: _received(method, c, init[c], out.get(c) or messages.get(c)) for c in SMALL_THREE}
    _, s3 = method.aggregate(2, s2, _synthetic_uploads(method, now, seed=3))
    assert not any(k.startswith("held@") for k in s3.tensors) and set(s3.metadata["holds"].values()) == {3}


def _old_aggregate(method, round_idx: int, server_state: State, uploads) -> dict[str, torch.Tensor]:
    """The server state's tensors under the rule before partial participation was handled, written out as it was:
    every pseudo-gradient measured from the server's current slot."""
    cfg = method.config
    server = dict(server_state.tensors)
    by_type: dict[int, list[int]] = {}
    for c in sorted(uploads):
        by_type.setdefault(method.type_of[c], []).append(c)
    columns = []
    for j, members in sorted(by_type.items()):
        n = [float(uploads[c].metadata.get("n", 0)) for c in members]
        w = [1.0] * len(members) if cfg.weighting == "equal" or sum(n) <= 0 else n
        local = [k for k in uploads[members[0]].tensors if not k.startswith("own_")]
        for k, v in average([{k: uploads[c].tensors[k] for k in local} for c in members], w).items():
            server[f"type{j}/{k}"] = v
        if not cfg.use_dema:
            continue
        L, total = method.layout.depths[j], sum(w)

        def start(kind, e):
            return server[share_key(j, e, kind)].double()

        def after(c, kind, e):
            return uploads[c].tensors[f"own_{kind}.{e}"].double()

        if cfg.cmga_over == "clients":
            columns += [
                Column(
                    j,
                    wi / total,
                    {kind: [start(kind, e) - after(c, kind, e) for e in range(L)] for kind in ("down", "up")},
                )
                for c, wi in zip(members, w)
            ]
        else:
            columns.append(
                Column(
                    j,
                    1.0,
                    {
                        kind: [
                            start(kind, e) - sum((wi / total) * after(c, kind, e) for c, wi in zip(members, w))
                            for e in range(L)
                        ]
                        for kind in ("down", "up")
                    },
                )
            )
    if columns:
        aligned, _ = align_columns(
            columns,
            method.layout.depths,
            enabled=cfg.use_cmga,
            granularity=cfg.cmga_granularity,
            eps=cfg.cmga_eps,
            eps_mode=cfg.cmga_eps_mode,
            rescale=cfg.cmga_rescale,
        )
        eta = method.server_lr(round_idx)
        for j, update in aligned.items():
            for kind in ("down", "up"):
                for e, d in enumerate(update[kind]):
                    key = share_key(j, e, kind)
                    server[key] = (server[key].double() - eta * d).to(server[key].dtype)
    return server


def _same_tensors(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert set(a) == set(b)
    assert all(torch.equal(a[k], b[k]) for k in a), [k for k in a if not torch.equal(a[k], b[k])][:3]


def _full_rounds(method, rounds: int):
    """``rounds`` rounds with every client on synthetic uploads, each checked against :func:`_old_aggregate` bit for
    bit (and no older slot kept). Returns the clients' initial states, the last messages and the server state."""
    server = method.init_server()
    states = {c: method.init_client(_ctx(c, THREE)).tensors for c in THREE}
    messages: dict[int, Message] = {}
    for r in range(rounds):
        starts = {c: _received(method, c, states[c], messages.get(c)) for c in THREE}
        uploads = _synthetic_uploads(method, starts, seed=10 + r)
        want = _old_aggregate(method, r, server, uploads)
        messages, server = GuardedMethod(method).aggregate(r, server, uploads)
        _same_tensors(server.tensors, want)
    return states, messages, server


@pytest.mark.parametrize(
    "name, config", [("heterotune", {}), ("heterotune", {"cmga_over": "clients"}), ("homo-training", {})]
)
def test_full_participation_gives_the_old_server_state_exactly(name, config, tmp_path):
    """Three rounds with every client (three depths, unequal n_k): each round's server state is, tensor for tensor
    and bit for bit, what the old rule (every pseudo-gradient from the current slot) gives, and no older slot is
    ever kept (the same test passes on the plugin before the fix: the reference is the old rule)."""
    _full_rounds(_method(tmp_path, THREE, name=name, **config), 3)


def test_a_server_state_from_before_the_bookkeeping_reads_as_every_client_on_the_current_slot(tmp_path):
    """A server state written before partial participation was handled (no ``version`` / ``holds``, as in an
    earlier checkpoint) reads as every client holding the current slot, what the server then assumed: a round with
    client 2 missing is the old rule's, and from then on the slot client 2 holds is kept for it."""
    method = _method(tmp_path, THREE)
    states, messages, server = _full_rounds(method, 2)
    assert set(server.metadata["holds"].values()) == {2} and set(server.metadata["version"].values()) == {2}
    old = State(tensors=dict(server.tensors), metadata={"round": 2, "types": list(method.layout.architectures)})
    starts = {c: _received(method, c, states[c], messages.get(c)) for c in (1, 3, 4)}
    uploads = _synthetic_uploads(method, starts, seed=20)
    _, resumed = GuardedMethod(method).aggregate(2, old, uploads)
    want = _old_aggregate(method, 2, old, uploads)
    # client 2, absent, holds the slot it was (by the old reading) sent: it is kept, under the label 0
    want.update({f"held@0/{k}": v for k, v in old.tensors.items() if k.startswith("share.0.")})
    _same_tensors(resumed.tensors, want)
    assert resumed.metadata["holds"] == {"1": 3, "2": 0, "3": 3, "4": 3}


def test_variants_are_config_and_homo_training_is_the_plain_adapter(tmp_path):
    from drake_bench.commands.run import method_settings

    assert method_settings(["heterotune.use_cmga=false", "heterotune.learn_alpha=false"], ["heterotune"]) == {
        "heterotune": {"use_cmga": False, "learn_alpha": False}
    }
    assert create_method("homo-training", {}).config.use_dema is False
    assert create_method("heterotune", {}).config.use_dema is True
    with pytest.raises(Exception, match="cmga_rescale"):
        create_method("heterotune", {"cmga_rescale": "spectral"})
    homo = _method(tmp_path / "homo", ONE_TYPE, name="homo-training")
    keys = set(homo.init_client(_ctx(1, ONE_TYPE)).tensors)
    assert keys == {f"{k}.{l}" for k in ("down", "up") for l in range(4)}
    fixed = _method(tmp_path / "lw", THREE, learn_alpha=False)
    with fixed.clients.pool.use(1) as model:
        assert not any(p.requires_grad for n, p in model.named_parameters() if "lora_mix" in n)


def test_written_out_allocations_resolve_against_the_benchmarks_clients():
    spec = load_benchmark("drake-synth")
    alloc = spec.allocation("1-4=tiny-llava-llama-s,5-7=tiny-llava-llama-m,8-10=tiny-llava-llama-l")
    assert "".join(alloc[c][-1] for c in range(1, 11)) == "ssssmmmlll"
    assert set(spec.allocation("all=tiny-llava-llama-l").values()) == {"tiny-llava-llama-l"}
    assert spec.allocation("three-sizes") == {
        int(k): v for k, v in spec.model_allocations["three-sizes"].clients.items()
    }
    for bad in ("1-3=tiny-llava-llama-s", "1-11=x", "all=x,2=y,2=z"):
        with pytest.raises(DrakeBenchError):
            spec.allocation(bad)


# ------------------------------------------------------------------------------------------- through the evaluator
def test_heterotune_runs_through_the_evaluator_and_its_uplink_equals_the_formula(toy_mixed, tmp_path):
    """Two families, two widths, two depths (llama-s 4 x 64, qwen2-s 4 x 48, llama-m 6 x 96): the evaluator's measured
    bytes per client and round equal L_j (2 m_j r + M + 2 r^2) float32 plus {"n": n_k}."""
    manifest, root = toy_mixed
    res = run(
        RunConfig(
            benchmark=manifest,
            method="heterotune",
            data_dir=root,
            out=str(tmp_path),
            rounds=1,
            local_steps=1,
            scenario="static",
            fast_adaptation_iters=1,
            fast_adaptation_eval_every=1,
            fast_adaptation_test_items=1,
            fast_adaptation_tasks=["unseen-0"],
            others_subsample=1,
            self_subsample=1,
            isolation="inline",
            method_config={"model_loader": "testing"},
        )
    )
    assert check_result(res) == [] and res.status == "complete"
    alloc = {int(c): m for c, m in res.model_allocation.clients.items()}
    M, r = len({architecture(m) for m in alloc.values()}), HeteroTune.Config().rank
    assert M == 3
    for cost in res.raw.costs:
        shape = model_shape(alloc[cost.client])
        assert cost.uplink_bytes == accounting.uplink_bytes(shape.blocks, shape.width, r, M, 2)
        assert cost.uplink_bytes - len(json.dumps({"n": 2})) == 4 * shape.blocks * (2 * shape.width * r + M + 2 * r * r)
    keys = {d.key for d in res.raw.diagnostics}
    assert {"cmga.down.0", "communication.llava-llama-m", "alpha.llava-qwen2-s"} <= keys
    assert res.summary.adaptation is not None


def test_heterotune_runs_under_partial_participation_through_the_evaluator(toy_mixed, tmp_path):
    """Three of the four clients a round, seed 0: rounds 1-3 draw [1, 2, 3], [2, 3, 4], [1, 3, 4]. In round 2 the
    qwen2-s pair (2, 4) forms its pseudo-gradient while client 4, absent in round 1, still holds the initial slot
    (kept by the server); the run (its server state checkpointed every round) completes and checks."""
    manifest, root = toy_mixed
    res = run(
        RunConfig(
            benchmark=manifest,
            method="heterotune",
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
            method_config={"model_loader": "testing"},
        )
    )
    assert check_result(res) == [] and res.status == "complete"
    assert {(a.round, a.client) for a in res.raw.absences} == {(1, 4), (2, 1), (3, 2)}
    rows = {(d.round, d.key): d.values for d in res.raw.diagnostics}
    assert rows[(2, "communication.llava-qwen2-s")]["clients"] == 2
