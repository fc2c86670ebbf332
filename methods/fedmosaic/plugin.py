"""FedMosaic (RELA + PQ-LoRA) as a drake_bench method plugin, and the FedIT + PQ-LoRA ablation.

The round follows the FedMosaic paper's Algorithm 1 (App. A.35) with its index typos fixed; the
building blocks (PQ-LoRA through peft, alignment, RELA, accounting) live in the sibling modules.
Pool, load/dump, training and prediction are the shared :class:`~drake_bench.methods.lora_clients.LoraClients`
with FedMosaic's hooks (:class:`PQLoraClients`). See :class:`FedMosaic` for the plugin-level choices.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import torch

from drake_bench.benchmarks.sample import MethodSample
from drake_bench.plugins.protocol import (
    ClientContext,
    Diagnostic,
    FederationContext,
    Message,
    MethodMeta,
    ModelIdentity,
    State,
)

from ..lora_clients import LoraClients, average
from . import accounting, hetlora, rela
from .alignment import align_all, audit_alignment, choose_pivot
from .config import TOY_PROFILE, FedMosaicPluginConfig, expand_client_ranks
from .pqlora import (
    gate_values,
    load_global_state,
    load_local_state,
    local_state,
    make_pq_lora_config,
    param_groups,
    pq_bases,
    tie_layer_gates,
)

_WIRE = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
_OWN = "rela."  # prefix of plugin-owned (non-adapter) tensors in client states


class PQLoraClients(LoraClients):
    """:class:`LoraClients` with FedMosaic's adapters and optimiser.

    One peft adapter per client holds both kinds of layer (PQ-LoRA on the N_B Eq. 6 layers,
    conventional LoRA elsewhere) with a local and a frozen global part and one gate per decoder
    layer; AdamW trains P/Q at ``lr_pq`` and the rest at ``lr_other`` without weight decay (App. A.6).
    """

    def adapter_config(self, model_name: str):
        """A PQLoraConfig for the model's depth on the language model's linears (the vision tower stays frozen)."""
        from drake_bench.models import LLM_LINEAR_TARGETS
        from drake_bench.models.zoo import model_info

        layers = model_info(model_name).num_layers
        if layers is None:  # a real checkpoint: read its config
            from transformers import AutoConfig

            hf = AutoConfig.from_pretrained(model_info(model_name).source)
            layers = getattr(getattr(hf, "text_config", hf), "num_hidden_layers")
        return make_pq_lora_config(int(layers), self.settings, target_modules=LLM_LINEAR_TARGETS)

    #: The rank axes of every FedMosaic weight (nesting a smaller rank's initial adapter in the largest one, and the
    #: zero padding / truncation of the rank-heterogeneous fast-adaptation average).
    rank_axes = {
        "lora_A": (0,),
        "lora_B": (1,),
        "lora_P": (0, 1),
        "lora_Q": (0,),
        "lora_gA": (0,),
        "lora_gB": (1,),
        "lora_gP": (0, 1),
        "lora_gQ": (0,),
    }

    def client_ranks(self, federation: FederationContext) -> dict[int, int] | None:
        """The config's ``client_ranks`` for the federation's clients (None when it is not set)."""
        if self.settings.client_ranks is None:
            return None
        return expand_client_ranks(self.settings.client_ranks, sorted(federation.allocation), self.settings.rank)

    def post_attach(self, model: Any) -> None:
        """One gate per decoder layer (Algorithm 1) unless per-module gates are asked for; in every rank slot."""
        if self.settings.dual_path and self.settings.gate_granularity == "layer":
            for slot in model.peft_config:
                tie_layer_gates(model, slot)

    def param_groups(self, model: Any) -> list[dict[str, Any]]:
        return [{**g, "weight_decay": 0.0} for g in param_groups(model, self.settings)]


class FedMosaic:
    """FedMosaic: relevance-guided aggregation (RELA) of architecture-agnostic PQ-LoRA modules.

    **Setup** (once per run, deterministic so a resumed run rebuilds the same thing): one
    :class:`PQLoraClients` pool over the clients' zoo models, every client's adapter with both
    paths of Eq. 7. Star weight alignment of every architecture to the pivot (the smallest base,
    App. A.29) on ``federation.public_data(public_size)``; the aligned, frozen A/B become every
    client's initial adapter (P = Q = 0, so every client starts at its pretrained base). W_s = a
    separate frozen, adapter-free copy of the smallest client model; its last-layer gradient
    dimension fixes the single shared mask of ceil(N_s d) coordinates (seed ``mask_seed``).

    **Client round**: load the client's own state (adapter incl. global path, gradient EMA); write
    the server's customised G_i into the frozen global path (never over the local L_i); AdamW
    (P/Q at ``lr_pq``, conventional LoRA and gates at ``lr_other``, a fresh optimiser per round)
    over the round's batches; every m-th step the W_s last-layer gradient on the same batch,
    sanitised (mask + mu noise, Eq. 3); at the end ghat <- (1-alpha) ghat + alpha mean(round buffer).
    Upload (bf16): P/Q of the PQ modules, A/B of the conventional modules (aggregated within the
    architecture, ``conv_agg``) and the masked ghat (``accounting.upload_tensors``).

    **Server**: S = cos(ghat_i, ghat_j), w = softmax(S / tau) (Eq. 4); per client P/Q = sum_j w_ij P_j
    over all clients and conventional A/B within the client's architecture with renormalised w;
    one message per client. The last S, w and their client order are kept in the server State
    metadata (``relevance``, ``weights``, ``clients``), plus the equal average of all uploaded P/Q
    (``avg.*`` tensors) for fast adaptation.

    **Clients of different ranks** (App. A.24, ``client_ranks`` + ``hetlora``; docs/methods/fedmosaic.md): the pool
    gives each rank its own peft slot on the shared base; [R] each architecture is aligned at its largest rank and a
    smaller-rank client starts from the leading block of that aligned adapter; P/Q are zero-padded to the largest
    rank, weighted by Eq. 25 (RELA x HETLoRA norm weights) and truncated to each client's rank, conventional LoRA the
    same way within the architecture; [R] a group of one rank is aggregated as without hetlora (equal ranks = the
    default run); the server metadata adds ``ranks``; [R] fast adaptation averages the zero-padded adapters and
    takes the representative client's leading block.

    **Predict**: the dual path W + (1-g) L_i + g G_i exactly as trained (Eq. 7).

    **Fast adaptation init**: the paper starts from "aggregated local models" (Fig. 7): the uniform
    average of the final local adapters, P/Q across all clients (server ``avg.*``), conventional
    LoRA and gates within the architecture; [R] the global path is set equal to that average and
    the gates reset to ``gate_init``, so the model starts at the aggregated adapter and trains as
    one adapter.

    Choices of this plugin ([R] unless marked):

    * Defaults = the toy profile (``config.TOY_PROFILE``): r = 8, conventional alpha 16, N_B = 2,
      lr 7.5e-3 (P/Q) / 3e-3 (rest: the baselines' LoRA lr, P/Q at the paper's 2.5x), m = 5,
      |D_p| = 500, alignment Adam lr 1e-3 with batch 8; tau 0.5, alpha 0.5, N_s 0.4, mu 1e-4,
      lambda 0.5 as in the paper. ``rounds``, ``local_steps`` and ``batch_size`` of the config are
      informational: the evaluator drives the schedule (the benchmark's FL config).
    * Adapters target only the language model's decoder linears; the vision tower and projector
      stay frozen, as for the LoRA baselines.
    * Alignment features come from the public items' text only (images dropped): the alignment
      hooks run the frozen language model without pixel values. All tiny zoo models share one
      tokenizer, so pairing is token-wise; the alignment batch of ``align_batch_size`` samples is
      converted to token rows (samples x mean valid tokens per sample).
    * If a round has fewer than m steps, the W_s gradient is taken on its last step
      (``grad_at_least_once``), so every round refreshes ghat (Algorithm 1 would skip the round).
    * Uploads and downloads travel as bf16, the 2 bytes per element of the paper's communication
      figures (App. A.9); message metadata is empty.
    * EMA state ghat, round counter and gradient count live in the client State, so a resumed run
      continues exactly.
    """

    # relative compute: W_s's gradient and the dual adapter cost about 9.8% more per step, plus the
    # one-off alignment (App. A.8: 1.161 in all)
    meta = MethodMeta(
        name="fedmosaic",
        version="1.0",
        relative_compute=1.161,
        summary="RELA-weighted aggregation of aligned PQ-LoRA adapters across heterogeneous models.",
        reference="Not All Clients Are Equal: Collaborative Model Personalization on Heterogeneous Multi-Modal Clients",
    )

    Config = FedMosaicPluginConfig.with_defaults(
        "Config",
        qualname="FedMosaic.Config",
        module=__name__,
        doc="FedMosaic's settings; defaults are the toy profile (config.TOY_PROFILE) for the tiny zoo models.",
        **TOY_PROFILE,
    )

    def __init__(self, config: FedMosaicPluginConfig | None = None):
        self.config = config or self.Config()
        self.clients = PQLoraClients(self.config)

    @property
    def uses_rela(self) -> bool:
        return self.config.weighting == "rela"

    def model_identity(self, model_name: str) -> ModelIdentity:
        """Zoo models: the architecture key and what fixes the weights (pretraining recipe or source)."""
        from drake_bench.models.identity import architecture, model_identity

        return ModelIdentity(architecture=architecture(model_name), weights=model_identity(model_name))

    def evaluation_settings(self) -> dict:
        """The zoo engine's greedy decoding, cloze choice scoring and prompt template version."""
        from drake_bench.models.identity import evaluation_settings

        return evaluation_settings()

    # ------------------------------------------------------------------ set-up
    def setup(self, federation: FederationContext) -> None:
        from peft.utils import get_peft_model_state_dict

        from drake_bench.models.engine import encode_for_training

        cfg = self.config
        self.arch = dict(federation.architectures)
        self.wire = _WIRE[cfg.wire_dtype]
        self.clients.setup(federation)
        pool = self.clients.pool
        groups = pool.architectures()
        self.ranks = {c: pool.rank(c) for c in pool.clients()}
        self.max_rank = {a: max(self.ranks[c] for c in members) for a, members in groups.items()}
        # an architecture's widest client: its slot is the adapter "default" that alignment and E[k] are read from
        models = {
            a: pool.model_for(next(c for c in members if self.ranks[c] == self.max_rank[a]))
            for a, members in groups.items()
        }
        # weight alignment (star, pivot = smallest) on public text
        self._alignment: dict[str, dict[str, dict[str, Any]]] = {}
        self._pivot: str | None = None
        if len(models) > 1:
            # the public draw is prefix-stable: items past public_size were never seen by the alignment
            drawn = [
                s.for_method().model_copy(update={"images": []})
                for s in federation.public_data(cfg.public_size + cfg.alignment_audit_size)
            ]
            public, heldout = drawn[: cfg.public_size], drawn[cfg.public_size :]

            def encode(a: str, items: list[MethodSample]) -> list[dict[str, torch.Tensor]]:
                proc = pool.processor(groups[a][0])
                encs = [encode_for_training(models[a], proc, items[i : i + 32]) for i in range(0, len(items), 32)]
                return [{"input_ids": e["input_ids"], "attention_mask": e["attention_mask"]} for e in encs]

            batches = {a: encode(a, public) for a in models}
            tokens = sum(int(b["attention_mask"].sum()) for b in batches[next(iter(models))])
            per_sample = max(1, round(tokens / max(1, len(public))))
            before = {
                a: {k: (pa.clone(), pb.clone()) for k, (pa, pb) in pq_bases(m).items()} for a, m in models.items()
            }
            self._pivot, self._alignment = align_all(
                models,
                batches,
                cfg.model_copy(update={"align_batch_size": cfg.align_batch_size * per_sample}),
                seed=cfg.pq_seed,
            )
            if heldout:
                held = {a: encode(a, heldout) for a in models}
                for a in self._alignment:
                    audit = audit_alignment(
                        models[self._pivot], models[a], held[self._pivot], held[a], before[a], self._alignment[a], cfg
                    )
                    for module, values in audit.items():
                        self._alignment[a].setdefault(module, {}).update(values)
        # every client starts from its architecture's aligned adapter (Algorithm 1: L_i = G_i = E)
        self._init = {
            a: {
                k: v.detach().to("cpu", copy=True)
                for k, v in get_peft_model_state_dict(model, save_embedding_layers=False).items()
            }
            for a, model in models.items()
        }
        # [R] a client of smaller rank r starts from the leading block of its architecture's aligned E[k] (A[:r],
        # B[:, :r]): its first min(r, r_pivot) coordinates are the aligned ones, so zero padding of P/Q lines up
        # coordinates that mean the same thing across clients and ranks (alignment across ranks, App. A.24)
        self._init_ranked = {
            (a, r): pool.resize(self._init[a], r)
            for a, members in groups.items()
            for r in sorted({self.ranks[c] for c in members})
            if r != self.max_rank[a]
        }
        pool.sync()
        for a, members in groups.items():
            for c in members:
                pool.set_state(c, self._initial(c))
        # W_s and the shared mask
        self.ws = self.ws_processor = None
        self.mask = None
        if self.uses_rela:
            ws_arch = choose_pivot(models, "smallest")
            self.ws, self.ws_processor = self.clients.loader(
                federation.allocation[groups[ws_arch][0]], device=federation.device
            )
            self.ws.requires_grad_(False)
            from drake_bench.models.engine import use_segment_attention_if_packable

            if cfg.segment_attention:
                use_segment_attention_if_packable(self.ws)
            self.ws.eval()
            d = rela.last_layer_param(self.ws, cfg.grad_layer).numel()
            self.mask = rela.shared_mask(d, cfg.n_s, cfg.mask_seed)

    # ------------------------------------------------------------------ states
    def _initial(self, client: int) -> dict[str, torch.Tensor]:
        """The client's initial adapter: its architecture's aligned E[k], truncated to the client's rank."""
        a, r = self.arch[client], self.ranks[client]
        return self._init[a] if r == self.max_rank[a] else self._init_ranked[(a, r)]

    def init_client(self, ctx: ClientContext) -> State:
        tensors = {k: v.clone() for k, v in self._initial(ctx.client_id).items()}
        if self.uses_rela:
            tensors[_OWN + "ghat"] = torch.zeros(self.mask.numel())
        return State(tensors=tensors, metadata={"round": 0, "grad_computations": 0})

    def init_server(self) -> State:
        return State(metadata={"round": 0})

    @staticmethod
    def _adapter_part(state: State) -> State:
        return State(tensors={k: v for k, v in state.tensors.items() if not k.startswith(_OWN)})

    def _ws_gradient(self, batch: Sequence[MethodSample]) -> torch.Tensor:
        """Last-layer gradient of the frozen W_s on the client's batch (answer-token CE, images included)."""
        from drake_bench.models.engine import loss_on, packing

        param = rela.last_layer_param(self.ws, self.config.grad_layer)
        param.requires_grad_(True)
        try:
            loss = loss_on(self.ws, self.ws_processor, list(batch), packed=packing(self.config.packed_training))
            (grad,) = torch.autograd.grad(loss, [param])
        finally:
            param.requires_grad_(False)
        return grad.detach().reshape(-1).float().cpu()

    # ------------------------------------------------------------------ protocol
    def client_update(
        self, ctx: ClientContext, state: State, message: Message | None, batches: Iterable[Sequence[MethodSample]]
    ) -> tuple[Message, State]:
        cfg = self.config
        c = ctx.client_id
        pool = self.clients.pool
        batches = [list(b) for b in batches if len(b)]
        self.clients.load(c, self._adapter_part(state))
        if message is not None and message.tensors:
            received = {k: v.float() for k, v in message.tensors.items()}
            with pool.use(c) as model:
                if cfg.dual_path:
                    load_global_state(model, received, pool.slot(c))  # G_i into the frozen global path; L_i untouched
                else:
                    load_local_state(model, received, pool.slot(c))  # FedIT-style: start from the aggregate
        tracker = None
        n_grad = 0
        if self.uses_rela:
            tracker = rela.GradientTracker(self.mask.numel(), cfg.ema_alpha, cfg.ema_unit)
            tracker.ghat = state.tensors[_OWN + "ghat"].float().clone()
            gen = torch.Generator().manual_seed(ctx.seed % (2**63 - 1))

            def track_relevance(step: int, batch: Sequence[MethodSample]) -> None:
                nonlocal n_grad
                if step % cfg.grad_interval == 0 or (cfg.grad_at_least_once and step == len(batches) and n_grad == 0):
                    tracker.add(rela.sanitize(self._ws_gradient(batch), self.mask, cfg.mu, gen))
                    n_grad += 1

        loss = self.clients.train(ctx, batches, after_step=track_relevance if tracker is not None else None)
        with pool.use(c) as model:
            local = local_state(model, pool.slot(c))
            gates = list(gate_values(model, pool.slot(c)).values())
        ghat = tracker.end_round() if tracker is not None else None
        upload = accounting.upload_tensors(local, ghat, dtype=self.wire, send_conv=cfg.conv_agg != "none")
        tensors = self.clients.dump(c)
        if ghat is not None:
            tensors[_OWN + "ghat"] = ghat
        meta = {
            "round": int(state.metadata.get("round", 0)) + 1,
            "grad_computations": int(state.metadata.get("grad_computations", 0)) + n_grad,
            "loss": loss,
            "gate_mean": float(sum(gates) / len(gates)) if gates else None,
        }
        return Message(tensors=upload), State(tensors=tensors, metadata=meta)

    def aggregate(
        self, round_idx: int, server_state: State, uploads: dict[int, Message]
    ) -> tuple[dict[int, Message], State]:
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
        ranks = [self.ranks[c] for c in order]
        hetero = cfg.hetlora and len(set(ranks)) > 1
        # PQ across all clients; conventional LoRA within each architecture (aggregated group by
        # group: rela.aggregate_conv stacks all given states, whose conv shapes differ across types).
        # With hetlora, a group whose clients have different ranks goes through HETLoRA (App. A.24, Eq. 24-25):
        # zero-pad to the group's largest rank, w^_ij = w_ij alpha_j / sum_n w_in alpha_n with the norm weights
        # alpha_j, truncate back to client i's rank; a group of one rank is aggregated exactly as without hetlora.
        if hetero:
            pq = hetlora.aggregate_pq_hetero(states, weights, ranks, cfg.het_norm)
        else:
            pq = rela.aggregate_pq(states, weights)
        globals_ = [dict(p) for p in pq]
        for t in sorted(set(types)):
            idx = [i for i in range(n) if types[i] == t]
            sub_states, sub_w = [states[i] for i in idx], weights[idx][:, idx]
            if cfg.hetlora and conv_mode != "none" and len({ranks[i] for i in idx}) > 1:
                w = sub_w if conv_mode == "rela_within_type" else torch.ones_like(sub_w)  # rows renormalised inside
                sub = hetlora.aggregate_conv_hetero(sub_states, w, [ranks[i] for i in idx], [t] * len(idx))
            else:
                sub = rela.aggregate_conv(sub_states, sub_w, [t] * len(idx), conv_mode)
            for i, g in zip(idx, sub):
                globals_[i].update(g)
        out = {c: Message(tensors={k: v.to(self.wire) for k, v in globals_[i].items()}) for i, c in enumerate(order)}
        if hetero:  # the uniform average of the zero-padded P/Q (for fast adaptation), at the largest rank
            r_max = max(ranks)
            avg = {}
            for k in (k for k in rela.pq_keys(states[0]) if k.endswith(".P")):
                m = k[: -len(".P")]
                padded = [hetlora.pad_pq(s[m + ".P"], s[m + ".Q"], r_max) for s in states]
                avg[f"avg.{m}.P"] = sum(p for p, _ in padded) / n
                avg[f"avg.{m}.Q"] = sum(q for _, q in padded) / n
        else:
            avg = {f"avg.{k}": sum(s[k] for s in states) / n for k in rela.pq_keys(states[0])}
        meta: dict[str, Any] = {
            "round": round_idx + 1,
            "clients": order,
            "weights": weights.tolist(),
            "weighting": cfg.weighting,
        }
        if cfg.client_ranks is not None:
            meta["ranks"] = ranks
        if sim is not None:
            meta["relevance"] = sim.tolist()
        return out, State(tensors=avg, metadata=meta)

    def round_diagnostics(self, round_idx: int) -> list[Diagnostic]:
        """The weight alignment's own report, once (with round 1): per aligned architecture and PQ module, the
        A-code L2 distance to the pivot before alignment, after the fit and after the orthonormal projection, its
        ratio after/before, the orthonormality errors, and the top and mean canonical correlations of the B
        mapping. The alignment ran in ``setup`` on public data; a run cannot be judged on an alignment nobody
        can read, so it goes into the result file (``raw.diagnostics``, keys ``alignment/<arch>/<module>``)."""
        if round_idx != 0:
            return []
        rows = []
        for arch, modules in sorted(self._alignment.items()):
            for module, rep in sorted(modules.items()):
                values = {k: v for k, v in rep.items() if isinstance(v, (int, float, str, bool))}
                before = rep.get("l2_before")
                values["l2_ratio"] = float(rep["l2_after"] / before) if before else None
                values["pivot"] = self._pivot
                rows.append(Diagnostic(key=f"alignment/{arch}/{module}", values=values))
        return rows

    def predict(self, ctx: ClientContext, state: State, queries: Sequence[MethodSample]) -> list[str]:
        self.clients.load(ctx.client_id, self._adapter_part(state))
        return self.clients.predict(ctx, queries)

    def adaptation_state(self, architecture: str, client_states: dict[int, State], server_state: State) -> State:
        """Uniform average of the final local adapters (P/Q across all clients, the rest within the
        architecture), the paper's "aggregated local models" of Fig. 7; global path = that average, gates reset."""
        members = sorted(client_states)
        rep = members[0]
        pool = self.clients.pool
        adapters = [self._adapter_part(client_states[c]).tensors for c in members]
        if len({self.ranks[c] for c in members}) > 1:
            # [R] mixed ranks: average the adapters zero-padded to the architecture's largest rank (HETLoRA's
            # padding), then take the leading block at the representative client's rank
            top = self.max_rank[self.arch[rep]]
            avg_state = pool.resize(average([pool.resize(t, top) for t in adapters]), self.ranks[rep])
        else:
            avg_state = average(adapters)
        self.clients.load(rep, State(tensors=avg_state))
        r = self.ranks[rep]
        pq_avg = {}
        for k, v in server_state.tensors.items():
            if k.startswith("avg."):  # the P/Q average, at the largest rank under hetlora: truncated to rep's rank
                pq_avg[k[len("avg.") :]] = v[:r, :r].clone() if k.endswith(".P") else v[:r].clone()
        slot = pool.slot(rep)
        with pool.use(rep) as model:
            if pq_avg:
                load_local_state(model, pq_avg, slot)
            if self.config.dual_path:
                load_global_state(model, local_state(model, slot), slot)
                with torch.no_grad():
                    for n, p in model.named_parameters():
                        if ".lora_beta." in n:
                            p.fill_(self.config.gate_init)
        tensors = self.clients.dump(rep)
        if self.uses_rela:
            ghats = [client_states[c].tensors[_OWN + "ghat"] for c in members]
            tensors[_OWN + "ghat"] = torch.stack(ghats).mean(0)
        return State(tensors=tensors, metadata={"round": 0, "grad_computations": 0})


class FedITPQLoRA(FedMosaic):
    """FedIT + PQ-LoRA (the "(+)PQ-LoRA" ablation of Table 7): equal weights, no RELA.

    Same aligned PQ-LoRA adapters as :class:`FedMosaic`, but [R] FedIT-style: a single adapter
    (no global path, no gate); every round each client starts from the server's aggregate, which
    is the equal average of P/Q over *all* clients (possible across architectures thanks to the
    aligned PQ modules) and the equal average of conventional LoRA within the architecture
    (Fed-ET, like :class:`~drake_bench.methods.fedit.FedIT`). No W_s, no gradient upload.
    Evaluation uses the client's adapter after local training, the model it would deploy (as FedIT).
    """

    meta = MethodMeta(
        name="fedit-pqlora",
        version="1.0",
        relative_compute=1.0,
        summary="FedIT with FedMosaic's aligned PQ-LoRA adapters and equal weights (the (+)PQ-LoRA ablation).",
        reference="Not All Clients Are Equal: Collaborative Model Personalization on Heterogeneous Multi-Modal Clients",
    )

    Config = FedMosaic.Config.with_defaults(
        "Config",
        qualname="FedITPQLoRA.Config",
        module=__name__,
        doc="FedMosaic's settings with FedIT's single adapter and equal weights within each architecture.",
        dual_path=False,
        weighting="equal",
        conv_agg="equal_within_type",
    )


class FedMosaicEqual(FedMosaic):
    """FedMosaic with equal weights: the dual path and its gate kept, RELA off (Table 7's middle step).

    Table 7 adds FedMosaic's parts to FedIT one at a time. ``fedit-pqlora`` is FedIT with aligned PQ-LoRA (one
    adapter, equal weights); this entry adds the dual path (a local and a global adapter mixed by the learnable
    gate) and still weights every client equally; ``fedmosaic`` adds RELA's relevance weights. Each step is one
    change, so the board credits RELA only with what the relevance weights do. Without RELA no client computes or
    uploads the relevance gradient, and each client's global adapter is the equal mean of P/Q over all clients
    (conventional LoRA within the architecture), the same for every client.
    """

    meta = MethodMeta(
        name="fedmosaic-equal",
        version="1.0",
        relative_compute=1.0,
        summary="FedMosaic's dual-path PQ-LoRA with equal client weights (RELA off): Table 7's middle step.",
        reference="Not All Clients Are Equal: Collaborative Model Personalization on Heterogeneous Multi-Modal Clients",
    )

    Config = FedMosaic.Config.with_defaults(
        "Config",
        qualname="FedMosaicEqual.Config",
        module=__name__,
        doc="FedMosaic's settings with equal weights: the dual path and gate kept, no relevance gradient.",
        weighting="equal",
        conv_agg="equal_within_type",
    )
