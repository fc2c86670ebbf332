#!/usr/bin/env python
"""What the portable numerics cost, and what they change: AVX2-capped kernels against the host's own, side by side.

``RunConfig.numerics`` (``drake_bench/core/numerics.py``) is ``portable`` by default: torch, MKL and oneDNN are held to
AVX2, so a seed trains to the same digits on every x86-64 host. This script measures what that costs on this host.
For each model it runs the same training in fresh processes, alternating ``portable`` and ``native``, ``--repeats``
times: ``--steps`` packed LoRA steps (the default training path, rank 8, AdamW at lr 3e-3 as SFT's) on batches of
the main job's size from the model's benchmark, with one torch thread. A variable takes effect only when set before a
process's first kernel, so each run is its own process. The script reports the median milliseconds per step under
each setting, the ratio native / portable, the capability each process reported, and the largest difference between
the two settings' losses along the same trajectory (zero where the host's own path is AVX2).

    python scripts/bench_numerics.py
    python scripts/bench_numerics.py --models tiny-llava-llama-m --steps 10 --repeats 5 --out /tmp/numerics

Writes ``<out>/numerics.json`` and ``numerics.md`` (default docs/performance/). Run it on an idle machine: the ratio is
of two timings taken in turn.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

DEFAULT_MODELS = "tiny-llava-llama-s,tiny-llava-llama-m,tiny-llama-m"
SETTINGS = ("portable", "native")


def child(name: str, steps: int, batch_size: int) -> None:
    """One timed training run in this (fresh) process; prints one JSON line."""
    import torch
    from bench_packing import batches_for
    from peft import get_peft_model

    from drake_bench.core.numerics import cpu_capability
    from drake_bench.models import engine, load_base
    from drake_bench.models.adapters import lora_config
    from drake_bench.models.kernels import use_segment_attention
    from drake_bench.models.zoo import model_info

    torch.set_num_threads(1)
    capability = cpu_capability()
    torch.manual_seed(0)
    base, proc = load_base(name)
    use_segment_attention(base)
    model = get_peft_model(base, lora_config())
    model.train()
    batches = batches_for(bool(model_info(name).multimodal), batch_size, steps)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=3e-3)
    engine.train_step(model, proc, batches[0], opt, packed=True)  # warm-up (allocations, first-call dispatch)
    losses, t0 = [], time.perf_counter()
    for b in batches:
        losses.append(float(engine.train_step(model, proc, b, opt, packed=True)))
    seconds = time.perf_counter() - t0
    print(json.dumps({"capability": capability, "ms_per_step": 1000 * seconds / len(batches), "losses": losses}))


def run_child(name: str, setting: str, steps: int, batch_size: int) -> dict:
    from drake_bench.core.numerics import PORTABLE_ENV, environment_for

    clean = {k: v for k, v in os.environ.items() if k not in PORTABLE_ENV}
    out = subprocess.run(
        [sys.executable, __file__, "--child", name, "--steps", str(steps), "--batch-size", str(batch_size)],
        env=environment_for(setting, clean),
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        sys.exit(f"{name} under {setting} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=DEFAULT_MODELS)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "docs" / "performance")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child, args.steps, args.batch_size)
        return
    rows = []
    for name in [n for n in args.models.split(",") if n]:
        runs: dict[str, list[dict]] = {s: [] for s in SETTINGS}
        for _ in range(args.repeats):
            for setting in SETTINGS:
                runs[setting].append(run_child(name, setting, args.steps, args.batch_size))
        med = {s: statistics.median(r["ms_per_step"] for r in runs[s]) for s in SETTINGS}
        row = {
            "model": name,
            "ms_per_step": med,
            "native_over_portable": med["native"] / med["portable"],
            "capability": {s: sorted({r["capability"] for r in runs[s]}) for s in SETTINGS},
            "max_abs_loss_difference": max(
                abs(a - b) for a, b in zip(runs["portable"][0]["losses"], runs["native"][0]["losses"])
            ),
            "repeat_identical": {s: all(r["losses"] == runs[s][0]["losses"] for r in runs[s]) for s in SETTINGS},
            "runs": runs,
        }
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "runs"}, default=lambda x: round(x, 4)), flush=True)
    from drake_bench.core.numerics import cpu_model

    data = {
        "steps": args.steps,
        "batch_size": args.batch_size,
        "repeats": args.repeats,
        "cpu_model": cpu_model(),
        "models": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "numerics.json").write_text(json.dumps(data, indent=1) + "\n")
    lines = [
        "# Portable against native numerics",
        "",
        f"Generated by `python scripts/bench_numerics.py` (see its docstring) on {cpu_model() or 'an unnamed CPU'}: "
        f"{args.steps} packed LoRA steps (AdamW, lr 3e-3) on batches of {args.batch_size}, one torch thread, each "
        f"run a fresh process, the settings alternating, median of {args.repeats}.",
        "",
        "| model | capability portable / native | ms per step portable | native | native / portable | "
        "largest loss difference | repeats identical |",
        "|:---|:---|---:|---:|---:|---:|:---|",
    ]
    for r in rows:
        cap = " / ".join(",".join(r["capability"][s]) for s in SETTINGS)
        same = ", ".join(f"{s}: {'yes' if r['repeat_identical'][s] else 'no'}" for s in SETTINGS)
        lines.append(
            f"| {r['model']} | {cap} | {r['ms_per_step']['portable']:.0f} | {r['ms_per_step']['native']:.0f} | "
            f"{r['native_over_portable']:.2f} | {r['max_abs_loss_difference']:.2e} | {same} |"
        )
    (args.out / "numerics.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out / 'numerics.md'}")


if __name__ == "__main__":
    main()
