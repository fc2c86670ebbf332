"""Score your own model as the standard evaluator does: :func:`evaluate_client`.

A researcher who trains with :func:`drake_bench.load_client_stream` in their own code has no method plugin for the
evaluator to drive; :func:`evaluate_client` gives such a model the evaluator's Self and Others numbers for one
client at one round. The items come from the evaluator's own plan (:func:`drake_bench.evaluation.cells.plan_cells`:
the owner's seen tasks, the seeded Self and Others subsamples), the answers are scored by the evaluator's rules
(:func:`drake_bench.evaluation.scoring.score_batch`) and the per-client numbers by the board's metrics
(:func:`drake_bench.evaluation.metrics.seed_summary`), so the same predictions give the same cells and numbers as
``drake_bench.run`` records for that client, seed and evaluation round. The guide: ``docs/own-model.md``.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ConfigDict, Field

from drake_bench.benchmarks.manifest import load_benchmark
from drake_bench.benchmarks.sample import MethodSample
from drake_bench.benchmarks.spec import BenchmarkSpec
from drake_bench.core.strict_model import StrictModel
from drake_bench.errors import ScenarioError
from drake_bench.evaluation.cells import cell_records, evaluation_limits, plan_cells
from drake_bench.evaluation.metrics import ScoreRecord, seed_summary
from drake_bench.evaluation.scoring import SCORER_VERSION, check_scorer_version, score_batch
from drake_bench.streams.scenarios import Scenario
from drake_bench.streams.stream import FederatedData, _check_schedule, _client_id, load_federated_data

__all__ = ["ClientEvaluation", "ClientEvaluationSettings", "PredictFn", "evaluate_client"]

PredictFn = Callable[[list[MethodSample]], Sequence[str]]
"""``predict_fn(queries) -> answers``: one string per query, in order (as a method plugin's ``predict``)."""


class _Frozen(StrictModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ClientEvaluationSettings(_Frozen):
    """What an :func:`evaluate_client` score was computed under: compare it with a result file's only when these
    agree with the run's (``benchmark``, ``scenario``, ``fl`` and the scorer version)."""

    benchmark: str
    manifest_hash: str = Field(description="The manifest's content hash (a result file's benchmark.manifest_hash).")
    data_hash: str | None = Field(description="Hash of the built shards read (a result file's benchmark.data_hash).")
    scenario: str = Field(description="Scenario tag, as in result file paths (dynamic, static, dirichlet-0.5, ...).")
    seed: int
    rounds: int
    local_steps: int = Field(
        description="Local steps of the schedule whose seen tasks count (the run's, not a "
        "compute-matched method's own)."
    )
    round_idx: int = Field(description="0-based round after which the model is scored (as ClientStream.round).")
    eval_round: int = Field(description="The same point 1-based, as a result file's eval_round.")
    self_subsample: int | None = Field(description="Self items per task (a seeded subsample); None: the full split.")
    others_subsample: int | None = Field(
        description="Others items per task (a seeded subsample); None: the full split; 0: Others not scored."
    )
    scorer_version: str = Field(
        description="Version of the scoring rules applied (a result file's "
        "evaluation.scorer_version; drake_bench/evaluation/scoring.py)."
    )


class ClientEvaluation(_Frozen):
    """One client's Self and Others at one evaluation point, with the cells they come from."""

    client: int
    self_score: float | None = Field(description="Self: macro-mean over the client's own seen tasks (in [0, 1]).")
    others_score: float | None = Field(
        description="Others: mean over the other clients of the macro-mean over their seen tasks; None when "
        "Others is not scored."
    )
    cells: list[ScoreRecord] = Field(
        description="One row per (owner, task), in the evaluator's order: what a result file's raw.scores holds for "
        "this client, seed and eval_round."
    )
    settings: ClientEvaluationSettings

    @property
    def items_scored(self) -> int:
        return sum(c.n for c in self.cells)


_FED_ARGS = ("scenario", "rounds", "local_steps", "data_dir", "revision", "repo_id")


def evaluate_client(
    benchmark: str | BenchmarkSpec | FederatedData,
    client: int,
    predict_fn: PredictFn,
    *,
    seed: int | None = None,
    scenario: str | Scenario | dict | None = None,
    round_idx: int | None = None,
    others: bool = True,
    self_subsample: int | None = None,
    others_subsample: int | None = None,
    rounds: int | None = None,
    local_steps: int | None = None,
    data_dir: str | Path | None = None,
    revision: str | None = None,
    repo_id: str | None = None,
    scorer_version: str = SCORER_VERSION,
) -> ClientEvaluation:
    """Score ``client``'s model after round ``round_idx`` on Self and Others, exactly as the evaluator does.

    Args:
        benchmark: a benchmark name or spec (opened with the stream arguments below, as :func:`load_client_stream`
            opens it), or a :class:`~drake_bench.streams.stream.FederatedData` already opened (to score several clients
            without reopening; then ``seed``, ``scenario``, ``rounds``, ``local_steps`` and the data arguments are
            its own and must not be given).
        client: the client whose model answers (an int id of the benchmark).
        predict_fn: ``predict_fn(queries) -> list[str]``: called once per (owner, task) cell, in the evaluator's
            order, with :class:`~drake_bench.benchmarks.sample.MethodSample` queries as a plugin's ``predict`` gets them:
            ``answer`` is ``""``, task identity and source are hidden (reading them raises
            :class:`~drake_bench.errors.LeakageError`), ``uid`` is keyed with a secret drawn for this call. It
            returns one string per query, in order.
        seed, scenario, rounds, local_steps: the stream's (defaults: seed 0, the manifest's); use the values the
            model was trained with: they decide which tasks are seen by ``round_idx``.
        round_idx: 0-based round after which the model is scored; ``None``: the last round.
        others: ``False`` scores Self alone (as ``others_subsample=0``).
        self_subsample, others_subsample: items per task (seeded subsamples, the same for every client that answers
            them); ``None``: the manifest's ``fl.self_subsample`` / ``fl.others_subsample``, as in a run that does not
            set them (pass the run config's values to match a run that did).
        data_dir, revision, repo_id: where the built data is, as for :func:`load_client_stream`.
        scorer_version: the scoring rules' version (``RunConfig.scorer_version``; they differ in open answers only):
            ``"2.0"``, the default of new runs, or ``"1.0"`` to compare with a result file scored by it (its
            ``evaluation.scorer_version``, e.g. a committed board's).

    Returns:
        a :class:`ClientEvaluation`: ``self_score``, ``others_score``, the cells (``ScoreRecord`` rows equal to a
        result file's ``raw.scores`` for this client at ``settings.eval_round``) and the settings used. A board's
        Self and Others at a point are the means of every client's ``self_score`` / ``others_score`` there.

    Answers never leave this function: the queries carry none and every score is computed here. Free-text items
    are scored with Rouge-L, the evaluator's rule for runs without a judge (``RunConfig.judge``).
    """
    spec = benchmark.spec if isinstance(benchmark, FederatedData) else load_benchmark(benchmark)
    client = _client_id(spec, client)  # a bad id fails here, before any data is opened or fetched
    if not isinstance(others, bool):
        raise ScenarioError(f"others must be True or False, got {others!r}")
    for name, value, low in (("self_subsample", self_subsample, 1), ("others_subsample", others_subsample, 0)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low):
            raise ScenarioError(f"{name} must be an int >= {low} or None (the manifest's), got {value!r}")
    try:
        check_scorer_version(scorer_version)
    except ValueError as exc:
        raise ScenarioError(str(exc)) from None
    if not callable(predict_fn):
        raise TypeError(f"predict_fn must be callable (queries -> list of answers), got {type(predict_fn).__name__}")
    self_limit, others_limit = evaluation_limits(spec, self_subsample, others_subsample if others else 0)
    opened = benchmark if isinstance(benchmark, FederatedData) else spec
    fed = _federated_data(
        opened,
        seed,
        scenario=scenario,
        rounds=rounds,
        local_steps=local_steps,
        data_dir=data_dir,
        revision=revision,
        repo_id=repo_id,
        clients=[client] if others_limit == 0 else None,
    )  # what a Hub revision must fetch
    last = fed.config.rounds - 1
    if round_idx is None:
        round_idx = last
    elif isinstance(round_idx, bool) or not isinstance(round_idx, (int, np.integer)) or not 0 <= round_idx <= last:
        raise ScenarioError(
            f"round_idx must be an int in 0..{last} (0-based, the {fed.config.rounds} rounds of "
            f"{fed.spec.name!r} here) or None for the last round, got {round_idx!r}"
        )
    round_idx = int(round_idx)
    cells = plan_cells(fed, round_idx, self_limit, others_limit, clients=[client])
    uid_key = secrets.token_bytes(16)  # opaque uids: they cannot be hashed back into task names and rows
    preds: list[str] = []
    for cell in cells:
        queries = [s.as_query(uid_key) for s in cell.samples]
        got = predict_fn(queries)
        if isinstance(got, str) or not isinstance(got, Sequence):
            shown = type(got).__name__
        elif len(got) != len(queries):
            shown = f"{len(got)} items"
        else:
            shown = next(
                (f"a {type(p).__name__} at position {i}" for i, p in enumerate(got) if not isinstance(p, str)), ""
            )
        if shown:
            raise TypeError(
                f"predict_fn must return a list of {len(queries)} strings (one per query, in order), got "
                f"{shown} (client {client}, {cell.role} task {cell.task!r} of client {cell.owner})"
            )
        preds.extend(got)
    eval_round = round_idx + 1
    records = cell_records(
        cells,
        score_batch(preds, [s for cell in cells for s in cell.samples], scorer_version),
        seed=fed.seed,
        eval_round=eval_round,
    )
    per_client = {c.client: c for c in seed_summary(fed.seed, records).per_client}.get(client)
    settings = ClientEvaluationSettings(
        benchmark=fed.spec.name,
        manifest_hash=fed.spec.content_hash or "",
        data_hash=fed.store.info.get("data_hash"),
        scenario=fed.scenario.tag(),
        seed=fed.seed,
        rounds=fed.config.rounds,
        local_steps=fed.config.local_steps,
        round_idx=round_idx,
        eval_round=eval_round,
        self_subsample=self_limit,
        others_subsample=others_limit,
        scorer_version=scorer_version,
    )
    return ClientEvaluation(
        client=client,
        self_score=per_client.self_last if per_client else None,
        others_score=per_client.others_last if per_client else None,
        cells=records,
        settings=settings,
    )


def _federated_data(benchmark: Any, seed: int | None, **stream: Any) -> FederatedData:
    """The evaluator's view to score on: the one given, or the benchmark opened as the stream was."""
    clients = stream.pop("clients")
    if isinstance(benchmark, FederatedData):
        given = [name for name in _FED_ARGS if stream[name] is not None]
        if seed is not None and seed != benchmark.seed:
            given.insert(0, "seed")
        if given:
            raise ScenarioError(
                f"evaluate_client got a FederatedData (seed {benchmark.seed}, scenario "
                f"{benchmark.scenario.tag()!r}, {benchmark.config.rounds} rounds) and also "
                f"{', '.join(given)}: those are the FederatedData's own; open another with "
                "load_federated_data(...) to score under other settings"
            )
        return benchmark
    seed = 0 if seed is None else seed
    _check_schedule(seed=seed, rounds=stream["rounds"], local_steps=stream["local_steps"])
    return load_federated_data(
        benchmark,
        stream["scenario"],
        seed,
        data_dir=stream["data_dir"],
        revision=stream["revision"],
        repo_id=stream["repo_id"],
        clients=clients,
        rounds=stream["rounds"],
        local_steps=stream["local_steps"],
    )
