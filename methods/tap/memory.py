"""The client's own items for Stage 2, kept in its State.

Stage 2 trains P steps "on local data" after the last round, but the protocol's ``post_federation`` receives the
clients' states and the server's, no batches. So every client keeps, in its own State, its most recent distinct
training items, up to ``memory_items`` (a first-in, first-out buffer: an item seen again moves to the newest end).
It is data the client already holds, kept on the client; it never travels (it is not in any message).

Why the most recent: drake_bench's stream draws every batch uniformly from the client's episodic memory of all the
items it has been given (docs/concepts.md, "The stream"), old tasks included, so the items of the last rounds are
a sample of everything the client holds, which is the paper's D_i.

Layout: ``metadata["memory"]`` is the list of items, oldest first (uid, question, choices, answer, answer type,
number of images); image j of the item with uid u is the uint8 tensor ``mem/<u>/<j>`` (height x width x RGB).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from drake_bench.benchmarks.sample import MethodSample

PREFIX = "mem/"


def _image_tensor(image: Any) -> torch.Tensor:
    return torch.from_numpy(np.array(image.convert("RGB"), dtype=np.uint8, copy=True))


def _image(tensor: torch.Tensor) -> Any:
    from PIL import Image

    return Image.fromarray(tensor.numpy().astype(np.uint8))


def remember(
    entries: Sequence[Mapping[str, Any]],
    tensors: Mapping[str, torch.Tensor],
    batches: Iterable[Sequence[MethodSample]],
    capacity: int,
) -> tuple[list[dict[str, Any]], dict[str, torch.Tensor]]:
    """The buffer after this round's batches: the ``capacity`` most recently seen distinct items."""
    order: dict[str, dict[str, Any]] = {e["uid"]: dict(e) for e in entries}
    images: dict[str, list[torch.Tensor]] = {
        uid: [tensors[f"{PREFIX}{uid}/{j}"] for j in range(int(e["images"]))] for uid, e in order.items()
    }
    if capacity <= 0:
        return [], {}
    for batch in batches:
        for s in batch:
            if s.uid in order:
                order[s.uid] = order.pop(s.uid)  # seen again: now the newest
                continue
            order[s.uid] = {
                "uid": s.uid,
                "question": s.question,
                "choices": list(s.choices),
                "answer": s.answer,
                "answer_type": s.answer_type.value,
                "images": len(s.images),
            }
            images[s.uid] = [_image_tensor(im) for im in s.images]
            while len(order) > capacity:
                old = next(iter(order))
                del order[old]
                images.pop(old, None)
    kept = list(order.values())
    return kept, {f"{PREFIX}{e['uid']}/{j}": t for e in kept for j, t in enumerate(images[e["uid"]])}


def recall(entries: Sequence[Mapping[str, Any]], tensors: Mapping[str, torch.Tensor]) -> list[MethodSample]:
    """The buffer's items as training items, oldest first."""
    return [
        MethodSample(
            uid=e["uid"],
            images=[_image(tensors[f"{PREFIX}{e['uid']}/{j}"]) for j in range(int(e["images"]))],
            question=e["question"],
            choices=list(e["choices"]),
            answer=e["answer"],
            answer_type=e["answer_type"],
        )
        for e in entries
    ]


def draw_batches(
    items: Sequence[MethodSample], steps: int, batch_size: int, rng: np.random.Generator
) -> list[list[MethodSample]]:
    """P minibatches, each drawn uniformly without replacement from the buffer (the reference code's random draws
    from the pooled local data)."""
    if not items:
        return []
    size = min(batch_size, len(items))
    return [[items[i] for i in rng.choice(len(items), size=size, replace=False)] for _ in range(steps)]
