"""``RunConfig.predict_per_client``: each client's model asked once per evaluation point, the answers cut back into
the same (client, owner, task) cells; recorded, part of the fingerprint, refused on the canonical boards."""

from __future__ import annotations

import pytest

from drake_bench.errors import DrakeBenchError
from drake_bench.evaluator.standard import RunConfig, run
from drake_bench.plugins.examples.majority import MajorityAnswer
from drake_bench.plugins.protocol import MethodMeta
from drake_bench.plugins.registry import available_methods, register_method
from drake_bench.results.result_file import PREDICT_CALLS_KEY


class CountingMajority(MajorityAnswer):
    """majority-answer (answers each query on its own) that keeps the size of every predict call."""

    meta = MethodMeta(name="counting-majority", version="1.0", summary="majority-answer counting its predict calls")
    calls: list[int] = []

    def predict(self, ctx, state, queries):
        CountingMajority.calls.append(len(queries))
        return super().predict(ctx, state, queries)


def _config(toy_free_text, out, **kw) -> RunConfig:
    manifest, root = toy_free_text
    return RunConfig(
        benchmark=manifest,
        data_dir=root,
        method="counting-majority",
        scenario="static",
        seeds=[0],
        rounds=2,
        local_steps=1,
        numerics="native",
        isolation="inline",
        fast_adaptation=False,
        out=str(out),
        **kw,
    )


def test_one_call_per_client_scores_the_same_cells_and_is_recorded(toy_free_text, tmp_path):
    if "counting-majority" not in available_methods():
        register_method(CountingMajority)
    CountingMajority.calls = []
    grouped = run(_config(toy_free_text, tmp_path / "grouped"))
    grouped_calls, CountingMajority.calls = CountingMajority.calls, []
    one = run(_config(toy_free_text, tmp_path / "one", predict_per_client=True))
    one_calls = CountingMajority.calls

    def cells(res):
        return [(r.eval_round, r.client, r.owner, r.task, r.role, r.n, r.score) for r in res.raw.scores]

    assert cells(one) == cells(grouped)  # a method that answers each query alone: same answers, same cells
    points, clients = len(one.fl.eval_rounds), one.fl.num_clients
    assert len(one_calls) == points * clients  # one call per client and evaluation point
    assert len(grouped_calls) == len(grouped.raw.scores)  # one call per (client, owner, task) cell
    assert sum(one_calls) == sum(grouped_calls) == sum(r.n for r in one.raw.scores)
    assert one.evaluation.extra[PREDICT_CALLS_KEY] == "one per client"
    assert PREDICT_CALLS_KEY not in grouped.evaluation.extra
    # other calls, other padding: a run asked per client never resumes one asked per group
    with pytest.raises(DrakeBenchError, match="different run configuration"):
        run(_config(toy_free_text, tmp_path / "one"))
