"""HeteroTune's settings: the paper's method, its ablations as switches, and every choice it leaves open.

Tags in the descriptions: [P] the paper states it; [I] the paper leaves it open (or contradicts itself) and this is
the reading that keeps its equations consistent (with the reason); [R] drake_bench's own choice for its tiny
generative clients (with the reason). docs/methods/heterotune.md lists the same with the measurements behind them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..lora_clients import model_loader_field, offload_dir_field, packed_training_field, segment_attention_field


class HeteroTuneConfig(BaseModel):
    """HeteroTune's settings (defaults: the full method, DeMA + CMGA)."""

    model_config = ConfigDict(extra="forbid")

    # -- the method and its ablations ------------------------------------------------------------------------
    use_dema: bool = Field(
        default=True,
        description="[P] DeMA: per block a type-specific local adapter and M r x r share slots mixed by alpha. Off: "
        "the plain bottleneck adapter of the paper's Eq. 1, averaged within each type: 'Homo-Training' "
        "(= 'w/o DeMA & CMGA', the `homo-training` method).",
    )
    use_cmga: bool = Field(
        default=True,
        description="[P] Align the types' share-slot updates by CMGA before applying them. Off: each slot takes its "
        "type's plain (sample-weighted) mean, the paper's 'w/o CMGA' row.",
    )
    learn_alpha: bool = Field(
        default=True,
        description="[P] Train the mixing weights alpha. Off: alpha stays at its initial 1/M, the paper's 'w/o LW' "
        "(Table 7).",
    )
    alpha_param: Literal["raw", "softmax"] = Field(
        default="raw",
        description="[I] alpha as M raw scalars per block initialised to 1/M (the paper calls them learnable gating "
        "parameters and gives no normalisation), or as softmax(logits) with logits 0. One alpha vector per "
        "(type, block), shared by the down and up sums; input-independent, so the inference merge is "
        "exact.",
    )

    # -- the adapter --------------------------------------------------------------------------------------------
    rank: int = Field(
        default=16,
        ge=1,
        description="[R] r, the adapter bottleneck and the side of every share slot. The paper's 128 is for widths "
        "192-4096; the tiny zoo's are 48-128, and 16 keeps r below every width (a toy reproduction at "
        "widths 32-64 used 16 too) while the r x r slots stay large enough to carry something between types.",
    )
    activation: Literal["gelu", "relu"] = Field(
        default="gelu",
        description="[I] h, the adapter nonlinearity: the paper does not name it; GELU is the activation of the "
        "paper's ViT blocks (the zoo's language models use SiLU).",
    )

    # -- local training -----------------------------------------------------------------------------------------
    learning_rate: float = Field(
        default=3e-3,
        gt=0,
        description="[R] AdamW learning rate, constant, fresh optimiser every round. The paper's 1e-3 (ViT) and 1e-5 "
        "(LLaMA) are for 5M-8B models; 3e-3 is the LoRA entries' rate on the tiny zoo, selected for SFT on "
        "drake-synth 1.9.0's validation split (not for HeteroTune; docs/findings/toy-learning-rate.md), so the "
        "arms differ only in the method.",
    )
    weight_decay: float = Field(
        default=0.01,
        ge=0,
        description="[I] AdamW weight decay on the local adapters; 0 on alpha and the share slot (their pull is the "
        "share regulariser). The paper does not give it; 0.01 is AdamW's usual default.",
    )
    share_reg: float = Field(
        default=1e-4,
        ge=0,
        description="[I] lambda_s of the L2 regulariser the paper adds to the share adapter (form and strength not "
        "given): lambda_s sum_l (||S_j^down - T||^2 + ||S_j^up - T||^2) on the client's own slot. 0 is the "
        "paper's 'w/o Reg'.",
    )
    share_reg_target: Literal["identity", "zero", "round_start"] = Field(
        default="identity",
        description="[I] T of the share regulariser: 'identity' (the slots' init: with AdamW a pull toward 0 moves an "
        "identity-initialised slot's diagonal by about lr a step whatever lambda is), 'zero' (the literal "
        "L2), or 'round_start' (proximal: the slot as the server sent it).",
    )

    # -- the server ---------------------------------------------------------------------------------------------
    weighting: Literal["samples", "equal"] = Field(
        default="samples",
        description="[P] Means within a type weighted by the clients' sample counts n_k of the round (the paper's "
        "appendix: g_s,m = sum |D_i| / |D_m| g_s,i), or equal weights.",
    )
    cmga_over: Literal["types", "clients"] = Field(
        default="types",
        description="[I] CMGA's columns: the M' per-type group-mean updates (the paper's appendix: its g_s,m are "
        "group means), "
        "or one column per client (Eq. 5 read literally with N columns), each type then taking the "
        "weighted mean of its clients' aligned columns.",
    )
    cmga_granularity: Literal["matrix", "position", "global"] = Field(
        default="matrix",
        description="[I] The unit CMGA whitens: each r x r matrix at each position of the canonical depth grid "
        "('matrix', d = r^2), down and up of a position together ('position'), or the whole slot "
        "('global'). The paper does not say; per matrix keeps each alignment to one function.",
    )
    cmga_eps: float = Field(
        default=1e-6,
        gt=0,
        description="[I] epsilon of (G^T G + eps I)^(-1/2). Relative by default (times tr(G^T G) / M'), which makes "
        "CMGA scale-equivariant; the paper's 'small positive constant' gives no value.",
    )
    cmga_eps_mode: Literal["relative", "absolute"] = Field(
        default="relative",
        description="[I] 'relative': eps = cmga_eps tr(G^T G) / M'. 'absolute': eps = cmga_eps, only meaningful "
        "against the eigenvalues of G^T G, which move with the learning rate and the local steps.",
    )
    cmga_rescale: Literal["frobenius", "column", "none"] = Field(
        default="frobenius",
        description="[I] The 'rescaling' the paper names but does not give: 'frobenius' multiplies the whitened "
        "updates by ||G||_F / ||G~||_F (total energy kept; every type's update at the RMS of the input "
        "norms), 'column' restores each type's own norm, 'none' keeps the unit columns of Eq. 6.",
    )
    server_lr: float = Field(
        default=1.0,
        gt=0,
        description="[I] eta_s of S_j <- S_j - eta_s Delta~_j. With 1 and CMGA off this is exactly the within-type "
        "mean (the paper's 'FedAvg').",
    )
    server_lr_schedule: Literal["constant", "inv_sqrt"] = Field(
        default="constant",
        description="[I] 'constant' eta_s, or eta_s / sqrt(t + 1) in round t (the convergence theorem's schedule).",
    )

    # -- evaluation and bookkeeping -----------------------------------------------------------------------------
    final_global: bool = Field(
        default=True,
        description="[P] After the last round, give every client its type's global model (the type's averaged local "
        "adapter and alpha, the server's aligned bank) and re-score the final evaluation point with it: "
        "the paper evaluates each type's global model. Off: the final point scores what each client "
        "holds after its last local training, as every intermediate point does.",
    )
    report_diagnostics: bool = Field(
        default=True,
        description="Report per round CMGA's per-type update norms and pairwise cosines before and after alignment, "
        "the types' mean alpha, and the floats each type sent beside the formula (raw.diagnostics).",
    )
    offload_dir: str | None = offload_dir_field()
    packed_training: bool = packed_training_field()
    segment_attention: bool = segment_attention_field()
    model_loader: Literal["zoo", "testing"] = model_loader_field()


class HomoTrainingConfig(HeteroTuneConfig):
    """Homo-Training: HeteroTune's settings with DeMA off (the plain adapter, FedAvg within each type)."""

    model_config = ConfigDict(extra="forbid")

    use_dema: bool = Field(
        default=False,
        description="[P] Off: the plain bottleneck adapter of the paper's Eq. 1 averaged within each type (the "
        "paper's Homo-Training baseline). On: HeteroTune's DeMA.",
    )
