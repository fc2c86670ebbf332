"""FedMosaic (RELA + PQ-LoRA) as a drake_bench method plugin, and the FedIT + PQ-LoRA ablation.

Round procedure = spec fedmosaic.md section 5, "Corrected executable form"; the building blocks
(PQ-LoRA through peft, alignment, RELA, accounting) live in the sibling modules and carry their
own [I]/[R] notes. See :class:`FedMosaic` for the plugin-level choices.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal

import torch
from pydantic import ConfigDict, Field

from drake_bench.protocol import ClientContext, FederationContext, Message, MethodMeta, ModelIdentity, State
from drake_bench.sample import MethodSample

from . import accounting, rela
from .alignment import align_all, choose_pivot
from .config import FedMosaicConfig
from .pqlora import (
    gate_values,
    global_state,
    load_global_state,
    load_local_state,
    local_state,
    make_pq_lora_config,
    param_groups,
    tie_layer_gates,
)

_WIRE = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
_OWN = "rela."  # prefix of plugin-owned (non-adapter) tensors in client states


_TOY = FedMosaicConfig.toy()  # one source for the toy defaults


class FedMosaic:
    """FedMosaic: relevance-guided aggregation (RELA) of architecture-agnostic PQ-LoRA modules.

    **Setup** (once per run, deterministic so a resumed run rebuilds the same thing): one
    :class:`~drake_bench.models.ModelPool` over the clients' zoo models with one peft adapter per
    client that holds both paths of spec 1.3-1.4 (PQ-LoRA on the N_B Eq. 6 layers, conventional
    LoRA elsewhere, local + frozen global parts and one sigmoid gate per decoder layer, tied by the
    pool's ``post_attach`` hook). Star weight alignment of every architecture to the pivot (the
    smallest base) on ``federation.public_data(public_size)``; the aligned, frozen A/B become every
    client's initial adapter (P = Q = 0, so every client starts at its pretrained base). W_s = a
    separate frozen, adapter-free copy of the smallest client model; its last-layer gradient
    dimension fixes the single shared mask of ceil(N_s d) coordinates (seed ``mask_seed``).

    **Client round**: load the client's own state (adapter incl. global path, gradient EMA); write
    the server's customised G_i into the frozen global path (never over the local L_i); AdamW
    (P/Q at ``lr_pq``, conventional LoRA and gates at ``lr_other``, a fresh optimiser per round)
    over the round's batches; every m-th step the W_s last-layer gradient on the same batch,
    sanitised (mask + mu noise); at the end ghat <- (1-alpha) ghat + alpha mean(round buffer).
    Upload (bf16): P/Q of the PQ modules, A/B of the conventional modules (within-type
    aggregation, B3) and the masked ghat (``accounting.upload_tensors``).

    **Server**: S = cos(ghat_i, ghat_j), w = softmax(S / tau); per client P/Q = sum_j w_ij P_j over
    all clients and conventional A/B within the client's architecture with renormalised w
    (``rela.customized_globals``); one message per client. The last S, w and their client order
    are kept in the server State metadata (``relevance``, ``weights``, ``clients``), plus the
    equal average of all uploaded P/Q (``avg.*`` tensors) for fast adaptation.

    **Predict**: the dual path W + B((1-g) L_i + g G_i) exactly as trained (Eq. 7, B16).

    **Fast adaptation init** (spec A12 / B16): the uniform average of the final local adapters,
    P/Q across all clients (server ``avg.*``), conventional LoRA and gates within the
    architecture; [R] the global path is set equal to that average and the gates reset to
    ``gate_init``, so the model starts at the aggregated adapter and trains as one adapter.

    Choices of this plugin ([R] unless marked):

    * Defaults = the spec-13 toy profile (``FedMosaicConfig.toy``): r = 8, conventional alpha 16,
      N_B = 2, lr 7.5e-3 (P/Q) / 3e-3 (rest: the baselines' LoRA lr, P/Q at the paper's 2.5x), m = 5, |D_p| = 500, alignment Adam lr 1e-3 with
      batch 8; tau 0.5, alpha 0.5, N_s 0.4, mu 1e-4, lambda 0.5 as in the paper. ``rounds``,
      ``local_steps`` and ``batch_size`` of the config are informational: the evaluator drives
      the schedule (the benchmark's FL config).
    * Adapters target only the language model's decoder linears (``LLM_LINEAR_TARGETS``); the
      vision tower and projector stay frozen, as for the LoRA baselines.
    * Alignment features come from the public items' text only (images dropped): the alignment
      hooks run the frozen language model without pixel values. All tiny zoo models share one
      tokenizer, so pairing is token-wise (B5); the alignment batch of ``align_batch_size``
      samples is converted to token rows (samples x mean valid tokens per sample).
    * If a round has fewer than m steps, the W_s gradient is taken on its last step
      (``grad_at_least_once``), so every round refreshes ghat (Alg. 1 would skip the round).
    * Wire dtype bf16 for uploads and downloads (spec 9); metadata of messages is empty.
    * EMA state ghat, round counter and gradient count live in the client State, so a resumed run
      continues exactly.
    """

    # relative compute: W_s's gradient costs about 9.8% more per step, plus the one-off alignment
    meta = MethodMeta(
        name="fedmosaic", version="1.0", relative_compute=1.161,
        summary="RELA-weighted aggregation of aligned PQ-LoRA adapters across heterogeneous models.",
        reference="Not All Clients Are Equal: Collaborative Model Personalization on Heterogeneous Multi-Modal Clients")

    class Config(FedMosaicConfig):
        model_config = ConfigDict(extra="forbid", frozen=True)

        # toy profile (spec 13, FedMosaicConfig.toy()) as defaults; see FedMosaicConfig for the descriptions
        rank: int = Field(_TOY.rank, ge=1, description="[R] toy r (paper: 128 MLLM, 16 LLM).")
        lora_alpha: float | None = Field(_TOY.lora_alpha, description="[R] toy conventional alpha.")
        n_blocks: int = Field(_TOY.n_blocks, ge=1, description="[R] toy N_B.")
        lr_pq: float = Field(_TOY.lr_pq, gt=0, description="[R] toy lr of P/Q (2.5x the rest, the paper's ratio).")
        lr_other: float = Field(_TOY.lr_other, gt=0, description="[R] toy lr of conventional LoRA and gates (= the baselines' LoRA lr).")
        batch_size: int = Field(_TOY.batch_size, ge=1, description="[R] toy (informational; the benchmark sets it).")
        rounds: int = Field(_TOY.rounds, ge=1, description="[R] toy (informational; the benchmark sets it).")
        local_steps: int = Field(_TOY.local_steps, ge=1, description="[R] toy (informational; the benchmark sets it).")
        grad_interval: int = Field(_TOY.grad_interval, ge=1, description="[R] toy m.")
        public_size: int = Field(_TOY.public_size, ge=1, description="[R] toy |D_p|.")
        align_lr: float = Field(_TOY.align_lr, gt=0, description="[R] toy alignment lr.")
        align_batch_size: int = Field(_TOY.align_batch_size, ge=1, description="[R] toy alignment batch (samples).")
        # plugin-level
        weighting: Literal["rela", "equal"] = Field(
            "rela", description="[R] 'equal' = uniform weights, no W_s gradient (the PQ-LoRA ablation).")
        grad_at_least_once: bool = Field(
            True, description="[R] take the W_s gradient on the last step of a round shorter than m.")
        wire_dtype: Literal["bfloat16", "float16", "float32"] = Field("bfloat16", description="[R] spec 9.")
        offload_dir: str | None = Field(None, description="Keep client adapters on disk instead of RAM.")
        model_loader: Literal["zoo", "testing"] = Field(
            "zoo", description="'testing': randomly initialised tiny models (models.testing.toy_loader), for fast tests.")

    def __init__(self, config: FedMosaicConfig | None = None):
        self.config = config or self.Config()

    # ------------------------------------------------------------------ set-up
    @property
    def uses_rela(self) -> bool:
        return self.config.weighting == "rela"

    def _adapter_config(self, model_name: str):
        from drake_bench.models import LLM_LINEAR_TARGETS
        from drake_bench.models.zoo import model_info

        layers = model_info(model_name).num_layers
        if layers is None:  # a real checkpoint: read its config
            from transformers import AutoConfig

            hf = AutoConfig.from_pretrained(model_info(model_name).source)
            layers = getattr(getattr(hf, "text_config", hf), "num_hidden_layers")
        return make_pq_lora_config(int(layers), self.config, target_modules=LLM_LINEAR_TARGETS)

    def _post_attach(self, model: Any) -> None:
        if self.config.dual_path and self.config.gate_granularity == "layer":
            tie_layer_gates(model, "default")

    def model_identity(self, model_name: str) -> ModelIdentity:
        """Zoo models: the architecture key and what fixes the weights (pretraining recipe or source)."""
        from drake_bench.models.identity import architecture, model_identity

        return ModelIdentity(architecture=architecture(model_name), weights=model_identity(model_name))

    def evaluation_settings(self) -> dict:
        """The zoo engine's greedy decoding, cloze choice scoring and prompt template version."""
        from drake_bench.models.identity import evaluation_settings

        return evaluation_settings()

    def setup(self, federation: FederationContext) -> None:
        from drake_bench.models import ModelPool, load_base
        from drake_bench.models.engine import encode_for_training
        from drake_bench.models.testing import toy_loader

        cfg = self.config
        loader = load_base if cfg.model_loader == "zoo" else toy_loader
        self.federation = federation
        self.arch = dict(federation.architectures)
        self.wire = _WIRE[cfg.wire_dtype]
        self.pool = ModelPool(federation.allocation, self._adapter_config, device=federation.device,
                              offload_dir=cfg.offload_dir, seed=federation.seed, post_attach=self._post_attach,
                              loader=loader)
        groups = self.pool.architectures()
        models = {a: self.pool.model_for(members[0]) for a, members in groups.items()}
        # --- weight alignment (star, pivot = smallest) on public text ---
        self.pivot = choose_pivot(models, cfg.pivot)
        self.alignment_report: dict[str, Any] = {}
        if len(models) > 1:
            public = [s.for_method().model_copy(update={"images": []}) for s in federation.public_data(cfg.public_size)]
            batches: dict[str, list[dict[str, torch.Tensor]]] = {}
            tokens = 0
            for a, model in models.items():
                proc = self.pool.processor(groups[a][0])
                batches[a] = []
                for i in range(0, len(public), 32):
                    enc = encode_for_training(model, proc, public[i:i + 32])
                    batches[a].append({"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]})
                tokens = sum(int(b["attention_mask"].sum()) for b in batches[a])
            per_sample = max(1, round(tokens / max(1, len(public))))
            acfg = cfg.model_copy(update={"align_batch_size": cfg.align_batch_size * per_sample})
            pivot, reports = align_all(models, batches, acfg, seed=cfg.pq_seed)
            self.alignment_report = {a: {"l2_before": sum(r["l2_before"] for r in rep.values()) / len(rep),
                                         "l2_after": sum(r["l2_after"] for r in rep.values()) / len(rep)}
                                     for a, rep in reports.items()}
        # every client starts from its architecture's aligned adapter E[V(i)]
        from peft.utils import get_peft_model_state_dict

        self._init: dict[str, dict[str, torch.Tensor]] = {}
        for a, model in models.items():
            self._init[a] = {k: v.detach().to("cpu", copy=True)
                             for k, v in get_peft_model_state_dict(model, save_embedding_layers=False).items()}
        self.pool.sync()
        for a, members in groups.items():
            for c in members:
                self.pool.set_state(c, self._init[a])
        # --- W_s and the shared mask ---
        self.ws = self.ws_processor = None
        self.mask = None
        if self.uses_rela:
            ws_arch = choose_pivot(models, "smallest")
            self.ws_name = federation.allocation[groups[ws_arch][0]]
            self.ws, self.ws_processor = loader(self.ws_name, device=federation.device)
            self.ws.requires_grad_(False)
            self.ws.eval()
            d = rela.last_layer_param(self.ws, cfg.grad_layer).numel()
            self.grad_numel = d
            self.mask = rela.shared_mask(d, cfg.n_s, cfg.mask_seed)

    # ------------------------------------------------------------------ states
    def init_client(self, ctx: ClientContext) -> State:
        tensors = {k: v.clone() for k, v in self._init[self.arch[ctx.client_id]].items()}
        if self.uses_rela:
            tensors[_OWN + "ghat"] = torch.zeros(self.mask.numel())
        return State(tensors=tensors, metadata={"round": 0, "grad_computations": 0})

    def init_server(self) -> State:
        return State(metadata={"round": 0})

    @staticmethod
    def _adapter_part(state: State) -> dict[str, torch.Tensor]:
        return {k: v for k, v in state.tensors.items() if not k.startswith(_OWN)}

    def _ws_gradient(self, batch: Sequence[MethodSample]) -> torch.Tensor:
        """Last-layer gradient of the frozen W_s on the client's batch (answer-token CE, images included)."""
        from drake_bench.models.engine import loss_on

        param = rela.last_layer_param(self.ws, self.config.grad_layer)
        param.requires_grad_(True)
        try:
            loss = loss_on(self.ws, self.ws_processor, list(batch))
            (grad,) = torch.autograd.grad(loss, [param])
        finally:
            param.requires_grad_(False)
        return grad.detach().reshape(-1).float().cpu()

    # ------------------------------------------------------------------ protocol
    def client_update(self, ctx: ClientContext, state: State, message: Message | None,
                      batches: Iterable[Sequence[MethodSample]]) -> tuple[Message, State]:
        from drake_bench.models import train_step

        cfg = self.config
        c = ctx.client_id
        batches = [list(b) for b in batches if len(b)]
        self.pool.set_state(c, self._adapter_part(state))
        tracker = None
        if self.uses_rela:
            tracker = rela.GradientTracker(self.mask.numel(), cfg.ema_alpha, cfg.ema_unit)
            tracker.ghat = state.tensors[_OWN + "ghat"].float().clone()
        gen = torch.Generator().manual_seed(ctx.seed % (2**63 - 1))
        n_grad = 0
        losses: list[float] = []
        with self.pool.use(c) as model:
            if message is not None and message.tensors:
                received = {k: v.float() for k, v in message.tensors.items()}
                if cfg.dual_path:
                    load_global_state(model, received)  # G_i into the frozen global path; L_i untouched
                else:
                    load_local_state(model, received)  # FedIT-style: start from the aggregate
            opt = torch.optim.AdamW(param_groups(model, cfg), weight_decay=0.0)
            proc = self.pool.processor(c)
            for s, batch in enumerate(batches, start=1):
                losses.append(train_step(model, proc, batch, opt))
                if tracker is not None and (s % cfg.grad_interval == 0 or
                                            (cfg.grad_at_least_once and s == len(batches) and n_grad == 0)):
                    tracker.add(rela.sanitize(self._ws_gradient(batch), self.mask, cfg.mu, gen))
                    n_grad += 1
            local = local_state(model)
            gates = list(gate_values(model).values())
        ghat = tracker.end_round() if tracker is not None else None
        upload = accounting.upload_tensors(local, ghat, dtype=self.wire, send_conv=cfg.conv_agg != "none")
        tensors = self.pool.get_state(c)
        if ghat is not None:
            tensors[_OWN + "ghat"] = ghat
        meta = {"round": int(state.metadata.get("round", 0)) + 1,
                "grad_computations": int(state.metadata.get("grad_computations", 0)) + n_grad,
                "loss": float(sum(losses) / len(losses)) if losses else 0.0,
                "gate_mean": float(sum(gates) / len(gates)) if gates else None}
        return Message(tensors=upload), State(tensors=tensors, metadata=meta)

    def aggregate(self, round_idx: int, server_state: State, uploads: dict[int, Message]) -> tuple[dict[int, Message], State]:
        cfg = self.config
        order = sorted(uploads)
        states = [{k: v.float() for k, v in uploads[c].tensors.items() if not k.startswith(_OWN)} for c in order]
        types = [self.arch[c] for c in order]
        n = len(order)
        if self.uses_rela:
            grads = torch.stack([uploads[c].tensors[_OWN + "grad"].float() for c in order])
            sim = rela.relevance_matrix(grads)
            weights = rela.rela_weights(sim, cfg.tau)
            conv_mode = cfg.conv_agg
        else:
            sim = None
            weights = torch.full((n, n), 1.0 / n)
            conv_mode = "equal_within_type" if cfg.conv_agg != "none" else "none"
        # PQ across all clients; conventional LoRA within each architecture (aggregated group by
        # group: rela.aggregate_conv stacks all given states, whose conv shapes differ across types)
        pq = rela.aggregate_pq(states, weights)
        globals_ = [dict(p) for p in pq]
        for t in sorted(set(types)):
            idx = [i for i in range(n) if types[i] == t]
            sub = rela.aggregate_conv([states[i] for i in idx], weights[idx][:, idx], [t] * len(idx), conv_mode)
            for i, g in zip(idx, sub):
                globals_[i].update(g)
        out = {c: Message(tensors={k: v.to(self.wire) for k, v in globals_[i].items()}) for i, c in enumerate(order)}
        avg = {f"avg.{k}": sum(s[k] for s in states) / n for k in rela.pq_keys(states[0])}
        meta: dict[str, Any] = {"round": round_idx + 1, "clients": order, "weights": weights.tolist(),
                                "weighting": cfg.weighting}
        if sim is not None:
            meta["relevance"] = sim.tolist()
        return out, State(tensors=avg, metadata=meta)

    def predict(self, ctx: ClientContext, state: State, queries: Sequence[MethodSample]) -> list[str]:
        from drake_bench.models import predict

        self.pool.set_state(ctx.client_id, self._adapter_part(state))
        with self.pool.use(ctx.client_id) as model:
            return predict(model, self.pool.processor(ctx.client_id), list(queries))

    def adaptation_state(self, architecture: str, client_states: dict[int, State], server_state: State) -> State:
        """Spec A12 / B16: uniform average of the final local adapters (P/Q across all clients,
        the rest within the architecture); global path = that average, gates reset."""
        from drake_bench.methods.lora_clients import average

        members = sorted(client_states)
        rep = members[0]
        parts = [self._adapter_part(client_states[c]) for c in members]
        self.pool.set_state(rep, average(parts))
        pq_avg = {k[len("avg."):]: v for k, v in server_state.tensors.items() if k.startswith("avg.")}
        with self.pool.use(rep) as model:
            if pq_avg:
                load_local_state(model, pq_avg)
            if self.config.dual_path:
                load_global_state(model, local_state(model))
                with torch.no_grad():
                    for n, p in model.named_parameters():
                        if ".lora_beta." in n:
                            p.fill_(self.config.gate_init)
        tensors = self.pool.get_state(rep)
        if self.uses_rela:
            ghats = [client_states[c].tensors[_OWN + "ghat"] for c in members]
            tensors[_OWN + "ghat"] = torch.stack(ghats).mean(0)
        return State(tensors=tensors, metadata={"round": 0, "grad_computations": 0})

    # ------------------------------------------------------------------ introspection
    def global_adapter(self, client_id: int, state: State) -> dict[str, torch.Tensor]:
        """The client's current frozen global module G_i (``pq.*``/``conv.*`` keys), for tests/analysis."""
        self.pool.set_state(client_id, self._adapter_part(state))
        with self.pool.use(client_id) as model:
            return global_state(model)

    def local_adapter(self, client_id: int, state: State) -> dict[str, torch.Tensor]:
        """The client's local module L_i (``pq.*``/``conv.*`` keys)."""
        self.pool.set_state(client_id, self._adapter_part(state))
        with self.pool.use(client_id) as model:
            return local_state(model)

    def expected_uplink_elements(self, client_id: int) -> accounting.Payload:
        """The spec-9 formula for this client's model (for accounting checks)."""
        model = self.pool.model_for(client_id)
        text_cfg = getattr(model.config, "text_config", model.config)
        layers, dims = accounting.dims_from_hf_config(text_cfg)
        return accounting.fedmosaic_payload(layers, dims, self.config.rank, self.config.n_blocks,
                                            self.grad_numel if self.uses_rela else 0, self.config.n_s,
                                            pq_layers=self.config.pq_layers(layers),
                                            send_conv=self.config.conv_agg != "none")


class FedITPQLoRA(FedMosaic):
    """FedIT + PQ-LoRA (the "(+)PQ-LoRA" ablation of Table 7 / spec 13): equal weights, no RELA.

    Same aligned PQ-LoRA adapters as :class:`FedMosaic`, but [R] FedIT-style: a single adapter
    (no global path, no gate); every round each client starts from the server's aggregate, which
    is the equal average of P/Q over *all* clients (possible across architectures thanks to the
    aligned PQ modules) and the equal average of conventional LoRA within the architecture
    (Fed-ET, like :class:`~drake_bench.methods.fedit.FedIT`). No W_s, no gradient upload.
    Evaluation uses the client's adapter after local training (spec A9, as FedIT).
    """

    meta = MethodMeta(
        name="fedit-pqlora", version="1.0", relative_compute=1.0,
        summary="FedIT with FedMosaic's aligned PQ-LoRA adapters and equal weights (the (+)PQ-LoRA ablation).",
        reference="Not All Clients Are Equal: Collaborative Model Personalization on Heterogeneous Multi-Modal Clients")

    class Config(FedMosaic.Config):
        model_config = ConfigDict(extra="forbid", frozen=True)

        dual_path: bool = Field(False, description="[R] FedIT: one adapter, overwritten by the aggregate.")
        weighting: Literal["rela", "equal"] = Field("equal", description="[R] equal weights (no RELA).")
        conv_agg: Literal["rela_within_type", "equal_within_type", "none"] = Field(
            "equal_within_type", description="[R] Fed-ET: equal weights within the architecture.")
