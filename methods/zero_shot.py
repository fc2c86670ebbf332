"""Zero-shot: the pretrained base models, never trained on the benchmark; the reference row.

Every client keeps its freshly initialised LoRA adapter (B = 0, so the model *is* the frozen
base) and ignores its stream; nothing is uploaded. It reports what the models know before any
federated training (the FedMosaic paper's Table 10 is its zero-shot table), which is what
tells learning from interference in the other rows: a method whose Others falls below zero-shot
has made its clients worse at the other clients' tasks.

Its fast-adaptation curve is the fresh-adapter curve (the average of fresh adapters is a fresh
adapter). It costs evaluation time only, and little of that: every client of one architecture is the
same frozen base, so an item's answer depends on the architecture and the item alone, and each is
computed once per run and reused for every client, evaluation round and adaptation point.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pydantic import ConfigDict

from drake_bench.benchmarks.sample import MethodSample
from drake_bench.plugins.protocol import ClientContext, Message, MethodMeta, State

from .lora_clients import LoraMethod, LoraSettings


class ZeroShot(LoraMethod):
    meta = MethodMeta(
        name="zero-shot",
        version="1.0",
        relative_compute=1.0,
        summary="The pretrained base models, never trained: the reference row.",
    )

    class Config(LoraSettings):
        model_config = ConfigDict(extra="forbid")

    def __init__(self, config: LoraSettings | None = None):
        super().__init__(config)
        self._answers: dict[tuple[str, str], dict[str, str]] = {}  # (model, architecture) -> uid -> answer

    def client_update(
        self, ctx: ClientContext, state: State, message: Message | None, batches: Iterable[Sequence[MethodSample]]
    ) -> tuple[Message, State]:
        return Message(), state

    def aggregate(
        self, round_idx: int, server_state: State, uploads: dict[int, Message]
    ) -> tuple[dict[int, Message], State]:
        return {c: Message() for c in uploads}, server_state

    def predict(self, ctx: ClientContext, state: State, queries: Sequence[MethodSample]) -> list[str]:
        """The base model's answers, each (model, item) computed once per run.

        Exact, not an approximation: with every LoRA B matrix zero the adapted model *is* the base, whatever
        the A matrices hold; a state with a non-zero B (which this method never produces) is answered
        without the cache."""
        if not _is_base(state):
            return super().predict(ctx, state, queries)
        known = self._answers.setdefault((ctx.model_name, ctx.architecture), {})
        missing = list({q.uid: q for q in queries if q.uid not in known}.values())
        if missing:
            known.update(zip((q.uid for q in missing), super().predict(ctx, state, missing)))
        return [known[q.uid] for q in queries]


def _is_base(state: State) -> bool:
    """True when every LoRA B matrix in ``state`` is zero, so the adapter adds nothing to the base."""
    b = [t for k, t in state.tensors.items() if "lora_B" in k]
    return bool(b) and all(not t.any() for t in b)
