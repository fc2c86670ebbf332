"""The method plugin protocol: what a PFL method implements to run under the standard evaluator.

A method is any object with these attributes and methods (a ``typing.Protocol``, not a base
class: MTEB's lesson). Everything that crosses a boundary is explicit and serialisable:

* :class:`State` — a client's or the server's state: tensors (saved with safetensors) plus
  JSON metadata. The evaluator checkpoints every state after every round and gives them back
  on resume; the Flower backend moves them between processes.
* :class:`Message` — what travels between server and client: tensors plus small metadata.
  The evaluator measures its bytes (uplink and downlink), so a method cannot under-report.

Round structure (the evaluator drives it; methods never see the schedule or test data)::

    method.setup(federation)                                   # once: load models, align (FedMosaic), ...
    client_state[c] = method.init_client(ctx(c))               # per client
    server_state = method.init_server()
    for round r:
        upload[c], client_state[c] = method.client_update(ctx(c, r), client_state[c], message[c], batches)
        message, server_state = method.aggregate(r, server_state, upload)   # message: a dict, one per client
        [evaluate: method.predict(ctx(c, r), client_state[c], queries)]
    optional: method.post_federation(...)   (TAP's distillation stage)
    optional: method.adaptation_state(...)  (init for fast adaptation on unseen tasks)
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Protocol, runtime_checkable

import torch
from pydantic import BaseModel

from .sample import MethodSample, Sample


@dataclass
class Message:
    """Tensors plus small JSON metadata exchanged between a client and the server."""

    tensors: dict[str, torch.Tensor] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)

    def num_bytes(self) -> int:
        """Bytes on the wire: tensor payloads at their dtype plus the JSON metadata."""
        payload = sum(t.numel() * t.element_size() for t in self.tensors.values())
        return int(payload + len(json.dumps(self.metadata, sort_keys=True, default=str).encode()))

    def validate(self) -> None:
        """Raise ValueError on a malformed message (wrong types, non-finite values)."""
        if not isinstance(self.tensors, dict) or not isinstance(self.metadata, dict):
            raise ValueError("Message.tensors and Message.metadata must be dicts")
        for k, t in self.tensors.items():
            if not isinstance(k, str) or not isinstance(t, torch.Tensor):
                raise ValueError(f"tensor entry {k!r} is {type(t).__name__}, expected torch.Tensor under a str key")
            if t.is_floating_point() and not bool(torch.isfinite(t).all()):
                raise ValueError(f"tensor {k!r} contains NaN or Inf")
        try:
            json.dumps(self.metadata)
        except TypeError as exc:
            raise ValueError(f"metadata is not JSON-serialisable: {exc}") from None


class State(Message):
    """A client's or the server's persistent state (same shape as a message, never measured as traffic)."""

    def save(self, path: Path) -> None:
        from safetensors.torch import save_file

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tensors = {k: v.detach().contiguous().cpu() for k, v in self.tensors.items()}
        tmp = path.with_suffix(".tmp")
        save_file(tensors, str(tmp), metadata={"json": json.dumps(self.metadata, sort_keys=True)})
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path) -> "State":
        from safetensors import safe_open

        tensors = {}
        with safe_open(str(path), framework="pt") as f:
            meta = json.loads((f.metadata() or {}).get("json", "{}"))
            for k in f.keys():
                tensors[k] = f.get_tensor(k)
        return cls(tensors=tensors, metadata=meta)


@dataclass(frozen=True)
class ClientContext:
    """Who and when a client-side call is for. ``seed`` is already mixed with client and round."""

    client_id: int
    model_name: str
    architecture: str
    round_idx: int
    seed: int
    device: str = "cpu"


@dataclass(frozen=True)
class FederationContext:
    """What a method may know about the federation before it starts (no data, no tasks)."""

    benchmark: str
    modality: str
    clients: list[int]
    allocation: dict[int, str]
    architectures: dict[int, str]
    rounds: int
    local_steps: int
    batch_size: int
    seed: int
    device: str
    public_data: Callable[[int], list[Sample]]  # n -> public items (synthetic or real public mix)
    workdir: Path


@runtime_checkable
class Method(Protocol):
    """A PFL method. See the module docstring for when each call happens."""

    name: ClassVar[str]
    version: ClassVar[str]
    config: BaseModel

    def setup(self, federation: FederationContext) -> None: ...

    def init_client(self, ctx: ClientContext) -> State: ...

    def init_server(self) -> State: ...

    def client_update(
        self, ctx: ClientContext, state: State, message: Message | None, batches: Iterable[Sequence[MethodSample]]
    ) -> tuple[Message, State]: ...

    def aggregate(self, round_idx: int, server_state: State, uploads: dict[int, Message]) -> tuple[dict[int, Message], State]: ...

    def predict(self, ctx: ClientContext, state: State, queries: Sequence[MethodSample]) -> list[str]: ...


@runtime_checkable
class PostFederation(Protocol):
    """Optional stage after the last round (TAP's post-FL distillation)."""

    def post_federation(self, federation: FederationContext, client_states: dict[int, State], server_state: State) -> dict[int, State]: ...


@runtime_checkable
class AdaptationInit(Protocol):
    """Optional: the starting state for fast adaptation on unseen tasks (spec A12)."""

    def adaptation_state(self, architecture: str, client_states: dict[int, State], server_state: State) -> State: ...


def mixed_seed(*parts: int) -> int:
    """A 63-bit seed from several integers (run seed, client, round): same inputs, same seed."""
    import numpy as np

    return int(np.random.SeedSequence([abs(int(p)) for p in parts]).generate_state(2, dtype=np.uint32).view(np.uint64)[0] >> 1)


def is_finite_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)
