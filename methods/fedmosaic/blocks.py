"""Block-wise placement of PQ-LoRA (FedMosaic Eq. 6).

The decoder is split into ``n_blocks`` equal blocks by relative depth and PQ-LoRA sits on the
last layer of each block, so every architecture exposes the same number of PQ layers, matched
across architectures by block index ``k`` (Sec. 4.2.1).

[R] Eq. 6 with 1-based indices I_k = k*floor(L/N_B) for k < N_B and I_{N_B} = L is the default;
the rule printed in Algorithm 2 (n*floor(L/N_B) + L mod N_B, App. A.35) is available as
``rule="alg2"``. They coincide whenever L is divisible by N_B (docs/design-notes.md#fedmosaic-choices).
"""

from __future__ import annotations

import re
from typing import Literal

BlockRule = Literal["eq6", "alg2"]

_LAYER_RE = re.compile(r"(?:^|\.)layers\.(\d+)\.")


def pq_layer_indices(num_layers: int, n_blocks: int, rule: BlockRule = "eq6") -> list[int]:
    """0-based decoder-layer indices that carry PQ-LoRA (one per block, block order)."""
    if num_layers < 1:
        raise ValueError(f"num_layers must be >= 1, got {num_layers}")
    if not 1 <= n_blocks <= num_layers:
        raise ValueError(f"n_blocks must be in [1, num_layers={num_layers}], got {n_blocks}")
    step = num_layers // n_blocks
    if rule == "eq6":
        one_based = [k * step for k in range(1, n_blocks)] + [num_layers]
    elif rule == "alg2":
        rem = num_layers % n_blocks
        one_based = [n * step + rem for n in range(1, n_blocks + 1)]
    else:  # pragma: no cover - guarded by Literal
        raise ValueError(f"unknown block rule {rule!r}")
    return [i - 1 for i in one_based]


def layer_index_from_key(key: str) -> int | None:
    """Decoder-layer index parsed from a module path such as ``model.layers.3.mlp.up_proj``."""
    match = _LAYER_RE.search(key)
    return int(match.group(1)) if match else None


def layer_relative_name(key: str) -> str | None:
    """Path below the decoder layer (``self_attn.q_proj``); identical across Llama and Qwen2."""
    match = _LAYER_RE.search(key)
    return key[match.end() :] if match else None
