#!/usr/bin/env python
"""How much does a tiny zoo model learn of its own tasks in the main job's budget? (not a test)

The embedded boards separate methods only as far as a client learns its own tasks in 8 rounds x 25
local steps: what a method shares is what clients learnt. This script measures that budget's
learning directly, side by side for the obvious training levers, in one run: for every client and
every variant, a fresh LoRA adapter is trained on the client's four tasks (mixed, one item of each
task per batch of 4, ``--steps`` steps, no federation) and scored on fresh items of those tasks
against the same base model untrained. Variants (``VARIANTS``):

  * ``reference``: the reference entries' LoRA settings (``LoraSettings`` defaults) on the default
    pretrained checkpoint;
  * ``lr 1e-3`` / ``lr 1e-2``: the LoRA learning rate a third lower / three times higher;
  * ``rank 32``: rank 32 (alpha 64, the same alpha/r scale) instead of 8;
  * ``+ projector``: the multimodal projector trained too (peft ``modules_to_save``), as LLaVA's
    visual instruction tuning does;
  * ``4x pretraining``: the base pretrained 4x longer on the public mix (``Recipe.steps_multimodal``);
    built once into ``<models home>/_variants/`` so the default checkpoints are never touched.

Reported per variant: the mean gain over clients (x100) with its standard error, the paired
difference from ``reference`` (same clients, items and adapter initialisation), and the gain by
answer type (yes/no, multiple choice, open). Items come from the task generators with the transfer
script's seeds (training 4242 + client, evaluation 9001), never from the built benchmark's splits;
scoring is the evaluator's. Jobs run in ``--workers`` processes with one torch thread each; results
do not depend on the worker count.

    python scripts/bench_learning_speed.py                        # llama-m, 200 steps (~20 min, 2 cores)
    python scripts/bench_learning_speed.py --variants reference,"lr 1e-3" --steps 800

Writes ``<out>/learning_speed.json`` (every score), ``learning_speed.md`` and ``learning_speed.png``;
the default ``--out`` is docs/learning_speed/<model>-<steps>steps/.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from multiprocessing import get_context
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_transfer import (  # noqa: E402
    BENCH,
    EVAL_SEED,
    TRAIN_SEED,
    _items,
    add_training_arguments,
    score_tasks,
    train_client,
)

ROOT = Path(__file__).resolve().parents[1]
ANSWER_TYPES = ("yes_no", "multiple_choice", "open")


@dataclass(frozen=True)
class Variant:
    learning_rate: float | None = None  # None: LoraSettings default
    rank: int | None = None  # None: LoraSettings default; alpha keeps the default alpha/rank ratio
    train_projector: bool = False
    pretrain_factor: int = 1  # multiplies Recipe.steps_multimodal


VARIANTS: dict[str, Variant] = {
    "reference": Variant(),
    "lr 1e-3": Variant(learning_rate=1e-3),
    "lr 1e-2": Variant(learning_rate=1e-2),
    "rank 32": Variant(rank=32),
    "+ projector": Variant(train_projector=True),
    "4x pretraining": Variant(pretrain_factor=4),
}

_worker: dict = {}


def _base(model_name: str, factor: int):
    """The frozen base: the default checkpoint, or one pretrained ``factor`` times longer in its own cache."""
    from drake_bench.models import load_base
    from drake_bench.models import pretrain as P
    from drake_bench.models.zoo import load_pretrained, models_home

    if factor == 1:
        return load_base(model_name)
    default_home = models_home()
    home = default_home / "_variants" / f"pretrain-x{factor}"  # beside _tokenizer and _vision, not over a checkpoint
    home.mkdir(parents=True, exist_ok=True)
    for shared in (P.TOKENIZER_DIR, "_vision"):  # keyed by recipe fields this variant leaves alone
        if (default_home / shared).exists() and not (home / shared).exists():
            shutil.copytree(default_home / shared, home / shared)
    os.environ["DRAKE_BENCH_MODELS"] = str(home)
    try:
        recipe = P.Recipe(steps_multimodal=factor * P.Recipe().steps_multimodal)
        return load_pretrained(str(P.ensure_pretrained(model_name, recipe=recipe)))
    finally:
        os.environ["DRAKE_BENCH_MODELS"] = str(default_home)


def _init(model_name: str, eval_items: int, seed: int) -> None:
    import torch

    from drake_bench.benchmarks.manifest import load_benchmark

    torch.set_num_threads(1)
    spec = load_benchmark(BENCH)
    _worker.update(
        model_name=model_name,
        seed=seed,
        spec=spec,
        models={},
        evals={t: _items(t, eval_items, EVAL_SEED) for c in spec.clients for t in c.tasks},
    )


def _model(name: str, variant: Variant):
    """Peft model, processor, initial adapter state and settings of a variant (built once per worker)."""
    import torch
    from peft import get_peft_model

    from drake_bench.methods.lora_clients import LoraSettings
    from drake_bench.models import lora_config

    w = _worker
    if name not in w["models"]:
        default = LoraSettings()
        rank = variant.rank or default.rank
        settings = LoraSettings(
            rank=rank,
            alpha=default.alpha * rank // default.rank,
            learning_rate=variant.learning_rate or default.learning_rate,
        )
        base, proc = _base(w["model_name"], variant.pretrain_factor)
        torch.manual_seed(w["seed"])
        extra = {"modules_to_save": ["multi_modal_projector"]} if variant.train_projector else {}
        model = get_peft_model(base, lora_config(r=settings.rank, alpha=settings.alpha, **extra))
        init = {k: v.detach().clone() for k, v in model.state_dict().items() if "lora_" in k or "modules_to_save" in k}
        w["models"][name] = (model, proc, init, settings)
    return w["models"][name]


def _job(name: str, variant: Variant, client: int, steps: int, batch: int) -> dict:
    """Zero-shot and trained scores on ``client``'s tasks under one variant."""
    w = _worker
    model, proc, init, settings = _model(name, variant)
    model.load_state_dict(init, strict=False)
    evals = {t: w["evals"][t] for t in w["spec"].client(client).tasks}
    t0 = time.time()
    zero = score_tasks(model, proc, evals)
    loss_first, loss_last = train_client(model, proc, settings, w["spec"], client, steps, batch)
    return {
        "variant": name,
        "client": client,
        "zero_shot": zero,
        "trained": score_tasks(model, proc, evals),
        "loss_first": loss_first,
        "loss_last": loss_last,
        "settings": {"rank": settings.rank, "alpha": settings.alpha, "learning_rate": settings.learning_rate},
        "seconds": round(time.time() - t0, 1),
    }


def _mean_se(xs: list[float]) -> tuple[float, float]:
    return statistics.mean(xs), (statistics.stdev(xs) / len(xs) ** 0.5 if len(xs) > 1 else float("nan"))


def summarise(res: dict) -> dict:
    """Per variant: mean gain over clients, paired difference from reference, gain by answer type (x100)."""
    from drake_bench.benchmarks.manifest import load_benchmark

    spec = load_benchmark(BENCH)
    atype = {t.id: t.answer_type.value for t in spec.tasks}
    out = {}
    gains: dict[str, dict[str, float]] = {}
    for name in res["config"].get("variant_order", list(res["runs"])):  # the JSON's keys are sorted
        runs = res["runs"][name]
        per_client = {
            c: 100 * statistics.mean(runs[c]["trained"][t] - runs[c]["zero_shot"][t] for t in runs[c]["trained"])
            for c in sorted(runs, key=int)
        }
        gains[name] = per_client
        by_type = {}
        for a in ANSWER_TYPES:
            xs = [
                100 * (r["trained"][t] - r["zero_shot"][t])
                for r in runs.values()
                for t in r["trained"]
                if atype[t] == a
            ]
            if xs:
                by_type[a] = {"mean": statistics.mean(xs), "tasks": len(xs), "improved": sum(x > 0 for x in xs)}
        m, se = _mean_se(list(per_client.values()))
        out[name] = {
            "gain": m,
            "se": se,
            "clients_improved": sum(g > 0 for g in per_client.values()),
            "clients": len(per_client),
            "by_answer_type": by_type,
            "per_client": {c: round(g, 2) for c, g in per_client.items()},
        }
    if "reference" in gains:
        for name, per_client in gains.items():
            shared = [c for c in per_client if c in gains["reference"]]
            if name != "reference" and len(shared) > 1:
                d, se = _mean_se([per_client[c] - gains["reference"][c] for c in shared])
                out[name]["vs_reference"] = {"mean": d, "se": se}
    return out


def write_report(res: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cfg, s = res["config"], res["summary"]
    names = list(s)
    lines = [
        "# drake-synth: what a client learns of its own tasks in the main job's budget",
        "",
        f"Generated by `python scripts/bench_learning_speed.py` (see its docstring): `{cfg['model']}`, a fresh LoRA "
        f"adapter per client trained for {cfg['steps']} steps of batch {cfg['batch']} on the client's four tasks (the "
        f"main job gives a client 8 x 25 = 200 local steps), scored on {cfg['eval_items']} fresh items of each of "
        f"them; gain = score minus the same base untrained, x100. Seeds: adapter {cfg['seed']}, training items "
        f"{TRAIN_SEED} + client, evaluation items {EVAL_SEED}. Differences from `reference` are paired over clients.",
        "",
        "| variant | mean gain (s.e.) | clients improved | vs reference (s.e.) | yes/no | multiple choice | open |",
        "|:---|---:|---:|---:|---:|---:|---:|",
    ]
    for n in names:
        v = s[n]
        vs = v.get("vs_reference")
        bt = v["by_answer_type"]
        cells = [
            f"{bt[a]['mean']:+.1f} ({bt[a]['improved']}/{bt[a]['tasks']})" if a in bt else "" for a in ANSWER_TYPES
        ]
        lines.append(
            f"| {n} | {v['gain']:+.2f} ({v['se']:.2f}) | {v['clients_improved']}/{v['clients']} | "
            + (f"{vs['mean']:+.2f} ({vs['se']:.2f})" if vs else "")
            + " | "
            + " | ".join(cells)
            + " |"
        )
    lines += [
        "",
        "Answer-type cells: mean gain over the tasks of that type (tasks improved / tasks).",
        "",
        "Per client (gain x100):",
        "",
        "| variant | " + " | ".join(str(c) for c in s[names[0]]["per_client"]) + " |",
        "|:---|" + "---:|" * len(s[names[0]]["per_client"]),
    ]
    for n in names:
        lines.append(f"| {n} | " + " | ".join(f"{g:+.1f}" for g in s[n]["per_client"].values()) + " |")
    out.mkdir(parents=True, exist_ok=True)
    (out / "learning_speed.md").write_text("\n".join(lines) + "\n")

    fig, ax = plt.subplots(figsize=(7.5, 3.8))
    groups = ["all", *ANSWER_TYPES]
    width = 0.8 / len(names)
    for i, n in enumerate(names):
        bt = s[n]["by_answer_type"]
        vals = [s[n]["gain"]] + [bt[a]["mean"] if a in bt else 0.0 for a in ANSWER_TYPES]
        xs = [g + (i - (len(names) - 1) / 2) * width for g in range(len(groups))]
        ax.bar(xs, vals, width, label=n, yerr=[s[n]["se"]] + [0] * len(ANSWER_TYPES))
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks(range(len(groups)), ["all tasks (s.e. over clients)", "yes/no", "multiple choice", "open"])
    ax.set_ylabel("gain over the untrained base (x100)")
    ax.set_title(f"Own-task gain after {cfg['steps']} LoRA steps, {cfg['model']}")
    ax.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    fig.savefig(out / "learning_speed.png", dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_training_arguments(ap, 200, "the main job's 8 x 25")
    ap.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, from: {', '.join(VARIANTS)}")
    ap.add_argument("--clients", default=None, help="comma-separated client ids (default: all)")
    ap.add_argument("--out", type=Path, default=None, help="default: docs/learning_speed/<model>-<steps>steps")
    ap.add_argument(
        "--report-only", action="store_true", help="rewrite the .md and .png from <out>/learning_speed.json"
    )
    args = ap.parse_args()
    args.out = args.out or ROOT / "docs" / "learning_speed" / f"{args.model}-{args.steps}steps"
    if args.report_only:
        res = json.loads((args.out / "learning_speed.json").read_text())
        res["summary"] = summarise(res)
        write_report(res, args.out)
        print(f"wrote {args.out / 'learning_speed.md'}")
        return
    names = [n.strip() for n in args.variants.split(",") if n.strip()]
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        ap.error(f"--variants: unknown {unknown}; choose from {list(VARIANTS)}")
    from drake_bench.benchmarks.manifest import load_benchmark

    clients = (
        [int(c) for c in args.clients.split(",")] if args.clients else [c.id for c in load_benchmark(BENCH).clients]
    )
    if any(VARIANTS[n].pretrain_factor != 1 for n in names):  # build slow bases once, before the workers race for them
        for n in names:
            if VARIANTS[n].pretrain_factor != 1:
                print(f"{n}: building the base (cached after the first run)", flush=True)
                _base(args.model, VARIANTS[n].pretrain_factor)
    t0 = time.time()
    runs: dict[str, dict[str, dict]] = {n: {} for n in names}
    with ProcessPoolExecutor(
        args.workers,
        mp_context=get_context("spawn"),
        initializer=_init,
        initargs=(args.model, args.eval_items, args.seed),
    ) as pool:
        # variant-major per worker would rebuild fewer models, but jobs are cheap next to training
        futures = [pool.submit(_job, n, VARIANTS[n], c, args.steps, args.batch) for n in names for c in clients]
        for f in futures:
            r = f.result()
            runs[r["variant"]][str(r["client"])] = r
            gain = 100 * statistics.mean(r["trained"][t] - r["zero_shot"][t] for t in r["trained"])
            print(f"{r['variant']}, client {r['client']}: gain {gain:+.1f} ({r['seconds']:.0f}s)", flush=True)
    res = {
        "config": {
            "model": args.model,
            "steps": args.steps,
            "batch": args.batch,
            "eval_items": args.eval_items,
            "seed": args.seed,
            "train_seed": TRAIN_SEED,
            "eval_seed": EVAL_SEED,
            "variants": {n: asdict(VARIANTS[n]) for n in names},
            "variant_order": names,
        },
        "runs": runs,
        "seconds": round(time.time() - t0, 1),
    }
    res["summary"] = summarise(res)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "learning_speed.json").write_text(json.dumps(res, indent=1, sort_keys=True) + "\n")
    write_report(res, args.out)
    for n, v in res["summary"].items():
        print(f"{n}: {v['gain']:+.2f} (s.e. {v['se']:.2f})")
    print(f"wrote {args.out / 'learning_speed.md'} ({res['seconds']:.0f}s)")


if __name__ == "__main__":
    main()
