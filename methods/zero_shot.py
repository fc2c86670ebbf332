"""Zero-shot: the pretrained base models, never trained on the benchmark; the reference row.

Every client keeps its freshly initialised LoRA adapter (B = 0, so the model *is* the frozen
base) and ignores its stream; nothing is uploaded. It reports what the models know before any
federated training (the FedMosaic paper's Table 10 is its zero-shot table), which is what
tells learning from interference in the other rows: a method whose Others falls below zero-shot
has made its clients worse at the other clients' tasks.

Its fast-adaptation curve is the fresh-adapter curve (the average of fresh adapters is a fresh
adapter). It costs evaluation time only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pydantic import ConfigDict

from drake_bench.protocol import ClientContext, Message, MethodMeta, State
from drake_bench.sample import MethodSample

from .lora_clients import LoraMethod, LoraSettings


class ZeroShot(LoraMethod):
    meta = MethodMeta(name="zero-shot", version="1.0", relative_compute=1.0,
                      summary="The pretrained base models, never trained: the reference row.")

    class Config(LoraSettings):
        model_config = ConfigDict(extra="forbid")

    def client_update(self, ctx: ClientContext, state: State, message: Message | None,
                      batches: Iterable[Sequence[MethodSample]]) -> tuple[Message, State]:
        return Message(), state

    def aggregate(self, round_idx: int, server_state: State, uploads: dict[int, Message]) -> tuple[dict[int, Message], State]:
        return {c: Message() for c in uploads}, server_state
