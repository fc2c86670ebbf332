#!/usr/bin/env python
"""FedMosaic's canonical board read for the paper's claims: Table 7's ablation steps and the communication claim.

The board itself is built and rendered by the package (`drake-bench leaderboard build drake-synth-cross-family
--methods sft,fedit,fedit-pqlora,fedmosaic-equal,fedmosaic`, then `drake-bench leaderboard render ...`); this
script only reads its result files and writes ``<tables>/fedmosaic-board.md`` / ``.json``:

* per arm: Self and Others A_last and A_AUC (mean ± population std over seeds), worst client, local steps and the
  compute probe's measured relative compute (the run is compute-matched to SFT's training FLOPs);
* Table 7 (FedIT -> (+) PQ-LoRA -> (+) equal-weight FedMosaic, the dual path and gate -> (+) RELA), each step one
  change: the paired difference per seed on Self and Others A_last, its mean and std, and whether the means are
  in the paper's increasing order;
* communication per round, summed over clients, in elements (what the paper's -10.9% counts) and in bytes, against
  FedIT: the methods send at different precisions, so bytes alone overstate the saving;
* FedMosaic's alignment audit as the result files record it.

    python scripts/fedmosaic_board_report.py
    python scripts/fedmosaic_board_report.py --runs /tmp/other-board/runs --tables /tmp/out
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from drake_bench.results.result_file import RunResult, read_result

ARMS = ["sft", "fedit", "fedit-pqlora", "fedmosaic-equal", "fedmosaic"]
LABELS = {
    "sft": "SFT",
    "fedit": "FedIT",
    "fedit-pqlora": "FedIT + PQ-LoRA",
    "fedmosaic-equal": "FedMosaic, equal weights",
    "fedmosaic": "FedMosaic",
}
TABLE_7 = ["fedit", "fedit-pqlora", "fedmosaic-equal", "fedmosaic"]  # each step adds one thing
STEP_NAMES = {"fedit-pqlora": "(+) PQ-LoRA", "fedmosaic-equal": "(+) dual path and gate", "fedmosaic": "(+) RELA"}
AUDIT = [
    "l2_ratio",
    "cca_corr_top",
    "cca_corr_mean",
]  # A-code L2 after/before alignment; B mapping's canonical correlations
METRICS = ["self_last", "self_auc", "others_last", "others_auc", "worst_client_self"]


def mean_std(xs: list[float]) -> tuple[float, float]:
    return statistics.fmean(xs), statistics.pstdev(xs)


def fmt(xs: list[float], scale: float = 100.0) -> str:
    m, s = mean_std(xs)
    return f"{m * scale:.2f} ± {s * scale:.2f}"


def pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 100:+.1f}%"


def num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:,.0f}"


def sends(arm: dict[str, Any]) -> bool:
    """Whether the arm exchanges parameters (SFT's messages are empty frames)."""
    elements = arm["uplink_elements_per_round"]
    return bool(elements) if elements is not None else arm["uplink_bytes_per_round"] > 1000


def per_seed(res: RunResult, metric: str) -> dict[int, float]:
    return {p.seed: getattr(p, metric) for p in res.summary.per_seed}


def load(runs: Path) -> dict[str, RunResult]:
    found: dict[str, RunResult] = {}
    for arm in ARMS:
        files = sorted(runs.glob(f"*/*/{arm}/*/result.json"))
        if len(files) > 1:
            raise SystemExit(f"{arm}: more than one result file under {runs}: {files}")
        if files:
            res = read_result(files[0])
            if res.status == "complete":
                found[arm] = res
    return found


def report(results: dict[str, RunResult]) -> dict[str, Any]:
    out: dict[str, Any] = {"arms": {}, "table_7": [], "communication": {}, "alignment": {}}
    for arm, res in results.items():
        compute = res.fl.extra.get("compute") or {}
        out["arms"][arm] = {
            "seeds": res.seeds,
            "local_steps": res.fl.local_steps,
            "measured_relative_compute": compute.get("measured_relative_compute"),
            **{m: [per_seed(res, m)[s] for s in res.seeds] for m in METRICS},
            "uplink_elements_per_round": res.summary.aggregate.uplink_elements_per_round.mean,
            "downlink_elements_per_round": res.summary.aggregate.downlink_elements_per_round.mean,
            "uplink_bytes_per_round": res.summary.aggregate.uplink_bytes_per_round.mean,
            "downlink_bytes_per_round": res.summary.aggregate.downlink_bytes_per_round.mean,
        }
        rows = [d for d in res.raw.diagnostics if d.key.startswith("alignment/")]
        if rows:  # the alignment audit FedMosaic's round 1 reports (A-code L2 after/before, canonical correlations)
            by_arch: dict[str, dict[str, list[float]]] = {}
            for d in rows:
                arch = d.key.split("/")[1]
                for k in AUDIT:
                    if isinstance(d.values.get(k), (int, float)):
                        by_arch.setdefault(arch, {}).setdefault(k, []).append(float(d.values[k]))
            out["alignment"][arm] = {
                arch: {
                    k: {"median": statistics.median(v), "min": min(v), "max": max(v), "n": len(v)}
                    for k, v in ks.items()
                }
                for arch, ks in sorted(by_arch.items())
            }
    steps = [a for a in TABLE_7 if a in results]
    for before, after in zip(steps, steps[1:]):
        added = TABLE_7[TABLE_7.index(before) + 1 : TABLE_7.index(after) + 1]  # more than one where an arm is missing
        row: dict[str, Any] = {"step": " and ".join(STEP_NAMES[a] for a in added), "from": before, "to": after}
        for metric in ("self_last", "others_last"):
            a, b = per_seed(results[before], metric), per_seed(results[after], metric)
            seeds = sorted(set(a) & set(b))
            diffs = [b[s] - a[s] for s in seeds]
            row[metric] = {"paired": diffs, "mean": statistics.fmean(diffs), "std": statistics.pstdev(diffs)}
        out["table_7"].append(row)
    for metric in ("self_last", "others_last"):
        means = [statistics.fmean(out["arms"][a][metric]) for a in steps]
        out[f"table_7_order_{metric}"] = (
            all(x <= y for x, y in zip(means, means[1:])) if len(steps) == len(TABLE_7) else None
        )  # None: an arm is missing
    if "fedit" in results:
        base = out["arms"]["fedit"]
        for arm in results:
            if arm == "fedit" or not sends(out["arms"][arm]):
                continue
            a = out["arms"][arm]
            out["communication"][arm] = {
                k: a[k] / base[k] - 1 if a[k] is not None and base[k] else None
                for k in (
                    "uplink_elements_per_round",
                    "downlink_elements_per_round",
                    "uplink_bytes_per_round",
                    "downlink_bytes_per_round",
                )
            }
    return out


def markdown(rep: dict[str, Any], runs: Path) -> str:
    arms = rep["arms"]
    lines = [
        "# FedMosaic's board: Table 7 and the communication claim",
        "",
        f"Read from the result files under `{runs}` by `python scripts/fedmosaic_board_report.py`. Scores x100, mean ±",
        'population std over the seeds; "paired" is the per-seed difference. Compute-matched: each method\'s local',
        "steps are the baselines' scaled by SFT's measured training FLOPs over its own (the evaluator's probe).",
        "",
        "| Arm | Local steps | Relative compute | Self A_last | Self A_AUC | Others A_last | Others A_AUC | Worst client |",
        "|:---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for arm in ARMS:
        if arm not in arms:
            continue
        a = arms[arm]
        rc = a["measured_relative_compute"]
        lines.append(
            f"| {LABELS[arm]} | {a['local_steps']} | {'' if rc is None else f'{rc:.3f}'} | "
            + " | ".join(fmt(a[m]) for m in METRICS)
            + " |"
        )
    lines += [
        "",
        "**Table 7, one change per step** (paired over seeds):",
        "",
        "| Step | Self A_last | Self per seed | Others A_last | Others per seed |",
        "|:---|---:|:---|---:|:---|",
    ]
    for row in rep["table_7"]:
        cells = []
        for metric in ("self_last", "others_last"):
            d = row[metric]
            cells += [
                f"{d['mean'] * 100:+.2f} ± {d['std'] * 100:.2f}",
                ", ".join(f"{x * 100:+.2f}" for x in d["paired"]),
            ]
        lines.append(f"| {row['step']} | " + " | ".join(cells) + " |")
    said = {True: "yes", False: "no", None: "not all four arms ran"}
    lines += [
        "",
        f"Means in the paper's increasing order (FedIT <= ... <= FedMosaic): Self "
        f"{said[rep['table_7_order_self_last']]}, Others {said[rep['table_7_order_others_last']]}.",
        "",
        "**Communication per round** (all clients), against FedIT:",
        "",
        "| Arm | Uplink elements | Downlink elements | Uplink bytes | Downlink bytes | vs FedIT, elements up / down | vs FedIT, bytes up / down |",
        "|:---|---:|---:|---:|---:|---:|---:|",
    ]
    for arm in ARMS:
        if arm not in arms or not sends(arms[arm]):
            continue
        a, c = arms[arm], rep["communication"].get(arm)
        rel = "" if c is None else f"{pct(c['uplink_elements_per_round'])} / {pct(c['downlink_elements_per_round'])}"
        relb = "" if c is None else f"{pct(c['uplink_bytes_per_round'])} / {pct(c['downlink_bytes_per_round'])}"
        lines.append(
            f"| {LABELS[arm]} | {num(a['uplink_elements_per_round'])} | {num(a['downlink_elements_per_round'])} | "
            f"{a['uplink_bytes_per_round']:,.0f} | {a['downlink_bytes_per_round']:,.0f} | {rel or '(reference)'} | "
            f"{relb or '(reference)'} |"
        )
    if rep["alignment"]:
        lines += [
            "",
            "**Alignment audit** (round 1, every seed and PQ module of each aligned architecture; median (min-max)):",
            "",
            "| Arm | Architecture | " + " | ".join(AUDIT) + " |",
            "|:---|:---|" + "---:|" * len(AUDIT),
        ]
        for arm, archs in rep["alignment"].items():
            for arch, ks in archs.items():
                cells = [
                    f"{ks[k]['median']:.3f} ({ks[k]['min']:.3f}-{ks[k]['max']:.3f})" if k in ks else "" for k in AUDIT
                ]
                lines.append(f"| {LABELS[arm]} | {arch} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=Path, default=Path("leaderboard/fedmosaic/runs"))
    ap.add_argument("--tables", type=Path, default=Path("docs/findings"))
    args = ap.parse_args()
    results = load(args.runs)
    if not results:
        raise SystemExit(f"no complete result file of {ARMS} under {args.runs}")
    rep = report(results)
    args.tables.mkdir(parents=True, exist_ok=True)
    (args.tables / "fedmosaic-board.json").write_text(json.dumps(rep, indent=1, sort_keys=True, default=str) + "\n")
    (args.tables / "fedmosaic-board.md").write_text(markdown(rep, args.runs))
    print(markdown(rep, args.runs))


if __name__ == "__main__":
    main()
