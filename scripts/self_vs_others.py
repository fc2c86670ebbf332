#!/usr/bin/env python
"""Self vs Others of each result file, per seed, with the spread over clients (not a test).

Reads result files (``drake-bench run`` writes them), recomputes nothing, and prints a Markdown
table: Self, Others, their gap (x100), how many clients have Self above Others, and the standard
error of the gap's mean over clients (sample std / sqrt(clients)). A gap several standard errors
wide and positive for most clients is what "Self clearly exceeds Others" should mean; one
seed's gap alone is not.

With ``--tasks``: per task at the last evaluation point, the owner's score (Self) and the mean
over the other clients that evaluated it (Others), item-weighted, from the raw score table.

With ``--transfer REFERENCE``: how training moved each client's scores on the *other* clients'
tasks relative to REFERENCE (a run of the same benchmark and seeds, e.g. ``zero-shot``), per seed
at the last evaluation point, averaged over (client, other client's task) pairs and split by
whether the task's owner is in the client's group (the manifest's client groups). Positive on
same-group pairs and not on the rest is what "knowledge transfers within a group" looks like.

With ``--answer-types``: Self and Others at the last evaluation point over each answer type's tasks
(yes/no, multiple choice, open), averaged like the evaluator's (tasks, then clients): where a method's
numbers move, and where training erases what the base model could answer.

With ``--paired REF RUN [REF RUN ...]``: RUN's Others minus REF's per (seed, client) at the last
evaluation point, over all tasks and per answer type, pooled over every pair given (e.g. SFT and FedIT
of several boards): mean, its standard error, and how many (seed, client) cells are above or below 0.

Usage: python scripts/self_vs_others.py [--tasks | --answer-types] leaderboard/archive/recipe-6/main-job-*/drake-synth/dynamic/*/1.0/result.json
       python scripts/self_vs_others.py --paired SFT_RESULT FEDIT_RESULT [SFT_RESULT FEDIT_RESULT ...]
       python scripts/self_vs_others.py --transfer ZERO_SHOT_RESULT RESULT...
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from drake_bench.results.result_file import load_result_data


def rows(path: Path) -> list[str]:
    res = load_result_data(path)
    steps = res["fl"]["local_steps"]
    out = []
    for seed in res["summary"]["per_seed"]:
        for when in ("last", "auc"):
            gaps = [
                100 * (c[f"self_{when}"] - c[f"others_{when}"])
                for c in seed["per_client"]
                if c[f"self_{when}"] is not None and c[f"others_{when}"] is not None
            ]
            se = statistics.stdev(gaps) / len(gaps) ** 0.5 if len(gaps) > 1 else float("nan")
            out.append(
                f"| {res['method']['name']} | {steps} | {seed['seed']} | A_{when} | {100 * seed[f'self_{when}']:.2f} | "
                f"{100 * seed[f'others_{when}']:.2f} | {statistics.mean(gaps):+.2f} | {se:.2f} | "
                f"{sum(g > 0 for g in gaps)}/{len(gaps)} |"
            )
    return out


def task_rows(path: Path) -> list[str]:
    res = load_result_data(path)
    out = []
    for seed in res["seeds"]:
        scores = [r for r in res["raw"]["scores"] if r["seed"] == seed and r["role"] in ("self", "others")]
        last = max(r["eval_round"] for r in scores)
        cells: dict[tuple[int, str], dict[str, list[tuple[float, int]]]] = {}
        for r in scores:
            if r["eval_round"] == last:
                cells.setdefault((r["owner"], r["task"]), {"self": [], "others": []})[r["role"]].append(
                    (r["score"], r["n"])
                )
        for (owner, task), cell in sorted(cells.items()):
            mean = {k: sum(s * n for s, n in v) / sum(n for _, n in v) if v else float("nan") for k, v in cell.items()}
            out.append(
                f"| {res['method']['name']} | {res['fl']['local_steps']} | {seed} | {owner} | {task} | "
                f"{mean['self']:.2f} | {mean['others']:.2f} |"
            )
    return out


def _others_last(res: dict, seed: int) -> dict[tuple[int, int, str], float]:
    """(client, owner, task) -> Others score at the seed's last evaluation point."""
    rows = [r for r in res["raw"]["scores"] if r["seed"] == seed and r["role"] == "others"]
    last = max(r["eval_round"] for r in rows)
    return {(r["client"], r["owner"], r["task"]): r["score"] for r in rows if r["eval_round"] == last}


def transfer_rows(reference: Path, path: Path) -> list[str]:
    from drake_bench.benchmarks.manifest import load_benchmark

    ref, res = load_result_data(reference), load_result_data(path)
    for key in ("manifest_hash", "data_hash"):
        if ref["benchmark"][key] != res["benchmark"][key]:
            sys.exit(f"{path}: benchmark {key} differs from the reference {reference}")
    group = {c.id: c.group for c in load_benchmark(res["benchmark"]["name"]).clients}
    out = []
    for seed in res["seeds"]:
        if seed not in ref["seeds"]:
            continue
        base, run = _others_last(ref, seed), _others_last(res, seed)
        split: dict[bool, list[float]] = {True: [], False: []}
        for (c, owner, task), score in run.items():
            if (c, owner, task) in base:
                split[group[c] == group[owner]].append(100 * (score - base[(c, owner, task)]))
        fmt = {k: f"{statistics.mean(v):+.2f} ({len(v)})" if v else "-" for k, v in split.items()}
        out.append(f"| {res['method']['name']} | {res['fl']['local_steps']} | {seed} | {fmt[True]} | {fmt[False]} |")
    return out


def _client_means_by_type(res: dict, seed: int, kind: dict[str, str], role: str) -> dict[tuple[str, int], float]:
    """(answer type or 'all', client) -> the client's mean ``role`` score ("self"/"others") over that type's
    tasks at the seed's last evaluation point (unweighted over tasks, as the evaluator averages)."""
    rows = [r for r in res["raw"]["scores"] if r["seed"] == seed and r["role"] in ("self", "others")]
    last = max(r["eval_round"] for r in rows)
    cells: dict[tuple[str, int], list[float]] = {}
    for r in rows:
        if r["eval_round"] == last and r["role"] == role:
            for key in (kind[r["task"]], "all"):
                cells.setdefault((key, r["client"]), []).append(r["score"])
    return {k: statistics.mean(v) for k, v in cells.items()}


def answer_type_rows(path: Path) -> list[str]:
    """Self and Others at the last evaluation point restricted to each answer type's tasks (x100)."""
    from drake_bench.benchmarks.manifest import load_benchmark

    res = load_result_data(path)
    kind = {t.id: t.answer_type.value for t in load_benchmark(res["benchmark"]["name"]).tasks}
    out = []
    for seed in res["seeds"]:
        means = {role: _client_means_by_type(res, seed, kind, role) for role in ("self", "others")}
        seen = {r["task"] for r in res["raw"]["scores"] if r["seed"] == seed and r["role"] in ("self", "others")}
        for answer_type in sorted({kind[t] for t in seen}):
            cells = {}
            for role, by_client in means.items():  # then unweighted over clients
                vals = [v for (a, _), v in by_client.items() if a == answer_type]
                cells[role] = f"{100 * statistics.mean(vals):.2f}" if vals else "-"
            tasks = sum(kind[t] == answer_type for t in seen)
            out.append(
                f"| {res['method']['name']} | {res['fl']['local_steps']} | {seed} | {answer_type} | {tasks} | "
                f"{cells['self']} | {cells['others']} |"
            )
    return out


def paired_rows(pairs: list[tuple[Path, Path]]) -> list[str]:
    """RUN minus REF Others per (seed, client), pooled over every pair of files and their shared seeds."""
    from drake_bench.benchmarks.manifest import load_benchmark

    diffs: dict[str, list[float]] = {}
    names = set()
    for ref_path, run_path in pairs:
        ref, run = load_result_data(ref_path), load_result_data(run_path)
        if ref["benchmark"]["data_hash"] != run["benchmark"]["data_hash"]:
            sys.exit(f"{run_path}: data hash differs from {ref_path}")
        names.add((ref["method"]["name"], run["method"]["name"]))
        kind = {t.id: t.answer_type.value for t in load_benchmark(run["benchmark"]["name"]).tasks}
        for seed in sorted(set(ref["seeds"]) & set(run["seeds"])):
            a, b = (_client_means_by_type(x, seed, kind, "others") for x in (ref, run))
            for key in sorted(set(a) & set(b)):
                diffs.setdefault(key[0], []).append(100 * (b[key] - a[key]))
    label = ", ".join(f"{run_name} - {ref_name}" for ref_name, run_name in sorted(names))
    out = []
    for answer_type, d in sorted(diffs.items()):
        se = statistics.stdev(d) / len(d) ** 0.5 if len(d) > 1 else float("nan")
        out.append(
            f"| {label} | {answer_type} | {statistics.mean(d):+.2f} | {se:.2f} | {len(d)} | "
            f"{sum(x > 0 for x in d)} | {sum(x < 0 for x in d)} |"
        )
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
    if argv[0] == "--answer-types":
        print("| method | local steps | seed | answer type | tasks | Self | Others |")
        print("|:---|---:|---:|:---|---:|---:|---:|")
        for arg in argv[1:]:
            for line in answer_type_rows(Path(arg)):
                print(line)
        return
    if argv[0] == "--paired":
        files = [Path(a) for a in argv[1:]]
        if not files or len(files) % 2:
            sys.exit("--paired takes pairs of result files: REF RUN [REF RUN ...]")
        print("| Others difference | tasks | mean | s.e. | (seed, client) | > 0 | < 0 |")
        print("|:---|:---|---:|---:|---:|---:|---:|")
        for line in paired_rows(list(zip(files[::2], files[1::2]))):
            print(line)
        return
    if argv[0] == "--transfer":
        print(
            f"| method | local steps | seed | same-group tasks vs {Path(argv[1]).parts[-3]} (pairs) | other-group tasks (pairs) |"
        )
        print("|:---|---:|---:|---:|---:|")
        for arg in argv[2:]:
            for line in transfer_rows(Path(argv[1]), Path(arg)):
                print(line)
        return
    print("| method | local steps | seed | metric | Self | Others | gap | gap s.e. | clients Self > Others |")
    print("|:---|---:|---:|:---|---:|---:|---:|---:|---:|")
    for arg in argv:
        for line in rows(Path(arg)):
            print(line)


if __name__ == "__main__":
    main(sys.argv[1:])
