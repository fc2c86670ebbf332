#!/usr/bin/env python
"""Benchmark the model zoo and training core (not a test): writes docs/models.md.

Measures, on this machine:
  * matmul peak (fp32 GEMM, 1024^3) for the thread count in use;
  * time per LoRA training step per zoo model (batch 4; multimodal items carry 1-5
    images), its FLOPs (torch's FlopCounterMode) and achieved FLOP/s vs the peak;
  * pool adapter swap time (in memory and offloaded to safetensors);
  * pool memory with 1, 10 and 52 clients of one architecture;
  * pretraining time and public-mix knowledge: token-F1 of greedy answers on held-out
    public items for each pretrained tiny model vs the same model untrained.

Usage: python scripts/bench_models.py [--models tiny-llava-llama-s ...] [--skip-knowledge]
       [--threads N] [--out docs/models.md] [--json bench.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode

from drake_bench.benchmarks.sample import Sample
from drake_bench.models import engine
from drake_bench.models.adapters import lora_config
from drake_bench.models.pool import ModelPool
from drake_bench.models.testing import toy_image, toy_loader, toy_samples
from drake_bench.models.tokenizer import IMAGE_TOKENS
from drake_bench.models.zoo import build_tiny, model_info, tiny_config, tiny_names


def matmul_peak(n: int = 1024, reps: int = 20) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    for _ in range(3):
        a @ b
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t)
    return 2 * n**3 / best


def step_batch(multimodal: bool) -> list[Sample]:
    """Batch 4; multimodal items carry 1, 2, 3 and 5 images (the heaviest DRAKE-like mix)."""
    base = toy_samples(4, seed=11, with_images=False)
    if not multimodal:
        return base
    counts = [1, 2, 3, 5]
    return [
        s.model_copy(update={"images": [toy_image("red")] * c, "question": "What colour is the square?"})
        for s, c in zip(base, counts)
    ]


def bench_steps(names: list[str], reps: int) -> list[dict]:
    rows = []
    for name in names:
        mm = bool(model_info(name).multimodal)
        pool = ModelPool({0: name}, lora_config(), loader=toy_loader)
        model, proc = pool.model_for(0), pool.processor(0)
        opt = torch.optim.AdamW(pool.trainable_parameters(0), lr=1e-4)
        batch = step_batch(mm)
        engine.train_step(model, proc, batch, opt)  # warm-up
        with FlopCounterMode(display=False) as fc:
            engine.train_step(model, proc, batch, opt)
        flops = fc.get_total_flops()
        times = []
        for _ in range(reps):
            t = time.perf_counter()
            engine.train_step(model, proc, batch, opt)
            times.append(time.perf_counter() - t)
        cfg = tiny_config(name)
        text = cfg.text_config if mm else cfg
        t = time.perf_counter()
        engine.generate(model, proc, batch, max_new_tokens=16)
        gen = time.perf_counter() - t
        rows.append(
            {
                "model": name,
                "hidden": text.hidden_size,
                "layers": text.num_hidden_layers,
                "params": sum(p.numel() for p in model.parameters() if not p.requires_grad),
                "lora_params": sum(p.numel() for p in pool.trainable_parameters(0)),
                "step_ms": 1000 * statistics.median(times),
                "gflop_per_step": flops / 1e9,
                "gen16_ms": 1000 * gen,
            }
        )
        print(rows[-1], flush=True)
    return rows


def bench_pool(name: str, counts=(1, 10, 52), swaps: int = 40) -> dict:
    out: dict = {"model": name, "memory": {}, "swap_ms": {}}
    for n in counts:
        pool = ModelPool({c: name for c in range(n)}, lora_config(), loader=toy_loader)
        pool.model_for(0)
        out["memory"][n] = pool.memory_report()
    pool = ModelPool({c: name for c in range(52)}, lora_config(), loader=toy_loader)
    pool.model_for(0)
    t = time.perf_counter()
    for i in range(swaps):
        pool.model_for(1 + i % 51)
    out["swap_ms"]["memory"] = 1000 * (time.perf_counter() - t) / swaps
    with tempfile.TemporaryDirectory() as d:
        pool = ModelPool({c: name for c in range(52)}, lora_config(), loader=toy_loader, offload_dir=d)
        pool.model_for(0)
        t = time.perf_counter()
        for i in range(swaps):
            pool.model_for(1 + i % 51)
        out["swap_ms"]["disk"] = 1000 * (time.perf_counter() - t) / swaps
    print(out, flush=True)
    return out


def bench_knowledge(names: list[str], n_eval: int) -> list[dict]:
    from drake_bench.benchmarks.synth.public import public_mix, public_text_mix
    from drake_bench.models import load_base
    from drake_bench.models.pretrain import checkpoint_dir, public_eval

    rows = []
    for name in names:
        mm = bool(model_info(name).multimodal)
        held_out = public_mix(n_eval, seed=12345) if mm else public_text_mix(n_eval, seed=12345)
        t = time.perf_counter()
        model, proc = load_base(name, source="pretrain")  # the pretraining record (time, losses) is the local cache's
        load_s = time.perf_counter() - t
        rec = json.loads((checkpoint_dir(name) / "drake_pretrain.json").read_text())
        untrained = build_tiny(name).eval()
        rows.append(
            {
                "model": name,
                "pretrain_s": rec.get("train_seconds"),
                "load_or_build_s": load_s,
                "final_loss": statistics.mean(rec["losses"][-10:]),
                "f1_pretrained": public_eval(model, proc, held_out),
                "f1_untrained": public_eval(untrained, proc, held_out),
            }
        )
        print(rows[-1], flush=True)
    return rows


INTRO = """# Model zoo and training core

`drake_bench.models` provides the client models of every benchmark: tiny but real
`transformers` architectures that train on a laptop CPU, and the same call path for
real checkpoints on a GPU.

## Names

| zoo name | what it is | paper counterpart |
|---|---|---|
| `tiny-llava-llama-{s,m,l}` | `LlavaForConditionalGeneration`: Swin vision tower ({vision}; one pretrained tower shared by every tiny LLaVA) + 2-layer GELU projector + Llama LM | LLaVA-Llama3.2-1B / 3B, LLaVA-Llama3.1-8B |
| `tiny-llava-qwen2-{s,m,l}` | the same around a Qwen2 LM | LLaVA-Qwen2.5-0.5B / 1.5B / 3B |
| `tiny-llama-{s,m,l}` | `LlamaForCausalLM` | Llama-3.2-1B / 3B, Llama-3.1-8B |
| `tiny-qwen2-{s,m,l}` | `Qwen2ForCausalLM` | Qwen2.5-0.5B / 1.5B / 3B |
| `llava-1.5-7b`, `llama-3.2-1b`, `qwen2.5-0.5b`, ... | short names for Hub ids (`llava-hf/llava-1.5-7b-hf`, `meta-llama/Llama-3.2-1B`, `Qwen/Qwen2.5-0.5B`) | |
| any Hub id or local directory | loaded with `from_pretrained` (weights must be local; no download at run time) | |

`architecture_key(name)` (`llava-llama-s`, `qwen2-l`, or the Hub id) groups clients
that can share one frozen base (Fed-ET-style grouping by architecture).

{shapes}

## Use

<!-- no-test: a sketch (needs a batch, test items and, for llava-1.5-7b, real weights) -->
```python
from drake_bench.models import load_base, ModelPool, lora_config, train_step, predict

model, processor = load_base("tiny-llava-llama-s")      # the shipped checkpoint, verified, then from_pretrained
model, processor = load_base("llava-1.5-7b", device="cuda", dtype=torch.bfloat16)  # same call, real weights

pool = ModelPool({0: "tiny-llava-llama-s", 1: "tiny-llava-llama-s", 2: "tiny-llava-qwen2-m"},
                 lora_config(r=8), adapter_names=("local", "global"))
with pool.use(0) as m:                                   # swaps client 0's adapters into the shared base
    opt = torch.optim.AdamW(pool.trainable_parameters(0), lr=2e-4)
    loss = train_step(m, pool.processor(0), batch, opt)
upload = pool.get_state(0, "local")                      # dict[str, Tensor] on CPU (peft state-dict keys)
pool.set_state(1, upload, "global")
answers = predict(pool.model_for(1), pool.processor(1), test_samples)
```

Prompts follow LLaVA-1.5: `USER: <image>\\n<image>\\n{question}\\nA. ...\\nB. ...\\nAnswer with the option
from the given choices directly. ASSISTANT:`; every item trains on its answer text (choice items in cloze form:
the option's text, not its letter, which tiny models never learn to match), with loss on answer tokens only.
`choose` scores each option's text by log-likelihood; `generate` is greedy with left padding. Pretraining
(`drake_bench.models.pretrain`) mirrors LLaVA-1.5: one vision tower, the stand-in for CLIP, is trained once on
public perception pictures (`drake_bench.models.vision`: per-cell object attributes, per-image count, domain,
distortion and text, and which shapes and colours are present; why a Swin tower and how well it perceives:
[the build report](zoo-build.md)) and shared, frozen, by every tiny LLaVA; stage 1 aligns each model's projector to
it on the same targets; stage 2 trains every other parameter on the synthetic public mix (`drake_bench.benchmarks.synth.public`:
generic questions over one or several pictures, nothing about the groups' own skills) with a fixed seeded recipe. `python scripts/build_zoo.py` runs it once per model and ships the result (see
[Shipped weights](#shipped-weights)); with `DRAKE_BENCH_ZOO=pretrain`, `load_base` runs it locally instead and caches
the checkpoint under `$DRAKE_BENCH_MODELS` (default `~/.cache/drake_bench/models`).

## Shipped weights

The tiny models' pretrained weights ship inside the package, so every machine loads the same bytes
and a fresh install never pretrains (a model pretrained on first use comes out slightly different on
each machine, and so did every board's digits). `drake_bench/models/shipped.py` holds the machinery:

* **Where.** `drake_bench/models/weights/<zoo name>/` is a plain `save_pretrained` folder
  (`config.json`, `generation_config.json`, `model.safetensors` in bfloat16 to keep the package small,
  the tokenizer or processor files); `manifest.json` beside the folders records the sha256 of every
  file, the weights' sha256 (`weights_sha256`), the size, the Hub repo and the pretraining recipe.
  `$DRAKE_BENCH_WEIGHTS` points elsewhere (tests, experiments).
* **Verified.** `load_base` checks every file of the model against the manifest before
  `from_pretrained` and loads it in float32 on CPU (`dtype="auto"` keeps bfloat16); `drake-bench run`
  checks the allocation's models once before any worker starts, one line per model. A changed,
  missing or extra file raises `CheckpointError` naming the file, both hashes and the way back.
* **Recorded.** A result file's `model_allocation.checkpoints` holds each tiny model's
  `weights_sha256`; `drake-bench report` refuses to put results of different weights for one model
  name on one board, and says which results (older boards) identify their weights by recipe only.
* **On the Hub.** Each folder is also the model repo `drake-bench/<zoo name>`:
  `load_base("drake-bench/tiny-llava-llama-m")` is a plain `from_pretrained` of it, offline too once
  it is in the Hugging Face cache (`hf download drake-bench/tiny-llava-llama-m`, then
  `HF_HUB_OFFLINE=1`; `add_shipped_to_hf_cache` puts the installed folder there on a machine without
  network).
* **Rebuilt** by `python scripts/build_zoo.py` (pretrains every tiny model with the current recipe,
  exports it, writes the manifest; `--publish --no-dry-run` uploads the repos), after changing the
  recipe or the zoo. `DRAKE_BENCH_ZOO=pretrain` (or `load_base(name, source="pretrain")`) pretrains
  locally instead, for developing the recipe; those weights differ across machines, and results
  made with them record the recipe, not a sha256.

The same steps on a random model, in a scratch weights folder:

```python
import os
import tempfile

import torch

from drake_bench.models import load_base, shipped
from drake_bench.models.testing import toy_loader

os.environ["DRAKE_BENCH_WEIGHTS"] = tempfile.mkdtemp()  # the installed folder needs no setting
model, processor = toy_loader("tiny-llava-llama-s")      # random weights stand in for pretrained ones
shipped.export_checkpoint(model, processor, "tiny-llava-llama-s")   # bfloat16 safetensors + processor
shipped.write_manifest(None, recipe={"note": "random init"})       # sha256 of every file

shipped.verify_shipped("tiny-llava-llama-s")              # CheckpointError on any changed byte
identity = shipped.shipped_identity("tiny-llava-llama-s")  # what a result file records
print(identity["weights_sha256"], identity["hub_repo"])
model, processor = load_base("tiny-llava-llama-s", source="shipped")  # the default source
assert model.dtype == torch.float32

plan = shipped.publish_models(["tiny-llava-llama-s"])      # a dry run: repo ids, files, sizes, sha256
print(plan[0]["repo_id"], [(f["path"], f["sha256"][:12]) for f in plan[0]["files"]])
```


"""


def vision_text() -> str:
    from drake_bench.models.zoo import VISION_FEATURE_LAYER, vision_config

    v = vision_config()
    side = v.image_size // (v.patch_size * 2 ** (len(v.depths) - 1))
    return (
        f"{v.image_size} px, {v.patch_size} px patches, {len(v.depths)} stages, {side} x {side} = {side * side} "
        f"tokens of width {v.hidden_size}, read at layer {VISION_FEATURE_LAYER}"
    )


def shapes_table() -> str:
    rows = ["| model | hidden | layers | heads / kv heads | MLP | parameters |", "|---|---|---|---|---|---|"]
    for name in tiny_names():
        cfg = tiny_config(name)
        t = cfg.text_config if model_info(name).multimodal else cfg
        n = sum(p.numel() for p in build_tiny(name).parameters())
        rows.append(
            f"| {name} | {t.hidden_size} | {t.num_hidden_layers} | {t.num_attention_heads} / "
            f"{t.num_key_value_heads} | {t.intermediate_size} | {n / 1e6:.2f}M |"
        )
    return "\n".join(rows)


def render(res: dict) -> str:
    peak = res["peak_flops"]
    L = [
        INTRO.replace("{shapes}", shapes_table()).replace("{vision}", vision_text()),
        "## Measurements",
        "",
        f"Measured by `python scripts/bench_models.py` on {res['machine']} "
        f"({res['threads']} torch thread(s), torch {torch.__version__}). "
        "CPU numbers on a shared 2-core machine vary by 2x or more with other load; "
        "treat them as orders of magnitude.",
        "",
        f"Matmul peak (fp32 GEMM 1024^3, best of 20): **{peak / 1e9:.1f} GFLOP/s**.",
        "",
        "## Training step per model (LoRA r=8 on all LLM linears, batch 4)",
        "",
        f"Multimodal batches carry 1, 2, 3 and 5 images ({IMAGE_TOKENS} image tokens each); text batches are short "
        "instructions. FLOPs counted by `torch.utils.flop_counter.FlopCounterMode` over one step.",
        "",
        "| model | hidden | layers | frozen params | LoRA params | step (ms) | GFLOP/step | achieved GFLOP/s | % of peak | greedy 16 tok, batch 4 (ms) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in res["steps"]:
        ach = r["gflop_per_step"] / (r["step_ms"] / 1000)
        L.append(
            f"| {r['model']} | {r['hidden']} | {r['layers']} | {r['params'] / 1e6:.2f}M | {r['lora_params'] / 1e3:.1f}k | "
            f"{r['step_ms']:.0f} | {r['gflop_per_step']:.2f} | {ach:.1f} | {100 * ach * 1e9 / peak:.0f}% | {r['gen16_ms']:.0f} |"
        )
    p = res["pool"]
    L += [
        "",
        f"## Pool: one frozen base, many clients ({p['model']}, LoRA r=8)",
        "",
        "Bytes counted from the tensors' storages (`ModelPool.memory_report`).",
        "",
        "| clients | base | live adapter slots | per-client adapters | total |",
        "|---|---|---|---|---|",
    ]
    for n, m in p["memory"].items():
        L.append(
            f"| {n} | {m['base_bytes'] / 2**20:.2f} MiB | {m['live_adapter_bytes'] / 2**20:.2f} MiB | "
            f"{m['client_adapter_bytes'] / 2**20:.2f} MiB | {m['total_bytes'] / 2**20:.2f} MiB |"
        )
    L += [
        "",
        f"Adapter swap (save the active client's adapters, load the next one's): "
        f"**{p['swap_ms']['memory']:.2f} ms** in memory, **{p['swap_ms']['disk']:.2f} ms** "
        "offloaded to safetensors files.",
    ]
    if res.get("knowledge"):
        L += [
            "",
            "## Pretraining and public-mix knowledge",
            "",
            f"Token-F1 of greedy answers (32 new tokens) on {res.get('n_eval', 48)} held-out public items (seed 12345, never trained on); "
            "multimodal models on `public_mix` (captions, colour/shape lists, multi-image descriptions, multiple-choice and yes/no items), text "
            "models on `public_text_mix` (translations). Untrained = the same architecture at its random init.",
            "",
            "| model | pretraining (s) | final loss | F1 untrained | F1 pretrained |",
            "|---|---|---|---|---|",
        ]
        for r in res["knowledge"]:
            L.append(
                f"| {r['model']} | {r['pretrain_s']} | {r['final_loss']:.2f} | {r['f1_untrained']:.3f} | "
                f"**{r['f1_pretrained']:.3f}** |"
            )
        if res.get("tower"):
            t = res["tower"]
            acc = ", ".join(f"{k} {v:.2f}" for k, v in t["probe"]["accuracy"].items())
            L += [
                "",
                f"The multimodal models' pretraining time excludes the shared vision tower, trained once for all "
                f"of them ({t['tower_steps']} steps, batch {t['tower_batch']}; linear probes on held-out "
                f"perception pictures: {acc}; from `_vision/drake_pretrain.json`).",
            ]
    L += [
        "",
        "## Notes",
        "",
        "* Pretraining runs single-threaded (identical float summation order for a given seed); steps are "
        "timed with the thread count above. Rerun this script after changing the recipe or the zoo.",
        "* Not measured here: CUDA/bf16 numbers (the engine uses bf16 autocast on CUDA; no GPU on this machine).",
        "* Clients of one architecture share one frozen base; per-client LoRA ranks within an architecture (the "
        "paper's rank-heterogeneous study) are one peft adapter slot per rank on that base "
        "(`ModelPool(client_ranks=...)` in `drake_bench/models/pool.py`; FedMosaic's `client_ranks`, "
        "`docs/methods/fedmosaic.md`).",
    ]
    return "\n".join(L) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=tiny_names())
    ap.add_argument("--pool-model", default="tiny-llava-llama-m")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--skip-knowledge", action="store_true")
    ap.add_argument("--n-eval", type=int, default=48)
    ap.add_argument("--out", default="docs/models.md")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    import os

    res = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores",
        "threads": torch.get_num_threads(),
        "peak_flops": matmul_peak(),
    }
    print("peak GFLOP/s", res["peak_flops"] / 1e9, flush=True)
    res["steps"] = bench_steps(args.models, args.reps)
    res["pool"] = bench_pool(args.pool_model)
    res["n_eval"] = args.n_eval
    res["knowledge"] = [] if args.skip_knowledge else bench_knowledge(args.models, args.n_eval)
    if res["knowledge"]:
        from drake_bench.models.pretrain import DEFAULT_RECIPE
        from drake_bench.models.vision import ensure_vision_tower, tower_report

        res["tower"] = {k: v for k, v in tower_report(ensure_vision_tower(DEFAULT_RECIPE)).items() if k != "losses"}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(render(res))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1, default=str))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
