"""Robust PCA by Principal Component Pursuit, solved with the constant-penalty ADMM.

Principal Component Pursuit (Candès, Li, Ma and Wright, "Robust principal component analysis?", J. ACM 58(3),
2011, Eq. 1.1) splits a matrix M (d1 x d2) into a low-rank part L and a sparse part S::

    minimise  ||L||_* + lam ||S||_1   subject to  L + S = M

(``||.||_*`` the nuclear norm, the sum of singular values; ``||.||_1`` the sum of absolute entries). It is solved
by the alternating-directions method on the augmented Lagrangian
``||L||_* + lam ||S||_1 + <Y, M - L - S> + mu/2 ||M - L - S||_F^2`` with a constant penalty mu (Candès et al.,
Algorithm 1; the FedRPCA paper's Algorithm 2, App. B.1). One iteration, in this order::

    L_{k+1} = D_{1/mu}(M - S_k + Y_k / mu)              singular value thresholding at 1/mu
    S_{k+1} = shrink_{lam/mu}(M - L_{k+1} + Y_k / mu)    entrywise soft thresholding, with the old Y
    Y_{k+1} = Y_k + mu (M - L_{k+1} - S_{k+1})

where ``D_t(X) = U shrink_t(Sigma) V^T`` for the thin SVD ``X = U Sigma V^T`` and
``shrink_t(x) = sign(x) max(|x| - t, 0)``. It stops when ``||M - L - S||_F <= tol ||M||_F`` or after
``max_iter`` iterations. Defaults (Candès et al. Sec. 1.4 and 5; the FedRPCA paper keeps them):
``lam = 1 / sqrt(max(d1, d2))``, ``mu = d1 d2 / (4 ||M||_1)``, ``tol = 1e-7``, ``max_iter = 1000``.

Why written here rather than taken from a library: the PCP solvers on PyPI solve the inexact augmented-Lagrangian
variant whose mu grows every iteration (a different iteration with different results), run in NumPy without the
batching used below, or zero small entries on their own; none reports iterations and residual per problem.

Properties this implementation keeps (tests/test_fedrpca.py checks them): float64 throughout; the returned L and
S are the last iterates (when the cap stops the loop, ``L + S`` differs from M by the reported residual, so S is
never recomputed as ``M - L``); a zero matrix returns zeros at once (its default mu would be infinite); with the
default mu the solution is scale-equivariant, ``pcp(c M) = c pcp(M)`` for c > 0 (mu scales as 1/c), and columns
permuted in M come back permuted the same way. :func:`pcp_batch` solves many same-shaped problems together, one
batched SVD per iteration; each problem stops at its own tolerance, exactly as if solved alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class PCPResult:
    """One solved problem: ``low_rank + sparse`` approximates M to ``residual`` (relative Frobenius norm)."""

    low_rank: torch.Tensor
    sparse: torch.Tensor
    iterations: int  # ADMM iterations run (0 for a zero matrix)
    residual: float  # ||M - L - S||_F / ||M||_F after the last iteration (0.0 for a zero matrix)
    converged: bool  # residual <= tol; False when max_iter stopped the loop first
    lam: float
    mu: float | None  # None for a zero matrix (no iteration ran)
    rank: int  # singular values kept by the last L step (the rank of L)


def pcp(
    matrix: torch.Tensor, *, lam: float | None = None, mu: float | None = None, tol: float = 1e-7, max_iter: int = 1000
) -> PCPResult:
    """Principal Component Pursuit of one matrix (d1 x d2); see the module docstring for the iteration.

    Args:
        matrix: any real dtype; solved in float64 on its device.
        lam: sparsity weight; None: ``1 / sqrt(max(d1, d2))``.
        mu: constant penalty; None: ``d1 d2 / (4 ||M||_1)``.
        tol: relative Frobenius residual at which to stop.
        max_iter: iteration cap (the result says whether it converged before it).
    """
    if matrix.dim() != 2:
        raise ValueError(f"pcp: expected a matrix, got shape {tuple(matrix.shape)}")
    return pcp_batch(matrix.unsqueeze(0), lam=lam, mu=mu, tol=tol, max_iter=max_iter)[0]


def pcp_batch(
    matrices: torch.Tensor,
    *,
    lam: float | None = None,
    mu: float | None = None,
    tol: float = 1e-7,
    max_iter: int = 1000,
) -> list[PCPResult]:
    """:func:`pcp` of every matrix of a (n, d1, d2) stack, batched: one SVD call per iteration for the problems that
    have not yet converged. Defaults of ``lam`` and ``mu`` are computed per matrix."""
    if matrices.dim() != 3:
        raise ValueError(f"pcp_batch: expected a (n, d1, d2) stack, got shape {tuple(matrices.shape)}")
    if tol <= 0 or max_iter < 1:
        raise ValueError(f"pcp_batch: tol must be > 0 and max_iter >= 1, got tol={tol}, max_iter={max_iter}")
    m = matrices.detach().to(torch.float64)
    if not bool(torch.isfinite(m).all()):
        raise ValueError("pcp_batch: the matrix holds NaN or infinity")
    n, d1, d2 = m.shape
    lam_value = float(lam) if lam is not None else 1.0 / math.sqrt(max(d1, d2))
    norm_m = torch.linalg.norm(m, dim=(1, 2))
    l1 = m.abs().sum(dim=(1, 2))
    nonzero = norm_m > 0
    dev = m.device
    mu_all = (
        torch.full((n,), float(mu), dtype=torch.float64, device=dev)
        if mu is not None
        else torch.where(nonzero, d1 * d2 / (4.0 * l1.clamp(min=torch.finfo(torch.float64).tiny)), torch.inf)
    )

    low, sparse, dual = torch.zeros_like(m), torch.zeros_like(m), torch.zeros_like(m)
    iterations = torch.zeros(n, dtype=torch.long, device=dev)
    residual = torch.zeros(n, dtype=torch.float64, device=dev)
    rank = torch.zeros(n, dtype=torch.long, device=dev)
    converged = ~nonzero  # a zero matrix is solved by L = S = 0
    active = torch.nonzero(nonzero).flatten()
    for k in range(1, max_iter + 1):
        if active.numel() == 0:
            break
        ma, sa, ya = m[active], sparse[active], dual[active]
        mu_a = mu_all[active].view(-1, 1, 1)
        step = 1.0 / mu_a
        u, sv, vh = torch.linalg.svd(ma - sa + step * ya, full_matrices=False)
        kept = (sv - step.view(-1, 1)).clamp(min=0)
        la = (u * kept.unsqueeze(1)) @ vh
        x = ma - la + step * ya
        sa = x.sign() * (x.abs() - step * lam_value).clamp(min=0)
        r = ma - la - sa
        ya = ya + mu_a * r
        res = torch.linalg.norm(r, dim=(1, 2)) / norm_m[active]
        low[active], sparse[active], dual[active] = la, sa, ya
        iterations[active] = k
        residual[active] = res
        rank[active] = (kept > 0).sum(dim=1)
        done = res <= tol
        converged[active[done]] = True
        active = active[~done]
    return [
        PCPResult(
            low_rank=low[i],
            sparse=sparse[i],
            iterations=int(iterations[i]),
            residual=float(residual[i]),
            converged=bool(converged[i]),
            lam=lam_value,
            mu=float(mu_all[i]) if bool(nonzero[i]) or mu is not None else None,
            rank=int(rank[i]),
        )
        for i in range(n)
    ]
