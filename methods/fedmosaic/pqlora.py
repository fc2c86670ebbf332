"""PQ-LoRA and the FedMosaic dual local/global adapter, integrated through peft's extension points.

Why this shape: peft (>= 0.21) lets a ``LoraConfig`` register a custom layer class for a base
module type (``LoraConfig._register_custom_module``, checked first by the LoRA dispatcher) and
lets a layer resolve a ``LoraVariant`` from a config field tagged ``is_lora_variant``. We use
both: ``PQLoraConfig`` (a ``LoraConfig``) maps ``nn.Linear`` to ``FedMosaicLinear`` (a
``peft.tuners.lora.Linear``), whose ``FedMosaicVariant`` adds P/Q, the frozen global path and the
gate, and declares the frozen weights via peft's ``frozen_peft_weight_names`` so that peft's own
``set_adapter`` keeps A/B (PQ) and the global path frozen. Everything stays a normal
``get_peft_model`` / ``PeftModel``; adapter weights carry the ``lora_`` prefix, so peft's
``get_peft_model_state_dict`` includes them.

Per module (adapter ``a``), with g = sigmoid(beta) (Sec. 4.2, Eq. 5 and Eq. 7):
- PQ module (every linear module of an Eq. 6 layer, which gives the paper's App. A.9 saving):
  h = W h_I + B( (1-g) (P A h_I + Q) + g (P_glob A h_I + Q_glob) ),
  A = ``lora_A[a].weight`` (r x d_in, orthonormal rows, frozen), B = ``lora_B[a].weight``
  (d_out x r, orthonormal columns, frozen), P (r x r) and Q (r) trainable ``lora_P``/``lora_Q``;
  no LoRA scaling (Eq. 5 as written); [R] P = Q = 0 at init, so every client starts at its base.
- conventional module: h = W h_I + s ((1-g) B_L A_L h_I + g B_G A_G h_I), s = alpha/r; the local
  factors are peft's own ``lora_A``/``lora_B`` ([R] peft's default init, s = 2r as LLaVA), the global ones
  ``lora_gA``/``lora_gB`` are frozen and start equal to the local ones (L_i = G_i = E, Alg. 1).
- beta (``lora_beta``, init 0 so g = 0.5, Alg. 1) is one scalar per decoder layer after
  ``tie_layer_gates`` ([P] Algorithm 1); without tying it is per module ([R] an option).
With ``dual_path=False`` the global path and the gate are absent (plain PQ-LoRA + LoRA).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any, Iterator

import torch
import torch.nn.functional as F
from peft import LoraConfig, PeftModel, get_peft_model
from peft.tuners.lora.layer import Linear as LoraLinear
from peft.tuners.lora.layer import LoraVariant
from torch import nn

from .blocks import layer_index_from_key, layer_relative_name
from .config import FedMosaicConfig
from .linalg import random_orthonormal_cols, random_orthonormal_rows

#: Extra per-adapter weights of a FedMosaic layer (all carry peft's ``lora_`` prefix).
FM_WEIGHT_NAMES: tuple[str, ...] = ("lora_P", "lora_Q", "lora_gA", "lora_gB", "lora_gP", "lora_gQ", "lora_beta")


@dataclass
class PQLoraConfig(LoraConfig):
    """``LoraConfig`` for FedMosaic: PQ-LoRA on ``pq_layers`` and conventional LoRA elsewhere.

    Pass it to ``get_peft_model`` (or a model pool); ``attach_fedmosaic`` also ties the
    per-layer gates. Build it with ``make_pq_lora_config`` from a ``FedMosaicConfig``.
    """

    pq_layers: list[int] = field(default_factory=list, metadata={"help": "0-based PQ decoder layers (Eq. 6)."})
    dual_path: bool = field(default=True, metadata={"help": "Local + frozen global path with gate (Eq. 7)."})
    gate_init: float = field(default=0.0, metadata={"help": "Initial beta; sigmoid(0) = 0.5 (Alg. 1)."})
    pq_seed: int = field(default=0, metadata={"help": "Seed of the random orthonormal A/B before alignment."})
    pq_lora: bool = field(default=True, metadata={"is_lora_variant": True, "help": "Enable FedMosaicVariant."})

    def __post_init__(self) -> None:
        super().__post_init__()
        self._register_custom_module({nn.Linear: FedMosaicLinear})


def _stable_seed(seed: int, key: str) -> int:
    """Seed independent of Python's hash randomisation, so A/B init is reproducible per module."""
    return (seed * 1_000_003 + zlib.crc32(key.encode())) % (2**63 - 1)


def _freeze(module: "FedMosaicLinear", adapter: str, names: tuple[str, ...]) -> None:
    """Declare weights peft must keep frozen (same mechanism as peft's MiCA variant)."""
    frozen = dict(module.frozen_peft_weight_names)
    current = frozen.get(adapter, ())
    frozen[adapter] = current + tuple(n for n in names if n not in current)
    module.frozen_peft_weight_names = frozen
    module._freeze_non_trainable_peft_weights(adapter)


class FedMosaicVariant(LoraVariant):
    """LoRA variant implementing PQ-LoRA / dual-path conventional LoRA (see module docstring)."""

    def supports_lora_conversion(self) -> bool:
        return False

    @staticmethod
    def init(module: "FedMosaicLinear", adapter_name: str, config: PQLoraConfig | None = None, **kwargs: Any) -> None:
        if config is None:
            raise ValueError("FedMosaicVariant.init needs the PQLoraConfig")
        target_name = kwargs.get("target_name", "") or ""
        layer = layer_index_from_key(target_name)
        rel = layer_relative_name(target_name) or target_name
        is_pq = layer is not None and layer in config.pq_layers
        r = module.r[adapter_name]
        weight = module.lora_A[adapter_name].weight
        module._fm_meta[adapter_name] = {
            "is_pq": is_pq,
            "layer": layer,
            "rel": rel,
            "block": config.pq_layers.index(layer) if is_pq else None,
            "dual": config.dual_path,
        }
        frozen: tuple[str, ...] = ()
        with torch.no_grad():
            if is_pq:
                if r > min(module.in_features, module.out_features):
                    raise ValueError(f"PQ rank {r} exceeds the dims of {target_name}")
                gen = torch.Generator().manual_seed(_stable_seed(config.pq_seed, f"{layer}.{rel}"))
                module.lora_A[adapter_name].weight.copy_(random_orthonormal_rows(r, module.in_features, gen))
                module.lora_B[adapter_name].weight.copy_(random_orthonormal_cols(module.out_features, r, gen))
                module.lora_P[adapter_name] = nn.Parameter(weight.new_zeros(r, r))
                module.lora_Q[adapter_name] = nn.Parameter(weight.new_zeros(r))
                frozen += ("lora_A", "lora_B")
                if config.dual_path:
                    module.lora_gP[adapter_name] = nn.Parameter(weight.new_zeros(r, r), requires_grad=False)
                    module.lora_gQ[adapter_name] = nn.Parameter(weight.new_zeros(r), requires_grad=False)
                    frozen += ("lora_gP", "lora_gQ")
            elif config.dual_path:
                a = module.lora_A[adapter_name].weight.detach().clone()
                b = module.lora_B[adapter_name].weight.detach().clone()
                module.lora_gA[adapter_name] = nn.Parameter(a, requires_grad=False)
                module.lora_gB[adapter_name] = nn.Parameter(b, requires_grad=False)
                frozen += ("lora_gA", "lora_gB")
            if config.dual_path:
                module.lora_beta[adapter_name] = nn.Parameter(weight.new_full((1,), float(config.gate_init)))
        if frozen:
            _freeze(module, adapter_name, frozen)

    @staticmethod
    def forward(
        module: "FedMosaicLinear", active_adapter: str, x: torch.Tensor, result: torch.Tensor, **kwargs: Any
    ) -> torch.Tensor:
        a = active_adapter
        meta = module._fm_meta[a]
        xd = module.lora_dropout[a](x)
        dual = meta["dual"]
        g = torch.sigmoid(module.gate_param(a)) if dual else None
        if meta["is_pq"]:
            z = F.linear(xd, module.lora_A[a].weight)
            code = F.linear(z, module.lora_P[a]) + module.lora_Q[a]
            if dual:
                code_g = F.linear(z, module.lora_gP[a]) + module.lora_gQ[a]
                code = (1 - g) * code + g * code_g
            return result + F.linear(code, module.lora_B[a].weight)
        scaling = module.scaling[a]
        h = module.lora_B[a](module.lora_A[a](xd)) * scaling
        if dual:
            h_g = F.linear(F.linear(xd, module.lora_gA[a]), module.lora_gB[a]) * scaling
            h = (1 - g) * h + g * h_g
        return result + h

    @staticmethod
    def merge_safe(module: "FedMosaicLinear", active_adapter: str, orig_weight: torch.Tensor) -> torch.Tensor:
        module._check_mergeable(active_adapter)
        return orig_weight + module.get_delta_weight(active_adapter).to(orig_weight.dtype)

    @staticmethod
    def merge_unsafe(module: "FedMosaicLinear", active_adapter: str, orig_weight: torch.Tensor) -> None:
        module._check_mergeable(active_adapter)
        orig_weight.data += module.get_delta_weight(active_adapter).to(orig_weight.dtype)

    @staticmethod
    def unmerge(module: "FedMosaicLinear", active_adapter: str, orig_weight: torch.Tensor) -> torch.Tensor:
        return orig_weight - module.get_delta_weight(active_adapter).to(orig_weight.dtype)


class FedMosaicLinear(LoraLinear):
    """peft LoRA ``Linear`` whose variant is ``FedMosaicVariant`` (registered by ``PQLoraConfig``)."""

    adapter_layer_names = LoraLinear.adapter_layer_names + FM_WEIGHT_NAMES

    @property
    def lora_variants(self) -> dict[tuple[str, ...], type[LoraVariant] | None]:
        return {(): None, ("pq_lora",): FedMosaicVariant}

    def update_layer(self, adapter_name: str, r: int, lora_alpha: int, config: LoraConfig, **kwargs: Any) -> None:
        for name in FM_WEIGHT_NAMES:
            if name not in self._modules:
                setattr(self, name, nn.ParameterDict())
        if "_fm_meta" not in self.__dict__:
            self._fm_meta: dict[str, dict[str, Any]] = {}
            self._fm_gate_ref: dict[str, nn.Parameter] = {}
        super().update_layer(adapter_name, r, lora_alpha=lora_alpha, config=config, **kwargs)

    # -- helpers used by the variant and the state functions --
    def gate_param(self, adapter: str) -> nn.Parameter:
        """This module's beta, or the per-layer beta owned by another module after tying."""
        if adapter in self.lora_beta:
            return self.lora_beta[adapter]
        return self._fm_gate_ref[adapter]

    def is_pq(self, adapter: str = "default") -> bool:
        return bool(self._fm_meta[adapter]["is_pq"])

    def get_delta_weight(self, adapter: str) -> torch.Tensor:
        """Effective dense update of the weight (gate-mixed local/global); Q is a bias, see get_delta_bias."""
        if adapter not in self._fm_meta:
            return super().get_delta_weight(adapter)
        meta = self._fm_meta[adapter]
        g = torch.sigmoid(self.gate_param(adapter)) if meta["dual"] else None
        if meta["is_pq"]:
            p = self.lora_P[adapter]
            if g is not None:
                p = (1 - g) * p + g * self.lora_gP[adapter]
            return self.lora_B[adapter].weight @ p @ self.lora_A[adapter].weight
        s = self.scaling[adapter]
        delta = self.lora_B[adapter].weight @ self.lora_A[adapter].weight
        if g is not None:
            delta = (1 - g) * delta + g * (self.lora_gB[adapter] @ self.lora_gA[adapter])
        return delta * s

    def get_delta_bias(self, adapter: str) -> torch.Tensor | None:
        """B Q (gate-mixed) for PQ modules; None for conventional ones."""
        meta = self._fm_meta.get(adapter)
        if not meta or not meta["is_pq"]:
            return None
        q = self.lora_Q[adapter]
        if meta["dual"]:
            g = torch.sigmoid(self.gate_param(adapter))
            q = (1 - g) * q + g * self.lora_gQ[adapter]
        return self.lora_B[adapter].weight @ q

    def _check_mergeable(self, adapter: str) -> None:
        bias = self.get_delta_bias(adapter)
        if bias is not None and bool(torch.any(bias != 0)):
            raise NotImplementedError("PQ-LoRA with Q != 0 adds a bias term; merging is not supported.")


# ----------------------------------------------------------------------------------------------
# Construction
# ----------------------------------------------------------------------------------------------


def num_decoder_layers(model: nn.Module) -> int:
    """Number of decoder layers of a transformers causal LM (``config.num_hidden_layers``)."""
    cfg = getattr(model, "config", None)
    n = getattr(cfg, "num_hidden_layers", None)
    if n is None:
        raise ValueError("model.config.num_hidden_layers is required to place PQ-LoRA")
    return int(n)


def make_pq_lora_config(num_layers: int, cfg: FedMosaicConfig, **overrides: Any) -> PQLoraConfig:
    """PQLoraConfig for a decoder of ``num_layers`` layers from the method config."""
    kwargs: dict[str, Any] = dict(
        r=cfg.rank,
        lora_alpha=cfg.conv_alpha,
        lora_dropout=0.0,
        target_modules=list(cfg.target_modules),
        bias="none",
        task_type="CAUSAL_LM",
        pq_layers=cfg.pq_layers(num_layers),
        dual_path=cfg.dual_path,
        gate_init=cfg.gate_init,
        pq_seed=cfg.pq_seed,
    )
    kwargs.update(overrides)
    return PQLoraConfig(**kwargs)


def attach_fedmosaic(
    model: nn.Module,
    config: FedMosaicConfig | PQLoraConfig,
    adapter_name: str = "default",
    gate_granularity: str | None = None,
) -> PeftModel:
    """Wrap ``model`` with FedMosaic adapters and tie gates per layer (unless per-module is asked)."""
    if isinstance(config, FedMosaicConfig):
        granularity = gate_granularity or config.gate_granularity
        peft_cfg = make_pq_lora_config(num_decoder_layers(model), config)
    else:
        granularity = gate_granularity or "layer"
        peft_cfg = config
    peft_model = get_peft_model(model, peft_cfg, adapter_name=adapter_name)
    if peft_cfg.dual_path and granularity == "layer":
        tie_layer_gates(peft_model, adapter_name)
    return peft_model


def fedmosaic_layers(model: nn.Module, adapter: str = "default") -> Iterator[tuple[str, FedMosaicLinear]]:
    """(module path, layer) for every FedMosaic layer holding ``adapter``, in module order."""
    for name, module in model.named_modules():
        if isinstance(module, FedMosaicLinear) and adapter in module._fm_meta:
            yield name, module


def tie_layer_gates(model: nn.Module, adapter: str = "default") -> int:
    """Share one beta per decoder layer (Alg. 1): the first module of a layer owns it.

    Non-owners drop their own beta and reference the owner's, so state dicts hold exactly one
    beta per layer (no shared storage, safetensors-safe). Idempotent; returns the number of gates.
    """
    owners: dict[int, nn.Parameter] = {}
    for _, module in fedmosaic_layers(model, adapter):
        meta = module._fm_meta[adapter]
        if not meta["dual"]:
            continue
        layer = meta["layer"]
        if layer not in owners:
            owners[layer] = module.gate_param(adapter)
            continue
        if adapter in module.lora_beta:
            del module.lora_beta[adapter]
        module._fm_gate_ref[adapter] = owners[layer]
    return len(owners)


# ----------------------------------------------------------------------------------------------
# State access (keys are architecture-independent for PQ modules: matched by block and module)
# ----------------------------------------------------------------------------------------------


def _pq_key(meta: dict[str, Any]) -> str:
    return f"pq.{meta['block']}.{meta['rel']}"


def _conv_key(meta: dict[str, Any]) -> str:
    return f"conv.{meta['layer']}.{meta['rel']}"


def local_state(model: nn.Module, adapter: str = "default") -> dict[str, torch.Tensor]:
    """Shareable local adapter L_i: P/Q of PQ modules (``pq.{k}.{module}.P|Q``) and A/B of
    conventional ones (``conv.{layer}.{module}.A|B``). Detached clones, float32."""
    out: dict[str, torch.Tensor] = {}
    for _, m in fedmosaic_layers(model, adapter):
        meta = m._fm_meta[adapter]
        if meta["is_pq"]:
            out[_pq_key(meta) + ".P"] = m.lora_P[adapter].detach().float().clone()
            out[_pq_key(meta) + ".Q"] = m.lora_Q[adapter].detach().float().clone()
        else:
            out[_conv_key(meta) + ".A"] = m.lora_A[adapter].weight.detach().float().clone()
            out[_conv_key(meta) + ".B"] = m.lora_B[adapter].weight.detach().float().clone()
    return out


def global_state(model: nn.Module, adapter: str = "default") -> dict[str, torch.Tensor]:
    """The frozen global adapter G_i with the same keys as ``local_state``."""
    out: dict[str, torch.Tensor] = {}
    for _, m in fedmosaic_layers(model, adapter):
        meta = m._fm_meta[adapter]
        if not meta["dual"]:
            raise ValueError("model has no global path (dual_path=False)")
        if meta["is_pq"]:
            out[_pq_key(meta) + ".P"] = m.lora_gP[adapter].detach().float().clone()
            out[_pq_key(meta) + ".Q"] = m.lora_gQ[adapter].detach().float().clone()
        else:
            out[_conv_key(meta) + ".A"] = m.lora_gA[adapter].detach().float().clone()
            out[_conv_key(meta) + ".B"] = m.lora_gB[adapter].detach().float().clone()
    return out


def _load(model: nn.Module, state: dict[str, torch.Tensor], adapter: str, target: str, strict: bool) -> set[str]:
    used: set[str] = set()
    names = {"local": ("lora_P", "lora_Q", "lora_A", "lora_B"), "global": ("lora_gP", "lora_gQ", "lora_gA", "lora_gB")}
    p_name, q_name, a_name, b_name = names[target]
    with torch.no_grad():
        for _, m in fedmosaic_layers(model, adapter):
            meta = m._fm_meta[adapter]
            if meta["is_pq"]:
                pairs = [(_pq_key(meta) + ".P", getattr(m, p_name)), (_pq_key(meta) + ".Q", getattr(m, q_name))]
            else:
                pairs = [(_conv_key(meta) + ".A", getattr(m, a_name)), (_conv_key(meta) + ".B", getattr(m, b_name))]
            for key, pdict in pairs:
                if key not in state:
                    if strict:
                        raise KeyError(f"missing {key}")
                    continue
                dst = pdict[adapter]
                dst = dst.weight if isinstance(dst, nn.Linear) else dst
                if dst.shape != state[key].shape:
                    raise ValueError(f"{key}: shape {tuple(state[key].shape)} != {tuple(dst.shape)}")
                dst.copy_(state[key].to(dst.dtype))
                used.add(key)
    if strict and set(state) - used:
        raise KeyError(f"unexpected keys: {sorted(set(state) - used)[:5]}")
    return used


def load_global_state(
    model: nn.Module, state: dict[str, torch.Tensor], adapter: str = "default", strict: bool = False
) -> set[str]:
    """Write a customised global adapter G_i into the frozen global path; returns keys used.

    Non-strict by default because a server message may carry only PQ keys (conv_agg='none')."""
    return _load(model, state, adapter, "global", strict)


def load_local_state(
    model: nn.Module, state: dict[str, torch.Tensor], adapter: str = "default", strict: bool = False
) -> set[str]:
    """Overwrite the local adapter (e.g. the fast-adaptation start from the aggregated local adapters)."""
    return _load(model, state, adapter, "local", strict)


def gate_values(model: nn.Module, adapter: str = "default") -> dict[str, float]:
    """sigmoid(beta) per gate owner (module path) - the beta~ of Eq. 7, for logging."""
    out: dict[str, float] = {}
    for name, m in fedmosaic_layers(model, adapter):
        if adapter in m.lora_beta:
            out[name] = float(torch.sigmoid(m.lora_beta[adapter]).item())
    return out


def pq_bases(model: nn.Module, adapter: str = "default") -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Frozen (A, B) of every PQ module keyed ``{block}.{module}`` (used by alignment)."""
    out: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    for _, m in fedmosaic_layers(model, adapter):
        meta = m._fm_meta[adapter]
        if meta["is_pq"]:
            out[f"{meta['block']}.{meta['rel']}"] = (
                m.lora_A[adapter].weight.detach().float().clone(),
                m.lora_B[adapter].weight.detach().float().clone(),
            )
    return out


def set_pq_bases(
    model: nn.Module, bases: dict[str, tuple[torch.Tensor, torch.Tensor]], adapter: str = "default"
) -> None:
    """Overwrite the frozen (A, B) of PQ modules (after alignment); shapes must match."""
    with torch.no_grad():
        for _, m in fedmosaic_layers(model, adapter):
            meta = m._fm_meta[adapter]
            key = f"{meta['block']}.{meta['rel']}"
            if meta["is_pq"] and key in bases:
                a, b = bases[key]
                m.lora_A[adapter].weight.copy_(a)
                m.lora_B[adapter].weight.copy_(b)


def pq_modules(model: nn.Module, adapter: str = "default") -> dict[str, FedMosaicLinear]:
    """PQ layers keyed ``{block}.{module}``."""
    return {
        f"{m._fm_meta[adapter]['block']}.{m._fm_meta[adapter]['rel']}": m
        for _, m in fedmosaic_layers(model, adapter)
        if m._fm_meta[adapter]["is_pq"]
    }


def param_groups(model: nn.Module, cfg: FedMosaicConfig) -> list[dict[str, Any]]:
    """AdamW groups: P/Q at ``lr_pq``; [R] conventional LoRA and beta at ``lr_other`` (App. A.6's "other parameters")."""
    pq, other = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (pq if (".lora_P." in name or ".lora_Q." in name) else other).append(p)
    groups = [{"params": pq, "lr": cfg.lr_pq}, {"params": other, "lr": cfg.lr_other}]
    return [g for g in groups if g["params"]]


def pq_delta_weight(a: torch.Tensor, b: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """Dense update B P A of a PQ module (pure function, used by the theorem checks)."""
    return b @ p @ a
