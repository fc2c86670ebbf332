"""The model zoo: tiny real ``transformers`` architectures for CPU, real checkpoints by name.

Model heterogeneity is half of what the reference methods address, so the zoo
mirrors the papers' allocations in miniature:

* two language families, Llama (``LlamaConfig``, cf. Llama-3.2-1B/3B, 3.1-8B) and
  Qwen2 (``Qwen2Config``, cf. Qwen2.5-0.5B/1.5B/3B);
* three sizes per family that differ in both width and depth (s/m/l);
* multimodal clients are ``LlavaForConditionalGeneration`` (a small CLIP vision tower
  + 2-layer GELU projector + the language model), text clients the language model alone.

Names follow one scheme: ``tiny-llava-<family>-<size>`` (multimodal) and
``tiny-<family>-<size>`` (text). Real names (``llava-1.5-7b``, ``llama-3.2-1b``,
``qwen2.5-0.5b`` ...) map to Hub ids; any Hub id or local directory is accepted as is
and loaded with ``from_pretrained`` (the weights must already be local: no network).

Sizes: Llama hidden 64/96/128 with 4/6/8 layers; Qwen2 hidden 48/80/112 with
4/6/8 layers (different widths across families, so cross-family methods face truly
mismatched shapes, as Llama-3.2-1B vs Qwen2.5-0.5B do). Head dim 16 everywhere; GQA
with 2 (Llama) / 1 (Qwen2) KV heads; Qwen2 keeps its q/k/v biases and tied
embeddings. One shared vision design (a Swin tower at the images' native 64 px: 4 px patches,
three stages, 4 x 4 = 16 output tokens of width 128, read at its last layer with every token kept);
like LLaVA-1.5's CLIP tower it is pretrained once and shared by every tiny LLaVA (:mod:`.vision` says
why Swin rather than CLIP).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from drake_bench.errors import UnknownNameError
from drake_bench.models.cache import models_home  # noqa: F401 (re-exported: callers know it as zoo.models_home)
from drake_bench.models.tokenizer import DEFAULT_VOCAB_SIZE, IMAGE_SIZE

FAMILIES = ("llama", "qwen2")
SIZES = ("s", "m", "l")

# family -> size -> (hidden, layers, heads, kv_heads, intermediate)
_TINY_SHAPES: dict[str, dict[str, tuple[int, int, int, int, int]]] = {
    "llama": {"s": (64, 4, 4, 2, 192), "m": (96, 6, 6, 2, 288), "l": (128, 8, 8, 2, 384)},
    "qwen2": {"s": (48, 4, 3, 1, 144), "m": (80, 6, 5, 1, 240), "l": (112, 8, 7, 1, 336)},
}
VISION_TOWER = dict(
    image_size=IMAGE_SIZE,
    patch_size=4,
    num_channels=3,
    embed_dim=32,
    depths=[2, 2, 2],
    num_heads=[2, 4, 8],
    window_size=4,
    mlp_ratio=2.0,
    drop_path_rate=0.0,
)
"""``SwinConfig`` of the shared tower: 64 px / 4 px patches -> 16 x 16, merged twice -> 4 x 4 tokens of
width 128. No drop-path, so training draws no random numbers after initialisation (resumable, reproducible)."""
VISION_FEATURE_LAYER = -1  # the last stage: its tokens are what the tower was trained to describe
MAX_POSITIONS = 1024

# Real checkpoints by short name (what the papers used, or their public stand-ins).
REAL_MODELS: dict[str, str] = {
    "llava-1.5-7b": "llava-hf/llava-1.5-7b-hf",
    "llava-1.5-13b": "llava-hf/llava-1.5-13b-hf",
    "llama-3.2-1b": "meta-llama/Llama-3.2-1B",
    "llama-3.2-3b": "meta-llama/Llama-3.2-3B",
    "llama-3.1-8b": "meta-llama/Llama-3.1-8B",
    "qwen2.5-0.5b": "Qwen/Qwen2.5-0.5B",
    "qwen2.5-1.5b": "Qwen/Qwen2.5-1.5B",
    "qwen2.5-3b": "Qwen/Qwen2.5-3B",
}


@dataclass(frozen=True)
class ZooEntry:
    """What the zoo knows about a name before loading anything."""

    name: str
    architecture: str  # key shared by every client that can share one frozen base
    family: str  # "llama", "qwen2", or "unknown" for arbitrary ids
    size: str  # "s"/"m"/"l" for tiny models, the parameter count tag ("1b") for real ones
    multimodal: bool | None  # None: only known after reading the checkpoint's config
    tiny: bool
    source: str  # Hub id or local path for real models; the zoo name for tiny ones
    hidden_size: int | None = None
    num_layers: int | None = None


def _tiny_entry(name: str) -> ZooEntry | None:
    parts = name.split("-")
    if len(parts) == 3 and parts[0] == "tiny":
        mm, fam, size = False, parts[1], parts[2]
    elif len(parts) == 4 and parts[:2] == ["tiny", "llava"]:
        mm, fam, size = True, parts[2], parts[3]
    else:
        return None
    if fam not in _TINY_SHAPES or size not in SIZES:
        return None
    hidden, layers = _TINY_SHAPES[fam][size][:2]
    arch = f"{'llava-' if mm else ''}{fam}-{size}"
    return ZooEntry(name, arch, fam, size, mm, True, name, hidden, layers)


def tiny_names(multimodal: bool | None = None) -> list[str]:
    """Every tiny zoo name (optionally only multimodal or only text ones)."""
    out = []
    for mm in (True, False):
        if multimodal is not None and mm != multimodal:
            continue
        out += [f"tiny-{'llava-' if mm else ''}{f}-{s}" for f in FAMILIES for s in SIZES]
    return out


def model_info(name: str) -> ZooEntry:
    """Resolve a zoo name, short real name, Hub id or local path to a :class:`ZooEntry`."""
    entry = _tiny_entry(name)
    if entry is not None:
        return entry
    if name in REAL_MODELS:
        hub = REAL_MODELS[name]
        fam = "qwen2" if name.startswith("qwen") else "llama"
        return ZooEntry(name, hub, fam, name.rsplit("-", 1)[-1], name.startswith("llava"), False, hub)
    if name.startswith("tiny-"):
        raise UnknownNameError("model", name, tiny_names() + list(REAL_MODELS), where="drake_bench.models.zoo")
    if Path(name).expanduser().is_dir() or name.count("/") == 1:
        src = str(Path(name).expanduser()) if Path(name).expanduser().is_dir() else name
        return ZooEntry(name, src, "unknown", "unknown", None, False, src)
    raise UnknownNameError("model", name, tiny_names() + list(REAL_MODELS), where="drake_bench.models.zoo")


def architecture_key(name: str) -> str:
    """Key grouping clients whose models share one frozen base (same family, size and modality)."""
    return model_info(name).architecture


def model_seed(name: str, seed: int = 0) -> int:
    """Stable per-model seed, so different zoo models start from different weights."""
    return (int(hashlib.sha256(name.encode()).hexdigest()[:8], 16) + seed) % (2**31)


def vision_config():
    """The ``SwinConfig`` every tiny LLaVA shares."""
    from transformers import SwinConfig

    return SwinConfig(**VISION_TOWER)


def tiny_config(name: str, vocab_size: int = DEFAULT_VOCAB_SIZE):
    """The ``transformers`` config of a tiny zoo model (Llava wrapping Llama/Qwen2, or the LM alone)."""
    from transformers import LlamaConfig, LlavaConfig, Qwen2Config

    entry = _tiny_entry(name)
    if entry is None:
        raise UnknownNameError("model", name, tiny_names(), where="drake_bench.models.zoo (tiny models)")
    hidden, layers, heads, kv, inter = _TINY_SHAPES[entry.family][entry.size]
    common: dict[str, Any] = dict(
        vocab_size=vocab_size,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        intermediate_size=inter,
        max_position_embeddings=MAX_POSITIONS,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        rms_norm_eps=1e-6,
    )
    if entry.family == "llama":
        text = LlamaConfig(**common, tie_word_embeddings=False)
    else:
        text = Qwen2Config(**common, tie_word_embeddings=True)
    if not entry.multimodal:
        return text
    from drake_bench.models.tokenizer import IMAGE_TOKENS

    return LlavaConfig(
        vision_config=vision_config(),
        text_config=text,
        image_token_index=3,
        image_seq_length=IMAGE_TOKENS,
        projector_hidden_act="gelu",
        vision_feature_select_strategy="full",  # Swin has no CLS token: every token is read
        vision_feature_layer=VISION_FEATURE_LAYER,
        pad_token_id=0,
        tie_word_embeddings=text.tie_word_embeddings,
    )


def build_tiny(name: str, seed: int = 0):
    """A randomly initialised tiny model (deterministic for ``name`` and ``seed``)."""
    import torch
    from transformers import AutoModelForCausalLM, LlavaForConditionalGeneration

    config = tiny_config(name)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(model_seed(name, seed))
        if _tiny_entry(name).multimodal:  # type: ignore[union-attr]
            model = LlavaForConditionalGeneration(config)
        else:
            model = AutoModelForCausalLM.from_config(config)
    model.generation_config.pad_token_id = 0
    model.generation_config.eos_token_id = 2
    model.generation_config.bos_token_id = 1
    return model


def load_pretrained(path: str, device: str = "cpu", dtype: Any = None):
    """Load any checkpoint (Hub id or directory) with ``from_pretrained``, as a user would.

    LLaVA-type configs load as ``LlavaForConditionalGeneration`` + ``AutoProcessor``;
    everything else as ``AutoModelForCausalLM`` + ``AutoTokenizer``. Weights are frozen.
    """
    from transformers import (
        AutoConfig,
        AutoModelForCausalLM,
        AutoProcessor,
        AutoTokenizer,
        LlavaForConditionalGeneration,
    )

    config = AutoConfig.from_pretrained(path)
    import torch

    kwargs: dict[str, Any] = {}
    if isinstance(dtype, str) and dtype != "auto":
        dtype = getattr(torch, dtype)  # "bfloat16" -> torch.bfloat16
    if dtype is not None:
        kwargs["dtype"] = dtype
    if config.model_type == "llava":
        model = LlavaForConditionalGeneration.from_pretrained(path, **kwargs)
        processor = AutoProcessor.from_pretrained(path)
    else:
        model = AutoModelForCausalLM.from_pretrained(path, **kwargs)
        processor = AutoTokenizer.from_pretrained(path)
    model.to(device)
    model.eval()
    model.requires_grad_(False)
    return model, processor
