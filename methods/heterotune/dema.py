"""DeMA (the paper's dense mixture of adapters) through peft's extension points.

Why this shape: peft's LoRA tuner lets a ``LoraConfig`` map base module types to custom layer classes
(``LoraConfig._register_custom_module``, checked first by the LoRA dispatcher), and its ``target_modules`` may name
any module, not only linears; pFedMMA's adapters and FedMosaic's PQ-LoRA plug in the same way. :class:`DeMAConfig`
(a ``LoraConfig``) targets every decoder block of the language model and maps it to :class:`DeMABlock`, a
``peft.tuners.lora.LoraLayer`` that wraps the frozen block. The model stays a normal ``get_peft_model`` /
``PeftModel``: the adapter weights carry peft's ``lora_`` prefix and adapter-name-keyed containers, so peft's
``get_peft_model_state_dict`` and the model pool see them, peft's own ``set_adapter`` keeps the frozen share slots
frozen (they are declared in ``frozen_peft_weight_names``, the mechanism peft's variants use for weights they do not
train), and ``PeftModel.disable_adapter()`` gives the base model back.

At block l of a type-j model of width m_j, on the block's output hidden states x (paper Eq. 1-2, with alpha):

    P_down = sum_i alpha_i S_i^down[phi(l; L_j -> L_i)]      (r x r)
    P_up   = sum_i alpha_i S_i^up  [phi(l; L_j -> L_i)]      (r x r)
    y      = x + h( x W_down P_down ) P_up W_up              W_down: m_j x r, W_up: r x m_j, h = GELU

with the matrices acting on row vectors (x is n x m_j). The tensors of one block, per adapter name ``a``:

* ``lora_down[a]`` / ``lora_up[a]``: the type's local adapter, ``nn.Linear(m, r)`` and ``nn.Linear(r, m)`` without
  bias (so W_down = ``lora_down.weight.T``, W_up = ``lora_up.weight.T``); trainable;
* ``lora_mix[a]``: alpha, M input-independent scalars (raw, or softmax logits); trainable unless ``learn_alpha`` is
  off (the paper's "w/o LW");
* ``lora_own_down[a]`` / ``lora_own_up[a]``: the client's own slot j at this block (r x r), trainable;
* ``lora_bank_down[a]`` / ``lora_bank_up[a]``: M x r x r, frozen: row i holds the entry of slot i this block reads
  (the plugin writes the server's bank there every round). Row j holds the own slot's round-start value: the forward
  reads the live own slot instead, and the "round_start" regulariser pulls toward row j.

Initialisation (the paper is silent): W_down the ``nn.Linear`` default (Kaiming-uniform), W_up = 0, every slot entry
the identity, alpha = 1/M (raw) or logits 0 (softmax): sum_i alpha_i S_i = I, and W_up = 0 makes every DeMA the
identity map, so round 0 is the pretrained model bit for bit (tested).

With ``dema_use_share`` off the block is the paper's plain bottleneck adapter (Eq. 1), ``y = x + h(x W_down) W_up``:
Homo-Training ("w/o DeMA & CMGA").

The inference merge (paper Eq. 3): because alpha is input-independent, A' = W_down P_down and
B' = P_up W_up give the same function as a plain adapter, ``y = x + h(x A') B'``; :func:`fold_state` turns a DeMA
state into that plain adapter's state (loadable into a Homo-Training model of the same architecture).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterator

import torch
import torch.nn.functional as F
from peft import LoraConfig
from peft.tuners.lora.layer import LoraLayer
from torch import nn

#: A decoder block of the language model: ``...layers.<l>`` outside the vision tower (a LLaVA's
#: ``model.language_model.layers.l``, a causal LM's ``model.layers.l``; the tiny LLaVAs' Swin stages are
#: ``vision_tower.encoder.layers.s`` and are excluded).
DECODER_BLOCKS = r"^(?!.*vision_tower).*\.layers\.\d+$"
#: The norms a decoder block reads its width from (Llama/Qwen2 decoder layers).
NORM_NAMES: tuple[str, ...] = ("input_layernorm", "post_attention_layernorm")
#: Per-adapter containers of a DeMA block, in the order :func:`canonical_keys` names them.
DEMA_WEIGHTS: tuple[str, ...] = (
    "lora_down",
    "lora_up",
    "lora_mix",
    "lora_own_down",
    "lora_own_up",
    "lora_bank_down",
    "lora_bank_up",
)
FROZEN_WEIGHTS: tuple[str, ...] = ("lora_bank_down", "lora_bank_up")


def block_index(module_name: str) -> int:
    """The decoder block index l of a targeted module path."""
    found = re.search(r"layers\.(\d+)$", module_name)
    if not found:
        raise ValueError(f"{module_name!r} is not a decoder block DeMA knows how to place")
    return int(found.group(1))


def _width(block: nn.Module) -> int:
    for name in NORM_NAMES:
        norm = getattr(block, name, None)
        weight = getattr(norm, "weight", None)
        if weight is not None:
            return int(weight.shape[-1])
    raise ValueError(f"{type(block).__name__} has none of the norms {NORM_NAMES}: DeMA cannot read its width")


@dataclass
class DeMAConfig(LoraConfig):
    """``LoraConfig`` whose targets are the language model's decoder blocks, wrapped by :class:`DeMABlock`.

    ``r`` is the adapter bottleneck (and the side of every share slot). Build it with :func:`make_dema_config`.
    """

    dema_types: int = field(default=1, metadata={"help": "M, the number of model types (share slots per block)."})
    dema_type: int = field(default=0, metadata={"help": "j, this model's type: the slot it trains."})
    dema_use_share: bool = field(default=True, metadata={"help": "DeMA (share slots) or the plain adapter (Eq. 1)."})
    dema_learn_alpha: bool = field(default=True, metadata={"help": "Train alpha (off: fixed at its init, 'w/o LW')."})
    dema_alpha_param: str = field(default="raw", metadata={"help": "alpha as raw scalars or softmax of logits."})
    dema_activation: str = field(default="gelu", metadata={"help": "h: gelu or relu."})

    def __post_init__(self) -> None:
        super().__post_init__()
        # every targeted module is a decoder block (the regex names nothing else): wrap it in DeMABlock
        self._register_custom_module({nn.Module: DeMABlock})


class DeMABlock(nn.Module, LoraLayer):
    """A frozen decoder block followed by its DeMA (see the module docstring for the tensors and the forward)."""

    adapter_layer_names: tuple[str, ...] = DEMA_WEIGHTS
    other_param_names: tuple[str, ...] = ("r", "scaling", "_dema_meta")

    def __init__(
        self, base_layer: nn.Module, adapter_name: str, config: DeMAConfig, r: int, target_name: str = "", **kwargs: Any
    ) -> None:
        super().__init__()
        LoraLayer.__init__(self, base_layer)
        for name in DEMA_WEIGHTS:
            setattr(self, name, nn.ModuleDict({}) if name in ("lora_down", "lora_up") else nn.ParameterDict({}))
        self._dema_meta: dict[str, dict[str, Any]] = {}
        self._active_adapter = adapter_name
        self.update_layer(adapter_name, r, config=config, target_name=target_name)

    def _get_in_out_features(self, module: nn.Module) -> tuple[int, int]:
        width = _width(module)
        return width, width

    def update_layer(self, adapter_name: str, r: int, config: DeMAConfig, target_name: str = "", **kwargs: Any) -> None:
        """Create the adapter ``adapter_name`` with the initialisation of the module docstring."""
        if not isinstance(config, DeMAConfig):
            raise TypeError("DeMABlock needs a DeMAConfig")
        if not 0 <= config.dema_type < config.dema_types:
            raise ValueError(f"type {config.dema_type} is not one of the {config.dema_types} types")
        weight = next(self.get_base_layer().parameters(), None)
        device = weight.device if weight is not None else None
        m, M = self.in_features, config.dema_types
        self.r[adapter_name] = r
        self.scaling[adapter_name] = 1.0
        self._dema_meta[adapter_name] = {
            "block": block_index(target_name) if target_name else -1,
            "type": config.dema_type,
            "types": M,
            "share": config.dema_use_share,
            "alpha_param": config.dema_alpha_param,
            "activation": config.dema_activation,
        }
        self.lora_down[adapter_name] = nn.Linear(m, r, bias=False, device=device, dtype=torch.float32)
        up = nn.Linear(r, m, bias=False, device=device, dtype=torch.float32)
        with torch.no_grad():
            up.weight.zero_()
        self.lora_up[adapter_name] = up
        frozen: tuple[str, ...] = ()
        if config.dema_use_share:
            eye = torch.eye(r, device=device, dtype=torch.float32)
            mix = (
                torch.zeros(M, device=device)
                if config.dema_alpha_param == "softmax"
                else torch.full((M,), 1.0 / M, device=device)
            )
            self.lora_mix[adapter_name] = nn.Parameter(mix)
            self.lora_own_down[adapter_name] = nn.Parameter(eye.clone())
            self.lora_own_up[adapter_name] = nn.Parameter(eye.clone())
            self.lora_bank_down[adapter_name] = nn.Parameter(eye.expand(M, r, r).clone(), requires_grad=False)
            self.lora_bank_up[adapter_name] = nn.Parameter(eye.expand(M, r, r).clone(), requires_grad=False)
            frozen = FROZEN_WEIGHTS + (() if config.dema_learn_alpha else ("lora_mix",))
        self.set_adapter(self.active_adapters)
        if frozen:
            self._declare_frozen(adapter_name, frozen)

    def _declare_frozen(self, adapter: str, names: tuple[str, ...]) -> None:
        """Tell peft which of this adapter's weights it must keep frozen (re-applied on every ``set_adapter``);
        the instance gets its own dict so the class-level default is never shared."""
        frozen = dict(self.frozen_peft_weight_names)
        frozen[adapter] = tuple(dict.fromkeys(frozen.get(adapter, ()) + names))
        self.frozen_peft_weight_names = frozen
        self._freeze_non_trainable_peft_weights(adapter)

    # -- the maths ----------------------------------------------------------------------------------------------
    def alpha(self, adapter: str) -> torch.Tensor:
        """alpha_j[l]: the M mixing weights (softmax of the logits under ``alpha_param="softmax"``)."""
        raw = self.lora_mix[adapter]
        return torch.softmax(raw, dim=0) if self._dema_meta[adapter]["alpha_param"] == "softmax" else raw

    def projections(self, adapter: str) -> tuple[torch.Tensor, torch.Tensor]:
        """(P_down, P_up): the alpha-mix of the M slots this block reads, the own slot live (trainable), the others
        from the frozen bank. Computed once per forward (M r^2 work)."""
        meta = self._dema_meta[adapter]
        j, M = meta["type"], meta["types"]
        own = F.one_hot(torch.tensor(j), M).to(self.lora_mix[adapter].dtype).to(self.lora_mix[adapter].device)
        a = self.alpha(adapter)
        a_others, a_own = a * (1 - own), a[j]
        p_down = torch.einsum("i,irs->rs", a_others, self.lora_bank_down[adapter]) + a_own * self.lora_own_down[adapter]
        p_up = torch.einsum("i,irs->rs", a_others, self.lora_bank_up[adapter]) + a_own * self.lora_own_up[adapter]
        return p_down, p_up

    def delta(self, adapter: str, x: torch.Tensor) -> torch.Tensor:
        """h(x W_down P_down) P_up W_up (DeMA, Eq. 2 with alpha), or h(x W_down) W_up (the plain adapter, Eq. 1)."""
        meta = self._dema_meta[adapter]
        act = F.gelu if meta["activation"] == "gelu" else F.relu
        z = self.lora_down[adapter](x)
        if not meta["share"]:
            return self.lora_up[adapter](act(z))
        p_down, p_up = self.projections(adapter)
        return self.lora_up[adapter](act(z @ p_down) @ p_up)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        out = self.base_layer(*args, **kwargs)
        if self.disable_adapters:
            return out
        hidden = out[0] if isinstance(out, tuple) else out  # older transformers return (hidden_states, ...)
        x = hidden
        for a in self.active_adapters:
            if a not in self.lora_down:
                continue
            dtype = self.lora_down[a].weight.dtype
            if not torch.is_autocast_enabled(x.device.type):  # a bf16 base without autocast: adapters stay fp32
                x = x + self.delta(a, x.to(dtype)).to(x.dtype)
            else:
                x = x + self.delta(a, x).to(x.dtype)
        if isinstance(out, tuple):
            return (x,) + tuple(out[1:])
        return x

    def merge(self, safe_merge: bool = False, adapter_names: list[str] | None = None) -> None:
        raise NotImplementedError(
            "a DeMA is a nonlinear branch after the block: it folds into a plain adapter "
            "(fold_state), not into the block's weights"
        )

    def unmerge(self) -> None:
        return None

    def __repr__(self) -> str:
        return "dema." + super().__repr__()


def make_dema_config(
    *, rank: int, types: int, own_type: int, use_share: bool, learn_alpha: bool, alpha_param: str, activation: str
) -> DeMAConfig:
    """The peft config placing one DeMA after every decoder block of the language model (the paper's Table 5 counts
    fit exactly one per block)."""
    return DeMAConfig(
        r=rank,
        lora_alpha=1,
        lora_dropout=0.0,
        bias="none",
        task_type="CAUSAL_LM",
        target_modules=DECODER_BLOCKS,
        dema_types=types,
        dema_type=own_type,
        dema_use_share=use_share,
        dema_learn_alpha=learn_alpha,
        dema_alpha_param=alpha_param,
        dema_activation=activation,
    )


def dema_blocks(model: nn.Module, adapter: str = "default") -> Iterator[tuple[str, DeMABlock]]:
    """(module path, block) of every DeMA block holding ``adapter``, in module order."""
    for name, module in model.named_modules():
        if isinstance(module, DeMABlock) and adapter in module._dema_meta:
            yield name, module


#: container -> canonical role in a client's state (``<role>.<l>``).
ROLES: dict[str, str] = {
    "lora_down": "down",
    "lora_up": "up",
    "lora_mix": "mix",
    "lora_own_down": "own_down",
    "lora_own_up": "own_up",
    "lora_bank_down": "bank_down",
    "lora_bank_up": "bank_up",
}


def canonical_keys(model: nn.Module, adapter: str = "default") -> dict[str, str]:
    """peft state-dict key -> architecture-independent key ``<role>.<l>`` (``down.3``, ``own_up.0``, ``bank_down.2``)
    for every adapter tensor, so that a client's state and the server's messages name blocks, not module paths."""
    out: dict[str, str] = {}
    for name, block in dema_blocks(model, adapter):
        l = block._dema_meta[adapter]["block"]
        for container, role in ROLES.items():
            if adapter not in getattr(block, container):
                continue
            suffix = ".weight" if container in ("lora_down", "lora_up") else ""
            out[f"{name}.{container}{suffix}"] = f"{role}.{l}"
    return out


def fold_state(state: dict[str, torch.Tensor], own_type: int, alpha_param: str = "raw") -> dict[str, torch.Tensor]:
    """The inference merge (paper Eq. 3): a DeMA client state (canonical keys) -> the state of the plain adapter
    (``down.<l>``, ``up.<l>``) computing the same function: A' = W_down P_down, B' = P_up W_up.

    Loaded into a Homo-Training model of the same architecture it gives the DeMA model's outputs (tested to 1e-5 in
    float32). Computed in float64.
    """
    out: dict[str, torch.Tensor] = {}
    blocks = sorted({int(k.split(".")[1]) for k in state if k.startswith("down.")})
    for l in blocks:
        raw = state[f"mix.{l}"].double()
        a = torch.softmax(raw, 0) if alpha_param == "softmax" else raw
        bank_d, bank_u = state[f"bank_down.{l}"].double().clone(), state[f"bank_up.{l}"].double().clone()
        bank_d[own_type], bank_u[own_type] = state[f"own_down.{l}"].double(), state[f"own_up.{l}"].double()
        p_down, p_up = torch.einsum("i,irs->rs", a, bank_d), torch.einsum("i,irs->rs", a, bank_u)
        w_down = state[f"down.{l}"].double().T  # m x r
        w_up = state[f"up.{l}"].double().T  # r x m
        out[f"down.{l}"] = (w_down @ p_down).T.to(state[f"down.{l}"].dtype).contiguous()
        out[f"up.{l}"] = (p_up @ w_up).T.to(state[f"up.{l}"].dtype).contiguous()
    return out
