"""TAP's settings: the paper's hyperparameters (Tables 21-22) where they carry over, the toy profile where they do not.

Three layers, one per kind of entry: :class:`RoundSettings` (every entry: the experts, the optimiser, the schedule),
:class:`PostTrainSettings` (entries with an FL copy and Stage 2's post-training: ``fedavg-post-train``), and
:class:`TAPSettings` (``tap`` and ``tap-no-kd``: margins and the distillation). ``tap-local`` uses the first only.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..lora_clients import model_loader_field, offload_dir_field, packed_training_field, segment_attention_field
from .keys import is_choice, split_key


class RoundSettings(BaseModel):
    """The experts and the local optimiser, shared by every TAP entry."""

    model_config = ConfigDict(extra="forbid")

    rank: int = Field(
        default=4,
        ge=1,
        description="LoRA rank of every component (each is a LoRA adapter on the language model's linear layers). 4 "
        "is the paper's expert rank (Table 21, 'Backbone Expert Rank'); a key's path of four components "
        "holds rank 16 in all.",
    )
    alpha: int = Field(
        default=8,
        ge=1,
        description="LoRA alpha of every component: its update is scaled by alpha / rank (alpha = 2r, the authors' code's; the paper gives no alpha).",
    )
    targets: Literal["mlp", "all"] = Field(
        default="mlp",
        description="The language model's linear layers every component adapts. 'mlp': the feed-forward layers "
        "(gate, up, down), as the paper's experts are LoRA on the feed-forward layers of its stacks "
        "(both linears of every expert); a path of four components then costs about as much per forward "
        "pass as one all-linear LoRA adapter. 'all': every linear layer of the decoder blocks, as the "
        "package's LoRA entries (SFT, FedIT).",
    )
    combine: Literal["mean", "sum"] = Field(
        default="mean",
        description="How the four components of a key's path add up. 'mean': each component's update is scaled by "
        "1/4, as the paper averages its four routes' pooled outputs, which also keeps a path's step as "
        "large as one LoRA adapter's at the same learning rate (the rate the toy LoRA entries were tuned "
        "at). 'sum': each at full scale.",
    )
    learning_rate: float = Field(
        default=3e-3,
        gt=0,
        description="AdamW learning rate after warm-up (the paper's eta_peak, 3e-4 for FLAVA). 3e-3 is the rate of "
        "the package's LoRA entries on the tiny zoo (docs/findings/toy-learning-rate.md); a CPU toy "
        "reproduction of the paper used 1e-3 -> 3e-3 for the same reason.",
    )
    initial_learning_rate: float = Field(
        default=1e-3,
        gt=0,
        description="eta_0: the warm-up's starting rate and Stage 2's rate (the paper's code post-trains at "
        "eta_0; the paper does not say). 1e-3 keeps the paper's FLAVA ratio eta_0 / eta_peak = 1/3.",
    )
    warmup_rounds: int = Field(
        default=0,
        ge=0,
        description="Linear warm-up from eta_0 to eta_peak over this many global rounds, then constant (the paper's "
        "20 of 200 rounds). 0: constant eta_peak, the toy LoRA entries' schedule; the embedded "
        "benchmarks' 8 rounds would spend 10% of the paper's warm-up in under one round.",
    )
    weight_decay: float = Field(default=0.01, ge=0, description="AdamW weight decay (the paper's 0.01).")
    max_grad_norm: float | None = Field(
        default=1.0,
        gt=0,
        description="Clip the gradient norm of each step to this (the paper's code: 1.0). None: no clipping.",
    )
    report_diagnostics: bool = Field(
        default=True,
        description="Report per round and client the histories h_l, h_p and the replacements of each task key, and "
        "per key the round's replacement count, into the result file (raw.diagnostics).",
    )
    offload_dir: str | None = offload_dir_field("the model pool's adapters")
    packed_training: bool = packed_training_field()
    segment_attention: bool = segment_attention_field()
    model_loader: Literal["zoo", "testing"] = model_loader_field()

    def learning_rate_at(self, round_idx: int) -> float:
        """The paper's schedule (its code): linear warm-up in the global round index, then constant."""
        if round_idx < self.warmup_rounds:
            return (
                self.initial_learning_rate
                + (self.learning_rate - self.initial_learning_rate) * round_idx / self.warmup_rounds
            )
        return self.learning_rate


class PostTrainSettings(RoundSettings):
    """An FL copy averaged component by component, and Stage 2's post-training of the final server model."""

    model_config = ConfigDict(extra="forbid")

    share_across_architectures: bool = Field(
        default=True,
        description="Average a component's tensor over every client that uploads it with the same name and shape, "
        "whatever its architecture (the paper's clients share one backbone, so a component means the "
        "same everywhere). Tensors of different shapes are never averaged together. False: only within an "
        "architecture. On the zoo, models of different sizes or families differ in width, so both give "
        "the same groups there.",
    )
    post_steps: int = Field(
        default=50,
        ge=0,
        description="P: Stage 2's steps, both for post-training the final server model (the teacher, and the "
        "'FedAvg + post-train' output) and for distilling into the personal copy (the paper's P = 50).",
    )
    memory_items: int = Field(
        default=128,
        ge=0,
        description="Stage 2 draws its P batches from the client's own training items, and post_federation receives "
        "no batches: each client keeps its most recent distinct training items, up to this many, in its "
        "state (images as uint8 tensors). The stream's batches are uniform draws from the client's "
        "episodic memory of everything it has seen, so the most recent items are a sample of all its "
        "data. 0: no Stage 2.",
    )


class TAPSettings(PostTrainSettings):
    """TAP: the replacement margins (Table 22) and Stage 2's distillation (eq. 5-6, Table 21)."""

    model_config = ConfigDict(extra="forbid")

    margin_image_choice: float = Field(
        default=0.01,
        ge=0,
        description="m for a key with images and a choice format (yes/no, multiple choice): the paper's image "
        "classification margin (FLAVA, Table 22).",
    )
    margin_text_choice: float = Field(
        default=0.005,
        ge=0,
        description="m for a text-only key with a choice format: the paper's text classification margin.",
    )
    margin_generation: float = Field(
        default=0.01,
        ge=0,
        description="m for a key with an open or free-text answer, any modality: the paper's text generation margin "
        "(its VQA is text generation from an image).",
    )
    beta_choice: float = Field(
        default=2e-3,
        ge=0,
        description="beta_o of the distillation term for choice formats: the paper's classification weight (Table 21).",
    )
    beta_generation: float = Field(
        default=1.0,
        ge=0,
        description="beta_o for open and free-text answers: the paper's text generation weight (Table 21; its code "
        "uses 2e-3 there).",
    )
    temperature: float = Field(default=1.0, gt=0, description="tau~, the distillation temperature (the paper's 1).")

    def margin(self, key: str) -> float:
        """m_{i,o} for a task key: by output type, the same for every client (Table 22)."""
        modality, _ = split_key(key)
        if not is_choice(key):
            return self.margin_generation
        return self.margin_text_choice if modality == "text" else self.margin_image_choice

    def beta(self, key: str) -> float:
        """beta_o for a task key (Table 21): classification formats 2e-3, generation 1."""
        return self.beta_choice if is_choice(key) else self.beta_generation


class NoKDSettings(TAPSettings):
    """TAP without the distillation term (the paper's 'No KD' ablation, Tables 4-6): beta = 0 for every key."""

    model_config = ConfigDict(extra="forbid")

    beta_choice: float = Field(default=0.0, ge=0, le=0, description="Fixed at 0: no distillation.")
    beta_generation: float = Field(default=0.0, ge=0, le=0, description="Fixed at 0: no distillation.")
