"""Typed FedMosaic configuration: paper defaults, a toy CPU profile and every [I]/[R] choice.

Paper defaults follow spec section 6 (FedMosaic, A.6/A.17/A.18). Fields whose value is an
inference or recommendation of the spec rather than a statement of the paper say so in their
description; ``choices()`` lists them for run metadata.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .blocks import BlockRule, pq_layer_indices

#: All linear modules of a Llama/Qwen2 decoder layer (spec 1.1 [P]; B2: all of them are PQ in a PQ layer).
DEFAULT_TARGET_MODULES: tuple[str, ...] = (
    "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj",
)


class FedMosaicConfig(BaseModel):
    """FedMosaic hyperparameters (RELA + PQ-LoRA). Defaults = the paper's MLLM setting."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # --- adapters (spec 1) ---
    rank: int = Field(128, ge=1, description="[P] LoRA/PQ rank r: 128 for MLLMs, 16 for text LLMs.")
    lora_alpha: float | None = Field(
        None, description="[R] conventional-LoRA alpha; None = 2*rank (LLaVA default, B12). PQ-LoRA is unscaled.")
    n_blocks: int = Field(4, ge=1, description="[P] N_B, number of PQ layers (one per depth block).")
    block_rule: BlockRule = Field("eq6", description="[R] B1: Eq. 6 indices (default) or printed Alg. 2 rule.")
    target_modules: tuple[str, ...] = Field(DEFAULT_TARGET_MODULES, description="[P] A.6 all 7 linear modules.")
    dual_path: bool = Field(True, description="[P] Eq. 7 local/global dual adapter with sigmoid gate.")
    gate_init: float = Field(0.0, description="[P] Alg. 1: beta = 0 so sigmoid(beta) = 0.5.")
    gate_granularity: Literal["layer", "module"] = Field(
        "layer", description="[P]/[R] B11: one beta per decoder layer (Alg. 1); per-module is an option.")
    pq_init: Literal["zeros"] = Field("zeros", description="[R] B10: P = 0, Q = 0 for every client.")
    pq_seed: int = Field(0, description="Seed of the random orthonormal A/B of the pivot (and pre-alignment).")

    # --- optimisation (spec 4, 6) ---
    lr_pq: float = Field(5e-5, gt=0, description="[P] lr of P and Q (MLLM).")
    lr_other: float = Field(2e-5, gt=0, description="[P] lr of other trainables; [R] = conv LoRA and beta.")
    batch_size: int = Field(4, ge=1, description="[P]")
    rounds: int = Field(20, ge=1, description="[P] R.")
    local_steps: int = Field(
        86, ge=1, description="[R] B14: compute-matched 100/1.161 = 86 (training-only factor gives 91).")

    # --- alignment (spec 2) ---
    align_lambda: float = Field(0.5, ge=0, description="[P] lambda of ||A A^T - I||_F^2 (B4 row form).")
    align_lr: float = Field(5e-5, gt=0, description="[P] A.17 Adam + cosine, 1 epoch.")
    align_epochs: int = Field(1, ge=1, description="[P]")
    align_batch_size: int = Field(4, ge=1, description="[P]")
    public_size: int = Field(5000, ge=1, description="[P] |D_p| (MLLM); [R] 5k public instructions for LLMs.")
    pivot: Literal["smallest", "largest"] = Field("smallest", description="[P] A.29 smallest model as pivot.")
    cca_features: Literal["base_output", "literal"] = Field(
        "base_output", description="[R] B6: CCA on frozen base output W h; 'literal' = B(A h) with P := I.")
    cca_eps: float = Field(1e-4, ge=0, description="[R] ridge eps*trace/d added to CCA covariances.")
    token_pairing: Literal["auto", "token", "mean"] = Field(
        "auto", description="[R] B5: token-wise L2 when sequences match, per-sample masked mean otherwise.")

    # --- RELA (spec 3) ---
    tau: float = Field(0.5, gt=0, description="[P] softmax temperature.")
    ema_alpha: float = Field(0.5, ge=0, le=1, description="[P] EMA ratio alpha.")
    ema_unit: Literal["round", "step"] = Field(
        "round", description="[R] B7: Alg. 1 semantics (EMA once per round over the mean) by default.")
    n_s: float = Field(0.4, gt=0, le=1, description="[P] fraction of last-layer gradient coordinates kept.")
    mu: float = Field(1e-4, ge=0, description="[P] Gaussian noise std of the sanitisation.")
    grad_interval: int = Field(10, ge=1, description="[P] m: W_s gradient every m iterations.")
    grad_layer: Literal["down_proj", "lm_head"] = Field(
        "down_proj", description="[I] B9: down_proj of the last decoder layer of W_s (fits A.9 numbers).")
    mask_seed: int = Field(0, description="[R] B8: server seed of the single shared mask.")
    conv_agg: Literal["rela_within_type", "equal_within_type", "none"] = Field(
        "rela_within_type", description="[R] B3: conventional-LoRA aggregation within a model type.")

    # --- rank heterogeneity (spec 7) ---
    hetlora: bool = Field(False, description="[P] A.24 pad/truncate + HETLoRA norm weights combined with RELA.")
    het_norm: Literal["P", "PQ"] = Field("P", description="[R] alpha_j from ||P_j||_F (or with Q appended).")

    # --- accounting (spec 9) ---
    bytes_per_element: int = Field(2, ge=1, description="[R] bf16 payloads = 2 bytes/element.")

    @property
    def conv_alpha(self) -> float:
        """Effective conventional-LoRA alpha (2r unless overridden)."""
        return float(self.lora_alpha) if self.lora_alpha is not None else 2.0 * self.rank

    def pq_layers(self, num_layers: int) -> list[int]:
        """0-based PQ layer indices for a decoder of ``num_layers`` layers."""
        return pq_layer_indices(num_layers, self.n_blocks, self.block_rule)

    @classmethod
    def paper_mllm(cls, **overrides: object) -> "FedMosaicConfig":
        """Paper defaults for LLaVA-style MLLMs (r = 128, lr 5e-5 / 2e-5)."""
        return cls(**overrides)

    @classmethod
    def paper_llm(cls, **overrides: object) -> "FedMosaicConfig":
        """Paper defaults for text LLMs (Fed-LLM-Large): r = 16, lr 3e-4 for all adapters."""
        base: dict[str, object] = dict(rank=16, lr_pq=3e-4, lr_other=3e-4)
        base.update(overrides)
        return cls(**base)

    @classmethod
    def toy(cls, **overrides: object) -> "FedMosaicConfig":
        """Toy CPU profile (spec 13 [R]): r = 8, N_B = 2, alpha 16, lr 7.5e-3 (P/Q) / 3e-3 (rest), batch 8,
        8 rounds x 25 steps, m = 5, |D_p| = 500, alignment lr 1e-3; RELA constants as in the paper."""
        base: dict[str, object] = dict(
            # lr_other equals the baselines' toy LoRA lr (methods/lora_clients.py) so comparisons are fair;
            # lr_pq keeps the paper's 2.5x ratio (5e-5 / 2e-5)
            rank=8, lora_alpha=16.0, n_blocks=2, lr_pq=7.5e-3, lr_other=3e-3, batch_size=8,
            rounds=8, local_steps=25, grad_interval=5, public_size=500, align_lr=1e-3,
            align_batch_size=8,
        )
        base.update(overrides)
        return cls(**base)

    def choices(self) -> dict[str, object]:
        """Every field whose description marks an [I] or [R] choice, with its value (for run metadata)."""
        out: dict[str, object] = {}
        for name, field in type(self).model_fields.items():
            desc = field.description or ""
            if "[R]" in desc or "[I]" in desc:
                out[name] = getattr(self, name)
        return out
