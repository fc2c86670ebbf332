"""The round the four dual-adapter baselines share, and the peft plumbing that activates, weights and freezes adapters.

Every client's model is its architecture's frozen base with several *named peft LoRA adapters* on the language
model's linear layers (one :class:`~drake_bench.models.ModelPool` slot each): ``global`` (what the server averages),
``local`` (never uploaded) and, for FedDAT, ``frozen`` (the global adapter as received). A forward pass with several
adapters active adds each one's update, scaled by a per-adapter weight (peft's ``set_scale``)::

    h = W0 x + sum_a  w_a * (alpha / r) * B_a A_a x

so "the global adapter at weight 1 - a plus the local one at weight a" is one forward pass through one model,
with no hand-rolled module (:func:`combination`).

The shared round (:class:`DualAdapterMethod`):

* the server keeps nothing a client needs; it averages the uploaded ``global`` adapters of the clients of each
  architecture with equal weights (FedIT's rule, Fed-ET's grouping: the FedMosaic paper runs these baselines
  "combined with Fed-ET", App. A.6) and sends each client its architecture's mean (:func:`average_by_architecture`);
  different architectures are never averaged together;
* a client starts its round from that mean as its ``global`` adapter (its own initial one in round 1), trains as
  its method says, and uploads the ``global`` adapter only: uplink = downlink = the float32 global adapter plus
  the 2 bytes of empty metadata, the ``local`` adapter never travels;
* every round builds a fresh AdamW per trained adapter at the settings' rate (the LoRA baselines' toy
  convention, methods/lora_clients.py); the evaluated model is the client's state after its local training
  (docs/design-notes.md#evaluated-model), combined as its method says (:meth:`DualAdapterMethod.inference_weights`);
* fast adaptation starts from the architecture's last averaged global adapter (docs/design-notes.md#adaptation-init,
  "baselines with an explicit global adapter: that adapter"), the local adapter from its method's initialisation.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any, Callable, ClassVar, Literal

import torch
from pydantic import ConfigDict

from drake_bench.benchmarks.sample import MethodSample
from drake_bench.plugins.protocol import ClientContext, FederationContext, Message, State

from ..lora_clients import LoraClients, LoraMethod, LoraSettings, average

GLOBAL, LOCAL, FROZEN = "global", "local", "frozen"

#: The FedMosaic paper's LoRA settings for these baselines (its App. A.6, the same for every method): rank 128 and
#: lr 2e-5 for the multi-modal models, rank 16 and lr 3e-4 for text LLMs; alpha 2 x rank (LLaVA's default).
PAPER_MLLM: dict[str, Any] = dict(rank=128, alpha=256, learning_rate=2e-5)
PAPER_LLM: dict[str, Any] = dict(rank=16, alpha=32, learning_rate=3e-4)


class DualSettings(LoraSettings):
    """The LoRA baselines' settings (rank, alpha, AdamW rate, ...). The defaults are the toy profile of the tiny zoo
    models (rank 8, alpha 16, lr 3e-3, as SFT and FedIT use); :meth:`paper_mllm` and :meth:`paper_llm` give the
    FedMosaic paper's settings for real models. Each method adds its original paper's hyperparameters."""

    model_config = ConfigDict(extra="forbid")

    @classmethod
    def toy(cls, **overrides: Any) -> "DualSettings":
        """The toy CPU profile: the defaults (rank 8, alpha 16, lr 3e-3) and the method's paper values."""
        return cls(**overrides)

    @classmethod
    def paper_mllm(cls, **overrides: Any) -> "DualSettings":
        """The FedMosaic paper's multi-modal setting (App. A.6): rank 128, alpha 256, lr 2e-5."""
        return cls(**{**PAPER_MLLM, **overrides})

    @classmethod
    def paper_llm(cls, **overrides: Any) -> "DualSettings":
        """The FedMosaic paper's text-LLM setting (App. A.6): rank 16, alpha 32, lr 3e-4."""
        return cls(**{**PAPER_LLM, **overrides})


# ---------------------------------------------------------------------------------------------- peft plumbing
def lora_layers(model: Any) -> list[Any]:
    """Every peft LoRA layer of ``model`` (one per adapted linear)."""
    from peft.tuners.lora import LoraLayer

    return [m for m in model.modules() if isinstance(m, LoraLayer)]


def adapter_parameters(model: Any, adapter: str) -> list[torch.nn.Parameter]:
    """The LoRA A and B matrices of one named adapter, in the model's parameter order."""
    pattern = re.compile(rf"\.lora_[AB]\.{re.escape(adapter)}\.")
    return [p for n, p in model.named_parameters() if pattern.search(n)]


@contextlib.contextmanager
def combination(model: Any, weights: Mapping[str, float], trainable: Collection[str] = ()) -> Iterator[Any]:
    """Run ``model`` with the adapters of ``weights`` active at once, each update scaled by its weight, and only
    the adapters in ``trainable`` requiring gradients; on exit every scale is 1 again and the model's first adapter
    alone is active (the pool's resting state)."""
    names = list(weights)
    unknown = sorted(set(trainable) - set(names))
    if unknown:
        raise ValueError(f"trainable adapters {unknown} are not among the active ones {names}")
    first = next(iter(model.peft_config))
    layers = lora_layers(model)
    model.base_model.set_adapter(names)  # peft: the named adapters active (and requiring grad)
    frozen = [p for a in names if a not in trainable for p in adapter_parameters(model, a)]
    for p in frozen:
        p.requires_grad_(False)
    for layer in layers:
        for a, w in weights.items():
            layer.set_scale(a, float(w))
    try:
        yield model
    finally:
        for layer in layers:
            for a in names:
                layer.set_scale(a, 1.0)
        model.set_adapter(first)


@contextlib.contextmanager
def detached(model: Any, adapter: str) -> Iterator[None]:
    """Stop gradients through one adapter's branch (its B A x term), as FedDPA's code detaches the other adapter's
    output; the base path still carries them."""
    hooks = [
        layer.lora_B[adapter].register_forward_hook(lambda _m, _i, out: out.detach())
        for layer in lora_layers(model)
        if adapter in layer.lora_B
    ]
    try:
        yield
    finally:
        for h in hooks:
            h.remove()


def adamw(model: Any, adapter: str, settings: LoraSettings) -> torch.optim.AdamW:
    """A fresh AdamW over one adapter's matrices at the settings' rate and decay (as LoraClients.param_groups)."""
    return torch.optim.AdamW(
        [
            {
                "params": adapter_parameters(model, adapter),
                "lr": settings.learning_rate,
                "weight_decay": settings.weight_decay,
            }
        ]
    )


def optimizer_step(loss: torch.Tensor, optimizer: torch.optim.Optimizer) -> None:
    """Backward, step, clear: the same calls as drake_bench.models.train_step."""
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def task_loss(model: Any, processor: Any, batch: Sequence[MethodSample], packed: bool = True) -> torch.Tensor:
    """The mean answer-token cross-entropy of the model as it stands (drake_bench.models.loss_on), in train mode;
    ``packed``: the settings' ``packed_training``."""
    from drake_bench.models import loss_on
    from drake_bench.models.engine import packing

    model.train()
    return loss_on(model, processor, list(batch), packed=packing(packed))


def train_phase(
    model: Any,
    processor: Any,
    batches: Sequence[Sequence[MethodSample]],
    weights: Mapping[str, float],
    adapter: str,
    settings: LoraSettings,
    extra: Callable[[], torch.Tensor] | None = None,
) -> list[float]:
    """One pass over ``batches`` training ``adapter`` alone (fresh AdamW) with the adapters of ``weights`` active;
    ``extra()`` is added to every step's loss (e.g. a proximal term). Returns the task losses."""
    losses = []
    with combination(model, weights, trainable=[adapter]):
        opt = adamw(model, adapter, settings)
        for batch in batches:
            loss = task_loss(model, processor, batch, settings.packed_training)
            optimizer_step(loss + extra() if extra is not None else loss, opt)
            losses.append(float(loss.detach()))
    return losses


# ---------------------------------------------------------------------------------------------- state
def split(tensors: Mapping[str, torch.Tensor]) -> dict[str, dict[str, torch.Tensor]]:
    """``{"global/k": t, "local/k": u, "refs": r}`` -> ``{"global": {k: t}, "local": {k: u}, "": {"refs": r}}``."""
    out: dict[str, dict[str, torch.Tensor]] = {}
    for key, t in tensors.items():
        head, sep, rest = key.partition("/")
        if sep:
            out.setdefault(head, {})[rest] = t
        else:
            out.setdefault("", {})[key] = t
    return out


def join(parts: Mapping[str, Mapping[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """The inverse of :func:`split`."""
    return {(f"{a}/{k}" if a else k): t for a, tensors in parts.items() for k, t in tensors.items()}


def clone(tensors: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in tensors.items()}


def average_by_architecture(
    uploads: Mapping[int, Message], architectures: Mapping[int, str]
) -> tuple[dict[int, Message], dict[str, dict[str, torch.Tensor]]]:
    """Fed-ET's grouping with FedIT's rule: the equal-weight mean of the uploads of each architecture, sent to each
    of its clients. Returns the messages and each architecture's mean. Uploads of different architectures are never
    averaged together (they differ in shape, and Fed-ET aggregates "among homogeneous clients")."""
    groups: dict[str, list[int]] = {}
    for c in sorted(uploads):
        groups.setdefault(architectures[c], []).append(c)
    messages: dict[int, Message] = {}
    means: dict[str, dict[str, torch.Tensor]] = {}
    for arch, members in groups.items():
        means[arch] = average([uploads[c].tensors for c in members])
        for c in members:
            messages[c] = Message(tensors=means[arch])
    return messages, means


# ---------------------------------------------------------------------------------------------- the round
class DualAdapterMethod(LoraMethod):
    """The round shared by the dual-adapter baselines (module docstring); subclasses set ``meta``, ``Config``,
    ``adapters`` and ``local_init`` and implement :meth:`train_round` and :meth:`inference_weights`."""

    Config = DualSettings
    adapters: ClassVar[tuple[str, ...]] = (GLOBAL, LOCAL)
    #: how a client's local adapter starts: "global" = a copy of the global adapter's initialisation (Ditto's v = w
    #: at start), "own" = its own seeded LoRA initialisation (random A, zero B), as a fresh peft adapter starts.
    local_init: ClassVar[Literal["global", "own"]] = "own"

    def __init__(self, config: DualSettings | None = None):
        self.config = config or self.Config()
        self.clients = LoraClients(self.config, adapter_names=self.adapters)

    # -- to implement ----------------------------------------------------------------------------------------
    def train_round(
        self,
        ctx: ClientContext,
        model: Any,
        processor: Any,
        batches: list[list[MethodSample]],
        parts: dict[str, dict[str, torch.Tensor]],
        updates: int,
    ) -> dict[str, Any]:
        """Train the client's adapters (already loaded into ``model``, the global one from the server's message)
        on this round's ``batches``; ``updates`` counts the client's earlier rounds. Returns metadata to record."""
        raise NotImplementedError

    def inference_weights(self, ctx: ClientContext, state: State) -> Mapping[str, float]:
        """The adapters the client predicts with and their weights (one set for every query)."""
        raise NotImplementedError

    def start_parts(self, parts: dict[str, dict[str, torch.Tensor]]) -> dict[str, dict[str, torch.Tensor]]:
        """The client's adapters at the start of its round, once the server's global adapter is in (override to
        derive more, as FedDAT's frozen copy of the global adapter)."""
        return parts

    # -- protocol --------------------------------------------------------------------------------------------
    def setup(self, federation: FederationContext) -> None:
        self.clients.setup(federation)
        self.arch = dict(federation.architectures)

    def initial_parts(
        self, client: int, global_adapter: Mapping[str, torch.Tensor] | None = None
    ) -> dict[str, dict[str, torch.Tensor]]:
        """Every adapter of a client before its first round (``global_adapter`` replaces the global init)."""
        glob = clone(global_adapter) if global_adapter is not None else self.clients.initial(client, GLOBAL)
        parts = {
            GLOBAL: glob,
            LOCAL: clone(glob) if self.local_init == "global" else self.clients.initial(client, LOCAL),
        }
        for extra in self.adapters:
            parts.setdefault(extra, clone(glob))  # FedDAT's frozen copy of the global adapter
        return parts

    def init_client(self, ctx: ClientContext) -> State:
        return State(tensors=join(self.initial_parts(ctx.client_id)), metadata={"updates": 0})

    def init_server(self) -> State:
        return State()

    def client_update(
        self, ctx: ClientContext, state: State, message: Message | None, batches: Iterable[Sequence[MethodSample]]
    ) -> tuple[Message, State]:
        c = ctx.client_id
        parts = split(state.tensors)
        if message is not None and message.tensors:
            parts[GLOBAL] = clone(message.tensors)
        parts = self.start_parts(parts)
        self.clients.load(c, State(tensors=join(parts)))
        batches = [list(b) for b in batches if len(b)]
        updates = int(state.metadata.get("updates", 0))
        with self.clients.pool.use(c) as model:
            meta = self.train_round(ctx, model, self.clients.pool.processor(c), batches, parts, updates)
        adapters = self.clients.dump(c)
        own = {k: v for k, v in parts.get("", {}).items()}
        own.update(meta.pop("tensors", {}))
        upload = Message(tensors={k[len(GLOBAL) + 1 :]: v for k, v in adapters.items() if k.startswith(GLOBAL + "/")})
        return upload, State(tensors={**adapters, **own}, metadata={"updates": updates + 1, **meta})

    def aggregate(
        self, round_idx: int, server_state: State, uploads: dict[int, Message]
    ) -> tuple[dict[int, Message], State]:
        messages, means = average_by_architecture(uploads, self.arch)
        server = dict(server_state.tensors)
        server.update({f"{arch}/{k}": v for arch, mean in means.items() for k, v in mean.items()})
        return messages, State(tensors=server, metadata={"round": round_idx + 1})

    def predict(self, ctx: ClientContext, state: State, queries: Sequence[MethodSample]) -> list[str]:
        from drake_bench.models import predict

        c = ctx.client_id
        self.clients.load(c, state)
        weights = self.inference_weights(ctx, state)
        with self.clients.pool.use(c) as model, combination(model, weights):
            return predict(model, self.clients.pool.processor(c), list(queries))

    def adaptation_state(self, architecture: str, client_states: dict[int, State], server_state: State) -> State:
        """The architecture's last averaged global adapter (the mean of its clients' final global adapters when the
        server has none yet); the local adapter starts as the method initialises it."""
        prefix = f"{architecture}/"
        glob = {k[len(prefix) :]: v for k, v in server_state.tensors.items() if k.startswith(prefix)}
        members = sorted(client_states) or sorted(c for c, a in self.arch.items() if a == architecture)
        if not glob:
            glob = average([split(s.tensors)[GLOBAL] for s in client_states.values()])
        return State(tensors=join(self.initial_parts(members[0], glob)), metadata={"updates": 1})
