"""DITTO, FedSim, FedDPA and FedDAT (methods/dual_adapters): the checks the FedMosaic-baselines issue names, on real
tiny models through the public protocol and the standard evaluator.

* DITTO's local adapter is plain local training (SFT) at lambda = 0 and its global adapter is FedIT's;
* FedSim and FedDPA (and the other two) never upload the local part: the evaluator's measured bytes are the global
  adapter's (a formula), both ways;
* FedDAT's teacher combines both adapters, and its distillation loss is zero when teacher and student agree;
* nothing ever averages tensors across different architectures;
* each runs end to end through the evaluator, and one round on each embedded benchmark;
* each method's declared relative compute is the forward/backward passes its local step really makes (counted).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
import torch
from conftest import one_embedded_round

from drake_bench import Message
from drake_bench.benchmarks.sample import MethodSample
from drake_bench.evaluator.standard import RunConfig, run
from drake_bench.methods.dual_adapters import base
from drake_bench.methods.dual_adapters.base import FROZEN, GLOBAL, LOCAL, combination, split
from drake_bench.methods.dual_adapters.ditto import Ditto, proximal_term
from drake_bench.methods.dual_adapters.feddat import FedDAT, kd_loss
from drake_bench.methods.dual_adapters.feddpa import REFS, FedDPA, instance_weights
from drake_bench.methods.dual_adapters.fedsim import FedSim
from drake_bench.models.identity import architecture
from drake_bench.models.testing import toy_samples
from drake_bench.plugins.guard import GuardedMethod
from drake_bench.plugins.protocol import ClientContext, FederationContext
from drake_bench.plugins.registry import available_methods, create_method, register_method
from drake_bench.results.result_file import check_result

pytestmark = pytest.mark.usefixtures("one_torch_thread")

METHODS = {"ditto": Ditto, "fedsim": FedSim, "feddpa": FedDPA, "feddat": FedDAT}
for _cls in METHODS.values():  # an install made before these entry points existed does not list them
    if _cls.meta.name not in available_methods():
        register_method(_cls)

ALLOC = {1: "tiny-llava-llama-s", 2: "tiny-llava-llama-s", 3: "tiny-llava-qwen2-s", 4: "tiny-llava-qwen2-s"}


def _setup(name: str, tmp_path: Path, alloc: dict[int, str] = ALLOC, **config):
    method = create_method(name, {"model_loader": "testing", **config})
    fed = FederationContext(
        benchmark="unit",
        modality="multimodal",
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


def _ctx(client: int, r: int = 0, alloc: dict[int, str] = ALLOC) -> ClientContext:
    return ClientContext(
        client_id=client,
        model_name=alloc[client],
        architecture=architecture(alloc[client]),
        round_idx=r,
        seed=1000 * r + client,
    )


def _items(n: int = 8, seed: int = 0) -> list[MethodSample]:
    return [
        MethodSample(
            uid=s.id,
            images=s.images,
            question=s.question,
            choices=s.choices,
            answer=s.answer,
            answer_type=s.answer_type,
        )
        for s in toy_samples(n, seed)
    ]


def _batches(client: int, r: int) -> list[list[MethodSample]]:
    items = _items(4, seed=10 * client + r)
    return [items[:2], items[2:]]


def _federate(method, rounds: int = 2, clients=(1, 2)):
    """Run ``rounds`` rounds over ``clients`` by hand; returns the final states, uploads and messages."""
    alloc = {c: ALLOC[c] for c in clients}
    states = {c: method.init_client(_ctx(c, 0, alloc)) for c in clients}
    server, messages = method.init_server(), {c: None for c in clients}
    uploads = {}
    for r in range(rounds):
        for c in clients:
            uploads[c], states[c] = method.client_update(_ctx(c, r, alloc), states[c], messages[c], _batches(c, r))
        messages, server = method.aggregate(r, server, uploads)
    return states, uploads, messages, server


def _equal(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return set(a) == set(b) and all(torch.equal(a[k], b[k]) for k in a)


@pytest.fixture(scope="module")
def unit_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("dual-adapters")


# ------------------------------------------------------------------------------------------- DITTO
def test_ditto_local_is_sft_at_lambda_zero_and_its_global_is_fedit(unit_dir):
    ditto_states, ditto_up, ditto_msg, _ = _federate(_setup("ditto", unit_dir, lam=0.0))
    sft_states, _, _, _ = _federate(_setup("sft", unit_dir))
    fedit_states, fedit_up, fedit_msg, _ = _federate(_setup("fedit", unit_dir))
    for c in (1, 2):
        parts = split(ditto_states[c].tensors)
        assert _equal(parts[LOCAL], sft_states[c].tensors), c  # plain local training, every round
        assert _equal(parts[GLOBAL], fedit_states[c].tensors), c  # FedIT's adapter after local training
        assert _equal(ditto_up[c].tensors, fedit_up[c].tensors) and _equal(ditto_msg[c].tensors, fedit_msg[c].tensors)
    # a positive lambda changes the local adapter only
    prox_states, prox_up, _, _ = _federate(_setup("ditto", unit_dir, lam=1.0))
    assert not _equal(split(prox_states[1].tensors)[LOCAL], sft_states[1].tensors)
    assert _equal(prox_up[1].tensors, fedit_up[1].tensors)


def test_ditto_proximal_term_is_half_lambda_squared_distance_and_its_gradient_pulls_toward_the_global():
    v = [torch.tensor([1.0, 2.0], requires_grad=True), torch.tensor([[3.0]], requires_grad=True)]
    w = [torch.tensor([0.0, 4.0]), torch.tensor([[1.0]])]
    term = proximal_term(v, w, lam=0.5)
    assert float(term.detach()) == pytest.approx(0.25 * (1 + 4 + 4))
    term.backward()
    assert torch.allclose(v[0].grad, 0.5 * (v[0].detach() - w[0])) and torch.allclose(
        v[1].grad, 0.5 * (v[1].detach() - w[1])
    )


# ------------------------------------------------------------------------------------------- FedSim
@pytest.mark.parametrize("schedule", ["simultaneous", "alternating"])
def test_fedsim_trains_both_adapters_and_uploads_the_global_one_only(unit_dir, schedule):
    method = _setup("fedsim", unit_dir, schedule=schedule)
    start = method.init_client(_ctx(1))
    upload, state = method.client_update(_ctx(1), start, None, _batches(1, 0))
    before, after = split(start.tensors), split(state.tensors)
    assert not _equal(before[GLOBAL], after[GLOBAL]) and not _equal(before[LOCAL], after[LOCAL])
    assert _equal(upload.tensors, after[GLOBAL])  # the global adapter as trained, nothing of the local one
    assert not set(upload.tensors) & set(state.tensors) - {f"{GLOBAL}/{k}" for k in upload.tensors}


# ------------------------------------------------------------------------------------------- FedDPA
def test_feddpa_weights_are_max_weight_times_the_mean_cosine_similarity():
    refs = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    queries = torch.tensor([[1.0, 0.0], [1.0, 1.0], [-1.0, 0.0]])
    got = instance_weights(queries, refs, max_weight=0.5)
    assert torch.allclose(got, torch.tensor([0.25, 0.5 * 2**-0.5, -0.25], dtype=got.dtype))


def test_feddpa_trains_the_local_adapter_from_its_second_round_and_keeps_references(unit_dir):
    method = _setup("feddpa", unit_dir)
    s0 = method.init_client(_ctx(1))
    _, s1 = method.client_update(_ctx(1), s0, None, _batches(1, 0))
    assert _equal(split(s1.tensors)[LOCAL], split(s0.tensors)[LOCAL])  # round 1: the global adapter only
    assert not _equal(split(s1.tensors)[GLOBAL], split(s0.tensors)[GLOBAL])
    assert s1.tensors[REFS].shape[0] == 4 and s1.metadata["loss"] is None  # 4 items this round (instance_num 5)
    _, s2 = method.client_update(_ctx(1, 1), s1, None, _batches(1, 1))
    assert not _equal(split(s2.tensors)[LOCAL], split(s1.tensors)[LOCAL]) and s2.metadata["loss"] is not None
    # every query gets a weight in [-max_weight, max_weight]; prediction answers every query, whatever its group
    queries = [q.model_copy(update={"answer": ""}) for q in _items(8, seed=7)]
    with method.clients.pool.use(1) as model:
        weights = method.query_weights(model, method.clients.pool.processor(1), s2, queries)
    assert len(weights) == 8 and all(abs(w) <= 0.5 + 1e-9 for w in weights)
    answers = GuardedMethod(method).predict(_ctx(1, 1), s2, queries)
    assert len(answers) == 8 and all(isinstance(a, str) for a in answers)


def test_feddpa_local_training_does_not_move_the_global_adapter_and_detaches_its_branch(unit_dir):
    method = _setup("feddpa", unit_dir)
    model = method.clients.pool.model_for(1)
    glob = base.adapter_parameters(model, GLOBAL)
    with torch.no_grad():  # a non-zero global B, so its branch matters
        for p in glob:
            p.add_(0.01)
    layer = base.lora_layers(model)[0]
    x = torch.randn(1, 3, layer.in_features, generator=torch.Generator().manual_seed(0), requires_grad=True)
    for detach in (False, True):
        x.grad = None
        with combination(model, {GLOBAL: 0.5, LOCAL: 0.5}, trainable=[LOCAL]):
            with base.detached(model, GLOBAL) if detach else contextlib.nullcontext():
                layer(x).sum().backward()
        assert all(p.grad is None for p in glob)
        grads = x.grad.clone()
        if not detach:
            plain = grads
    assert not torch.allclose(plain, grads)  # the global branch no longer passes gradients back


# ------------------------------------------------------------------------------------------- FedDAT
def test_feddat_teacher_combines_both_adapters_at_its_weights(unit_dir):
    method = _setup("feddat", unit_dir)
    model = method.clients.pool.model_for(1)
    with torch.no_grad():
        for a, shift in ((LOCAL, 0.02), (FROZEN, -0.03), (GLOBAL, 0.05)):
            for p in base.adapter_parameters(model, a):
                p.add_(shift * torch.randn(p.shape, generator=torch.Generator().manual_seed(len(a))))
    layer = base.lora_layers(model)[0]
    x = torch.randn(2, 5, layer.in_features, generator=torch.Generator().manual_seed(3))

    def delta(a: str) -> torch.Tensor:
        return layer.lora_B[a](layer.lora_A[a](x)) * (layer.lora_alpha[a] / layer.r[a])

    with torch.no_grad():
        plain = layer.base_layer(x)
        with combination(model, method.teacher_weights()):
            got = layer(x)
        with combination(model, {GLOBAL: 1.0}):
            student = layer(x)
    assert torch.allclose(got, plain + 0.5 * delta(LOCAL) + 0.5 * delta(FROZEN), atol=1e-6)
    assert not torch.allclose(got, plain + delta(LOCAL), atol=1e-4) and not torch.allclose(
        got, plain + delta(FROZEN), atol=1e-4
    )
    assert torch.allclose(student, plain + delta(GLOBAL), atol=1e-6)  # the student runs the global adapter alone
    assert all(s == pytest.approx(layer.lora_alpha[a] / layer.r[a]) for a, s in layer.scaling.items())  # restored


def test_feddat_distillation_loss_is_zero_when_teacher_and_student_agree(unit_dir):
    z = torch.randn(7, 50, generator=torch.Generator().manual_seed(0))
    assert float(kd_loss(z, z.clone(), 3.0)) == 0.0
    assert float(kd_loss(z, 2 * z, 3.0)) > 0 and float(kd_loss(z + 5.0, z, 3.0)) == pytest.approx(0.0, abs=1e-6)
    # in a real round (the second: every adapter has moved off LoRA's zero B): a teacher of the frozen global adapter
    # alone (w = 0) is the student at the first step, so the first step distils nothing; the default teacher differs
    for w, zero in ((0.0, True), (0.5, False)):
        method = _setup("feddat", unit_dir, teacher_local_weight=w)
        states, _, messages, _ = _federate(method, rounds=1, clients=(1,))
        _, state = method.client_update(_ctx(1, 1), states[1], messages[1], [_batches(1, 1)[0]])
        assert (state.metadata["global_kd"] == 0.0) == zero, (w, state.metadata)


def test_feddat_teacher_keeps_the_global_adapter_as_received(unit_dir):
    method = _setup("feddat", unit_dir)
    states, _, messages, _ = _federate(method, rounds=1)
    _, state = method.client_update(_ctx(1, 1), states[1], messages[1], _batches(1, 1))
    parts = split(state.tensors)
    assert _equal(parts[FROZEN], messages[1].tensors) and not _equal(parts[GLOBAL], messages[1].tensors)


# ------------------------------------------------------------------------------------------- every method
@pytest.mark.parametrize("name", list(METHODS))
def test_nothing_is_averaged_across_architectures(unit_dir, name, monkeypatch):
    method = _setup(name, unit_dir)
    owner: dict[int, str] = {}
    uploads = {}
    for c in ALLOC:
        g = torch.Generator().manual_seed(c)
        uploads[c] = Message(
            tensors={k: v + torch.randn(v.shape, generator=g) for k, v in method.clients.initial(c, GLOBAL).items()}
        )
        owner[id(uploads[c].tensors)] = architecture(ALLOC[c])
    calls: list[set[str]] = []
    real = base.average

    def spy(states, weights=None):
        calls.append({owner[id(s)] for s in states})
        return real(states, weights)

    monkeypatch.setattr(base, "average", spy)
    out, server = method.aggregate(0, method.init_server(), uploads)
    assert len(calls) == 2 and all(len(archs) == 1 for archs in calls)  # one mean per architecture
    monkeypatch.undo()
    GuardedMethod(method).aggregate(0, method.init_server(), uploads)  # valid messages, one per client
    for c in ALLOC:
        mates = [d for d in ALLOC if architecture(ALLOC[d]) == architecture(ALLOC[c])]
        mean = {k: sum(uploads[d].tensors[k] for d in mates) / len(mates) for k in uploads[c].tensors}
        assert all(torch.allclose(out[c].tensors[k], mean[k], atol=1e-6) for k in mean)
    other = {**uploads, 3: Message(tensors={k: v + 1.0 for k, v in uploads[3].tensors.items()})}
    again, _ = method.aggregate(0, method.init_server(), other)
    assert _equal(again[1].tensors, out[1].tensors) and not _equal(again[4].tensors, out[4].tensors)
    # fast adaptation starts from its architecture's average
    start = method.adaptation_state("llava-qwen2-s", {3: None, 4: None}, server)
    assert _equal(split(start.tensors)[GLOBAL], out[3].tensors)


def test_every_config_field_is_described_and_the_profiles_hold_the_paper_values():
    for cls in METHODS.values():
        missing = [f for f, info in cls.Config.model_fields.items() if not (info.description or "").strip()]
        assert not missing, (cls.meta.name, missing)
        assert cls.Config.paper_mllm().rank == 128 and cls.Config.paper_llm().learning_rate == 3e-4
        assert cls.Config.toy() == cls.Config()
    assert Ditto.Config().lam == 1.0 and FedSim.Config().schedule == "simultaneous"
    assert (FedDPA.Config().local_weight, FedDPA.Config().max_weight, FedDPA.Config().instance_num) == (0.5, 0.5, 5)
    assert (FedDAT.Config().teacher_local_weight, FedDAT.Config().temperature) == (0.5, 3.0)


# ------------------------------------------------------------------------------------------- compute, counted
def _passes(method) -> tuple[int, int]:
    """Forward and backward passes (through the language model's head) of client 1's second round, 2 local steps;
    forwards in inference mode (FedDPA's reference embeddings, prediction) are not training compute."""
    alloc = {1: ALLOC[1]}
    state = method.init_client(_ctx(1, 0, alloc))
    _, state = method.client_update(_ctx(1, 0, alloc), state, None, _batches(1, 0))
    head = method.clients.pool.model_for(1).get_output_embeddings()
    count = {"fwd": 0, "bwd": 0}

    def fwd(*_):
        count["fwd"] += 0 if torch.is_inference_mode_enabled() else 1

    def bwd(*_):
        count["bwd"] += 1

    hooks = [head.register_forward_hook(fwd), head.register_full_backward_hook(bwd)]
    try:
        method.client_update(_ctx(1, 1, alloc), state, None, _batches(1, 1))
    finally:
        for h in hooks:
            h.remove()
    return count["fwd"], count["bwd"]


def test_declared_relative_compute_is_the_passes_each_local_step_makes(unit_dir):
    """A backward pass costs two forwards (the usual FLOP count), so a plain LoRA step (SFT) is 3 units."""
    f, b = _passes(_setup("sft", unit_dir, alloc={1: ALLOC[1]}))
    sft = f + 2 * b
    assert (f, b) == (2, 2)
    for name, cls in METHODS.items():
        f, b = _passes(_setup(name, unit_dir, alloc={1: ALLOC[1]}))
        assert (f + 2 * b) / sft == pytest.approx(cls.meta.relative_compute), (name, f, b)
    f, b = _passes(_setup("fedsim", unit_dir, alloc={1: ALLOC[1]}, schedule="alternating"))
    assert (f + 2 * b) / sft == 2.0  # FedAlt: two passes over the batches


# ------------------------------------------------------------------------------------------- the evaluator
@pytest.mark.parametrize("name", list(METHODS))
def test_runs_through_the_evaluator_and_uploads_the_global_adapter_only(toy_mixed, tmp_path, name):
    manifest, root = toy_mixed
    res = run(
        RunConfig(
            benchmark=manifest,
            method=name,
            data_dir=root,
            out=str(tmp_path),
            rounds=2,
            local_steps=1,
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
    assert {r.role for r in res.raw.scores} == {"self", "others"} and res.raw.adaptation
    # measured bytes = the float32 global adapter (+2 for the "{}" metadata), both ways, every round; the local
    # adapter, as large as the global one, would double them
    from drake_bench.models import lora_config
    from drake_bench.models.pool import ModelPool
    from drake_bench.models.testing import toy_loader

    alloc = {1: "tiny-llava-llama-s", 2: "tiny-llava-qwen2-s", 3: "tiny-llava-llama-m", 4: "tiny-llava-qwen2-s"}
    pool = ModelPool(alloc, lora_config(r=8, alpha=16), loader=toy_loader)
    expected = {c: 4 * sum(t.numel() for t in pool.initial_state(c).values()) + 2 for c in alloc}
    assert res.raw.costs and all(c.uplink_bytes == expected[c.client] for c in res.raw.costs)
    assert all(c.downlink_bytes == expected[c.client] for c in res.raw.costs)


@pytest.mark.parametrize("embedded", ["drake-synth", "fedllm-synth"])
@pytest.mark.parametrize("name", list(METHODS))
def test_one_round_on_each_embedded_benchmark(embedded, name, small_synth, tmp_path):
    """The benchmark's own clients, allocation and architectures (52 clients on fedllm-synth), built small: every client
    trains one step, the server averages within each architecture, every message is that architecture's mean.
    drake-synth stands for the multimodal mirrors (hflb-synth's clients are the same kind of tiny LLaVAs; the suite's
    time budget keeps one of the two), fedllm-synth for the text-only clients."""
    ev, run_, uploads = one_embedded_round(embedded, name, tmp_path / "runs")
    assert set(run_.messages) == set(run_.clients)
    for c in run_.clients:
        mates = [d for d in run_.clients if ev._arch[d] == ev._arch[c]]
        assert _equal(run_.messages[c].tensors, run_.messages[mates[0]].tensors)
        assert set(run_.messages[c].tensors) == set(uploads[c][0].tensors)
        assert all(torch.isfinite(t).all() for t in run_.messages[c].tensors.values())
        assert all(not k.startswith(LOCAL + "/") for k in uploads[c][0].tensors)
