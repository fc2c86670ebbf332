#!/usr/bin/env python
"""pFedMMA's boards: its paper's claim at toy scale, run through `drake-bench run` (not a test).

Arms, three seeds each: zero-shot, SFT, FedIT and pFedMMA under its four controls (`pfedmma`, `local-only`,
`all-global`, `down-up-global`: the same adapters, differing only in what the server averages). Settings:
drake-synth and hflb-synth under their default scenarios and allocations, with fast adaptation to the unseen
tasks on (the analogue of the paper's novel classes). The predictions, written before the runs, are in
docs/findings/pfedmma-predictions.md.

Every run is a plain `drake-bench run` (printed first), so each resumes where it stopped and any one can be rerun
by hand. The controls share a method name with pFedMMA, so each writes its own output folder
(``<out>/runs-<control>/``); the rest go to ``<out>/runs/``. Two commands run at a time, one worker each.
The board per setting (``<out>/<benchmark>/<scenario>/summary.md`` with plots) comes from `drake-bench report`;
``<tables>/pfedmma-boards.md`` / ``.json`` (default docs/findings/) hold Self, Others and unseen per arm, and the
per-seed paired differences the predictions name.

    python scripts/pfedmma_boards.py                            # both settings (hours on 2 cores; resumes)
    python scripts/pfedmma_boards.py --settings drake-synth
    python scripts/pfedmma_boards.py --report-only
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from drake_bench.results.result_file import load_result_data

SETTINGS = ["drake-synth", "hflb-synth"]
CONTROLS = ["local-only", "all-global", "down-up-global"]
BASELINES = ["sft", "fedit", "pfedmma", "zero-shot"]  # one command, in this order (trained arms first)
ARMS = ["zero-shot", "sft", "fedit", "pfedmma", *CONTROLS]
SEEDS = "0,1,2"
PAIRS = [
    ("pfedmma", "zero-shot"),
    ("pfedmma", "sft"),
    ("pfedmma", "local-only"),
    ("pfedmma", "all-global"),
    ("pfedmma", "down-up-global"),
    ("down-up-global", "all-global"),
    ("pfedmma", "fedit"),
]


def commands(benchmark: str, out: Path) -> list[list[str]]:
    """The runs still missing: an arm whose result file exists is left out (a killed run resumes from its
    checkpoint in its own folder)."""
    # a partial file (written after each seed) is not done: its run takes the finished seeds from it and runs the rest
    done = {
        arm: p for arm, p in result_files(benchmark, out).items() if load_result_data(p).get("status") == "complete"
    }
    common = ["drake-bench", "run", "--benchmark", benchmark, "--seeds", SEEDS, "--jobs", "1"]
    cmds = []
    todo = [m for m in BASELINES if m not in done]
    if todo:
        cmds.append(common + ["--methods", ",".join(todo), "--out", str(out / "runs")])
    for control in CONTROLS:
        if control not in done:
            cmds.append(
                common
                + ["--methods", "pfedmma", "--set", f"pfedmma.control={control}", "--out", str(out / f"runs-{control}")]
            )
    return cmds


def result_files(benchmark: str, out: Path) -> dict[str, Path]:
    """Arm -> result file; the scenario folder is the benchmark's default, found on disk."""
    files: dict[str, Path] = {}
    for arm in ARMS:
        folder, method = (out / f"runs-{arm}", "pfedmma") if arm in CONTROLS else (out / "runs", arm)
        found = sorted((folder / benchmark).glob(f"*/{method}/*/result.json"))
        if found:
            files[arm] = found[0]
    return files


def measure(path: Path) -> dict:
    """Per-seed Self and Others A_last, the mean of the method's fast-adaptation curve, bytes per round."""
    d = load_result_data(path)
    per_seed = {s["seed"]: s for s in d["summary"]["per_seed"]}
    unseen: dict[int, list[float]] = defaultdict(list)
    fresh: dict[int, list[float]] = defaultdict(list)
    for r in d["raw"].get("adaptation", []):
        (unseen if r["init"] == "method" else fresh)[r["seed"]].append(r["score"])
    return {
        "scenario": d["scenario"]["tag"],
        "self_last": {s: per_seed[s]["self_last"] for s in per_seed},
        "others_last": {s: per_seed[s]["others_last"] for s in per_seed},
        "unseen_mean": {s: statistics.mean(v) for s, v in unseen.items()},
        "unseen_fresh_mean": {s: statistics.mean(v) for s, v in fresh.items()},
        "uplink_bytes_per_round": d["summary"]["aggregate"]["uplink_bytes_per_round"]["mean"],
        "num_clients": d["fl"]["num_clients"],
    }


def harmonic_means(x: dict) -> dict[int, float]:
    """Per seed, the harmonic mean of Self, Others and (where the benchmark has unseen tasks) Unseen: the paper's
    headline, its HM of local, base and novel accuracy."""
    out = {}
    for seed, self_last in x["self_last"].items():
        parts = [self_last, x["others_last"][seed]] + ([x["unseen_mean"][seed]] if seed in x["unseen_mean"] else [])
        if all(p for p in parts):
            out[seed] = len(parts) / sum(1 / p for p in parts)
    return out


def _ms(xs: list[float]) -> str:
    xs = [x for x in xs if x is not None]
    if not xs:
        return "–"
    return f"{100 * statistics.mean(xs):.2f} ± {100 * statistics.pstdev(xs):.2f}"


def report(out: Path, settings: list[str], tables: Path) -> None:
    data: dict[str, dict] = {}
    lines = [
        "# pFedMMA's boards",
        "",
        "Written by `python scripts/pfedmma_boards.py` from the result files under `leaderboard/pfedmma/`. "
        "Scores x100, mean ± population std over seeds 0-2. *Unseen*: the mean of the method's fast-adaptation "
        "curve (every evaluated iteration, both unseen tasks, every architecture; hflb-synth has no unseen tasks); *Unseen, fresh start*: the same curve from the method's untrained client state "
        "(init_client), which separates what federation left in the adapters from how fast they learn. "
        "*Harmonic mean*: of Self, Others and Unseen per seed (the paper's HM of local, base and novel accuracy). *Paired*: the per-seed "
        "difference of Self A_last (and Others A_last). The predictions: "
        "[pfedmma-predictions.md](pfedmma-predictions.md).",
        "",
    ]
    for benchmark in settings:
        files = result_files(benchmark, out)
        if not files:
            continue
        m = {arm: measure(p) for arm, p in files.items()}
        data[benchmark] = m
        lines += [
            f"## {benchmark}",
            "",
            "| arm | Self A_last | Others A_last | Unseen | Unseen, fresh start | harmonic mean | uplink bytes/client/round |",
            "|:---|---:|---:|---:|---:|---:|---:|",
        ]
        for arm in ARMS:
            if arm not in m:
                lines.append(f"| {arm} | not run | | | | | |")
                continue
            x = m[arm]
            per_client = x["uplink_bytes_per_round"] / x["num_clients"]
            x["harmonic_mean"] = harmonic_means(x)
            lines.append(
                f"| {arm} | {_ms(list(x['self_last'].values()))} | {_ms(list(x['others_last'].values()))} | "
                f"{_ms(list(x['unseen_mean'].values()))} | {_ms(list(x['unseen_fresh_mean'].values()))} | "
                f"{_ms(list(x['harmonic_mean'].values()))} | "
                f"{per_client:,.0f} |"
            )
        lines += [
            "",
            "| paired difference | Self per seed | Self mean | Others per seed | Others mean |",
            "|:---|:---|---:|:---|---:|",
        ]
        for a, b in PAIRS:
            if a in m and b in m:
                cells = []
                for key in ("self_last", "others_last"):
                    seeds = sorted(set(m[a][key]) & set(m[b][key]))
                    diffs = [
                        100 * (m[a][key][s] - m[b][key][s])
                        for s in seeds
                        if m[a][key][s] is not None and m[b][key][s] is not None
                    ]
                    cells += [
                        ", ".join(f"{d:+.2f}" for d in diffs) or "–",
                        f"{statistics.mean(diffs):+.2f}" if diffs else "–",
                    ]
                lines.append(f"| {a} − {b} | " + " | ".join(cells) + " |")
        lines.append("")
    tables.mkdir(parents=True, exist_ok=True)
    (tables / "pfedmma-boards.md").write_text("\n".join(lines) + "\n")
    (tables / "pfedmma-boards.json").write_text(json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")
    print(f"wrote {tables / 'pfedmma-boards.md'}")


def run_two_at_a_time(cmds: list[list[str]]) -> None:
    """Runs the commands, at most two at once (one per core); stops with the failed ones named."""
    pending, running, failed = list(cmds), [], []
    while pending or running:
        while pending and len(running) < 2:
            cmd = pending.pop(0)
            print("$", " ".join(cmd), flush=True)
            running.append((cmd, subprocess.Popen(cmd)))
        time.sleep(5)
        for cmd, proc in [r for r in running if r[1].poll() is not None]:
            running.remove((cmd, proc))
            if proc.returncode != 0:
                failed.append(" ".join(cmd))
    if failed:
        sys.exit(f"failed (rerun to resume): {failed}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--settings", default=",".join(SETTINGS), help=f"comma-separated, from {SETTINGS}")
    ap.add_argument("--out", type=Path, default=Path("leaderboard/pfedmma"))
    ap.add_argument("--tables", type=Path, default=Path("docs/findings"), help="where pfedmma-boards.md/.json go")
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args()
    settings = [s.strip() for s in args.settings.split(",") if s.strip()]
    unknown = [s for s in settings if s not in SETTINGS]
    if unknown:
        ap.error(f"--settings: unknown {unknown}; choose from {SETTINGS}")
    if not args.report_only:
        for benchmark in settings:
            run_two_at_a_time(commands(benchmark, args.out))
            files = result_files(benchmark, args.out)
            scenario = measure(files["pfedmma"])["scenario"]
            subprocess.run(
                ["drake-bench", "report", *map(str, files.values()), "--out", str(args.out / benchmark / scenario)],
                check=True,
            )
    report(
        args.out, SETTINGS, args.tables
    )  # every setting with result files: a run of one setting keeps the others' tables


if __name__ == "__main__":
    sys.exit(main())
