"""FedIT: FedAvg of a single LoRA adapter (federated instruction tuning), wrapped in Fed-ET.

With heterogeneous client models, adapters of different architectures cannot be averaged;
as in the FedMosaic paper, FedIT averages only among clients of the same architecture
(combined with Fed-ET, App. A.6), with equal weights ("Vanilla" of Table 7).

Round: the client starts from the last global adapter of its architecture (if any), trains
locally, uploads its whole adapter; the server averages per architecture and sends each
client its architecture's average. Evaluation uses the client's adapter after local
training, the model it keeps until the next round (docs/design-notes.md#evaluated-model); fast
adaptation starts from the architecture's average (docs/design-notes.md#adaptation-init).
"""

from __future__ import annotations

from pydantic import ConfigDict, Field

from drake_bench.plugins.protocol import ClientContext, Message, MethodMeta, State

from .lora_clients import GroupedLoraRounds, LoraMethod, LoraSettings, average


class FedIT(GroupedLoraRounds, LoraMethod):
    meta = MethodMeta(
        name="fedit",
        version="1.0",
        relative_compute=1.0,
        summary="FedAvg of one LoRA adapter per architecture (federated instruction tuning).",
        reference="Zhang et al., Towards Building the Federated GPT: Federated Instruction Tuning (ICASSP 2024)",
    )

    class Config(LoraSettings):
        model_config = ConfigDict(extra="forbid")
        weighting: str = Field(
            default="equal",
            pattern="^(equal)$",
            description="How uploads of one architecture are averaged: 'equal' weights (the FedMosaic paper's Table 7 'Vanilla').",
        )

    def round_start(self, ctx: ClientContext, state: State, message: Message | None) -> State:
        """The architecture's last global adapter (its own adapter before the first aggregate)."""
        return State(tensors=message.tensors) if message is not None and message.tensors else state

    def round_result(self, ctx: ClientContext, loss: float) -> tuple[Message, State]:
        tensors = self.clients.dump(ctx.client_id)
        return Message(tensors=tensors), State(tensors=tensors, metadata={"loss": loss})

    def aggregate(
        self, round_idx: int, server_state: State, uploads: dict[int, Message]
    ) -> tuple[dict[int, Message], State]:
        groups: dict[str, list[int]] = {}
        for c in uploads:
            groups.setdefault(self.arch[c], []).append(c)
        out: dict[int, Message] = {}
        for members in groups.values():
            mean = average([uploads[c].tensors for c in members])
            for c in members:
                out[c] = Message(tensors=mean)
        return out, server_state
