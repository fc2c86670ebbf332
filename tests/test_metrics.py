"""Metrics over raw score tables, checked against values computed by hand (see the comments)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from drake_bench.evaluation.metrics import (
    AdaptationRecord,
    CostRecord,
    MetricError,
    RawTables,
    ScoreRecord,
    adaptation_curves,
    cost_summary,
    forgetting,
    mean_std,
    seed_summary,
    summarize,
)

# clients 0, 1, 2 own tasks: 0 -> t0a, t0b; 1 -> t1a, t1b; 2 -> t2a
OWNER = {"t0a": 0, "t0b": 0, "t1a": 1, "t1b": 1, "t2a": 2}


def rec(seed: int, rnd: int, client: int, task: str, score: float, n: int = 10) -> ScoreRecord:
    if task.startswith("u"):
        owner, role = None, "unseen"
    else:
        owner = OWNER[task]
        role = "self" if owner == client else "others"
    return ScoreRecord(seed=seed, eval_round=rnd, client=client, task=task, owner=owner, role=role, n=n, score=score)


# seed 0: PFL-Dynamic, evaluation after rounds 2 and 4; at round 2 only the first task of each client is seen.
SEED0 = [
    # round 2 -- Self: c0 .6, c1 .8, c2 .4 -> .6 ; Others: c0 (.2+.1)/2=.15, c1 (.3+.5)/2=.4, c2 (0+.4)/2=.2 -> .25
    rec(0, 2, 0, "t0a", 0.6),
    rec(0, 2, 1, "t1a", 0.8),
    rec(0, 2, 2, "t2a", 0.4),
    rec(0, 2, 0, "t1a", 0.2),
    rec(0, 2, 0, "t2a", 0.1),
    rec(0, 2, 1, "t0a", 0.3),
    rec(0, 2, 1, "t2a", 0.5),
    rec(0, 2, 2, "t0a", 0.0),
    rec(0, 2, 2, "t1a", 0.4),
    # round 4 -- Self: c0 (.5+.9)/2=.7, c1 (.8+.4)/2=.6, c2 .3 -> 1.6/3
    rec(0, 4, 0, "t0a", 0.5),
    rec(0, 4, 0, "t0b", 0.9),
    rec(0, 4, 1, "t1a", 0.8),
    rec(0, 4, 1, "t1b", 0.4),
    rec(0, 4, 2, "t2a", 0.3),
    # Others: c0: j1 (.2+.4)/2=.3, j2 .9 -> .6 (a flat mean would give .5); c1: j0 (.1+.3)/2=.2, j2 .5 -> .35;
    #         c2: j0 (.2+.2)/2=.2, j1 (.6+0)/2=.3 -> .25 ; Others = 1.2/3 = .4
    rec(0, 4, 0, "t1a", 0.2),
    rec(0, 4, 0, "t1b", 0.4),
    rec(0, 4, 0, "t2a", 0.9),
    rec(0, 4, 1, "t0a", 0.1),
    rec(0, 4, 1, "t0b", 0.3),
    rec(0, 4, 1, "t2a", 0.5),
    rec(0, 4, 2, "t0a", 0.2),
    rec(0, 4, 2, "t0b", 0.2),
    rec(0, 4, 2, "t1a", 0.6),
    rec(0, 4, 2, "t1b", 0.0),
    # unseen at round 4: c0 (.2+.4)/2=.3, c1 .5 -> .4
    rec(0, 4, 0, "u1", 0.2),
    rec(0, 4, 0, "u2", 0.4),
    rec(0, 4, 1, "u1", 0.5),
]
# seed 1: one evaluation point, Self only: c0 .9, c1 .5, c2 .4 -> .6
SEED1 = [
    rec(1, 4, 0, "t0a", 0.9),
    rec(1, 4, 0, "t0b", 0.9),
    rec(1, 4, 1, "t1a", 0.5),
    rec(1, 4, 1, "t1b", 0.5),
    rec(1, 4, 2, "t2a", 0.4),
]
COSTS = [
    CostRecord(
        seed=0, round=1, client=0, uplink_bytes=100, downlink_bytes=200, train_seconds=1.0, peak_memory_bytes=1000
    ),
    CostRecord(
        seed=0, round=1, client=1, uplink_bytes=100, downlink_bytes=200, train_seconds=2.0, peak_memory_bytes=3000
    ),
    CostRecord(seed=0, round=2, client=0, uplink_bytes=50, downlink_bytes=0, train_seconds=1.5, peak_memory_bytes=2000),
    CostRecord(seed=1, round=1, client=0, uplink_bytes=10, downlink_bytes=20, train_seconds=0.5, peak_memory_bytes=10),
]


def test_seed_summary_self_others_auc_last() -> None:
    s = seed_summary(0, SEED0 + SEED1, COSTS)
    assert s.eval_rounds == [2, 4]
    assert s.self_curve == pytest.approx([0.6, 1.6 / 3])
    assert s.others_curve == pytest.approx([0.25, 0.4])
    assert s.self_last == pytest.approx(1.6 / 3)
    assert s.self_auc == pytest.approx((0.6 + 1.6 / 3) / 2)
    assert s.others_last == pytest.approx(0.4)
    assert s.others_auc == pytest.approx(0.325)
    assert s.unseen_curve[0] is None
    assert s.unseen_last == pytest.approx(0.4)
    assert s.unseen_auc == pytest.approx(0.4)


def test_worst_and_percentile_client() -> None:
    s = seed_summary(0, SEED0)
    assert s.worst_client == 2
    assert s.worst_client_self == pytest.approx(0.3)
    # sorted [.3, .6, .7]; linear percentile 10: position 0.1 * 2 = 0.2 -> .3 + 0.2 * (.6 - .3) = .36
    assert s.p10_client_self == pytest.approx(0.36)


def test_per_client_table() -> None:
    s = seed_summary(0, SEED0)
    pc = {c.client: c for c in s.per_client}
    assert set(pc) == {0, 1, 2}
    assert pc[0].self_last == pytest.approx(0.7)
    assert pc[0].self_auc == pytest.approx((0.6 + 0.7) / 2)
    assert pc[0].others_last == pytest.approx(0.6)
    assert pc[0].others_auc == pytest.approx((0.15 + 0.6) / 2)
    assert pc[2].self_last == pytest.approx(0.3)
    assert pc[1].others_auc == pytest.approx((0.4 + 0.35) / 2)


def test_forgetting() -> None:
    # c0/t0a: .6 -> .5 = .1 (t0b seen once: excluded); c1/t1a: .8 -> .8 = 0; c2/t2a: .4 -> .3 = .1
    mean, per_client = forgetting(SEED0)
    assert per_client == pytest.approx({0: 0.1, 1: 0.0, 2: 0.1})
    assert mean == pytest.approx(0.2 / 3)
    assert seed_summary(0, SEED0).forgetting == pytest.approx(0.2 / 3)


def test_forgetting_uses_max_over_earlier_points_and_can_be_negative() -> None:
    recs = [rec(0, r, 0, "t0a", s) for r, s in [(1, 0.2), (2, 0.9), (3, 0.5), (4, 0.6)]]
    recs += [rec(0, r, 1, "t1a", s) for r, s in [(1, 0.2), (2, 0.7)]]
    mean, per_client = forgetting(recs)
    assert per_client == pytest.approx({0: 0.9 - 0.6, 1: 0.2 - 0.7})
    assert mean == pytest.approx((0.3 - 0.5) / 2)
    assert forgetting(SEED1) == (None, {})  # one evaluation point: nothing to forget


def test_costs() -> None:
    c = cost_summary([x for x in COSTS if x.seed == 0])
    assert c == {
        "rounds": 2,
        "uplink_bytes_total": 250,
        "downlink_bytes_total": 400,
        "uplink_bytes_per_round": 125.0,
        "downlink_bytes_per_round": 200.0,
        "train_seconds_total": 4.5,
        "train_seconds_per_round": 2.25,
        "peak_memory_bytes": 3000,
        # records without element counts (result files from before they were recorded) give no element summary
        "uplink_elements_per_round": None,
        "downlink_elements_per_round": None,
        "wire_dtypes": None,
    }
    assert cost_summary([])["uplink_bytes_per_round"] is None


def test_elements_per_round_sum_dtypes_and_need_every_record() -> None:
    counted = [
        x.model_copy(update={"uplink_elements": {"bfloat16": 10, "float32": 5}, "downlink_elements": {"float32": 7}})
        for x in COSTS
        if x.seed == 0
    ]
    c = cost_summary(counted)
    assert c["uplink_elements_per_round"] == 3 * 15 / 2 and c["downlink_elements_per_round"] == 3 * 7 / 2
    assert c["wire_dtypes"] == ["bfloat16", "float32"]
    # one record from before elements were counted (a resumed checkpoint): no partial sum passes for the whole
    assert cost_summary(counted[:2] + [COSTS[2]])["uplink_elements_per_round"] is None


def test_mean_std_is_population_std() -> None:
    ms = mean_std([0.5, 0.7, 0.9])
    assert ms.mean == pytest.approx(0.7)
    assert ms.std == pytest.approx((0.08 / 3) ** 0.5)  # ddof=0; ddof=1 would be 0.2
    assert ms.n == 3
    assert mean_std([None, 0.4]).model_dump() == {"mean": 0.4, "std": 0.0, "n": 1}
    assert mean_std([]).mean is None


def test_summarize_over_seeds() -> None:
    raw = RawTables(scores=SEED0 + SEED1, costs=COSTS)
    summ = summarize(raw)
    assert [s.seed for s in summ.per_seed] == [0, 1]
    agg = summ.aggregate
    # Self A_last: seed 0 1.6/3, seed 1 .6 -> mean .5667, population std |.6 - .5333| / 2
    assert agg.self_last.mean == pytest.approx((1.6 / 3 + 0.6) / 2)
    assert agg.self_last.std == pytest.approx((0.6 - 1.6 / 3) / 2)
    assert agg.self_last.n == 2
    assert agg.others_last.n == 1 and agg.others_last.mean == pytest.approx(0.4)
    assert agg.uplink_bytes_total.mean == pytest.approx(130.0)
    assert agg.uplink_bytes_total.std == pytest.approx(120.0)
    # curve over seeds: round 2 only seed 0; round 4 both seeds
    assert [(p.x, p.n) for p in summ.self_curve] == [(2, 1), (4, 2)]
    assert summ.self_curve[1].mean == pytest.approx((1.6 / 3 + 0.6) / 2)
    assert summ.self_curve[0].std == 0.0
    assert "ddof=0" in summ.conventions["seeds"]


def test_summarize_keeps_requested_seed_order_and_empty_seeds() -> None:
    summ = summarize(RawTables(scores=SEED1), seeds=[1, 2])
    assert [s.seed for s in summ.per_seed] == [1, 2]
    assert summ.per_seed[1].self_last is None
    assert summ.aggregate.self_last.n == 1


def test_adaptation_curves() -> None:
    def a(seed: int, task: str, arch: str, init: str, it: int, score: float) -> AdaptationRecord:
        return AdaptationRecord(seed=seed, task=task, arch=arch, init=init, iteration=it, score=score)

    recs = [
        # seed 0, method: it0 mean(.1,.3,.2)=.2 ; it20 mean(.5,.7,.6)=.6
        a(0, "u1", "llama", "method", 0, 0.1),
        a(0, "u1", "qwen", "method", 0, 0.3),
        a(0, "u2", "llama", "method", 0, 0.2),
        a(0, "u1", "llama", "method", 20, 0.5),
        a(0, "u1", "qwen", "method", 20, 0.7),
        a(0, "u2", "llama", "method", 20, 0.6),
        # seed 1, method: it0 .4 ; it20 .6
        a(1, "u1", "llama", "method", 0, 0.4),
        a(1, "u1", "llama", "method", 20, 0.6),
        a(0, "u1", "llama", "fresh", 0, 0.0),
    ]
    curves = adaptation_curves(recs)
    assert sorted(curves) == ["fresh", "method"]
    m = curves["method"]
    assert [p.x for p in m] == [0, 20]
    assert m[0].mean == pytest.approx(0.3) and m[0].std == pytest.approx(0.1)
    assert m[1].mean == pytest.approx(0.6) and m[1].std == pytest.approx(0.0)
    assert curves["fresh"][0].mean == 0.0 and curves["fresh"][0].n == 1
    with pytest.raises(MetricError, match="duplicate adaptation"):
        adaptation_curves(recs + [recs[0]])


def test_duplicate_score_records_rejected() -> None:
    with pytest.raises(MetricError, match="client 0, task 't0a'"):
        seed_summary(0, SEED0 + [rec(0, 2, 0, "t0a", 0.1)])


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(owner=1, role="self"),  # self must own the task
        dict(owner=0, role="others"),  # others must not
        dict(owner=None, role="others"),
        dict(owner=1, role="unseen"),
        dict(owner=0, role="self", score=1.5),
        dict(owner=0, role="self", eval_round=0),  # rounds are 1-based
        dict(owner=0, role="self", extra_field=1),
    ],
)
def test_score_record_validation(kwargs: dict) -> None:
    base = dict(seed=0, eval_round=1, client=0, task="t", n=5, score=0.5)
    with pytest.raises(ValidationError):
        ScoreRecord(**{**base, **kwargs})


def test_exact_match_is_logged_but_does_not_change_the_summary() -> None:
    with_em = [r.model_copy(update={"exact_match": 0.0}) for r in SEED0]
    assert seed_summary(0, with_em) == seed_summary(0, SEED0)
    with pytest.raises(ValidationError):
        ScoreRecord(seed=0, eval_round=1, client=0, task="t", owner=0, role="self", n=1, score=0.5, exact_match=2.0)


def test_dirichlet_tasks_shared_by_owners_are_not_duplicates() -> None:
    """Under Dirichlet several clients own shares of one task: one row per (client, task, owner)."""
    from drake_bench.evaluation.metrics import RawTables, summarize

    def row(client: int, owner: int, score: float) -> ScoreRecord:
        return ScoreRecord(
            seed=0,
            eval_round=1,
            client=client,
            task="shared",
            owner=owner,
            role="self" if client == owner else "others",
            n=4,
            score=score,
        )

    summary = summarize(RawTables(scores=[row(1, 1, 1.0), row(1, 2, 0.0), row(2, 2, 1.0), row(2, 1, 0.0)]))
    assert summary.aggregate.self_last.mean == 1.0 and summary.aggregate.others_last.mean == 0.0
