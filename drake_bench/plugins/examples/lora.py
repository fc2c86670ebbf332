"""``lora-example``: FedAvg of a LoRA adapter within each architecture, blended with each client's own.

A complete LoRA method plugin on the package's public model API, small enough to read in five
minutes. Every client has its own LoRA adapter over a frozen base that the clients of its
architecture share (``ModelPool``). In a round a client starts from a blend of its own adapter and
the last average of its architecture's adapters (``own_weight``), trains it on its batches
(``train_step``) and uploads it, whole; it answers queries with it (``predict``) until the next
round. The server averages the uploads of each architecture (adapters of different architectures
have different shapes) and sends every client its architecture's average. ``own_weight=0`` is
FedAvg of the adapter (FedIT), ``own_weight=1`` local fine-tuning with nothing shared (SFT).
``docs/writing-a-method.md`` walks through it; copy it as the start of a method that trains the
zoo's models.
"""

from __future__ import annotations

import torch
from pydantic import BaseModel, Field

import drake_bench.models as models  # the public model API: ModelPool, lora_config, train_step, predict
from drake_bench.models import identity  # what fixes the zoo's weights; the engine's inference settings
from drake_bench.plugins.protocol import ClientContext, FederationContext, Message, MethodMeta, ModelIdentity, State


class LoRAExample:
    meta = MethodMeta(
        name="lora-example",
        version="1.0",
        summary="FedAvg of one LoRA adapter per architecture, blended with each client's own (example).",
    )

    class Config(BaseModel):
        rank: int = Field(8, ge=1, description="LoRA rank r of every adapted linear layer of the language model.")
        alpha: int = Field(
            16, ge=1, description="LoRA scaling numerator: the adapter's update is scaled by alpha / rank."
        )
        learning_rate: float = Field(
            3e-3,
            gt=0,
            description="AdamW learning rate of the local training (constant; "
            "3e-3 moves the tiny zoo models within a round).",
        )
        own_weight: float = Field(
            0.5,
            ge=0,
            le=1,
            description="Weight of the client's own adapter in the blend a "
            "round starts from (0: its architecture's average, FedAvg; 1: no sharing).",
        )

    def __init__(self, config: Config | None = None):
        self.config = config or self.Config()

    # -- what the models are (optional ReportsModels): asked before setup, recorded in the result file -------
    def model_identity(self, model_name: str) -> ModelIdentity:
        # a tiny zoo name: the shipped checkpoint's sha256 (drake_bench/models/weights/manifest.json)
        return ModelIdentity(
            architecture=identity.architecture(model_name), weights=identity.model_identity(model_name)
        )

    def evaluation_settings(self) -> dict:
        return identity.evaluation_settings()  # models.predict answers: its decoding, scoring and prompt template

    # -- the protocol -------------------------------------------------------------------------------------------
    def setup(self, federation: FederationContext) -> None:
        self.architectures = dict(federation.architectures)  # aggregate groups the uploads by architecture
        adapter = models.lora_config(r=self.config.rank, alpha=self.config.alpha)
        self.pool = models.ModelPool(federation.allocation, adapter, device=federation.device, seed=federation.seed)

    def init_client(self, ctx: ClientContext) -> State:
        return State(tensors=self.pool.initial_state(ctx.client_id))  # B = 0: the model is the frozen base

    def init_server(self) -> State:
        return State()  # the server keeps nothing between rounds

    def client_update(self, ctx, state, message, batches):
        start = state.tensors
        if message is not None and message.tensors:  # None in round 1 and in fast adaptation
            w = self.config.own_weight
            start = {k: w * v + (1 - w) * message.tensors[k] for k, v in state.tensors.items()}
        self.pool.set_state(ctx.client_id, start)
        with self.pool.use(ctx.client_id) as model:  # the client's adapter in its architecture's base
            params = self.pool.trainable_parameters(ctx.client_id)  # the live adapter; a fresh optimiser per client
            optimizer = torch.optim.AdamW(params, lr=self.config.learning_rate, weight_decay=0.0)
            for batch in batches:
                if batch:
                    models.train_step(model, self.pool.processor(ctx.client_id), list(batch), optimizer)
        adapter = self.pool.get_state(ctx.client_id)  # CPU copies of the trained LoRA tensors
        return Message(tensors=adapter), State(tensors=adapter)

    def aggregate(self, round_idx, server_state, uploads):
        groups: dict[str, list[int]] = {}
        for c in uploads:
            groups.setdefault(self.architectures[c], []).append(c)
        messages = {}
        for members in groups.values():
            keys = uploads[members[0]].tensors
            mean = {k: torch.stack([uploads[c].tensors[k] for c in members]).mean(0) for k in keys}
            messages.update({c: Message(tensors=mean) for c in members})
        return messages, server_state

    def predict(self, ctx, state, queries):
        self.pool.set_state(ctx.client_id, state.tensors)
        with self.pool.use(ctx.client_id) as model:
            return models.predict(model, self.pool.processor(ctx.client_id), list(queries))

    # -- optional (AdaptationInit): where fast adaptation on an unseen task starts ------------------------------
    def adaptation_state(self, architecture: str, client_states: dict[int, State], server_state: State) -> State:
        states = [s.tensors for s in client_states.values()]  # the architecture's final adapters, averaged
        return State(tensors={k: torch.stack([s[k] for s in states]).mean(0) for k in states[0]})
