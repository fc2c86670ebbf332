"""Metrics as pure functions over the raw score tables.

The runner records one :class:`ScoreRecord` per (seed, evaluation round, client, task); everything
reported is derived from those tables here, so a result file can be re-checked from its raw part.

Conventions (all values stay in [0, 1]; x100 is for display only):

* Self_c(t): macro-mean over client c's own tasks evaluated at point t (the runner passes only
  tasks seen so far: in PFL-Dynamic a client is not scored on a task it has not met yet).
* Others_c(t): mean over other clients j of (macro-mean over j's tasks c was evaluated on at t).
* Self(t), Others(t): unweighted mean over clients, so every client counts the same however many
  items its tasks hold.
* A_last: the last evaluation point; A_AUC: mean over all evaluation points (Koh et al.'s area under
  the accuracy curve with equal spacing; there is no point before the first round, where every method
  would score the same untrained base).
* worst client and 10th-percentile client of Self at A_last; the percentile is
  ``numpy.percentile(..., 10, method="linear")`` over the per-client values (WILDS-style).
* forgetting (Avalanche-style, meaningful in PFL-Dynamic): for each client and own task
  evaluated at two or more points, max over the earlier points minus the final score; averaged
  over a client's tasks, then over clients (macro, like Self). None when no task qualifies.
* seeds: mean and population std (ddof=0) over seeds: the seeds run are all the seeds reported,
  and one seed gives std 0 rather than NaN.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable, Literal, Sequence

import numpy as np
from pydantic import ConfigDict, Field, model_validator

from drake_bench.core.strict_model import StrictModel
from drake_bench.errors import DrakeBenchError

PERCENTILE = 10.0
PERCENTILE_METHOD = "linear"
STD_DDOF = 0


class MetricError(DrakeBenchError, ValueError):
    """The raw tables are inconsistent (duplicates, wrong owner for a role, empty input)."""


class _Strict(StrictModel):
    """Raw records and summaries are values: frozen, so nothing derived from them can go stale."""

    model_config = ConfigDict(frozen=True)


# --------------------------------------------------------------------------- raw records


class ScoreRecord(_Strict):
    """Mean score of one client's model on one task at one evaluation point of one seed."""

    seed: int
    eval_round: int = Field(ge=1, description="1-based round after which the evaluation ran.")
    client: int
    task: str
    owner: int | None = Field(description="Client that owns the task; None for unseen tasks.")
    role: Literal["self", "others", "unseen"]
    n: int = Field(ge=0, description="Number of items scored.")
    score: float = Field(ge=0.0, le=1.0, description="Mean item score, in [0, 1].")
    exact_match: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="Mean exact match over items (logged for OPEN answers beside the main score); not summarised.",
    )

    @model_validator(mode="after")
    def _role_matches_owner(self) -> "ScoreRecord":
        if self.role == "self" and self.owner != self.client:
            raise ValueError(f"role 'self' needs owner == client ({self.client}), got owner {self.owner}")
        if self.role == "others" and (self.owner is None or self.owner == self.client):
            raise ValueError(f"role 'others' needs an owner other than client {self.client}, got {self.owner}")
        if self.role == "unseen" and self.owner is not None:
            raise ValueError(f"role 'unseen' needs owner None, got {self.owner}")
        return self


class AdaptationRecord(_Strict):
    """Score on one unseen task after ``iteration`` fine-tuning steps from one init (the fast-adaptation study)."""

    seed: int
    task: str
    arch: str
    init: Literal["method", "fresh"]
    iteration: int = Field(ge=0)
    score: float = Field(ge=0.0, le=1.0)


class CostRecord(_Strict):
    """Communication and compute of one client in one round."""

    seed: int
    round: int = Field(ge=1)
    client: int
    uplink_bytes: int = Field(ge=0)
    downlink_bytes: int = Field(ge=0)
    train_seconds: float = Field(ge=0.0)
    peak_memory_bytes: int = Field(ge=0)
    uplink_elements: dict[str, int] | None = Field(
        default=None,
        description="Tensor elements of the upload per dtype (e.g. {'bfloat16': 66032}); bytes alone do "
        "not compare methods that send at different precisions. None in result files from "
        "before it was recorded.",
    )
    downlink_elements: dict[str, int] | None = Field(
        default=None, description="Tensor elements of the server's message to this client per dtype."
    )


class ServerCostRecord(_Strict):
    """Compute of the server in one round: wall-clock seconds of the method's ``aggregate`` call, measured by the
    evaluator around the call (in the default process isolation this includes moving the uploads, messages and
    states across the process boundary, as a client's ``train_seconds`` does)."""

    seed: int
    round: int = Field(ge=1)
    aggregate_seconds: float = Field(ge=0.0)


class PostFederationCostRecord(_Strict):
    """Compute of a method's stage after the last round: wall-clock seconds of its ``post_federation`` call (all
    clients together), measured by the evaluator around the call, as ``aggregate_seconds`` is. One per seed; only
    methods with a ``post_federation`` have it."""

    seed: int
    post_federation_seconds: float = Field(ge=0.0)


class AbsenceRecord(_Strict):
    """A client that took no part in one round: not drawn by partial participation (``not sampled``), or drawn but
    its node never answered (``no reply``: a Flower SuperNode that died or timed out). Such a client has no cost
    record for that round, keeps its state and its pending message, and is still evaluated (every client is, at every
    evaluation point), so Self/Others, A_last and A_AUC keep their meaning under partial participation."""

    seed: int
    round: int = Field(ge=1)
    client: int
    reason: Literal["not sampled", "no reply"]
    detail: str = Field(default="", description="What the backend said (e.g. Flower's error for a lost node).")


class DiagnosticRecord(_Strict):
    """One row a method reported about its server step in one round (``ReportsDiagnostics``) or about one client's
    step (``ReportsClientDiagnostics``, filed under ``client/<client id>/<key>``); never summarised."""

    seed: int
    round: int = Field(ge=1)
    key: str = Field(description="What the row is about (the method's name for it, e.g. one weight matrix).")
    values: dict[str, float | int | bool | str | None] = Field(description="The method's named numbers for that row.")


class RawTables(_Strict):
    """Everything the summary is computed from (diagnostics are kept beside it, for inspection only).

    ``server_costs``, ``diagnostics``, ``post_federation_costs``, ``absences`` and ``scores_before_post_federation``
    came later than the other tables: result files written before them have none, and read as empty tables.
    """

    scores: list[ScoreRecord] = Field(default_factory=list)
    adaptation: list[AdaptationRecord] = Field(default_factory=list)
    costs: list[CostRecord] = Field(default_factory=list)
    server_costs: list[ServerCostRecord] = Field(
        default_factory=list, description="One record per (seed, round): the server's aggregation time."
    )
    diagnostics: list[DiagnosticRecord] = Field(
        default_factory=list,
        description="The method's own rows about its server steps (ReportsDiagnostics) and its "
        "clients' steps (ReportsClientDiagnostics).",
    )
    post_federation_costs: list[PostFederationCostRecord] = Field(
        default_factory=list, description="One record per seed of a method with post_federation: its seconds."
    )
    absences: list[AbsenceRecord] = Field(
        default_factory=list,
        description="One record per (seed, round, client) that took no part in the round "
        "(partial participation, or a lost node); empty when every client trained "
        "every round.",
    )
    scores_before_post_federation: list[ScoreRecord] = Field(
        default_factory=list,
        description="The last evaluation point as the clients held it after their last local training, before the "
        "method's post_federation stage replaced their models (TAP's post-training, a method's final "
        "global model): the rows of ``scores`` at that round are the replacement's. Empty for a method "
        "without post_federation. Summarised apart (``self_last_before_post_federation``), never in the "
        "headline metrics.",
    )

    @classmethod
    def concat(cls, tables: Sequence[RawTables]) -> RawTables:
        """Every table's records, table by table in order (the seeds of a run, kept and newly run, into one)."""
        return cls(**{name: [r for t in tables for r in getattr(t, name)] for name in cls.model_fields})

    def for_seed(self, seed: int) -> RawTables:
        """Only ``seed``'s records (every record of every table carries its seed)."""
        return type(self)(
            **{name: [r for r in getattr(self, name) if r.seed == seed] for name in type(self).model_fields}
        )


# --------------------------------------------------------------------------- summary records


class MeanStd(_Strict):
    """Mean and population std (ddof=0) over ``n`` seeds; None when no seed has the value."""

    mean: float | None
    std: float | None
    n: int


class CurvePoint(_Strict):
    x: int = Field(description="Evaluation round (accuracy curves) or fine-tuning iteration (adaptation).")
    mean: float
    std: float
    n: int


class ClientSummary(_Strict):
    client: int
    self_last: float | None
    self_auc: float | None
    others_last: float | None
    others_auc: float | None
    forgetting: float | None


class SeedSummary(_Strict):
    """All metrics of one seed."""

    seed: int
    eval_rounds: list[int]
    self_curve: list[float | None]
    others_curve: list[float | None]
    unseen_curve: list[float | None]
    self_last: float | None
    self_auc: float | None
    others_last: float | None
    others_auc: float | None
    unseen_last: float | None
    unseen_auc: float | None
    worst_client: int | None
    worst_client_self: float | None
    p10_client_self: float | None
    forgetting: float | None
    per_client: list[ClientSummary]
    rounds: int = Field(description="Distinct rounds with cost records.")
    uplink_bytes_total: int
    downlink_bytes_total: int
    uplink_bytes_per_round: float | None
    downlink_bytes_per_round: float | None
    train_seconds_total: float
    train_seconds_per_round: float | None
    peak_memory_bytes: int
    aggregate_seconds_total: float | None = Field(
        default=None,
        description="Seconds of the server's aggregate calls over all rounds; None without server cost "
        "records (result files from before they were measured).",
    )
    aggregate_seconds_per_round: float | None = Field(
        default=None, description="aggregate_seconds_total / rounds with a server cost record."
    )
    uplink_elements_per_round: float | None = Field(
        default=None,
        description="Tensor elements uploaded per round, summed over clients and dtypes (total / rounds); "
        "None unless every cost record has its element counts.",
    )
    downlink_elements_per_round: float | None = Field(default=None, description="The same for the server's messages.")
    wire_dtypes: list[str] | None = Field(
        default=None, description="Every tensor dtype sent either way, sorted; None without element counts."
    )
    post_federation_seconds: float | None = Field(
        default=None,
        description="Seconds of the method's post_federation call (all clients); None for a method "
        "without one (and for result files from before it was measured).",
    )
    self_last_before_post_federation: float | None = Field(
        default=None,
        description="Self at the last evaluation point before post_federation replaced the models "
        "(from raw.scores_before_post_federation); None for a method without the stage and "
        "for result files from before it was recorded.",
    )
    others_last_before_post_federation: float | None = Field(default=None, description="Others at the same point.")


_NO_VALUE = MeanStd(mean=None, std=None, n=0)


class Aggregate(_Strict):
    """Seed mean ± population std of each headline metric."""

    self_last: MeanStd
    self_auc: MeanStd
    others_last: MeanStd
    others_auc: MeanStd
    unseen_last: MeanStd
    unseen_auc: MeanStd
    worst_client_self: MeanStd
    p10_client_self: MeanStd
    forgetting: MeanStd
    uplink_bytes_total: MeanStd
    downlink_bytes_total: MeanStd
    uplink_bytes_per_round: MeanStd
    downlink_bytes_per_round: MeanStd
    train_seconds_total: MeanStd
    train_seconds_per_round: MeanStd
    peak_memory_bytes: MeanStd
    aggregate_seconds_total: MeanStd = _NO_VALUE
    aggregate_seconds_per_round: MeanStd = _NO_VALUE
    uplink_elements_per_round: MeanStd = _NO_VALUE
    downlink_elements_per_round: MeanStd = _NO_VALUE
    post_federation_seconds: MeanStd = _NO_VALUE
    self_last_before_post_federation: MeanStd = _NO_VALUE
    others_last_before_post_federation: MeanStd = _NO_VALUE


class Summary(_Strict):
    """What a result file reports; always recomputable from :class:`RawTables` by :func:`summarize`."""

    conventions: dict[str, str]
    per_seed: list[SeedSummary]
    aggregate: Aggregate
    self_curve: list[CurvePoint]
    others_curve: list[CurvePoint]
    adaptation: dict[str, list[CurvePoint]] = Field(description="init ('method' | 'fresh') -> mean curve.")


CONVENTIONS = {
    "scale": "scores in [0, 1]; multiply by 100 for display",
    "clients": "unweighted mean over clients of per-client macro-means over tasks",
    "others": "per client: mean over other clients j of the macro-mean over j's tasks",
    "a_last": "value at the last evaluation point",
    "a_auc": "mean over evaluation points (equal spacing, no round-0 point)",
    "percentile": f"numpy.percentile(q={PERCENTILE:g}, method='{PERCENTILE_METHOD}') over clients' Self at A_last",
    "forgetting": "per client and own task: max over earlier points minus final score; mean over tasks, then clients",
    "seeds": f"mean and population std (ddof={STD_DDOF}) over seeds",
    "costs": "bytes summed over clients and rounds; per-round = total / distinct rounds; peak memory = max",
}


# --------------------------------------------------------------------------- helpers


def _mean(values: Iterable[float]) -> float | None:
    vals = list(values)
    return float(np.mean(vals)) if vals else None


def mean_std(values: Sequence[float | None]) -> MeanStd:
    """Seed aggregate: mean and population std (ddof=0) over the values that are not None."""
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return MeanStd(mean=None, std=None, n=0)
    return MeanStd(mean=float(np.mean(vals)), std=float(np.std(vals, ddof=STD_DDOF)), n=len(vals))


def _check_unique(records: Sequence[ScoreRecord]) -> None:
    seen: set[tuple[int, int, int, str, int]] = set()
    for r in records:
        # the owner is part of the key: under Dirichlet several clients own shares of one task
        key = (r.seed, r.eval_round, r.client, r.task, r.owner)
        if key in seen:
            raise MetricError(
                f"duplicate score record for seed {r.seed}, round {r.eval_round}, client {r.client}, "
                f"task {r.task!r}, owner {r.owner}"
            )
        seen.add(key)


def _client_self(records: Sequence[ScoreRecord]) -> dict[int, float]:
    by_client: dict[int, list[float]] = defaultdict(list)
    for r in records:
        if r.role == "self":
            by_client[r.client].append(r.score)
    return {c: float(np.mean(v)) for c, v in by_client.items()}


def _client_others(records: Sequence[ScoreRecord]) -> dict[int, float]:
    by_pair: dict[tuple[int, int], list[float]] = defaultdict(list)
    for r in records:
        if r.role == "others":
            by_pair[(r.client, r.owner)].append(r.score)  # type: ignore[index]
    by_client: dict[int, list[float]] = defaultdict(list)
    for (c, _j), v in by_pair.items():
        by_client[c].append(float(np.mean(v)))
    return {c: float(np.mean(v)) for c, v in by_client.items()}


def _client_unseen(records: Sequence[ScoreRecord]) -> dict[int, float]:
    by_client: dict[int, list[float]] = defaultdict(list)
    for r in records:
        if r.role == "unseen":
            by_client[r.client].append(r.score)
    return {c: float(np.mean(v)) for c, v in by_client.items()}


def forgetting(records: Sequence[ScoreRecord]) -> tuple[float | None, dict[int, float]]:
    """Avalanche-style forgetting of one seed: (mean over clients, per-client value).

    For each client and own task with scores at two or more evaluation points:
    max over the points before the task's last point minus the score at that last point
    (can be negative when the task kept improving). Macro over tasks, then over clients.
    """
    series: dict[tuple[int, str], list[tuple[int, float]]] = defaultdict(list)
    for r in records:
        if r.role == "self":
            series[(r.client, r.task)].append((r.eval_round, r.score))
    per_client: dict[int, list[float]] = defaultdict(list)
    for (client, _task), pts in series.items():
        if len(pts) < 2:
            continue
        pts.sort()
        per_client[client].append(max(s for _, s in pts[:-1]) - pts[-1][1])
    values = {c: float(np.mean(v)) for c, v in per_client.items()}
    return _mean(values.values()), values


def cost_summary(costs: Sequence[CostRecord]) -> dict[str, Any]:
    """Totals over clients and rounds, per-round means (total / distinct rounds) and peak memory (max)."""
    rounds = len({c.round for c in costs})
    up = sum(c.uplink_bytes for c in costs)
    down = sum(c.downlink_bytes for c in costs)
    secs = float(sum(c.train_seconds for c in costs))
    return {
        "rounds": rounds,
        "uplink_bytes_total": up,
        "downlink_bytes_total": down,
        "uplink_bytes_per_round": up / rounds if rounds else None,
        "downlink_bytes_per_round": down / rounds if rounds else None,
        "train_seconds_total": secs,
        "train_seconds_per_round": secs / rounds if rounds else None,
        "peak_memory_bytes": max((c.peak_memory_bytes for c in costs), default=0),
        **_element_summary(costs, rounds),
    }


def _element_summary(costs: Sequence[CostRecord], rounds: int) -> dict[str, Any]:
    """Elements per round both ways and the dtypes on the wire; all None unless every record counted elements
    (a run resumed from a checkpoint written before they were recorded has none for its early rounds)."""
    if not rounds or any(c.uplink_elements is None or c.downlink_elements is None for c in costs):
        return {"uplink_elements_per_round": None, "downlink_elements_per_round": None, "wire_dtypes": None}
    up = sum(sum(c.uplink_elements.values()) for c in costs)  # type: ignore[union-attr]
    down = sum(sum(c.downlink_elements.values()) for c in costs)  # type: ignore[union-attr]
    dtypes = {d for c in costs for d in (*c.uplink_elements, *c.downlink_elements)}  # type: ignore[misc]
    return {
        "uplink_elements_per_round": up / rounds,
        "downlink_elements_per_round": down / rounds,
        "wire_dtypes": sorted(dtypes),
    }


def server_cost_summary(server_costs: Sequence[ServerCostRecord]) -> dict[str, float | None]:
    """The server's aggregation seconds in total and per round (total / distinct rounds); None without records."""
    rounds = len({c.round for c in server_costs})
    if not rounds:
        return {"aggregate_seconds_total": None, "aggregate_seconds_per_round": None}
    secs = float(sum(c.aggregate_seconds for c in server_costs))
    return {"aggregate_seconds_total": secs, "aggregate_seconds_per_round": secs / rounds}


# --------------------------------------------------------------------------- per seed


def seed_summary(
    seed: int,
    scores: Sequence[ScoreRecord],
    costs: Sequence[CostRecord] = (),
    server_costs: Sequence[ServerCostRecord] = (),
    post_federation_costs: Sequence[PostFederationCostRecord] = (),
    scores_before_post_federation: Sequence[ScoreRecord] = (),
) -> SeedSummary:
    """All metrics of one seed from its score and cost records (records of other seeds are ignored)."""
    scores = [r for r in scores if r.seed == seed]
    before = [r for r in scores_before_post_federation if r.seed == seed]
    _check_unique(before)
    costs = [c for c in costs if c.seed == seed]
    server_costs = [c for c in server_costs if c.seed == seed]
    post = [c.post_federation_seconds for c in post_federation_costs if c.seed == seed]
    _check_unique(scores)
    points = sorted({r.eval_round for r in scores})
    at: dict[int, list[ScoreRecord]] = defaultdict(list)
    for r in scores:
        at[r.eval_round].append(r)
    self_pc = {t: _client_self(at[t]) for t in points}
    others_pc = {t: _client_others(at[t]) for t in points}
    unseen_pc = {t: _client_unseen(at[t]) for t in points}
    self_curve = [_mean(self_pc[t].values()) for t in points]
    others_curve = [_mean(others_pc[t].values()) for t in points]
    unseen_curve = [_mean(unseen_pc[t].values()) for t in points]

    def last(curve: list[float | None]) -> float | None:
        return curve[-1] if curve else None

    def auc(curve: list[float | None]) -> float | None:
        return _mean(v for v in curve if v is not None)

    forget_mean, forget_pc = forgetting(scores)
    final_self = self_pc[points[-1]] if points else {}
    clients = sorted({r.client for r in scores})
    per_client = [
        ClientSummary(
            client=c,
            self_last=final_self.get(c),
            self_auc=_mean(self_pc[t][c] for t in points if c in self_pc[t]),
            others_last=others_pc[points[-1]].get(c) if points else None,
            others_auc=_mean(others_pc[t][c] for t in points if c in others_pc[t]),
            forgetting=forget_pc.get(c),
        )
        for c in clients
    ]
    worst = min(final_self, key=lambda c: (final_self[c], c)) if final_self else None
    return SeedSummary(
        seed=seed,
        eval_rounds=points,
        self_curve=self_curve,
        others_curve=others_curve,
        unseen_curve=unseen_curve,
        self_last=last(self_curve),
        self_auc=auc(self_curve),
        others_last=last(others_curve),
        others_auc=auc(others_curve),
        unseen_last=last(unseen_curve),
        unseen_auc=auc(unseen_curve),
        worst_client=worst,
        worst_client_self=final_self[worst] if worst is not None else None,
        p10_client_self=(
            float(np.percentile(list(final_self.values()), PERCENTILE, method=PERCENTILE_METHOD))
            if final_self
            else None
        ),
        forgetting=forget_mean,
        per_client=per_client,
        **cost_summary(costs),  # type: ignore[arg-type]
        **server_cost_summary(server_costs),
        post_federation_seconds=float(sum(post)) if post else None,
        self_last_before_post_federation=_mean(_client_self(before).values()),
        others_last_before_post_federation=_mean(_client_others(before).values()),
    )


# --------------------------------------------------------------------------- over seeds


def _curve_over_seeds(per_seed: Sequence[SeedSummary], attr: str) -> list[CurvePoint]:
    """Mean ± std at each evaluation round, over the seeds that have a value at that round."""
    by_round: dict[int, list[float]] = defaultdict(list)
    for s in per_seed:
        for t, v in zip(s.eval_rounds, getattr(s, attr)):
            if v is not None:
                by_round[t].append(v)
    out = []
    for t in sorted(by_round):
        ms = mean_std(by_round[t])
        out.append(CurvePoint(x=t, mean=ms.mean, std=ms.std, n=ms.n))  # type: ignore[arg-type]
    return out


def adaptation_curves(records: Sequence[AdaptationRecord]) -> dict[str, list[CurvePoint]]:
    """Fast-adaptation curve per init: per seed, the mean over (unseen task, architecture)
    cells at each iteration; then mean ± population std over seeds."""
    cells: dict[tuple[str, int, int], list[float]] = defaultdict(list)
    seen: set[tuple[int, str, str, str, int]] = set()
    for r in records:
        key = (r.seed, r.task, r.arch, r.init, r.iteration)
        if key in seen:
            raise MetricError(f"duplicate adaptation record {key}")
        seen.add(key)
        cells[(r.init, r.iteration, r.seed)].append(r.score)
    curves: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for (init, it, _seed), vals in cells.items():
        curves[init][it].append(float(np.mean(vals)))
    out: dict[str, list[CurvePoint]] = {}
    for init in sorted(curves):
        pts = []
        for it in sorted(curves[init]):
            ms = mean_std(curves[init][it])
            pts.append(CurvePoint(x=it, mean=ms.mean, std=ms.std, n=ms.n))  # type: ignore[arg-type]
        out[init] = pts
    return out


_AGG_FIELDS = tuple(Aggregate.model_fields)


def summarize(raw: RawTables, seeds: Sequence[int] | None = None) -> Summary:
    """The full summary of a run from its raw tables.

    ``seeds``: the seeds to summarise, in order (default: every seed found in the raw tables, sorted).
    A seed without score records still gets a (mostly empty) entry, so a partial run shows it.
    """
    if seeds is None:
        seeds = sorted({r.seed for r in raw.scores} | {c.seed for c in raw.costs})
    per_seed = [
        seed_summary(
            s, raw.scores, raw.costs, raw.server_costs, raw.post_federation_costs, raw.scores_before_post_federation
        )
        for s in seeds
    ]
    aggregate = Aggregate(**{f: mean_std([getattr(s, f) for s in per_seed]) for f in _AGG_FIELDS})
    return Summary(
        conventions=dict(CONVENTIONS),
        per_seed=per_seed,
        aggregate=aggregate,
        self_curve=_curve_over_seeds(per_seed, "self_curve"),
        others_curve=_curve_over_seeds(per_seed, "others_curve"),
        adaptation=adaptation_curves(raw.adaptation),
    )
