"""evaluate_client scores a researcher's own model as the evaluator does; RoundBatches is a Sequence (issue #61).

* The same predictions give the evaluator's own Self / Others cells and per-client numbers: the model-free
  ``majority-answer`` plugin's states from a run's checkpoint, and a stateless plugin at every evaluation point
  (dynamic: the seen tasks grow; Dirichlet: owners' shares), both on drake-synth at full scale (the
  Others cap then subsamples: 2 or 3 items per Others task; Self scores every one of a task's 50 test items).
* ``predict_fn`` gets queries without answers, task identities or invertible uids.
* Bad arguments are refused by name, before any data is read where possible.
* ``RoundBatches``: indexing, negative indices, slices and IndexError, equal bit for bit to iteration.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Sequence

import numpy as np
import pytest
from pydantic import BaseModel

from drake_bench import (
    LeakageError,
    MethodSample,
    RunConfig,
    ScenarioError,
    UnknownNameError,
    evaluate_client,
    load_client_stream,
    load_federated_data,
    run,
)
from drake_bench.evaluation.cells import evaluation_limits, plan_cells
from drake_bench.evaluation.standalone import ClientEvaluation
from drake_bench.evaluator import checkpoint
from drake_bench.plugins.examples.majority import MajorityAnswer
from drake_bench.plugins.protocol import Message, MethodMeta, State
from drake_bench.plugins.registry import register_method

TINY = dict(rounds=4, local_steps=2)
# the evaluator runs here are inline (faster); numerics are not what these tests compare
pytestmark = pytest.mark.filterwarnings("ignore:numerics 'portable' was asked for:RuntimeWarning")


def echo_answer(q: MethodSample) -> str:
    """A deterministic answer from the query alone (so no state is needed to repeat a run's predictions)."""
    key = zlib.crc32(q.question.encode())
    return q.choices[key % len(q.choices)] if q.choices else q.question.split()[key % len(q.question.split())]


class QueryEcho:
    meta = MethodMeta(name="query-echo", version="1.0", summary="Answers from the query's own text (tests).")

    class Config(BaseModel):
        pass

    def __init__(self, config=None):
        self.config = config or self.Config()

    def setup(self, federation):
        pass

    def init_client(self, ctx):
        return State()

    def init_server(self):
        return State()

    def client_update(self, ctx, state, message, batches):
        return Message(), state

    def aggregate(self, round_idx, server_state, uploads):
        return {c: Message() for c in uploads}, server_state

    def predict(self, ctx, state, queries):
        return [echo_answer(q) for q in queries]


register_method(QueryEcho)


def _run(tmp_path, method, **kw):
    cfg = RunConfig(
        benchmark="drake-synth",
        method=method,
        seeds=[0],
        fast_adaptation=False,
        isolation="inline",
        out=str(tmp_path),
        **{**TINY, **kw},
    )
    return cfg, run(cfg)


def _rows(res, client, eval_round):
    return [r for r in res.raw.scores if r.client == client and r.eval_round == eval_round]


def test_standalone_scores_equal_the_evaluators_for_majority_answer(tmp_path):
    """The plugin's final states from the run's checkpoint, used as predict_fn: every client's cells and Self /
    Others equal the run's, and their means are the board's Self / Others of the last point."""
    cfg, res = _run(tmp_path, "majority-answer", others_subsample=2)
    prog = checkpoint.load(tmp_path / "checkpoints" / "drake-synth" / "dynamic" / "majority-answer" / "seed-0")
    assert prog is not None and prog.completed_rounds == 4
    plugin = MajorityAnswer()
    fed = load_federated_data("drake-synth", **TINY)
    per_seed = res.summary.per_seed[0]
    by_client = {c.client: c for c in per_seed.per_client}
    scores: list[ClientEvaluation] = []
    for c in fed.clients:
        got = evaluate_client(fed, c, lambda qs, c=c: plugin.predict(None, prog.clients[c], qs), others_subsample=2)
        assert got.cells == _rows(res, c, 4) and got.cells
        assert (got.self_score, got.others_score) == (by_client[c].self_last, by_client[c].others_last)
        assert {r.n for r in got.cells if r.role == "others"} == {2}
        assert all(r.n == fed.store.size(r.task, "test") for r in got.cells if r.role == "self")  # every test item
        scores.append(got)
    assert np.mean([s.self_score for s in scores]) == pytest.approx(per_seed.self_last, abs=1e-15)
    assert np.mean([s.others_score for s in scores]) == pytest.approx(per_seed.others_last, abs=1e-15)
    # opened from the benchmark name with the stream's arguments: the same numbers
    again = evaluate_client(
        "drake-synth", 2, lambda qs: plugin.predict(None, prog.clients[2], qs), others_subsample=2, **TINY
    )
    assert again == scores[1]
    s = again.settings
    assert (s.benchmark, s.scenario, s.seed, s.rounds, s.local_steps, s.round_idx, s.eval_round) == (
        "drake-synth",
        "dynamic",
        0,
        4,
        2,
        3,
        4,
    )
    assert (s.self_subsample, s.others_subsample) == (None, 2)  # drake-synth >= 1.9.0 scores Self on every item
    assert (s.manifest_hash, s.data_hash) == (res.benchmark.manifest_hash, res.benchmark.data_hash)


@pytest.mark.parametrize(
    "scenario, caps", [("dynamic", {}), ("dirichlet:0.5", {"self_subsample": 5, "others_subsample": 3})]
)
def test_every_evaluation_point_and_owner_share_matches(tmp_path, scenario, caps):
    """A stateless plugin evaluated after every round: at each point, each client's standalone cells equal the
    run's (dynamic: only the tasks seen by then; Dirichlet: each owner's share of a task)."""
    _, res = _run(tmp_path, "query-echo", scenario=scenario, eval_every_rounds=1, **caps)
    fed = load_federated_data("drake-synth", scenario, **TINY)
    assert sorted({r.eval_round for r in res.raw.scores}) == [1, 2, 3, 4]
    for r in range(4):
        for c in fed.clients:
            got = evaluate_client(fed, c, lambda qs: [echo_answer(q) for q in qs], round_idx=r, **caps)
            assert got.cells == _rows(res, c, r + 1), (scenario, r, c)
    if scenario == "dynamic":  # the first point scores the first task of each client only
        first = evaluate_client(fed, 1, lambda qs: [echo_answer(q) for q in qs], round_idx=0)
        assert [(x.owner, x.task) for x in first.cells if x.role == "self"] == [(1, fed.client_tasks(1)[0])]


def test_others_off_and_caps(tmp_path):
    fed = load_federated_data("drake-synth", **TINY)
    answer = lambda qs: [echo_answer(q) for q in qs]  # noqa: E731
    full = evaluate_client(fed, 4, answer)
    alone = evaluate_client(fed, 4, answer, others=False)
    zero = evaluate_client(fed, 4, answer, others_subsample=0)
    assert alone.others_score is None and {c.role for c in alone.cells} == {"self"}
    assert alone.cells == [c for c in full.cells if c.role == "self"] == zero.cells
    assert alone.self_score == full.self_score and alone.settings.others_subsample == 0
    capped = evaluate_client(fed, 4, answer, self_subsample=7, others_subsample=1)
    assert {(c.role, c.n) for c in capped.cells} == {("self", 7), ("others", 1)}
    assert full.settings.others_subsample == 4 and full.settings.self_subsample is None  # the manifest's
    # the plan is the evaluator's: one cell per (owner, seen task), owners by id, Self at the client's own place
    limits = evaluation_limits(fed.spec)
    planned = plan_cells(fed, 3, *limits, clients=[4])
    assert [(c.owner, c.task, c.role, len(c.samples)) for c in planned] == [
        (c.owner, c.task, c.role, c.n) for c in full.cells
    ]


def test_predict_fn_never_reaches_answers_or_task_identities():
    fed = load_federated_data("drake-synth", **TINY)
    seen: list[list[MethodSample]] = []

    def spy(queries):
        seen.append(list(queries))
        return ["" for _ in queries]

    evaluate_client(fed, 2, spy)
    queries = [q for call in seen for q in call]
    assert queries and all(type(q) is MethodSample for q in queries)
    assert all(q.answer == "" for q in queries)
    for name in ("task_id", "source", "meta", "id"):
        with pytest.raises(LeakageError):
            getattr(queries[0], name)
    # the uids are keyed with a secret drawn per call: not the public hash of an item id, and new on every call
    items = [s for cell in plan_cells(fed, 3, *evaluation_limits(fed.spec), clients=[2]) for s in cell.samples]
    assert len(items) == len(queries)
    public = {s.for_method().uid for s in items} | {hashlib.sha1(s.id.encode()).hexdigest()[:16] for s in items}
    assert not public & {q.uid for q in queries}
    first = [q.uid for q in queries]
    seen.clear()
    evaluate_client(fed, 2, spy)
    assert [q.uid for call in seen for q in call] != first
    assert [q.question for call in seen for q in call] == [q.question for q in queries]  # the same items


def test_bad_arguments_are_refused_by_name(tmp_path):
    answer = lambda qs: ["yes"] * len(qs)  # noqa: E731
    with pytest.raises(UnknownNameError, match="client 99"):
        evaluate_client("drake-synth", 99, answer)
    for bad in ("1", True, 1.0):
        with pytest.raises(ScenarioError, match="client must be an int"):
            evaluate_client("drake-synth", bad, answer)
    fed = load_federated_data("drake-synth", **TINY)
    for bad in (4, -1, "3", True, 2.0):
        with pytest.raises(ScenarioError, match=r"round_idx must be an int in 0\.\.3"):
            evaluate_client(fed, 1, answer, round_idx=bad)
    with pytest.raises(ScenarioError, match="self_subsample"):
        evaluate_client(fed, 1, answer, self_subsample=0)
    with pytest.raises(ScenarioError, match="others_subsample"):
        evaluate_client(fed, 1, answer, others_subsample=-1)
    with pytest.raises(ScenarioError, match="others must be True or False"):
        evaluate_client(fed, 1, answer, others="no")
    with pytest.raises(ScenarioError, match="FederatedData.*scenario, rounds"):
        evaluate_client(fed, 1, answer, scenario="static", rounds=4)
    with pytest.raises(ScenarioError, match="and also seed"):
        evaluate_client(fed, 1, answer, seed=1)
    assert evaluate_client(fed, 1, answer, seed=0, others=False).settings.seed == 0  # its own seed may be repeated
    with pytest.raises(ScenarioError, match="rounds must be a positive integer"):
        evaluate_client("drake-synth", 1, answer, rounds=0)
    with pytest.raises(TypeError, match="predict_fn must be callable"):
        evaluate_client(fed, 1, None)
    with pytest.raises(TypeError, match=r"predict_fn must return a list of 50 strings.*got 49 items.*client 1, self"):
        evaluate_client(fed, 1, lambda qs: ["yes"] * (len(qs) - 1))
    with pytest.raises(TypeError, match="predict_fn must return a list of 50 strings.*got str"):
        evaluate_client(fed, 1, lambda qs: "yes")
    with pytest.raises(TypeError, match="predict_fn must return.*got a int at position 0"):
        evaluate_client(fed, 1, lambda qs: [0] * len(qs))


# --------------------------------------------------------------------------- RoundBatches as a Sequence
def _key(batch):
    """Everything an item carries, images as their pixels: equal keys are the same batch bit for bit."""
    return [
        (
            s.uid,
            s.question,
            tuple(s.choices),
            s.answer,
            s.answer_type,
            tuple((im.mode, im.size, im.tobytes()) for im in s.images),
        )
        for s in batch
    ]


def test_round_batches_is_a_sequence_equal_to_iteration(toy_built):
    spec, root = toy_built
    stream = load_client_stream(spec, 2, data_dir=root, local_steps=5, batch_size=3)
    fed = load_federated_data(spec, data_dir=root, local_steps=5, batch_size=3)
    for r, batches in stream.rounds():
        assert isinstance(batches, Sequence) and len(batches) == 5
        iterated = [_key(b) for b in batches]
        indexed = [_key(batches[k]) for k in range(len(batches))]
        assert iterated == indexed
        assert [_key(batches[k]) for k in range(-5, 0)] == iterated  # negative indices count from the end
        assert [_key(b) for b in batches[1:4]] == iterated[1:4] and [_key(b) for b in batches[::-2]] == iterated[::-2]
        assert batches[7:] == [] and [_key(b) for b in reversed(batches)] == iterated[::-1]
        assert [_key(b) for b in stream.round(r)] == iterated  # a fresh handle on the round draws the same batches
        # the evaluator's side of the same stream
        assert [_key([s.for_method() for s in b]) for b in fed.round_samples(2, r)] == iterated
    batches = stream.round(3)
    assert _key(batches[4]) == _key(list(batches)[4])  # one step alone, out of order, gives the same items
    for bad in (5, -6, 100):
        with pytest.raises(IndexError, match="outside a round of 5 local steps"):
            batches[bad]
    for bad in ("0", 1.0, True, None):
        with pytest.raises(TypeError, match="indices must be ints or slices"):
            batches[bad]
    assert batches[np.int64(2)] == batches[2]
    assert batches[1] in batches and batches.index(batches[4]) <= 4
    assert repr(batches) == "RoundBatches(client=2, round=3, steps=5)"


def test_own_model_page_runs_under_the_docs_tests():
    """docs/own-model.md's examples are run by tests/test_docs.py (none of them is marked no-test)."""
    from test_docs import DOCS, RUNNABLE, python_blocks

    blocks = python_blocks(DOCS / "own-model.md")
    assert len(blocks) >= 3 and all(runs for _, _, runs in blocks)
    assert "docs/own-model.md" in RUNNABLE
    assert any("evaluate_client(" in code for _, code in RUNNABLE["docs/own-model.md"])
