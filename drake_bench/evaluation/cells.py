"""Which test items are scored at an evaluation point: the plan of Self and Others cells.

One function decides it for the standard evaluator (:meth:`drake_bench.evaluator.standard.Evaluator.evaluate`) and for a
researcher's own model (:func:`drake_bench.evaluation.standalone.evaluate_client`), so the two score the same
items by construction:

* a cell is one (client, owner, task): the items of ``owner``'s task ``task`` that ``client``'s model answers;
  ``role`` is ``self`` when ``owner == client``, ``others`` otherwise;
* only tasks the owner has *seen* by the end of the round count
  (:meth:`~drake_bench.streams.stream.FederatedData.seen_tasks`): in PFL-Dynamic a task not met yet is not scored;
* the items are a seeded subsample of the owner's test rows of the task
  (:meth:`~drake_bench.streams.stream.FederatedData.test_samples`, ``limit`` = the Self or Others cap): the same for
  every client that answers them, and independent of the round;
* the caps come from the run (``RunConfig.self_subsample`` / ``others_subsample``) or else the manifest
  (``fl.self_subsample`` / ``fl.others_subsample``); an Others cap of 0 scores Self alone, ``None`` the full
  test split;
* cells come in the evaluator's order: client, then owner (every client id in order), then the owner's seen tasks
  in stream order; a cell with no test items (an owner's empty Dirichlet share) is left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from drake_bench.benchmarks.sample import Sample
from drake_bench.evaluation.metrics import ScoreRecord

if TYPE_CHECKING:
    from drake_bench.benchmarks.spec import BenchmarkSpec
    from drake_bench.streams.stream import FederatedData

__all__ = ["EvalCell", "cell_records", "evaluation_limits", "plan_cells"]


@dataclass(frozen=True)
class EvalCell:
    """One cell of an evaluation point: ``client``'s model answers ``samples`` of ``owner``'s task ``task``.

    ``samples`` are the full items, answers included: they stay with the evaluator (what a model is shown is
    ``[s.as_query(...) for s in samples]``)."""

    client: int
    owner: int
    task: str
    role: Literal["self", "others"]
    samples: tuple[Sample, ...]


def evaluation_limits(
    spec: "BenchmarkSpec", self_subsample: int | None = None, others_subsample: int | None = None
) -> tuple[int | None, int | None]:
    """``(self_limit, others_limit)``: the run's caps where given, else the manifest's (``None``: the full split)."""
    self_limit = self_subsample if self_subsample is not None else spec.fl.self_subsample
    others_limit = others_subsample if others_subsample is not None else spec.fl.others_subsample
    return self_limit, others_limit


def plan_cells(
    fed: "FederatedData",
    round_idx: int,
    self_limit: int | None,
    others_limit: int | None,
    clients: Sequence[int] | None = None,
) -> list[EvalCell]:
    """The cells of the evaluation point after round ``round_idx`` (0-based) for ``clients`` (default: all), in the
    evaluator's order. A cap of 0 leaves that role out. Test items are decoded once per (task, owner, cap) and
    shared by the cells that score them."""
    seen = {c: fed.seen_tasks(c, round_idx) for c in fed.clients}
    cache: dict[tuple[str, int, int | None], tuple[Sample, ...]] = {}

    def items(task: str, owner: int, limit: int | None) -> tuple[Sample, ...]:
        key = (task, owner, limit)
        if key not in cache:
            cache[key] = tuple(fed.test_samples(task, owner=owner, limit=limit))
        return cache[key]

    cells: list[EvalCell] = []
    for c in fed.clients if clients is None else clients:
        for j in fed.clients:
            role: Literal["self", "others"] = "self" if j == c else "others"
            limit = self_limit if role == "self" else others_limit
            if limit == 0:  # Others switched off for this run
                continue
            for task in seen[j]:
                samples = items(task, j, limit)
                if samples:
                    cells.append(EvalCell(client=c, owner=j, task=task, role=role, samples=samples))
    return cells


def cell_records(cells: Sequence[EvalCell], scores: Iterable[float], seed: int, eval_round: int) -> list[ScoreRecord]:
    """One :class:`ScoreRecord` per cell: the mean of its items' scores, ``scores`` being every item's score of
    ``cells`` in order (as :meth:`~drake_bench.evaluator.standard.Evaluator.score` returns them for the flattened items)."""
    it = iter(scores)
    records = []
    for cell in cells:
        got = [next(it) for _ in cell.samples]
        records.append(
            ScoreRecord(
                seed=seed,
                eval_round=eval_round,
                client=cell.client,
                task=cell.task,
                owner=cell.owner,
                role=cell.role,
                n=len(cell.samples),
                score=float(np.mean(got)),
            )
        )
    return records
