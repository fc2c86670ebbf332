#!/usr/bin/env python
"""Prediction calls side by side: one call per (owner, task) group, as the evaluator asks today, against one call
per client holding all of its groups.

On fedllm-synth the evaluator asks each client's model about a hundred times per evaluation round, two free-text
items per call (Others: two items of each of 51 clients' tasks), so generation runs in batches of two where
``engine.predict`` batches sixteen. Fewer, larger calls would cut the decoding steps several-fold, but a call's
batch decides the padding each item is generated with, so answers may differ where two tokens are near-tied:
this script measures both the time and how many answers (and how much Rouge-L) move, the evidence a change of the
evaluator's calls (and with it every board's numbers) would need.

Both paths run ``engine.predict`` on the same groups of fresh fedllm-synth items (seed 777, never the benchmark's
splits) on a shipped tiny Llama with LoRA on every linear (adapters set to seeded random values, as after
training); one torch thread, alternating over ``--repeats`` rounds. The table gives the median time of each, their
ratio, the answers that differ and the mean Rouge-L of each path. ``--states`` takes trained adapters instead: a
board checkpoint's round folder, whose ``client-N.safetensors`` (SFT's or FedIT's plain LoRA states) each go on the
tiny Llama whose adapter they fit, and both paths answer the same groups with every listed client's model (times
summed over the clients).

    python scripts/bench_predict_calls.py                      # tiny-llama-m, 100 groups of 2 items
    python scripts/bench_predict_calls.py --out /tmp/calls     # elsewhere than docs/performance/
    python scripts/bench_predict_calls.py --clients 1,2,27,28 --name predict_calls_trained \
        --states leaderboard/fedllm-synth-dynamic/runs/checkpoints/fedllm-synth/dynamic/sft/seed-0/round-0004

Writes ``<out>/<name>.json`` and ``<name>.md`` (``--name``, default ``predict_calls``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_choice_scoring import alternate  # noqa: E402
from bench_eval_mode import fedllm_groups, random_lora_model  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny-llama-m")
    ap.add_argument("--groups", type=int, default=100)
    ap.add_argument("--items-per-group", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--states", type=Path, help="a checkpoint round folder of plain LoRA client states")
    ap.add_argument("--clients", default="1", help="comma-separated client ids whose states --states loads")
    ap.add_argument("--name", default="predict_calls", help="file stem of the json and md written")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "docs" / "performance")
    args = ap.parse_args(argv)

    import numpy as np
    import torch

    from drake_bench.evaluation.scoring import score_batch
    from drake_bench.models import engine

    torch.set_num_threads(1)
    models = []  # (label, peft model, processor)
    if args.states is None:
        models.append((f"{args.model}, random adapters", *random_lora_model(args.model)))
    else:
        from peft import get_peft_model, get_peft_model_state_dict, set_peft_model_state_dict
        from safetensors.torch import load_file

        from drake_bench.models import load_base
        from drake_bench.models.adapters import lora_config

        adapter_shapes = {}  # tiny Llama -> the shapes of its LoRA state, to tell which one a client's state fits
        for name in ("tiny-llama-s", "tiny-llama-m"):
            template = get_peft_model(load_base(name)[0], lora_config())
            adapter_shapes[name] = {k: v.shape for k, v in get_peft_model_state_dict(template).items()}
        for client in args.clients.split(","):
            state = load_file(args.states / f"client-{client}.safetensors")
            fits = [n for n, shapes in adapter_shapes.items() if shapes == {k: v.shape for k, v in state.items()}]
            if not fits:
                raise SystemExit(f"{args.states}/client-{client}.safetensors fits no tiny Llama's LoRA adapter")
            base, proc = load_base(fits[0])  # a model of its own per client
            model = get_peft_model(base, lora_config())
            set_peft_model_state_dict(model, state)
            models.append((f"client {client} ({fits[0]})", model, proc))
    groups = fedllm_groups(args.groups, args.items_per_group)
    flat = [s for g in groups for s in g]

    def per_group() -> list[str]:
        return [a for _, model, proc in models for g in groups for a in engine.predict(model, proc, g)]

    def one_call() -> list[str]:
        return [a for _, model, proc in models for a in engine.predict(model, proc, flat)]

    paths = {"a call per group (today)": per_group, "one call per client": one_call}
    times, outputs = alternate(paths, args.repeats)
    today, batched = (outputs[name] for name in paths)
    differ = sum(a != b for a, b in zip(today, batched))
    rouge = {name: float(np.mean(score_batch(outputs[name], flat * len(models)))) for name in paths}
    med = {name: statistics.median(v) for name, v in times.items()}
    ratio = med["a call per group (today)"] / med["one call per client"]
    label = "; ".join(m for m, _, _ in models)
    data = {
        "models": label,
        "states": str(args.states) if args.states else None,
        "groups": len(groups),
        "items_per_group": args.items_per_group,
        "repeats": args.repeats,
        "seconds": times,
        "median_seconds": med,
        "ratio_today_over_one_call": ratio,
        "answers": len(today),
        "answers_differing": differ,
        "mean_score": rouge,
    }
    cmd = "".join(f" {a}" for a in (argv if argv is not None else sys.argv[1:]) if not a.startswith("/"))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(data, indent=1) + "\n")
    lines = [
        "# Prediction calls: a call per (owner, task) group vs one call per client",
        "",
        f"Generated by `python scripts/bench_predict_calls.py{cmd}` (see its docstring): {label}, LoRA on "
        f"every linear, one torch thread, {len(groups)} groups of {args.items_per_group} fresh fedllm-synth "
        f"items, median of {args.repeats} alternating repeats.",
        "",
        "| path | median seconds | mean score |",
        "|:---|---:|---:|",
    ]
    lines += [f"| {name} | {med[name]:.2f} | {rouge[name]:.4f} |" for name in paths]
    lines += ["", f"Ratio today / one call: **{ratio:.2f}x**. Answers that differ: {differ} of {len(today)}."]
    (args.out / f"{args.name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    main()
