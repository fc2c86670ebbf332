"""From a model name to a frozen base: the one call every method makes (:func:`load_base`).

Kept apart from :mod:`.zoo` (which only names and builds architectures) because a tiny name
must first be pretrained (:mod:`.pretrain`), and pretraining itself builds zoo models: with
``load_base`` here, the zoo never needs to import the pretraining code that imports it.
"""

from __future__ import annotations

from typing import Any

from .zoo import load_pretrained, model_info


def load_base(name: str, device: str = "cpu", dtype: Any = None, *, seed: int = 0):
    """Frozen base model and its processor (multimodal) or tokenizer (text) for a zoo name.

    Tiny names are built and pretrained once (see :mod:`drake_bench.models.pretrain`),
    cached with ``save_pretrained`` under :func:`~drake_bench.models.cache.models_home`, then
    loaded with ``from_pretrained`` like any real checkpoint. Other names resolve to a Hub id or
    local path and load directly.
    """
    entry = model_info(name)
    if entry.tiny:
        from .pretrain import ensure_pretrained

        path = ensure_pretrained(name, seed=seed)
        return load_pretrained(str(path), device=device, dtype=dtype)
    return load_pretrained(entry.source, device=device, dtype=dtype)
