"""Several clients of one architecture trained in one forward and backward pass (``--client-batching``).

Clients of one architecture share a frozen base and differ only in their LoRA adapters, so one local step of C
clients can run as one pass: row c of the batch is client c's batch, its items packed into one sequence exactly as
:func:`~drake_bench.models.engine.loss_on` packs them (each item its own positions, so rows and items never attend
to each other), and every LoRA layer routes row c through client c's adapter. Each client keeps its own loss
normalisation (the mean over its own answer tokens), its own gradient clipping and its own optimiser, and no
trainable parameter is shared (the base is frozen), so the gradient of the summed loss with respect to client c's
adapter is the gradient of client c's loss alone: a grouped step is C sequential steps within float tolerance
(tests/test_grouped.py checks losses, gradients and the weights after several steps).

The routing is peft's own mixed-adapter forward (the ``adapter_names`` argument of its LoRA layers: rows gathered
per adapter, ``B(A(x)) * scaling`` added back). peft accepts that argument only at inference, a check at its model
level; the layers' mixed forward is plain autograd (an index, two matrix products, an indexed add), so
:func:`routed` passes the argument to the layers with forward pre-hooks, as peft's own generation path does, in
training mode as well. Plain LoRA layers only: a custom layer (PQ-LoRA, DeMA) has its own forward.

Padding: rows are as long as the longest client's packed batch; the tail of a shorter row is one more "item" of pad
tokens (positions from 0, labels ignored), attended only by itself.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from drake_bench.errors import DrakeBenchError
from drake_bench.models.engine import IGNORE_INDEX, _encode_packed, _float_dtype, _pad_id, autocast, packs, tokenizer_of
from drake_bench.models.kernels import packed_forward


@contextlib.contextmanager
def routed(model: Any, row_adapters: Sequence[str]) -> Iterator[None]:
    """Within the block, every LoRA layer of ``model`` runs row i of its input through adapter ``row_adapters[i]``."""
    from peft.tuners.lora import Linear as LoraLinear
    from peft.tuners.lora import LoraLayer

    names = list(row_adapters)

    def inject(_module: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        kwargs["adapter_names"] = names
        return args, kwargs

    handles = []
    try:
        for name, module in model.named_modules():
            if isinstance(module, LoraLayer):
                if type(module) is not LoraLinear:
                    raise DrakeBenchError(
                        f"client batching routes peft's plain LoRA Linear layers; {name} is a "
                        f"{type(module).__name__}, whose forward it cannot route"
                    )
                handles.append(module.register_forward_pre_hook(inject, with_kwargs=True))
        yield
    finally:
        for h in handles:
            h.remove()


def encode_rows(model: Any, processor: Any, batches: Sequence[Sequence[Any]]) -> dict[str, torch.Tensor]:
    """One row per batch: its items packed (:func:`~drake_bench.models.engine.encode_packed`), right-padded with an
    item of pad tokens whose positions restart at 0; the rows' pixels in row order (the model places image features
    row-major, the order a packed row already relies on)."""
    if not batches or any(not b for b in batches):
        raise DrakeBenchError("client batching got an empty batch for a client (leave the client out of the step)")
    rows = [_encode_packed(model, processor, b)[0] for b in batches]
    width = max(int(r["input_ids"].shape[1]) for r in rows)
    pad = _pad_id(tokenizer_of(processor))
    dev = model.device
    ids, positions, labels, pixels = [], [], [], []
    for r in rows:
        extra = width - int(r["input_ids"].shape[1])
        ids.append(torch.cat([r["input_ids"][0], torch.full((extra,), pad, dtype=torch.long, device=dev)]))
        positions.append(torch.cat([r["position_ids"][0], torch.arange(extra, device=dev)]))
        labels.append(torch.cat([r["labels"][0], torch.full((extra,), IGNORE_INDEX, dtype=torch.long, device=dev)]))
        if "pixel_values" in r:
            pixels.append(r["pixel_values"])
    out = {"input_ids": torch.stack(ids), "position_ids": torch.stack(positions), "labels": torch.stack(labels)}
    if pixels:
        out["pixel_values"] = torch.cat(pixels).to(device=dev, dtype=_float_dtype(model))
    return out


def group_losses(
    model: Any, processor: Any, batches: Sequence[Sequence[Any]], adapters: Sequence[str]
) -> list[torch.Tensor]:
    """Each batch's mean token loss over its answer tokens (+ eos), batch i through adapter ``adapters[i]``, in one
    forward pass (with grad): what :func:`~drake_bench.models.engine.loss_on` gives each batch on its own adapter."""
    if len(batches) != len(adapters):
        raise DrakeBenchError(f"client batching: {len(batches)} batches for {len(adapters)} adapters")
    if not packs(model):
        raise DrakeBenchError(
            "client batching packs each client's batch into one row, which needs an architecture "
            "whose attention reads packed positions (drake_bench.models.engine.PACKABLE_MODEL_TYPES)"
        )
    inputs = encode_rows(model, processor, batches)
    labels = inputs.pop("labels")[:, 1:]
    scored = (labels != IGNORE_INDEX).any(0).nonzero()[:, 0]  # positions predicting an answer token in some row
    with routed(model, adapters), autocast(model), packed_forward():
        logits = model(**inputs, use_cache=False, logits_to_keep=scored).logits  # no cache: packing reads positions
    targets = labels[:, scored]
    nll = torch.nn.functional.cross_entropy(
        logits.float().transpose(1, 2), targets, ignore_index=IGNORE_INDEX, reduction="none"
    )
    counts = (targets != IGNORE_INDEX).sum(1).clamp(min=1)
    return list(nll.sum(1) / counts)


def train_group_step(
    model: Any,
    processor: Any,
    batches: Sequence[Sequence[Any]],
    adapters: Sequence[str],
    optimizers: Sequence[torch.optim.Optimizer],
    max_grad_norm: float | None = None,
) -> list[float]:
    """One optimiser step for each of several clients, in one pass: batch i trains adapter ``adapters[i]`` with
    ``optimizers[i]`` (over that adapter's parameters only); returns each batch's loss. Per client as
    :func:`~drake_bench.models.engine.train_step` (clipping included, on the client's own parameters)."""
    model.train()
    losses = group_losses(model, processor, batches, adapters)
    torch.stack(losses).sum().backward()  # no parameter is shared: each adapter's gradient is its own loss's
    for opt in optimizers:
        if max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_([p for g in opt.param_groups for p in g["params"]], max_grad_norm)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return [float(x.detach()) for x in losses]
