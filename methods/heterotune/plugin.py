"""HeteroTune as a drake_bench method plugin, and Homo-Training, its plain-adapter baseline.

The adapter (DeMA, through peft) is in :mod:`.dema`, the types and the relative-depth map in :mod:`.depths`, CMGA
in :mod:`.cmga`, the communication formula in :mod:`.accounting` and the settings in :mod:`.config`. The method
page is docs/methods/heterotune.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import torch

from drake_bench.benchmarks.sample import MethodSample
from drake_bench.errors import DrakeBenchError
from drake_bench.plugins.protocol import ClientContext, Diagnostic, FederationContext, Message, MethodMeta, State

from ..lora_clients import CanonicalLoraClients, LoraMethod, average
from .accounting import paper_floats, reduction, uplink_floats
from .cmga import KINDS, Column, align_columns
from .config import HeteroTuneConfig, HomoTrainingConfig
from .dema import canonical_keys, dema_blocks, make_dema_config
from .depths import ModelShape, TypeLayout, model_shape, type_layout

LOCAL_ROLES = ("down", "up", "mix")  # the type's local state: averaged within the type
OWN_ROLES = ("own_down", "own_up")  # the client's own share slot: uploaded, aligned, written into the bank
BANK_ROLES = ("bank_down", "bank_up")  # the frozen copies of every slot this client reads: never uploaded

HELD = "held@"
"""Server-state prefix of an earlier version of a type's own share slot that some client of the type still holds
(it skipped the rounds since): ``held@<version>/share.<type>.<entry>.<kind>``."""


def role(key: str) -> str:
    """``down.3`` -> ``down``."""
    return key.rsplit(".", 1)[0]


def block(key: str) -> int:
    return int(key.rsplit(".", 1)[1])


def share_key(type_index: int, entry: int, kind: str) -> str:
    """The server's name for entry ``entry`` of slot ``type_index``'s ``kind`` matrix."""
    return f"share.{type_index}.{entry}.{kind}"


def held_key(version: int, key: str) -> str:
    """The server's name for version ``version`` of the share-slot entry ``key`` (a copy some client still holds)."""
    return f"{HELD}{version}/{key}"


class HeteroClients(CanonicalLoraClients):
    """:class:`LoraClients` with DeMA adapters, HeteroTune's optimiser groups, the share regulariser, and
    architecture-independent state names (:func:`.dema.canonical_keys`: ``down.<l>``, ``own_up.<l>``, ...)."""

    canonical_keys = staticmethod(canonical_keys)

    def __init__(self, settings: HeteroTuneConfig):
        super().__init__(settings)
        self.layout: TypeLayout | None = None
        self.type_of_model: dict[str, int] = {}
        self._full: dict[str, int] = {}

    def setup(self, federation: FederationContext) -> None:
        names = {federation.architectures[c]: federation.allocation[c] for c in federation.clients}
        shapes: dict[str, ModelShape] = {arch: model_shape(name) for arch, name in names.items()}
        self.layout = type_layout(federation.architectures, shapes)
        self.type_of_model = {
            federation.allocation[c]: self.layout.index(federation.architectures[c]) for c in federation.clients
        }
        super().setup(federation)

    # -- hooks ------------------------------------------------------------------------------------------------
    def adapter_config(self, model_name: str) -> Any:
        s = self.settings
        assert self.layout is not None, "setup() first"
        return make_dema_config(
            rank=s.rank,
            types=self.layout.count,
            own_type=self.type_of_model[model_name],
            use_share=s.use_dema,
            learn_alpha=s.learn_alpha,
            alpha_param=s.alpha_param,
            activation=s.activation,
        )

    def param_groups(self, model: Any) -> list[dict[str, Any]]:
        """Weight decay on the local adapters only; alpha and the own slot are held by the share regulariser."""
        decayed, free = [], []
        for name, p in model.named_parameters():
            if p.requires_grad:
                (decayed if (".lora_down." in name or ".lora_up." in name) else free).append(p)
        groups = [{"params": decayed, "lr": self.settings.learning_rate, "weight_decay": self.settings.weight_decay}]
        if free:
            groups.append({"params": free, "lr": self.settings.learning_rate, "weight_decay": 0.0})
        return groups

    def share_penalty(self, model: Any) -> torch.Tensor | None:
        """lambda_s sum_l (||S_j^down[l] - T||^2 + ||S_j^up[l] - T||^2) on the own slot (config ``share_reg``)."""
        s = self.settings
        if not (s.use_dema and s.share_reg > 0):
            return None
        total = None
        for _, blk in dema_blocks(model):
            j = blk._dema_meta["default"]["type"]
            for own, bank in (("lora_own_down", "lora_bank_down"), ("lora_own_up", "lora_bank_up")):
                S = getattr(blk, own)["default"]
                if s.share_reg_target == "identity":
                    T = torch.eye(S.shape[0], dtype=S.dtype, device=S.device)
                elif s.share_reg_target == "zero":
                    T = torch.zeros_like(S)
                else:  # round_start: row j of the frozen bank is the slot as the server sent it
                    T = getattr(blk, bank)["default"][j]
                term = (S - T).pow(2).sum()
                total = term if total is None else total + term
        return None if total is None else s.share_reg * total

    def train(
        self,
        ctx: ClientContext,
        batches: Iterable[Sequence[MethodSample]],
        adapter: str | None = None,
        after_step: Any = None,
    ) -> float:
        """Local training as :meth:`LoraClients.train` (a fresh AdamW over :meth:`param_groups`, one step a batch),
        with the share regulariser added to the answer-token cross-entropy. Returns the mean cross-entropy."""
        from drake_bench.models.engine import loss_on, packing

        pool = self.pool
        losses: list[float] = []
        with pool.use(ctx.client_id) as model:
            opt = self.optimizer(model)
            for batch in batches:
                if not len(batch):
                    continue
                model.train()
                loss = loss_on(
                    model, pool.processor(ctx.client_id), list(batch), packed=packing(self.settings.packed_training)
                )
                penalty = self.share_penalty(model)
                (loss if penalty is None else loss + penalty).backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                losses.append(float(loss.detach()))
        return float(sum(losses) / len(losses)) if losses else 0.0

    def full_model_params(self, client: int) -> int:
        """Parameters of the client's whole base model (what full-model FedAvg would send)."""
        arch = self.pool.architecture(client)
        if arch not in self._full:
            adapter = sum(t.numel() for t in self.pool.initial_state(client).values())
            self._full[arch] = sum(p.numel() for p in self.pool.model_for(client).parameters()) - adapter
        return self._full[arch]


class HeteroTune(LoraMethod):
    """HeteroTune: DeMA adapters on clients of different sizes of one family, CMGA-aligned share slots.

    **Types.** Every architecture of the allocation is one model type (the tiny zoo's s/m/l of one family: width
    and depth differ; :mod:`.depths` orders them smallest first). M is the number of types.

    **DeMA** (:mod:`.dema`, paper Eq. 2 with alpha): after every decoder block of the language model, a type-specific
    local adapter (down m_j x r, up r x m_j) around the alpha-mix of M r x r share slots, one per type. A type-j
    client trains its local adapter, alpha and its own slot j; the other slots are frozen copies of what the other
    types learnt, read at the relative depth of the block (:func:`.depths.phi`). Widths never meet (the slots are
    r x r); depths meet through the depth map.

    **Round** (the paper's Fig. 3). A client starts from the server's last message to it (round 1: the one initial
    state of its type): its type's averaged local adapter and alpha, and the bank entries it reads, written into its
    own slot and its frozen bank rows. It trains on the round's batches with a fresh AdamW (weight decay on the local
    adapter only) and the share regulariser, and uploads its local adapter, alpha and own slot with n_k. The server
    averages the local adapters and alphas within each type (weights n_k) over the clients that took part, forms
    each type's pseudo-gradient Delta_j = sum_k w_k (S_j^(k) - S_j,k) of its slot (S_j^(k): the slot client k was
    sent; with every client in every round that is the current S_j for all, and Delta_j = S_j - sum_k w_k S_j,k),
    aligns the M' types' Delta by CMGA (:mod:`.cmga`) on the canonical depth grid, and sets
    S_j <- S_j - eta_s Delta~_j. Every client that took part is sent its type's part.

    **Partial participation** (``RunConfig.participation`` / ``clients_per_round``): a client that skipped rounds
    starts from the older message it was last sent, so its own slot started from an older S_j than the server's
    current one. The server keeps each such older version of a type's slot while a client of the type still holds
    it (``held@<version>/share.<j>.<e>.<kind>``), records which version each client was sent (metadata ``holds``,
    client -> version; ``version``, type -> the current slot's), measures each upload against the version its
    client holds (:meth:`aggregate`), and drops a version once no client holds it. With every client in every round
    nothing older is kept and the server state is what it was before this bookkeeping existed, bit for bit. A server
    state without these records (a checkpoint written before them) reads as every client holding the current slot,
    what the server then assumed. Draws are the evaluator's (uniform over clients), not the paper's per-type
    stratified 10%.

    **Variants** (the paper's ablations, all config): ``use_cmga=false`` ('w/o CMGA': each slot takes its type's mean),
    ``use_dema=false`` (Homo-Training, also registered as ``homo-training``), ``learn_alpha=false`` ('w/o LW'),
    ``share_reg=0`` ('w/o Reg'); an allocation of one model is the paper's AllSmall / AllLarge (M = 1: CMGA has
    nothing to align).

    **Evaluation.** As every drake_bench entry, a client is scored with what it holds after the round's local
    training (docs/design-notes.md#evaluated-model); with ``final_global`` (default) the last point is re-scored
    with each type's global model (the type's averaged local adapter and alpha, the aligned bank), the paper's
    evaluation target. Fast adaptation starts from the type's global model written into the average of its clients'
    final states.

    **Adaptations** from the paper (ViT classifiers and LLaMA sequence classifiers) to drake_bench's generative
    clients (tiny LLaVAs and LLMs): DeMA sits after the *language model's* decoder blocks only (the tiny LLaVAs share
    one frozen vision tower, as LLaVA-1.5 freezes its CLIP: it is no source of heterogeneity); there is no per-type
    classification head (answers come from the frozen LM head, so nothing like the paper's head is trained or
    sent); the loss is the engine's answer-token cross-entropy; the local schedule is the benchmark's local steps,
    not 20 epochs; every client takes part in every round unless the run samples them (``participation``,
    ``clients_per_round``: a uniform draw, not 10% stratified by type); r = 16 and the zoo's learning rate 3e-3 for
    widths 48-128. docs/methods/heterotune.md gives each with its reason.
    """

    meta = MethodMeta(
        name="heterotune",
        version="1.0",
        relative_compute=1.0,
        summary="Clients of different sizes share r x r adapter slots mixed by learnt weights (DeMA); the server "
        "whitens the types' slot updates jointly (CMGA).",
        reference="Jia et al., HeteroTune: Efficient Federated Learning for Large Heterogeneous Models",
    )

    Config = HeteroTuneConfig

    def __init__(self, config: HeteroTuneConfig | None = None):
        self.config = config or self.Config()
        self.clients = HeteroClients(self.config)
        self._rows: list[Diagnostic] = []

    def setup(self, federation: FederationContext) -> None:
        super().setup(federation)
        self.layout: TypeLayout = self.clients.layout  # type: ignore[assignment]
        self.type_of = {c: self.layout.index(a) for c, a in self.arch.items()}

    # -- what travels ------------------------------------------------------------------------------------------
    @staticmethod
    def uploaded(key: str) -> bool:
        return role(key) in LOCAL_ROLES or role(key) in OWN_ROLES

    def message_for(self, j: int, server: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """A type-j client's view of the server: its type's local state and the share entries it reads."""
        prefix = f"type{j}/"
        out = {k[len(prefix) :]: v for k, v in server.items() if k.startswith(prefix)}
        if self.config.use_dema:
            for i, entries in self.layout.read_sets(j).items():
                for e in entries:
                    for kind in KINDS:
                        out[share_key(i, e, kind)] = server[share_key(i, e, kind)]
        return out

    def apply_message(self, j: int, tensors: dict[str, torch.Tensor], message: dict[str, torch.Tensor]) -> None:
        """Write a server message into a type-j client's state: the local state as sent; own slot at block l =
        S_j[l]; bank row i at block l = S_i[phi(l; L_j -> L_i)] (row j: S_j[l], the round-start own slot)."""
        for k, v in message.items():
            if not k.startswith("share."):
                if k not in tensors:
                    raise ValueError(f"the server's message names a tensor this client does not hold: {k}")
                tensors[k] = v.clone()
        if not self.config.use_dema:
            return
        reads = self.layout.reads(j)
        for l in range(self.layout.depths[j]):
            for kind in KINDS:
                tensors[f"own_{kind}.{l}"] = message[share_key(j, l, kind)].clone()
                bank = tensors[f"bank_{kind}.{l}"].clone()
                for i, entries in reads.items():
                    bank[i] = message[share_key(i, entries[l], kind)]
                tensors[f"bank_{kind}.{l}"] = bank

    # -- protocol ----------------------------------------------------------------------------------------------
    def init_client(self, ctx: ClientContext) -> State:
        return State(tensors=self.clients.initial_canonical(ctx.client_id))

    def init_server(self) -> State:
        """Each type's initial local state (identical for every client of the type) and the initial bank: every
        entry of every slot the identity (each type's own initial slot, entry by entry)."""
        tensors: dict[str, torch.Tensor] = {}
        first: dict[int, int] = {}
        for c in sorted(self.type_of):
            first.setdefault(self.type_of[c], c)
        for j, client in sorted(first.items()):
            for k, v in self.clients.initial_canonical(client).items():
                if role(k) in LOCAL_ROLES:
                    tensors[f"type{j}/{k}"] = v.clone()
                elif role(k) in OWN_ROLES:
                    tensors[share_key(j, block(k), role(k).removeprefix("own_"))] = v.clone()
        return State(
            tensors=tensors,
            metadata={
                "round": 0,
                "types": list(self.layout.architectures),
                "version": {str(j): 0 for j in range(self.layout.count)},
                "holds": {str(c): 0 for c in sorted(self.type_of)},
            },
        )

    def client_update(
        self, ctx: ClientContext, state: State, message: Message | None, batches: Iterable[Sequence[MethodSample]]
    ) -> tuple[Message, State]:
        tensors = dict(state.tensors)
        if message is not None and message.tensors:
            self.apply_message(self.type_of[ctx.client_id], tensors, dict(message.tensors))
        batches = [b for b in batches]
        self.clients.load_canonical(ctx.client_id, tensors)
        loss = self.clients.train(ctx, batches)
        new = self.clients.dump_canonical(ctx.client_id)
        n = sum(len(b) for b in batches)
        upload = {k: v for k, v in new.items() if self.uploaded(k)}
        return Message(tensors=upload, metadata={"n": n}), State(tensors=new, metadata={"loss": loss, "n": n})

    def _weights(self, uploads: dict[int, Message], members: list[int]) -> list[float]:
        n = [float(uploads[c].metadata.get("n", 0)) for c in members]
        if self.config.weighting == "equal" or sum(n) <= 0:  # nobody trained: the plain mean of equal starts
            return [1.0] * len(members)
        return n

    def server_lr(self, round_idx: int) -> float:
        lr = self.config.server_lr
        return lr / (round_idx + 1) ** 0.5 if self.config.server_lr_schedule == "inv_sqrt" else lr

    def aggregate(
        self, round_idx: int, server_state: State, uploads: dict[int, Message]
    ) -> tuple[dict[int, Message], State]:
        """Local adapters and alphas: the n_k-weighted mean within each type. Share slots: each type's pseudo-gradient,
        aligned across types by CMGA (or not, ``use_cmga=false``), applied with the server step. Every client that
        took part gets its type's part.

        Under partial participation a client that skipped rounds started from an older version of its type's slot
        than the current one (the last one it was sent); its part of the pseudo-gradient is measured from that
        version, which the server kept (``held@<version>/share.<j>.<e>.<kind>``) while some client of the type held
        it. Metadata ``holds`` records the version each client was sent, ``version`` each type's current one; a
        version is dropped as soon as no client holds it, so with every client in every round none is kept. A server
        state without these records (a checkpoint written before them) reads as every client holding the current
        slot, which is what the server then assumed."""
        self._rows = []
        meta = server_state.metadata or {}
        recorded_v = {int(j): int(v) for j, v in (meta.get("version") or {}).items()}
        version = {j: recorded_v.get(j, 0) for j in range(self.layout.count)}
        recorded = {int(c): int(v) for c, v in (meta.get("holds") or {}).items()}
        holds = {c: recorded.get(c, version.get(t, 0)) for c, t in sorted(self.type_of.items())}
        server = dict(server_state.tensors)
        by_type: dict[int, list[int]] = {}
        for c in sorted(uploads):
            by_type.setdefault(self.type_of[c], []).append(c)
        columns: list[Column] = []
        for j, members in sorted(by_type.items()):
            w = self._weights(uploads, members)
            local = [k for k in uploads[members[0]].tensors if role(k) in LOCAL_ROLES]
            mean = average([{k: uploads[c].tensors[k] for k in local} for c in members], w)
            for k, v in mean.items():
                server[f"type{j}/{k}"] = v
            if self.config.use_dema:
                sent = {c: self._slot_sent(server_state.tensors, j, version.get(j, 0), holds[c], c) for c in members}
                columns += self._columns(j, members, w, server, uploads, sent)
        reports = []
        if columns:
            aligned, reports = align_columns(
                columns,
                self.layout.depths,
                enabled=self.config.use_cmga,
                granularity=self.config.cmga_granularity,
                eps=self.config.cmga_eps,
                eps_mode=self.config.cmga_eps_mode,
                rescale=self.config.cmga_rescale,
            )
            eta = self.server_lr(round_idx)
            for j, update in aligned.items():
                for kind in KINDS:
                    for e, d in enumerate(update[kind]):
                        key = share_key(j, e, kind)
                        server[key] = (server[key].double() - eta * d).to(server[key].dtype)
        self._hold(round_idx, server_state.tensors, server, by_type, version, holds)
        if self.config.report_diagnostics:
            self._rows = self._diagnostics(server, uploads, by_type, reports)
        messages = {c: Message(tensors=self.message_for(self.type_of[c], server)) for c in uploads}
        return messages, State(
            tensors=server,
            metadata={
                **server_state.metadata,
                "round": round_idx + 1,
                "types": list(self.layout.architectures),
                "version": {str(j): v for j, v in sorted(version.items())},
                "holds": {str(c): v for c, v in sorted(holds.items())},
            },
        )

    def _slot_keys(self, j: int) -> list[str]:
        return [share_key(j, e, kind) for e in range(self.layout.depths[j]) for kind in KINDS]

    def _slot_sent(
        self, tensors: dict[str, torch.Tensor], j: int, current_v: int, held_v: int, client: int
    ) -> dict[str, torch.Tensor] | None:
        """Type ``j``'s own slot as ``client`` was sent it (version ``held_v``); None when that is the current one."""
        if held_v == current_v:
            return None
        keys = self._slot_keys(j)
        missing = [k for k in keys if held_key(held_v, k) not in tensors]
        if missing:
            raise DrakeBenchError(
                f"type {self.layout.architectures[j]!r}: client {client} started from version {held_v} of the type's "
                f"share slot, which the server's state does not hold (current version {current_v}; missing e.g. "
                f"{held_key(held_v, missing[0])}); its pseudo-gradient cannot be formed"
            )
        return {k: tensors[held_key(held_v, k)] for k in keys}

    def _hold(
        self,
        round_idx: int,
        before: dict[str, torch.Tensor],
        server: dict[str, torch.Tensor],
        by_type: dict[int, list[int]],
        version: dict[int, int],
        holds: dict[int, int],
    ) -> None:
        """The bookkeeping after a round (in place): the slot each type had before the round is kept while a client
        of the type that did not take part still holds it; the clients that took part now hold the new version
        (this round's); a kept version that no client holds any more is dropped."""
        for j, members in sorted(by_type.items()):
            current_v = version.get(j, 0)
            absent = [c for c, t in self.type_of.items() if t == j and c not in members]
            if self.config.use_dema and any(holds[c] == current_v for c in absent):
                for k in self._slot_keys(j):
                    server[held_key(current_v, k)] = before[k].clone()
            version[j] = round_idx + 1
            for c in members:
                holds[c] = round_idx + 1
        in_use = {(self.type_of[c], v) for c, v in holds.items()}
        for k in [k for k in server if k.startswith(HELD)]:
            v, key = k[len(HELD) :].split("/", 1)
            j = int(key.split(".")[1])
            if (j, int(v)) not in in_use or int(v) == version.get(j, 0):
                del server[k]

    def _columns(
        self,
        j: int,
        members: list[int],
        w: list[float],
        server: dict[str, torch.Tensor],
        uploads: dict[int, Message],
        sent: dict[int, dict[str, torch.Tensor] | None] | None = None,
    ) -> list[Column]:
        """CMGA's columns of type j: its group-mean pseudo-gradient (``cmga_over="types"``) or one per client.

        Client k's part is measured from the slot it was sent, ``sent[k]`` (None or absent: the current slot in
        ``server``): Delta_j = sum_k w_k (S_j^(k) - S_j,k), computed as S_j - sum_k w_k S_j,k plus, for each client
        sent an older slot, w_k (S_j^(k) - S_j), so that with every client on the current slot it is the plain
        formula to the bit."""
        L = self.layout.depths[j]
        total = sum(w)
        sent = sent or {}

        def start(kind: str, e: int) -> torch.Tensor:
            return server[share_key(j, e, kind)].double()

        def started(c: int, kind: str, e: int) -> torch.Tensor:
            held = sent.get(c)
            return start(kind, e) if held is None else held[share_key(j, e, kind)].double()

        def after(c: int, kind: str, e: int) -> torch.Tensor:
            return uploads[c].tensors[f"own_{kind}.{e}"].double()

        if self.config.cmga_over == "clients":
            return [
                Column(
                    j, wi / total, {kind: [started(c, kind, e) - after(c, kind, e) for e in range(L)] for kind in KINDS}
                )
                for c, wi in zip(members, w)
            ]
        delta = {
            kind: [
                start(kind, e) - sum((wi / total) * after(c, kind, e) for c, wi in zip(members, w)) for e in range(L)
            ]
            for kind in KINDS
        }
        stale = [(c, wi) for c, wi in zip(members, w) if sent.get(c) is not None]
        for kind in KINDS:
            for e in range(L):
                for c, wi in stale:
                    delta[kind][e] = delta[kind][e] + (wi / total) * (started(c, kind, e) - start(kind, e))
        return [Column(j, 1.0, delta)]

    def _diagnostics(
        self, server: dict[str, torch.Tensor], uploads: dict[int, Message], by_type: dict[int, list[int]], reports: list
    ) -> list[Diagnostic]:
        rows: list[Diagnostic] = []
        archs = self.layout.architectures
        per_type = self.config.cmga_over == "types"
        for rep in reports:
            values: dict[str, Any] = {
                "columns": len(rep.types),
                "aligned": rep.after is not None,
                "eps": rep.eps,
                "mean_abs_cos_before": rep.before.mean_abs_cos,
                "max_abs_cos_before": rep.before.max_abs_cos,
                "min_cos_before": rep.before.min_cos,
                "mean_abs_cos_after": rep.after.mean_abs_cos if rep.after else None,
                "max_abs_cos_after": rep.after.max_abs_cos if rep.after else None,
            }
            if per_type:
                for t, norm in zip(rep.types, rep.before.norms):
                    values[f"norm_before.{archs[t]}"] = norm
                if rep.after is not None:
                    for t, norm in zip(rep.types, rep.after.norms):
                        values[f"norm_after.{archs[t]}"] = norm
            rows.append(Diagnostic(key=f"cmga.{rep.key}", values=values))
        if self.config.use_dema:
            for j in sorted(by_type):
                mixes = [server[k] for k in server if k.startswith(f"type{j}/mix.")]
                if not mixes:
                    continue
                stack = torch.stack(mixes).double()
                if self.config.alpha_param == "softmax":
                    stack = torch.softmax(stack, dim=1)
                mean = stack.mean(0)
                rows.append(
                    Diagnostic(
                        key=f"alpha.{archs[j]}",
                        values={f"{archs[i]}": float(mean[i]) for i in range(self.layout.count)},
                    )
                )
        r, M = self.config.rank, self.layout.count
        for j, members in sorted(by_type.items()):
            shape = self.layout.shapes[j]
            sent = [sum(t.numel() for t in uploads[c].tensors.values()) for c in members]
            formula = uplink_floats(shape.blocks, shape.width, r, M, share=self.config.use_dema)
            full = self.clients.full_model_params(members[0])
            rows.append(
                Diagnostic(
                    key=f"communication.{archs[j]}",
                    values={
                        "clients": len(members),
                        "blocks": shape.blocks,
                        "width": shape.width,
                        "rank": r,
                        "types": M,
                        "uplink_floats_per_client": sum(sent) / len(sent),
                        "uplink_floats_formula": formula,
                        "paper_formula": paper_floats(shape.blocks, shape.width, r) if self.config.use_dema else None,
                        "full_model_params": full,
                        "reduction_vs_full_model": reduction(formula, full),
                    },
                )
            )
        return rows

    def round_diagnostics(self, round_idx: int) -> list[Diagnostic]:
        """The rows of the ``aggregate`` that has just run."""
        return list(self._rows)

    def predict(self, ctx: ClientContext, state: State, queries: Sequence[MethodSample]) -> list[str]:
        self.clients.load_canonical(ctx.client_id, dict(state.tensors))
        return self.clients.predict(ctx, queries)

    def post_federation(
        self, federation: FederationContext, client_states: dict[int, State], server_state: State
    ) -> dict[int, State]:
        """Each type's global model (``final_global``): the server's last message written into every client's
        state. Unchanged states when ``final_global`` is off."""
        if not self.config.final_global:
            return dict(client_states)
        server = dict(server_state.tensors)
        out = {}
        for c, s in client_states.items():
            tensors = dict(s.tensors)
            self.apply_message(self.type_of[c], tensors, self.message_for(self.type_of[c], server))
            out[c] = State(tensors=tensors, metadata=dict(s.metadata))
        return out

    def adaptation_state(self, architecture: str, client_states: dict[int, State], server_state: State) -> State:
        """The type's global model: the uniform average of its clients' final states with the server's type state
        and bank written in (docs/design-notes.md#adaptation-init)."""
        tensors = average([s.tensors for s in client_states.values()])
        j = self.layout.index(architecture)
        if server_state.tensors:
            self.apply_message(j, tensors, self.message_for(j, dict(server_state.tensors)))
        return State(tensors=tensors)


class HomoTraining(HeteroTune):
    """Homo-Training, the paper's baseline: the plain bottleneck adapter of its Eq. 1 (``y = x + h(x W_down) W_up``
    after every decoder block of the language model), FedAvg within each model type, nothing across types.

    Not FedIT: FedIT averages LoRA on the attention and MLP linears, this averages a bottleneck adapter on the block
    output, HeteroTune's local adapter without its share slots, so the difference to HeteroTune is DeMA and CMGA
    alone (the paper's 'w/o DeMA & CMGA' rows equal its Homo-Training rows). Everything else (local training, the
    weighting, evaluation) is HeteroTune's; ``use_dema=true`` would turn it into HeteroTune.
    """

    meta = MethodMeta(
        name="homo-training",
        version="1.0",
        relative_compute=1.0,
        summary="A plain bottleneck adapter after every LM block, FedAvg within each model type (HeteroTune's "
        "baseline).",
        reference="Jia et al., HeteroTune: Efficient Federated Learning for Large Heterogeneous Models "
        "(the Homo-Training baseline)",
    )

    Config = HomoTrainingConfig
