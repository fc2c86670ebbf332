"""Small linear-algebra helpers shared by PQ-LoRA, alignment and the rank-heterogeneous extension."""

from __future__ import annotations

import torch


def random_orthonormal_rows(rows: int, cols: int, generator: torch.Generator) -> torch.Tensor:
    """A (rows x cols) matrix with orthonormal rows (A A^T = I); requires rows <= cols."""
    if rows > cols:
        raise ValueError(f"cannot have {rows} orthonormal rows in dimension {cols}")
    g = torch.randn(cols, rows, generator=generator, dtype=torch.float64)
    q, r = torch.linalg.qr(g)
    q = q * torch.sign(torch.diagonal(r)).unsqueeze(0)  # unique QR -> deterministic sign
    return q.T.contiguous().float()


def random_orthonormal_cols(rows: int, cols: int, generator: torch.Generator) -> torch.Tensor:
    """A (rows x cols) matrix with orthonormal columns (B^T B = I); requires cols <= rows."""
    return random_orthonormal_rows(cols, rows, generator).T.contiguous()


def nearest_orthonormal_rows(a: torch.Tensor) -> torch.Tensor:
    """Closest matrix with orthonormal rows: thin SVD A = U S V_r^T -> U V_r^T (Eqs. 21-23, in the thin form
    that is defined for r < d)."""
    u, _, vh = torch.linalg.svd(a.double(), full_matrices=False)
    return (u @ vh).to(a.dtype)


def nearest_orthonormal_cols(b: torch.Tensor) -> torch.Tensor:
    """Closest matrix with orthonormal columns (re-orthonormalises B after the CCA mapping of Eq. 19)."""
    return nearest_orthonormal_rows(b.T).T.contiguous()


def complete_orthonormal_rows(a: torch.Tensor, rows: int, generator: torch.Generator) -> torch.Tensor:
    """Extend orthonormal rows ``a`` (k x d) to ``rows`` orthonormal rows with random completions.

    Used when ranks differ across clients ([R], App. A.24): the leading rows keep their
    aligned meaning and the extra rows are random but orthogonal to them.
    """
    k, d = a.shape
    if rows < k:
        return a[:rows].clone()
    if rows > d:
        raise ValueError(f"cannot have {rows} orthonormal rows in dimension {d}")
    extra = torch.randn(rows - k, d, generator=generator, dtype=torch.float64)
    a64 = a.double()
    extra = extra - (extra @ a64.T) @ a64  # project out the existing span
    q, r = torch.linalg.qr(extra.T)
    q = q * torch.sign(torch.diagonal(r)).unsqueeze(0)
    out = torch.cat([a64, q.T], dim=0)
    return out.to(a.dtype)


def orthonormality_error_rows(a: torch.Tensor) -> float:
    """||A A^T - I||_F."""
    eye = torch.eye(a.shape[0], dtype=torch.float64)
    return float(torch.linalg.norm(a.double() @ a.double().T - eye))


def orthonormality_error_cols(b: torch.Tensor) -> float:
    """||B^T B - I||_F."""
    return orthonormality_error_rows(b.T)
