#!/usr/bin/env python
"""Client-to-client transfer on drake-synth with a learner that learns the tasks (not a test).

bench_transfer.py asks whether training a tiny VLM's LoRA on one client helps another, and finds little:
those models learn the open-answer tasks in budget but not the yes/no and multiple-choice ones, so there is
little knowledge to share. This script asks the same question of the *benchmark*, with the from-scratch FiLM
probe of bench_synth_learnability.py (which learns 78 of the 83 image tasks on its own): does data of a
related client make a new client's tasks easier to learn than data of an unrelated client does?

Protocol (fixed before the first full run; every choice is a flag):

  * one multi-task probe (``film-cmp`` at the v2 learning rate 1e-3, the learnability script's FiLMCompare)
    with one question vocabulary and one answer classifier over every answer string of the 40 client tasks,
    built from all items before any training, so every run has the same input and output space; an item
    with fewer than 5 images leaves the remaining image slots zero; choice questions are scored among the
    item's own options, as the evaluator does;
  * source: for client a, the probe is trained from a fixed initialisation on ``--source-items`` fresh items
    of each of a's four tasks (``--source-epochs``), batches of one task, tasks interleaved;
  * target: for every client b, the source probe (or the same initialisation untrained: *scratch*) is
    fine-tuned with a fresh optimiser on ``--target-items`` fresh items of each of b's tasks
    (``--target-epochs``, the same seed for every start), then scored on ``--test-items`` further items of
    each of b's tasks;
  * ``--target-head fresh`` (added after the first reports, which keep the default ``transferred``): before
    fine-tuning, the source probe's answer head is reset to scratch's initial head, so a target gets the source's
    body (what its images and questions taught) but not its answer priors; scratch is unchanged;
  * Delta[a][b] = mean over b's tasks of (accuracy fine-tuned from a - accuracy fine-tuned from scratch),
    x100. Same-group pairs above other-group pairs = related clients' knowledge helps more than unrelated
    clients'; negative other-group pairs = interference. The diagonal (a = b: more of the same tasks) is
    the reference for how much prior data of the same tasks is worth.

Items come from the task generators with seeds disjoint from the built benchmark and from each other
(source 1000 + client, target 2000 + client, test 3000). Jobs (scratch, then one per source client) run
in ``--workers`` processes with one torch thread each; results do not depend on the worker count.

    python scripts/bench_probe_transfer.py                 # ~21 min on 2 cores, current drake-synth
    python scripts/bench_probe_transfer.py --report-only   # rewrite the .md / .png from the .json
    python scripts/bench_probe_transfer.py --merge DIR_A DIR_B --out DIR   # one report from runs of other sources
    python scripts/bench_probe_transfer.py --benchmark drake-synth@1.3.0   # the archived version
    python scripts/bench_probe_transfer.py --benchmark drake-synth@1.3.0 --sources 7,8,9 --source-items 2000 \
        --source-epochs 12 --out docs/transfer/probe-film-cmp-reasoning-2000x12   # longer-trained sources (~20 min)

Writes ``synth_probe_transfer.{json,md,png}`` to ``--out`` (default docs/transfer/probe-film-cmp-<version>/); the
summary, per-group table and heatmap are bench_transfer.py's. The JSON records the benchmark version and
manifest hash it ran on.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_transfer  # noqa: E402
from bench_transfer import _items, announce, summarise, write_report  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SOURCE_SEED, TARGET_SEED, TEST_SEED = 1000, 2000, 3000
N_IMG = 5  # the most images of any drake-synth client task (Bongard sets)
_worker: dict = {}


def _splits(cfg: dict) -> dict[str, dict]:
    """Every client task's target and test items (``(task, split) -> items``), in a fixed order."""
    from drake_bench.benchmarks.manifest import load_benchmark

    spec = load_benchmark(bench_transfer.BENCH)
    return {
        c.id: {
            t: {
                "target": _items(t, cfg["target_items"], TARGET_SEED + c.id),
                "test": _items(t, cfg["test_items"], TEST_SEED),
            }
            for t in c.tasks
        }
        for c in spec.clients
    }


def vocabulary(cfg: dict) -> tuple[dict[str, int], dict[str, int]]:
    """Question words and answer classes over every item of every client (sorted, so the same in every process).
    All ten clients' source items count even when ``--sources`` picks a few, so every run has the same input and
    output space, hence the same initialisation and the same scratch baseline."""
    from bench_synth_learnability import tokens

    from drake_bench.benchmarks.manifest import load_benchmark

    spec = load_benchmark(bench_transfer.BENCH)
    items = [it for by_task in _splits(cfg).values() for s in by_task.values() for it in s["target"] + s["test"]]
    items += [it for c in spec.clients for t in c.tasks for it in _items(t, cfg["source_items"], SOURCE_SEED + c.id)]
    words = {w for it in items for w in tokens(it.question) + [t for ch in it.choices for t in tokens(ch)]}
    words |= {"<options>", "<opt>"}
    answers = {a for it in items for a in [it.answer, *it.choices]}
    return (
        {"<pad>": 0, "<unk>": 1} | {w: i + 2 for i, w in enumerate(sorted(words))},
        {a: i for i, a in enumerate(sorted(answers))},
    )


def _encode(items: list, vocab: dict[str, int], classes: dict[str, int]) -> dict:
    import torch
    from bench_synth_learnability import encode

    xi, xw, xl = encode(items, dict(vocab), max(len(it.images) for it in items), grow=False)
    return {
        "xi": xi,
        "xw": xw,
        "xl": xl,
        "y": torch.tensor([classes[it.answer] for it in items]),
        "allowed": [[classes[c] for c in it.choices] for it in items],
    }


def _init(cfg: dict, vocab: dict[str, int], classes: dict[str, int]) -> None:
    import torch

    torch.set_num_threads(1)
    bench_transfer.BENCH = cfg["benchmark"]  # spawned workers re-import the module
    splits = _splits(cfg)
    _worker.update(
        cfg=cfg,
        vocab=vocab,
        classes=classes,
        data={
            c: {t: {k: _encode(v, vocab, classes) for k, v in s.items()} for t, s in by_task.items()}
            for c, by_task in splits.items()
        },
    )


def fresh_probe(cfg: dict, vocab: dict, classes: dict):
    import torch
    from bench_synth_learnability import FiLMCompare

    torch.manual_seed(cfg["seed"])
    return FiLMCompare(len(vocab), len(classes), N_IMG)


def train(net, tasks: dict[str, dict], epochs: int, lr: float, batch: int, seed: int):
    """Multi-task training: batches of one task, all tasks' batches shuffled together each epoch (AdamW, one-cycle)."""
    import torch
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(seed)
    per_epoch = sum(math.ceil(len(d["y"]) / batch) for d in tasks.values())
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=epochs * per_epoch, pct_start=0.15)
    net.train()
    for _ in range(epochs):
        plan = [(t, idx) for t, d in tasks.items() for idx in torch.randperm(len(d["y"]), generator=g).split(batch)]
        for j in torch.randperm(len(plan), generator=g).tolist():
            t, idx = plan[j]
            d = tasks[t]
            width = int(d["xl"][idx].max())
            loss = F.cross_entropy(net(d["xi"][idx], d["xw"][idx, :width], d["xl"][idx]), d["y"][idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
    return net


def accuracy(net, tasks: dict[str, dict]) -> dict[str, float]:
    """Exact-match accuracy per task; choice questions are answered among the item's own options."""
    import torch

    net.eval()
    out = {}
    with torch.no_grad():
        for t, d in tasks.items():
            logits = torch.cat([net(d["xi"][s], d["xw"][s], d["xl"][s]) for s in torch.arange(len(d["y"])).split(128)])
            for i, allowed in enumerate(d["allowed"]):
                if allowed:
                    keep = logits[i, allowed].clone()
                    logits[i] = -1e9
                    logits[i, allowed] = keep
            out[t] = float((logits.argmax(1) == d["y"]).float().mean())
    net.train()
    return out


def _job(source: int | None) -> dict:
    """Pretrain on ``source``'s tasks (None: scratch), then fine-tune a copy on every client and score it."""
    w = _worker
    cfg, data = w["cfg"], w["data"]
    t0 = time.time()
    net = fresh_probe(cfg, w["vocab"], w["classes"])
    source_scores = None
    if source is not None:
        from drake_bench.benchmarks.manifest import load_benchmark

        own = {
            t: _encode(_items(t, cfg["source_items"], SOURCE_SEED + source), w["vocab"], w["classes"])
            for t in load_benchmark(bench_transfer.BENCH).client(source).tasks
        }
        train(net, own, cfg["source_epochs"], cfg["lr"], cfg["batch"], cfg["seed"])
        source_scores = accuracy(net, {t: data[source][t]["test"] for t in own})
    if cfg.get("target_head", "transferred") == "fresh" and source is not None:
        # transfer the body only: the answer head restarts from scratch's initial head, so a source can pass on
        # what its representations learnt but not its answer priors (the standard fine-tuning protocol)
        net.head.load_state_dict(fresh_probe(cfg, w["vocab"], w["classes"]).head.state_dict())
    scores = {}
    for client, by_task in data.items():
        tuned = train(
            copy.deepcopy(net),
            {t: s["target"] for t, s in by_task.items()},
            cfg["target_epochs"],
            cfg["lr"],
            cfg["batch"],
            cfg["seed"] + 1,
        )
        scores.update(accuracy(tuned, {t: s["test"] for t, s in by_task.items()}))
    return {"source": source, "scores": scores, "source_scores": source_scores, "seconds": round(time.time() - t0, 1)}


def report(res: dict, out: Path) -> None:
    cfg = res["config"]
    intro = (
        f"Generated by `python scripts/bench_probe_transfer.py` (see its docstring) on {cfg['benchmark']} "
        f"(manifest {cfg['manifest_hash'][:19]}...): a multi-task FiLM probe "
        f"(`film-cmp`, learning rate {cfg['lr']}, batch {cfg['batch']}) pretrained on {cfg['source_items']} fresh items "
        f"of each of one client's four tasks ({cfg['source_epochs']} epochs), then fine-tuned on "
        f"{cfg['target_items']} fresh items of each of another client's tasks ({cfg['target_epochs']} epochs"
        f"{'; the answer head restarts from the scratch initialisation' if cfg.get('target_head') == 'fresh' else ''}) and "
        f"scored on {cfg['test_items']} further items per task; Delta = accuracy minus that of the same fine-tuning "
        "from the untrained initialisation (scratch), x100, averaged over the evaluated client's tasks."
    )
    if res.get("merged_from"):
        intro += (
            " Joined by `--merge` from the runs in "
            + ", ".join(f"`{d}`" for d in res["merged_from"])
            + " (same protocol, identical scratch scores)."
        )
    write_report(
        res,
        out,
        intro=intro,
        reference="scratch",
        stem="synth_probe_transfer",
        plot_title=f"FiLM probe: fine-tuned from a client - from scratch (x100)\n"
        f"{cfg['source_items']} source / {cfg['target_items']} target items per task",
    )
    from drake_bench.benchmarks.manifest import load_benchmark

    src = res["source_scores"]
    lines = [
        "",
        "Source probes on their own tasks before fine-tuning (accuracy x100, same test items):",
        "",
        "| client | " + " | ".join(f"task {i}" for i in range(1, 5)) + " |",
        "|---:|" + ":---|" * 4,
    ]
    for c in load_benchmark(bench_transfer.BENCH).clients:  # manifest order (the JSON's keys are sorted)
        if str(c.id) in src:
            lines.append(f"| {c.id} | " + " | ".join(f"`{t}` {100 * src[str(c.id)][t]:.0f}" for t in c.tasks) + " |")
    with (out / "synth_probe_transfer.md").open("a") as f:
        f.write("\n".join(lines) + "\n")


def finish(res: dict, out: Path, save_json: bool = True) -> None:
    """Summarise a result against scratch, save it (unless only the report is rewritten) and write the report."""
    bench_transfer.BENCH = res["config"]["benchmark"]
    res["summary"] = summarise(res, reference="scratch")
    out.mkdir(parents=True, exist_ok=True)
    if save_json:
        (out / "synth_probe_transfer.json").write_text(json.dumps(res, indent=1, sort_keys=True) + "\n")
    report(res, out)


def merge(runs: list[dict], where: list[Path]) -> dict:
    """One result from runs that trained different sources under the same protocol. The scratch scores must be
    equal to the digit: they are the reference every Delta is measured against."""
    first = runs[0]
    for r, d in zip(runs[1:], where[1:]):
        if r["config"] != first["config"]:
            diff = sorted(
                k for k in set(r["config"]) | set(first["config"]) if r["config"].get(k) != first["config"].get(k)
            )
            raise SystemExit(f"--merge: {d} ran another protocol than {where[0]} ({', '.join(diff)} differ)")
        if r["scratch"] != first["scratch"]:
            raise SystemExit(f"--merge: {d} has other scratch scores than {where[0]}; their Deltas are not comparable")
        if overlap := sorted(set(r["trained"]) & set(first["trained"])):
            raise SystemExit(f"--merge: sources {overlap} are in more than one run")
    res = {
        "config": first["config"],
        "scratch": first["scratch"],
        "trained": {},
        "source_scores": {},
        "seconds": round(sum(r["seconds"] for r in runs), 1),
        "merged_from": [str(d) for d in where],
    }
    for r in runs:
        res["trained"].update(r["trained"])
        res["source_scores"].update(r["source_scores"])
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source-items", type=int, default=1000, help="items per source task")
    ap.add_argument("--source-epochs", type=int, default=8)
    ap.add_argument("--target-items", type=int, default=64, help="items per target task (few: transfer matters)")
    ap.add_argument("--target-epochs", type=int, default=12)
    ap.add_argument("--test-items", type=int, default=100)
    ap.add_argument("--lr", type=float, default=1e-3, help="peak learning rate (the learnability probe v2's)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0, help="probe initialisation (fine-tuning uses seed + 1)")
    ap.add_argument(
        "--sources",
        type=str,
        default=None,
        help="comma-separated source clients (default: all ten); the scratch run is always included",
    )
    ap.add_argument(
        "--target-head",
        choices=("transferred", "fresh"),
        default="transferred",
        help="fresh: fine-tune the source's body with scratch's initial answer head (the body carries the "
        "knowledge, not the source's answer priors); the reports before 2026-11-22 used transferred",
    )
    ap.add_argument("--workers", type=int, default=2, help="processes, one torch thread each")
    ap.add_argument(
        "--benchmark",
        default="drake-synth",
        help="drake-synth (the current version) or a pinned one, e.g. drake-synth@1.3.0",
    )
    ap.add_argument(
        "--out", type=Path, default=None, help="default docs/transfer/probe-film-cmp-<benchmark version>[-fresh-head]"
    )
    ap.add_argument("--report-only", action="store_true", help="rewrite the .md and .png from the .json")
    ap.add_argument(
        "--merge",
        type=Path,
        nargs="+",
        default=None,
        metavar="DIR",
        help="join runs with different --sources into one report in --out (refused unless their protocol "
        "and scratch scores are identical)",
    )
    args = ap.parse_args()
    from drake_bench.benchmarks.manifest import load_benchmark

    spec = load_benchmark(args.benchmark)
    if args.out is None:
        head = "-fresh-head" if args.target_head == "fresh" else ""
        args.out = ROOT / "docs" / "transfer" / f"probe-film-cmp-{spec.version}{head}"
    path = args.out / "synth_probe_transfer.json"
    if args.merge or args.report_only:
        res = (
            merge([json.loads((d / "synth_probe_transfer.json").read_text()) for d in args.merge], args.merge)
            if args.merge
            else json.loads(path.read_text())
        )
        finish(res, args.out, save_json=bool(args.merge))  # --report-only leaves the recorded JSON as it is
        print(f"wrote {args.out / 'synth_probe_transfer.md'}")
        return
    cfg = {
        k: getattr(args, k)
        for k in (
            "source_items",
            "source_epochs",
            "target_items",
            "target_epochs",
            "test_items",
            "lr",
            "batch",
            "seed",
            "target_head",
        )
    }
    cfg["eval_items"] = cfg["test_items"]  # the name bench_transfer's report reads
    bench_transfer.BENCH = cfg["benchmark"] = f"{spec.name}@{spec.version}"
    cfg["manifest_hash"] = spec.content_hash
    clients = [c.id for c in spec.clients]
    sources = clients if args.sources is None else [int(x) for x in args.sources.split(",")]
    if unknown := sorted(set(sources) - set(clients)):
        ap.error(f"--sources: no client {unknown} in {bench_transfer.BENCH} (clients {clients})")
    t0 = time.time()
    vocab, classes = vocabulary(cfg)
    print(f"{len(vocab)} words, {len(classes)} answer classes ({time.time() - t0:.0f}s)", flush=True)
    results = {}
    with ProcessPoolExecutor(
        args.workers, mp_context=get_context("spawn"), initializer=_init, initargs=(cfg, vocab, classes)
    ) as pool:
        futures = [pool.submit(_job, s) for s in [None, *sources]]
        for f in futures:
            r = f.result()
            results[r["source"]] = r
            who = "scratch" if r["source"] is None else f"source client {r['source']}"
            own = (
                ""
                if r["source_scores"] is None
                else " own tasks " + " ".join(f"{100 * v:.0f}" for v in r["source_scores"].values())
            )
            print(f"{who}: {r['seconds']:.0f}s{own}", flush=True)
    res = {
        "config": cfg,
        "scratch": results[None]["scores"],
        "trained": {str(s): results[s]["scores"] for s in sources},
        "source_scores": {str(s): results[s]["source_scores"] for s in sources},
        "seconds": round(time.time() - t0, 1),
    }
    finish(res, args.out)
    announce(res, args.out / "synth_probe_transfer.md")


if __name__ == "__main__":
    main()
