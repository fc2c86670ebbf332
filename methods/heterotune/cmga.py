"""CMGA (cross-model gradient alignment): joint whitening of the types' share-slot updates, and its diagnostics.

The paper's Eq. 5 asks for the Z closest to G = [g_1 | ... | g_M'] (the per-type updates as columns) whose columns
are orthonormal; as printed its constraint has typos (Z Z^T = I_d cannot hold for M' < d), and the consistent
reading Z^T Z = I_M' is solved by the polar factor U W^T of G = U S W^T, which equals G (G^T G)^(-1/2). The paper's
Eq. 6 regularises it, and that form is what runs here:

    K = G^T G  (M' x M', float64),  K = V diag(lambda) V^T,  H = V diag((max(lambda, 0) + eps)^(-1/2)) V^T,  G~ = G H

G~^T G~ = V diag(lambda / (lambda + eps)) V^T, the identity up to eps: unit, mutually orthogonal columns. It is a
symmetric (Loewdin) orthogonalisation, not PCGrad: positive alignment is removed as well as conflict, and near
duplicates have their difference amplified. That is Eq. 6, kept as it is.

Scale (the paper leaves it open): Eq. 6 alone leaves columns of norm about 1 whatever the update's size; the paper says
"whitening and rescaling" without the rescale. ``frobenius`` (default) multiplies G~ by ||G||_F / ||G~||_F: the
total update energy is kept and every column ends at the RMS of the input norms ("all directions contribute
equally"). ``column`` restores each column's own norm, ``none`` is the literal Eq. 6.

eps (the paper gives no value): relative by default, eps = eps_rel tr(K) / M', which makes CMGA scale-equivariant
(CMGA(cG) = c CMGA(G)); with the Frobenius rescale eps then moves it from full orthogonalisation (eps -> 0) to the
plain average (eps -> infinity, G~ -> G). ``absolute`` uses eps as given (the paper's "small positive constant").

Zero columns (norm <= 1e-12 of the largest) are left out and get a zero update; with fewer than two non-zero
columns CMGA is the identity.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

ZERO_COLUMN = 1e-12


def cmga(G: torch.Tensor, eps: float = 1e-6, eps_mode: str = "relative", rescale: str = "frobenius") -> torch.Tensor:
    """The aligned updates G~ (same shape and dtype as ``G``, d x M'), computed in float64 (module docstring)."""
    if G.dim() != 2:
        raise ValueError(f"G must be d x M', got shape {tuple(G.shape)}")
    G64 = G.double()
    norms = G64.norm(dim=0)
    keep = norms > ZERO_COLUMN * float(norms.max()) if G64.numel() else torch.zeros(0, dtype=torch.bool)
    out = torch.zeros_like(G64)
    if int(keep.sum()) < 2:  # nothing to align against: the identity on the non-zero column (if any)
        out[:, keep] = G64[:, keep]
        return out.to(G.dtype)
    Gk = G64[:, keep]
    K = Gk.T @ Gk
    e = eps * float(torch.trace(K)) / K.shape[0] if eps_mode == "relative" else float(eps)
    lam, V = torch.linalg.eigh(K)
    H = V @ torch.diag((lam.clamp_min(0) + e).rsqrt()) @ V.T
    Gt = Gk @ H
    if rescale == "frobenius":
        Gt = Gt * (Gk.norm() / Gt.norm())
    elif rescale == "column":
        Gt = Gt * (Gk.norm(dim=0) / Gt.norm(dim=0))
    elif rescale != "none":
        raise ValueError(f"unknown rescale {rescale!r}")
    out[:, keep] = Gt
    return out.to(G.dtype)


def polar_factor(G: torch.Tensor) -> torch.Tensor:
    """U W^T of the thin SVD G = U S W^T (the eps -> 0 limit of :func:`cmga` without rescale), float64."""
    U, _, Wh = torch.linalg.svd(G.double(), full_matrices=False)
    return U @ Wh


@dataclass(frozen=True)
class Geometry:
    """Norms and pairwise cosines of a set of update columns (for the diagnostics)."""

    norms: list[float]
    mean_abs_cos: float | None
    max_abs_cos: float | None
    min_cos: float | None


def geometry(G: torch.Tensor) -> Geometry:
    """Column norms of ``G`` and the mean / max |cosine| and the minimum cosine over pairs of non-zero columns."""
    G64 = G.double()
    norms = G64.norm(dim=0)
    nz = norms > ZERO_COLUMN * float(norms.max()) if G64.numel() and float(norms.max()) > 0 else norms > 0
    cols = G64[:, nz] / norms[nz]
    n = cols.shape[1]
    if n < 2:
        return Geometry([float(v) for v in norms], None, None, None)
    C = cols.T @ cols
    iu = torch.triu_indices(n, n, offset=1)
    pairs = C[iu[0], iu[1]]
    return Geometry([float(v) for v in norms], float(pairs.abs().mean()), float(pairs.abs().max()), float(pairs.min()))


@dataclass
class Column:
    """One column of CMGA: a type's (or one client's) pseudo-gradient of its own slot, at its native depth.

    ``delta[kind][e]`` is the r x r update of entry e of the slot's ``kind`` ("down" or "up") matrices; ``weight`` is
    the column's share of its type's update (1 for a type's group mean; n_k / sum n within the type per client).
    """

    type: int
    weight: float
    delta: dict[str, list[torch.Tensor]]


@dataclass
class GroupReport:
    """What CMGA did to one alignment problem (one grid position and matrix kind under ``matrix`` granularity)."""

    key: str
    types: list[int]
    before: Geometry
    after: Geometry | None
    eps: float | None


KINDS: tuple[str, ...] = ("down", "up")


def groups(grid: int, granularity: str) -> list[tuple[str, list[tuple[int, str]]]]:
    """The alignment problems on the canonical grid: (name, [(position c, kind)]), one CMGA each.

    ``matrix``: each r x r matrix at each position (d = r^2; the default: each alignment stays within one function);
    ``position``: down and up of a position concatenated (d = 2 r^2); ``global``: every position and kind concatenated (one problem per round).
    """
    if granularity == "matrix":
        return [(f"{kind}.{c}", [(c, kind)]) for c in range(grid) for kind in KINDS]
    if granularity == "position":
        return [(f"position.{c}", [(c, kind) for kind in KINDS]) for c in range(grid)]
    if granularity == "global":
        return [("global", [(c, kind) for c in range(grid) for kind in KINDS])]
    raise ValueError(f"unknown granularity {granularity!r}")


def align_columns(
    columns: list[Column],
    depths: tuple[int, ...],
    *,
    enabled: bool,
    granularity: str,
    eps: float,
    eps_mode: str,
    rescale: str,
) -> tuple[dict[int, dict[str, list[torch.Tensor]]], list[GroupReport]]:
    """Align the columns on the canonical grid K = max(depths) and bring the result back to each type's entries.

    Position c of the grid holds entry phi(c; K -> L_i) of a type-i column; after alignment (``enabled``) each
    native entry receives the mean of its aligned pieces over the positions that map to it, and a type's update is
    the ``weight``-weighted sum of its columns. Disabled, the same path returns the plain weighted sums (the
    "w/o CMGA" arm; the report still holds the updates' geometry). Returns (type -> kind -> per-entry update,
    one :class:`GroupReport` per alignment problem).
    """
    from .depths import grid_columns

    grid = max(depths)
    entry_of = {i: grid_columns(grid, L) for i, L in enumerate(depths)}
    sums: list[dict[str, list[torch.Tensor | None]]] = [
        {k: [None] * depths[col.type] for k in KINDS} for col in columns
    ]
    counts: list[dict[str, list[int]]] = [{k: [0] * depths[col.type] for k in KINDS} for col in columns]
    reports: list[GroupReport] = []
    for name, members in groups(grid, granularity):
        pieces = [[col.delta[kind][entry_of[col.type][c]].double() for c, kind in members] for col in columns]
        shapes = [p.shape for p in pieces[0]]
        G = torch.stack([torch.cat([p.reshape(-1) for p in ps]) for ps in pieces], dim=1)
        before = geometry(G)
        used_eps = None
        if enabled and before.mean_abs_cos is not None:  # at least two non-zero columns to align
            G_t = cmga(G, eps=eps, eps_mode=eps_mode, rescale=rescale)
            after = geometry(G_t)
            if eps_mode == "relative":
                K = G.T @ G
                used_eps = eps * float(torch.trace(K)) / K.shape[0]
            else:
                used_eps = float(eps)
        else:
            G_t, after = G, None
        reports.append(GroupReport(name, [col.type for col in columns], before, after, used_eps))
        for ci, col in enumerate(columns):
            flat, start = G_t[:, ci], 0
            for (c, kind), shape in zip(members, shapes):
                n = int(torch.Size(shape).numel())
                piece = flat[start : start + n].reshape(shape)
                start += n
                e = entry_of[col.type][c]
                prev = sums[ci][kind][e]
                sums[ci][kind][e] = piece if prev is None else prev + piece
                counts[ci][kind][e] += 1
    out: dict[int, dict[str, list[torch.Tensor]]] = {}
    if not (enabled and len(columns) > 1):  # nothing aligned: the weighted sums of the native entries, exactly
        for col in columns:
            mine = out.setdefault(
                col.type,
                {
                    k: [torch.zeros_like(col.delta[k][e], dtype=torch.float64) for e in range(depths[col.type])]
                    for k in KINDS
                },
            )
            for kind in KINDS:
                for e in range(depths[col.type]):
                    mine[kind][e] = mine[kind][e] + col.weight * col.delta[kind][e].double()
        return out, reports
    for ci, col in enumerate(columns):
        mine = out.setdefault(
            col.type,
            {
                k: [torch.zeros_like(col.delta[k][e], dtype=torch.float64) for e in range(depths[col.type])]
                for k in KINDS
            },
        )
        for kind in KINDS:
            for e in range(depths[col.type]):
                total = sums[ci][kind][e]
                if total is None:  # unreachable: phi(.; K -> L) is surjective for L <= K
                    raise RuntimeError(f"entry {e} of type {col.type} has no grid position")
                mine[kind][e] = mine[kind][e] + col.weight * total / counts[ci][kind][e]
    return out, reports
