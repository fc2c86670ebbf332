"""Rank-heterogeneous extension: HETLoRA padding/truncation combined with RELA (App. A.24, Eq. 24-25).

Choices recorded:
- [R] Zero-pad every entry of P outside [:r_i, :r_i] (and Q outside [:r_i]) up to r_max.
- [I] ||Delta W_j||_F = ||B_j P_j A_j||_F = ||P_j||_F for orthonormal A/B, so the HETLoRA norm
  weight alpha_j is computed per PQ module from ||P_j||_F ([R]; ``norm='PQ'`` appends Q).
- Eq. 25: w^_ij = w_ij alpha_j / sum_n w_in alpha_n; if every alpha in a row is 0 (e.g. all
  P = 0 at the start) the RELA weights are used unchanged (avoids 0/0).
- Conventional LoRA of different ranks (within a type): same scheme with alpha_j = ||B_j A_j||_F,
  A padded with zero rows and B with zero columns, truncated back to the client's rank.
"""

from __future__ import annotations

from typing import Literal, Mapping, Sequence

import torch

State = Mapping[str, torch.Tensor]


def pad_pq(p: torch.Tensor, q: torch.Tensor, r_max: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Zero-pad P (r x r) to (r_max x r_max) and Q (r) to (r_max)."""
    r = p.shape[0]
    if r > r_max:
        raise ValueError(f"rank {r} > r_max {r_max}")
    p_pad = p.new_zeros(r_max, r_max)
    p_pad[:r, :r] = p
    q_pad = q.new_zeros(r_max)
    q_pad[:r] = q
    return p_pad, q_pad


def truncate_pq(p: torch.Tensor, q: torch.Tensor, r: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Client-rank view P[:r, :r], Q[:r]."""
    return p[:r, :r].clone(), q[:r].clone()


def combine_weights(rela: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """Eq. 25: w^_ij = w_ij alpha_j / sum_n w_in alpha_n (falls back to w_ij where a row's sum is 0)."""
    num = rela.double() * alpha.double().unsqueeze(0)
    den = num.sum(1, keepdim=True)
    out = torch.where(den > 0, num / den.clamp_min(1e-300), rela.double())
    return out.float()


def norm_weights(norms: torch.Tensor) -> torch.Tensor:
    """HETLoRA alpha_k = ||Delta W_k||_F / sum_k' ||Delta W_k'||_F."""
    total = norms.sum()
    return norms / total if total > 0 else torch.zeros_like(norms)


def _module_prefixes(states: Sequence[State], prefix: str, suffixes: tuple[str, str]) -> list[str]:
    common: set[str] | None = None
    for s in states:
        mods = {k[: -len(suffixes[0])] for k in s if k.startswith(prefix) and k.endswith(suffixes[0])}
        common = mods if common is None else common & mods
    return sorted(common or set())


def aggregate_pq_hetero(
    states: Sequence[State], rela: torch.Tensor, ranks: Sequence[int], norm: Literal["P", "PQ"] = "P"
) -> list[dict[str, torch.Tensor]]:
    """Customised P/Q for clients of different ranks: pad, Eq. 25 weights, truncate (per module)."""
    n = len(states)
    r_max = max(ranks)
    out: list[dict[str, torch.Tensor]] = [{} for _ in range(n)]
    for mod in _module_prefixes(states, "pq.", (".P", ".Q")):
        padded = [pad_pq(s[mod + ".P"].float(), s[mod + ".Q"].float(), r_max) for s in states]
        if norm == "P":
            norms = torch.stack([torch.linalg.norm(p) for p, _ in padded])
        else:
            norms = torch.stack([torch.linalg.norm(torch.cat([p.reshape(-1), q])) for p, q in padded])
        w_hat = combine_weights(rela, norm_weights(norms))
        p_stack = torch.stack([p for p, _ in padded])
        q_stack = torch.stack([q for _, q in padded])
        for i in range(n):
            p_bar = (w_hat[i].view(-1, 1, 1) * p_stack).sum(0)
            q_bar = (w_hat[i].view(-1, 1) * q_stack).sum(0)
            out[i][mod + ".P"], out[i][mod + ".Q"] = truncate_pq(p_bar, q_bar, ranks[i])
    return out


def aggregate_conv_hetero(
    states: Sequence[State], rela: torch.Tensor, ranks: Sequence[int], model_types: Sequence[str]
) -> list[dict[str, torch.Tensor]]:
    """Conventional LoRA of different ranks within each type: zero-pad, Eq. 25 weights, truncate."""
    n = len(states)
    out: list[dict[str, torch.Tensor]] = [{} for _ in range(n)]
    for i in range(n):
        group = [j for j in range(n) if model_types[j] == model_types[i]]
        r_max = max(ranks[j] for j in group)
        for mod in _module_prefixes([states[j] for j in group], "conv.", (".A", ".B")):
            pads_a, pads_b, norms = [], [], []
            for j in group:
                a, b = states[j][mod + ".A"].float(), states[j][mod + ".B"].float()
                pa = a.new_zeros(r_max, a.shape[1])
                pa[: a.shape[0]] = a
                pb = b.new_zeros(b.shape[0], r_max)
                pb[:, : b.shape[1]] = b
                pads_a.append(pa)
                pads_b.append(pb)
                norms.append(torch.linalg.norm(b @ a))
            w_row = rela[i, group].float()
            w_row = w_row / w_row.sum()
            w_hat = combine_weights(w_row.unsqueeze(0), norm_weights(torch.stack(norms)))[0]
            a_bar = (w_hat.view(-1, 1, 1) * torch.stack(pads_a)).sum(0)
            b_bar = (w_hat.view(-1, 1, 1) * torch.stack(pads_b)).sum(0)
            out[i][mod + ".A"] = a_bar[: ranks[i]].clone()
            out[i][mod + ".B"] = b_bar[:, : ranks[i]].clone()
    return out
