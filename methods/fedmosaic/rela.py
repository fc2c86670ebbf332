"""RELA: relevance-guided aggregation (Sec. 4.1, Eqs. 1-4, Algorithm 1).

Choices (docs/design-notes.md#fedmosaic-choices):
- Gradient = last-layer gradient of a frozen, adapter-free small model W_s on the client's own
  training batch, every m iterations; [I] "last layer" = down_proj of W_s's final decoder layer
  (its size reproduces the App. A.9 overheads; ``lm_head`` is an option).
- One mask of ceil(N_s * d) coordinates drawn once from a server seed, shared by all clients
  and rounds (Algorithm 1: per-client masks would compare different coordinates); noise
  mu * N(0, I) is added per gradient computation on the kept coordinates; only the kept entries
  are uploaded.
- [R] EMA once per round as in Algorithm 1, ghat <- (1-alpha) ghat + alpha mean(round buffer);
  ``ema_unit='step'`` applies Eq. 2 per computation. ghat(0) = 0.
- w = softmax_j(cos(g_i, g_j) / tau) including j = i; PQ P/Q aggregated over all clients
  (across architectures, by block and module); [R] conventional LoRA within the client's model
  type with renormalised RELA weights (configurable), since only one architecture can average it.
"""

from __future__ import annotations

import math
from typing import Literal, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import nn

State = Mapping[str, torch.Tensor]


def shared_mask(d: int, n_s: float, seed: int) -> torch.Tensor:
    """Sorted indices of the ceil(n_s*d) kept coordinates, identical for every client (so cosines compare like with like)."""
    k = math.ceil(n_s * d)
    gen = torch.Generator().manual_seed(seed)
    return torch.randperm(d, generator=gen)[:k].sort().values


def sanitize(
    grad: torch.Tensor, mask: torch.Tensor, mu: float, generator: torch.Generator | None = None
) -> torch.Tensor:
    """M (.) (g + mu eps) restricted to the kept coordinates (Eq. 3 / Alg. 1)."""
    g = grad.reshape(-1)[mask].float()
    if mu > 0:
        g = g + mu * torch.randn(g.shape, generator=generator, dtype=g.dtype)
    return g


def ema_update(prev: torch.Tensor, new: torch.Tensor, alpha: float) -> torch.Tensor:
    """ghat <- (1 - alpha) ghat + alpha g (Eq. 2)."""
    return (1 - alpha) * prev + alpha * new


class GradientTracker:
    """Per-client sanitised-gradient EMA, once per round (Algorithm 1) or per computation (Eq. 2)."""

    def __init__(self, dim: int, alpha: float = 0.5, unit: Literal["round", "step"] = "round") -> None:
        self.alpha = alpha
        self.unit = unit
        self.ghat = torch.zeros(dim)
        self._buffer: list[torch.Tensor] = []

    def add(self, g_sanitized: torch.Tensor) -> None:
        """Record one sanitised gradient computation."""
        if self.unit == "step":
            self.ghat = ema_update(self.ghat, g_sanitized.float(), self.alpha)
        else:
            self._buffer.append(g_sanitized.float())

    def end_round(self) -> torch.Tensor:
        """Close the round and return the vector to upload (unchanged ghat if nothing was computed)."""
        if self.unit == "round" and self._buffer:
            self.ghat = ema_update(self.ghat, torch.stack(self._buffer).mean(0), self.alpha)
        self._buffer = []
        return self.ghat.clone()


def last_layer_param(small_model: nn.Module, which: Literal["down_proj", "lm_head"] = "down_proj") -> nn.Parameter:
    """The W_s weight whose gradient RELA uses (``grad_layer``)."""
    if which == "lm_head":
        return small_model.get_output_embeddings().weight
    base = small_model.get_decoder() if hasattr(small_model, "get_decoder") else small_model.model
    return base.layers[-1].mlp.down_proj.weight


def last_layer_gradient(
    small_model: nn.Module,
    input_ids: torch.Tensor,
    labels: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    which: Literal["down_proj", "lm_head"] = "down_proj",
) -> torch.Tensor:
    """g = d CE(W_s(x), y) / d W_s^last, flattened; only that weight requires grad, so the
    backward pass stops there (W_s stays frozen: its requires_grad flags are restored)."""
    param = last_layer_param(small_model, which)
    flags = {id(p): p.requires_grad for p in small_model.parameters()}
    was_training = small_model.training
    try:
        for p in small_model.parameters():
            p.requires_grad_(False)
        param.requires_grad_(True)
        small_model.eval()
        out = small_model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
        (grad,) = torch.autograd.grad(out.loss, [param])
    finally:
        for p in small_model.parameters():
            p.requires_grad_(flags[id(p)])
        small_model.train(was_training)
    return grad.detach().reshape(-1)


def relevance_matrix(grads: torch.Tensor) -> torch.Tensor:
    """S_ij = cos(g_i, g_j) for stacked client vectors (N, d)."""
    g = F.normalize(grads.double(), dim=1, eps=1e-12)
    return (g @ g.T).float()


def rela_weights(similarity: torch.Tensor, tau: float = 0.5) -> torch.Tensor:
    """w_ij = softmax_j(S_ij / tau): rows sum to 1 (Eq. 4)."""
    if tau <= 0:
        raise ValueError("tau must be > 0")
    return torch.softmax(similarity.double() / tau, dim=1).float()


def weighted_sum(states: Sequence[State], weights: torch.Tensor, keys: Sequence[str]) -> dict[str, torch.Tensor]:
    """sum_j weights[j] * states[j][key] for each key."""
    out: dict[str, torch.Tensor] = {}
    for key in keys:
        stacked = torch.stack([s[key].float() for s in states])
        w = weights.to(stacked.dtype).reshape(-1, *([1] * (stacked.dim() - 1)))
        out[key] = (w * stacked).sum(0)
    return out


def pq_keys(state: State) -> list[str]:
    return sorted(k for k in state if k.startswith("pq."))


def conv_keys(state: State) -> list[str]:
    return sorted(k for k in state if k.startswith("conv."))


def aggregate_pq(states: Sequence[State], weights: torch.Tensor) -> list[dict[str, torch.Tensor]]:
    """Customised global P/Q for every client i: Pbar_i = sum_j w_ij P_j over all clients.

    Only keys present in every client are aggregated (all architectures share ``pq.{k}.{module}``)."""
    common = set(pq_keys(states[0]))
    for s in states[1:]:
        common &= set(pq_keys(s))
    keys = sorted(common)
    for key in keys:
        shapes = {tuple(s[key].shape) for s in states}
        if len(shapes) != 1:
            raise ValueError(f"{key}: heterogeneous shapes {shapes}; use hetlora.aggregate_pq_hetero")
    return [weighted_sum(states, weights[i], keys) for i in range(len(states))]


def aggregate_conv(
    states: Sequence[State],
    weights: torch.Tensor,
    model_types: Sequence[str],
    mode: Literal["rela_within_type", "equal_within_type", "none"] = "rela_within_type",
) -> list[dict[str, torch.Tensor]]:
    """Conventional-LoRA globals within each model type (only one architecture can average them):
    renormalised RELA or equal weights; A and B are averaged separately."""
    n = len(states)
    if mode == "none":
        return [{} for _ in range(n)]
    out: list[dict[str, torch.Tensor]] = []
    for i in range(n):
        same = torch.tensor([model_types[j] == model_types[i] for j in range(n)], dtype=torch.float32)
        w = weights[i].float() * same if mode == "rela_within_type" else same
        w = w / w.sum()
        out.append(weighted_sum(states, w, conv_keys(states[i])))
    return out
