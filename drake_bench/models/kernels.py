"""Faster exact paths for two of the language model's ops, through transformers' registries.

* **Segment attention** (``SEGMENT_ATTENTION``, registered in transformers' ``AttentionInterface`` and
  ``AttentionMaskInterface``): a packed training step (:func:`~drake_bench.models.engine.loss_on`) runs a batch's
  items as one sequence, and SDPA then attends over the whole sequence under a block-diagonal mask, L^2 work for
  items whose own attention needs only the sum of their squared lengths (4 items of about 130 tokens: a quarter). In a
  forward marked packed (:func:`packed_forward`) this attention runs causal SDPA on each item's segment (found where
  ``position_ids`` restart at 0) and the model builds no mask; any other forward (generation, choice scoring, padded
  training, the vision tower) is plain SDPA with the usual mask. The output equals the masked attention's within
  float tolerance (tests/test_kernels.py). It is the CPU stand-in for the varlen kernels of flash-attention, which
  transformers uses for packed sequences on a GPU.
* **Native RMSNorm** (:func:`use_native_rms_norm`): the Llama/Qwen2 RMSNorm modules of transformers run as five
  elementwise ops (cast, square, mean, rsqrt, two products) forward and more backward; ``torch.nn.functional.rms_norm``
  computes the same function in one op. The modules' ``forward`` is replaced on the instances (transformers' own hook
  for this, ``use_kernel_forward_from_hub``, fetches kernels from the Hub, which a run here never does).

Whether each pays is measured by ``scripts/bench_step_paths.py`` (docs/performance.md); the engine uses what the
measurement kept (:data:`~drake_bench.models.engine` docstring), and each has a switch.
"""

from __future__ import annotations

import contextlib
import contextvars
import types
from collections.abc import Iterator
from typing import Any

import torch

SEGMENT_ATTENTION = "drake_segments"
"""The attention implementation name this module registers with transformers."""

_PACKED: contextvars.ContextVar[bool] = contextvars.ContextVar("drake_bench_packed_forward", default=False)


@contextlib.contextmanager
def packed_forward() -> Iterator[None]:
    """Marks the forwards inside the block as packed (items restart their ``position_ids`` at 0, no padding)."""
    token = _PACKED.set(True)
    try:
        yield
    finally:
        _PACKED.reset(token)


def _segments(positions: torch.Tensor) -> list[tuple[int, int]]:
    starts = torch.nonzero(positions == 0)[:, 0].tolist()
    if not starts or starts[0] != 0:
        starts = [0] + starts
    return list(zip(starts, starts[1:] + [int(positions.shape[0])]))


def segment_attention(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Causal SDPA per packed segment in a :func:`packed_forward`; transformers' SDPA attention otherwise."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    positions = kwargs.get("position_ids")
    if (
        not _PACKED.get()
        or positions is None
        or query.shape[2] != key.shape[2]
        or positions.shape[-1] != query.shape[2]
    ):
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    positions = positions.expand(query.shape[0], -1)
    rows = []
    for r in range(query.shape[0]):
        parts = [
            sdpa_attention_forward(
                module,
                query[r : r + 1, :, s:e],
                key[r : r + 1, :, s:e],
                value[r : r + 1, :, s:e],
                None,
                dropout=dropout,
                scaling=scaling,
                is_causal=True,
            )[0]
            for s, e in _segments(positions[r])
        ]
        rows.append(torch.cat(parts, dim=1))
    return torch.cat(rows, dim=0), None


def _segment_mask(*args: Any, **kwargs: Any) -> torch.Tensor | None:
    """No mask in a packed forward (the attention reads the segments from the positions); SDPA's otherwise."""
    from transformers.masking_utils import sdpa_mask

    return None if _PACKED.get() else sdpa_mask(*args, **kwargs)


def register() -> None:
    """Register :data:`SEGMENT_ATTENTION` with transformers (idempotent)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(SEGMENT_ATTENTION, segment_attention)
    AttentionMaskInterface.register(SEGMENT_ATTENTION, _segment_mask)


def transformers_model(model: Any) -> Any:
    """The transformers model under a peft wrapper (whose ``forward`` takes ``**kwargs`` and passes them on)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def use_segment_attention(model: Any, on: bool = True) -> None:
    """Switch the language model of ``model`` (a transformers or peft model) to segment attention, or back to SDPA."""
    register()
    base = transformers_model(model)
    name = SEGMENT_ATTENTION if on else "sdpa"
    if getattr(base.config, "text_config", None) is not None:
        base.set_attn_implementation({"text_config": name})
    else:
        base.set_attn_implementation(name)


def _native_rms_norm_forward(self: Any, hidden_states: torch.Tensor) -> torch.Tensor:
    out = torch.nn.functional.rms_norm(
        hidden_states.to(torch.float32), (hidden_states.shape[-1],), eps=self.variance_epsilon
    )
    return self.weight * out.to(hidden_states.dtype)


RMS_NORM_CLASSES = ("LlamaRMSNorm", "Qwen2RMSNorm", "Qwen3RMSNorm", "MistralRMSNorm")
"""transformers' RMSNorm modules whose forward is ``weight * (x / sqrt(mean(x^2) + eps))`` computed in float32."""


def use_native_rms_norm(model: Any, on: bool = True) -> int:
    """Replace (or restore) the ``forward`` of every RMSNorm module of :data:`RMS_NORM_CLASSES` in ``model``;
    returns how many modules were switched."""
    n = 0
    for module in model.modules():
        if type(module).__name__ in RMS_NORM_CLASSES:
            if on:
                module.forward = types.MethodType(_native_rms_norm_forward, module)
            else:
                module.__dict__.pop("forward", None)
            n += 1
    return n
