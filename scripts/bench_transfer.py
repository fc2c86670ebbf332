#!/usr/bin/env python
"""Client-to-client transfer on drake-synth (not a test): does training on one client's tasks help another's?

The embedded benchmark is built so that a group's tasks share skills (formats, the visual world, the
figurative lexicon), which is what makes knowledge sharing between related clients worth having. This
script measures it directly, with no federation in the way: for every client c, a fresh LoRA adapter
on a tiny zoo model is trained on c's four tasks (mixed, one item of each task per batch of 4, the
reference entries' LoRA settings), then scored on every client's tasks; the zero-shot model is the
reference. Delta[c][o] = mean over o's tasks of (score after training on c - zero-shot score).

  * diagonal: what a client learns on its own tasks (Self gain);
  * off-diagonal, same group vs other group: transfer to related vs unrelated clients. Related skills
    should show as within-group Delta above across-group Delta.

Items come from the task generators with seeds disjoint from the built benchmark (training 4242,
evaluation 9001), so nothing here touches the benchmark's test split; scoring is the evaluator's
(options by cloze log-likelihood, open answers by token-level correctness). Jobs run in ``--workers``
processes with one torch thread each; results do not depend on the worker count (every job starts
from the same adapter initialisation with a fresh optimiser).

    python scripts/bench_transfer.py                          # llama-m, 800 steps, 50 items per task (~10 min, 2 cores)
    python scripts/bench_transfer.py --learning-rate 1e-3     # the same at a lower LoRA learning rate
    python scripts/bench_transfer.py --model tiny-llava-qwen2-m --steps 200 --out /tmp/transfer

Writes ``<out>/synth_transfer.json`` (every score), ``synth_transfer.md`` (matrix and summary) and
``synth_transfer.png`` (heatmap); the default ``--out`` is docs/transfer/<model>-<steps>steps-lr<lr>/.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = "drake-synth"
TRAIN_SEED, EVAL_SEED = 4242, 9001

_worker: dict = {}


def _items(task_id: str, n: int, seed: int) -> list:
    from drake_bench.benchmarks.manifest import load_benchmark
    from drake_bench.benchmarks.synth.loader import fresh_items

    return fresh_items(load_benchmark(BENCH).task(task_id), n, seed)


def training_items(spec, client: int, steps: int, batch: int) -> list:
    """``steps * batch`` fresh items of the client's tasks, one item of each task in turn."""
    tasks = list(spec.client(client).tasks)
    per_task = steps * batch // len(tasks) + 1
    pools = [_items(t, per_task, TRAIN_SEED + client) for t in tasks]
    return [pool[i] for i in range(per_task) for pool in pools][: steps * batch]


def _init(model_name: str, eval_items: int, seed: int, learning_rate: float) -> None:
    import torch
    from peft import get_peft_model

    from drake_bench.benchmarks.manifest import load_benchmark
    from drake_bench.methods.lora_clients import LoraSettings
    from drake_bench.models import load_base, lora_config

    torch.set_num_threads(1)
    settings = LoraSettings(learning_rate=learning_rate)
    base, proc = load_base(model_name)
    torch.manual_seed(seed)
    model = get_peft_model(base, lora_config(r=settings.rank, alpha=settings.alpha))
    spec = load_benchmark(BENCH)
    _worker.update(
        model=model,
        proc=proc,
        settings=settings,
        spec=spec,
        init={k: v.detach().clone() for k, v in model.state_dict().items() if "lora_" in k},
        evals={t: _items(t, eval_items, EVAL_SEED) for c in spec.clients for t in c.tasks},
    )


def train_client(model, proc, settings, spec, client: int, steps: int, batch: int) -> tuple[float, float]:
    """Train the active adapter on the client's mixed items with a fresh AdamW; mean loss of the first and last tenth."""
    import torch

    from drake_bench.models import train_step

    mixed = training_items(spec, client, steps, batch)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=settings.learning_rate, weight_decay=settings.weight_decay)
    losses = [train_step(model, proc, mixed[i : i + batch], opt) for i in range(0, len(mixed), batch)]
    k = max(1, len(losses) // 10)
    return sum(losses[:k]) / k, sum(losses[-k:]) / k


def score_tasks(model, proc, evals: dict[str, list]) -> dict[str, float]:
    """The evaluator's per-item scores averaged per task."""
    from drake_bench.evaluation.scoring import score_batch
    from drake_bench.models import predict

    return {
        t: sum(score_batch(predict(model, proc, [s.as_query() for s in items]), items)) / len(items)
        for t, items in evals.items()
    }


def _job(trained_on: int | None, steps: int, batch: int) -> dict:
    """Train on client ``trained_on``'s tasks (None: zero-shot) and score every client task."""
    w = _worker
    model, proc = w["model"], w["proc"]
    model.load_state_dict(w["init"], strict=False)
    t0 = time.time()
    loss_first = loss_last = None
    if trained_on is not None:
        loss_first, loss_last = train_client(model, proc, w["settings"], w["spec"], trained_on, steps, batch)
    scores = score_tasks(model, proc, w["evals"])
    return {
        "trained_on": trained_on,
        "scores": scores,
        "loss_first": loss_first,
        "loss_last": loss_last,
        "seconds": round(time.time() - t0, 1),
    }


def summarise(res: dict, reference: str = "zero_shot") -> dict:
    """Delta matrix (x100, trained-on client -> evaluated client) and within/across-group means; Delta is measured
    against the per-task scores under ``res[reference]``. Rows are the clients under ``res['trained']`` (all of
    them, or the sources a run was asked for)."""
    from drake_bench.benchmarks.manifest import load_benchmark

    spec = load_benchmark(BENCH)
    zero = res[reference]
    clients = [c.id for c in spec.clients]
    group = {c.id: c.group for c in spec.clients}
    rows = [c for c in clients if str(c) in res["trained"]]
    delta = {}
    for c in rows:
        sc = res["trained"][str(c)]
        delta[c] = {o: 100 * statistics.mean(sc[t] - zero[t] for t in spec.client(o).tasks) for o in clients}
    cells = {"self": [], "same group": [], "other group": []}
    for c in rows:
        for o in clients:
            kind = "self" if c == o else "same group" if group[c] == group[o] else "other group"
            cells[kind].append(delta[c][o])
    stats = {
        k: {
            "mean": statistics.mean(v),
            "se": statistics.stdev(v) / len(v) ** 0.5 if len(v) > 1 else float("nan"),
            "pairs": len(v),
            "positive": sum(x > 0 for x in v),
        }
        for k, v in cells.items()
        if v
    }
    by_group = {}
    for g in sorted(set(group.values())):
        members = [c for c in clients if group[c] == g]
        within = [delta[c][o] for c in members if c in delta for o in members if c != o]
        across = [delta[c][o] for c in members if c in delta for o in clients if group[o] != g]
        # the column view: what other groups' clients' data does for this group's clients (sources run only)
        into = [delta[c][o] for c in delta if group[c] != g for o in members]
        if within:
            by_group[g] = {
                "clients": members,
                "within": statistics.mean(within),
                "across": statistics.mean(across),
                "from_other_groups": statistics.mean(into) if into else None,
                "within_minus_across": _difference(within, across),
            }
    overall = _difference(cells["same group"], cells["other group"]) if cells["same group"] else None
    return {
        "delta": {str(c): {str(o): round(v, 2) for o, v in row.items()} for c, row in delta.items()},
        "stats": stats,
        "by_group": by_group,
        "same_minus_other": overall,
    }


def _difference(a: list[float], b: list[float]) -> dict:
    """mean(a) - mean(b) with the standard error of a difference of two independent means, and its ratio.

    The pairs share trained adapters and evaluated clients, so they are not fully independent; the ratio is a
    yardstick (the transfer target asks for >= 2), not a test."""

    def se(xs: list[float]) -> float:
        return statistics.stdev(xs) / len(xs) ** 0.5 if len(xs) > 1 else float("nan")

    diff, err = statistics.mean(a) - statistics.mean(b), (se(a) ** 2 + se(b) ** 2) ** 0.5
    return {"difference": round(diff, 3), "se": round(err, 3), "ratio": round(diff / err, 2) if err > 0 else None}


def announce(res: dict, report_md: Path) -> None:
    """The run's summary line and where its report went (shared with bench_probe_transfer)."""
    st = res["summary"]["stats"]
    print(" ".join(f"{k}: {v['mean']:+.2f} (s.e. {v['se']:.2f})" for k, v in st.items()))
    print(f"wrote {report_md} ({res['seconds']:.0f}s)")


def write_report(
    res: dict,
    out: Path,
    intro: str | None = None,
    reference: str = "zero-shot",
    stem: str = "synth_transfer",
    plot_title: str | None = None,
) -> None:
    """Markdown summary + matrix and a grouped heatmap of ``res['summary']``; ``intro``, ``reference`` (what Delta is
    measured against), ``stem`` and ``plot_title`` let another transfer measurement (bench_probe_transfer) reuse it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from drake_bench.benchmarks.manifest import load_benchmark

    spec = load_benchmark(BENCH)
    s = res["summary"]
    clients = [c.id for c in spec.clients]
    group = {c.id: c.group for c in spec.clients}
    cfg = res["config"]
    st = s["stats"]
    lines = [
        "# drake-synth: client-to-client transfer",
        "",
        intro
        or (
            f"Generated by `python scripts/bench_transfer.py` (see its docstring): `{cfg['model']}`, a fresh LoRA "
            f"adapter (rank {cfg['rank']}, learning rate {cfg['learning_rate']}) trained for {cfg['steps']} steps of "
            f"batch {cfg['batch']} on one client's four tasks, scored on {cfg['eval_items']} fresh items of every "
            f"client task; Delta = score minus the zero-shot model's, x100, averaged over the evaluated client's "
            f"tasks. Seeds: adapter {cfg['seed']}, training items {TRAIN_SEED} + client, evaluation items {EVAL_SEED}."
        ),
        "",
        "| pairs | mean Delta | s.e. | pairs > 0 |",
        "|:---|---:|---:|---:|",
    ]
    for k in st:
        lines.append(
            f"| {k} ({st[k]['pairs']}) | {st[k]['mean']:+.2f} | {st[k]['se']:.2f} | "
            f"{st[k]['positive']}/{st[k]['pairs']} |"
        )
    lines += [
        "",
        "Per group. *within*: trained on a member, evaluated on the other members; *across*: trained on a "
        "member, evaluated on other groups' clients (row view); *from other groups*: trained on another group's "
        "client, evaluated on the members (column view; the sources this run trained):",
        "",
        "| group | clients | within | across | within - across (s.e., ratio) | from other groups |",
        "|:---|:---|---:|---:|---:|---:|",
    ]

    def diff(d: dict | None) -> str:
        return "" if not d else f"{d['difference']:+.2f} ({d['se']:.2f}, {d['ratio']})"

    for g, v in s["by_group"].items():
        into = "" if v.get("from_other_groups") is None else f"{v['from_other_groups']:+.2f}"
        lines.append(
            f"| {g} | {', '.join(map(str, v['clients']))} | {v['within']:+.2f} | {v['across']:+.2f} | "
            f"{diff(v.get('within_minus_across'))} | {into} |"
        )
    if s.get("same_minus_other"):
        lines += [
            "",
            f"Same group minus other group, over every pair: {diff(s['same_minus_other'])} "
            "(difference, its standard error as for two independent means, and their ratio).",
        ]
    lines += [
        "",
        "Delta matrix (row: trained on client; column: evaluated on client's tasks; groups: "
        + ", ".join(f"{c} {group[c]}" for c in clients)
        + "):",
        "",
        "| trained on | " + " | ".join(str(o) for o in clients) + " |",
        "|---:|" + "---:|" * len(clients),
    ]
    rows = [c for c in clients if str(c) in s["delta"]]
    for c in rows:
        lines.append(f"| {c} | " + " | ".join(f"{s['delta'][str(c)][str(o)]:+.1f}" for o in clients) + " |")
    zero = res[reference.replace("-", "_")]
    lines += [
        "",
        f"{reference.capitalize()} scores per task (x100, {cfg['eval_items']} items): "
        + ", ".join(f"`{t}` {100 * zero[t]:.0f}" for c in spec.clients for t in c.tasks)
        + ".",
        "",
    ]
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.md").write_text("\n".join(lines) + "\n")

    order = sorted(clients, key=lambda c: (group[c], c))
    row_order = [c for c in order if c in rows]
    mat = [[s["delta"][str(c)][str(o)] for o in order] for c in row_order]
    fig, ax = plt.subplots(figsize=(6.4, 1.8 + 0.36 * len(row_order)))
    lim = max(abs(x) for row in mat for x in row) or 1.0
    im = ax.imshow(mat, cmap="RdBu", vmin=-lim, vmax=lim)
    ax.set_xticks(range(len(order)), [str(c) for c in order])
    ax.set_yticks(range(len(row_order)), [str(c) for c in row_order])
    ax.set_xlabel("evaluated on client (grouped)")
    ax.set_ylabel("trained on client (grouped)")
    bounds = [i for i in range(1, len(order)) if group[order[i]] != group[order[i - 1]]]
    for b in bounds:
        ax.axvline(b - 0.5, color="k", lw=1)
    for b in [i for i in range(1, len(row_order)) if group[row_order[i]] != group[row_order[i - 1]]]:
        ax.axhline(b - 0.5, color="k", lw=1)
    edges = [0] + bounds + [len(order)]
    for lo, hi in zip(edges, edges[1:]):  # group names above the columns
        ax.text((lo + hi - 1) / 2, -0.75, group[order[lo]], ha="center", va="bottom", fontsize=8)
    for i, row in enumerate(mat):
        for j, v in enumerate(row):
            ax.text(j, i, f"{v:+.0f}", ha="center", va="center", fontsize=7)
    ax.set_title(
        plot_title
        or f"drake-synth transfer: score - zero-shot (x100)\n{cfg['model']}, {cfg['steps']} "
        f"steps, lr {cfg['learning_rate']}",
        pad=18,
    )
    fig.colorbar(im, ax=ax, shrink=0.8)
    fig.tight_layout()
    fig.savefig(out / f"{stem}.png", dpi=110)
    plt.close(fig)


def add_training_arguments(ap: argparse.ArgumentParser, steps: int, steps_help: str) -> None:
    """The options this script shares with bench_learning_speed: model, training length, items, seed, workers."""
    ap.add_argument("--model", default="tiny-llava-llama-m")
    ap.add_argument("--steps", type=int, default=steps, help=f"training steps per client ({steps_help})")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--eval-items", type=int, default=50, help="fresh items per task")
    ap.add_argument("--seed", type=int, default=0, help="adapter initialisation")
    ap.add_argument("--workers", type=int, default=2, help="processes, one torch thread each")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_training_arguments(ap, 800, "the 100-step board's 8 x 100")
    ap.add_argument(
        "--learning-rate",
        type=float,
        default=None,
        help="LoRA learning rate (default: the reference entries' LoraSettings default)",
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output folder (default: docs/transfer/<model>-<steps>steps-lr<learning rate>)",
    )
    ap.add_argument(
        "--report-only", action="store_true", help="rewrite the .md and .png from <out>/synth_transfer.json"
    )
    args = ap.parse_args()
    if args.out is None:
        from drake_bench.methods.lora_clients import LoraSettings as _S

        lr = args.learning_rate or _S().learning_rate
        args.out = ROOT / "docs" / "transfer" / f"{args.model}-{args.steps}steps-lr{lr:g}"
    if args.report_only:
        res = json.loads((args.out / "synth_transfer.json").read_text())
        res["summary"] = summarise(res)
        write_report(res, args.out)
        print(f"wrote {args.out / 'synth_transfer.md'}")
        return
    from drake_bench.benchmarks.manifest import load_benchmark
    from drake_bench.methods.lora_clients import LoraSettings

    settings = LoraSettings(**({"learning_rate": args.learning_rate} if args.learning_rate else {}))
    clients = [c.id for c in load_benchmark(BENCH).clients]
    jobs: list[int | None] = [None] + clients
    ctx = get_context("spawn")
    t0 = time.time()
    results = {}
    with ProcessPoolExecutor(
        args.workers,
        mp_context=ctx,
        initializer=_init,
        initargs=(args.model, args.eval_items, args.seed, settings.learning_rate),
    ) as pool:
        futures = {pool.submit(_job, j, args.steps, args.batch): j for j in jobs}
        for f in futures:
            r = f.result()
            results[r["trained_on"]] = r
            who = "zero-shot" if r["trained_on"] is None else f"client {r['trained_on']}"
            print(f"{who}: {r['seconds']:.0f}s, loss {r['loss_first']} -> {r['loss_last']}", flush=True)
    res = {
        "config": {
            "model": args.model,
            "steps": args.steps,
            "batch": args.batch,
            "eval_items": args.eval_items,
            "seed": args.seed,
            "rank": settings.rank,
            "alpha": settings.alpha,
            "learning_rate": settings.learning_rate,
            "train_seed": TRAIN_SEED,
            "eval_seed": EVAL_SEED,
        },
        "zero_shot": results[None]["scores"],
        "trained": {str(c): results[c]["scores"] for c in clients},
        "losses": {str(c): [results[c]["loss_first"], results[c]["loss_last"]] for c in clients},
        "seconds": round(time.time() - t0, 1),
    }
    res["summary"] = summarise(res)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "synth_transfer.json").write_text(json.dumps(res, indent=1, sort_keys=True) + "\n")
    write_report(res, args.out)
    announce(res, args.out / "synth_transfer.md")


if __name__ == "__main__":
    main()
