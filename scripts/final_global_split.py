#!/usr/bin/env python
"""Self at the last point before and after a post-federation stage, split by model and by task family.

Reads result files that kept the replaced point (``raw.scores_before_post_federation``) and prints, per method,
the markdown rows of docs/findings/final-global.md's second table: Self per model (the mean over the clients that
hold it), per task family (the mean over every Self row whose task id names it: flan, aya, chat on fedllm-synth)
and the clients whose Self is exactly 0. Scores x100, one seed each (the run on that page has one).

    python scripts/final_global_split.py runs/final-global/fedllm-synth/dynamic/*/1.0/result.json
"""

from __future__ import annotations

import sys
from collections import defaultdict
from statistics import mean

from drake_bench.results.result_file import read_result


def split(rows, models: dict[str, str]) -> tuple[dict[str, float], dict[str, float], int]:
    by_client: dict[int, list[float]] = defaultdict(list)
    by_family: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        if r.role == "self":
            by_client[r.client].append(r.score)
            by_family[r.task.split("-")[1]].append(r.score)  # c01-flan-sort -> flan
    client = {c: mean(v) for c, v in by_client.items()}
    by_model: dict[str, list[float]] = defaultdict(list)
    for c, v in client.items():
        by_model[models[str(c)]].append(v)
    return (
        {m: 100 * mean(v) for m, v in sorted(by_model.items())},
        {f: 100 * mean(v) for f, v in sorted(by_family.items())},
        sum(v == 0 for v in client.values()),
    )


def main(paths: list[str]) -> int:
    for path in paths:
        res = read_result(path)
        if not res.raw.scores_before_post_federation:
            print(f"{path}: no replaced point kept (no post-federation stage, or made before it was recorded)")
            continue
        models = {str(k): v for k, v in res.model_allocation.clients.items()}
        last = max(r.eval_round for r in res.raw.scores)
        for label, rows in (
            ("before", res.raw.scores_before_post_federation),
            ("after", [r for r in res.raw.scores if r.eval_round == last]),
        ):
            per_model, per_family, zeros = split(rows, models)
            cells = [f"{v:.2f}" for v in (*per_model.values(), *per_family.values())]
            heads = ", ".join([*per_model, *per_family])
            print(f"| {res.label}, {label} | " + " | ".join(cells) + f" | {zeros} |   ({heads})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
