"""FedMosaic peft integration: PQ-LoRA placement, frozen orthonormal A/B, dual path + gate, states."""

from __future__ import annotations

import torch
from peft import get_peft_model_state_dict
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

from drake_bench.methods.fedmosaic import pqlora as pq
from drake_bench.methods.fedmosaic.config import FedMosaicConfig
from drake_bench.methods.fedmosaic.linalg import orthonormality_error_cols, orthonormality_error_rows

torch.set_num_threads(1)
CFG = FedMosaicConfig.toy()


def tiny(kind: str, seed: int = 0) -> torch.nn.Module:
    """Toy bases S (Llama 64x4), L (Llama 96x8), Q (Qwen2 80x6)."""
    torch.manual_seed(seed)
    common = dict(vocab_size=300, tie_word_embeddings=True, max_position_embeddings=128)
    if kind == "S":
        return LlamaForCausalLM(
            LlamaConfig(
                hidden_size=64,
                intermediate_size=128,
                num_hidden_layers=4,
                num_attention_heads=4,
                num_key_value_heads=2,
                **common,
            )
        )
    if kind == "L":
        return LlamaForCausalLM(
            LlamaConfig(
                hidden_size=96,
                intermediate_size=192,
                num_hidden_layers=8,
                num_attention_heads=6,
                num_key_value_heads=2,
                **common,
            )
        )
    return Qwen2ForCausalLM(
        Qwen2Config(
            hidden_size=80,
            intermediate_size=160,
            num_hidden_layers=6,
            num_attention_heads=5,
            num_key_value_heads=1,
            **common,
        )
    )


def test_pq_placement_and_identical_pq_shapes_across_llama_and_qwen2() -> None:
    shapes = {}
    for kind, layers in (("S", [1, 3]), ("L", [3, 7]), ("Q", [2, 5])):
        m = pq.attach_fedmosaic(tiny(kind), CFG)
        placed = sorted({mod._fm_meta["default"]["layer"] for mod in pq.pq_modules(m).values()})
        assert placed == layers
        state = pq.local_state(m)
        shapes[kind] = {k: tuple(v.shape) for k, v in state.items() if k.startswith("pq.")}
        assert len(shapes[kind]) == 2 * 7 * 2  # N_B blocks x 7 modules x {P, Q}
        assert all(s in ((8, 8), (8,)) for s in shapes[kind].values())
        conv_layers = {int(k.split(".")[1]) for k in state if k.startswith("conv.")}
        assert conv_layers == set(range(m.config.num_hidden_layers)) - set(layers)
    assert shapes["S"] == shapes["L"] == shapes["Q"]


def test_trainable_set_frozen_orthonormal_bases_and_gates() -> None:
    m = pq.attach_fedmosaic(tiny("S"), CFG)
    trainable = [n for n, p in m.named_parameters() if p.requires_grad]
    assert all(any(t in n for t in (".lora_P.", ".lora_Q.", ".lora_beta.", ".lora_A.", ".lora_B.")) for n in trainable)
    for mod in pq.pq_modules(m).values():
        a, b = mod.lora_A["default"].weight, mod.lora_B["default"].weight
        assert not a.requires_grad and not b.requires_grad
        assert orthonormality_error_rows(a) < 1e-5 and orthonormality_error_cols(b) < 1e-5
        assert not mod.lora_gP["default"].requires_grad and mod.lora_P["default"].requires_grad
    for _, mod in pq.fedmosaic_layers(m):
        if not mod.is_pq():
            assert mod.lora_A["default"].weight.requires_grad and not mod.lora_gA["default"].requires_grad
    gates = [n for n in trainable if ".lora_beta." in n]
    assert len(gates) == 4  # one beta per decoder layer (Alg. 1)
    assert set(pq.gate_values(m).values()) == {0.5}
    # per-module gates remain available (an option beside Algorithm 1's per-layer gate)
    m2 = pq.attach_fedmosaic(tiny("S"), CFG, gate_granularity="module")
    assert sum(".lora_beta." in n for n, _ in m2.named_parameters()) == 4 * 7
    # switching adapters through peft keeps A/B frozen (frozen_peft_weight_names)
    m.base_model.set_adapter("default")
    assert all(not mod.lora_A["default"].weight.requires_grad for mod in pq.pq_modules(m).values())


def test_init_equals_base_and_forward_matches_eq5_eq7() -> None:
    base = tiny("S")
    x = torch.randint(0, 300, (2, 7), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ref = base(input_ids=x).logits.clone()
    m = pq.attach_fedmosaic(base, CFG)
    with torch.no_grad():
        assert torch.allclose(m(input_ids=x).logits, ref, atol=1e-5)  # P = Q = 0, conv B = 0
    mod = pq.pq_modules(m)["0.mlp.up_proj"]
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        mod.lora_P["default"].copy_(torch.randn(8, 8, generator=g))
        mod.lora_Q["default"].copy_(torch.randn(8, generator=g))
        mod.lora_gP["default"].copy_(torch.randn(8, 8, generator=g))
        mod.lora_gQ["default"].copy_(torch.randn(8, generator=g))
        mod.gate_param("default").fill_(0.7)
        h = torch.randn(3, 64, generator=g)
        a, b = mod.lora_A["default"].weight, mod.lora_B["default"].weight
        beta = torch.sigmoid(torch.tensor(0.7))
        local = b @ (mod.lora_P["default"] @ (a @ h.T) + mod.lora_Q["default"][:, None])
        glob = b @ (mod.lora_gP["default"] @ (a @ h.T) + mod.lora_gQ["default"][:, None])
        expected = mod.get_base_layer()(h) + ((1 - beta) * local + beta * glob).T
        assert torch.allclose(mod(h), expected, atol=1e-5)
        # delta-weight + delta-bias view agrees with the forward
        dense = mod.get_base_layer()(h) + h @ mod.get_delta_weight("default").T + mod.get_delta_bias("default")
        assert torch.allclose(mod(h), dense, atol=1e-5)


def test_training_step_moves_only_local_and_global_load_changes_output() -> None:
    m = pq.attach_fedmosaic(tiny("S"), CFG)
    x = torch.randint(0, 300, (2, 9), generator=torch.Generator().manual_seed(2))
    bases0 = pq.pq_bases(m)
    glob0 = pq.global_state(m)
    opt = torch.optim.AdamW(pq.param_groups(m, CFG))
    assert [g["lr"] for g in opt.param_groups] == [CFG.lr_pq, CFG.lr_other]
    for _ in range(2):
        loss = m(input_ids=x, labels=x).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    local = pq.local_state(m)
    assert any(float(local[k].abs().sum()) > 0 for k in local if k.endswith(".P"))
    for k, (a, b) in pq.pq_bases(m).items():
        assert torch.equal(a, bases0[k][0]) and torch.equal(b, bases0[k][1])
    glob1 = pq.global_state(m)
    assert all(torch.equal(glob0[k], glob1[k]) for k in glob0)
    assert pq.gate_values(m)["base_model.model.model.layers.0.self_attn.q_proj"] != 0.5
    # server message -> frozen global path
    with torch.no_grad():
        before = m(input_ids=x).logits.clone()
    used = pq.load_global_state(m, {k: v + 0.5 for k, v in local.items() if k.startswith("pq.")})
    assert len(used) == 28 and all(k.startswith("pq.") for k in used)
    with torch.no_grad():
        assert not torch.allclose(m(input_ids=x).logits, before, atol=1e-4)
    assert torch.allclose(pq.global_state(m)["pq.0.mlp.up_proj.P"], local["pq.0.mlp.up_proj.P"] + 0.5)


def test_peft_state_dict_is_safetensors_round_trippable() -> None:
    m = pq.attach_fedmosaic(tiny("Q"), CFG)
    sd = get_peft_model_state_dict(m)
    assert any(k.endswith("lora_P") for k in sd) and any(k.endswith("lora_gQ") for k in sd)
    assert sum(k.endswith("lora_beta") for k in sd) == 6
    back = st_load(st_save({k: v.contiguous() for k, v in sd.items()}))
    assert back.keys() == sd.keys()


def test_no_dual_path_option_is_plain_pq_lora() -> None:
    cfg = FedMosaicConfig.toy(dual_path=False)
    m = pq.attach_fedmosaic(tiny("S"), cfg)
    assert not any(".lora_beta." in n or ".lora_gP." in n for n, _ in m.named_parameters())
    x = torch.randint(0, 300, (1, 5))
    m(input_ids=x, labels=x).loss.backward()


def test_measured_uplink_matches_formula_for_evaluator_message() -> None:
    from drake_bench.methods.fedmosaic import accounting as acc
    from drake_bench.methods.fedmosaic import rela
    from drake_bench.plugins.protocol import Message

    for kind in ("S", "Q"):
        base = tiny(kind)
        n_layers, dims = acc.dims_from_hf_config(base.config)
        m = pq.attach_fedmosaic(base, CFG)
        d_g = 64 * 128  # W_s = S: its last down_proj
        mask = rela.shared_mask(d_g, CFG.n_s, CFG.mask_seed)
        msg = Message(tensors=acc.upload_tensors(pq.local_state(m), torch.zeros(mask.numel())))
        formula = acc.fedmosaic_payload(n_layers, dims, CFG.rank, CFG.n_blocks, d_g, CFG.n_s)
        assert acc.measured_elements(msg.tensors) == formula
        assert msg.num_bytes() == acc.payload_bytes(formula.up, CFG.bytes_per_element) + len("{}")
        full = acc.full_lora_elements(n_layers, dims, CFG.rank)
        assert formula.down < full  # PQ layers are cheaper than conventional LoRA
