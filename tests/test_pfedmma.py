"""pFedMMA (methods/pfedmma): where the adapters sit, the adapter layer through peft, the round, the controls, the
traffic, and runs through the standard evaluator (a toy benchmark and the three embedded ones).

The method's unit-level invariants: after each aggregation every client holds the same shared projections and its
own down/up; per-round traffic is m (r^2 + r) floats (plus n_i); with the adapters disabled, or with zero up
weights and biases, the model is the base bit for bit; the gradient-scale layer at lr equals no scale at lr / α on
the first step (no momentum, no weight decay); the pairing by relative depth is a total map for every zoo model.

Mutations these tests catch (each tried on the adapter layer, the test failing on it and passing on the code as it
is):

* the adapter branch reading the raw hidden state h instead of the block's pre-attention norm LN1(h) (``u =
  self.norm(h)`` -> ``u = h`` in :class:`MMABlock`): test_every_adapted_block_adds_alpha_times_the_branch_of_ln1_h
  (each instrumented block's output against Block(h) + alpha A(LN1(h)), read in a real forward pass, vision and
  language blocks alike).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import one_embedded_round

from drake_bench import Message
from drake_bench.evaluator.standard import RunConfig, run
from drake_bench.methods.pfedmma import accounting
from drake_bench.methods.pfedmma.depths import depth_map, instrumented_blocks, layout_of
from drake_bench.methods.pfedmma.mma import GradScale, MMABlock, mma_blocks
from drake_bench.methods.pfedmma.plugin import PFedMMA, model_layout
from drake_bench.models.engine import encode_for_training
from drake_bench.models.identity import architecture
from drake_bench.models.testing import toy_loader, toy_samples
from drake_bench.models.zoo import tiny_names
from drake_bench.plugins.guard import GuardedMethod
from drake_bench.plugins.protocol import ClientContext, FederationContext, State
from drake_bench.plugins.registry import create_method, register_method
from drake_bench.results.result_file import check_result

register_method(PFedMMA)  # the installed metadata may predate the entry point; the worker imports it by path

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ALLOC = {1: "tiny-llava-llama-s", 2: "tiny-llava-llama-s", 3: "tiny-llava-qwen2-s", 4: "tiny-llava-qwen2-s"}


def _method(tmp_path: Path, alloc: dict[int, str] = ALLOC, **config) -> PFedMMA:
    method = create_method("pfedmma", {"model_loader": "testing", **config})
    fed = FederationContext(
        benchmark="unit",
        modality="multimodal",
        clients=sorted(alloc),
        allocation=dict(alloc),
        architectures={c: architecture(n) for c, n in alloc.items()},
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


def _ctx(c: int, alloc: dict[int, str] = ALLOC, r: int = 0) -> ClientContext:
    return ClientContext(client_id=c, model_name=alloc[c], architecture=architecture(alloc[c]), round_idx=r, seed=c)


def _batches(c: int, steps: int) -> list[list]:
    """Client-specific toy items (each client its own colours), ``steps`` batches of 2."""
    items = [s.for_method() for s in toy_samples(2 * steps, seed=c)]
    return [items[2 * i : 2 * i + 2] for i in range(steps)]


# ------------------------------------------------------------------------------------------- placement
def test_the_depth_rule_reproduces_the_papers_blocks():
    assert instrumented_blocks(12, 3, 0.25) == [9, 10, 11]  # blocks 10, 11, 12 (l = 10)
    assert instrumented_blocks(12, 8, 8 / 12) == list(range(4, 12))  # blocks 5-12 (l = 5)
    assert instrumented_blocks(12, 1, 0.25) == [11]  # the ablation's "block 12 only"
    assert instrumented_blocks(4, 2, 0.25) == [2, 3]  # a span too small for m is widened to m blocks
    assert instrumented_blocks(32, 2, 0.25) == [27, 31]  # spread over the top quarter, the top depth on the last
    with pytest.raises(ValueError, match="cannot hold"):
        instrumented_blocks(2, 3, 0.25)


def _real_llava_layout():
    """LLaVA-1.5's shape (CLIP ViT-L/14 read at its second-to-last layer, a 32-layer Llama), config only."""
    from transformers import CLIPVisionConfig, LlamaConfig, LlavaConfig

    return layout_of(
        LlavaConfig(
            vision_config=CLIPVisionConfig(num_hidden_layers=24),
            text_config=LlamaConfig(num_hidden_layers=32),
            vision_feature_layer=-2,
        )
    )


def test_layouts_count_the_blocks_the_model_reads():
    swin = model_layout("tiny-llava-qwen2-m")
    assert (swin.vision_stages, swin.language_blocks, swin.vision_kind) == ((2, 2, 2), 6, "swin")
    assert not model_layout("tiny-llama-l").multimodal and model_layout("tiny-llama-l").language_blocks == 8
    real = _real_llava_layout()  # the 24th CLIP layer's output is never read: 23 blocks count
    assert (real.vision_stages, real.language_blocks, real.vision_kind) == ((23,), 32, "vit")
    dmap = depth_map(real, 2, 0.25)
    assert dmap.vision == (20, 22) and dmap.language == (27, 31)  # top 5 of 23, top 8 of 32


@pytest.mark.parametrize("name", tiny_names())
def test_the_pairing_by_relative_depth_is_a_total_map_for_every_zoo_model(name, tmp_path):
    """Every depth k has exactly one language block and, on a multimodal model, exactly one vision block, on
    distinct blocks at increasing depth, the top depth on each encoder's last block; the two blocks of a depth
    share one projection, which the state holds once; nothing else is adapted."""
    cfg = PFedMMA.Config(model_loader="testing")
    layout = model_layout(name)
    dmap = depth_map(layout, cfg.depths, cfg.top_fraction)
    encoders = [("language", dmap.language, layout.language_blocks)]
    if layout.multimodal:
        encoders.append(("vision", dmap.vision, layout.vision_blocks))
    assert (dmap.vision is not None) == layout.multimodal
    for _, blocks, total in encoders:
        assert len(blocks) == cfg.depths and list(blocks) == sorted(set(blocks))
        assert 0 <= blocks[0] and blocks[-1] == total - 1
    method = _method(tmp_path, {1: name})
    model = method.clients.pool.model_for(1)
    seen: dict[int, dict[str, MMABlock]] = {}
    for path, block in mma_blocks(model):
        meta = block._mma_meta["default"]
        assert meta["modality"] not in seen.setdefault(meta["depth"], {}), path
        seen[meta["depth"]][meta["modality"]] = block
    assert sorted(seen) == list(range(cfg.depths))
    for k, slot in seen.items():
        assert set(slot) == ({"language", "vision"} if layout.multimodal else {"language"})
        if layout.multimodal:
            assert slot["vision"].shared("default") is slot["language"].shared("default")
    assert sum(isinstance(m, MMABlock) for m in model.modules()) == len(encoders) * cfg.depths
    state = method.init_client(_ctx(1, {1: name})).tensors
    expect = {f"shared.{k}.{p}" for k in range(cfg.depths) for p in ("weight", "bias")}
    expect |= {
        f"{mod}.{k}.{role}.{p}"
        for mod, _, _ in encoders
        for k in range(cfg.depths)
        for role in ("down", "up")
        for p in ("weight", "bias")
    }
    assert set(state) == expect
    assert state["shared.0.weight"].shape == (cfg.rank, cfg.rank)


# ------------------------------------------------------------------------------------------- the adapter
def test_initial_state_is_one_state_for_the_whole_federation(tmp_path):
    method = _method(tmp_path)
    s = {c: method.init_client(_ctx(c)).tensors for c in ALLOC}
    assert all(torch.equal(s[1][k], s[2][k]) for k in s[1])  # one architecture: identical
    shared = [k for k in s[1] if k.startswith("shared.")]
    assert all(torch.equal(s[1][k], s[3][k]) for k in shared)  # across architectures: the same shared projections
    assert not torch.equal(s[1]["language.0.down.weight"][:8, :8], s[3]["language.0.down.weight"][:8, :8])
    w = s[1]["language.0.up.weight"]  # Kaiming normal, fan_out: std sqrt(2 / out_features)
    assert abs(float(w.std()) - (2 / w.shape[0]) ** 0.5) < 0.3 * (2 / w.shape[0]) ** 0.5
    assert all(not s[1][k].any() for k in s[1] if k.endswith(".bias"))
    assert all(s[1][k].any() for k in s[1] if k.endswith(".weight"))  # up is not zero-initialised


def _logits(model, processor, items) -> torch.Tensor:
    inputs = encode_for_training(model, processor, items)
    inputs.pop("labels")
    model.eval()
    with torch.no_grad():
        return model(**inputs).logits


@pytest.mark.parametrize("name", ["tiny-llava-llama-s", "tiny-qwen2-s"])
def test_adapters_disabled_or_zero_up_reproduce_the_base_bit_for_bit(name, tmp_path):
    alloc = {1: name}
    method = _method(tmp_path, alloc)
    base, processor = toy_loader(name)  # the same seeded random weights as the pool's base
    multimodal = "llava" in name
    items = [s.for_method() for s in toy_samples(3, seed=5, with_images=multimodal)]
    want = _logits(base, processor, items)
    state = method.init_client(_ctx(1, alloc)).tensors
    with method.clients.pool.use(1) as model:
        adapted = _logits(model, processor, items)
        with model.disable_adapter():
            disabled = _logits(model, processor, items)
    assert not torch.equal(adapted, want)  # the initial adapters do act (up is not zero)
    assert torch.equal(disabled, want)
    zero_up = {k: (torch.zeros_like(v) if ".up." in k else v) for k, v in state.items()}
    method.clients.load_canonical(1, zero_up)
    with method.clients.pool.use(1) as model:
        assert torch.equal(_logits(model, processor, items), want)
    # the vision adapters matter on a multimodal model: zeroing only the language side is not the base
    if multimodal:
        lang_only = {
            k: (torch.zeros_like(v) if k.startswith("language.") and ".up." in k else v) for k, v in state.items()
        }
        method.clients.load_canonical(1, lang_only)
        with method.clients.pool.use(1) as model:
            assert not torch.equal(_logits(model, processor, items), want)


@pytest.mark.parametrize("name", ["tiny-llava-llama-s", "tiny-llava-qwen2-m"])
def test_every_adapted_block_adds_alpha_times_the_branch_of_ln1_h(name, tmp_path):
    """Paper Eq. 2 as MMA's code places it: at every instrumented block, in a real forward pass of the client's model,
    h_out = Block(h) + alpha up(relu(shared(relu(down(LN1(h)))))), with LN1 the block's own pre-attention norm, for
    the language blocks and the vision blocks (CLIP ``layer_norm1`` on llava-llama-s, Swin ``layernorm_before`` on
    llava-qwen2-m) alike. Read on the raw h, the same branch gives another output: h is not LN1(h) here."""
    alloc = {1: name}
    method = _method(tmp_path, alloc)
    _, processor = toy_loader(name)
    items = [s.for_method() for s in toy_samples(2, seed=3)]
    seen: dict[str, dict] = {}

    def first(x):
        return x[0] if isinstance(x, tuple) else x

    with method.clients.pool.use(1) as model:
        blocks = dict(mma_blocks(model))

        def hooks(path):  # what the adapted block was given and gave, and what its frozen block alone gave
            def outer(module, args, kwargs, output):
                seen[path].update(h=args[0] if args else kwargs["hidden_states"], out=first(output))

            def inner(module, args, output):
                seen.setdefault(path, {})["base"] = first(output)

            return outer, inner

        handles = []
        for path, b in blocks.items():
            outer, inner = hooks(path)
            handles += [
                b.get_base_layer().register_forward_hook(inner),
                b.register_forward_hook(outer, with_kwargs=True),
            ]
        try:
            _logits(model, processor, items)
        finally:
            for handle in handles:
                handle.remove()
        assert set(seen) == set(blocks) and {b._mma_meta["default"]["modality"] for b in blocks.values()} == {
            "vision",
            "language",
        }
        with torch.no_grad():
            for path, rec in seen.items():
                block = blocks[path]
                h, got, base_out = rec["h"], rec["out"], rec["base"]
                alpha = block.scaling["default"]
                want = base_out + alpha * block.branch("default", block.norm(h))
                raw = base_out + alpha * block.branch("default", h)
                scale = float((want - base_out).abs().max())
                assert scale > 0, path
                assert float((got - want).abs().max()) <= 1e-4 * scale, path
                assert float((raw - want).abs().max()) > 1e-2 * scale, path  # LN1 does matter at this block


def test_gradient_scale_layer_is_identity_forward_and_scales_gradients():
    x = torch.randn(3, 4, requires_grad=True)
    y = GradScale.apply(x, 0.25)
    assert torch.equal(y, x)
    y.sum().backward()
    assert torch.equal(x.grad, torch.full((3, 4), 0.25))


def test_gradient_scale_at_lr_takes_the_same_first_step_as_no_scale_at_lr_over_alpha(tmp_path):
    alpha, lr = 0.005, 0.02
    common = dict(adapter_scale=alpha, sgd_momentum=0.0, sgd_weight_decay=0.0)
    alloc = {1: "tiny-llava-qwen2-s"}
    runs = {}
    for label, cfg in (
        ("gsl", dict(grad_scale=True, sgd_lr=lr)),
        ("plain", dict(grad_scale=False, sgd_lr=lr / alpha)),
        ("plain-same-lr", dict(grad_scale=False, sgd_lr=lr)),
    ):
        method = _method(tmp_path / label, alloc, **common, **cfg)
        start = method.init_client(_ctx(1, alloc))
        _, end = method.client_update(_ctx(1, alloc), start, None, _batches(1, 1))
        runs[label] = {k: end.tensors[k] - start.tensors[k] for k in start.tensors}
    gsl, plain, same = runs["gsl"], runs["plain"], runs["plain-same-lr"]
    moved = [k for k in gsl if gsl[k].abs().max() > 0]
    assert {k.split(".")[0] for k in moved} == {"vision", "language", "shared"}  # both adapters and shared move
    for k in gsl:
        assert torch.allclose(gsl[k], plain[k], rtol=1e-3, atol=1e-7), k
    # without the layer, the same lr moves the adapters alpha times as far (steps near float32 rounding of the
    # weights: compared to 1e-7)
    k = "language.1.up.weight"
    assert torch.allclose(same[k], alpha * gsl[k], rtol=1e-2, atol=1e-7) and same[k].abs().max() > 1e-5


# ------------------------------------------------------------------------------------------- the round
def _round(
    method: PFedMMA, states: dict[int, State], messages: dict[int, Message] | None, steps: dict[int, int], r: int = 0
):
    uploads = {}
    for c in sorted(states):
        uploads[c], states[c] = method.client_update(
            _ctx(c, r=r), states[c], (messages or {}).get(c), _batches(c + 10 * r, steps[c])
        )
    return uploads


def test_after_each_aggregation_clients_hold_identical_shared_and_distinct_down_up(tmp_path):
    method = _method(tmp_path)
    guarded = GuardedMethod(method)
    states = {c: method.init_client(_ctx(c)) for c in ALLOC}
    server = method.init_server()
    messages = None
    steps = {1: 1, 2: 2, 3: 3, 4: 1}  # n_i = 2, 4, 6, 2
    for r in range(2):
        uploads = _round(method, states, messages, steps, r)
        for c, up in uploads.items():
            assert set(up.tensors) == {f"shared.{k}.{p}" for k in range(2) for p in ("weight", "bias")}
            assert up.metadata == {"n": 2 * steps[c]}
        messages, server = guarded.aggregate(r, server, uploads)
        n = torch.tensor([2.0 * steps[c] for c in sorted(ALLOC)], dtype=torch.float64)
        for k in uploads[1].tensors:
            stack = torch.stack([uploads[c].tensors[k].double() for c in sorted(ALLOC)])
            mean = (n.view(-1, *[1] * (stack.dim() - 1)) * stack).sum(0) / n.sum()
            for c in ALLOC:  # every client gets the sample-weighted mean, across both architectures
                assert torch.equal(messages[c].tensors[k], messages[1].tensors[k])
                assert torch.allclose(messages[c].tensors[k].double(), mean, atol=1e-6)
            assert torch.equal(server.tensors[k], messages[1].tensors[k])
        final = method.post_federation(None, states, server)  # the message written into every client's state
        for k in messages[1].tensors:
            assert all(torch.equal(final[c].tensors[k], messages[1].tensors[k]) for c in ALLOC)
        for k in (k for k in states[1].tensors if not k.startswith("shared.")):
            assert not torch.equal(final[1].tensors[k], final[2].tensors[k])  # same architecture, own down/up
            assert torch.equal(final[1].tensors[k], states[1].tensors[k])  # never overwritten by the server
    # a client starts its round from its own down/up and the global shared projections (no batches: no step)
    upload, after = method.client_update(_ctx(3, r=2), states[3], messages[3], [])
    for k, v in after.tensors.items():
        assert torch.equal(v, messages[3].tensors[k] if k.startswith("shared.") else states[3].tensors[k])
    assert upload.metadata == {"n": 0}
    rows = {row.key: row.values for row in method.round_diagnostics(1)}
    assert rows["communication"]["uplink_floats_per_client"] == accounting.communicated_floats(2, 8) == 144
    assert rows["communication"]["shared_floats_paper"] == 128
    assert rows["shared.0"]["clients"] == 4 and rows["shared.0"]["client_spread"] > 0


@pytest.mark.parametrize(
    "control,shared,down_up",
    [("local-only", False, False), ("all-global", True, True), ("down-up-global", False, True)],
)
def test_controls_average_what_they_name(control, shared, down_up, tmp_path):
    method = _method(tmp_path, control=control)
    states = {c: method.init_client(_ctx(c)) for c in ALLOC}
    uploads = _round(method, states, None, {c: 1 for c in ALLOC})
    for c, up in uploads.items():
        kinds = {k.split(".")[0] for k in up.tensors}
        assert kinds == ({"shared"} if shared else set()) | ({"vision", "language"} if down_up else set())
        if not (shared or down_up):  # nothing to send: an empty message, '{}'
            assert up.metadata == {} and up.num_bytes() == 2
    messages, server = GuardedMethod(method).aggregate(0, method.init_server(), uploads)
    for c in ALLOC:
        assert set(messages[c].tensors) == set(uploads[c].tensors)
    if down_up:  # within an architecture, never across
        k = "language.0.down.weight"
        assert torch.equal(messages[1].tensors[k], messages[2].tensors[k])
        assert messages[1].tensors[k].shape != messages[3].tensors[k].shape
        assert torch.allclose(messages[1].tensors[k], (uploads[1].tensors[k] + uploads[2].tensors[k]) / 2, atol=1e-6)
        assert f"{architecture(ALLOC[3])}/{k}" in server.tensors
    if not shared and down_up:  # the shared projections stay personal
        assert not any(k.startswith("shared.") for k in server.tensors)


def test_controls_and_the_evaluator_accept_config_from_the_cli():
    from drake_bench.commands.run import method_settings

    assert method_settings(["pfedmma.control=local-only", "sgd_lr=0.01"], ["pfedmma"]) == {
        "pfedmma": {"control": "local-only", "sgd_lr": 0.01}
    }
    assert create_method("pfedmma", {"control": "all-global"}).config.control == "all-global"
    with pytest.raises(Exception, match="control"):
        create_method("pfedmma", {"control": "b1"})


# ------------------------------------------------------------------------------------------- through the evaluator
def test_pfedmma_runs_through_the_evaluator_and_traffic_equals_the_formula(toy_mixed, tmp_path):
    manifest, root = toy_mixed
    rounds, steps = 2, 2
    res = run(
        RunConfig(
            benchmark=manifest,
            method="pfedmma",
            data_dir=root,
            out=str(tmp_path),
            rounds=rounds,
            local_steps=steps,
            scenario="static",
            fast_adaptation_iters=1,
            fast_adaptation_eval_every=1,
            fast_adaptation_test_items=2,
            others_subsample=1,
            self_subsample=2,
            method_config={"model_loader": "testing"},
        )
    )
    assert check_result(res) == [] and res.status == "complete"
    cfg = PFedMMA.Config()
    n = steps * 2  # the toy benchmark's batch size is 2
    assert len(res.raw.costs) == rounds * 4
    for cost in res.raw.costs:  # measured by the evaluator: m (r^2 + r) float32 and {"n": n_i} up, the same down
        assert cost.uplink_bytes == accounting.uplink_bytes(cfg.depths, cfg.rank, n)
        assert cost.uplink_bytes - len(json.dumps({"n": n})) == 4 * cfg.depths * (cfg.rank**2 + cfg.rank)
        assert cost.downlink_bytes == accounting.downlink_bytes(cfg.depths, cfg.rank)
    rows = [d for d in res.raw.diagnostics if d.key == "communication"]
    assert [d.round for d in rows] == [1, 2]
    assert all(d.values["uplink_floats_per_client"] == d.values["shared_floats_formula"] == 144 for d in rows)
    assert res.summary.adaptation is not None


def test_local_only_control_sends_nothing_through_the_evaluator(toy_mixed, tmp_path):
    manifest, root = toy_mixed
    res = run(
        RunConfig(
            benchmark=manifest,
            method="pfedmma",
            data_dir=root,
            out=str(tmp_path),
            rounds=1,
            local_steps=1,
            scenario="static",
            fast_adaptation=False,
            others_subsample=1,
            self_subsample=1,
            method_config={"model_loader": "testing", "control": "local-only"},
        )
    )
    assert check_result(res) == []
    assert all(c.uplink_bytes == 2 and c.downlink_bytes == 2 for c in res.raw.costs)  # "{}" each way


@pytest.mark.parametrize("embedded", ["drake-synth", "hflb-synth", "fedllm-synth"])
def test_one_round_on_each_embedded_benchmark(embedded, tmp_path, small_synth):
    """The benchmark's own clients, allocation and architectures (52 text clients on fedllm-synth), built small:
    every client trains one step and the server averages the shared projections across all of them."""
    _, run_, _ = one_embedded_round(embedded, "pfedmma", tmp_path / "runs")
    cfg = PFedMMA.Config()
    rows = {r.key: r.values for r in run_.diagnostics}
    assert rows["shared.0"]["clients"] == len(run_.clients)  # every architecture, one average
    assert rows["communication"]["uplink_floats_per_client"] == accounting.communicated_floats(cfg.depths, cfg.rank)
    first = run_.messages[run_.clients[0]]
    assert set(run_.messages) == set(run_.clients)
    assert all(torch.equal(m.tensors[k], first.tensors[k]) for m in run_.messages.values() for k in first.tensors)
    assert all(torch.isfinite(t).all() for m in run_.messages.values() for t in m.tensors.values())
