"""Adapter configurations through ``peft``, and where method-specific adapters plug in.

Baselines use plain LoRA on the language model's linear layers. Method-specific
adapters (FedMosaic's PQ-LoRA, HeteroTune's DeMA, pFedMMA's multi-modal adapters)
must go through peft's own extension points, never by patching modules by hand:

* **custom LoRA layers** — ``LoraConfig._register_custom_module({nn.Linear: MyLoraLayer})``
  makes peft build ``MyLoraLayer`` (a subclass of ``peft.tuners.lora.LoraLayer``) for
  every targeted linear; :func:`with_custom_layers` wraps that call. The layer's
  parameters must carry the usual adapter-name-keyed ``ModuleDict``/``ParameterDict``
  entries (as ``lora_A``/``lora_B`` do) so ``get_peft_model_state_dict`` sees them;
  attribute names listed in ``adapter_layer_names`` are what the pool swaps.
* **whole new tuners** — ``peft.utils.register_peft_method(name=..., config_cls=...,
  model_cls=...)`` (requires a ``PeftType`` member; peft keeps that enum closed, so in
  practice new methods subclass LoRA's config and layers as above).

Default targets: every linear layer of the language model's decoder blocks
(q/k/v/o and the gated MLP), as the FedMosaic paper does ("LoRA on all linear layers
of the LLM backbone"); the vision tower and projector stay frozen. Default rank 8,
alpha 16, no dropout (deterministic training), scaled down from the paper's ranks
128 (MLLM) / 16 (text LLM) for models whose hidden size is 48-128.
"""

from __future__ import annotations

from typing import Any

# Full-match regex over module names: LLM decoder linears, excluding anything in the vision tower.
LLM_LINEAR_TARGETS = r"^(?!.*vision_tower).*\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)$"


def lora_config(
    r: int = 8,
    alpha: int = 16,
    dropout: float = 0.0,
    target_modules: str | list[str] = LLM_LINEAR_TARGETS,
    **kwargs: Any,
):
    """A causal-LM ``LoraConfig`` on the language model's linear layers (see module docstring)."""
    from peft import LoraConfig

    return LoraConfig(
        r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=target_modules, task_type="CAUSAL_LM", **kwargs
    )


def with_custom_layers(config: Any, mapping: dict[type, type]) -> Any:
    """Register custom LoRA layer classes on ``config`` (peft's custom-module dispatch) and return it."""
    config._register_custom_module(mapping)
    return config
