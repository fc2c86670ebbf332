"""``majority-answer``: every client answers with the answers it has seen most, pooled over the federation.

A complete method plugin with no model, small enough to read in a minute: each client counts the
answers of its training items (its State), uploads the counts of the round, and the server sums
them into one federated prior that it sends back. To answer a query, a client blends its own
counts with the federation's (``own_weight``) and picks the most frequent answer among the
query's choices (any answer for open questions). It scores above zero only where answers repeat
(yes/no questions, fixed option sets), which is what a prior can know; it is the lower bound a
learning method must beat, and the example that ``docs/writing-a-method.md`` walks through.
"""

from __future__ import annotations

from collections import Counter

from pydantic import BaseModel, Field

from drake_bench.plugins.protocol import ClientContext, FederationContext, Message, MethodMeta, State


class MajorityAnswer:
    meta = MethodMeta(name="majority-answer", version="1.0", summary="Most frequent answer, pooled (no model).")

    class Config(BaseModel):
        own_weight: float = Field(0.5, ge=0, le=1, description="Weight of the client's own counts (1: no sharing).")

    def __init__(self, config: Config | None = None):
        self.config = config or self.Config()

    def setup(self, federation: FederationContext) -> None:
        pass  # no model to load

    def init_client(self, ctx: ClientContext) -> State:
        return State(metadata={"own": {}, "federation": {}})

    def init_server(self) -> State:
        return State(metadata={"counts": {}})

    def client_update(self, ctx, state, message, batches):
        seen = Counter(item.answer for batch in batches for item in batch)
        own = Counter(state.metadata["own"]) + seen
        federation = message.metadata["counts"] if message else state.metadata["federation"]
        return Message(metadata={"counts": dict(seen)}), State(metadata={"own": dict(own), "federation": federation})

    def aggregate(self, round_idx, server_state, uploads):
        total = sum((Counter(u.metadata["counts"]) for u in uploads.values()), Counter(server_state.metadata["counts"]))
        return {c: Message(metadata={"counts": dict(total)}) for c in uploads}, State(metadata={"counts": dict(total)})

    def predict(self, ctx, state, queries):
        own, fed = Counter(state.metadata["own"]), Counter(state.metadata["federation"])
        w, n_own, n_fed = self.config.own_weight, max(own.total(), 1), max(fed.total(), 1)
        score = lambda answer: w * own[answer] / n_own + (1 - w) * fed[answer] / n_fed  # noqa: E731
        return [max(q.choices or sorted(own | fed) or [""], key=score) for q in queries]

    def adaptation_state(self, architecture: str, client_states: dict[int, State], server_state: State) -> State:
        return State(metadata={"own": {}, "federation": server_state.metadata["counts"]})
