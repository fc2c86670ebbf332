"""The standard evaluator's maths: per-answer scoring, metrics over the raw score table, tables and plots.

Methods never compute leaderboard numbers themselves: the runner records raw per-(seed,
round, client, task) scores and everything reported is derived here by pure functions.
Plots live in :mod:`drake_bench.evaluation.plots` (imported on demand: matplotlib is slow to load).
"""

from __future__ import annotations

from drake_bench.evaluation.metrics import (
    AdaptationRecord,
    CostRecord,
    DiagnosticRecord,
    MeanStd,
    MetricError,
    PostFederationCostRecord,
    RawTables,
    ScoreRecord,
    SeedSummary,
    ServerCostRecord,
    Summary,
    adaptation_curves,
    cost_summary,
    forgetting,
    mean_std,
    seed_summary,
    server_cost_summary,
    summarize,
)
from drake_bench.evaluation.scoring import (
    SCORER_VERSION,
    SCORER_VERSIONS,
    Scored,
    normalize_answer,
    parse_choice,
    rouge_l_f1,
    score_batch,
    score_details,
    score_prediction,
)

__all__ = [
    "AdaptationRecord",
    "CostRecord",
    "DiagnosticRecord",
    "MeanStd",
    "MetricError",
    "PostFederationCostRecord",
    "RawTables",
    "SCORER_VERSION",
    "SCORER_VERSIONS",
    "ScoreRecord",
    "Scored",
    "SeedSummary",
    "ServerCostRecord",
    "Summary",
    "adaptation_curves",
    "cost_summary",
    "forgetting",
    "mean_std",
    "normalize_answer",
    "parse_choice",
    "rouge_l_f1",
    "score_batch",
    "score_details",
    "score_prediction",
    "seed_summary",
    "server_cost_summary",
    "summarize",
]
