"""Where pFedMMA's adapters sit: the instrumented depths of each encoder and how the two encoders pair.

The paper adapts blocks ℓ..L of CLIP's two 12-block encoders (ℓ = 10: blocks 10, 11, 12, m = 3 depths) and pairs
the vision and the text adapter at one depth by their common block index j, which is what lets them share one
r x r projection. drake_bench's clients have encoders of unequal depth (a 6-block Swin vision tower beside a 4-, 6-
or 8-block language model in the tiny zoo; a 24-block CLIP beside a 32-block Llama in LLaVA-1.5), so a block
index means nothing across them. What carries over is relative depth:

* every encoder gets the same number ``m`` of instrumented depths (``depths``), so depth k of any client pairs with
  depth k of every other client, whatever its architecture (the shared projection is r x r, dimension-free);
* they sit in the top span of the encoder: its top ``top_fraction`` of blocks (the paper's 3 of 12 is 0.25),
  widened to m blocks where that span holds fewer;
* within the span depth k sits at relative position (k + 1) / m, so the top depth is always the last block the
  model reads, and the vision and language blocks of depth k are at the same relative depth of their span.

With the paper's L = 12, top_fraction 0.25 and m = 3 this gives blocks 10, 11, 12 exactly. The functions here work
on block counts only, so they can be checked for every zoo model without building one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


def instrumented_blocks(num_blocks: int, depths: int, top_fraction: float) -> list[int]:
    """0-based indices of the blocks that carry depths 0..m-1 in an encoder of ``num_blocks`` blocks.

    The span is the top ``max(m, floor(top_fraction * L))`` blocks; depth k is block
    ``first - 1 + ceil((k + 1) n / m)`` of a span of n blocks starting at 0-based ``first``: strictly increasing
    in k (n >= m), the last depth on the last block.
    """
    if depths < 1:
        raise ValueError(f"depths must be >= 1, got {depths}")
    if num_blocks < depths:
        raise ValueError(f"an encoder of {num_blocks} block(s) cannot hold {depths} instrumented depths")
    if not 0.0 < top_fraction <= 1.0:
        raise ValueError(f"top_fraction must be in (0, 1], got {top_fraction}")
    span = min(num_blocks, max(depths, math.floor(top_fraction * num_blocks + 1e-9)))
    first = num_blocks - span
    return [first - 1 + math.ceil((k + 1) * span / depths) for k in range(depths)]


@dataclass(frozen=True)
class EncoderLayout:
    """Block counts of one zoo model, read from its ``transformers`` config.

    ``vision_stages``: blocks per stage of the vision tower, in forward order (Swin has three stages; a ViT one
    stage of all its layers), counting only the blocks whose output the model reads (LLaVA-1.5 reads its CLIP
    tower's second-to-last layer, so the last block is not counted); empty for a text-only model.
    ``language_blocks``: decoder blocks of the language model. ``vision_kind``: ``"swin"``, ``"vit"`` or ``None``.
    """

    language_blocks: int
    vision_stages: tuple[int, ...] = ()
    vision_kind: str | None = None

    @property
    def multimodal(self) -> bool:
        return bool(self.vision_stages)

    @property
    def vision_blocks(self) -> int:
        return sum(self.vision_stages)

    def vision_position(self, flat: int) -> tuple[int, int]:
        """(stage, block within stage) of the ``flat``-th vision block."""
        for stage, n in enumerate(self.vision_stages):
            if flat < n:
                return stage, flat
            flat -= n
        raise IndexError("vision block index out of range")


def layout_of(config: Any) -> EncoderLayout:
    """The :class:`EncoderLayout` of a ``transformers`` config (a LLaVA config or a causal LM's)."""
    text = getattr(config, "text_config", None)
    vision = getattr(config, "vision_config", None)
    language = int(getattr(text if text is not None else config, "num_hidden_layers"))
    if vision is None:
        return EncoderLayout(language_blocks=language)
    layer = getattr(config, "vision_feature_layer", -1)
    if isinstance(layer, (list, tuple)):  # several layers read: the deepest one bounds what matters
        layer = max(layer, key=lambda i: i if i >= 0 else 10**6 + i)
    stage_depths = getattr(vision, "depths", None)
    if stage_depths is not None:  # Swin: hidden_states = (embeddings, stage 1, ..., stage S)
        stages = len(stage_depths)
        read = stages + 1 + layer if layer < 0 else layer
        return EncoderLayout(language, tuple(int(d) for d in stage_depths[:read]), "swin")
    blocks = int(vision.num_hidden_layers)  # ViT: hidden_states = (embeddings, layer 1, ..., layer L)
    read = blocks + 1 + layer if layer < 0 else layer
    return EncoderLayout(language, (read,), "vit")


@dataclass(frozen=True)
class DepthMap:
    """Which block carries each instrumented depth, per encoder (0-based; vision blocks counted across stages)."""

    language: tuple[int, ...]
    vision: tuple[int, ...] | None

    def pairs(self) -> list[tuple[int | None, int]]:
        """(vision block, language block) of depth k = 0..m-1: the pairing by relative depth."""
        vision = self.vision or (None,) * len(self.language)
        return list(zip(vision, self.language))


def depth_map(layout: EncoderLayout, depths: int, top_fraction: float) -> DepthMap:
    """The depth map of one model: the same ``depths`` for both of its encoders (see the module docstring)."""
    language = tuple(instrumented_blocks(layout.language_blocks, depths, top_fraction))
    vision = tuple(instrumented_blocks(layout.vision_blocks, depths, top_fraction)) if layout.multimodal else None
    return DepthMap(language=language, vision=vision)


def target_pattern(layout: EncoderLayout, dmap: DepthMap) -> str:
    """A peft ``target_modules`` regex (full match) naming exactly the instrumented blocks.

    Language blocks are ``...layers.<j>`` outside the vision tower (``model.language_model.layers.j`` in a LLaVA,
    ``model.layers.j`` in a causal LM); Swin blocks are ``...vision_tower...layers.<stage>.blocks.<b>``, ViT blocks
    ``...vision_tower...layers.<j>``.
    """
    parts = [rf"(?!.*vision_tower).*\.layers\.({'|'.join(str(j) for j in dmap.language)})"]
    if dmap.vision is not None:
        if layout.vision_kind == "swin":
            for flat in dmap.vision:
                stage, block = layout.vision_position(flat)
                parts.append(rf".*vision_tower\..*layers\.{stage}\.blocks\.{block}")
        else:
            parts.append(rf".*vision_tower\..*layers\.({'|'.join(str(j) for j in dmap.vision)})")
    return "^(?:" + "|".join(f"(?:{p})" for p in parts) + ")$"


def block_of(module_name: str, layout: EncoderLayout) -> tuple[str, int]:
    """(modality, flat block index) of a targeted block's module path (the inverse of :func:`target_pattern`)."""
    import re

    if "vision_tower" in module_name:
        swin = re.search(r"layers\.(\d+)\.blocks\.(\d+)$", module_name)
        if swin:
            stage, block = int(swin.group(1)), int(swin.group(2))
            return "vision", sum(layout.vision_stages[:stage]) + block
        vit = re.search(r"layers\.(\d+)$", module_name)
        if vit:
            return "vision", int(vit.group(1))
    else:
        lang = re.search(r"layers\.(\d+)$", module_name)
        if lang:
            return "language", int(lang.group(1))
    raise ValueError(f"{module_name!r} is not an encoder block pFedMMA knows how to place")
