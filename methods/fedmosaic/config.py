"""Typed FedMosaic configuration: the paper's defaults, a toy CPU profile, and every choice the paper leaves open.

Paper defaults follow the FedMosaic paper (App. A.6 training, App. A.17 alignment, App. A.18
hyperparameter analysis). Each field's description starts with a tag: [P] the paper states the
value, [I] inferred from the paper, [R] drake_bench's recommendation where the paper is silent or
contradicts itself; ``choices()`` lists the [I]/[R] fields. ``docs/design-notes.md#fedmosaic-choices``
gives the longer reasons.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator, model_validator
from pydantic.fields import FieldInfo

from ..lora_clients import (
    LoraSettings,
    model_loader_field,
    offload_dir_field,
    packed_training_field,
    segment_attention_field,
)
from .blocks import BlockRule, pq_layer_indices

#: All linear modules of a Llama/Qwen2 decoder layer (App. A.6: LoRA on all linear layers); in a PQ
#: layer every one of them is PQ-LoRA, which matches the paper's 4-of-28-layers saving (App. A.9).
DEFAULT_TARGET_MODULES: tuple[str, ...] = (
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "gate_proj",
    "up_proj",
    "down_proj",
)

#: [R] The toy CPU profile: the values that differ from the paper's for the tiny zoo models of the
#: embedded benchmarks (docs/design-notes.md#fedmosaic-toy-profile). lr_other is the LoRA
#: baselines' learning rate (LoraSettings, selected for SFT on the validation split), read from there so the two
#: cannot drift apart; lr_pq keeps the paper's 2.5x ratio (5e-5 / 2e-5).
TOY_PROFILE: dict[str, Any] = dict(
    rank=8,
    lora_alpha=16.0,
    n_blocks=2,
    lr_pq=2.5 * LoraSettings.model_fields["learning_rate"].default,
    lr_other=LoraSettings.model_fields["learning_rate"].default,
    batch_size=8,
    rounds=8,
    local_steps=25,
    grad_interval=5,
    public_size=500,
    align_lr=1e-3,
    align_batch_size=8,
)


def parse_client_ranks(text: str) -> dict[int, int]:
    """``'1-3=4,4-8=8,all=16'`` -> {client: rank}: comma-separated CLIENTS=RANK items, CLIENTS as in an inline
    allocation (drake_bench/benchmarks/spec.py ``inline_allocation``): an id, a range a-b, ids joined by '+'. ``all=R`` is kept
    as the key -1 and expanded when the clients are known (``expand_client_ranks``)."""
    out: dict[int, int] = {}
    for item in (part.strip() for part in text.split(",") if part.strip()):
        lhs, sep, rhs = item.partition("=")
        lhs, rhs = lhs.strip(), rhs.strip()
        try:
            rank = int(rhs)
        except ValueError:
            raise ValueError(f"client_ranks item {item!r} is not CLIENTS=RANK (in {text!r})") from None
        if not sep or not lhs:
            raise ValueError(f"client_ranks item {item!r} is not CLIENTS=RANK (in {text!r})")
        if lhs == "all":
            ids: list[int] = [ALL_CLIENTS]
        else:
            ids = []
            for part in lhs.split("+"):
                first, dash, last = part.partition("-")
                try:
                    ids += list(range(int(first), int(last) + 1)) if dash else [int(first)]
                except ValueError:
                    raise ValueError(f"client_ranks item {item!r}: {part!r} is not a client id or range") from None
        for c in ids:
            if c in out:
                raise ValueError(f"client_ranks {text!r} gives client {'all' if c == ALL_CLIENTS else c} two ranks")
            out[c] = rank
    return out


#: The key ``all=R`` is stored under in ``client_ranks`` (every client no other item names).
ALL_CLIENTS = -1


def expand_client_ranks(client_ranks: dict[int, int] | None, clients: list[int], default: int) -> dict[int, int]:
    """Every client's rank: its own entry, else the ``all`` entry, else ``default``; refuses unknown clients."""
    given = dict(client_ranks or {})
    fallback = given.pop(ALL_CLIENTS, default)
    unknown = sorted(set(given) - set(clients))
    if unknown:
        raise ValueError(
            f"client_ranks names clients {unknown} that the federation does not have (its clients: {sorted(clients)})"
        )
    return {c: int(given.get(c, fallback)) for c in sorted(clients)}


class FedMosaicConfig(BaseModel):
    """FedMosaic hyperparameters (RELA + PQ-LoRA). Defaults = the paper's multi-modal (MLLM) setting."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # --- adapters (Sec. 4.2, App. A.5) ---
    rank: int = Field(
        128,
        ge=1,
        description="[P] Rank r of every adapter: LoRA's A is r x d_in and B is d_out x r; PQ-LoRA's shared P is "
        "r x r and Q has r entries. The paper uses 128 for multi-modal models, 16 for text LLMs (App. A.6).",
    )
    lora_alpha: float | None = Field(
        None,
        description="[R] Scaling numerator of the conventional LoRA layers (their update is scaled by lora_alpha / "
        "rank); None means 2 x rank, LLaVA's default. PQ-LoRA layers are never scaled (Eq. 5).",
    )
    n_blocks: int = Field(
        4,
        ge=1,
        description="[P] N_B, how many decoder layers carry PQ-LoRA (the paper: 4): the decoder is cut into N_B equal "
        "blocks by depth and the last layer of each block gets PQ-LoRA (Eq. 6), so models of different "
        "depths share N_B matching layers.",
    )
    block_rule: BlockRule = Field(
        "eq6",
        description="[R] Which layer ends a block when the depth is not a multiple of N_B: 'eq6' as Eq. 6, 'alg2' "
        "as the index rule printed in Algorithm 2 (App. A.35). Both agree when N_B divides the depth.",
    )
    target_modules: tuple[str, ...] = Field(
        DEFAULT_TARGET_MODULES,
        description="[P] Linear modules of a decoder layer that get adapters (App. A.6: all of them); in a PQ layer "
        "all are PQ-LoRA. Used by attach_fedmosaic; the drake_bench plugin always adapts these seven "
        "modules of the language model only (the vision tower stays frozen) and does not read it.",
    )
    dual_path: bool = Field(
        True,
        description="[P] Give every adapted layer a trainable local adapter plus a frozen copy of the server's "
        "customised global adapter, mixed by a learned gate (Eq. 7). False: one adapter only.",
    )
    gate_init: float = Field(
        0.0,
        description="[P] Initial gate parameter beta; local and global are mixed by sigmoid(beta), so 0 starts "
        "them at half each (Algorithm 1).",
    )
    gate_granularity: Literal["layer", "module"] = Field(
        "layer",
        description="[P] 'layer': one gate per decoder layer, shared by all its adapted modules (Algorithm 1); "
        "[R] 'module': one gate per adapted module.",
    )
    pq_init: Literal["zeros"] = Field(
        "zeros",
        description="[R] Initial P and Q of every client: zeros, so every model starts exactly at its pretrained "
        "base and all clients share one starting point.",
    )
    pq_seed: int = Field(
        0,
        description="Seed of the random orthonormal A and B of every PQ module before alignment, and of the "
        "alignment's shuffling.",
    )

    # --- optimisation (App. A.6) ---
    lr_pq: float = Field(
        5e-5, gt=0, description="[P] AdamW learning rate of P and Q (the paper: 5e-5 for multi-modal models, App. A.6)."
    )
    lr_other: float = Field(
        2e-5,
        gt=0,
        description="[P] AdamW learning rate of every other trainable parameter (the paper: 2e-5, App. A.6); [R] these "
        "are the conventional LoRA layers and the gates.",
    )
    batch_size: int = Field(
        4,
        ge=1,
        description="[P] Training items per local step (the paper: 4, App. A.6). Informational in drake_bench: the "
        "benchmark's schedule sets the batch size.",
    )
    rounds: int = Field(
        20,
        ge=1,
        description="[P] Federated rounds R (the paper: 20, App. A.6). Informational in drake_bench: the benchmark "
        "sets them.",
    )
    local_steps: int = Field(
        86,
        ge=1,
        description="[R] Local steps per round: the paper trains 100 at equal compute across methods, and a FedMosaic "
        "step costs 1.161 plain LoRA steps (App. A.8), so 100 / 1.161 = 86 (91 counting training "
        "overhead only). Informational in drake_bench: the benchmark sets it (see --compute-matched).",
    )

    # --- weight alignment of PQ-LoRA (Sec. 4.2.2, App. A.5, A.17) ---
    align_lambda: float = Field(
        0.5,
        ge=0,
        description="[P] Weight lambda of the orthogonality penalty ||A A^T - I||_F^2 added to the L2 loss that "
        "aligns A (Eq. 20, written A A^T so that it is defined for r < d).",
    )
    align_lr: float = Field(
        5e-5,
        gt=0,
        description="[P] Adam learning rate of the A alignment, with a cosine schedule (the paper: 5e-5, App. A.17).",
    )
    align_epochs: int = Field(1, ge=1, description="[P] Passes over the public data when aligning A (App. A.17).")
    align_batch_size: int = Field(
        4,
        ge=1,
        description="[P] Public samples per alignment step (the paper: 4, App. A.17). When aligning token by token "
        "the plugin turns it into token rows (samples x mean tokens per sample).",
    )
    public_size: int = Field(
        5000,
        ge=1,
        description="[P] |D_p|, public samples for the one-off alignment (App. A.17: 5,000 from LLaVA-Instruct; "
        "[R] 5,000 public instructions for text LLMs). drake_bench draws them from the benchmark's "
        "public data, disjoint from every task.",
    )
    alignment_audit_size: int = Field(
        64,
        ge=0,
        description="[R] Public items after the alignment's own (so never seen by it) on which the alignment is "
        "audited: A-code L2 before/after and B coordinate correlations, written to the result file's "
        "diagnostics (`alignment/<arch>/<module>`, keys heldout_*); 0 skips the audit.",
    )
    pivot: Literal["smallest", "largest"] = Field(
        "smallest",
        description="[P] The architecture every other one is aligned to: the smallest model (App. A.29) or the largest.",
    )
    cca_features: Literal["base_output", "literal"] = Field(
        "base_output",
        description="[R] Features whose canonical correlation aligns B: 'base_output' = the frozen layer's output "
        "W h; 'literal' = B(A h) with P set to the identity, as Algorithm 4 reads (with P = 0 the "
        "adapter's output is all zeros, so it cannot be used as is).",
    )
    cca_eps: float = Field(
        1e-4,
        ge=0,
        description="[R] Ridge eps x trace / d added to the CCA covariance matrices, for numerical stability.",
    )
    token_pairing: Literal["auto", "token", "mean"] = Field(
        "auto",
        description="[R] How two models' activations on a public sample are paired for the L2 loss: 'token' one "
        "row per token (needs identical token sequences, i.e. one tokenizer), 'mean' the masked mean "
        "over the sample's tokens, 'auto' token-wise when the sequences match, else the mean.",
    )

    # --- RELA, relevance-guided aggregation (Sec. 4.1, App. A.18-A.22) ---
    tau: float = Field(
        0.5,
        gt=0,
        description="[P] Softmax temperature tau of the aggregation weights w_ij = softmax_j(cos(g_i, g_j) / tau) (Eq. 4).",
    )
    ema_alpha: float = Field(
        0.5,
        ge=0,
        le=1,
        description="[P] EMA ratio alpha of the decayed client gradient, g <- (1 - alpha) g + alpha g_new (Eq. 2).",
    )
    ema_unit: Literal["round", "step"] = Field(
        "round",
        description="[R] When the EMA is applied: 'round' once per round to the mean of that round's gradients "
        "(Algorithm 1); 'step' after every gradient computation (Eq. 2 as written; with alpha 0.5 it "
        "weighs mostly the last few batches).",
    )
    n_s: float = Field(
        0.4,
        gt=0,
        le=1,
        description="[P] N_s, fraction of the gradient's coordinates kept and uploaded, chosen by one random mask "
        "shared by all clients (Eq. 3).",
    )
    mu: float = Field(
        1e-4,
        ge=0,
        description="[P] Standard deviation mu of the Gaussian noise added to every gradient before upload (Eq. 3).",
    )
    grad_interval: int = Field(
        10,
        ge=1,
        description="[P] m: the small frozen model W_s computes a relevance gradient every m local steps (the paper: "
        "10, App. A.8 and A.18; Sec. 4.1 introduces m).",
    )
    grad_layer: Literal["down_proj", "lm_head"] = Field(
        "down_proj",
        description="[I] Weight of W_s whose gradient measures relevance: 'down_proj' of its last decoder layer "
        "(this size reproduces the paper's communication figures, App. A.9) or 'lm_head'.",
    )
    mask_seed: int = Field(
        0,
        description="[R] Seed of the one coordinate mask the server draws for all clients and rounds (Algorithm 1); "
        "per-client masks would make the cosine similarities meaningless.",
    )
    conv_agg: Literal["rela_within_type", "equal_within_type", "none"] = Field(
        "rela_within_type",
        description="[R] How conventional-LoRA layers, which only clients of one architecture can average, are "
        "aggregated: 'rela_within_type' RELA weights renormalised over the client's architecture, "
        "'equal_within_type' equal weights there, 'none' not shared (only P and Q travel).",
    )

    # --- clients of different ranks (App. A.24) ---
    client_ranks: dict[int, int] | None = Field(
        None,
        description="[R] Per-client adapter rank for rank-heterogeneous runs (App. A.24, Table 34): client id -> "
        "rank, or written out as comma-separated CLIENTS=RANK items like an inline allocation "
        "('1-3=4,4-8=8,9-10=16'; CLIENTS is an id, a range a-b, ids joined by '+', or 'all' for every "
        "client no other item names). Clients it does not name get `rank`; None: every client `rank`. "
        "A method setting rather than part of the benchmark's allocation, so the embedded manifests "
        "and the hashes boards pin stay as they are. Ranks that differ need hetlora.",
    )
    hetlora: bool = Field(
        False,
        description="[P] Clients of different ranks (App. A.24): zero-pad P and Q to the largest rank, combine RELA "
        "with HETLoRA norm weights (Eq. 25), truncate back to each client's rank; conventional LoRA the "
        "same way within an architecture. Needs client_ranks; [R] an aggregation group (all clients for "
        "P/Q, one architecture for conventional LoRA) whose clients share one rank is aggregated exactly "
        "as without hetlora, so equal ranks reproduce the default run.",
    )
    het_norm: Literal["P", "PQ"] = Field(
        "P",
        description="[R] Norm behind the HETLoRA weights with mixed ranks: 'P' = ||P||_F (equal to ||B P A||_F for "
        "orthonormal A and B), 'PQ' = with Q appended. Only with hetlora.",
    )

    @field_validator("client_ranks", mode="before")
    @classmethod
    def _parse_client_ranks(cls, value: object) -> object:
        """Accept the written-out form ``'1-3=4,4-8=8'`` (as --set passes it) besides a mapping."""
        return parse_client_ranks(value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _rank_options(self) -> "FedMosaicConfig":
        """No dead rank options: each one either acts or raises, naming the field."""
        if self.het_norm != "P" and not self.hetlora:
            raise ValueError("het_norm: only used by the rank-heterogeneous aggregation; set hetlora=true too")
        if self.client_ranks is not None:
            bad = {c: r for c, r in self.client_ranks.items() if r < 1}
            if bad:
                raise ValueError(f"client_ranks: ranks must be >= 1, got {bad}")
            if len(set(self.client_ranks.values())) > 1 and not self.hetlora:
                raise ValueError(
                    f"client_ranks gives different ranks {sorted(set(self.client_ranks.values()))}; "
                    "their adapters can only be aggregated with hetlora=true (App. A.24)"
                )
        elif self.hetlora:
            raise ValueError(
                "hetlora: needs client_ranks (which client has which rank); without it every client "
                "has `rank` and there is nothing to pad"
            )
        return self

    def conv_alpha_for(self, rank: int) -> float:
        """[R] Conventional-LoRA alpha of a rank-``rank`` client: conv_alpha x rank / self.rank, so every client keeps
        the configured LoRA scale alpha / r (2 by default, as LLaVA's alpha = 2r): zero-padded factor averaging
        across ranks only mixes updates of one scale."""
        return self.conv_alpha * rank / self.rank

    # --- communication accounting (App. A.9) ---
    bytes_per_element: int = Field(
        2,
        ge=1,
        description="[R] Bytes per transmitted element in the analytic communication formula (2 = bfloat16); the "
        "evaluator measures the real messages independently.",
    )

    @property
    def conv_alpha(self) -> float:
        """Effective conventional-LoRA alpha (2r unless overridden)."""
        return float(self.lora_alpha) if self.lora_alpha is not None else 2.0 * self.rank

    def pq_layers(self, num_layers: int) -> list[int]:
        """0-based PQ layer indices for a decoder of ``num_layers`` layers."""
        return pq_layer_indices(num_layers, self.n_blocks, self.block_rule)

    @classmethod
    def paper_llm(cls, **overrides: object) -> "FedMosaicConfig":
        """Paper defaults for text LLMs (Fed-LLM-Large): r = 16, lr 3e-4 for all adapters (App. A.6)."""
        base: dict[str, object] = dict(rank=16, lr_pq=3e-4, lr_other=3e-4)
        base.update(overrides)
        return cls(**base)

    @classmethod
    def toy(cls, **overrides: object) -> "FedMosaicConfig":
        """The toy CPU profile (``TOY_PROFILE``): r = 8, N_B = 2, alpha 16, lr 7.5e-3 (P/Q) / 3e-3 (rest),
        batch 8, 8 rounds x 25 steps, m = 5, |D_p| = 500, alignment lr 1e-3 and batch 8; RELA as in the paper."""
        return cls(**{**TOY_PROFILE, **overrides})

    @classmethod
    def with_defaults(
        cls, name: str, doc: str, qualname: str | None = None, module: str | None = None, **defaults: Any
    ) -> type["FedMosaicConfig"]:
        """A subclass whose named fields default to ``defaults``: each field keeps its type, bounds and
        description as declared once here, so a profile changes values, never the help text."""
        unknown = sorted(set(defaults) - set(cls.model_fields))
        if unknown:
            raise ValueError(f"{cls.__name__} has no fields {unknown}")
        fields: dict[str, Any] = {
            k: (cls.model_fields[k].annotation, FieldInfo.merge_field_infos(cls.model_fields[k], default=v))
            for k, v in defaults.items()
        }
        sub = create_model(name, __base__=cls, __doc__=doc, __module__=module or cls.__module__, **fields)
        sub.__qualname__ = qualname or name
        return sub

    def choices(self) -> dict[str, object]:
        """Every field whose description marks an [I] or [R] choice, with its value (for run metadata)."""
        out: dict[str, object] = {}
        for name, field in type(self).model_fields.items():
            desc = field.description or ""
            if "[R]" in desc or "[I]" in desc:
                out[name] = getattr(self, name)
        return out


class FedMosaicPluginConfig(FedMosaicConfig):
    """FedMosaicConfig plus the settings of the drake_bench plugin (how it weights, sends and loads)."""

    weighting: Literal["rela", "equal"] = Field(
        "rela",
        description="[R] How the server weights clients: 'rela' by gradient relevance (Eq. 4); 'equal' uniform "
        "weights and no small-model gradient (``fedmosaic-equal``, and with the dual path off "
        "``fedit-pqlora``: Table 7's ablation steps).",
    )
    grad_at_least_once: bool = Field(
        True,
        description="[R] When a round has fewer than m local steps, take the relevance gradient on its last step, "
        "so every round refreshes it (Algorithm 1 would skip that round).",
    )
    wire_dtype: Literal["bfloat16", "float16", "float32"] = Field(
        "bfloat16",
        description="[R] Dtype of every tensor clients upload and the server sends back. The paper states no "
        "message dtype (App. A.9 gives element counts and percentages); bfloat16 is 2 bytes per element, "
        "the precision the paper's models train in.",
    )
    offload_dir: str | None = offload_dir_field()
    packed_training: bool = packed_training_field()
    segment_attention: bool = segment_attention_field()
    model_loader: Literal["zoo", "testing"] = model_loader_field()
