#!/usr/bin/env python
"""Fewer ops per training step: the packed step under each candidate path, side by side in one run.

A packed LoRA step (``engine.train_step``) on the zoo's shapes is mostly small operations: matrix products take about a
quarter of its time, SDPA over the block-masked packed sequence another quarter. Candidates, each exact within float
tolerance:

* ``segments``: causal SDPA per packed item instead of SDPA over the whole sequence under a block-diagonal mask
  (``drake_bench.models.kernels``, transformers' AttentionInterface);
* ``rms_norm``: ``torch.nn.functional.rms_norm`` in place of transformers' five-op RMSNorm;
* ``segments+rms_norm``: both;
* ``compile``: ``torch.compile`` (inductor, dynamic shapes: packed sequences change length every step) of the baseline
  model; its compile time (the first pass over the batches) is reported apart from the step time. Only for the
  ``--compile-models`` (default: the text models): on tiny-llava-llama-s the first pass over 6 batches was still
  compiling after 12 minutes on 2 cores (the image-token placement makes shapes data-dependent), so the LLaVA models
  are left out unless named;
* ``threads-2``: the baseline with 2 torch threads instead of 1 (the machine's 2 cores for one process; the main job
  runs two single-threaded workers instead).

For each model: batches of the main job's size (drake-synth items, fedllm-synth for text models; fresh draws, seed 777),
LoRA rank 8, learning rate 0 so every repeat trains the same weights, the variants alternating over ``--repeats`` rounds
of ``--steps`` steps. Reports the median ms per step, the ratio baseline / variant, the share of the 1-thread fp32 matmul
peak on the step's padding-free FLOPs, and the largest loss difference from the baseline on the same batches.

    python scripts/bench_step_paths.py
    python scripts/bench_step_paths.py --models tiny-llava-llama-m --no-compile --out /tmp/paths

Writes ``<out>/step_paths.json`` and ``step_paths.md`` (default docs/performance/).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_models import matmul_peak  # noqa: E402
from bench_packing import batches_for  # noqa: E402

DEFAULT_MODELS = "tiny-llava-llama-s,tiny-llava-llama-m,tiny-llava-qwen2-m,tiny-llama-s,tiny-llama-m"
"""The main job's models (drake-synth's and fedllm-synth's default allocations) and one Qwen2 LLaVA."""


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=DEFAULT_MODELS)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--compile-models",
        default="tiny-llama-s,tiny-llama-m",
        help="models that also get the torch.compile variant ('' for none, 'all' for every model)",
    )
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "docs" / "performance")
    args = ap.parse_args(argv)

    import torch
    from peft import get_peft_model
    from torch.utils.flop_counter import FlopCounterMode

    from drake_bench.models import engine, load_base
    from drake_bench.models.adapters import lora_config
    from drake_bench.models.kernels import use_native_rms_norm, use_segment_attention
    from drake_bench.models.zoo import model_info

    torch.set_num_threads(1)
    peak = matmul_peak()
    all_variants = ["baseline", "segments", "rms_norm", "segments+rms_norm", "threads-2", "compile"]
    compile_for = set(args.compile_models.split(",")) if args.compile_models != "all" else None
    rows = []
    for name in [n for n in args.models.split(",") if n]:
        variants = [v for v in all_variants if v != "compile" or compile_for is None or name in compile_for]
        base, proc = load_base(name)
        model = get_peft_model(base, lora_config())
        model.train()
        batches = batches_for(bool(model_info(name).multimodal), args.batch_size, args.steps)
        with FlopCounterMode(display=False) as fc:
            for b in batches:
                engine.loss_on(model, proc, b, packed=True).backward()
        model.zero_grad(set_to_none=True)
        flops = fc.get_total_flops() / len(batches)
        compiled, compile_seconds = None, None

        def configure(variant: str) -> object:
            use_segment_attention(model, "segments" in variant)
            use_native_rms_norm(model, "rms_norm" in variant)
            torch.set_num_threads(2 if variant == "threads-2" else 1)
            return compiled if variant == "compile" else model

        def losses(m: object) -> list[float]:
            with torch.no_grad():
                return [float(engine.loss_on(m, proc, b, packed=True)) for b in batches]

        reference = losses(configure("baseline"))
        if "compile" in variants:
            configure("baseline")
            compiled = torch.compile(model, dynamic=True)
            t0 = time.perf_counter()
            opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=0.0)
            for b in batches:  # first pass: compiles forward and backward for the shapes seen
                engine.train_step(compiled, proc, b, opt, packed=True)
            compile_seconds = time.perf_counter() - t0
        diffs = {v: max(abs(a - b) for a, b in zip(reference, losses(configure(v)))) for v in variants}
        params = [p for p in model.parameters() if p.requires_grad]
        times: dict[str, list[float]] = {v: [] for v in variants}
        for _ in range(args.repeats):
            for v in variants:
                m = configure(v)
                opt = torch.optim.AdamW(params, lr=0.0)
                t0 = time.perf_counter()
                for b in batches:
                    engine.train_step(m, proc, b, opt, packed=True)
                times[v].append((time.perf_counter() - t0) / len(batches))
        configure("baseline")
        med = {v: statistics.median(t) for v, t in times.items()}
        row = {
            "model": name,
            "gflop_per_step": flops / 1e9,
            "compile_seconds": compile_seconds,
            "ms_per_step": {v: 1000 * med[v] for v in variants},
            "ratio_baseline_over": {v: med["baseline"] / med[v] for v in variants},
            "peak_share": {v: flops / med[v] / peak for v in variants},
            "max_abs_loss_difference": diffs,
            "seconds": times,
        }
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "seconds"}, default=lambda x: round(x, 4)), flush=True)
    variants = all_variants
    data = {
        "batch_size": args.batch_size,
        "steps": args.steps,
        "repeats": args.repeats,
        "variants": variants,
        "matmul_peak_gflops": peak / 1e9,
        "models": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "step_paths.json").write_text(json.dumps(data, indent=1) + "\n")
    lines = [
        "# Training step paths",
        "",
        f"Generated by `python scripts/bench_step_paths.py` (see its docstring): packed steps on batches of "
        f"{args.batch_size} fresh items, LoRA rank 8, {args.steps} steps per variant, median of {args.repeats} "
        f"alternating repeats; one torch thread except `threads-2`. Peak: the measured 1-thread fp32 matmul rate, "
        f"{peak / 1e9:.1f} GFLOP/s, on each step's padding-free FLOPs.",
        "",
        "Time per step (ms), and baseline / variant:",
        "",
        "| model | " + " | ".join(variants) + " |",
        "|:---|" + "---:|" * len(variants),
    ]
    for r in rows:
        cells = [
            "-"
            if v not in r["ms_per_step"]
            else f"{r['ms_per_step'][v]:.0f}" + ("" if v == "baseline" else f" ({r['ratio_baseline_over'][v]:.2f}x)")
            for v in variants
        ]
        lines.append(f"| {r['model']} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Share of the 1-thread matmul peak, and the largest loss difference from the baseline:",
        "",
        "| model | " + " | ".join(variants) + " | max loss diff | compile s |",
        "|:---|" + "---:|" * (len(variants) + 2),
    ]
    for r in rows:
        cells = [f"{100 * r['peak_share'][v]:.0f}%" if v in r["peak_share"] else "-" for v in variants]
        diff = max(r["max_abs_loss_difference"].values())
        comp = f"{r['compile_seconds']:.0f}" if r["compile_seconds"] is not None else "-"
        lines.append(f"| {r['model']} | " + " | ".join(cells) + f" | {diff:.1e} | {comp} |")
    (args.out / "step_paths.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    main()
