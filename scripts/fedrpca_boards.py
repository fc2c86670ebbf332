#!/usr/bin/env python
"""FedRPCA's boards: its paper's claim at toy scale, run through `drake-bench run` (not a test).

Four arms on each setting, three seeds each, as FedRPCA's paper ranks them: FedIT (FedAvg of the LoRA
adapters), Task Arithmetic (beta = 2 on the plain mean), FedRPCA (adaptive beta) and FedRPCA with beta = 1 (the
sanity arm: FedAvg through the Robust-PCA path). Settings: fedllm-synth (52 clients, the paper's regime of
many clients) under Dirichlet splits with alpha 1.0, 0.3 and 0.1, and drake-synth under PFL-Static (10 clients).

Every run is a plain `drake-bench run` (its command is printed first), so each setting resumes where it stopped
and any one of them can be rerun by hand. Two run options differ from the defaults, the same for every arm:

* ``--no-fast-adaptation``: the claim is about the federated rounds; adaptation to unseen tasks is not part of it.
* ``--others-subsample 0`` on fedllm-synth's Dirichlet splits: a client's share holds items of most of the 104
  tasks, so Others would score 52 x 51 x (up to 104) task shares a round; the claim is about a client's own
  data (Self), and the Others columns of those boards stay empty.

Writes ``<out>/runs/`` and ``<out>/runs-beta1/`` (result files), one board per setting
(``<out>/<benchmark>/<scenario>/summary.md`` with its plots, from `drake-bench report`) and
``<tables>/fedrpca-boards.md`` / ``.json`` (default docs/findings/; a leaderboard folder holds result files only): Self A_last and A_AUC per arm (mean ± population std over seeds),
Self after round 2 (the early rounds), the paired FedRPCA - FedIT difference per seed, beta and the energy
ratio E per round, and the cost (server aggregation and client training seconds per round, as the evaluator
measured them; the arms share the machine, two or three processes on two cores, so seconds are comparable
between arms of one setting only roughly).

    python scripts/fedrpca_boards.py                           # every setting (hours on 2 cores; resumes)
    python scripts/fedrpca_boards.py --settings fedllm-synth:dirichlet:0.1
    python scripts/fedrpca_boards.py --report-only             # tables from the result files there are

The cost of a round is measured apart, with the two methods run one after the other in one process on an idle
machine (the boards' arms share it), and tabled with ``--cost``:

    drake-bench run --benchmark fedllm-synth --scenario dirichlet:0.1 --methods fedit,fedrpca --seeds 0 --rounds 2 \
        --jobs 1 --no-fast-adaptation --others-subsample 0 --out /tmp/rpca-cost
    python scripts/fedrpca_boards.py --cost /tmp/rpca-cost/fedllm-synth/dirichlet-0.1
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from drake_bench.results.result_file import load_result_data

SETTINGS = [
    "fedllm-synth:dirichlet:0.1",
    "fedllm-synth:dirichlet:1.0",
    "fedllm-synth:dirichlet:0.3",
    "drake-synth:static",
]  # the two ends of the alpha range first: the claim is about the contrast
ARMS = ["fedit", "task-arithmetic", "fedrpca", "fedrpca (beta=1)"]
SEEDS = "0,1,2"


def _split(setting: str) -> tuple[str, str, str]:
    benchmark, _, scenario = setting.partition(":")
    tag = scenario.replace(":", "-") if scenario.startswith("dirichlet") else scenario
    if tag.startswith("dirichlet-"):  # the evaluator's tag writes alpha with %g
        tag = f"dirichlet-{float(tag.split('-', 1)[1]):g}"
    return benchmark, scenario, tag


def commands(setting: str, out: Path, padded: bool = False) -> list[list[str]]:
    benchmark, scenario, _ = _split(setting)
    common = [
        "drake-bench",
        "run",
        "--benchmark",
        benchmark,
        "--scenario",
        scenario,
        "--seeds",
        SEEDS,
        "--no-fast-adaptation",
    ] + (["--set", "packed_training=false"] if padded else [])
    if scenario.startswith("dirichlet") and benchmark == "fedllm-synth":
        common += ["--others-subsample", "0"]
    return [
        common + ["--methods", "fedit,task-arithmetic,fedrpca", "--out", str(out / "runs")],
        common + ["--methods", "fedrpca", "--set", "fedrpca.beta=1", "--jobs", "1", "--out", str(out / "runs-beta1")],
    ]


def result_files(setting: str, out: Path) -> dict[str, Path]:
    benchmark, _, tag = _split(setting)
    files = {m: out / "runs" / benchmark / tag / m / "1.0" / "result.json" for m in ARMS[:3]}
    files["fedrpca (beta=1)"] = out / "runs-beta1" / benchmark / tag / "fedrpca" / "1.0" / "result.json"
    return files


def _ms(xs: list[float], scale: float = 100.0) -> str:
    if not xs:
        return "–"
    if len(xs) == 1:
        return f"{scale * xs[0]:.2f}"
    return f"{scale * statistics.mean(xs):.2f} ± {scale * statistics.pstdev(xs):.2f}"


def seconds_per_round(result: dict) -> dict[str, float | None]:
    """All clients' training and the server's aggregation, seconds per round, mean over seeds: the evaluator's own
    summary of the result file (``summary.aggregate``)."""
    agg = result["summary"]["aggregate"]
    return {k: agg[k]["mean"] for k in ("train_seconds_per_round", "aggregate_seconds_per_round")}


def measure(path: Path) -> dict:
    """Per-seed numbers of one result file: Self A_last / A_AUC, Self after round 1, beta and E, seconds."""
    d = load_result_data(path)
    per_seed = {s["seed"]: s for s in d["summary"]["per_seed"]}
    raw = d["raw"]
    # the second evaluated round is the first whose scores the server's rule can have moved: a client is scored
    # after its local training, and round 1's training starts from the same initial adapter under every arm
    rounds = sorted({r["eval_round"] for r in raw["scores"]})
    first = rounds[1] if len(rounds) > 1 else rounds[0]
    early: dict[int, list[float]] = defaultdict(list)
    for r in raw["scores"]:
        if r["role"] == "self" and r["eval_round"] == first:
            early[r["seed"]].append(r["score"])
    diag: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in raw.get("diagnostics", []):
        v = row["values"]
        if v.get("aggregated_by") == "rpca":
            diag[row["round"]]["beta"].append(v["beta"])
            diag[row["round"]]["energy_ratio"].append(v["energy_ratio"])
            diag[row["round"]]["admm_iterations"].append(v["admm_iterations"])
            diag[row["round"]]["admm_converged"].append(bool(v["admm_converged"]))
    return {
        "seeds": sorted(per_seed),
        "self_last": {s: per_seed[s]["self_last"] for s in per_seed},
        "self_auc": {s: per_seed[s]["self_auc"] for s in per_seed},
        "others_last": {s: per_seed[s]["others_last"] for s in per_seed},
        "self_round2": {s: statistics.mean(v) for s, v in early.items()},  # mean over Self rows, all clients
        "early_eval_round": first,
        **seconds_per_round(d),
        "per_round": {
            r: {k: statistics.mean(map(float, v)) for k, v in vals.items()} for r, vals in sorted(diag.items())
        },
    }


def report(out: Path, settings: list[str], tables: Path) -> None:
    data: dict[str, dict[str, dict]] = {}
    lines = [
        "# FedRPCA's boards",
        "",
        "Written by `python scripts/fedrpca_boards.py` from the result files under `leaderboard/fedrpca/runs/` and "
        "`leaderboard/fedrpca/runs-beta1/`. "
        "Scores x100, mean ± population std over seeds 0-2; *Self r2* is the mean Self score after the second "
        "evaluated round, the first the server's rule can move (a client is scored after its local training, and "
        "round 1 starts from one initial adapter under every arm); *paired* is FedRPCA minus FedIT per seed. Cost: seconds per round "
        "as the evaluator measured them (all clients' training summed, the server's `aggregate` call), wall-clock while the arms "
        "shared the machine: not a cost measurement (docs/findings/fedrpca.md#cost has one).",
        "",
    ]
    for setting in settings:
        files = {arm: p for arm, p in result_files(setting, out).items() if p.is_file()}
        if not files:
            continue
        m = {arm: measure(p) for arm, p in files.items()}
        data[setting] = m
        benchmark, _, tag = _split(setting)
        lines += [
            f"## {benchmark} / {tag}",
            "",
            "| arm | seeds | Self A_last | Self A_AUC | Self r2 | Others A_last | train s/round | server s/round |",
            "|:---|:---|---:|---:|---:|---:|---:|---:|",
        ]
        for arm in ARMS:
            if arm not in m:
                lines.append(f"| {arm} | not run | | | | | | |")
                continue
            x = m[arm]
            others = [v for v in x["others_last"].values() if v is not None]
            lines.append(
                f"| {arm} | {','.join(map(str, x['seeds']))} | {_ms(list(x['self_last'].values()))} | "
                f"{_ms(list(x['self_auc'].values()))} | {_ms(list(x['self_round2'].values()))} | {_ms(others)} | "
                f"{x['train_seconds_per_round']:.1f} | {x['aggregate_seconds_per_round'] or 0:.2f} |"
            )
        if "fedit" in m:
            for arm in ("task-arithmetic", "fedrpca", "fedrpca (beta=1)"):
                if arm in m:
                    seeds = sorted(set(m[arm]["seeds"]) & set(m["fedit"]["seeds"]))
                    diffs = [100 * (m[arm]["self_last"][s] - m["fedit"]["self_last"][s]) for s in seeds]
                    early = [100 * (m[arm]["self_round2"][s] - m["fedit"]["self_round2"][s]) for s in seeds]
                    lines.append("")
                    lines.append(
                        f"{arm} - fedit, Self A_last per seed: {', '.join(f'{d:+.2f}' for d in diffs)} "
                        f"(mean {statistics.mean(diffs):+.2f}); after round 2: "
                        f"{', '.join(f'{d:+.2f}' for d in early)}."
                    )
            if "fedrpca" in m and m["fedit"]["train_seconds_per_round"]:
                fedit_round = m["fedit"]["train_seconds_per_round"] + (m["fedit"]["aggregate_seconds_per_round"] or 0)
                rpca_round = m["fedrpca"]["train_seconds_per_round"] + (
                    m["fedrpca"]["aggregate_seconds_per_round"] or 0
                )
                lines += [
                    "",
                    f"Round time (training + aggregation): FedRPCA {rpca_round:.1f} s, FedIT {fedit_round:.1f} s, "
                    f"ratio {rpca_round / fedit_round:.2f} (the paper: about 1.5 on ViT-B/32 with 50 clients).",
                ]
        if "fedrpca" in m and m["fedrpca"]["per_round"]:
            lines += [
                "",
                "FedRPCA's server, mean over the LoRA matrices it split (and over seeds):",
                "",
                "| round | beta | energy ratio E | ADMM iterations | converged share |",
                "|---:|---:|---:|---:|---:|",
            ]
            for r, v in m["fedrpca"]["per_round"].items():
                lines.append(
                    f"| {r} | {v['beta']:.2f} | {v['energy_ratio']:.3f} | {v['admm_iterations']:.0f} | "
                    f"{v['admm_converged']:.2f} |"
                )
        lines.append("")
    tables.mkdir(parents=True, exist_ok=True)
    (tables / "fedrpca-boards.md").write_text("\n".join(lines) + "\n")
    (tables / "fedrpca-boards.json").write_text(json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")
    print(f"wrote {tables / 'fedrpca-boards.md'}")


def cost(board: Path) -> None:
    """FedIT's and FedRPCA's seconds per round from one board folder, side by side, with their ratio."""
    rows = {}
    for method in ("fedit", "fedrpca"):
        secs = seconds_per_round(load_result_data(board / method / "1.0" / "result.json"))
        rows[method] = (secs["train_seconds_per_round"], secs["aggregate_seconds_per_round"])
    print("| method | clients' training s/round | server aggregate s/round | round s |")
    print("|:---|---:|---:|---:|")
    for method, (t, a) in rows.items():
        print(f"| {method} | {t:.1f} | {a:.2f} | {t + a:.1f} |")
    (ft, fa), (rt, ra) = rows["fedit"], rows["fedrpca"]
    print(
        f"\nFedRPCA / FedIT, round time: {(rt + ra) / (ft + fa):.2f}; server alone: {ra / fa:.0f}x "
        "(the paper: about 1.5x a FedAvg round, ViT-B/32 with 50 clients)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--settings", default=",".join(SETTINGS), help=f"comma-separated, from {SETTINGS}")
    ap.add_argument("--out", type=Path, default=Path("leaderboard/fedrpca"))
    ap.add_argument("--tables", type=Path, default=Path("docs/findings"), help="where fedrpca-boards.md/.json go")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument(
        "--padded",
        action="store_true",
        help="train right-padded (packed_training=false), as the committed boards were: reruns them exactly",
    )
    ap.add_argument(
        "--cost",
        type=Path,
        help="a board folder with fedit and fedrpca result files: print their round times side by side and stop",
    )
    args = ap.parse_args()
    if args.cost:
        cost(args.cost)
        return
    settings = [s.strip() for s in args.settings.split(",") if s.strip()]
    unknown = [s for s in settings if s not in SETTINGS]
    if unknown:
        ap.error(f"--settings: unknown {unknown}; choose from {SETTINGS}")
    if not args.report_only:
        for setting in settings:
            # the three arms of the first command share its two workers; the beta = 1 arm runs beside them
            # in its own process (its own output folder), so no core idles while FedRPCA runs alone
            procs = []
            for cmd in commands(setting, args.out, args.padded):
                print("$", " ".join(cmd), flush=True)
                procs.append((cmd, subprocess.Popen(cmd)))
            failed = [" ".join(cmd) for cmd, p in procs if p.wait() != 0]
            if failed:
                sys.exit(f"failed (rerun to resume): {failed}")
            benchmark, _, tag = _split(setting)
            files = [str(p) for p in result_files(setting, args.out).values()]
            subprocess.run(["drake-bench", "report", *files, "--out", str(args.out / benchmark / tag)], check=True)
    report(
        args.out, SETTINGS, args.tables
    )  # every setting with result files: a run of one setting keeps the others' tables


if __name__ == "__main__":
    sys.exit(main())
