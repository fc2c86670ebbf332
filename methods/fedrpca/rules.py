"""Server rules that turn the clients' updates of one LoRA matrix into one update (FedRPCA and its baselines).

Every rule takes the stacked client updates of one weight matrix, ``M`` of shape (entries, clients): column i is
``vec(P_i - P)``, client i's trained matrix minus the global matrix it started the round from (P is one LoRA A or
one LoRA B of one adapted layer). It returns the update added to the global matrix, a vector of length ``entries``,
in float64. Clients count equally (the objective of the FedRPCA paper, Eq. 1, weighs clients uniformly).

* :func:`mean_update`: FedAvg (FedIT, FedProx): ``mean(M)``.
* :func:`task_arithmetic_update`: ``scale * mean(M)``, a server learning rate on the whole average (Task
  Arithmetic, the paper's Eq. 5).
* :func:`ties_update`: TIES-merging of the client updates (trim, elect sign, disjoint mean).
* :func:`fedrpca_updates`: FedRPCA (the paper's Eq. 10-11): Robust PCA ``M = L + S``, then
  ``mean(L) + beta * mean(S)`` with ``beta = ||M 1|| / ||S 1||`` per matrix and round, or a fixed beta.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from .rpca import pcp_batch

BETA_FLOOR = 1e-12
"""When ``||S 1|| <= BETA_FLOOR * ||M 1||`` the sparse part carries nothing: adaptive beta is set to 1."""


def mean_update(m: torch.Tensor) -> torch.Tensor:
    """FedAvg: the plain column mean."""
    return m.to(torch.float64).mean(dim=1)


def task_arithmetic_update(m: torch.Tensor, scale: float) -> torch.Tensor:
    """Task Arithmetic: the column mean scaled by ``scale`` (scale 1 is FedAvg)."""
    return scale * mean_update(m)


def ties_update(m: torch.Tensor, trim_fraction: float) -> torch.Tensor:
    """TIES-merging (Yadav et al., NeurIPS 2023) of the columns of ``m``, with a merge scale of 1.

    1. Trim: in each client's column keep the ``round((1 - trim_fraction) * entries)`` entries of largest magnitude
       (at least one) and zero the rest;
    2. elect a sign per entry: the sign of the sum of the trimmed columns;
    3. disjoint mean: per entry, the mean of the trimmed values that are nonzero and have the elected sign (0 where
       none has).
    """
    if not 0.0 <= trim_fraction < 1.0:
        raise ValueError(f"trim_fraction must be in [0, 1), got {trim_fraction}")
    x = m.to(torch.float64)
    entries = x.shape[0]
    keep = max(1, int(math.floor((1.0 - trim_fraction) * entries + 0.5)))
    trimmed = torch.zeros_like(x)
    if keep >= entries:
        trimmed = x.clone()
    else:
        idx = torch.topk(x.abs(), keep, dim=0).indices
        trimmed.scatter_(0, idx, x.gather(0, idx))
    sign = torch.sign(trimmed.sum(dim=1, keepdim=True))
    agree = (trimmed != 0) & (torch.sign(trimmed) == sign)
    count = agree.sum(dim=1)
    total = (trimmed * agree).sum(dim=1)
    return torch.where(count > 0, total / count.clamp(min=1), torch.zeros_like(total))


def fedrpca_updates(
    stack: torch.Tensor,
    *,
    beta: float | str = "adaptive",
    lam: float | None = None,
    mu: float | None = None,
    tol: float = 1e-7,
    max_iter: int = 1000,
) -> list[tuple[torch.Tensor, dict[str, Any]]]:
    """FedRPCA's update of every matrix of ``stack`` (n, entries, clients), each with its diagnostics.

    Per matrix: ``L, S = PCP(M)`` (:func:`~.rpca.pcp_batch`, constant-mu ADMM, float64), then
    ``update = mean(L) + beta * mean(S)`` with the returned L and S. ``beta='adaptive'``:
    ``beta = ||M 1|| / ||S 1||`` (Euclidean norms of the summed columns), which gives the scaled sparse term the
    norm of FedAvg's update; 1 when ``||S 1||`` is negligible (:data:`BETA_FLOOR`); and when ``||M 1|| = 0`` (the
    clients' updates cancel, or are all zero) the matrix is left unchanged, as FedAvg would leave it. A number:
    that fixed beta (1 is FedAvg up to the solver's residual).

    Diagnostics (JSON scalars): ``aggregated_by`` ('rpca'), ``beta`` (None when skipped), ``energy_ratio`` E = ||S 1|| / ||M 1|| (None when
    ||M 1|| = 0), ``admm_iterations``, ``admm_residual``, ``admm_converged``, ``sparse_fraction`` (nonzero
    entries of S over all entries), ``low_rank_rank`` and ``clients``.
    """
    if stack.dim() != 3:
        raise ValueError(f"fedrpca_updates: expected (n, entries, clients), got shape {tuple(stack.shape)}")
    if beta != "adaptive" and not (isinstance(beta, (int, float)) and beta > 0):
        raise ValueError(f"beta must be 'adaptive' or a positive number, got {beta!r}")
    x = stack.to(torch.float64)
    out = []
    for mat, res in zip(x, pcp_batch(x, lam=lam, mu=mu, tol=tol, max_iter=max_iter)):
        clients = mat.shape[1]
        sum_m = float(torch.linalg.norm(mat.sum(dim=1)))
        sum_s = float(torch.linalg.norm(res.sparse.sum(dim=1)))
        energy = sum_s / sum_m if sum_m > 0 else None
        if beta == "adaptive":
            b: float | None = None if sum_m == 0 else (sum_m / sum_s if sum_s > BETA_FLOOR * sum_m else 1.0)
        else:
            b = float(beta)
        if b is None:
            update = torch.zeros(mat.shape[0], dtype=torch.float64, device=mat.device)
        else:
            update = res.low_rank.mean(dim=1) + b * res.sparse.mean(dim=1)
        out.append(
            (
                update,
                {
                    "aggregated_by": "rpca",
                    "beta": b,
                    "energy_ratio": energy,
                    "admm_iterations": res.iterations,
                    "admm_residual": res.residual,
                    "admm_converged": res.converged,
                    "sparse_fraction": float((res.sparse != 0).double().mean()),
                    "low_rank_rank": res.rank,
                    "clients": clients,
                },
            )
        )
    return out


def stack_columns(deltas: Sequence[torch.Tensor]) -> torch.Tensor:
    """``[vec(d_1) ... vec(d_M)]`` in float64: one column per client, row-major vec (undone by ``view(shape)``)."""
    return torch.stack([d.reshape(-1).to(torch.float64) for d in deltas], dim=1)
