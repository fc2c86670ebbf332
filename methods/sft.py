"""SFT: every client fine-tunes its own LoRA adapter on its own stream; nothing is shared.

The local-training baseline of the FedMosaic paper (Table 2, Sec. 6.2): zero communication, Self as
high as local data allows, Others only what the frozen base knows. Fast adaptation starts from
the within-architecture average of the final adapters (docs/design-notes.md#adaptation-init).
"""

from __future__ import annotations

from pydantic import ConfigDict

from drake_bench.plugins.protocol import ClientContext, Message, MethodMeta, State

from .lora_clients import GroupedLoraRounds, LoraMethod, LoraSettings


class SFT(GroupedLoraRounds, LoraMethod):
    meta = MethodMeta(
        name="sft",
        version="1.0",
        relative_compute=1.0,
        summary="Local LoRA fine-tuning on each client; nothing is shared (the personalisation baseline).",
    )

    class Config(LoraSettings):
        model_config = ConfigDict(extra="forbid")

    def round_start(self, ctx: ClientContext, state: State, message: Message | None) -> State:
        return state  # its own adapter: nothing comes from the server

    def round_result(self, ctx: ClientContext, loss: float) -> tuple[Message, State]:
        return Message(), State(tensors=self.clients.dump(ctx.client_id), metadata={"loss": loss})

    def aggregate(
        self, round_idx: int, server_state: State, uploads: dict[int, Message]
    ) -> tuple[dict[int, Message], State]:
        return {c: Message() for c in uploads}, server_state
