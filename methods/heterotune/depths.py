"""Model types and the relative-depth map: which share-slot entry each block of each type reads.

HeteroTune's clients run different sizes of one family (the paper: ViT-T/S/B/L, LLaMA 1B/3B/8B; the tiny zoo:
Llama or Qwen2 s/m/l, 4/6/8 decoder blocks of width 64/96/128 or 48/80/112). Each *type* is one architecture of
the allocation. Widths never meet (the r x r share slots sit between each type's own down- and up-projection), but
depths do: slot i holds one (down, up) pair per block of a type-i model (its native depth L_i), and a type-j block
must know which of them to read. The paper is silent; drake_bench uses the floor relative-depth map

    phi(l; La -> Lb) = floor(l * Lb / La)        (the identity when La = Lb)

so block l of type j reads entry phi(l; L_j -> L_i) of slot i, and its own slot at its own block (one entry per
block, no tying: each client uploads exactly L_j share pairs, what the paper's Table 5 counts). CMGA aligns the
types' updates on a canonical grid of K = max_i L_i positions: position c holds entry phi(c; K -> L_i) of every
type i, and a native entry gets the mean of its aligned columns. phi(.; K -> L_i) is surjective for L_i <= K
(steps of L_i / K <= 1), so every native entry is aligned; tests check it for every zoo size.

Everything here works on block counts and widths only, read from ``transformers`` configs, so it is checked for
every zoo model (and for real checkpoints by name) without building one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


def phi(layer: int, source_depth: int, target_depth: int) -> int:
    """The floor relative-depth map: the block of a ``target_depth``-block model at the relative depth of block
    ``layer`` of a ``source_depth``-block model."""
    if not 0 <= layer < source_depth:
        raise ValueError(f"block {layer} is outside a model of {source_depth} blocks")
    if target_depth < 1:
        raise ValueError(f"a model needs at least one block, got {target_depth}")
    return (layer * target_depth) // source_depth


def read_entries(depth: int, other_depth: int) -> list[int]:
    """Entry of a slot of depth ``other_depth`` read by each of the ``depth`` blocks of a model (block order)."""
    return [phi(layer, depth, other_depth) for layer in range(depth)]


def grid_columns(grid: int, depth: int) -> list[int]:
    """Native entry of a type of ``depth`` blocks at each position of the canonical grid of ``grid`` positions."""
    if depth > grid:
        raise ValueError(f"the canonical grid ({grid}) must be at least as deep as every type ({depth})")
    return read_entries(grid, depth)


@dataclass(frozen=True)
class ModelShape:
    """What DeMA needs to know about a model: its decoder blocks L and their width m."""

    blocks: int
    width: int


def shape_of(config: Any) -> ModelShape:
    """The :class:`ModelShape` of a ``transformers`` config: a LLaVA's language model, or a causal LM's own."""
    text = getattr(config, "text_config", None)
    cfg = text if text is not None else config
    return ModelShape(blocks=int(cfg.num_hidden_layers), width=int(cfg.hidden_size))


def model_shape(model_name: str) -> ModelShape:
    """The shape of a zoo model (tiny or real by name) from its config, without loading weights."""
    from drake_bench.models.zoo import model_info, tiny_config

    info = model_info(model_name)
    if info.tiny:
        return shape_of(tiny_config(model_name))
    from transformers import AutoConfig

    return shape_of(AutoConfig.from_pretrained(info.source))


@dataclass(frozen=True)
class TypeLayout:
    """The federation's model types, in a fixed order: type j is ``architectures[j]`` with ``shapes[j]``.

    Types are ordered by (blocks, width, architecture key), smallest first, so the order is the same in every
    process and every seed. ``grid`` is the canonical CMGA grid K = max L_i.
    """

    architectures: tuple[str, ...]
    shapes: tuple[ModelShape, ...]

    @property
    def count(self) -> int:
        """M, the number of types (and of share slots per block)."""
        return len(self.architectures)

    @property
    def depths(self) -> tuple[int, ...]:
        return tuple(s.blocks for s in self.shapes)

    @property
    def grid(self) -> int:
        return max(self.depths)

    def index(self, architecture: str) -> int:
        return self.architectures.index(architecture)

    def reads(self, j: int) -> dict[int, list[int]]:
        """Type i -> the entry of slot i read by each block of a type-j model."""
        return {i: read_entries(self.depths[j], self.depths[i]) for i in range(self.count)}

    def read_sets(self, j: int) -> dict[int, list[int]]:
        """Type i -> the distinct entries of slot i a type-j client reads (what it must be sent)."""
        return {i: sorted(set(entries)) for i, entries in self.reads(j).items()}


def type_layout(architectures: Mapping[int, str], shapes: Mapping[str, ModelShape]) -> TypeLayout:
    """The :class:`TypeLayout` of a federation (client -> architecture) given each architecture's shape."""
    archs = sorted(set(architectures.values()), key=lambda a: (shapes[a].blocks, shapes[a].width, a))
    return TypeLayout(architectures=tuple(archs), shapes=tuple(shapes[a] for a in archs))
