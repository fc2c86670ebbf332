"""Stage 1's bookkeeping: the per-key history values h_l and h_p, the replacement rule, and the copy it makes.

The history value of key o over a round is a running quantity over the round's N_b batches, accumulated while the
copy trains (the paper says only "the average local training loss" of the round, §3.2; this is the reference
code's estimator):

    L_o = (1 / N_b) * sum_b lambda_{o,b} * loss_o(batch b),     lambda_{o,b} = |items of o in b| / |b|

A batch without key o adds 0 but counts in N_b, so on a client with several keys L_o is roughly (share of o) x
(mean loss of o): what the paper's margins were tuned against. h_l (the FL copy's) and h_p (the personal copy's)
use the same estimator on the same batches.

Both start at +inf (the reference code's value; the paper gives none): a client's first round with a key always
replaces that key. A State's metadata is JSON without infinities, so +inf is stored as an absent entry
(:func:`history_value` reads it back).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import torch

from .keys import paths


class RunningLoss:
    """Accumulates sum_b lambda_{o,b} loss_o(b) per key and the number of batches N_b of one training pass."""

    def __init__(self) -> None:
        self.sums: dict[str, float] = {}
        self.batches = 0

    def add_batch(self, contributions: Mapping[str, float]) -> None:
        """One batch's lambda_{o,b} * loss_o(b) for each key o in it."""
        self.batches += 1
        for key, value in contributions.items():
            self.sums[key] = self.sums.get(key, 0.0) + float(value)

    def values(self) -> dict[str, float]:
        """L_o for every key seen in the pass."""
        return {k: v / self.batches for k, v in self.sums.items()} if self.batches else {}


def history_value(histories: Mapping[str, float], key: str) -> float:
    """A stored history value; +inf when the key has none yet."""
    value = histories.get(key)
    return math.inf if value is None else float(value)


def should_replace(h_l: float, h_p: float, margin: float) -> bool:
    """The paper's eq. 3: replace when the FL copy's history beats the personal copy's by more than the margin."""
    return h_l + margin < h_p


def decide(h_l: Mapping[str, float], h_p: Mapping[str, float], margins: Mapping[str, float]) -> list[str]:
    """The keys of this round (those in ``h_l``) whose components the personal copy takes from the FL copy."""
    return [k for k in h_l if should_replace(h_l[k], history_value(h_p, k), margins[k])]


def replace(
    personal: Mapping[str, Mapping[str, torch.Tensor]],
    fl: Mapping[str, Mapping[str, torch.Tensor]],
    keys: Iterable[str],
) -> dict[str, dict[str, torch.Tensor]]:
    """The paper's eq. 4, per component: the personal copy with every component on the path of a replaced key
    copied from the FL copy (whole components, as the reference code's ``load_state_dict`` per module; shared
    components included; the paper says only "the subset of X[i] responsible for task o"), every other component
    untouched. Components are ``{name: {tensor: value}}``. A component the FL copy does not hold (never trained nor
    received) cannot be on a trained key's path."""
    out = {comp: dict(tensors) for comp, tensors in personal.items()}
    for comp in paths(keys):
        if comp not in fl:
            raise KeyError(f"the FL copy holds no component {comp!r} to replace with")
        out[comp] = {k: v.detach().clone() for k, v in fl[comp].items()}
    return out
