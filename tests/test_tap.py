"""TAP (methods/tap): the checks issue #26 names, on real tiny models through the public protocol and the evaluator.

* a client's first round with a key replaces that key (histories start at +inf);
* a larger margin never gives more replacements on the same trajectory;
* replacement copies exactly the components on the replaced key's path, and nothing else (tensor equality);
* the server's component-wise FedAvg is the hand-computed sample-weighted mean and never averages two shapes;
* Stage 2 with beta = 0 is plain local fine-tuning of the personal copy (an independent loop here);
* the personal copy never travels: uploads are the FL copy's trained components, bytes as a formula, the same bytes
  as FedAvg + post-train's through the evaluator;
* end to end through the evaluator: the post-federation seconds and the replacement diagnostics reach the result
  file, which checks, and the replacement curve draws from it.

Mutations these tests catch (each tried on the plugin, the test failing on it and passing on the code as it is):

* h_p recorded from the FL copy's pass instead of the personal copy's (``meta["h_p"].update(h_l)``):
  test_the_personal_history_is_the_personal_copys_own_running_loss;
* Stage 2's teacher left as the final server components, not post-trained P steps (the teacher's ``train_copy``
  result dropped), the KD weight beta_o ignored in the step's loss, and the KL direction reversed (KL(student ||
  teacher)): test_stage2_step_is_task_loss_plus_beta_tau2_kl_of_the_post_trained_teacher_to_the_student (the
  loss the student's first step minimises against the paper's formula, recomputed); the direction also
  test_distillation_term_is_tau2_kl_teacher_to_student_by_hand;
* ``segment_attention`` not passed to the model pool (the bug it fixed: ``false`` was ignored):
  test_segment_attention_option_reaches_the_pool.

Speed (the file must stay under 25 s): one text-only tiny model (no vision tower, so the 10 components of a text
federation) serves the unit tests, its pool built once per module and shared by the four entries (their components
and settings are the same); the evaluator runs a two-client text benchmark inline. One embedded round per benchmark
(drake-synth, hflb-synth, fedllm-synth) passes too but costs 8-16 s each, so it is not in this file.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import build_toy, torch_threads, toy_spec

from drake_bench.benchmarks.manifest import manifest_dict
from drake_bench.benchmarks.sample import AnswerType, MethodSample
from drake_bench.evaluation.metrics import PostFederationCostRecord, ScoreRecord, seed_summary
from drake_bench.evaluator.standard import RunConfig, run
from drake_bench.methods.tap import aggregation, history, keys
from drake_bench.methods.tap.distill import distill_loss
from drake_bench.methods.tap.experts import activate, adapter_parameters, answer_loss, rest, trainable
from drake_bench.methods.tap.memory import draw_batches, recall, remember
from drake_bench.methods.tap.plots import plot_replacements, replacement_counts
from drake_bench.methods.tap.plugin import (
    PERSONAL,
    SALT_STAGE2,
    TAP,
    FedAvgPostTrain,
    TAPLocal,
    TAPNoKD,
    as_copy,
    split_state,
)
from drake_bench.models.identity import architecture
from drake_bench.models.testing import toy_samples
from drake_bench.plugins.protocol import ClientContext, FederationContext, State
from drake_bench.plugins.registry import available_methods, create_method, register_method
from drake_bench.results.result_file import check_result

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ENTRIES = {"tap": TAP, "tap-no-kd": TAPNoKD, "fedavg-post-train": FedAvgPostTrain, "tap-local": TAPLocal}
for _cls in ENTRIES.values():  # an install made before these entry points existed does not list them
    if _cls.meta.name not in available_methods():
        register_method(_cls)

MODEL = "tiny-llama-s"
ALLOC = {1: MODEL, 2: MODEL}
YN, OPEN = "text/yes_no", "text/open"


def _items(kind: AnswerType, n: int, seed: int) -> list[MethodSample]:
    """``n`` text-only items of one answer type (key ``text/<type>``)."""
    pool = [s for s in toy_samples(8 * n, seed=seed, with_images=False) if s.answer_type == kind][:n]
    return [s.for_method() for s in pool]


def _batches(seed: int, steps: int = 1) -> list[list[MethodSample]]:
    """``steps`` batches of two items, one yes/no and one open: two keys per batch."""
    yn, op = _items(AnswerType.YES_NO, steps, seed), _items(AnswerType.OPEN, steps, seed + 100)
    return [[yn[i], op[i]] for i in range(steps)]


def _ctx(c: int, r: int = 0) -> ClientContext:
    return ClientContext(client_id=c, model_name=ALLOC[c], architecture=architecture(ALLOC[c]), round_idx=r, seed=c)


def _federation(tmp: Path) -> FederationContext:
    return FederationContext(
        benchmark="unit",
        modality="text",
        clients=sorted(ALLOC),
        allocation=dict(ALLOC),
        architectures={c: architecture(n) for c, n in ALLOC.items()},
        rounds=4,
        local_steps=1,
        batch_size=2,
        seed=0,
        device="cpu",
        public_data=lambda n: [],
        workdir=tmp,
    )


@pytest.fixture(scope="module")
def tap(tmp_path_factory) -> TAP:
    method = create_method("tap", {"model_loader": "testing", "post_steps": 2, "memory_items": 8})
    method.setup(_federation(tmp_path_factory.mktemp("tap")))
    with torch_threads(1):  # module fixtures run before the function-scoped one_torch_thread
        method.clients.initial_copy(1)  # builds the pool
    return method


def _sibling(name: str, base: TAP, **config):
    """Another entry (or other settings) on ``base``'s model pool: the components, rank and schedule are the same, so
    only the pool's build is saved."""
    method = create_method(name, {"model_loader": "testing", **config})
    method.clients, method.arch, method.federation, method._rows = base.clients, base.arch, base.federation, {}
    return method


@pytest.fixture(scope="module")
def after_round0(tap):
    """Both clients after round 0 (each its own items), the uploads and the server's reply."""
    states = {c: tap.init_client(_ctx(c)) for c in ALLOC}
    uploads = {}
    with torch_threads(1):
        for c in ALLOC:
            uploads[c], states[c] = tap.client_update(_ctx(c), states[c], None, _batches(10 * c))
    messages, server = tap.aggregate(0, tap.init_server(), uploads)
    tap.round_diagnostics(0)
    return states, uploads, messages, server


# ------------------------------------------------------------------------------------------- keys
def test_keys_are_input_modality_and_output_format():
    img = toy_samples(3, seed=0)[0].images[0]
    items = [
        MethodSample(
            uid=str(n),
            images=[img] * n,
            question="q",
            choices=["yes", "no"],
            answer="yes",
            answer_type=AnswerType.YES_NO,
        )
        for n in (0, 1, 3)
    ]
    assert [keys.key_of(s) for s in items] == ["text/yes_no", "image/yes_no", "images/yes_no"]
    comps = keys.components()
    assert len(comps) == len(set(comps)) == 1 + 3 + 4 + 12 and not any("." in c for c in comps)
    assert keys.path("images/open") == ("shared", "mod-images", "fmt-open", "exp-images-open")
    assert keys.paths([YN, OPEN]) == [
        "shared",
        "mod-text",
        "fmt-yes_no",
        "fmt-open",
        "exp-text-yes_no",
        "exp-text-open",
    ]
    cfg = TAP.Config()
    assert (cfg.margin("image/multiple_choice"), cfg.margin("text/yes_no"), cfg.margin("images/open")) == (
        0.01,
        0.005,
        0.01,
    )
    assert (cfg.beta("image/yes_no"), cfg.beta("text/free_text")) == (2e-3, 1.0)
    with pytest.raises(ValueError):
        keys.split_key("audio/yes_no")


# ------------------------------------------------------------------------------------------- Stage 1
def test_first_participation_replaces_every_key_the_client_trained(after_round0):
    states, _, _, _ = after_round0
    for c, state in states.items():
        meta = state.metadata
        assert meta["last_replaced"] == [YN, OPEN]  # h_p = +inf: every key of the round
        assert set(meta["h_l"]) == set(meta["h_p"]) == {YN, OPEN}
        assert all(0 < v < math.inf for v in [*meta["h_l"].values(), *meta["h_p"].values()])
        fl, personal, _ = split_state(dict(state.tensors))
        assert set(fl) == set(personal) == set(keys.paths([YN, OPEN]))  # only trained components are held


def test_history_value_is_the_lambda_weighted_running_mean():
    run = history.RunningLoss()
    run.add_batch({"a": 0.5 * 2.0, "b": 0.5 * 4.0})
    run.add_batch({"a": 1.0 * 1.0})  # a batch without b still counts in N_b
    assert run.values() == {"a": 1.0, "b": 1.0}
    assert history.history_value({}, "a") == math.inf and history.should_replace(5.0, math.inf, 1e9)


def test_a_larger_margin_never_gives_more_replacements():
    rng = random.Random(0)
    for _ in range(200):  # any trajectory of history values: the replaced sets are nested as the margin grows
        h_l = {k: rng.uniform(0, 2) for k in "abcd"}
        h_p = {k: rng.uniform(0, 2) for k in "abc"}  # d: first time, +inf
        sets = [set(history.decide(h_l, h_p, {k: m for k in h_l})) for m in (0.0, 0.01, 0.1, 1.0, 10.0)]
        assert all(later <= earlier for earlier, later in zip(sets, sets[1:])) and "d" in sets[-1]


def test_a_larger_margin_never_gives_more_replacements_through_the_plugin(tap, after_round0):
    states, _, messages, _ = after_round0
    replaced, h_l = [], []
    for scale in (0.0, 1.0, 1e3):
        method = _sibling("tap", tap, margin_text_choice=0.005 * scale, margin_generation=0.01 * scale)
        _, after = method.client_update(_ctx(1, 1), states[1], messages[1], _batches(77))
        replaced.append(set(after.metadata["last_replaced"]))
        h_l.append(after.metadata["h_l"])
    assert h_l[0] == h_l[1] == h_l[2]  # the same trajectory: the FL copy does not depend on the margin
    assert replaced[2] == set() and replaced[2] <= replaced[1] <= replaced[0]


def test_replacement_copies_exactly_the_components_of_the_replaced_key(tap, after_round0, monkeypatch):
    """Round 1 of client 1, yes/no at +inf (its h_p dropped) and open behind a huge margin: the personal copy takes
    the FL copy's yes/no path (shared and mod-text included) and keeps everything else bit for bit. The personal
    copy's own training is stubbed out, so what is compared is the replacement itself."""
    states, _, messages, _ = after_round0
    method = _sibling("tap", tap, margin_generation=1e9)
    train = method.clients.train_copy
    calls = []

    def only_fl(client, copy, batches, lr, **kw):
        calls.append(1)
        if len(calls) == 2:  # the personal copy's training: leave it as the replacement made it
            return {k: dict(v) for k, v in copy.items()}, history.RunningLoss()
        return train(client, copy, batches, lr, **kw)

    monkeypatch.setattr(method.clients, "train_copy", only_fl)
    start = State(
        tensors=dict(states[1].tensors), metadata={**states[1].metadata, "h_p": {OPEN: states[1].metadata["h_p"][OPEN]}}
    )
    _, before, _ = split_state(dict(start.tensors))
    upload, after = method.client_update(_ctx(1, 1), start, messages[1], _batches(78))
    assert after.metadata["last_replaced"] == [YN]
    fl, personal, _ = split_state(dict(after.tensors))
    sent = as_copy(dict(upload.tensors))
    for comp in keys.components():
        if comp in keys.path(YN):
            assert all(
                torch.equal(personal[comp][k], fl[comp][k]) and torch.equal(fl[comp][k], sent[comp][k])
                for k in fl[comp]
            )
            assert any(not torch.equal(personal[comp][k], before[comp][k]) for k in fl[comp]), comp
        elif comp in before:
            assert personal[comp].keys() == before[comp].keys()
            assert all(torch.equal(personal[comp][k], before[comp][k]) for k in before[comp]), comp
        else:
            assert comp not in personal


def test_the_personal_history_is_the_personal_copys_own_running_loss(tap, after_round0):
    """Round 1 of client 1 rebuilt from the plugin's parts: the FL copy (the server's components) trains and gives
    h_l; the replacement is decided from h_l and the stored h_p; the personal copy, so replaced, trains on the same
    batches and gives h_p. The state's h_p is that second pass's running loss (the personal model's), which here
    differs from the FL copy's."""
    states, _, messages, _ = after_round0
    batches = _batches(81)
    lr = tap.config.learning_rate_at(1)
    fl, personal, _ = split_state(dict(states[1].tensors))
    fl.update(as_copy(dict(messages[1].tensors)))
    fl1, run_l = tap.clients.train_copy(1, fl, batches, lr)
    replaced = history.decide(run_l.values(), states[1].metadata["h_p"], tap.margins(run_l.values()))
    personal1, run_p = tap.clients.train_copy(1, history.replace(personal, fl1, replaced), batches, lr)
    _, after = tap.client_update(_ctx(1, 1), states[1], messages[1], batches)
    tap.client_diagnostics(_ctx(1, 1))
    h_l, h_p = after.metadata["h_l"], after.metadata["h_p"]
    assert after.metadata["last_replaced"] == replaced
    assert set(run_p.values()) == set(run_l.values()) == {YN, OPEN}
    for k in (YN, OPEN):
        assert h_l[k] == pytest.approx(run_l.values()[k], rel=1e-6)
        assert h_p[k] == pytest.approx(run_p.values()[k], rel=1e-6)
        assert abs(run_p.values()[k] - run_l.values()[k]) > 1e-3 * run_l.values()[k]  # the two passes differ
    got = split_state(dict(after.tensors))[1]
    assert all(torch.allclose(got[c][k], personal1[c][k], atol=1e-7) for c in personal1 for k in personal1[c])


# ------------------------------------------------------------------------------------------- the server
def test_componentwise_fedavg_is_the_weighted_mean_over_owners_and_never_mixes_shapes():
    g = torch.Generator().manual_seed(0)
    t = lambda *shape: torch.randn(*shape, generator=g)  # noqa: E731
    uploads = {  # clients 1, 2 on architecture A, client 3 on B; the 'shared' A matrix is 4x8 on A, 4x6 on B
        1: (2.0, {"shared/w": t(4, 8), "shared/b": t(2, 2), "exp-x/w": t(3, 3)}),
        2: (6.0, {"shared/w": t(4, 8), "shared/b": t(2, 2)}),
        3: (4.0, {"shared/w": t(4, 6), "shared/b": t(2, 2), "exp-x/w": t(3, 3)}),
    }
    arch = {1: "A", 2: "A", 3: "B"}
    previous = {"4x8|fmt-open/w": torch.ones(4, 8)}
    server, members = aggregation.aggregate(uploads, arch, previous, across=True)
    u = {c: v for c, (_, v) in uploads.items()}
    assert torch.allclose(server["4x8|shared/w"], (2 * u[1]["shared/w"] + 6 * u[2]["shared/w"]) / 8)
    assert torch.equal(server["4x6|shared/w"], u[3]["shared/w"])  # another shape: never averaged with A's
    assert torch.allclose(
        server["2x2|shared/b"], (2 * u[1]["shared/b"] + 6 * u[2]["shared/b"] + 4 * u[3]["shared/b"]) / 12
    )
    assert torch.allclose(server["3x3|exp-x/w"], (2 * u[1]["exp-x/w"] + 4 * u[3]["exp-x/w"]) / 6)  # its owners only
    assert torch.equal(server["4x8|fmt-open/w"], torch.ones(4, 8))  # uploaded by nobody: kept
    assert members["3x3|exp-x/w"] == [1, 3] and members["4x6|shared/w"] == [3]
    within, _ = aggregation.aggregate(uploads, arch, {}, across=False)
    assert torch.equal(within["B|shared/b"], u[3]["shared/b"])
    assert torch.allclose(within["A|shared/b"], (2 * u[1]["shared/b"] + 6 * u[2]["shared/b"]) / 8)
    shapes = {"shared": {"w": (4, 6), "b": (2, 2)}, "exp-x": {"w": (3, 3)}}
    view = aggregation.view_for(server, ["shared", "exp-x"], shapes, "B", across=True)
    assert set(view) == {"shared/w", "shared/b", "exp-x/w"} and torch.equal(view["shared/w"], server["4x6|shared/w"])


def test_the_plugins_aggregate_weights_by_samples_and_sends_each_client_its_components(tap):
    states = {c: tap.init_client(_ctx(c)) for c in ALLOC}
    one_key = [[it] for it in _items(AnswerType.YES_NO, 1, 5)]  # client 1: yes/no only, one item
    up1, _ = tap.client_update(_ctx(1), states[1], None, one_key)
    up2, _ = tap.client_update(_ctx(2), states[2], None, _batches(6, steps=2))  # client 2: both keys, 4 items
    assert up1.metadata == {"n": 1} and up2.metadata == {"n": 4}
    messages, server = tap.aggregate(0, tap.init_server(), {1: up1, 2: up2})
    tap.round_diagnostics(0)
    for name, t1 in up1.tensors.items():  # shared, mod-text, fmt-yes_no, exp-text-yes_no: both hold them
        assert torch.allclose(messages[1].tensors[name], (1 * t1 + 4 * up2.tensors[name]) / 5, atol=1e-7)
        assert torch.equal(messages[2].tensors[name], messages[1].tensors[name])
    only2 = set(up2.tensors) - set(up1.tensors)  # the open path's own components: client 2's alone
    assert only2 and all(torch.equal(messages[2].tensors[n], up2.tensors[n]) for n in only2)
    assert set(messages[1].tensors) == set(up1.tensors)  # a client gets the components it owns, no others
    assert server.metadata["owners"]["1"] == sorted(keys.path(YN))


# ------------------------------------------------------------------------------------------- what travels
def test_the_personal_copy_never_appears_in_an_upload(tap, after_round0):
    states, uploads, messages, _ = after_round0
    for c, up in uploads.items():
        fl, personal, _ = split_state(dict(states[c].tensors))
        sent = as_copy(dict(up.tensors))
        assert set(sent) == set(keys.paths([YN, OPEN]))
        assert all(torch.equal(sent[comp][k], fl[comp][k]) for comp in sent for k in sent[comp])
        floats = sum(t.numel() for t in up.tensors.values())
        assert up.num_bytes() == 4 * floats + len(json.dumps({"n": 2}))  # float32 tensors + {"n": n_i}
    # a personal copy pushed far away changes nothing that is sent
    fl, personal, memory = split_state(dict(states[1].tensors))
    moved = {f"{PERSONAL}/{comp}/{k}": v + 100.0 for comp, ts in personal.items() for k, v in ts.items()}
    shifted = State(tensors={**dict(states[1].tensors), **moved}, metadata=dict(states[1].metadata))
    a, _ = tap.client_update(_ctx(1, 1), states[1], messages[1], _batches(79))
    b, _ = tap.client_update(_ctx(1, 1), shifted, messages[1], _batches(79))
    assert a.num_bytes() == b.num_bytes() and all(torch.equal(a.tensors[k], b.tensors[k]) for k in a.tensors)
    tap.round_diagnostics(1)


def test_local_only_sends_nothing_and_fedavg_keeps_no_personal_copy(tap):
    local, fedavg = _sibling("tap-local", tap), _sibling("fedavg-post-train", tap)
    up, state = local.client_update(_ctx(1), local.init_client(_ctx(1)), None, _batches(3))
    assert up.num_bytes() == 2 and not split_state(dict(state.tensors))[0]  # '{}': no FL copy at all
    messages, _ = local.aggregate(0, local.init_server(), {1: up})
    assert messages[1].num_bytes() == 2
    up, state = fedavg.client_update(_ctx(1), fedavg.init_client(_ctx(1)), None, _batches(3))
    assert not split_state(dict(state.tensors))[1] and state.metadata["h_p"] == {}
    assert up.metadata == {"n": 2} and up.tensors


# ------------------------------------------------------------------------------------------- Stage 2
def test_distillation_term_is_zero_when_teacher_and_student_agree():
    z = torch.randn(5, 11)
    assert float(distill_loss(z, z, 1.0, 2)) == pytest.approx(0.0, abs=1e-6)
    assert float(distill_loss(z, z.flip(0), 2.0, 2)) > 0


def test_distillation_term_is_tau2_kl_teacher_to_student_by_hand():
    """Two classes, teacher logits (ln 3, 0), student (0, 0): p_T = (3/4, 1/4), p_S = (1/2, 1/2), so the term is
    KL(p_T || p_S) = 3/4 ln(3/2) + 1/4 ln(1/2) = 0.1308, not KL(p_S || p_T) = 0.1438. At tau = 2 the softmaxes
    read z / 2, the KL is multiplied by tau^2 = 4, summed over tokens and divided by the items."""
    student, teacher = torch.zeros(1, 2, dtype=torch.float64), torch.tensor([[math.log(3.0), 0.0]], dtype=torch.float64)
    forward = 0.75 * math.log(1.5) + 0.25 * math.log(0.5)
    reverse = 0.5 * math.log(0.5 / 0.75) + 0.5 * math.log(0.5 / 0.25)
    assert float(distill_loss(student, teacher, 1.0, 1)) == pytest.approx(forward, rel=1e-9)
    assert abs(forward - reverse) > 0.01
    p = math.sqrt(3.0) / (1.0 + math.sqrt(3.0))  # softmax((ln 3) / 2, 0)
    kl_tau2 = p * math.log(2 * p) + (1 - p) * math.log(2 * (1 - p))
    two_tokens = (student.repeat(2, 1), teacher.repeat(2, 1))
    assert float(distill_loss(*two_tokens, 2.0, 2)) == pytest.approx(4 * 2 * kl_tau2 / 2, rel=1e-9)
    assert float(distill_loss(*two_tokens, 2.0, 1)) == pytest.approx(4 * 2 * kl_tau2, rel=1e-9)


def test_stage2_step_is_task_loss_plus_beta_tau2_kl_of_the_post_trained_teacher_to_the_student(
    tap, after_round0, monkeypatch
):
    """The loss the student's first Stage 2 step minimises (read where it is backpropagated) is, recomputed here,
    CE_o + beta_o tau^2 KL(softmax(z_T / tau) || softmax(z_S / tau)) / n_o (paper eq. 5-6, one key per batch so
    lambda_o = 1), with z_T the logits of the final server components post-trained P steps at eta_0 on the same
    batches, z_S the personal copy's. beta = 50, tau = 0.5 and eta_0 = 0.03 (a teacher far enough from the student
    for the KL's asymmetry to show), so weight, direction and teacher each move the term far past the tolerance."""
    states, _, _, server = after_round0
    entries, images = remember([], {}, [_items(AnswerType.YES_NO, 4, 31)], 8)  # one key: one loss term a step
    state = State(tensors=dict(states[1].tensors), metadata={**states[1].metadata, "memory": entries})
    fed = tap.federation
    beta, tau = 50.0, 0.5
    method = _sibling("tap", tap, post_steps=2, beta_choice=beta, temperature=tau, initial_learning_rate=0.03)
    cfg = method.config
    totals: list[float] = []
    backward = torch.Tensor.backward

    def spy(self, *args, **kwargs):
        totals.append(float(self.detach()))
        return backward(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "backward", spy)
    method.post_federation(fed, {1: state}, server)
    monkeypatch.undo()
    assert len(totals) == 2 * cfg.post_steps  # the teacher's P steps, then the student's

    rng = np.random.default_rng([int(fed.seed), 1, SALT_STAGE2])
    batches = draw_batches(recall(entries, images), cfg.post_steps, fed.batch_size, rng)
    fl, personal, _ = split_state(dict(state.tensors))
    final = {
        **fl,
        **as_copy(
            aggregation.view_for(
                dict(server.tensors), server.metadata["owners"]["1"], method.shapes(1), method.arch[1], True
            )
        ),
    }
    teacher, _ = tap.clients.train_copy(1, final, batches, cfg.initial_learning_rate)
    z_t = tap.clients.teacher_logits(1, teacher, batches)[0][YN]
    z_final = tap.clients.teacher_logits(1, final, batches)[0][YN]
    tap.clients.load_copy(1, personal)
    model, processor = tap.clients.model(1), tap.clients.processor(1)
    model.train()
    activate(model, YN)
    try:
        with torch.no_grad():
            ce, z_s = answer_loss(model, processor, batches[0], with_logits=True, packed=cfg.packed_training)
    finally:
        rest(model)
    n = len(batches[0])

    def kl(p: torch.Tensor, q: torch.Tensor) -> float:  # KL(softmax(p / tau) || softmax(q / tau)), summed over tokens
        lp, lq = torch.log_softmax(p.double() / tau, -1), torch.log_softmax(q.double() / tau, -1)
        return float((lp.exp() * (lp - lq)).sum())

    got = totals[cfg.post_steps] - float(ce)  # the distillation part of the step's loss
    want = beta * tau**2 * kl(z_t, z_s) / n
    assert got == pytest.approx(want, rel=1e-4)
    wrong = {
        "beta ignored": tau**2 * kl(z_t, z_s) / n,
        "KL(student || teacher)": beta * tau**2 * kl(z_s, z_t) / n,
        "teacher not post-trained": beta * tau**2 * kl(z_final, z_s) / n,
    }
    for name, value in wrong.items():  # each slip would move the term well past the tolerance above
        assert abs(value - want) > 5e-3 * want, name


def test_stage2_with_beta_zero_is_plain_local_fine_tuning_of_the_personal_copy(tap, after_round0):
    """post_federation of TAP at beta = 0 against an independent loop: the same P batches from the client's memory,
    a fresh AdamW at eta_0 over the adapters, the engine's own answer-token loss, one key per batch, clipping."""
    from drake_bench.models import loss_on

    states, _, _, server = after_round0
    entries, images = remember([], {}, [_items(AnswerType.YES_NO, 4, 31)], 8)  # one key: one forward pass a step
    _, personal, _ = split_state(dict(states[1].tensors))
    state = State(tensors=dict(states[1].tensors), metadata={**states[1].metadata, "memory": entries})
    fed = tap.federation
    no_kd = _sibling("tap-no-kd", tap, post_steps=3)
    out = no_kd.post_federation(fed, {1: state}, server)[1]
    got = split_state(dict(out.tensors))[1]

    cfg = no_kd.config
    rng = np.random.default_rng([int(fed.seed), 1, SALT_STAGE2])
    batches = draw_batches(recall(entries, images), cfg.post_steps, fed.batch_size, rng)
    tap.clients.load_copy(1, personal)
    model, processor = tap.clients.model(1), tap.clients.processor(1)
    params = adapter_parameters(model)
    trainable(params)
    opt = torch.optim.AdamW([{"params": params, "lr": cfg.initial_learning_rate, "weight_decay": cfg.weight_decay}])
    model.train()
    activate(model, YN)
    for batch in batches:
        loss_on(model, processor, batch).backward()
        torch.nn.utils.clip_grad_norm_([p for p in params if p.grad is not None], cfg.max_grad_norm)
        opt.step()
        opt.zero_grad(set_to_none=True)
    rest(model)
    want = tap.clients.dump_copy(1, list(got))
    assert set(got) == set(personal)
    moved = False
    for comp in got:
        for k in got[comp]:
            assert torch.allclose(got[comp][k], want[comp][k], atol=1e-6), (comp, k)
            moved |= not torch.equal(got[comp][k], personal[comp][k])
    assert moved
    with_kd = _sibling("tap", tap, post_steps=3, beta_choice=50.0).post_federation(fed, {1: state}, server)[1]
    kd = split_state(dict(with_kd.tensors))[1]
    assert any(not torch.allclose(kd[c][k], got[c][k], atol=1e-6) for c in kd for k in kd[c])  # the term acts
    assert "stage2_teacher_loss" in with_kd.metadata and "stage2_teacher_loss" not in out.metadata


def test_segment_attention_option_reaches_the_pool(tap, tmp_path):
    """``segment_attention`` (default true) switches the pool's language model to per-item segment attention for
    packed steps; false keeps transformers' masked SDPA, as runs before it did."""
    from drake_bench.models.engine import packs
    from drake_bench.models.kernels import SEGMENT_ATTENTION

    assert tap.config.segment_attention is True and tap.clients.pool.segment_attention is True
    assert packs(tap.clients.model(1)) and tap.clients.model(1).config._attn_implementation == SEGMENT_ATTENTION
    off = create_method("tap", {"model_loader": "testing", "segment_attention": False})
    off.setup(_federation(tmp_path))
    assert off.clients.pool.segment_attention is False
    model = off.clients.model(1)
    assert packs(model) and model.config._attn_implementation == "sdpa"


# ------------------------------------------------------------------------------------------- the evaluator
@pytest.fixture(scope="module")
def toy_pair(toy_loader, tmp_path_factory) -> tuple[str, str]:
    """Two clients of one text-only yes/no task each on the tiny text Llama: the smallest federation the evaluator
    runs (a text benchmark: 10 components, no vision tower)."""
    from drake_bench.benchmarks.spec import ModelAllocation

    d = manifest_dict(toy_spec(n_clients=2, tasks_per_client=1, pool_size=6))
    d["modality"] = "text"
    for task in d["tasks"]:
        task.update(images="none", num_images=[0, 0])
    alloc = {"1": MODEL, "2": MODEL}
    d["model_allocations"] = {
        "pair": ModelAllocation(description="one model", source="test", clients=alloc).model_dump(mode="json")
    }
    d["default_allocation"] = "pair"
    return build_toy(d, "toy-pair", tmp_path_factory)


def _run(name: str, manifest: str, root: str, out: Path, rounds: int, **config):
    return run(
        RunConfig(
            benchmark=manifest,
            method=name,
            data_dir=root,
            out=str(out),
            rounds=rounds,
            local_steps=1,
            scenario="static",
            fast_adaptation=False,
            others_subsample=1,
            self_subsample=2,
            isolation="inline",
            method_config={"model_loader": "testing", **config},
        )
    )


def test_tap_through_the_evaluator_records_stage2_time_and_replacements(toy_pair, tmp_path):
    manifest, root = toy_pair
    res = _run("tap", manifest, root, tmp_path / "tap", rounds=2, post_steps=1, memory_items=4)
    assert check_result(res) == [] and res.status == "complete"
    (post,) = res.raw.post_federation_costs
    assert post.seed == 0 and post.post_federation_seconds > 0
    assert res.summary.per_seed[0].post_federation_seconds == post.post_federation_seconds
    counts = replacement_counts(res)
    assert counts[("text/yes_no", 1)] == 2  # round 1: both clients' first round with their key
    assert sum(v for (_, r), v in counts.items() if r == 2) <= 2
    fig = plot_replacements([res], tmp_path / "curve.png")
    assert (tmp_path / "curve.png").stat().st_size > 0 and fig.axes
    # measured bytes: the upload is exactly the FL components the server sends back, plus {"n": n_i}; the
    # server's reply carries no metadata ('{}', 2 bytes); the personal copy adds nothing
    for cost in res.raw.costs:
        assert cost.uplink_bytes - len(json.dumps({"n": 2})) == cost.downlink_bytes - 2 > 0


def test_post_federation_seconds_summarise_per_seed_and_are_absent_without_the_stage():
    score = ScoreRecord(seed=0, eval_round=1, client=1, task="t", owner=1, role="self", n=1, score=1.0)
    with_stage = seed_summary(
        0,
        [score],
        post_federation_costs=[
            PostFederationCostRecord(seed=0, post_federation_seconds=2.5),
            PostFederationCostRecord(seed=1, post_federation_seconds=9.0),
        ],
    )
    assert with_stage.post_federation_seconds == 2.5
    assert seed_summary(0, [score]).post_federation_seconds is None


def test_the_method_page_lists_every_option_and_every_entry_is_registered():
    page = (Path(__file__).resolve().parents[1] / "docs" / "methods" / "tap.md").read_text()
    for cls in ENTRIES.values():
        assert f"`{cls.meta.name}`" in page
        for field in cls.Config.model_fields:
            assert f"| `{field}` |" in page, f"docs/methods/tap.md does not list {cls.meta.name}'s option {field}"
    assert set(ENTRIES) <= set(available_methods())
