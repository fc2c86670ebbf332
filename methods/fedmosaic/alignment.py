"""PQ-LoRA weight alignment, once before federation (Sec. 4.2.2, App. A.5, Algorithms 3-4).

Choices (docs/design-notes.md#fedmosaic-choices):
- Pivot = the smallest model type ([P] App. A.29); [R] with more types, a star: every other type
  aligns to it.
- Aligning A [P]: minimise mean_x ||A_p h_p(x) - A_j h_j(x)||^2 + lambda ||A_j A_j^T - I_r||_F^2 over
  the non-pivot A_j only ([R] the rows-orthonormal form; Eq. 20's A^T A cannot reach I for r < d),
  Adam + cosine schedule, then A_j <- U V_r^T from the thin SVD (Eqs. 21-23).
- Hidden states are those of the frozen base (adapters disabled = the paper's LoRA scale 0).
- [R] Token pairing: token-wise when both models see identical token sequences (same tokenizer
  and masks), otherwise the per-sample masked mean over tokens.
- Aligning B: [R] regularised CCA (covariance + eps*trace/d*I, whitening via eigh) with r
  components on H = the frozen base module output W h_I ([R]: the adapter's own output is zero
  while P = 0; 'literal' = B(A h) with P := I is kept as an option), B_j <- (Pi_j^+)^T Pi_p^T B_p
  (Eq. 19 with its indices fixed), then re-orthonormalised by the thin SVD (the mapping does not
  keep B orthonormal, whatever App. A.5 says).
- [R] Rank heterogeneity (App. A.24): the first min(r_p, r_j) rows of A (columns of B) are
  aligned, the rest completed with random orthonormal directions.
"""

from __future__ import annotations

import math
from contextlib import ExitStack
from typing import Any, Iterable, Literal, Mapping

import torch
from torch import nn

from .config import FedMosaicConfig
from .linalg import (
    complete_orthonormal_rows,
    nearest_orthonormal_cols,
    nearest_orthonormal_rows,
    orthonormality_error_cols,
    orthonormality_error_rows,
)
from .pqlora import pq_bases, pq_modules, set_pq_bases

Batch = Mapping[str, torch.Tensor]


# ----------------------------------------------------------------------------------------------
# Pure math
# ----------------------------------------------------------------------------------------------


def orth_penalty(a: torch.Tensor) -> torch.Tensor:
    """||A A^T - I_r||_F^2 (Eq. 20's penalty in the form defined for r < d)."""
    eye = torch.eye(a.shape[0], dtype=a.dtype, device=a.device)
    return ((a @ a.T - eye) ** 2).sum()


def l2_code_distance(codes_p: torch.Tensor, h_j: torch.Tensor, a_j: torch.Tensor) -> float:
    """mean over rows of ||c_p - A_j h_j||_2^2."""
    return float(((codes_p - h_j @ a_j.T) ** 2).sum(dim=1).mean())


def align_a_l2(
    codes_p: torch.Tensor,
    h_j: torch.Tensor,
    a_init: torch.Tensor,
    *,
    lam: float = 0.5,
    lr: float = 5e-5,
    epochs: int = 1,
    batch_size: int = 4,
    seed: int = 0,
    project: bool = True,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Step A + A': fit A_j so its codes match the pivot's, then project to orthonormal rows.

    codes_p: (n, r) pivot codes A_p h_p; h_j: (n, d_j) inputs of j's paired module; a_init: (r, d_j).
    Adam with a cosine schedule over shuffled minibatches of rows (seeded).
    """
    if codes_p.shape[0] != h_j.shape[0]:
        raise ValueError("codes_p and h_j must be paired row by row")
    codes_p = codes_p.detach().float()
    h_j = h_j.detach().float()
    a = nn.Parameter(a_init.detach().float().clone())
    opt = torch.optim.Adam([a], lr=lr)
    n = h_j.shape[0]
    steps = epochs * math.ceil(n / batch_size)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(steps, 1))
    gen = torch.Generator().manual_seed(seed)
    before = l2_code_distance(codes_p, h_j, a.detach())
    for _ in range(epochs):
        perm = torch.randperm(n, generator=gen)
        for start in range(0, n, batch_size):
            idx = perm[start : start + batch_size]
            pred = h_j[idx] @ a.T
            loss = ((codes_p[idx] - pred) ** 2).sum(dim=1).mean() + lam * orth_penalty(a)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
    out = a.detach()
    fitted = l2_code_distance(codes_p, h_j, out)
    if project:
        out = nearest_orthonormal_rows(out)
    return out, {
        "l2_before": before,
        "l2_fitted": fitted,
        "l2_after": l2_code_distance(codes_p, h_j, out),
        "orth_error": orthonormality_error_rows(out),
    }


def _inv_sqrt_psd(c: torch.Tensor) -> torch.Tensor:
    evals, evecs = torch.linalg.eigh(c)
    return evecs @ torch.diag(evals.clamp_min(1e-12).rsqrt()) @ evecs.T


def cca(x: torch.Tensor, y: torch.Tensor, r: int, eps: float = 1e-4) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Regularised CCA with ``r`` components: (Pi_x (d_x x r), Pi_y (d_y x r), correlations (r,)).

    Covariances get a ridge eps*trace/d ([R]); computed in float64 for stability.
    """
    if x.shape[0] != y.shape[0]:
        raise ValueError("x and y must be paired row by row")
    if r > min(x.shape[1], y.shape[1]):
        raise ValueError(f"r={r} exceeds min feature dim {min(x.shape[1], y.shape[1])}")
    x = x.double() - x.double().mean(0, keepdim=True)
    y = y.double() - y.double().mean(0, keepdim=True)
    n = max(x.shape[0] - 1, 1)
    cxx, cyy, cxy = x.T @ x / n, y.T @ y / n, x.T @ y / n
    cxx = cxx + eps * torch.trace(cxx) / cxx.shape[0] * torch.eye(cxx.shape[0], dtype=cxx.dtype)
    cyy = cyy + eps * torch.trace(cyy) / cyy.shape[0] * torch.eye(cyy.shape[0], dtype=cyy.dtype)
    wx, wy = _inv_sqrt_psd(cxx), _inv_sqrt_psd(cyy)
    u, s, vh = torch.linalg.svd(wx @ cxy @ wy)
    return (wx @ u[:, :r]).float(), (wy @ vh.T[:, :r]).float(), s[:r].float()


def map_b_cca(b_p: torch.Tensor, pi_p: torch.Tensor, pi_j: torch.Tensor, orthonormalize: bool = True) -> torch.Tensor:
    """B_j = (Pi_j^+)^T Pi_p^T B_p (Eq. 19 fixed), then the nearest orthonormal-column matrix."""
    b_j = torch.linalg.pinv(pi_j.double()).T @ pi_p.double().T @ b_p.double()
    b_j = b_j.float()
    return nearest_orthonormal_cols(b_j) if orthonormalize else b_j


# ----------------------------------------------------------------------------------------------
# Activation collection on public data
# ----------------------------------------------------------------------------------------------


def _pool(t: torch.Tensor, mask: torch.Tensor | None, mode: Literal["token", "mean"]) -> torch.Tensor:
    """(batch, seq, d) -> rows: valid tokens (token mode) or masked per-sample mean (mean mode)."""
    if t.dim() == 2:
        return t
    if mask is None:
        mask = torch.ones(t.shape[:2], dtype=torch.bool, device=t.device)
    mask = mask.bool()
    if mode == "token":
        return t[mask]
    m = mask.unsqueeze(-1).to(t.dtype)
    return (t * m).sum(1) / m.sum(1).clamp_min(1.0)


@torch.no_grad()
def collect_pq_activations(
    model: nn.Module, batches: Iterable[Batch], mode: Literal["token", "mean"], adapter: str = "default"
) -> dict[str, dict[str, torch.Tensor]]:
    """Inputs h_I and base outputs W h_I of every PQ module (frozen base, adapters disabled)."""
    mods = pq_modules(model, adapter)
    store: dict[str, dict[str, list[torch.Tensor]]] = {k: {"inp": [], "out": []} for k in mods}
    current_mask: list[torch.Tensor | None] = [None]

    def make_hook(key: str):
        def hook(_m: nn.Module, inputs: tuple[torch.Tensor, ...], output: torch.Tensor) -> None:
            store[key]["inp"].append(_pool(inputs[0].float(), current_mask[0], mode))
            store[key]["out"].append(_pool(output.float(), current_mask[0], mode))

        return hook

    was_training = model.training
    model.eval()
    with ExitStack() as stack:
        for key, m in mods.items():
            handle = m.get_base_layer().register_forward_hook(make_hook(key))
            stack.callback(handle.remove)
        disable = getattr(model, "disable_adapter", None)
        if disable is not None:
            stack.enter_context(disable())
        for batch in batches:
            current_mask[0] = batch.get("attention_mask")
            model(input_ids=batch["input_ids"], attention_mask=batch.get("attention_mask"))
    model.train(was_training)
    return {k: {"inp": torch.cat(v["inp"]), "out": torch.cat(v["out"])} for k, v in store.items()}


def _pairing(cfg_mode: str, batches_p: list[Batch], batches_j: list[Batch]) -> Literal["token", "mean"]:
    if cfg_mode in ("token", "mean"):
        return cfg_mode  # type: ignore[return-value]
    same = len(batches_p) == len(batches_j) and all(
        bp["input_ids"].shape == bj["input_ids"].shape
        and torch.equal(bp["input_ids"], bj["input_ids"])
        and torch.equal(
            bp.get("attention_mask", torch.ones_like(bp["input_ids"])),
            bj.get("attention_mask", torch.ones_like(bj["input_ids"])),
        )
        for bp, bj in zip(batches_p, batches_j)
    )
    return "token" if same else "mean"


def align_to_pivot(
    pivot: nn.Module,
    model: nn.Module,
    batches_pivot: list[Batch],
    batches_model: list[Batch],
    cfg: FedMosaicConfig,
    adapter: str = "default",
    seed: int = 0,
) -> dict[str, dict[str, Any]]:
    """Align every PQ module of ``model`` to the paired (block, module) of ``pivot``, in place.

    ``batches_*`` hold the same public samples tokenized for each model. Returns a per-module
    report (L2 before/after, orthonormality errors, top canonical correlations).
    """
    mode = _pairing(cfg.token_pairing, batches_pivot, batches_model)
    acts_p = collect_pq_activations(pivot, batches_pivot, mode, adapter)
    acts_j = collect_pq_activations(model, batches_model, mode, adapter)
    bases_p, bases_j = pq_bases(pivot, adapter), pq_bases(model, adapter)
    new_bases: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    report: dict[str, dict[str, Any]] = {}
    gen = torch.Generator().manual_seed(seed)
    for key, (a_j0, b_j0) in bases_j.items():
        if key not in bases_p:
            continue
        a_p, b_p = bases_p[key]
        r = min(a_p.shape[0], a_j0.shape[0])
        h_p, h_j = acts_p[key]["inp"], acts_j[key]["inp"]
        if h_p.shape[0] != h_j.shape[0]:
            raise ValueError(f"{key}: {h_p.shape[0]} pivot rows vs {h_j.shape[0]} rows; pairing failed")
        codes_p = h_p @ a_p[:r].T
        a_j, info = align_a_l2(
            codes_p,
            h_j,
            a_j0[:r],
            lam=cfg.align_lambda,
            lr=cfg.align_lr,
            epochs=cfg.align_epochs,
            batch_size=cfg.align_batch_size,
            seed=seed,
        )
        if a_j0.shape[0] > r:
            a_j = complete_orthonormal_rows(a_j, a_j0.shape[0], gen)
        if cfg.cca_features == "base_output":
            f_p, f_j = acts_p[key]["out"], acts_j[key]["out"]
        else:  # literal: outputs of B with P := I, i.e. B(A h)
            f_p, f_j = (h_p @ a_p.T) @ b_p.T, (h_j @ a_j.T) @ b_j0.T
        pi_p, pi_j, corr = cca(f_p, f_j, r, cfg.cca_eps)
        b_j = map_b_cca(b_p[:, :r], pi_p, pi_j)
        if b_j0.shape[1] > r:
            b_j = complete_orthonormal_rows(b_j.T, b_j0.shape[1], gen).T.contiguous()
        new_bases[key] = (a_j, b_j)
        report[key] = {
            **info,
            "pairing": mode,
            "b_orth_error": orthonormality_error_cols(b_j),
            "cca_corr_top": float(corr[0]),
            "cca_corr_mean": float(corr.mean()),
            "cca_directions": (pi_p, pi_j),
        }  # not a number: kept for the held-out audit, not written
    set_pq_bases(model, new_bases, adapter)
    return report


def _column_correlations(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Pearson correlation of each column of x with the same column of y (rows are paired samples)."""
    x = x.double() - x.double().mean(0)
    y = y.double() - y.double().mean(0)
    den = (x.norm(dim=0) * y.norm(dim=0)).clamp_min(1e-300)
    return ((x * y).sum(0) / den).float()


def audit_alignment(
    pivot: nn.Module,
    model: nn.Module,
    batches_pivot: list[Batch],
    batches_model: list[Batch],
    bases_before: Mapping[str, tuple[torch.Tensor, torch.Tensor]],
    report: Mapping[str, Mapping[str, Any]],
    cfg: FedMosaicConfig,
    adapter: str = "default",
) -> dict[str, dict[str, float]]:
    """How well ``model``'s alignment to the pivot holds on public data the alignment did not see.

    Per PQ module: the A-code L2 distance ``mean ||A_p h_p - A_j h_j||^2`` with the bases from before alignment
    and with the aligned ones, and their ratio (the toy target: below 0.5); and for B, whose mapping rests on the
    canonical directions Pi_p, Pi_j fitted on the alignment's data (B_j = (Pi_j^+)^T Pi_p^T B_p), the correlation
    of the paired layers' outputs along those same directions on the held-out items (top and mean over the r
    directions): if it stays high, the shared space B was mapped through holds beyond the fitting data.
    """
    mode = _pairing(cfg.token_pairing, batches_pivot, batches_model)
    acts_p = collect_pq_activations(pivot, batches_pivot, mode, adapter)
    acts_j = collect_pq_activations(model, batches_model, mode, adapter)
    bases_p, bases_j = pq_bases(pivot, adapter), pq_bases(model, adapter)
    out: dict[str, dict[str, float]] = {}
    for key, (a_j, _) in bases_j.items():
        if key not in bases_p or key not in bases_before or key not in report:
            continue
        a_p = bases_p[key][0]
        a0 = bases_before[key][0]
        r = min(a_p.shape[0], a_j.shape[0])
        codes_p = acts_p[key]["inp"] @ a_p[:r].T
        before = l2_code_distance(codes_p, acts_j[key]["inp"], a0[:r])
        after = l2_code_distance(codes_p, acts_j[key]["inp"], a_j[:r])
        pi_p, pi_j = report[key]["cca_directions"]
        corr = _column_correlations(
            acts_p[key]["out"] @ pi_p.to(acts_p[key]["out"].dtype),
            acts_j[key]["out"] @ pi_j.to(acts_j[key]["out"].dtype),
        )
        out[key] = {
            "heldout_l2_before": before,
            "heldout_l2_after": after,
            "heldout_l2_ratio": after / before if before else 1.0,
            "heldout_cca_corr_top": float(corr[0]),
            "heldout_cca_corr_mean": float(corr.mean()),
        }
    return out


def count_base_params(model: nn.Module) -> int:
    """Parameters of the frozen base (adapter weights excluded), used to pick the pivot."""
    return sum(p.numel() for n, p in model.named_parameters() if "lora_" not in n)


def choose_pivot(models: Mapping[str, nn.Module], which: Literal["smallest", "largest"] = "smallest") -> str:
    """Name of the pivot type: the smallest base by parameter count ([P] A.29), ties by name."""
    ranked = sorted(models, key=lambda k: (count_base_params(models[k]), k))
    return ranked[0] if which == "smallest" else ranked[-1]


def align_all(
    models: Mapping[str, nn.Module],
    batches: Mapping[str, list[Batch]],
    cfg: FedMosaicConfig,
    adapter: str = "default",
    seed: int = 0,
) -> tuple[str, dict[str, dict[str, dict[str, Any]]]]:
    """Star alignment of every model type to the pivot; returns (pivot name, reports by type)."""
    pivot = choose_pivot(models, cfg.pivot)
    reports = {
        name: align_to_pivot(models[pivot], m, batches[pivot], batches[name], cfg, adapter, seed)
        for name, m in models.items()
        if name != pivot
    }
    return pivot, reports
