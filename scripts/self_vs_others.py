#!/usr/bin/env python
"""Self vs Others of each result file, per seed, with the spread over clients (not a test).

Reads result files (``drake-bench run`` writes them), recomputes nothing, and prints a Markdown
table: Self, Others, their gap (x100), how many clients have Self above Others, and the standard
error of the gap's mean over clients (sample std / sqrt(clients)). A gap several standard errors
wide and positive for most clients is what "Self clearly exceeds Others" should mean; one
seed's gap alone is not.

With ``--tasks``: per task at the last evaluation point, the owner's score (Self) and the mean
over the other clients that evaluated it (Others), item-weighted, from the raw score table.

Usage: python scripts/self_vs_others.py [--tasks] leaderboard/main-job*/drake-synth/dynamic/*/1.0/result.json
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def rows(path: Path) -> list[str]:
    res = json.loads(path.read_text())
    steps = res["fl"]["local_steps"]
    out = []
    for seed in res["summary"]["per_seed"]:
        for when in ("last", "auc"):
            gaps = [100 * (c[f"self_{when}"] - c[f"others_{when}"]) for c in seed["per_client"]
                    if c[f"self_{when}"] is not None and c[f"others_{when}"] is not None]
            se = statistics.stdev(gaps) / len(gaps) ** 0.5 if len(gaps) > 1 else float("nan")
            out.append(
                f"| {res['method']['name']} | {steps} | {seed['seed']} | A_{when} | {100 * seed[f'self_{when}']:.2f} | "
                f"{100 * seed[f'others_{when}']:.2f} | {statistics.mean(gaps):+.2f} | {se:.2f} | "
                f"{sum(g > 0 for g in gaps)}/{len(gaps)} |")
    return out


def task_rows(path: Path) -> list[str]:
    res = json.loads(path.read_text())
    out = []
    for seed in res["seeds"]:
        scores = [r for r in res["raw"]["scores"] if r["seed"] == seed and r["role"] in ("self", "others")]
        last = max(r["eval_round"] for r in scores)
        cells: dict[tuple[int, str], dict[str, list[tuple[float, int]]]] = {}
        for r in scores:
            if r["eval_round"] == last:
                cells.setdefault((r["owner"], r["task"]), {"self": [], "others": []})[r["role"]].append((r["score"], r["n"]))
        for (owner, task), cell in sorted(cells.items()):
            mean = {k: sum(s * n for s, n in v) / sum(n for _, n in v) if v else float("nan") for k, v in cell.items()}
            out.append(f"| {res['method']['name']} | {res['fl']['local_steps']} | {seed} | {owner} | {task} | "
                       f"{mean['self']:.2f} | {mean['others']:.2f} |")
    return out


def main(argv: list[str]) -> None:
    if not argv:
        sys.exit(__doc__)
    if argv[0] == "--tasks":
        print("| method | local steps | seed | client | task | Self | Others |")
        print("|:---|---:|---:|---:|:---|---:|---:|")
        for arg in argv[1:]:
            for line in task_rows(Path(arg)):
                print(line)
        return
    print("| method | local steps | seed | metric | Self | Others | gap | gap s.e. | clients Self > Others |")
    print("|:---|---:|---:|:---|---:|---:|---:|---:|---:|")
    for arg in argv:
        for line in rows(Path(arg)):
            print(line)


if __name__ == "__main__":
    main(sys.argv[1:])
