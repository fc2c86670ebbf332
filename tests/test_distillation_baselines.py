"""PerAda, FedMKT and TAKFL (methods/distillation): the checks the FedMosaic-baselines issue names, on tiny random models
through the plugins' own calls and the standard evaluator.

* each method's server step lowers the public-data distillation loss on a fixed batch (the round's public window);
* TAKFL's integration with one architecture and unit weight is that architecture's distilled adapter;
* nothing ever averages parameters across architectures (PerAda and TAKFL average within one; FedMKT never uploads
  any); only logits cross architectures;
* the uplink and downlink bytes the evaluator measures equal the stated formulas (adapter + public logits, or top-k
  logits, ids and cross-entropies);
* FedMKT's Min-CE selection and token alignment (the identity for one tokenizer, the receiver's tokens for another);
* each method's declared relative compute plus its per-round public passes is what a client round really runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import MIXED_ALLOCATION

from drake_bench import Message
from drake_bench.benchmarks.sample import MethodSample
from drake_bench.benchmarks.synth.public import sampler
from drake_bench.evaluator.standard import RunConfig
from drake_bench.methods.distillation import base
from drake_bench.methods.distillation.alignment import PAD_LOGIT, TokenAligner, target_ids
from drake_bench.methods.distillation.base import LOGITS, answer_counts, public_logits, window
from drake_bench.methods.distillation.fedmkt import FedMKT, TopK, min_ce_targets
from drake_bench.methods.distillation.perada import LOCAL, PERSONAL, PerAda, proximal_term
from drake_bench.methods.distillation.takfl import TAKFL, integrate
from drake_bench.methods.dual_adapters.base import split
from drake_bench.models.identity import architecture
from drake_bench.models.prompting import target
from drake_bench.models.testing import toy_samples
from drake_bench.plugins.protocol import ClientContext, FederationContext
from drake_bench.plugins.registry import available_methods, create_method, register_method

pytestmark = pytest.mark.usefixtures("one_torch_thread")

METHODS = {"perada": PerAda, "fedmkt": FedMKT, "takfl": TAKFL}
for _cls in METHODS.values():  # an install made before these entry points existed does not list them
    if _cls.meta.name not in available_methods():
        register_method(_cls)

ALLOC = {int(c): m for c, m in MIXED_ALLOCATION.items()}  # llama-s, qwen2-s x 2, llama-m: two sizes, two families
# tiny public windows: 4 items, one distillation batch (so every step sees the same fixed batch)
TINY = dict(model_loader="testing", public_size=8, public_per_round=4, distill_batch=4, report_diagnostics=False)
# small distillation rates (random tiny models' distributions are nearly flat: Adam's unit-size first steps overshoot
# a KL of 1e-5 at the toy rate); TAKFL's clients train at a high rate so an architecture's teacher (the mean of its
# clients' logits) differs from its averaged adapter's logits
OWN_CONFIG = {
    "perada": dict(kd_lr=1e-4, kd_steps=2),
    "takfl": dict(distill_lr=1e-4, distill_epochs=1, n_candidates=0, val_size=2, learning_rate=5e-2),
    "fedmkt": dict(learning_rate=1e-4, server_epochs=2, top_k=16),
}
STEPS = {"perada": dict(kd_steps=1), "takfl": dict(distill_epochs=1), "fedmkt": dict(server_epochs=1)}  # the cheapest
LOCAL_STEPS, BATCH, WINDOW = 2, 2, 4


def _setup(name: str, tmp_path: Path, alloc: dict[int, str], **config):
    method = create_method(name, {**TINY, **OWN_CONFIG[name], **config})
    method.setup(
        FederationContext(
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
            public_data=sampler("multimodal"),
            workdir=tmp_path,
        )
    )
    return method


def _ctx(client: int, r: int, alloc: dict[int, str] = ALLOC) -> ClientContext:
    return ClientContext(
        client_id=client,
        model_name=alloc[client],
        architecture=architecture(alloc[client]),
        round_idx=r,
        seed=1000 * r + client,
    )


def _batches(client: int, r: int) -> list[list[MethodSample]]:
    items = [
        MethodSample(
            uid=s.id,
            images=s.images,
            question=s.question,
            choices=s.choices,
            answer=s.answer,
            answer_type=s.answer_type,
        )
        for s in toy_samples(4, seed=10 * client + r)
    ]
    return [items[:2], items[2:]]


def _equal(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return set(a) == set(b) and all(torch.equal(a[k], b[k]) for k in a)


def _mean(tensors: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    return {k: sum(t[k] for t in tensors) / len(tensors) for k in tensors[0]}


def _adapter(upload: Message) -> dict[str, torch.Tensor]:
    return {k: v for k, v in upload.tensors.items() if k != LOGITS}


class Passes:
    """Items through the language-model head, forward and backward: a step on B items costs B forward + B backward
    item-passes, so compute in forward units is forward + 2 x backward (a backward costs two forwards). A packed
    step (one sequence of B items, ``position_ids`` restarting at 0 for each) counts its B items, read as the model
    is called; a backward counts the items of the forward whose output it flows through."""

    def __init__(self, method, client: int):
        self.model = method.clients.pool.model_for(client)
        self.head = self.model.get_output_embeddings()
        self.forward = self.backward = 0
        self.items = 0

    def __enter__(self):
        def call(_m, args, kwargs):
            positions = kwargs.get("position_ids")
            ids = kwargs.get("input_ids", args[0] if args else None)
            self.items = int((positions == 0).sum()) if positions is not None else int(ids.shape[0])

        def fwd(_m, _i, out):
            n = self.items
            self.forward += n
            if out.requires_grad:
                out.register_hook(lambda g: self._backward(n))

        self.hooks = [
            self.model.register_forward_pre_hook(call, with_kwargs=True),
            self.head.register_forward_hook(fwd),
        ]
        return self

    def _backward(self, n: int) -> None:
        self.backward += n

    def __exit__(self, *exc):
        for h in self.hooks:
            h.remove()

    @property
    def units(self) -> int:
        return self.forward + 2 * self.backward


@pytest.fixture(scope="module")
def federated(toy_mixed, tmp_path_factory):
    """Per method, once per module: the first round through the standard evaluator (in process) on the mixed toy
    benchmark (four clients, three architectures, two families): every client's update (client 1's passes counted,
    it is alone on its architecture), the server's aggregate and the evaluator's cost records; FedMKT's client 1 then
    runs its second round by hand (the one that distils), counted."""
    from drake_bench.evaluator.standard import Evaluator

    manifest, root = toy_mixed
    cache: dict[str, dict] = {}

    def get(name: str) -> dict:
        if name not in cache:
            ev = Evaluator(
                RunConfig(
                    benchmark=manifest,
                    method=name,
                    data_dir=root,
                    scenario="static",
                    rounds=2,
                    local_steps=LOCAL_STEPS,
                    isolation="inline",
                    out=str(tmp_path_factory.mktemp(name)),
                    method_config={**TINY, **OWN_CONFIG[name]},
                )
            )
            run_ = ev.init_or_resume(0)
            method = run_.method.method
            items = {}
            real = method.client_update

            def spy(ctx, state, message, batches):
                batches = [list(b) for b in batches]
                items[ctx.client_id] = sum(len(b) for b in batches)
                return real(ctx, state, message, batches)

            method.client_update = spy
            server0 = run_.server
            try:
                with Passes(method, 1) as passes:
                    uploads = ev.train_round(run_, 0)
                ev.aggregate_round(run_, 0, uploads)
                second = None
                if name == "fedmkt":
                    with Passes(method, 1) as second:
                        real(_ctx(1, 1), run_.states[1], run_.messages[1], _batches(1, 1))
            finally:
                method.client_update = real
                run_.method.close()
            cache[name] = dict(
                method=method,
                run=run_,
                uploads={c: u for c, (u, _) in uploads.items()},
                server0=server0,
                passes=passes,
                items=items,
                second=second,
            )
        return cache[name]

    return get


# ------------------------------------------------------------------------------------------- the server step
def test_perada_server_kd_lowers_the_distillation_loss_toward_the_averaged_logits(federated):
    f = federated("perada")
    method, uploads, messages = f["method"], f["uploads"], f["run"].messages
    items = method.window(0)
    teacher = torch.stack([uploads[c].tensors[LOGITS] for c in sorted(uploads)]).mean(0)  # every client's logits
    for arch, members in method.members.items():
        losses = []
        for adapter in (_mean([_adapter(uploads[c]) for c in members]), messages[members[0]].tensors):
            with method.server_model(method.slot[arch], {LOCAL: adapter}) as (model, processor):
                losses.append(
                    method.window_loss(
                        model, processor, items, method.kd_loss(teacher, answer_counts(processor, items))
                    )
                )
        assert losses[1] < losses[0], (arch, losses)
    assert len(method.members) == 3 and [r.values["kd_steps"] for r in f["run"].diagnostics] == [2, 2, 2]


def test_fedmkt_server_distillation_lowers_the_loss_toward_the_min_ce_targets(federated):
    f = federated("fedmkt")
    method, uploads = f["method"], f["uploads"]
    items, slot = method.window(0), method.server_slot
    assert method.slot[architecture("tiny-llava-llama-m")] == slot  # the largest model is the server's
    with method.server_model(slot, {"default": method.clients.initial(slot)}) as (model, processor):
        counts = answer_counts(processor, items)
        candidates = [method.topk(model, processor, items)]
        candidates += [TopK.from_tensors(uploads[c].tensors, counts) for c in sorted(uploads)]  # one tokenizer
        targets, _ = min_ce_targets(candidates, model.get_output_embeddings().weight.shape[0])
        loss_fn = method.loss(targets, counts)
        before = method.window_loss(model, processor, items, loss_fn)
    after_adapter = {k[len("server/") :]: v for k, v in f["run"].server.tensors.items()}
    with method.server_model(slot, {"default": after_adapter}) as (model, processor):
        after = method.window_loss(model, processor, items, loss_fn)
    assert after < before, (before, after)


def test_takfl_distillation_lowers_the_loss_from_every_teacher(federated):
    """Student qwen2-s (two clients, so its own teacher, the mean of their logits, is not its averaged adapter)
    distilled from each architecture's teacher."""
    f = federated("takfl")
    method, uploads = f["method"], f["uploads"]
    items, student = method.window(0), architecture("tiny-llava-qwen2-s")
    mean = _mean([_adapter(uploads[c]) for c in method.members[student]])
    with method.server_model(method.slot[student], {"default": mean}) as (model, processor):
        own = public_logits(model, processor, items)[0].values
    for teacher_arch, teacher_members in method.members.items():
        teacher = torch.stack([uploads[c].tensors[LOGITS] for c in teacher_members]).mean(0)
        distilled, _, _ = method.distilled(student, mean, teacher, own, 0)
        losses = []
        for adapter in (mean, distilled):
            with method.server_model(method.slot[student], {"default": adapter}) as (model, processor):
                losses.append(
                    method.window_loss(
                        model, processor, items, method.loss(teacher, own, answer_counts(processor, items))
                    )
                )
        assert losses[1] < losses[0], (teacher_arch, losses)


def test_takfl_integration_with_one_architecture_and_unit_weight_is_its_distilled_adapter(tmp_path):
    tau = {"a": torch.tensor([1.0, -2.0]), "b": torch.tensor([[0.5]])}
    start = {"a": torch.tensor([0.25, 0.5]), "b": torch.tensor([[3.0]])}
    assert _equal(integrate(start, [tau], [1.0]), {k: start[k] + tau[k] for k in start})
    assert _equal(integrate(start, [tau, tau], [0.0, 0.0]), start)
    # through the server's step: one architecture, fixed weight 1 -> every client gets the distilled adapter
    alloc = {1: "tiny-llava-llama-s", 2: "tiny-llava-llama-s"}
    method = _setup("takfl", tmp_path, alloc, tune_lambda="fixed", task_weights=[1.0], report_diagnostics=True)
    states = {c: method.init_client(_ctx(c, 0, alloc)) for c in alloc}
    uploads = {c: method.client_update(_ctx(c, 0, alloc), states[c], None, _batches(c, 0))[0] for c in alloc}
    messages, server = method.aggregate(0, method.init_server(), uploads)
    arch = architecture(alloc[1])
    mean = _mean([_adapter(uploads[c]) for c in alloc])
    teacher = torch.stack([uploads[c].tensors[LOGITS] for c in alloc]).mean(0)
    with method.server_model(method.slot[arch], {"default": mean}) as (model, processor):
        own = public_logits(model, processor, method.window(0))[0].values
    distilled, before, after = method.distilled(arch, mean, teacher, own, 0)
    assert after < before and not _equal(distilled, mean)
    for c in alloc:
        assert set(messages[c].tensors) == set(distilled)
        assert all(torch.allclose(messages[c].tensors[k], distilled[k], atol=1e-7, rtol=0) for k in distilled)
    assert all(torch.equal(server.tensors[f"{arch}/{k}"], messages[1].tensors[k]) for k in distilled)


# ------------------------------------------------------------------------------------------- architectures
@pytest.mark.parametrize("name", ["perada", "takfl"])
def test_parameters_are_never_averaged_across_architectures(federated, name, monkeypatch):
    f = federated(name)
    method, uploads = f["method"], f["uploads"]
    owner = {id(t): method.arch[c] for c, u in uploads.items() for t in _adapter(u).values()}
    calls: list[set[str]] = []
    real = base.average

    def spy(states, weights=None):
        calls.append({owner[id(t)] for s in states for t in s.values()})
        return real(states, weights)

    monkeypatch.setattr(base, "average", spy)
    monkeypatch.setattr(method, "config", method.config.model_copy(update=STEPS[name]))  # one distillation step
    out, _ = method.aggregate(0, method.init_server(), uploads)
    monkeypatch.setattr(base, "average", real)
    assert len(calls) == 3 and all(len(archs) == 1 for archs in calls)  # one mean per architecture
    # another architecture's adapter changing leaves the others' messages as they were (the logits unchanged)
    m = architecture("tiny-llava-llama-m")
    other = {
        c: Message(tensors={k: v + 1.0 if k != LOGITS and method.arch[c] == m else v for k, v in u.tensors.items()})
        for c, u in uploads.items()
    }
    again, _ = method.aggregate(0, method.init_server(), other)
    assert all(_equal(again[c].tensors, out[c].tensors) == (method.arch[c] != m) for c in ALLOC)


def test_fedmkt_exchanges_logits_only(federated, monkeypatch):
    f = federated("fedmkt")
    for msg in [*f["uploads"].values(), *f["run"].messages.values()]:
        assert set(msg.tensors) == {"logits", "indices", "ce"}
    monkeypatch.setattr(base, "average", lambda *a, **k: pytest.fail("FedMKT averaged parameters"))
    monkeypatch.setattr(f["method"], "config", f["method"].config.model_copy(update=STEPS["fedmkt"]))
    f["method"].aggregate(0, f["server0"], f["uploads"])


def test_perada_keeps_its_personal_adapter_and_uploads_the_local_one(federated):
    f = federated("perada")
    for c in ALLOC:
        parts = split(f["run"].states[c].tensors)
        assert _equal(_adapter(f["uploads"][c]), parts[LOCAL]) and not _equal(parts[PERSONAL], parts[LOCAL])
    v = [torch.tensor([1.0, 2.0], requires_grad=True)]
    term = proximal_term(v, [torch.tensor([0.0, 4.0])], lam=0.5)
    assert float(term.detach()) == pytest.approx(0.5 * (1 + 4))  # lambda ||p - w||^2, no 1/2 (PerAda's code)


# ------------------------------------------------------------------------------------------- FedMKT's pieces
def test_min_ce_picks_the_lowest_cross_entropy_candidate_per_item():
    def rows(peak: int, ce: list[float]) -> TopK:
        logits = torch.tensor([[5.0, 0.0]] * 3)
        indices = torch.tensor([[peak, 0]] * 3, dtype=torch.int32)
        return TopK(base.Rows(logits, [1, 2]), base.Rows(indices, [1, 2]), torch.tensor(ce))

    target, chosen = min_ce_targets([rows(3, [1.0, 0.5]), rows(4, [0.7, 0.5])], vocab=6)
    assert chosen == [1, 0]  # item 0: the second candidate; item 1: a tie, the first (the receiver's own)
    assert target.shape == (3, 6) and torch.allclose(target.sum(-1), torch.ones(3))
    assert [int(r.argmax()) for r in target] == [4, 3, 3]


def test_token_alignment_is_the_identity_for_one_tokenizer_and_lands_on_the_receivers_tokens_otherwise():
    from drake_bench.models.testing import toy_tokenizer

    a, b = toy_tokenizer(512), toy_tokenizer(300)
    items = toy_samples(4, seed=3)
    same = TokenAligner(a, a)
    for sender, receiver in ((a, b), (b, a)):
        aligner = TokenAligner(sender, receiver)
        for s in items:
            text = target(s)
            s_ids, r_ids = target_ids(sender, text), target_ids(receiver, text)
            g = torch.Generator().manual_seed(len(text))
            logits = torch.randn(len(s_ids), 8, generator=g)
            indices = torch.randint(4, len(sender), (len(s_ids), 8), generator=g)
            indices[:, 0], logits[:, 0] = torch.tensor(s_ids), 9.0  # the sender is sure of its own answer tokens
            if sender is a:
                assert same.align(text, logits, indices) == (logits, indices)
            out_logits, out_indices = aligner.align(text, logits, indices)
            assert out_logits.shape == (len(r_ids), 8) and torch.isfinite(out_logits).all()
            top = out_indices.gather(1, out_logits.argmax(1, keepdim=True)).squeeze(1)
            assert top.tolist() == r_ids, (
                text,
                sender.convert_ids_to_tokens(s_ids),
                receiver.convert_ids_to_tokens(r_ids),
            )
            probs = base.sparse_probabilities(out_logits, out_indices, len(receiver))
            assert torch.allclose(probs.sum(-1), torch.ones(len(r_ids)))
            assert (
                out_logits[out_logits <= PAD_LOGIT].numel() + out_logits[out_logits > PAD_LOGIT].numel()
                == out_logits.numel()
            )


# ------------------------------------------------------------------------------------------- configs, compute
def test_every_config_field_is_described_and_the_profiles_hold_the_paper_values():
    for cls in METHODS.values():
        missing = [f for f, info in cls.Config.model_fields.items() if not (info.description or "").strip()]
        assert not missing, (cls.meta.name, missing)
        assert cls.Config.toy() == cls.Config()
        paper = cls.Config.paper_mllm()
        assert (paper.rank, paper.learning_rate, paper.public_size) == (128, 2e-5, 5000)
    assert (PerAda.Config().lam, PerAda.Config().temperature, PerAda.Config().kd_max_round) == (0.1, 1.0, 30)
    assert (PerAda.Config.paper_llm().kd_lr, PerAda.Config.paper_llm().kd_steps) == (1e-4, 100)
    assert (FedMKT.Config().top_k, FedMKT.Config().kd_alpha, FedMKT.Config().temperature) == (128, 0.0, 1.0)
    t = TAKFL.Config()
    assert (t.temperature, t.self_temperature, t.self_reg, t.tune_lambda) == (3.0, 20.0, 0.5, "heuristic")
    assert TAKFL.Config.paper_mllm().distill_lr == 3e-5


@pytest.mark.parametrize("name", list(METHODS))
def test_declared_relative_compute_plus_the_public_passes_is_what_a_client_round_runs(federated, name):
    """A client round of training items I (L steps of B) costs 3 I x relative_compute forward units (SFT's step: 3 B),
    plus N forward units for the public window's logits (N = 4 items) and, for FedMKT from its second round, three
    per item of its public distillation (one pass over the window)."""
    f = federated(name)
    cls = METHODS[name]
    trained = f["items"][1]
    assert trained == LOCAL_STEPS * BATCH
    expected = 3 * trained * cls.meta.relative_compute + WINDOW
    assert f["passes"].units == expected, (f["passes"].forward, f["passes"].backward)
    if name == "fedmkt":  # by hand: 2 batches of 2 items
        assert f["second"].units == 3 * 4 * cls.meta.relative_compute + WINDOW + 3 * WINDOW


@pytest.mark.parametrize("name", list(METHODS))
def test_the_evaluators_measured_traffic_is_the_stated_formula(federated, name):
    """The bytes the standard evaluator counted for the first round on four clients of three architectures and two
    families (one tokenizer in the tiny zoo): the formulas of docs/methods/distillation-baselines.md."""
    from drake_bench.models.testing import toy_processor

    f = federated(name)
    method, config = f["method"], f["method"].config
    public = [s.for_method() for s in sampler("multimodal")(config.public_size)]
    items = window(public, config.public_per_round, 0)
    p, vocab = sum(answer_counts(toy_processor(), items)), 2048  # the window's answer tokens, the vocabulary
    costs = f["run"].costs
    assert sorted(c.client for c in costs) == sorted(ALLOC) and {c.round for c in costs} == {1}
    for cost in costs:
        if name == "fedmkt":  # float32 logits + int32 ids of the top k, float32 cross-entropy per item, "{}"
            up = down = 8 * p * config.top_k + 4 * len(items) + 2
        else:  # the float32 adapter + float32 logits over the vocabulary, "{}"; back: the adapter and "{}"
            adapter = 4 * sum(
                t.numel() for t in method.clients.pool.initial_state(cost.client, method.adapters[0]).values()
            )
            up, down = adapter + 4 * p * vocab + 2, adapter + 2
        assert (cost.uplink_bytes, cost.downlink_bytes) == (up, down), cost.client
