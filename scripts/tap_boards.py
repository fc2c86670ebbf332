#!/usr/bin/env python
"""TAP's boards: its paper's claim at toy scale, run through `drake-bench run` (not a test).

Six arms on each setting, three seeds each, as TAP's paper ranks them (its Tables 1-6) plus the package's two
LoRA references: ``tap``, ``tap-no-kd`` (beta = 0), ``fedavg-post-train`` (component-wise FedAvg of the same
experts, the final model fine-tuned P steps), ``tap-local`` (the personal copy alone), ``fedit`` and ``sft``.
Settings: drake-synth under PFL-Static and PFL-Dynamic (10 multi-task clients, tiny LLaVA Llama s/m) and
hflb-synth under its default PFL-Dynamic. On drake-synth static one more arm, ``tap`` with ten times the margins
(0.1 / 0.05 / 0.1, the paper's largest grid point of Tables 8-10), tests that larger margins replace less.

Every run is a plain `drake-bench run` (its command is printed first), so each setting resumes where it stopped
and any one of them can be rerun by hand. One run option differs from the defaults, the same for every arm:
``--no-fast-adaptation`` (adaptation to unseen tasks is not part of the claim).

Writes ``<out>/runs/`` (result files; ``<out>/runs-margins/`` for the margin arm), one board per setting
(``<out>/<benchmark>/<scenario>/summary.md`` with its plots, from `drake-bench report`), the replacement curve of
every TAP arm (``<out>/<benchmark>/<scenario>/replacements.png``, the paper's Fig. 3) and ``<tables>/tap-boards.md``
/ ``.json`` (default docs/findings/): Self and Others A_last per arm (mean ± population std over seeds), the paired
differences the predictions name (docs/findings/tap-predictions.md), replacements per round, and the cost (training
and Stage 2 seconds as the evaluator measured them).

    python scripts/tap_boards.py                                   # every setting (hours on 2 cores; resumes)
    python scripts/tap_boards.py --settings drake-synth:static
    python scripts/tap_boards.py --report-only                     # tables from the result files there are
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from drake_bench.methods.tap.plots import replacement_table
from drake_bench.results.result_file import load_result_data

SETTINGS = ["drake-synth:static", "drake-synth:dynamic", "hflb-synth:dynamic"]
ARMS = ["tap", "tap-no-kd", "fedavg-post-train", "tap-local", "fedit", "sft"]
MARGIN_ARM = "tap (margins x10)"
MARGIN_SETTINGS = {"drake-synth:static"}
MARGINS_X10 = [
    "--set",
    "tap.margin_image_choice=0.1",
    "--set",
    "tap.margin_text_choice=0.05",
    "--set",
    "tap.margin_generation=0.1",
]
SEEDS = "0,1,2"
PAIRS = [
    ("tap", "fedavg-post-train"),
    ("tap", "tap-no-kd"),
    ("tap", "tap-local"),
    ("tap", "fedit"),
    ("tap", "sft"),
    ("fedavg-post-train", "fedit"),
    ("tap-local", "sft"),
]


def _split(setting: str) -> tuple[str, str]:
    benchmark, _, scenario = setting.partition(":")
    return benchmark, scenario


def commands(setting: str, out: Path) -> list[list[str]]:
    benchmark, scenario = _split(setting)
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
    ]
    cmds = [common + ["--methods", ",".join(ARMS), "--jobs", "2", "--out", str(out / "runs")]]
    if setting in MARGIN_SETTINGS:
        cmds.append(common + ["--methods", "tap", *MARGINS_X10, "--jobs", "1", "--out", str(out / "runs-margins")])
    return cmds


def result_files(setting: str, out: Path) -> dict[str, Path]:
    benchmark, scenario = _split(setting)
    files = {arm: out / "runs" / benchmark / scenario / arm / "1.0" / "result.json" for arm in ARMS}
    if setting in MARGIN_SETTINGS:
        files[MARGIN_ARM] = out / "runs-margins" / benchmark / scenario / "tap" / "1.0" / "result.json"
    return files


def _ms(xs: list[float], scale: float = 100.0) -> str:
    if not xs:
        return "–"
    if len(xs) == 1:
        return f"{scale * xs[0]:.2f}"
    return f"{scale * statistics.mean(xs):.2f} ± {scale * statistics.pstdev(xs):.2f}"


def measure(path: Path) -> dict:
    """Per-seed numbers of one result file: Self / Others A_last and A_AUC, seconds, replacements per round."""
    d = load_result_data(path)
    per_seed = {s["seed"]: s for s in d["summary"]["per_seed"]}
    agg = d["summary"]["aggregate"]
    replaced: dict[int, dict[int, int]] = defaultdict(dict)  # round -> seed -> replacements (all keys)
    first: dict[int, dict[int, int]] = defaultdict(dict)
    trained: dict[int, dict[int, int]] = defaultdict(dict)  # round -> seed -> (client, key) pairs trained
    for seed, by_round in replacement_table(d["raw"].get("diagnostics", [])).items():
        for r, by_key in by_round.items():
            replaced[r][seed] = sum(cell["replaced"] for cell in by_key.values())
            first[r][seed] = sum(cell["first_replaced"] for cell in by_key.values())
            trained[r][seed] = sum(cell["clients"] for cell in by_key.values())
    return {
        "seeds": sorted(per_seed),
        **{m: {s: per_seed[s][m] for s in per_seed} for m in ("self_last", "self_auc", "others_last", "others_auc")},
        "train_seconds_per_round": agg["train_seconds_per_round"]["mean"],
        "post_federation_seconds": (agg.get("post_federation_seconds") or {}).get("mean"),
        "uplink_mb_per_round": (agg["uplink_bytes_per_round"]["mean"] or 0) / 1e6,
        "replaced_per_round": {r: statistics.mean(v.values()) for r, v in sorted(replaced.items())},
        "first_replaced_per_round": {r: statistics.mean(v.values()) for r, v in sorted(first.items())},
        # per seed, for the predictions that say "in every seed"
        "replaced_per_round_per_seed": {r: dict(sorted(v.items())) for r, v in sorted(replaced.items())},
        "first_replaced_per_round_per_seed": {r: dict(sorted(v.items())) for r, v in sorted(first.items())},
        "trained_pairs_per_round_per_seed": {r: dict(sorted(v.items())) for r, v in sorted(trained.items())},
    }


def report(out: Path, settings: list[str], tables: Path) -> None:
    data: dict[str, dict[str, dict]] = {}
    lines = [
        "# TAP's boards",
        "",
        "Written by `python scripts/tap_boards.py` from the result files under `leaderboard/tap/runs/` (and "
        "`runs-margins/`). Scores x100, mean ± population std over seeds 0-2; *paired* differences are per "
        "seed, then mean ± std. Seconds as the evaluator measured them while the arms shared the machine (two "
        "at a time on two cores): comparable between arms of one setting only roughly. The predictions these "
        "test: [TAP: predictions](tap-predictions.md).",
        "",
    ]
    for setting in settings:
        files = {arm: p for arm, p in result_files(setting, out).items() if p.is_file()}
        if not files:
            continue
        m = {arm: measure(p) for arm, p in files.items()}
        data[setting] = m
        benchmark, scenario = _split(setting)
        lines += [
            f"## {benchmark} / {scenario}",
            "",
            "| arm | seeds | Self A_last | Self A_AUC | Others A_last | uplink MB/round | train s/round | Stage 2 s |",
            "|:---|:---|---:|---:|---:|---:|---:|---:|",
        ]
        for arm in [*ARMS, MARGIN_ARM]:
            if arm not in m:
                if arm != MARGIN_ARM or setting in MARGIN_SETTINGS:
                    lines.append(f"| {arm} | not run | | | | | | |")
                continue
            x = m[arm]
            others = [v for v in x["others_last"].values() if v is not None]
            post = x["post_federation_seconds"]
            lines.append(
                f"| {arm} | {','.join(map(str, x['seeds']))} | {_ms(list(x['self_last'].values()))} | "
                f"{_ms(list(x['self_auc'].values()))} | {_ms(others)} | {x['uplink_mb_per_round']:.2f} | "
                f"{x['train_seconds_per_round']:.1f} | {'–' if post is None else f'{post:.0f}'} |"
            )
        lines += [
            "",
            "| pair | Self A_last, paired per seed | mean ± std | Others A_last, paired mean |",
            "|:---|:---|---:|---:|",
        ]
        for a, b in PAIRS:
            if a in m and b in m:
                seeds = sorted(set(m[a]["seeds"]) & set(m[b]["seeds"]))
                diffs = [100 * (m[a]["self_last"][s] - m[b]["self_last"][s]) for s in seeds]
                odiffs = [
                    100 * (m[a]["others_last"][s] - m[b]["others_last"][s])
                    for s in seeds
                    if m[a]["others_last"][s] is not None and m[b]["others_last"][s] is not None
                ]
                lines.append(
                    f"| {a} - {b} | {', '.join(f'{v:+.2f}' for v in diffs)} | "
                    f"{statistics.mean(diffs):+.2f} ± {statistics.pstdev(diffs):.2f} | "
                    f"{statistics.mean(odiffs) if odiffs else float('nan'):+.2f} |"
                )
        for arm in ("tap", "tap-no-kd", MARGIN_ARM):
            if arm in m and m[arm]["replaced_per_round"]:
                per = m[arm]["replaced_per_round"]
                cum, total = [], 0.0
                for r in per:
                    total += per[r]
                    cum.append(total)
                lines += [
                    "",
                    f"{arm}: replacements per round (mean over seeds; from the +inf rule in brackets): "
                    + ", ".join(f"r{r} {v:.1f} ({m[arm]['first_replaced_per_round'][r]:.1f})" for r, v in per.items())
                    + f"; cumulative {', '.join(f'{c:.1f}' for c in cum)}.",
                ]
                x = m[arm]
                seeds = x["seeds"]
                lines += [
                    "",
                    f"{arm}, per seed ({', '.join(map(str, seeds))}): replaced / (client, key) pairs trained "
                    "per round: "
                    + "; ".join(
                        f"r{r} "
                        + ", ".join(
                            f"{x['replaced_per_round_per_seed'][r].get(s, 0)}/"
                            f"{x['trained_pairs_per_round_per_seed'][r].get(s, 0)}"
                            for s in seeds
                        )
                        for r in x["replaced_per_round_per_seed"]
                    )
                    + "; from the +inf rule: "
                    + "; ".join(
                        f"r{r} " + ", ".join(str(x["first_replaced_per_round_per_seed"][r].get(s, 0)) for s in seeds)
                        for r in x["first_replaced_per_round_per_seed"]
                    )
                    + ".",
                ]
        lines.append("")
    tables.mkdir(parents=True, exist_ok=True)
    (tables / "tap-boards.md").write_text("\n".join(lines) + "\n")
    (tables / "tap-boards.json").write_text(json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")
    print(f"wrote {tables / 'tap-boards.md'}")


def plot(out: Path, setting: str) -> None:
    """The replacement curve of every TAP arm of a setting, from its result files."""
    from drake_bench.methods.tap.plots import plot_replacements
    from drake_bench.results.result_file import read_result

    files = [
        p for arm, p in result_files(setting, out).items() if arm in ("tap", "tap-no-kd", MARGIN_ARM) and p.is_file()
    ]
    if files:
        benchmark, scenario = _split(setting)
        plot_replacements([read_result(p) for p in files], out / benchmark / scenario / "replacements.png")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--settings", default=",".join(SETTINGS), help=f"comma-separated, from {SETTINGS}")
    ap.add_argument("--out", type=Path, default=Path("leaderboard/tap"))
    ap.add_argument("--tables", type=Path, default=Path("docs/findings"), help="where tap-boards.md/.json go")
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args()
    settings = [s.strip() for s in args.settings.split(",") if s.strip()]
    unknown = [s for s in settings if s not in SETTINGS]
    if unknown:
        ap.error(f"--settings: unknown {unknown}; choose from {SETTINGS}")
    if not args.report_only:
        for setting in settings:
            for cmd in commands(setting, args.out):  # one after the other: the six arms already fill both cores
                print("$", " ".join(cmd), flush=True)
                if subprocess.run(cmd).returncode != 0:
                    sys.exit(f"failed (rerun to resume): {' '.join(cmd)}")
            benchmark, scenario = _split(setting)
            files = [str(p) for p in result_files(setting, args.out).values() if p.is_file()]
            subprocess.run(["drake-bench", "report", *files, "--out", str(args.out / benchmark / scenario)], check=True)
    for setting in settings:
        plot(args.out, setting)
    report(
        args.out, SETTINGS, args.tables
    )  # every setting with result files: a run of one setting keeps the others' tables


if __name__ == "__main__":
    sys.exit(main())
