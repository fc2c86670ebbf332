"""A minimal method plugin used by the protocol tests: it needs no model.

Each client counts answers it has trained on and predicts its most frequent one; the server
averages the counts. Simple enough to hand-check, rich enough to exercise every protocol path.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import torch
from pydantic import BaseModel, ConfigDict

from drake_bench.benchmarks.sample import MethodSample
from drake_bench.plugins.protocol import ClientContext, FederationContext, Message, MethodMeta, State

VOCAB = ["yes", "no"]


class Counter:
    meta = MethodMeta(name="counter", version="1.0", summary="Counts trained answers, predicts the most frequent one.")
    FAIL_ON: tuple[int, int] | None = None  # a code-level fault (not config): a fixed plugin resumes the same run

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid")

        share: bool = True
        fail_on: tuple[int, int] | None = None  # (client, round) at which to raise
        nan_on: tuple[int, int] | None = None

    def __init__(self, config: "Counter.Config | None" = None):
        self.config = config or Counter.Config()
        self.setup_calls = 0

    def setup(self, federation: FederationContext) -> None:
        self.setup_calls += 1
        self.clients = federation.clients

    def init_client(self, ctx: ClientContext) -> State:
        return State(tensors={"counts": torch.zeros(len(VOCAB))})

    def init_server(self) -> State:
        return State(metadata={"rounds": 0})

    def client_update(
        self, ctx: ClientContext, state: State, message: Message | None, batches: Iterable[Sequence[MethodSample]]
    ) -> tuple[Message, State]:
        if (ctx.client_id, ctx.round_idx) in (self.config.fail_on, type(self).FAIL_ON):
            raise RuntimeError("boom")
        time.sleep(float(os.environ.get("COUNTER_SLEEP", "0")))  # lets a test kill the process mid-run
        stall = os.environ.get("COUNTER_STALL")  # "ROUND:FOLDER": once FOLDER/armed exists, from that round on,
        if stall:  # say so in FOLDER and hang (a Flower node the test then stops)
            first, folder = stall.split(":", 1)
            if ctx.round_idx >= int(first) and Path(folder, "armed").exists():
                Path(folder, f"client-{ctx.client_id}-round-{ctx.round_idx}").touch()
                time.sleep(600)
        counts = state.tensors["counts"].clone()
        if message is not None and self.config.share:
            counts = 0.5 * counts + 0.5 * message.tensors["mean"]
        for batch in batches:
            for s in batch:
                counts[VOCAB.index(s.answer)] += 1
        if self.config.nan_on == (ctx.client_id, ctx.round_idx):
            counts[0] = float("nan")
        return Message(tensors={"counts": counts}), State(tensors={"counts": counts})

    def aggregate(
        self, round_idx: int, server_state: State, uploads: dict[int, Message]
    ) -> tuple[dict[int, Message], State]:
        mean = torch.stack([m.tensors["counts"] for m in uploads.values()]).mean(0)
        return {c: Message(tensors={"mean": mean}) for c in uploads}, State(metadata={"rounds": round_idx + 1})

    def predict(self, ctx: ClientContext, state: State, queries: Sequence[MethodSample]) -> list[str]:
        assert all(q.answer == "" for q in queries)
        return [VOCAB[int(torch.argmax(state.tensors["counts"]))] for _ in queries]

    def adaptation_state(self, architecture: str, client_states: dict[int, State], server_state: State) -> State:
        return State(tensors={"counts": torch.stack([s.tensors["counts"] for s in client_states.values()]).mean(0)})


class ClientDiagnosing(Counter):
    """Counter that reports one row about each client's update (``ReportsClientDiagnostics``), kept on ``self``
    from ``client_update`` until the evaluator asks, as a method would: under Flower only the client's node has it."""

    meta = MethodMeta(name="client-diagnosing", version="1.0")

    class Config(Counter.Config):
        bad_client_row: tuple[int, int] | None = None  # (client, round) whose row has a NaN

    def client_update(
        self, ctx: ClientContext, state: State, message: Message | None, batches: Iterable[Sequence[MethodSample]]
    ) -> tuple[Message, State]:
        batches = [list(b) for b in batches]
        upload, new = super().client_update(ctx, state, message, batches)
        bad = self.config.bad_client_row == (ctx.client_id, ctx.round_idx)
        self._pending = {
            "key": "items",
            "values": {
                "n": float("nan") if bad else sum(len(b) for b in batches),
                "yes": float(new.tensors["counts"][0]),
            },
        }
        return upload, new

    def client_diagnostics(self, ctx: ClientContext) -> list[dict]:
        row, self._pending = self._pending, None
        return [row]
