#!/usr/bin/env python
"""HeteroTune's boards: its paper's claim at toy scale, run through `drake-bench run` (not a test).

The paper (its Tables 3, 4 and 8; spec 8.4): with clients of three sizes of one family, HeteroTune's accuracy
averaged over the types is above Homo-Training's (+1.4 to +9.1 points), HeteroTune >= w/o CMGA >= Homo-Training,
and the average rises with the share of large clients. Here, on drake-synth and hflb-synth (PFL-Dynamic, their
default scenario, 8 rounds of 25 local steps), three seeds each:

* the **mixed** allocation: the zoo's s, m and l of one family (Llama by default) placed round-robin by client id
  (s, m, l, s, m, l, ...), which is the paper's LLaMA ratio 4:3:3 on drake-synth's 10 clients (s: 1, 4, 7, 10;
  m: 2, 5, 8; l: 3, 6, 9; every client group holds every size) and 3:3:3 on hflb-synth's 9; arms HeteroTune,
  HeteroTune w/o CMGA (``use_cmga=false``), Homo-Training and SFT (local LoRA, the personalisation baseline);
* **all-small** and **all-large**: every client the s (or the l) model, the paper's AllSmall / AllLarge; arms
  HeteroTune (one type: CMGA has nothing to align) and Homo-Training.

Allocations are written out (``--allocation 1+4+7+10=tiny-llava-llama-s,...``): the manifests do not hold them, and
the run's result file records each client's model. Every run is a plain `drake-bench run` (its command is printed
first), so each resumes where it stopped and any one of them can be rerun by hand. ``--no-fast-adaptation``: the
claim is about the federated rounds.

Writes ``<out>/<allocation>/runs*/`` (result files), one board per benchmark and allocation
(``<out>/<allocation>/<benchmark>/<scenario>/summary.md``, from `drake-bench report`), and
``<tables>/heterotune-boards.md`` / ``.json``: per arm Self and Others A_last (mean ± population std over seeds),
Self A_last per type (the mean over that type's clients) and its unweighted average over types (the paper's "Avg"),
the paired differences per seed, the allocation trend, and CMGA's diagnostics (the types' update cosines before
and after alignment, alpha's weight on the other types' slots).

    python scripts/heterotune_boards.py                         # every setting (hours on 2 cores; resumes)
    python scripts/heterotune_boards.py --settings drake-synth --allocations mixed
    python scripts/heterotune_boards.py --family qwen2 --out /tmp/ht-qwen2   # the same on the Qwen2 zoo
    python scripts/heterotune_boards.py --report-only
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

SETTINGS = ["drake-synth", "hflb-synth"]  # both at their default scenario, PFL-Dynamic
SCENARIO = "dynamic"
CLIENTS = {"drake-synth": 10, "hflb-synth": 9}
ALLOCATIONS = ["mixed", "all-small", "all-large"]
SIZES = ("s", "m", "l")
SEEDS = "0,1,2"
ARMS = {
    "mixed": ["heterotune", "heterotune (use_cmga=false)", "homo-training", "sft"],
    "all-small": ["heterotune", "homo-training"],
    "all-large": ["heterotune", "homo-training"],
}


def model(family: str, size: str) -> str:
    return f"tiny-llava-{family}-{size}"


def allocation(benchmark: str, name: str, family: str) -> str:
    """The written-out allocation (``CLIENTS=MODEL`` items) of one setting."""
    if name == "all-small":
        return f"all={model(family, 's')}"
    if name == "all-large":
        return f"all={model(family, 'l')}"
    n = CLIENTS[benchmark]
    return ",".join(
        "+".join(str(c) for c in range(1 + k, n + 1, 3)) + f"={model(family, size)}" for k, size in enumerate(SIZES)
    )


def commands(benchmark: str, alloc: str, family: str, out: Path) -> list[list[str]]:
    common = [
        "drake-bench",
        "run",
        "--benchmark",
        benchmark,
        "--scenario",
        SCENARIO,
        "--seeds",
        SEEDS,
        "--allocation",
        allocation(benchmark, alloc, family),
        "--no-fast-adaptation",
    ]
    runs = out / alloc
    if alloc == "mixed":
        return [
            common + ["--methods", "heterotune,homo-training,sft", "--out", str(runs / "runs")],
            common
            + [
                "--methods",
                "heterotune",
                "--set",
                "heterotune.use_cmga=false",
                "--jobs",
                "1",
                "--out",
                str(runs / "runs-wo-cmga"),
            ],
        ]
    return [common + ["--methods", "heterotune,homo-training", "--out", str(runs / "runs")]]


def result_files(benchmark: str, alloc: str, out: Path) -> dict[str, Path]:
    runs = out / alloc
    files = {m: runs / "runs" / benchmark / SCENARIO / m / "1.0" / "result.json" for m in ARMS[alloc] if "(" not in m}
    if alloc == "mixed":
        files["heterotune (use_cmga=false)"] = (
            runs / "runs-wo-cmga" / benchmark / SCENARIO / "heterotune" / "1.0" / "result.json"
        )
    return files


def _ms(xs: list[float], scale: float = 100.0) -> str:
    xs = [x for x in xs if x is not None]
    if not xs:
        return "–"
    if len(xs) == 1:
        return f"{scale * xs[0]:.2f}"
    return f"{scale * statistics.mean(xs):.2f} ± {scale * statistics.pstdev(xs):.2f}"


def measure(path: Path) -> dict:
    """Per-seed numbers of one result file: Self / Others A_last, Self A_last per type and their average, and
    HeteroTune's diagnostics per round (CMGA's cosines, alpha's weight on other types' slots)."""
    d = load_result_data(path)
    size_of = {int(c): m.rsplit("-", 1)[-1] for c, m in d["model_allocation"]["clients"].items()}
    out: dict = {"seeds": [], "self_last": {}, "others_last": {}, "per_type": {}, "avg_types": {}}
    for s in d["summary"]["per_seed"]:
        seed = s["seed"]
        out["seeds"].append(seed)
        out["self_last"][seed] = s["self_last"]
        out["others_last"][seed] = s["others_last"]
        by_size: dict[str, list[float]] = defaultdict(list)
        for c in s["per_client"]:
            if c["self_last"] is not None:
                by_size[size_of[c["client"]]].append(c["self_last"])
        types = {size: statistics.mean(v) for size, v in by_size.items()}
        out["per_type"][seed] = types
        out["avg_types"][seed] = statistics.mean(types.values()) if types else None
    rounds: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in d["raw"].get("diagnostics", []):
        v, r = row["values"], row["round"]
        if row["key"].startswith("cmga.") and v.get("mean_abs_cos_before") is not None:
            rounds[r]["cos_before"].append(v["mean_abs_cos_before"])
            if v.get("mean_abs_cos_after") is not None:
                rounds[r]["cos_after"].append(v["mean_abs_cos_after"])
        elif row["key"].startswith("alpha."):
            own = row["key"].split(".", 1)[1]
            rounds[r]["alpha_others"].append(sum(x for k, x in v.items() if k != own))
            rounds[r]["alpha_own"].append(v.get(own, 0.0))
    out["per_round"] = {r: {k: statistics.mean(x) for k, x in vals.items()} for r, vals in sorted(rounds.items())}
    # CMGA's rescale: the types' update norms after alignment, as a relative spread (max-min over mean) per problem
    spreads = []
    for row in d["raw"].get("diagnostics", []):
        norms = [x for k, x in row["values"].items() if k.startswith("norm_after.")]
        if row["key"].startswith("cmga.") and len(norms) > 1 and statistics.mean(norms) > 0:
            spreads.append((max(norms) - min(norms)) / statistics.mean(norms))
    out["max_norm_spread_after"] = max(spreads) if spreads else None
    # alpha at the last round, every seed and type: its range over slots, and own slot minus the others' mean
    last = max((row["round"] for row in d["raw"].get("diagnostics", [])), default=None)
    alphas = [
        row for row in d["raw"].get("diagnostics", []) if row["key"].startswith("alpha.") and row["round"] == last
    ]
    if alphas:
        values = [x for row in alphas for x in row["values"].values()]
        gaps = [
            row["values"][row["key"].split(".", 1)[1]]
            - statistics.mean(x for k, x in row["values"].items() if k != row["key"].split(".", 1)[1])
            for row in alphas
            if len(row["values"]) > 1
        ]
        out["alpha_last"] = {
            "round": last,
            "min": min(values),
            "max": max(values),
            "max_abs_own_minus_others": max(map(abs, gaps)) if gaps else None,
        }
    agg = d["summary"]["aggregate"]
    out["uplink_mb_per_round"] = (agg["uplink_bytes_per_round"]["mean"] or 0) / 1e6
    out["train_seconds_per_round"] = agg["train_seconds_per_round"]["mean"]
    return out


def _paired(a: dict, b: dict, key: str) -> list[float]:
    seeds = sorted(set(a[key]) & set(b[key]))
    return [100 * (a[key][s] - b[key][s]) for s in seeds if a[key][s] is not None and b[key][s] is not None]


def report(out: Path, settings: list[str], allocations: list[str], tables: Path) -> None:
    data: dict[str, dict[str, dict[str, dict]]] = {}
    lines = [
        "# HeteroTune's boards",
        "",
        "Written by `python scripts/heterotune_boards.py` from the result files under its `--out` folder. Scores "
        "x100, mean ± population std over seeds 0-2, at the last round (A_last). *Avg types*: Self A_last "
        "averaged over each type's clients, then over the types unweighted (the paper's Avg); *paired*: the "
        "difference per seed. Predictions: [heterotune-predictions.md](heterotune-predictions.md).",
        "",
    ]
    for benchmark in settings:
        data[benchmark] = {}
        for alloc in allocations:
            files = {arm: p for arm, p in result_files(benchmark, alloc, out).items() if p.is_file()}
            if not files:
                continue
            m = {arm: measure(p) for arm, p in files.items()}
            data[benchmark][alloc] = m
            lines += [
                f"## {benchmark} / {SCENARIO} / {alloc}",
                "",
                "| arm | seeds | Self A_last | Others A_last | Self s | Self m | Self l | Avg types | uplink MB/round |",
                "|:---|:---|---:|---:|---:|---:|---:|---:|---:|",
            ]
            for arm in ARMS[alloc]:
                if arm not in m:
                    lines.append(f"| {arm} | not run | | | | | | | |")
                    continue
                x = m[arm]
                per = [_ms([x["per_type"][s].get(size) for s in x["seeds"]]) for size in SIZES]
                lines.append(
                    f"| {arm} | {','.join(map(str, x['seeds']))} | {_ms(list(x['self_last'].values()))} | "
                    f"{_ms(list(x['others_last'].values()))} | {' | '.join(per)} | "
                    f"{_ms(list(x['avg_types'].values()))} | {x['uplink_mb_per_round']:.3f} |"
                )
            pairs = [
                ("heterotune", "homo-training"),
                ("heterotune", "heterotune (use_cmga=false)"),
                ("heterotune (use_cmga=false)", "homo-training"),
                ("heterotune", "sft"),
            ]
            for a, b in pairs:
                if a in m and b in m:
                    d = _paired(m[a], m[b], "avg_types")
                    if d:
                        lines += [
                            "",
                            f"{a} - {b}, Avg types per seed: {', '.join(f'{v:+.2f}' for v in d)} "
                            f"(mean {statistics.mean(d):+.2f}).",
                        ]
            ht = m.get("heterotune")
            if ht and ht["per_round"] and any("cos_after" in v for v in ht["per_round"].values()):
                lines += [
                    "",
                    "HeteroTune's server, mean over the alignment problems (and seeds):",
                    "",
                    "| round | mean abs cos before | after | alpha on own slot | alpha on the others' (sum) |",
                    "|---:|---:|---:|---:|---:|",
                ]
                for r, v in ht["per_round"].items():
                    lines.append(
                        f"| {r} | {v.get('cos_before', float('nan')):.3f} | {v.get('cos_after', float('nan')):.2e} | "
                        f"{v.get('alpha_own', float('nan')):.3f} | {v.get('alpha_others', float('nan')):.3f} |"
                    )
                if ht.get("max_norm_spread_after") is not None:
                    lines += [
                        "",
                        f"After CMGA the types' update norms agree to {ht['max_norm_spread_after']:.1e} (largest relative "
                        "spread, every alignment problem, round and seed).",
                    ]
                if ht.get("alpha_last") and ht["alpha_last"]["max_abs_own_minus_others"] is not None:
                    al = ht["alpha_last"]
                    lines += [
                        "",
                        f"Round {al['round']}: every alpha lies in [{al['min']:.3f}, {al['max']:.3f}]; a type's weight on its "
                        f"own slot differs from its mean weight on the others' by at most {al['max_abs_own_minus_others']:.3f} "
                        "(every seed and type).",
                    ]
            lines.append("")
        trend = {
            alloc: data[benchmark][alloc] for alloc in ("all-small", "mixed", "all-large") if alloc in data[benchmark]
        }
        if len(trend) > 1:
            lines += [
                f"## {benchmark}: Avg types against the share of large clients",
                "",
                "| arm | " + " | ".join(trend) + " |",
                "|:---|" + "---:|" * len(trend),
            ]
            for arm in ("heterotune", "homo-training"):
                cells = [_ms(list(t[arm]["avg_types"].values())) if arm in t else "–" for t in trend.values()]
                lines.append(f"| {arm} | " + " | ".join(cells) + " |")
            lines.append("")
    tables.mkdir(parents=True, exist_ok=True)
    (tables / "heterotune-boards.md").write_text("\n".join(lines) + "\n")
    (tables / "heterotune-boards.json").write_text(json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")
    print(f"wrote {tables / 'heterotune-boards.md'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--settings", default=",".join(SETTINGS), help=f"comma-separated, from {SETTINGS}")
    ap.add_argument("--allocations", default=",".join(ALLOCATIONS), help=f"comma-separated, from {ALLOCATIONS}")
    ap.add_argument("--family", default="llama", choices=["llama", "qwen2"], help="the zoo family of every client")
    ap.add_argument("--out", type=Path, default=Path("leaderboard/heterotune"))
    ap.add_argument("--tables", type=Path, default=Path("docs/findings"), help="where heterotune-boards.md/.json go")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--print-commands", action="store_true", help="print the `drake-bench run` commands and stop")
    args = ap.parse_args()
    settings = [s.strip() for s in args.settings.split(",") if s.strip()]
    allocs = [a.strip() for a in args.allocations.split(",") if a.strip()]
    if [s for s in settings if s not in SETTINGS] or [a for a in allocs if a not in ALLOCATIONS]:
        ap.error(f"--settings from {SETTINGS}, --allocations from {ALLOCATIONS}")
    if args.print_commands:
        for benchmark in settings:
            for alloc in allocs:
                for cmd in commands(benchmark, alloc, args.family, args.out):
                    print(" ".join(f"'{c}'" if "=" in c or "(" in c else c for c in cmd))
        return
    if not args.report_only:
        for benchmark in settings:
            for alloc in allocs:
                # the mixed allocation's w/o-CMGA arm runs beside the three-method command in its own process (its
                # own output folder), so no core idles while one arm finishes alone
                procs = []
                for cmd in commands(benchmark, alloc, args.family, args.out):
                    print("$", " ".join(cmd), flush=True)
                    procs.append((cmd, subprocess.Popen(cmd)))
                failed = [" ".join(cmd) for cmd, p in procs if p.wait() != 0]
                if failed:
                    sys.exit(f"failed (rerun to resume): {failed}")
                files = [str(p) for p in result_files(benchmark, alloc, args.out).values()]
                subprocess.run(
                    ["drake-bench", "report", *files, "--out", str(args.out / alloc / benchmark / SCENARIO)], check=True
                )
    report(args.out, settings, allocs, args.tables)


if __name__ == "__main__":
    sys.exit(main())
