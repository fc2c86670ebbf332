"""pFedMMA as a drake_bench method plugin: multi-modal adapters whose r x r shared projections are the only thing
the server averages.

The adapters and where they sit are in :mod:`.mma` and :mod:`.depths`; the communication formula in
:mod:`.accounting`. The method page is docs/methods/pfedmma.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field

from drake_bench.benchmarks.sample import MethodSample
from drake_bench.plugins.protocol import ClientContext, Diagnostic, FederationContext, Message, MethodMeta, State

from ..lora_clients import (
    CanonicalLoraClients,
    LoraMethod,
    average,
    model_loader_field,
    offload_dir_field,
    packed_training_field,
    segment_attention_field,
)
from .accounting import communicated_floats, paper_floats
from .depths import EncoderLayout, depth_map, layout_of
from .mma import canonical_keys, make_mma_config, tie_shared

Control = Literal["pfedmma", "local-only", "all-global", "down-up-global"]

CONTROLS: dict[str, tuple[bool, bool]] = {
    # control: (shared projections averaged, down/up projections averaged)
    "pfedmma": (True, False),
    "local-only": (False, False),
    "all-global": (True, True),
    "down-up-global": (False, True),
}
"""Which parameter groups the server averages under each control (the paper's Table 5 arms and Table 21's local
training); the adapter architecture and the local training are the same in all of them."""


class PFedMMAConfig(BaseModel):
    """pFedMMA's settings. Defaults: the paper's adapter (ReLU, biases, Kaiming init, the gradient-scale layer,
    α = 0.005) and optimiser (SGD, momentum 0.9, weight decay 5e-4), scaled to the tiny zoo: r = 8 and m = 2
    instrumented depths, and a learning rate selected on the validation split (docs/methods/pfedmma.md says how)."""

    model_config = ConfigDict(extra="forbid")

    control: Control = Field(
        default="pfedmma",
        description="Which adapter parts the server averages. 'pfedmma': only the shared r x r projections (the "
        "method). 'local-only': nothing (no communication; the paper's Table 21 arm). 'all-global': "
        "shared and down/up projections (Table 5's first arm). 'down-up-global': down/up averaged, "
        "each client keeps its own shared projections (Table 5's second arm). Down/up projections are "
        "averaged only among clients of one architecture (their shapes differ across architectures).",
    )
    rank: int = Field(
        default=8,
        ge=1,
        description="r, the adapters' bottleneck: down maps the block's width to r, shared is r x r, up maps r back. "
        "The paper's 32 is for CLIP widths 512/768; the zoo's widths are 48-128, so 8 keeps the same "
        "ratio of bottleneck to width as the zoo's rank-8 LoRA baselines.",
    )
    depths: int = Field(
        default=2,
        ge=1,
        description="m, the number of instrumented depths in every encoder (vision and language alike). Equal for "
        "every model, so the shared projection of depth k is averaged across every client whatever its "
        "architecture. The paper's l = 10 of L = 12 is m = 3; the zoo's 4- to 8-block encoders hold 1-2 "
        "blocks in their top quarter, and 2 gives every zoo model two adapted blocks per encoder.",
    )
    top_fraction: float = Field(
        default=0.25,
        gt=0.0,
        le=1.0,
        description="The span of top blocks that holds the instrumented depths: the top top_fraction of each "
        "encoder's blocks, widened to `depths` blocks where it holds fewer; depth k sits at relative "
        "position (k + 1) / m of that span, so the vision and the language block of one depth are at "
        "the same relative depth. The paper's 3 of 12 blocks is 0.25 (its l = 5 runs: 8 of 12).",
    )
    adapter_scale: float = Field(
        default=0.005,
        gt=0.0,
        description="α, the scale of the adapter branch added to each block's output (the paper's 0.005, its Tables "
        "5 and 15). Kept from the paper so that the gradient-scale path is the one it tuned.",
    )
    grad_scale: bool = Field(
        default=True,
        description="MMA's gradient-scale layer: the adapter parameters' gradients are multiplied by 1/α while the "
        "forward pass and the gradient into the frozen model are unchanged. Without it the same steps "
        "need the learning rate divided by α. It is in the paper's code, not in its text.",
    )
    activation: Literal["relu", "gelu"] = Field(
        default="relu",
        description="δ, after down and after shared (none after up). ReLU as in the paper's code; the paper's text "
        "says 'e.g., GELU'.",
    )
    sgd_lr: float = Field(
        default=0.00125,
        gt=0.0,
        description="SGD learning rate, constant (with the gradient-scale layer on). Selected on drake-synth 1.9.0's "
        "validation split (`drake-bench tune pfedmma --grid sgd_lr=0.00125,0.0025,0.005,0.02,0.08`, record "
        "leaderboard/tuning/pfedmma-sgd-lr/tuning.json): validation Self fell as the rate rose (34.15 at "
        "0.00125 down to 31.13 at 0.08, zero-shot 34.27), so the smallest rate tried won, at the grid's "
        "edge. The paper's 1e-3 was tuned for CLIP; the former 0.02 came from a probe of test-item loss "
        "(docs/methods/pfedmma.md, 'The learning rate').",
    )
    sgd_momentum: float = Field(
        default=0.9,
        ge=0.0,
        lt=1.0,
        description="SGD momentum (0.9, the paper's code). The optimiser is built fresh for every local update, so "
        "momentum never carries from one round or client to another.",
    )
    sgd_weight_decay: float = Field(
        default=5e-4,
        ge=0.0,
        description="SGD weight decay on every adapter parameter (5e-4, the paper's code); not rescaled by the "
        "gradient-scale layer.",
    )
    final_global: bool = Field(
        default=True,
        description="After the last round, write the server's last aggregate into every client's state and score "
        "the final evaluation point with it: the model Algorithm 1 returns (local down/up, the global "
        "shared projections). Off: the final point scores what each client holds after its last local "
        "update, as every intermediate point does.",
    )
    report_diagnostics: bool = Field(
        default=True,
        description="Report per round the shared projections' norm and client spread per depth, and the floats "
        "each client sent beside the formula m (r^2 + r) and the paper's m r^2 (raw.diagnostics).",
    )
    offload_dir: str | None = offload_dir_field()
    packed_training: bool = packed_training_field()
    segment_attention: bool = segment_attention_field()
    model_loader: Literal["zoo", "testing"] = model_loader_field()


def model_layout(model_name: str) -> EncoderLayout:
    """Block counts of a zoo model from its ``transformers`` config, without loading weights."""
    from drake_bench.models.zoo import model_info, tiny_config

    info = model_info(model_name)
    if info.tiny:
        return layout_of(tiny_config(model_name))
    from transformers import AutoConfig

    return layout_of(AutoConfig.from_pretrained(info.source))


class MMAClients(CanonicalLoraClients):
    """:class:`LoraClients` with pFedMMA's adapters, state names and optimiser.

    Client states use architecture-independent names (:func:`.mma.canonical_keys`): ``shared.<k>.weight|bias``,
    ``language.<k>.down|up.weight|bias`` and, on multimodal clients, ``vision.<k>.down|up.weight|bias``.
    """

    canonical_keys = staticmethod(canonical_keys)

    def __init__(self, settings: PFedMMAConfig):
        super().__init__(settings)
        self.init_seed = 0

    def setup(self, federation: FederationContext) -> None:
        self.init_seed = int(federation.seed)
        super().setup(federation)

    # -- hooks ------------------------------------------------------------------------------------------------
    def adapter_config(self, model_name: str) -> Any:
        s = self.settings
        layout = model_layout(model_name)
        dmap = depth_map(layout, s.depths, s.top_fraction)
        return make_mma_config(
            layout,
            list(dmap.language),
            list(dmap.vision) if dmap.vision is not None else None,
            rank=s.rank,
            alpha=s.adapter_scale,
            grad_scale=s.grad_scale,
            activation=s.activation,
            seed=self.init_seed,
        )

    def post_attach(self, model: Any) -> None:
        """One shared projection per depth, owned by the language block and read by the vision block."""
        tie_shared(model, "default")

    def param_groups(self, model: Any) -> list[dict[str, Any]]:
        params = [p for p in model.parameters() if p.requires_grad]
        return [{"params": params, "lr": self.settings.sgd_lr, "weight_decay": self.settings.sgd_weight_decay}]

    def optimizer(self, model: Any) -> torch.optim.Optimizer:
        """SGD with the paper's momentum and weight decay, fresh for every local update (the paper's code reuses
        one optimiser across clients, so momentum leaks between them; a fresh one keeps each client to its own)."""
        return torch.optim.SGD(self.param_groups(model), lr=self.settings.sgd_lr, momentum=self.settings.sgd_momentum)


def is_shared(key: str) -> bool:
    return key.startswith("shared.")


class PFedMMA(LoraMethod):
    """pFedMMA: personalised multi-modal adapters whose shared r x r projections are the only thing averaged.

    **Adapters** (:mod:`.mma`): at each of m instrumented depths, a vision adapter on a block of the vision tower
    and a language adapter on the language-model block paired with it by relative depth (:mod:`.depths`); each is
    down -> ReLU -> shared -> ReLU -> up (affine maps), reads the block's own frozen pre-attention norm of the block
    input and adds α times its output to the block's output, in parallel with the whole frozen block, through MMA's
    gradient-scale layer. The two adapters of a depth share one r x r projection. Kaiming-normal (fan_out, ReLU)
    weights and zero biases from one seeded initial state: every client of an architecture starts identical, and
    the shared projections start identical in every architecture. **Text-only clients** (an LLM without a vision
    tower) carry the language adapters alone; their shared projection of depth k is still the one every client
    averages.

    **Round** (the paper's Algorithm 1): a client loads its own down/up projections (from its state), overwrites
    its shared projections with the global ones the server last sent it (round 1: the initial state, which is the
    global one), trains everything trainable with a fresh SGD (momentum 0.9, weight decay 5e-4) on the round's
    batches, and uploads only its shared projections (weights and biases) with n_i, the number of samples it
    trained on this round. The server takes the n_i-weighted mean over the clients of the round and sends it to
    every client, which writes it into its state at its next round (and, with ``final_global``, after the last one).

    **Heterogeneous architectures**: the shared projection is r x r whatever the widths, and every model has the
    same m depths, so the shared projection of depth k is averaged across every client (as FedMosaic averages
    PQ-LoRA's P across architectures). Down/up projections have architecture-specific shapes: the controls that
    average them do so only among the clients of one architecture, with weights n_i renormalised there.

    **Controls** (``control``): ``local-only``, ``all-global`` and ``down-up-global`` keep the same adapters and
    local training and change only what is averaged (the paper's Tables 5 and 21).

    **Evaluation**: a client is scored with what it holds after the round's local training, as for every
    single-adapter method (docs/design-notes.md#evaluated-model): the server's average reaches it at its next
    round. With ``final_global`` the last point is re-scored with the model Algorithm 1 returns, (local down/up,
    global shared). **Fast adaptation** starts from the architecture's average of the final local down/up with the
    server's global shared projections (docs/design-notes.md#adaptation-init).

    **Adaptations** from the paper (CLIP classifiers) to drake_bench's generative clients: the vision adapter sits
    on the vision tower's blocks and the text adapter on the language model's decoder blocks (pre-norm: an RMSNorm
    there); the loss is the engine's answer-token cross-entropy instead of CLIP's prompt-matching cross-entropy;
    the local schedule is the benchmark's local steps, not E epochs; r = 8 and m = 2 and a retuned SGD learning rate
    for the tiny zoo. Every such choice is listed, with why, in docs/methods/pfedmma.md.
    """

    meta = MethodMeta(
        name="pfedmma",
        version="1.0",
        relative_compute=1.0,
        summary="Multi-modal adapters on the top blocks of both encoders; only their shared r x r projections are "
        "averaged.",
        reference="Ghiasvand et al., pFedMMA: Personalized Federated Fine-Tuning with Multi-Modal Adapter for "
        "Vision-Language Models (arXiv 2507.05394)",
    )

    Config = PFedMMAConfig

    def __init__(self, config: PFedMMAConfig | None = None):
        self.config = config or self.Config()
        self.clients = MMAClients(self.config)
        self._rows: list[Diagnostic] = []

    # -- what travels ------------------------------------------------------------------------------------------
    def averaged(self, key: str) -> bool:
        """Whether the server averages this canonical tensor under the configured control."""
        shared, down_up = CONTROLS[self.config.control]
        return shared if is_shared(key) else down_up

    def _messages(self, server: dict[str, torch.Tensor], clients: Iterable[int]) -> dict[int, dict[str, torch.Tensor]]:
        """Each client's view of the server's aggregate: the shared projections, and its architecture's down/up."""
        out = {}
        shared = {k: v for k, v in server.items() if is_shared(k)}
        for c in clients:
            prefix = f"{self.arch[c]}/"
            out[c] = {**shared, **{k[len(prefix) :]: v for k, v in server.items() if k.startswith(prefix)}}
        return out

    # -- protocol ----------------------------------------------------------------------------------------------
    def init_client(self, ctx: ClientContext) -> State:
        return State(tensors=self.clients.initial_canonical(ctx.client_id))

    def init_server(self) -> State:
        """The global parts of the one initial state θ⁰ (the same for every client of an architecture, and the
        shared projections the same for all)."""
        tensors: dict[str, torch.Tensor] = {}
        first: dict[str, int] = {}
        for c in sorted(self.arch):
            first.setdefault(self.arch[c], c)
        for arch, client in first.items():
            for k, v in self.clients.initial_canonical(client).items():
                if self.averaged(k):
                    tensors[k if is_shared(k) else f"{arch}/{k}"] = v.clone()
        return State(tensors=tensors, metadata={"round": 0})

    def client_update(
        self, ctx: ClientContext, state: State, message: Message | None, batches: Iterable[Sequence[MethodSample]]
    ) -> tuple[Message, State]:
        tensors = dict(state.tensors)
        if message is not None and message.tensors:
            unknown = sorted(set(message.tensors) - set(tensors))
            if unknown:
                raise ValueError(f"the server's message names tensors this client does not hold: {unknown[:4]}")
            tensors.update(message.tensors)  # overwrite the averaged parts with the global ones
        batches = [b for b in batches]
        self.clients.load_canonical(ctx.client_id, tensors)
        loss = self.clients.train(ctx, batches)
        new = self.clients.dump_canonical(ctx.client_id)
        n = sum(len(b) for b in batches)
        upload = {k: v for k, v in new.items() if self.averaged(k)}
        meta = {"n": n} if upload else {}
        return Message(tensors=upload, metadata=meta), State(tensors=new, metadata={"loss": loss, "n": n})

    def aggregate(
        self, round_idx: int, server_state: State, uploads: dict[int, Message]
    ) -> tuple[dict[int, Message], State]:
        """The n_i-weighted mean of every uploaded tensor: shared projections over all clients, down/up within each
        architecture. Every client gets the result (its architecture's part of it)."""
        self._rows = []
        server = dict(server_state.tensors)
        groups: dict[str, list[int]] = {}
        for c in sorted(uploads):
            for k in uploads[c].tensors:
                groups.setdefault(k if is_shared(k) else f"{self.arch[c]}/{k}", []).append(c)
        for key, members in groups.items():
            local = key.split("/", 1)[1] if "/" in key else key
            n = [float(uploads[c].metadata.get("n", 0)) for c in members]
            weights = n if sum(n) > 0 else [1.0] * len(members)  # nobody trained: the plain mean of equal starts
            server[key] = average([{local: uploads[c].tensors[local]} for c in members], weights)[local]
        if self.config.report_diagnostics:
            self._rows = self._diagnostics(server, uploads, groups)
        messages = self._messages(server, uploads)
        return (
            {c: Message(tensors=t) for c, t in messages.items()},
            State(tensors=server, metadata={"round": round_idx + 1}),
        )

    def _diagnostics(
        self, server: dict[str, torch.Tensor], uploads: dict[int, Message], groups: dict[str, list[int]]
    ) -> list[Diagnostic]:
        rows = []
        for key in sorted(k for k in groups if is_shared(k) and k.endswith(".weight")):
            mean = server[key]
            norm = float(torch.linalg.norm(mean))
            spread = [float(torch.linalg.norm(uploads[c].tensors[key] - mean)) for c in groups[key]]
            rows.append(
                Diagnostic(
                    key=key.removesuffix(".weight"),
                    values={
                        "clients": len(groups[key]),
                        "weight_norm": norm,
                        "client_spread": (sum(spread) / len(spread) / norm) if norm > 0 else None,
                    },
                )
            )
        sent = [sum(t.numel() for t in u.tensors.values()) for u in uploads.values()]
        rows.append(
            Diagnostic(
                key="communication",
                values={
                    "control": self.config.control,
                    "depths": self.config.depths,
                    "rank": self.config.rank,
                    "clients": len(uploads),
                    "uplink_floats_per_client": (sum(sent) / len(sent)) if sent else 0,
                    "shared_floats_formula": communicated_floats(self.config.depths, self.config.rank),
                    "shared_floats_paper": paper_floats(self.config.depths, self.config.rank),
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
        """Algorithm 1's returned model: every client's own down/up with the server's last aggregate written in
        (the shared projections under pFedMMA). Unchanged states when ``final_global`` is off."""
        if not self.config.final_global:
            return dict(client_states)
        messages = self._messages(dict(server_state.tensors), client_states)
        return {
            c: State(tensors={**s.tensors, **messages[c]}, metadata=dict(s.metadata)) for c, s in client_states.items()
        }

    def adaptation_state(self, architecture: str, client_states: dict[int, State], server_state: State) -> State:
        """The architecture's uniform average of its clients' final adapters ("aggregated local models"), with the
        server's global parts (the shared projections under pFedMMA) written in."""
        tensors = average([s.tensors for s in client_states.values()])
        prefix = f"{architecture}/"
        for k, v in server_state.tensors.items():
            if is_shared(k) and k in tensors:
                tensors[k] = v.clone()
            elif k.startswith(prefix):
                tensors[k[len(prefix) :]] = v.clone()
        return State(tensors=tensors)
