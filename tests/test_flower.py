"""The Flower backend (drake_bench.backends.flower) and partial participation.

One small federation (the 4-client toy benchmark with the random tiny testing models, 2 rounds of 2 steps) runs
once under the default backend per method; the Flower simulation runs SFT, FedIT (3 of the 4 clients drawn per
round) and FedMosaic in one Ray start and must give the same result files but for execution fields
(results.comparable); so must a model-free method whose rows about each client's update are asked on the client's
node (ReportsClientDiagnostics). The localhost SuperLink and SuperNodes: tests/test_flower_deployment.py.
"""

from __future__ import annotations

import pytest
from conftest import torch_threads
from minimal_method import ClientDiagnosing, Counter

from drake_bench.evaluator.standard import RunConfig, run, run_on_flower, sample_participants
from drake_bench.plugins.registry import register_method
from drake_bench.results.result_file import PREDICT_CALLS_KEY, check_result, comparable_differences

pytest.importorskip("flwr")

pytestmark = pytest.mark.usefixtures("one_torch_thread")

METHODS = ("sft", "fedit", "fedmosaic", "client-diagnosing")
MODEL_FREE = {"client-diagnosing"}
register_method(ClientDiagnosing)
DRAWN = {"fedit": 3}
SMALL = {
    "fedmosaic": {"public_size": 16, "alignment_audit_size": 4}
}  # its alignment on 16 public items, not 500  # FedIT draws 3 of the 4 clients per round: partial participation under both backends


def small(toy_mixed, out, method: str, **extra) -> RunConfig:
    """The tested configuration: seconds per method on two cores."""
    manifest, root = toy_mixed
    config = {} if method in MODEL_FREE else {"model_loader": "testing", **SMALL.get(method, {})}
    return RunConfig(
        benchmark=manifest,
        method=method,
        method_config=config,
        data_dir=root,
        out=str(out),
        rounds=2,
        local_steps=2,
        eval_every_rounds=2,
        others_subsample=2,
        self_subsample=4,
        fast_adaptation=False,
        numerics="native",
        **extra,
    )  # the inline reference computes in
    # this test process, whose kernels started long ago, so only native numerics are the same on both sides


def test_participants_are_a_seeded_draw_of_the_asked_size():
    clients = [1, 2, 3, 4, 5]
    assert sample_participants(clients, 0, 3) == clients
    drawn = [sample_participants(clients, 0, r, count=2) for r in range(6)]
    assert all(len(d) == 2 and d == sorted(d) and set(d) <= set(clients) for d in drawn)
    assert drawn == [sample_participants(clients, 0, r, count=2) for r in range(6)]  # same seed, same draw
    assert len({tuple(d) for d in drawn}) > 1  # rounds draw differently
    assert len(sample_participants(clients, 0, 0, fraction=0.5)) == 3  # ceil(0.5 x 5)
    assert len(sample_participants(clients, 0, 0, fraction=0.01)) == 1  # at least one
    with pytest.raises(ValueError, match="not both"):
        RunConfig(participation=0.5, clients_per_round=2)
    with pytest.raises(ValueError, match="round_timeout only apply to backend='flower'"):
        RunConfig(round_timeout=5)


def test_partial_participation_records_who_trained_and_still_scores_everyone(toy_mixed, tmp_path):
    register_method(Counter, name="counter")  # model-free: the bookkeeping is under test
    manifest, root = toy_mixed
    res = run(
        RunConfig(
            benchmark=manifest,
            method="counter",
            data_dir=root,
            out=str(tmp_path),
            rounds=2,
            local_steps=2,
            clients_per_round=2,
            fast_adaptation=False,
        )
    )
    assert check_result(res) == []
    clients = {1, 2, 3, 4}
    for r in (1, 2):
        trained = {c.client for c in res.raw.costs if c.round == r}
        absent = {a.client for a in res.raw.absences if a.round == r}
        assert len(trained) == 2 and trained | absent == clients and not trained & absent
        assert trained == set(sample_participants(sorted(clients), 0, r - 1, count=2))
        assert {a.reason for a in res.raw.absences if a.round == r} == {"not sampled"}
    assert {s.client for s in res.raw.scores if s.eval_round == 2 and s.role == "self"} == clients
    # an absence is part of the record: dropping one leaves a (round, client) unaccounted for
    dropped = res.model_copy(update={"raw": res.raw.model_copy(update={"absences": res.raw.absences[1:]})})
    assert any("no cost record for (round, client)" in p for p in check_result(dropped))


@pytest.fixture(scope="module")
def reference(toy_mixed, tmp_path_factory):
    """The default backend's result of each tested method (computed once per test process). Set up before the
    function-scoped one_torch_thread, so it sets the same single thread itself: float reductions depend on it."""
    out = tmp_path_factory.mktemp("default")
    with torch_threads(1):  # inline: the same numbers as process isolation (the Flower side keeps the process)
        return {m: run(small(toy_mixed, out, m, clients_per_round=DRAWN.get(m), isolation="inline")) for m in METHODS}


@pytest.mark.slow
def test_flower_simulation_reproduces_the_default_backend(toy_mixed, tmp_path, reference):
    # one ClientApp at a time: each Ray actor sets every method up once (FedMosaic aligns its models in setup)
    # the model-free method is asked once per client and evaluation point (--predict-per-client): the evaluator sends
    # each client one group through Flower's calls, and its cells must come back as the grouped calls scored them
    configs = [
        small(
            toy_mixed,
            tmp_path,
            m,
            backend="flower",
            flower_workers=1,
            clients_per_round=DRAWN.get(m),
            predict_per_client=m in MODEL_FREE,
        )
        for m in METHODS
    ]
    results = run_on_flower(configs)
    for m, res in zip(METHODS, results):
        assert check_result(res) == []
        assert res.fl.extra["run_config"]["backend"] == "flower"
        differences = comparable_differences(res, reference[m])
        if m in MODEL_FREE:
            assert res.evaluation.extra[PREDICT_CALLS_KEY] == "one per client"
            assert [(s.seed, s.eval_round, s.client, s.owner, s.task, s.n, s.score) for s in res.raw.scores] == [
                (s.seed, s.eval_round, s.client, s.owner, s.task, s.n, s.score) for s in reference[m].raw.scores
            ]
            assert differences and all("predict" in d or "fingerprint" in d for d in differences), differences
        else:
            assert differences == [], m
        assert res.raw.costs and all(c.train_seconds > 0 for c in res.raw.costs)
    assert len(results[3].raw.diagnostics) == 2 * 4  # a row per client and round, from the nodes
    assert len(results[1].raw.absences) == 2 and {a.reason for a in results[1].raw.absences} == {"not sampled"}
