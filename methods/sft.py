"""SFT: every client fine-tunes its own LoRA adapter on its own stream; nothing is shared.

The personalisation baseline of the DRAKE paper (spec benchmarks.md section 7): zero
communication, Self as high as local data allows, Others only what the frozen base knows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict

from drake_bench.protocol import ClientContext, FederationContext, Message, State
from drake_bench.sample import MethodSample

from .lora_clients import LoraClients, LoraSettings, average


class SFT:
    name = "sft"
    version = "1.0"
    relative_compute = 1.0  # Table 15

    class Config(LoraSettings):
        model_config = ConfigDict(extra="forbid")

    def __init__(self, config: BaseModel | None = None):
        self.config = config or self.Config()
        self.clients = LoraClients(self.config)

    def setup(self, federation: FederationContext) -> None:
        self.clients.setup(federation)

    def init_client(self, ctx: ClientContext) -> State:
        return State(tensors=self.clients.initial(ctx.client_id))

    def init_server(self) -> State:
        return State()

    def client_update(self, ctx: ClientContext, state: State, message: Message | None,
                      batches: Iterable[Sequence[MethodSample]]) -> tuple[Message, State]:
        self.clients.load(ctx.client_id, state)
        loss = self.clients.train(ctx, batches)
        return Message(), State(tensors=self.clients.dump(ctx.client_id), metadata={"loss": loss})

    def aggregate(self, round_idx: int, server_state: State, uploads: dict[int, Message]) -> tuple[dict[int, Message], State]:
        return {c: Message() for c in uploads}, server_state

    def predict(self, ctx: ClientContext, state: State, queries: Sequence[MethodSample]) -> list[str]:
        self.clients.load(ctx.client_id, state)
        return self.clients.predict(ctx, queries)

    def adaptation_state(self, architecture: str, client_states: dict[int, State], server_state: State) -> State:
        """Spec A12: for SFT, the within-architecture average of the final local adapters."""
        return State(tensors=average([s.tensors for s in client_states.values()]))
