"""Shared machinery of the LoRA-based reference entries: one ModelPool, local training, prediction.

Not part of the protocol (methods are free to do anything); the reference entries use it so
SFT, FedIT and the rest differ only where their papers differ.

Toy-scale optimisation: AdamW at a constant learning rate of 3e-3 for rank-8 LoRA, because the
papers' rates (2e-5 to 3e-4) are for 1B-8B models and barely move a 64-wide model within a round;
a fresh optimiser every round, because the papers do not say whether optimiser moments persist
and a fresh one keeps a client's state to its adapter weights. The measurements behind the rate
are in docs/findings/toy-learning-rate.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field

from drake_bench.benchmarks.sample import MethodSample
from drake_bench.plugins.protocol import ClientContext, FederationContext, Message, ModelIdentity, State


def packed_training_field() -> Any:
    """The ``packed_training`` setting every entry that trains through ``drake_bench.models.train_step`` or
    ``loss_on`` carries (one description, one default)."""
    return Field(
        default=True,
        description="Train on each batch's items packed into one sequence (each with its own positions and a "
        "block-diagonal causal mask) instead of right-padded: the same loss and gradients within float "
        "tolerance, without the padding's compute (models whose attention cannot pack train padded). "
        "False trains padded, as every run did before packing (CHANGELOG), to rerun such a result file "
        "exactly.",
    )


def segment_attention_field() -> Any:
    """The ``segment_attention`` setting of every entry that trains the zoo's models packed (one description, one
    default)."""
    return Field(
        default=True,
        description="In packed training steps, run the language model's attention on each item's own segment (causal "
        "SDPA per item) instead of over the whole packed sequence under a block-diagonal mask: the same "
        "loss and gradients within float tolerance, 1.15x faster steps on the multimodal models "
        "(docs/performance/step_paths.md). False: the masked attention, as runs did before it (CHANGELOG), "
        "to rerun such a result file exactly. Generation and scoring are the same either way.",
    )


def offload_dir_field(what: str = "client adapters") -> Any:
    """The ``offload_dir`` setting of every entry that keeps per-client adapters (one default; ``what`` names
    what it keeps)."""
    return Field(default=None, description=f"Keep {what} on disk in this folder instead of RAM (for many clients).")


def model_loader_field() -> Any:
    """The ``model_loader`` setting of every entry that loads the zoo's models (one description, one default)."""
    return Field(
        default="zoo",
        description="'zoo': the pretrained models named by the allocation; 'testing': untrained tiny "
        "models from drake_bench.models.testing (fast tests only).",
    )


class LoraSettings(BaseModel):
    """Settings shared by the LoRA-based reference entries (SFT, FedIT, zero-shot)."""

    model_config = ConfigDict(extra="forbid")

    rank: int = Field(default=8, ge=1, description="LoRA rank r of every adapted linear layer of the language model.")
    alpha: int = Field(default=16, description="LoRA scaling numerator: the update is scaled by alpha / rank.")
    learning_rate: float = Field(
        default=3e-3,
        gt=0,
        description="AdamW learning rate, constant. 3e-3 was selected on drake-synth 1.9.0's validation split over "
        "3e-4, 1e-3 and 3e-3 at the main job's schedule (leaderboard/tuning/sft-learning-rate/tuning.json); "
        "the papers' 2e-5 to 3e-4 are for 1B-8B models.",
    )
    weight_decay: float = Field(default=0.0, description="AdamW weight decay on the adapter weights.")
    offload_dir: str | None = offload_dir_field()
    packed_training: bool = packed_training_field()
    segment_attention: bool = segment_attention_field()
    model_loader: Literal["zoo", "testing"] = model_loader_field()


class LoraClients:
    """A pool of per-client LoRA adapters over shared frozen bases, with train and predict helpers.

    ``settings`` is any config with ``offload_dir`` and ``model_loader`` (and, for the default
    hooks, ``rank``, ``alpha``, ``learning_rate`` and ``weight_decay``, as :class:`LoraSettings`).
    A method with other adapters or optimiser settings subclasses it and overrides the hooks
    :meth:`adapter_config`, :meth:`post_attach`, :meth:`param_groups` and :meth:`optimizer`; :meth:`train` calls
    ``after_step`` after every step (FedMosaic computes its relevance gradient there).
    """

    def __init__(self, settings: BaseModel, adapter_names: Sequence[str] = ("default",)):
        self.settings = settings
        self.adapter_names = tuple(adapter_names)
        self.pool = None

    # ------------------------------------------------------------------ hooks
    def adapter_config(self, model_name: str) -> Any:
        """The peft config of the adapters on ``model_name``: LoRA of the settings' rank and alpha on the
        language model's linear layers."""
        from drake_bench.models import lora_config

        return lora_config(r=self.settings.rank, alpha=self.settings.alpha)

    def post_attach(self, model: Any) -> None:
        """Called on every new PeftModel before its initial adapter states are captured (e.g. to tie weights)."""

    def client_ranks(self, federation: FederationContext) -> dict[int, int] | None:
        """Per-client LoRA ranks within an architecture (client -> rank), or None: every client the adapter
        config's rank. FedMosaic's ``client_ranks`` setting overrides this (App. A.24's rank-heterogeneous runs)."""
        return None

    #: Extra ``{weight name: rank axes}`` for adapters with weights beyond LoRA's A (rows) and B (columns), used
    #: to nest a smaller rank's initial adapter in the largest one (see drake_bench/models/pool.py).
    rank_axes: dict[str, tuple[int, ...]] = {}

    def param_groups(self, model: Any) -> list[dict[str, Any]]:
        """AdamW parameter groups of a training round: every trainable parameter at the settings' rate and decay."""
        params = [p for p in model.parameters() if p.requires_grad]
        return [{"params": params, "lr": self.settings.learning_rate, "weight_decay": self.settings.weight_decay}]

    def optimizer(self, model: Any) -> torch.optim.Optimizer:
        """The optimiser of one training round, built fresh for every round: AdamW over :meth:`param_groups`.
        pFedMMA overrides it with its paper's SGD."""
        return torch.optim.AdamW(self.param_groups(model))

    # ------------------------------------------------------------------ pool
    @property
    def loader(self) -> Callable[..., tuple[Any, Any]]:
        """What loads a base model and its processor: the zoo's pretrained models, or untrained test models."""
        from drake_bench.models import load_base
        from drake_bench.models.testing import toy_loader

        return load_base if self.settings.model_loader == "zoo" else toy_loader

    def setup(self, federation: FederationContext) -> None:
        from drake_bench.models import ModelPool

        self.pool = ModelPool(
            federation.allocation,
            self.adapter_config,
            device=federation.device,
            offload_dir=self.settings.offload_dir,
            adapter_names=self.adapter_names,
            seed=federation.seed,
            loader=self.loader,
            post_attach=self.post_attach,
            client_ranks=self.client_ranks(federation),
            rank_axes=self.rank_axes,
            segment_attention=getattr(self.settings, "segment_attention", True),
        )
        self.federation = federation

    def initial(self, client: int, adapter: str = "default") -> dict[str, torch.Tensor]:
        return self.pool.initial_state(client, adapter)

    def load(self, client: int, state: State, prefix: str = "") -> None:
        """Put a State's tensors (optionally under ``<adapter>/`` prefixes) into the pool."""
        for a in self.adapter_names:
            p = f"{a}/" if prefix or len(self.adapter_names) > 1 else ""
            tensors = {k[len(p) :]: v for k, v in state.tensors.items() if k.startswith(p)} if p else state.tensors
            self.pool.set_state(client, tensors, adapter=a)

    def dump(self, client: int) -> dict[str, torch.Tensor]:
        if len(self.adapter_names) == 1:
            return self.pool.get_state(client, self.adapter_names[0])
        return {f"{a}/{k}": v for a in self.adapter_names for k, v in self.pool.get_state(client, a).items()}

    def train(
        self,
        ctx: ClientContext,
        batches: Iterable[Sequence[MethodSample]],
        adapter: str | None = None,
        after_step: Callable[[int, Sequence[MethodSample]], None] | None = None,
    ) -> float:
        """Local training on the client's batches (active adapter ``adapter``) with a fresh :meth:`optimizer`
        (AdamW over :meth:`param_groups` unless overridden); returns the mean loss. ``after_step(step, batch)`` runs after every step
        (steps count the non-empty batches from 1), with the client's model still swapped in."""
        from drake_bench.models import train_step
        from drake_bench.models.engine import packing

        pool = self.pool
        with pool.use(ctx.client_id) as model:
            if adapter is not None:
                model.set_adapter(pool.slot(ctx.client_id, adapter))
            opt = self.optimizer(model)
            losses: list[float] = []
            for batch in batches:
                if not len(batch):
                    continue
                losses.append(
                    train_step(
                        model,
                        pool.processor(ctx.client_id),
                        list(batch),
                        opt,
                        packed=packing(getattr(self.settings, "packed_training", True)),
                    )
                )
                if after_step is not None:
                    after_step(len(losses), batch)
            if adapter is not None:
                model.set_adapter(pool.slot(ctx.client_id, self.adapter_names[0]))
        return float(sum(losses) / len(losses)) if losses else 0.0

    def train_group(
        self, ctxs: Sequence[ClientContext], batches: Sequence[Iterable[Sequence[MethodSample]]]
    ) -> list[float]:
        """:meth:`train` for several clients of one architecture in one pass per step (client batching,
        ``drake_bench.models.grouped``): each client trains its own adapter with its own fresh :meth:`optimizer`
        on its own batches, step k of every client that has a k-th non-empty batch in one forward and backward;
        returns each client's mean loss, as :meth:`train` would within float tolerance. Needs packed training and
        a single-adapter pool (a method with ``after_step`` work trains its clients one by one)."""
        from drake_bench.errors import DrakeBenchError
        from drake_bench.models.grouped import train_group_step

        if not getattr(self.settings, "packed_training", True):
            raise DrakeBenchError(
                "client batching packs each client's batch into one row; packed_training=False "
                "trains padded, so run it without --client-batching"
            )
        if len(self.adapter_names) != 1:
            raise DrakeBenchError(
                f"client batching trains one adapter per client; this pool has {list(self.adapter_names)}"
            )
        pool = self.pool
        clients = [c.client_id for c in ctxs]
        steps = [[list(b) for b in bs if len(b)] for bs in batches]
        with pool.use_group(clients) as (model, slots):
            optimizers = []
            for s in slots:  # each optimiser over its own slot (param_groups reads what is trainable)
                model.base_model.set_adapter(s)
                optimizers.append(self.optimizer(model))
            model.base_model.set_adapter(slots)
            processor = pool.processor(clients[0])
            losses: list[list[float]] = [[] for _ in clients]
            for k in range(max((len(s) for s in steps), default=0)):
                rows = [i for i, s in enumerate(steps) if k < len(s)]
                out = train_group_step(
                    model,
                    processor,
                    [steps[i][k] for i in rows],
                    [slots[i] for i in rows],
                    [optimizers[i] for i in rows],
                )
                for i, loss in zip(rows, out):
                    losses[i].append(loss)
        return [float(sum(x) / len(x)) if x else 0.0 for x in losses]

    def predict(self, ctx: ClientContext, queries: Sequence[MethodSample]) -> list[str]:
        from drake_bench.models import predict

        with self.pool.use(ctx.client_id) as model:
            return predict(model, self.pool.processor(ctx.client_id), list(queries))


class CanonicalLoraClients(LoraClients):
    """:class:`LoraClients` whose client states use architecture-independent tensor names.

    Methods that average adapter parts across architectures (pFedMMA's shared projections, HeteroTune's share
    slots) cannot key states by peft's module paths, which differ per architecture. A subclass sets
    ``canonical_keys = staticmethod(f)`` (f: model -> {peft key: canonical key}); this class builds that map once per architecture,
    refuses a map that misses an adapter tensor, and converts states both ways.
    """

    canonical_keys: Callable[[Any], dict[str, str]]

    def __init__(self, settings: BaseModel, adapter_names: Sequence[str] = ("default",)):
        super().__init__(settings, adapter_names)
        self._keys: dict[str, dict[str, str]] = {}

    def key_map(self, client: int) -> dict[str, str]:
        """peft key -> canonical key for the client's architecture (built once per architecture)."""
        arch = self.pool.architecture(client)
        if arch not in self._keys:
            mapping = self.canonical_keys(self.pool.model_for(client))
            peft_keys = set(self.pool.initial_state(client))
            if set(mapping) != peft_keys:
                raise RuntimeError(
                    f"{arch}: adapter tensors {sorted(peft_keys ^ set(mapping))[:4]} have no canonical name"
                )
            self._keys[arch] = mapping
        return self._keys[arch]

    def initial_canonical(self, client: int) -> dict[str, torch.Tensor]:
        names = self.key_map(client)
        return {names[k]: v for k, v in self.initial(client).items()}

    def load_canonical(self, client: int, tensors: dict[str, torch.Tensor]) -> None:
        names = self.key_map(client)
        missing = sorted(set(names.values()) - set(tensors))
        extra = sorted(set(tensors) - set(names.values()))
        if missing or extra:
            raise ValueError(f"client {client}: state lacks {missing[:4]} / has unknown {extra[:4]}")
        self.pool.set_state(client, {k: tensors[c] for k, c in names.items()})

    def dump_canonical(self, client: int) -> dict[str, torch.Tensor]:
        names = self.key_map(client)
        return {names[k]: v for k, v in self.pool.get_state(client).items()}


def average(
    states: Sequence[dict[str, torch.Tensor]], weights: Sequence[float] | None = None
) -> dict[str, torch.Tensor]:
    """Weighted average of equally-shaped tensor dicts (FedAvg)."""
    if not states:
        raise ValueError("nothing to average")
    w = torch.tensor(weights if weights is not None else [1.0] * len(states), dtype=torch.float64)
    w = w / w.sum()
    return {k: sum(float(wi) * s[k].double() for wi, s in zip(w, states)).to(states[0][k].dtype) for k in states[0]}


class LoraMethod:
    """Shared plumbing of single-adapter LoRA methods (SFT, FedIT): everything but the round logic.

    An implementation convenience for the reference entries, not part of the public protocol.
    """

    Config = LoraSettings

    def __init__(self, config: BaseModel | None = None):
        self.config = config or self.Config()
        self.clients = LoraClients(self.config)

    def model_identity(self, model_name: str) -> ModelIdentity:
        """Zoo models: the architecture key and what fixes the weights (pretraining recipe or source)."""
        from drake_bench.models.identity import architecture, model_identity

        return ModelIdentity(architecture=architecture(model_name), weights=model_identity(model_name))

    def evaluation_settings(self) -> dict:
        """The zoo engine's greedy decoding, cloze choice scoring and prompt template version."""
        from drake_bench.models.identity import evaluation_settings

        return evaluation_settings()

    def setup(self, federation: FederationContext) -> None:
        self.clients.setup(federation)
        self.arch = dict(federation.architectures)

    def init_client(self, ctx: ClientContext) -> State:
        return State(tensors=self.clients.initial(ctx.client_id))

    def init_server(self) -> State:
        return State()

    def predict(self, ctx: ClientContext, state: State, queries: Sequence[MethodSample]) -> list[str]:
        self.clients.load(ctx.client_id, state)
        return self.clients.predict(ctx, queries)

    def adaptation_state(self, architecture: str, client_states: dict[int, State], server_state: State) -> State:
        """The within-architecture average of the final local adapters, the paper's "aggregated local
        models" of Fig. 7 (docs/design-notes.md#adaptation-init)."""
        return State(tensors=average([s.tensors for s in client_states.values()]))


class GroupedLoraRounds:
    """``client_update`` and ``client_update_group`` (the optional ``TrainsClientsTogether`` call behind
    ``--client-batching``) of a :class:`LoraMethod` whose round is: load :meth:`round_start`, train locally, return
    :meth:`round_result`. The grouped call loads every client's start, trains them together
    (:meth:`LoraClients.train_group`) and returns each client's result, so both paths share one definition of the
    round and differ only in how the local steps are batched."""

    clients: LoraClients

    def round_start(self, ctx: ClientContext, state: State, message: Message | None) -> State:
        """The adapter the client's local training starts from this round."""
        raise NotImplementedError

    def round_result(self, ctx: ClientContext, loss: float) -> tuple[Message, State]:
        """The upload and the new state after local training (the trained adapter is in the pool)."""
        raise NotImplementedError

    def client_update(
        self, ctx: ClientContext, state: State, message: Message | None, batches: Iterable[Sequence[MethodSample]]
    ) -> tuple[Message, State]:
        self.clients.load(ctx.client_id, self.round_start(ctx, state, message))
        return self.round_result(ctx, self.clients.train(ctx, batches))

    def client_update_group(
        self,
        ctxs: Sequence[ClientContext],
        states: Sequence[State],
        messages: Sequence[Message | None],
        batches: Sequence[Iterable[Sequence[MethodSample]]],
    ) -> list[tuple[Message, State]]:
        for ctx, state, message in zip(ctxs, states, messages):
            self.clients.load(ctx.client_id, self.round_start(ctx, state, message))
        losses = self.clients.train_group(ctxs, batches)
        return [self.round_result(ctx, loss) for ctx, loss in zip(ctxs, losses)]
