"""What HeteroTune sends per client and round, by formula, beside what the evaluator measures.

A type-j client uploads its local adapter (L_j blocks of an m_j x r down- and an r x m_j up-projection), its alpha
(M scalars per block) and its own share slot (one r x r down and up pair per block):

    uplink floats = L_j (2 m_j r + M + 2 r^2)  (+ |head_j|)

The paper's Table 5 counts the same without the L_j M alphas (its ViT rows equal L (2 m r + 2 r^2) + a 1000-way head
to the digit; its LLaMA rows fit no formula exactly); drake_bench sends what the method trains, alpha included. Its
clients answer through the frozen language-model head, so there is no per-type head to send: |head_j| = 0 here (the paper's ViT classifiers and
LLaMA sequence classifiers train one). Everything travels as float32 (4 bytes a float), plus n_k (the client's
sample count, for the server's weighted means) as the message's JSON metadata. The evaluator measures every message
itself (``Message.num_bytes``); tests/test_heterotune.py checks the measured uplink against :func:`uplink_bytes`.

Homo-Training (the plain adapter) uploads L_j 2 m_j r floats. Downlink: the type's averaged local adapter and alpha,
and the share entries the client reads (at most the whole bank, sum_i L_i 2 r^2).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

FLOAT_BYTES = 4


def uplink_floats(blocks: int, width: int, rank: int, types: int, *, share: bool = True, head: int = 0) -> int:
    """L (2 m r + M + 2 r^2) + |head| with DeMA; L 2 m r + |head| for the plain adapter (Homo-Training)."""
    if not share:
        return blocks * 2 * width * rank + head
    return blocks * (2 * width * rank + types + 2 * rank * rank) + head


def paper_floats(blocks: int, width: int, rank: int, head: int = 0) -> int:
    """The paper's Table 5 count: L (2 m r + 2 r^2) + |head| (alpha not counted)."""
    return blocks * (2 * width * rank + 2 * rank * rank) + head


def uplink_bytes(blocks: int, width: int, rank: int, types: int, samples: int, *, share: bool = True) -> int:
    """Bytes of one upload as ``Message.num_bytes`` counts them: float32 tensors and the metadata ``{"n": n_k}``."""
    meta = len(json.dumps({"n": samples}, sort_keys=True).encode())
    return FLOAT_BYTES * uplink_floats(blocks, width, rank, types, share=share) + meta


def downlink_floats(
    blocks: int, width: int, rank: int, types: int, read_entries: Mapping[int, list[int]] | None, *, share: bool = True
) -> int:
    """The type's local adapter (and alpha) plus 2 r^2 per share entry the client reads (``read_entries``: type ->
    distinct entries of its slot)."""
    if not share:
        return blocks * 2 * width * rank
    entries = sum(len(v) for v in (read_entries or {}).values())
    return blocks * (2 * width * rank + types) + entries * 2 * rank * rank


def reduction(sent: int, full_model: int) -> float:
    """1 - sent / full: the saving against full-model FedAvg (the paper: 99.5% on LLaMA-8B, 34.22 M of 7504.93 M)."""
    return 1.0 - sent / full_model
