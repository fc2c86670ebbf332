"""From a model name to a frozen base: the one call every method makes (:func:`load_base`).

Kept apart from :mod:`.zoo` (which only names and builds architectures) because a tiny name
resolves to a checkpoint first: the shipped, hash-pinned one (:mod:`.shipped`) or, for
development, one pretrained locally (:mod:`.pretrain`), and pretraining itself builds zoo models:
with ``load_base`` here, the zoo never needs to import the pretraining code that imports it.
"""

from __future__ import annotations

from typing import Any

from drake_bench.errors import DrakeBenchError
from drake_bench.models.shipped import ENV_SOURCE, verify_shipped, zoo_source
from drake_bench.models.zoo import load_pretrained, model_info


def load_base(name: str, device: str = "cpu", dtype: Any = None, *, seed: int = 0, source: str | None = None):
    """Frozen base model and its processor (multimodal) or tokenizer (text) for a zoo name.

    Tiny names load the checkpoint shipped with drake_bench (:mod:`drake_bench.models.shipped`),
    after checking every file against its recorded sha256; nothing is ever pretrained on this
    path. ``source="pretrain"`` (or ``DRAKE_BENCH_ZOO=pretrain``) instead pretrains the tiny model
    once and caches it under :func:`~drake_bench.models.cache.models_home` (development, tests,
    and the build script of the shipped weights). Other names resolve to a Hub id (the shipped
    models too: ``drake-bench/<zoo name>``) or a local path and load directly with
    ``from_pretrained``, from the Hugging Face cache when ``HF_HUB_OFFLINE=1``.

    ``dtype=None`` loads float32, whatever the checkpoint stores (the shipped zoo stores
    bfloat16; transformers 5 would otherwise keep the stored dtype); ``dtype="auto"`` keeps it.
    ``seed`` selects a locally pretrained variant (``source="pretrain"`` only: the zoo ships seed 0).
    """
    import torch

    dtype = torch.float32 if dtype is None else dtype
    entry = model_info(name)
    if entry.tiny:
        if zoo_source(source) == "pretrain":
            from drake_bench.models.pretrain import ensure_pretrained

            path = ensure_pretrained(name, seed=seed)
        elif seed != 0:
            raise DrakeBenchError(
                f"load_base({name!r}, seed={seed}): the shipped zoo holds seed 0 only; pretrain "
                f"seed {seed} locally with source='pretrain' (or {ENV_SOURCE}=pretrain)"
            )
        else:
            path = verify_shipped(name)
        return load_pretrained(str(path), device=device, dtype=dtype)
    try:
        return load_pretrained(entry.source, device=device, dtype=dtype)
    except OSError as exc:  # transformers' "couldn't connect / not in the cache" (a 60-line traceback before)
        raise DrakeBenchError(_not_available(name, entry.source, exc)) from None


def _not_available(name: str, source: str, exc: OSError) -> str:
    """One paragraph for a real checkpoint that cannot be loaded: where it was looked for and how to get it."""
    from huggingface_hub import constants

    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if source.startswith((".", "/", "~")):
        return f"load_base({name!r}): the folder {source!r} holds no loadable checkpoint: {first}"
    offline = " (offline: HF_HUB_OFFLINE is set)" if constants.HF_HUB_OFFLINE else ""
    return (
        f"load_base({name!r}): checkpoint {source!r} is not in the Hugging Face cache {constants.HF_HUB_CACHE}"
        f"{offline} and could not be downloaded: {first} Download it on a machine with network "
        f"(`hf download {source}`) and copy the cache over, or pass a local folder's path"
    )
