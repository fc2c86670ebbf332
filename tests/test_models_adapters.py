"""Adapters: LoRA targets the LLM only; method-specific layers plug in through peft's custom-module dispatch."""

from __future__ import annotations

import torch
from torch import nn

from drake_bench.models import engine
from drake_bench.models.adapters import lora_config, with_custom_layers
from drake_bench.models.pool import ModelPool
from drake_bench.models.testing import toy_loader, toy_samples


class GatedLoraLinear(__import__("peft").tuners.lora.layer.Linear):
    """A method-specific LoRA layer (a learnable per-adapter gate on the low-rank update)."""

    adapter_layer_names = ("lora_A", "lora_B", "lora_embedding_A", "lora_embedding_B", "lora_gate")

    def update_layer(self, adapter_name, r, lora_alpha, config, **kwargs):
        if "lora_gate" not in self._modules:  # before super(): it activates every adapter_layer_names entry
            self.lora_gate = nn.ParameterDict()
        self.lora_gate[adapter_name] = nn.Parameter(torch.ones(1))
        super().update_layer(adapter_name, r, lora_alpha=lora_alpha, config=config, **kwargs)

    def forward(self, x, *args, **kwargs):
        result = self.base_layer(x, *args, **kwargs)
        for a in self.active_adapters:
            if a in self.lora_A:
                delta = self.lora_B[a](self.lora_A[a](self.lora_dropout[a](x))) * self.scaling[a]
                result = result + self.lora_gate[a] * delta
        return result


def test_default_lora_targets_language_model_linears_only():
    pool = ModelPool({0: "tiny-llava-llama-s"}, lora_config(r=4), loader=toy_loader)
    names = [n for n, p in pool.model_for(0).named_parameters() if p.requires_grad]
    assert names and all("language_model" in n for n in names)
    kinds = {n.split(".lora_")[0].rsplit(".", 1)[-1] for n in names}
    assert kinds == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
    assert len(names) == 2 * 7 * 4  # A and B, 7 linears, 4 layers


def test_custom_layer_through_peft_dispatch_is_swapped_per_client():
    torch.set_num_threads(1)
    config = with_custom_layers(lora_config(r=4), {nn.Linear: GatedLoraLinear})
    pool = ModelPool({0: "tiny-qwen2-s", 1: "tiny-qwen2-s"}, config, loader=toy_loader)
    model = pool.model_for(0)
    assert any(isinstance(m, GatedLoraLinear) for m in model.modules())
    state = pool.get_state(0)
    gates = [k for k in state if "lora_gate" in k]
    assert len(gates) == 7 * 4
    batch = toy_samples(4, seed=0, with_images=False)
    with pool.use(0) as m:
        opt = torch.optim.SGD(pool.trainable_parameters(0), lr=0.5)
        for _ in range(3):
            engine.train_step(m, pool.processor(0), batch, opt)
    g0 = pool.get_state(0)
    assert any(not torch.equal(g0[k], torch.ones(1)) for k in gates)  # the gates trained
    assert all(torch.equal(pool.get_state(1)[k], torch.ones(1)) for k in gates)  # client 1 untouched
    enc = {k: v for k, v in engine.encode_for_training(model, pool.processor(0), batch).items() if k != "labels"}
    with torch.no_grad():
        out0 = pool.model_for(0)(**enc).logits.clone()
        pool.model_for(1)
        assert torch.equal(pool.model_for(0)(**enc).logits, out0)
