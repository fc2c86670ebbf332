"""Multi-modal adapters (MMA) through peft's extension points, with MMA's gradient-scale layer.

Why this shape: peft's LoRA tuner lets a ``LoraConfig`` map base module types to custom layer classes
(``LoraConfig._register_custom_module``, checked first by the LoRA dispatcher), and its ``target_modules`` may name
any module, not only linears. :class:`MMAConfig` (a ``LoraConfig``) targets whole encoder blocks (the instrumented
blocks of :mod:`.depths`) and maps them to :class:`MMABlock`, a ``peft.tuners.lora.LoraLayer`` that wraps the frozen
block. Everything stays a normal ``get_peft_model`` / ``PeftModel``: adapter weights carry peft's ``lora_`` prefix
and adapter-name-keyed ``ModuleDict`` entries, so peft trains only them, ``get_peft_model_state_dict`` and the model
pool see them, and ``PeftModel.disable_adapter()`` switches them off.

At an instrumented block of modality o (vision or language) and depth k (paper Eq. 2; insertion as in MMA's code):

    A(u)   = up_o( δ( shared_k( δ( down_o(u) ) ) ) )        every map affine (nn.Linear with bias), δ = ReLU
    h_out  = Block(h) + α · A( LN1(h) )

LN1 is the block's own frozen pre-attention norm (``input_layernorm`` of a Llama/Qwen2 decoder layer, an RMSNorm;
``layernorm_before`` of a Swin block; ``layer_norm1`` of a CLIP layer), applied token-wise to every token; the
branch's output is added to the block's output, in parallel with the whole block. With ``grad_scale`` the branch is
wrapped as in MMA's code, ``GSL(α · A(LN1(GSL(h, α))), 1/α)`` (:class:`GradScale`: identity forward, gradient times
c backward): the forward pass and the gradient reaching h are unchanged, and every adapter parameter's gradient is
1/α times the true one, which is what lets SGD move adapters whose output is scaled by α = 0.005.

The shared projection of depth k is one ``nn.Linear(r, r)`` per client model, owned by the language block of that
depth (every client has a language model) and referenced by the vision block of the same depth
(:func:`tie_shared`), so the state dict holds it once and safetensors never sees shared storage.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any, Iterator

import torch
import torch.nn.functional as F
from peft import LoraConfig
from peft.tuners.lora.layer import LoraLayer
from torch import nn

from .depths import EncoderLayout, block_of

#: The pre-attention norm of the block types the zoo holds (Llama/Qwen2, Swin, CLIP/SigLIP, OpenAI CLIP).
PRE_NORM_NAMES: tuple[str, ...] = ("input_layernorm", "layernorm_before", "layer_norm1", "ln_1")
MODALITIES: tuple[str, ...] = ("vision", "language")


class GradScale(torch.autograd.Function):
    """MMA's gradient-scale layer: the identity forward; the incoming gradient times ``scale`` backward."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, scale: float) -> torch.Tensor:
        ctx.scale = scale
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad * ctx.scale, None


def stable_seed(seed: int, key: str) -> int:
    """A seed from ``seed`` and a name, independent of Python's hash randomisation (reproducible init per tensor)."""
    return (seed * 1_000_003 + zlib.crc32(key.encode())) % (2**63 - 1)


def pre_norm(block: nn.Module) -> nn.Module:
    """The block's own pre-attention norm (the LN1 the adapter reads); a clear error for unknown block types."""
    for name in PRE_NORM_NAMES:
        norm = getattr(block, name, None)
        if isinstance(norm, nn.Module):
            return norm
    raise ValueError(
        f"{type(block).__name__} has none of the pre-attention norms {PRE_NORM_NAMES}: pFedMMA cannot "
        "place an adapter on it"
    )


def _width(norm: nn.Module) -> int:
    weight = getattr(norm, "weight", None)
    if weight is not None:
        return int(weight.shape[-1])
    shape = getattr(norm, "normalized_shape", None)
    if shape:
        return int(shape[-1])
    raise ValueError(f"cannot read the width of {type(norm).__name__}")


@dataclass
class MMAConfig(LoraConfig):
    """``LoraConfig`` whose targets are whole encoder blocks, wrapped by :class:`MMABlock`.

    ``r`` is the shared width; ``target_modules`` the regex of :func:`.depths.target_pattern`. Build it with
    :func:`make_mma_config`.
    """

    mma_alpha: float = field(default=0.005, metadata={"help": "α, the scale of the adapter branch."})
    mma_grad_scale: bool = field(default=True, metadata={"help": "Wrap the branch in MMA's gradient-scale layer."})
    mma_activation: str = field(default="relu", metadata={"help": "δ after down and after shared: relu or gelu."})
    mma_seed: int = field(default=0, metadata={"help": "Seed of the Kaiming init (combined with each tensor's name)."})
    mma_language: list[int] = field(default_factory=list, metadata={"help": "Language block of depth k."})
    mma_vision: list[int] = field(default_factory=list, metadata={"help": "Flat vision block of depth k."})
    mma_vision_stages: list[int] = field(default_factory=list, metadata={"help": "Vision blocks per stage."})

    def __post_init__(self) -> None:
        super().__post_init__()
        # every targeted module is an encoder block (the regex names nothing else): wrap it in MMABlock
        self._register_custom_module({nn.Module: MMABlock})

    def layout(self) -> EncoderLayout:
        return EncoderLayout(
            language_blocks=max(self.mma_language, default=-1) + 1, vision_stages=tuple(self.mma_vision_stages)
        )

    def depth_of(self, target_name: str) -> tuple[str, int]:
        """(modality, depth k) of a targeted block's module path."""
        modality, block = block_of(target_name, self.layout())
        blocks = self.mma_vision if modality == "vision" else self.mma_language
        if block not in blocks:
            raise ValueError(f"{target_name!r} ({modality} block {block}) is not an instrumented block {blocks}")
        return modality, blocks.index(block)


class MMABlock(nn.Module, LoraLayer):
    """A frozen encoder block with a multi-modal adapter in parallel (see the module docstring).

    Per adapter name ``a``: ``lora_down[a]`` (d -> r), ``lora_up[a]`` (r -> d) and, on a language block,
    ``lora_shared[a]`` (r -> r); a vision block reads its depth's shared projection through ``_shared_ref[a]``
    after :func:`tie_shared`. ``_mma_meta[a]`` holds the block's modality and depth.
    """

    adapter_layer_names: tuple[str, ...] = ("lora_down", "lora_shared", "lora_up")
    other_param_names: tuple[str, ...] = ("r", "scaling", "_mma_meta")

    def __init__(
        self, base_layer: nn.Module, adapter_name: str, config: MMAConfig, r: int, target_name: str = "", **kwargs: Any
    ) -> None:
        super().__init__()
        LoraLayer.__init__(self, base_layer)
        self.lora_down = nn.ModuleDict({})
        self.lora_shared = nn.ModuleDict({})
        self.lora_up = nn.ModuleDict({})
        self._mma_meta: dict[str, dict[str, Any]] = {}
        self._shared_ref: dict[str, nn.Linear] = {}  # a plain dict: the referenced Linear is not registered twice
        self._active_adapter = adapter_name
        self.update_layer(adapter_name, r, config=config, target_name=target_name)

    def _get_in_out_features(self, module: nn.Module) -> tuple[int, int]:
        width = _width(pre_norm(module))
        return width, width

    @property
    def norm(self) -> nn.Module:
        return pre_norm(self.get_base_layer())

    def update_layer(self, adapter_name: str, r: int, config: MMAConfig, target_name: str = "", **kwargs: Any) -> None:
        """Create the adapter ``adapter_name``: Kaiming-normal (fan_out, ReLU) weights, zero biases.

        Each tensor is drawn from its own generator seeded by ``mma_seed`` and its name (modality, depth, role),
        so every client of an architecture starts identical and the shared projection of depth k starts
        identical in every architecture: one initial state for the whole federation.
        """
        if not isinstance(config, MMAConfig):
            raise TypeError("MMABlock needs an MMAConfig")
        modality, depth = config.depth_of(target_name)
        weight = next(self.norm.parameters(), None)
        device = weight.device if weight is not None else None
        d = self.in_features

        def linear(n_in: int, n_out: int, key: str) -> nn.Linear:
            layer = nn.Linear(n_in, n_out, bias=True, device=device, dtype=torch.float32)
            gen = torch.Generator().manual_seed(stable_seed(config.mma_seed, key))
            with torch.no_grad():
                w = torch.empty(n_out, n_in)
                nn.init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu", generator=gen)
                layer.weight.copy_(w)
                layer.bias.zero_()
            return layer

        self.r[adapter_name] = r
        self.scaling[adapter_name] = float(config.mma_alpha)
        self._mma_meta[adapter_name] = {
            "modality": modality,
            "depth": depth,
            "grad_scale": config.mma_grad_scale,
            "activation": config.mma_activation,
        }
        self.lora_down[adapter_name] = linear(d, r, f"{modality}.{depth}.down")
        self.lora_up[adapter_name] = linear(r, d, f"{modality}.{depth}.up")
        self.lora_shared[adapter_name] = linear(r, r, f"shared.{depth}")
        self.set_adapter(self.active_adapters)

    def shared(self, adapter: str) -> nn.Linear:
        """This depth's shared projection: its own, or the language block's after :func:`tie_shared`."""
        return self.lora_shared[adapter] if adapter in self.lora_shared else self._shared_ref[adapter]

    def branch(self, adapter: str, u: torch.Tensor) -> torch.Tensor:
        """A(u) = up(δ(shared(δ(down(u))))), unscaled."""
        act = F.relu if self._mma_meta[adapter]["activation"] == "relu" else F.gelu
        z = act(self.lora_down[adapter](u))
        z = act(self.shared(adapter)(z))
        return self.lora_up[adapter](z)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        out = self.base_layer(*args, **kwargs)
        if self.disable_adapters:
            return out
        hidden_states = args[0] if args else kwargs["hidden_states"]
        added = None
        for a in self.active_adapters:
            if a not in self.lora_down:
                continue
            alpha = self.scaling[a]
            scaled = self._mma_meta[a]["grad_scale"] and alpha != 0
            h = GradScale.apply(hidden_states, alpha) if scaled else hidden_states
            u = self.norm(h)
            if not torch.is_autocast_enabled(u.device.type):  # a bf16 base without autocast: adapters stay fp32
                u = u.to(self.lora_down[a].weight.dtype)
            y = alpha * self.branch(a, u)
            y = GradScale.apply(y, 1.0 / alpha) if scaled else y
            added = y if added is None else added + y
        if added is None:
            return out
        if isinstance(out, tuple):  # Swin and older CLIP layers return (hidden_states, ...)
            return (out[0] + added.to(out[0].dtype),) + tuple(out[1:])
        return out + added.to(out.dtype)

    def merge(self, safe_merge: bool = False, adapter_names: list[str] | None = None) -> None:
        raise NotImplementedError("an MMA adapter is a nonlinear branch: it cannot be merged into the block")

    def unmerge(self) -> None:
        return None

    def __repr__(self) -> str:
        return "mma." + super().__repr__()


def make_mma_config(
    layout: EncoderLayout,
    language: list[int],
    vision: list[int] | None,
    *,
    rank: int,
    alpha: float,
    grad_scale: bool,
    activation: str,
    seed: int,
) -> MMAConfig:
    """The peft config placing MMA adapters on the given blocks (0-based; vision blocks counted across stages)."""
    from .depths import DepthMap, target_pattern

    dmap = DepthMap(language=tuple(language), vision=tuple(vision) if vision is not None else None)
    return MMAConfig(
        r=rank,
        lora_alpha=1,
        lora_dropout=0.0,
        bias="none",
        task_type="CAUSAL_LM",
        target_modules=target_pattern(layout, dmap),
        mma_alpha=alpha,
        mma_grad_scale=grad_scale,
        mma_activation=activation,
        mma_seed=seed,
        mma_language=list(language),
        mma_vision=list(vision or []),
        mma_vision_stages=list(layout.vision_stages),
    )


def mma_blocks(model: nn.Module, adapter: str = "default") -> Iterator[tuple[str, MMABlock]]:
    """(module path, block) of every MMA block holding ``adapter``, in module order."""
    for name, module in model.named_modules():
        if isinstance(module, MMABlock) and adapter in module._mma_meta:
            yield name, module


def tie_shared(model: nn.Module, adapter: str = "default") -> int:
    """One shared projection per depth: the language block owns it, the vision block of that depth references it.

    Idempotent; returns the number of depths. Raises if a depth lacks its language block (the pairing must be
    total) or holds more than one block of a modality.
    """
    by_depth: dict[int, dict[str, MMABlock]] = {}
    for name, block in mma_blocks(model, adapter):
        meta = block._mma_meta[adapter]
        slot = by_depth.setdefault(meta["depth"], {})
        if meta["modality"] in slot:
            raise ValueError(f"depth {meta['depth']} has two {meta['modality']} blocks (the second at {name})")
        slot[meta["modality"]] = block
    for depth, slot in sorted(by_depth.items()):
        if "language" not in slot:
            raise ValueError(f"depth {depth} has no language block to own its shared projection")
        owner = slot["language"].lora_shared[adapter]
        vision = slot.get("vision")
        if vision is not None and adapter in vision.lora_shared:
            del vision.lora_shared[adapter]
            vision._shared_ref[adapter] = owner
    return len(by_depth)


def canonical_keys(model: nn.Module, adapter: str = "default") -> dict[str, str]:
    """peft state-dict key -> architecture-independent key, for every adapter tensor.

    ``<modality>.<k>.down|up.weight|bias`` for the local projections and ``shared.<k>.weight|bias`` for the shared
    one, so that depth k of every client has the same names whatever its architecture.
    """
    out: dict[str, str] = {}
    for name, block in mma_blocks(model, adapter):
        meta = block._mma_meta[adapter]
        stem = f"{meta['modality']}.{meta['depth']}"
        for role in ("down", "up"):
            for p in ("weight", "bias"):
                out[f"{name}.lora_{role}.{p}"] = f"{stem}.{role}.{p}"
        if adapter in block.lora_shared:
            for p in ("weight", "bias"):
                out[f"{name}.lora_shared.{p}"] = f"shared.{meta['depth']}.{p}"
    return out
