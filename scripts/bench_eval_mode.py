#!/usr/bin/env python
"""Prediction calls side by side: the model switched to eval mode and back by ``Module.train`` against
``engine.set_training`` (the same flags, written directly).

The evaluator asks each client's model for one (owner, task) group at a time; on fedllm-synth that is about a
hundred calls of two items per client and evaluation round (Others: two items of each of 51 clients' tasks), and
each call switches the model to eval mode and back. Both paths run ``engine.predict`` on the same groups of
fresh fedllm-synth items (seed 777, never the benchmark's splits) on a shipped tiny Llama with LoRA on every
linear (adapters set to seeded random values, as after training), the model in train mode before the first call as
it is after local training (each call restores the mode it found); one torch thread, alternating over ``--repeats`` rounds. The table gives the median
time of each, their ratio, and whether every prediction agrees (it must: the flags are the same).

    python scripts/bench_eval_mode.py                      # tiny-llama-m, 100 groups of 2 items
    python scripts/bench_eval_mode.py --out /tmp/evalmode  # elsewhere than docs/performance/

Writes ``<out>/eval_mode.json`` and ``eval_mode.md``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_choice_scoring import alternate  # noqa: E402


def random_lora_model(name: str) -> tuple[Any, Any]:
    """A shipped tiny model with LoRA on every linear, its B matrices seeded random values (0.05 scale) so the
    adapters change the answers, as trained ones do; returns (peft model, processor).

    peft draws the A matrices from torch's global generator, so that draw runs under a forked, seeded one: the
    same adapters in every process, and the caller's random state left as it was."""
    import torch
    from peft import get_peft_model

    from drake_bench.models import load_base
    from drake_bench.models.adapters import lora_config

    base, proc = load_base(name)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = get_peft_model(base, lora_config())
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for param_name, p in model.named_parameters():
            if "lora_B" in param_name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.05)
    return model, proc


def fedllm_groups(n: int, items_per_group: int) -> list[list[Any]]:
    """``n`` groups of fresh fedllm-synth items (seed 777 + k, never the benchmark's splits), one task after the
    other, as the evaluator's (owner, task) groups come."""
    from drake_bench.benchmarks.synth.definitions import fedllm_synth_spec
    from drake_bench.benchmarks.synth.loader import fresh_items

    tasks = fedllm_synth_spec().tasks
    return [fresh_items(tasks[k % len(tasks)], items_per_group, seed=777 + k) for k in range(n)]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny-llama-m")
    ap.add_argument("--groups", type=int, default=100)
    ap.add_argument("--items-per-group", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "docs" / "performance")
    args = ap.parse_args(argv)

    import torch

    from drake_bench.models import engine

    torch.set_num_threads(1)
    model, proc = random_lora_model(args.model)
    groups = fedllm_groups(args.groups, args.items_per_group)
    n_modules = sum(1 for _ in model.modules())

    def run() -> list[list[str]]:
        model.train()  # as after local training; each call restores the mode it found
        return [engine.predict(model, proc, g) for g in groups]

    fast = engine.set_training

    def before() -> list[list[str]]:
        engine.set_training = lambda m, mode: m.train(mode)
        try:
            return run()
        finally:
            engine.set_training = fast

    paths = {"Module.train (before)": before, "set_training (now)": run}
    times, outputs = alternate(paths, args.repeats)
    old, new = (outputs[name] for name in paths)
    same = old == new
    med = {name: statistics.median(v) for name, v in times.items()}
    ratio = med["Module.train (before)"] / med["set_training (now)"]
    data = {
        "model": args.model,
        "modules": n_modules,
        "groups": len(groups),
        "items_per_group": args.items_per_group,
        "repeats": args.repeats,
        "seconds": times,
        "median_seconds": med,
        "ratio_before_over_now": ratio,
        "predictions_identical": same,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "eval_mode.json").write_text(json.dumps(data, indent=1) + "\n")
    lines = [
        "# Prediction calls: eval mode by Module.train vs flags set directly",
        "",
        f"Generated by `python scripts/bench_eval_mode.py` (see its docstring): `{args.model}` with LoRA on every "
        f"linear ({n_modules} modules), one torch thread, {len(groups)} calls of {args.items_per_group} fresh "
        f"fedllm-synth items, the model in train mode before the first, median of {args.repeats} alternating repeats.",
        "",
        "| path | median seconds |",
        "|:---|---:|",
    ]
    lines += [f"| {name} | {v:.2f} |" for name, v in med.items()]
    lines += ["", f"Ratio before / now: **{ratio:.2f}x**. Predictions identical: {'yes' if same else 'NO'}."]
    (args.out / "eval_mode.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)
    if not same:
        raise SystemExit("predictions differ between the two paths")


if __name__ == "__main__":
    main()
