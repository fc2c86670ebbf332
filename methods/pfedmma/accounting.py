"""What pFedMMA sends per client and round, by formula, beside what the evaluator measures.

The paper counts weights only (App. E: m r^2 per round each way, 3,072 for ViT-B/16 with m = 3, r = 32); its code
also sends the shared projections' biases, so each depth sends an r x r weight and an r-vector bias: m (r^2 + r)
floats (3,168 in the paper's setting). drake_bench sends what the code sends, float32 (4 bytes a float), plus n_i,
the client's sample count for the weighted mean, as the message's JSON metadata. The evaluator measures every
message's bytes itself (``Message.num_bytes``); tests/test_pfedmma.py checks the measured uplink against
:func:`uplink_bytes`.
"""

from __future__ import annotations

import json

FLOAT_BYTES = 4


def communicated_floats(depths: int, rank: int) -> int:
    """m (r^2 + r): the shared projections' weights and biases, per client and round, each way."""
    return depths * (rank * rank + rank)


def paper_floats(depths: int, rank: int) -> int:
    """m r^2: the paper's count (weights only)."""
    return depths * rank * rank


def uplink_bytes(depths: int, rank: int, samples: int) -> int:
    """Bytes of one pFedMMA upload as ``Message.num_bytes`` counts them: the float32 shared projections and the
    metadata ``{"n": samples}``."""
    return FLOAT_BYTES * communicated_floats(depths, rank) + len(json.dumps({"n": samples}, sort_keys=True).encode())


def downlink_bytes(depths: int, rank: int) -> int:
    """Bytes of one pFedMMA message to a client: the float32 global shared projections and empty metadata."""
    return FLOAT_BYTES * communicated_floats(depths, rank) + len(json.dumps({}).encode())
