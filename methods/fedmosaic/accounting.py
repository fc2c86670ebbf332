"""Communication and compute accounting for FedMosaic (App. A.8 compute, App. A.9 communication).

Uplink per client and round ([R], the count behind the paper's App. A.9 percentages):
    up = sum_conv r (d_in + d_out) + sum_PQ (r^2 + r) + ceil(N_s * d_g),
down = the same without the gradient term; times bytes per element (bf16 = 2, [R]).
The W_s gradient overhead per client iteration ([R], App. A.8) is
    (forward of W_s + backward down to its last layer) / m, relative to the client's own
    forward + backward, counted analytically as 2 * params * tokens FLOPs per forward.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import torch

from .blocks import pq_layer_indices

#: (d_in, d_out) per linear module name of one decoder layer.
LayerDims = Mapping[str, tuple[int, int]]


def decoder_linear_dims(
    hidden: int, intermediate: int, n_heads: int, n_kv_heads: int, head_dim: int | None = None
) -> dict[str, tuple[int, int]]:
    """(d_in, d_out) of q/k/v/o/gate/up/down for a Llama/Qwen2 decoder layer."""
    hd = head_dim or hidden // n_heads
    return {
        "self_attn.q_proj": (hidden, n_heads * hd),
        "self_attn.k_proj": (hidden, n_kv_heads * hd),
        "self_attn.v_proj": (hidden, n_kv_heads * hd),
        "self_attn.o_proj": (n_heads * hd, hidden),
        "mlp.gate_proj": (hidden, intermediate),
        "mlp.up_proj": (hidden, intermediate),
        "mlp.down_proj": (intermediate, hidden),
    }


def dims_from_hf_config(config: Any) -> tuple[int, dict[str, tuple[int, int]]]:
    """(num_layers, per-layer dims) from a transformers Llama/Qwen2 config."""
    dims = decoder_linear_dims(
        config.hidden_size,
        config.intermediate_size,
        config.num_attention_heads,
        config.num_key_value_heads,
        getattr(config, "head_dim", None),
    )
    return int(config.num_hidden_layers), dims


@dataclass(frozen=True)
class Payload:
    """Elements per round for one client, split by kind."""

    conv: int
    pq: int
    grad: int

    @property
    def up(self) -> int:
        return self.conv + self.pq + self.grad

    @property
    def down(self) -> int:
        return self.conv + self.pq


def full_lora_elements(num_layers: int, dims: LayerDims, rank: int) -> int:
    """Conventional LoRA on every module of every layer (FedAvg/FedIT payload)."""
    return num_layers * sum(rank * (di + do) for di, do in dims.values())


def fedmosaic_payload(
    num_layers: int,
    dims: LayerDims,
    rank: int,
    n_blocks: int,
    grad_numel: int,
    n_s: float,
    pq_layers: Sequence[int] | None = None,
    send_conv: bool = True,
) -> Payload:
    """The uplink/downlink element count above; ``send_conv=False`` for conv_agg='none' (only P/Q and g uploaded)."""
    pq_idx = set(pq_layers if pq_layers is not None else pq_layer_indices(num_layers, n_blocks))
    per_conv_layer = sum(rank * (di + do) for di, do in dims.values())
    conv = (num_layers - len(pq_idx)) * per_conv_layer if send_conv else 0
    pq = len(pq_idx) * len(dims) * (rank * rank + rank)
    return Payload(conv=conv, pq=pq, grad=math.ceil(n_s * grad_numel))


def payload_bytes(elements: int, bytes_per_element: int = 2) -> int:
    return elements * bytes_per_element


def measured_elements(message: Mapping[str, torch.Tensor]) -> Payload:
    """Count what a client actually uploads: a dict of adapter tensors plus optional key 'rela.grad'."""
    conv = sum(t.numel() for k, t in message.items() if k.startswith("conv."))
    pq = sum(t.numel() for k, t in message.items() if k.startswith("pq."))
    grad = sum(t.numel() for k, t in message.items() if k.startswith("rela."))
    return Payload(conv=conv, pq=pq, grad=grad)


def forward_flops(params: int, tokens: int) -> int:
    """2 * params * tokens."""
    return 2 * params * tokens


def ws_gradient_flops(ws_params: int, tokens: int, tail_params: int, last_numel: int) -> int:
    """One W_s gradient: full forward + backward through the tail after the last layer (activation
    grads, 2 * tail_params * tokens) + the weight gradient of the last layer (2 * last_numel * tokens)."""
    return forward_flops(ws_params, tokens) + 2 * tail_params * tokens + 2 * last_numel * tokens


def client_iteration_flops(base_params: int, adapter_params: int, trainable_params: int, tokens: int) -> int:
    """Client step: forward of base + adapters, backward of activations (~= forward) and of the
    trainable adapter weights only."""
    fwd = forward_flops(base_params + adapter_params, tokens)
    return fwd + fwd + 2 * trainable_params * tokens


def ws_overhead_ratio(ws_flops: int, client_flops: int, m: int) -> float:
    """Per-iteration relative overhead of RELA's gradient: (ws_flops / m) / client_flops."""
    return ws_flops / m / client_flops


def alignment_overhead(
    n_types: int, public_size: int, batch_size: int, n_clients: int, rounds: int, local_steps: int
) -> float:
    """One-off alignment iterations amortised over all client iterations (App. A.8: 6.25% at the paper's scale)."""
    return (n_types - 1) * math.ceil(public_size / batch_size) / (n_clients * rounds * local_steps)


def upload_tensors(
    local: Mapping[str, torch.Tensor],
    ghat_masked: torch.Tensor | None,
    dtype: torch.dtype = torch.bfloat16,
    send_conv: bool = True,
) -> dict[str, torch.Tensor]:
    """What a client uploads: P/Q (+ conventional A/B unless conv_agg='none') and the masked
    gradient under ``rela.grad``, cast to the wire dtype (bf16 by default, [R])."""
    out = {
        k: v.detach().to(dtype)
        for k, v in local.items()
        if k.startswith("pq.") or (send_conv and k.startswith("conv."))
    }
    if ghat_masked is not None:
        out["rela.grad"] = ghat_masked.detach().reshape(-1).to(dtype)
    return out
