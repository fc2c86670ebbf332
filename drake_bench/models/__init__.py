"""Model zoo and training core: tiny real ``transformers`` models, peft adapters, a shared-base pool.

Public entry points (see each module's docstring for the choices made):

* :func:`load_base` — frozen base + processor/tokenizer for a zoo name, short real name,
  Hub id or local path (:mod:`.loading`; names in :mod:`.zoo`, the tiny models' shipped,
  hash-pinned checkpoints in :mod:`.shipped`, local pretraining in :mod:`.pretrain`, cache
  paths in :mod:`.cache`).
* :class:`ModelPool` — one frozen base per architecture, per-client adapters swapped in
  and out (:mod:`.pool`); adapter configs in :mod:`.adapters`.
* :func:`train_step`, :func:`generate`, :func:`choose`, :func:`predict` — the training
  and inference core (:mod:`.engine`); prompts in :mod:`.prompting`.
"""

from __future__ import annotations

from drake_bench.models.cache import models_home
from drake_bench.models.engine import choose, generate, loss_on, predict, train_step
from drake_bench.models.loading import load_base
from drake_bench.models.prompting import build_prompt
from drake_bench.models.zoo import (
    REAL_MODELS,
    ZooEntry,
    architecture_key,
    build_tiny,
    load_pretrained,
    model_info,
    tiny_names,
)


def __getattr__(name: str):  # lazy: pool/adapters import peft
    if name == "ModelPool":
        from drake_bench.models.pool import ModelPool

        return ModelPool
    if name in ("lora_config", "with_custom_layers", "LLM_LINEAR_TARGETS"):
        from drake_bench.models import adapters

        return getattr(adapters, name)
    raise AttributeError(name)


__all__ = [
    "REAL_MODELS",
    "ZooEntry",
    "architecture_key",
    "build_tiny",
    "load_base",
    "load_pretrained",
    "model_info",
    "models_home",
    "tiny_names",
    "build_prompt",
    "train_step",
    "generate",
    "choose",
    "predict",
    "loss_on",
    "ModelPool",
    "lora_config",
    "with_custom_layers",
    "LLM_LINEAR_TARGETS",
]
