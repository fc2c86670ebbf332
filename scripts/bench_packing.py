#!/usr/bin/env python
"""Training steps side by side: the batch's items packed into one sequence against right-padded (the path before).

Every training step of a LoRA entry runs ``engine.train_step``. Right padding filled the token slots of a batch up to
its longest item (items carry 1 to 5 images of 36 tokens), so a third or more of a step's compute went to padding;
packing puts the items one after another, each with its own positions and a block-diagonal causal mask
(``engine.encode_packed``), and applies the LM head to the answer positions only. For each shipped tiny model,
batches of the main job's size drawn from drake-synth's tasks (fresh draws, seed 777, never the benchmark's splits;
text models on fedllm-synth's), LoRA rank 8 as SFT and FedIT train it, one torch thread, the two paths alternating
over ``--repeats`` rounds of ``--steps`` steps each. The table gives per model: the token slots and real tokens per
step, the FLOPs per step (torch's FlopCounterMode), the median step time of each path, their ratio, the FLOP/s each
achieves on the padding-free FLOPs against the measured 1-thread fp32 matmul peak, and the largest loss difference
between the two paths on the same batches (they must agree to float tolerance; tests/test_engine.py checks it).

    python scripts/bench_packing.py                       # every shipped tiny model, batch 4
    python scripts/bench_packing.py --models tiny-llava-llama-m --out /tmp/packing

Writes ``<out>/packing.json`` and ``packing.md`` (default docs/performance/).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_models import matmul_peak  # noqa: E402  (the same 1-thread fp32 GEMM peak docs/models.md reports)


def batches_for(multimodal: bool, batch_size: int, steps: int) -> list[list]:
    """``steps`` batches of ``batch_size`` items, one item per task in the benchmark's task order (so a batch mixes
    tasks and image counts, as a client's batches over its tasks do) of the benchmark the model's clients train on."""
    from drake_bench.benchmarks.synth.definitions import drake_synth_spec, fedllm_synth_spec
    from drake_bench.benchmarks.synth.loader import fresh_items

    spec = drake_synth_spec() if multimodal else fedllm_synth_spec()
    items = [s for t in spec.tasks[: steps * batch_size] for s in fresh_items(t, 1, seed=777)]
    while len(items) < steps * batch_size:
        items += items
    return [items[i * batch_size : (i + 1) * batch_size] for i in range(steps)]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="", help="comma-separated zoo names (default: every shipped tiny model)")
    ap.add_argument("--batch-size", type=int, default=4, help="items per step (the synth manifests' batch size)")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "docs" / "performance")
    args = ap.parse_args(argv)

    import torch
    from peft import get_peft_model
    from torch.utils.flop_counter import FlopCounterMode

    from drake_bench.models import engine, load_base
    from drake_bench.models.adapters import lora_config
    from drake_bench.models.zoo import model_info, tiny_names

    torch.set_num_threads(1)
    peak = matmul_peak()
    names = [n for n in args.models.split(",") if n] or tiny_names()
    rows = []
    for name in names:
        multimodal = bool(model_info(name).multimodal)
        base, proc = load_base(name)
        model = get_peft_model(base, lora_config())
        model.train()
        batches = batches_for(multimodal, args.batch_size, args.steps)
        slots = sum(engine.encode_for_training(model, proc, b)["input_ids"].numel() for b in batches)
        real = sum(engine.encode_packed(model, proc, b)["input_ids"].numel() for b in batches)
        flops = {}
        for packed in (False, True):
            with FlopCounterMode(display=False) as fc:
                for b in batches:
                    engine.loss_on(model, proc, b, packed=packed).backward()
            model.zero_grad(set_to_none=True)
            flops[packed] = fc.get_total_flops() / len(batches)
        with torch.no_grad():
            diff = max(
                abs(float(engine.loss_on(model, proc, b, packed=False) - engine.loss_on(model, proc, b, packed=True)))
                for b in batches
            )
        params = [p for p in model.parameters() if p.requires_grad]
        times: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.repeats):
            for packed in (False, True):
                opt = torch.optim.AdamW(params, lr=0.0)  # lr 0: every repeat trains the same weights
                t0 = time.perf_counter()
                for b in batches:
                    engine.train_step(model, proc, b, opt, packed=packed)
                times[packed].append((time.perf_counter() - t0) / len(batches))
        med = {k: statistics.median(v) for k, v in times.items()}
        row = {
            "model": name,
            "token_slots_per_step": slots / len(batches),
            "real_tokens_per_step": real / len(batches),
            "gflop_per_step_padded": flops[False] / 1e9,
            "gflop_per_step_packed": flops[True] / 1e9,
            "ms_per_step_padded": 1000 * med[False],
            "ms_per_step_packed": 1000 * med[True],
            "ratio_padded_over_packed": med[False] / med[True],
            "peak_share_padded": flops[True] / med[False] / peak,
            "peak_share_packed": flops[True] / med[True] / peak,
            "max_abs_loss_difference": diff,
            "seconds": {"padded": times[False], "packed": times[True]},
        }
        rows.append(row)
        print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items() if k != "seconds"}, flush=True)
    data = {
        "batch_size": args.batch_size,
        "steps": args.steps,
        "repeats": args.repeats,
        "threads": 1,
        "matmul_peak_gflops": peak / 1e9,
        "models": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "packing.json").write_text(json.dumps(data, indent=1) + "\n")
    lines = [
        "# Training steps: packed vs right-padded",
        "",
        f"Generated by `python scripts/bench_packing.py` (see its docstring): batches of {args.batch_size} fresh "
        f"drake-synth items (fedllm-synth for text models), LoRA rank 8, one torch thread, {args.steps} steps per "
        f"path, median of {args.repeats} alternating repeats. Peak: the measured 1-thread fp32 matmul rate, "
        f"{peak / 1e9:.1f} GFLOP/s; achieved shares are on the padding-free (packed) FLOPs.",
        "",
        "| model | slots / real tokens | GFLOP padded | GFLOP packed | ms padded | ms packed | padded / packed "
        "| peak share padded | peak share packed | max loss diff |",
        "|:---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['token_slots_per_step'] / r['real_tokens_per_step']:.2f} "
            f"| {r['gflop_per_step_padded']:.2f} | {r['gflop_per_step_packed']:.2f} "
            f"| {r['ms_per_step_padded']:.0f} | {r['ms_per_step_packed']:.0f} "
            f"| **{r['ratio_padded_over_packed']:.2f}x** | {100 * r['peak_share_padded']:.0f}% "
            f"| {100 * r['peak_share_packed']:.0f}% | {r['max_abs_loss_difference']:.1e} |"
        )
    (args.out / "packing.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    main()
