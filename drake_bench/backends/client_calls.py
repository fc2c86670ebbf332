"""Where a federation's client-side calls run: the seam between the evaluator and a backend.

The evaluator prepares every client call of a round (the context, the client's state and pending message, the
batches of its own stream, or evaluation queries with their answers removed) and keeps every number it records.
A backend only decides where the method's ``client_update`` and ``predict`` execute: the evaluator's own method
handle one client after another (``LocalClients`` in :mod:`drake_bench.evaluator.standard`), or Flower nodes
(:mod:`drake_bench.backends.flower`). This module holds what both sides share and imports neither, so the Flower backend
can build on it without an import cycle with the evaluator.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from drake_bench.plugins.protocol import ClientContext, Message, State

if TYPE_CHECKING:
    from drake_bench.evaluator.standard import SeedRun

__all__ = ["ClientCalls", "PredictJob", "TrainJob", "TrainReply"]


@dataclass
class TrainJob:
    """One client's ``client_update`` of one round, as the evaluator prepares it (batches from its own stream)."""

    client: int
    ctx: ClientContext
    state: State
    message: Message | None
    batches: list[list[Any]]


@dataclass
class TrainReply:
    """What came back from one client's ``client_update``: its upload, new state, seconds, the peak memory of the
    process it ran in (0: the method's own process, which the evaluator asks itself) and the method's
    ``client_diagnostics`` rows about the call, asked where it ran."""

    upload: Message
    state: State
    seconds: float
    peak_memory_bytes: int = 0
    diagnostics: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class PredictJob:
    """Every ``predict`` call of one client's model at one evaluation point: one query list per (owner, task)."""

    client: int
    ctx: ClientContext
    state: State
    groups: list[list[Any]]


class ClientCalls:
    """Where the client-side calls of a federation round run. The evaluator prepares each call (context, state,
    pending message, that client's own batches, or queries without answers) and keeps every number; a backend
    only decides where the method's ``client_update`` and ``predict`` execute. ``LocalClients`` (the evaluator) calls the
    evaluator's own method handle, one client after another; ``drake_bench.backends.flower`` sends them to Flower nodes.

    ``train`` returns a reply for each client that answered, or a string saying why a client did not (that client
    is then recorded missing for the round); a method's own error is raised, never turned into an absence.
    """

    def train(self, run: SeedRun, round_idx: int, jobs: list[TrainJob]) -> dict[int, TrainReply | str]:
        raise NotImplementedError

    def predict(self, run: SeedRun, jobs: list[PredictJob]) -> list[list[list[str]]]:
        raise NotImplementedError
