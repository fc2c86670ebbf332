"""FedMKT (Fan et al., COLING 2025): mutual knowledge transfer between a server model and client models via logits."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from pydantic import ConfigDict, Field

from drake_bench.benchmarks.sample import MethodSample
from drake_bench.plugins.protocol import ClientContext, Diagnostic, FederationContext, Message, MethodMeta, State

from ..lora_clients import average
from .alignment import TokenAligner
from .base import (
    DistillationMethod,
    DistillSettings,
    Rows,
    answer_counts,
    item_cross_entropy,
    prefixed,
    public_logits,
    soft_cross_entropy,
    sparse_probabilities,
    steps_for,
    unprefixed,
)

LOGITS, INDICES, CE = "logits", "indices", "ce"
OWN, SERVER = "own", "server"


@dataclasses.dataclass
class TopK:
    """Top-k rows of a window (logits and vocabulary ids per answer position, item after item) and each item's mean
    answer cross-entropy: what FedMKT exchanges (``per_step_logits``, ``per_step_indices``, ``metric``)."""

    logits: Rows
    indices: Rows
    ce: torch.Tensor

    def tensors(self) -> dict[str, torch.Tensor]:
        return {LOGITS: self.logits.values, INDICES: self.indices.values, CE: self.ce}

    @classmethod
    def from_tensors(cls, tensors: dict[str, torch.Tensor], counts: list[int]) -> "TopK":
        return cls(Rows(tensors[LOGITS], counts), Rows(tensors[INDICES], counts), tensors[CE])


def min_ce_targets(candidates: Sequence[TopK], vocab: int, temperature: float = 1.0) -> tuple[torch.Tensor, list[int]]:
    """FedMKT's Min-CE selection (its trainer's ``distill_strategy="greater"``): for every item, the candidate whose
    mean answer cross-entropy is lowest (ties: the first, the receiver's own); returns the chosen rows as full
    distributions (positions x vocab, item after item) and the chosen candidate of each item."""
    ce = torch.stack([c.ce.float() for c in candidates])  # candidates x items
    chosen = [int(i) for i in ce.argmin(0)]
    rows = [
        sparse_probabilities(candidates[k].logits.item(i), candidates[k].indices.item(i), vocab, temperature)
        for i, k in enumerate(chosen)
    ]
    return torch.cat(rows), chosen


class FedMKT(DistillationMethod):
    """FedMKT: a server model and the client models teach each other through selected top-k logits on public data
    (Fan et al., FedMKT: Federated Mutual Knowledge Transfer for Large and Small Language Models, COLING 2025).

    **Roles.** FedMKT's server holds a large LM and its clients small LMs, all with LoRA. Here the server's model is
    ``server_model`` (default: the allocation's largest base, by parameter count) with a LoRA adapter of its own, and
    every client, large or small, is an SLM. Nothing is averaged: only logits travel (the paper's default; its
    ``post_fedavg`` option is off).

    **Round** (the public code, FATE-LLM ``fedmkt.py``: ``FedMKTSLM.train`` / ``FedMKTLLM.train``):

    1. client k (from its second round): distils its adapter on the previous round's public window toward the
       Min-CE target: per item, the server's aligned top-k distribution or its own, whichever has the lower mean
       answer cross-entropy ("Min-CE"); loss = soft cross-entropy -sum_v p_v log q_v (the code's
       ``distill_loss_type="ce"``, ``kd_alpha = 0``: no LM loss term), ``client_epochs`` passes;
    2. client k trains its LoRA on its batches;
    3. client k computes, on this round's window, its top-k logits per answer token and its mean answer
       cross-entropy per item, uploads them and keeps them (FedMosaic Table 15: "stores the logits");
    4. the server computes its own top-k logits and cross-entropies on the window, aligns every client's rows to its
       tokenizer (:mod:`.alignment`), picks per item the candidate of lowest cross-entropy among its own and
       every client's, distils its adapter toward them (``server_epochs`` passes), computes its new top-k logits on the
       window and sends each client those rows aligned to the client's tokenizer, with its cross-entropies.

    The target of a row is the softmax of its k logits at temperature 1, zero elsewhere (the code's data collator).
    Clients predict with their own adapter.

    **Cost.** Uplink: 8 x P x k bytes (float32 logits and int32 ids, P = the window's answer tokens in the client's
    tokenizer) + 4 x items (float32 cross-entropies) + 2 bytes of empty metadata; downlink the same for the server's
    rows, aligned to the client's tokenizer. Client compute: one forward and backward per local step, plus one forward
    over the window ("Logit Extraction") and, from the second round, ``client_epochs`` forward-backward passes over
    it. Server: one frozen base (the server model's) and one adapter.

    Choices ([R] follows a public source, [I] inferred where none says):

    * [R] top-k = 128 (``top_k_logits_keep``), temperature 1, Min-CE ("greater"), soft cross-entropy, kd_alpha = 0,
      one public epoch on each side per round, the same optimiser and rate on public as on private data (the code
      builds both trainers from one set of training arguments).
    * [I] The server model is the allocation's largest architecture: FedMKT's server runs the "large" model and the
      FedMosaic paper's clients are 1B and 3B models, with no model of the server's own.
    * [I] Logits and cross-entropies cover the answer tokens only (the code: every token of the public sequence): the
      prompt positions of multimodal items are image tokens, and the clients' losses score answers only.
    * [I] The server aligns in both directions (the code aligns on the receiver); the rows a client receives are the
      same, computed where every tokenizer is at hand.
    * [I] Client-side distillation uses the server's rows of the previous round's window at the start of the next
      round (the code distils right after the exchange, before the next private epoch: the same order across rounds).
    """

    meta = MethodMeta(
        name="fedmkt",
        version="1.0",
        relative_compute=1.0,
        summary="A server model and the clients exchange top-k public-data logits, each distilling toward the "
        "lowest-cross-entropy ones (Min-CE), with token alignment across tokenizers; no parameter averaging.",
        reference="Fan et al., FedMKT: Federated Mutual Knowledge Transfer for Large and Small Language Models "
        "(COLING 2025)",
    )

    shared_vocabulary: ClassVar[bool] = False

    class Config(DistillSettings):
        model_config = ConfigDict(extra="forbid")
        PAPER_OWN: ClassVar[dict[str, Any]] = {}

        top_k: int = Field(
            default=128, ge=1, description="Logits kept per answer token (the code's top_k_logits_keep)."
        )
        temperature: float = Field(
            default=1.0, gt=0.0, description="Temperature of the softmax over a row's top-k logits (the code's 1)."
        )
        kd_alpha: float = Field(
            default=0.0,
            ge=0.0,
            le=1.0,
            description="Weight of the public items' own answer cross-entropy in the distillation loss (the code's "
            "kd_alpha: 0, pure distillation).",
        )
        server_epochs: int = Field(
            default=1, ge=0, description="Passes of the server's distillation over the round's window (the code's 1)."
        )
        client_epochs: int = Field(
            default=1,
            ge=0,
            description="Passes of a client's distillation over the window it uploaded logits for (the code's 1).",
        )
        server_model: str | None = Field(
            default=None,
            description="The server's model (a zoo name); None: the allocation's largest model by parameter count.",
        )

    # -- set-up ----------------------------------------------------------------------------------------------
    def extra_server_models(self, federation: FederationContext) -> dict[int, str]:
        name = self.config.server_model
        if name is None or name in federation.allocation.values():
            return {}
        return {-(len(set(federation.architectures.values())) + 1): name}

    def setup(self, federation: FederationContext) -> None:
        super().setup(federation)
        pool, name = self.clients.pool, self.config.server_model
        if name is None:
            self.server_slot = self.slot[max(self.slot, key=lambda a: (self.size[a], a))]
        else:
            self.server_slot = min(c for c in pool.clients() if c < 0 and pool.model_name(c) == name)
        self._aligners: dict[tuple[int, int], TokenAligner] = {}

    def aligner(self, sender: int, receiver: int) -> TokenAligner:
        """The token aligner from one pool member's tokenizer to another's (cached per pair of tokenizers)."""
        a, b = self.tokenizer(sender), self.tokenizer(receiver)
        key = (id(a), id(b))
        if key not in self._aligners:
            self._aligners[key] = TokenAligner(a, b)
        return self._aligners[key]

    def align(self, rows: TopK, sender: int, receiver: int, items: Sequence[MethodSample]) -> TopK:
        """``rows`` (on ``sender``'s answer tokens) moved onto ``receiver``'s (identity for one tokenizer)."""
        from drake_bench.models.prompting import target

        aligner = self.aligner(sender, receiver)
        logits, indices = [], []
        for i, item in enumerate(items):
            v, ix = aligner.align(target(item), rows.logits.item(i), rows.indices.item(i))
            logits.append(v)
            indices.append(ix)
        counts = [int(v.shape[0]) for v in logits]
        return TopK(Rows(torch.cat(logits), counts), Rows(torch.cat(indices), counts), rows.ce)

    def topk(self, model: Any, processor: Any, items: Sequence[MethodSample]) -> TopK:
        """The model's top-k logits and ids on every answer token of ``items`` and each item's mean cross-entropy."""
        logits, tokens = public_logits(model, processor, items, self.config.packed_training)
        k = min(self.config.top_k, logits.values.shape[-1])
        values, indices = torch.topk(logits.values, k, dim=-1)
        return TopK(
            Rows(values.contiguous(), logits.counts),
            Rows(indices.to(torch.int32), logits.counts),
            item_cross_entropy(logits, tokens),
        )

    def loss(self, target: torch.Tensor, counts: list[int]):
        """(1 - kd_alpha) soft cross-entropy toward the Min-CE targets + kd_alpha answer cross-entropy, per row."""
        rows, alpha = Rows(target, counts), float(self.config.kd_alpha)

        def loss_fn(student: torch.Tensor, tokens: torch.Tensor, idx: list[int]) -> torch.Tensor:
            loss = soft_cross_entropy(student, rows.of(idx))
            return (1 - alpha) * loss + alpha * F.cross_entropy(student, tokens) if alpha > 0 else loss

        return loss_fn

    def optimizer(self, model: Any) -> torch.optim.Optimizer:
        params = [p for p in model.parameters() if p.requires_grad]
        return torch.optim.AdamW(params, lr=self.config.learning_rate, weight_decay=self.config.weight_decay)

    # -- protocol --------------------------------------------------------------------------------------------
    def init_client(self, ctx: ClientContext) -> State:
        return State(tensors=self.clients.initial(ctx.client_id))

    def client_update(
        self, ctx: ClientContext, state: State, message: Message | None, batches: Iterable[Sequence[MethodSample]]
    ) -> tuple[Message, State]:
        c, cfg, pool = ctx.client_id, self.config, self.clients.pool
        own = unprefixed(OWN, state.tensors)
        self.clients.load(c, State(tensors=adapter_part(state)))
        meta: dict[str, Any] = {}
        if message is not None and message.tensors and own:
            items = self.window(int(state.metadata["public_round"]))
            with pool.use(c) as model:
                processor = pool.processor(c)
                counts = answer_counts(processor, items)
                vocab = model.get_output_embeddings().weight.shape[0]
                target, chosen = min_ce_targets(
                    [TopK.from_tensors(own, counts), TopK.from_tensors(message.tensors, counts)], vocab, cfg.temperature
                )
                steps = steps_for(cfg.client_epochs, len(items), cfg.distill_batch)
                losses = self.distill(model, processor, items, steps, self.loss(target, counts), self.optimizer(model))
            meta = {
                "kd_loss": float(sum(losses) / len(losses)) if losses else None,
                "kd_from_server": sum(chosen) / len(chosen),
            }
        loss = self.clients.train(ctx, batches)
        tensors = self.clients.dump(c)
        if not self.exchanges(ctx):
            return Message(), State(
                tensors={**tensors, **prefixed(OWN, own)}, metadata={**state.metadata, "loss": loss}
            )
        with pool.use(c) as model:
            rows = self.topk(model, pool.processor(c), self.window(ctx.round_idx))
        upload = Message(tensors=rows.tensors())
        return upload, State(
            tensors={**tensors, **prefixed(OWN, upload.tensors)},
            metadata={"loss": loss, "public_round": ctx.round_idx, **meta},
        )

    def aggregate(
        self, round_idx: int, server_state: State, uploads: dict[int, Message]
    ) -> tuple[dict[int, Message], State]:
        cfg, pool, slot = self.config, self.clients.pool, self.server_slot
        items = self.window(round_idx)
        adapter = unprefixed(SERVER, server_state.tensors) or self.clients.initial(slot)
        with self.server_model(slot, {"default": adapter}) as (model, processor):
            counts = answer_counts(processor, items)
            clients = sorted(uploads)
            candidates = [self.topk(model, processor, items)]
            for c in clients:
                sent = TopK.from_tensors(uploads[c].tensors, answer_counts(pool.processor(c), items))
                candidates.append(self.align(sent, c, slot, items))
            vocab = model.get_output_embeddings().weight.shape[0]
            target, chosen = min_ce_targets(candidates, vocab, cfg.temperature)
            loss_fn = self.loss(target, counts)
            before = self.report_loss(model, processor, items, loss_fn)
            steps = steps_for(cfg.server_epochs, len(items), cfg.distill_batch)
            if steps:
                self.distill(model, processor, items, steps, loss_fn, self.optimizer(model))
            after = self.report_loss(model, processor, items, loss_fn)
            rows = self.topk(model, processor, items)
            adapter = pool.get_state(slot)
        messages = {c: Message(tensors=self.align(rows, slot, c, items).tensors()) for c in clients}
        self._rows.append(
            Diagnostic(
                key=SERVER,
                values={
                    "kd_loss_before": before,
                    "kd_loss_after": after,
                    "share_own": chosen.count(0) / len(chosen),
                    **{f"share_client/{c}": chosen.count(i + 1) / len(chosen) for i, c in enumerate(clients)},
                },
            )
        )
        return messages, State(tensors=prefixed(SERVER, adapter), metadata={"round": round_idx + 1})

    def predict(self, ctx: ClientContext, state: State, queries: Sequence[MethodSample]) -> list[str]:
        return super().predict(ctx, State(tensors=adapter_part(state)), queries)

    def adaptation_state(self, architecture: str, client_states: dict[int, State], server_state: State) -> State:
        """The within-architecture average of the clients' final adapters (their stored logits left out)."""
        return State(tensors=average([adapter_part(s) for s in client_states.values()]))


def adapter_part(state: State) -> dict[str, torch.Tensor]:
    """A FedMKT client state's adapter (its stored logits, under ``own/``, left out)."""
    return {k: v for k, v in state.tensors.items() if not k.startswith(OWN + "/")}
