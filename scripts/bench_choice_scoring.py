#!/usr/bin/env python
"""Choice scoring side by side: each prompt once (``engine.choice_scores``) against a full forward per option.

The evaluator scores one task per call. Before the shared-prefix path, a call whose items all had one-token
options ran one forward per item, and any other call ran prompt + option + eos in full for every option
(``engine.score_targets``); now every call runs each prompt once and continues the options from its KV cache.
Both paths score the same items, task by task, of every choice task of drake-synth (fresh draws, seed 777, never
the benchmark's splits) on a shipped tiny LLaVA, one torch thread, alternating over ``--repeats`` rounds; the
table gives the median time of each, their ratio and the largest score difference on the tasks that took the full
path (they must agree to float tolerance; tests/test_choice_scoring.py checks it on every choice task).

    python scripts/bench_choice_scoring.py                      # tiny-llava-llama-m, 4 items per task
    python scripts/bench_choice_scoring.py --out /tmp/choice    # elsewhere than docs/performance/

Writes ``<out>/choice_scoring.json`` and ``choice_scoring.md``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def alternate(paths: dict[str, Callable[[], Any]], repeats: int) -> tuple[dict[str, list[float]], dict[str, Any]]:
    """Run each path once per repeat, in turn (so drifts in the machine's speed fall on all of them alike); returns
    each path's wall seconds per repeat and its output of the last repeat."""
    times: dict[str, list[float]] = {name: [] for name in paths}
    outputs: dict[str, Any] = {}
    for _ in range(repeats):
        for name, fn in paths.items():
            t0 = time.perf_counter()
            outputs[name] = fn()
            times[name].append(time.perf_counter() - t0)
    return times, outputs


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny-llava-llama-m")
    ap.add_argument("--items-per-task", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "docs" / "performance")
    args = ap.parse_args(argv)

    import torch

    from drake_bench.benchmarks.sample import AnswerType
    from drake_bench.benchmarks.synth.definitions import drake_synth_spec
    from drake_bench.benchmarks.synth.loader import fresh_items
    from drake_bench.models import engine, load_base
    from drake_bench.models.prompting import candidate_targets

    torch.set_num_threads(1)
    model, proc = load_base(args.model)
    choice = (AnswerType.MULTIPLE_CHOICE, AnswerType.YES_NO)
    items = [
        s
        for t in drake_synth_spec().tasks
        if t.answer_type in choice
        for s in fresh_items(t, args.items_per_task, seed=777)
    ]
    by_task: dict[str, list] = {}
    for s in items:
        by_task.setdefault(s.task_id, []).append(s)
    tok = engine.tokenizer_of(proc)

    def one_token(group) -> bool:
        return all(len(tok(c, add_special_tokens=False)["input_ids"]) == 1 for s in group for c in candidate_targets(s))

    full_tasks = [t for t, group in by_task.items() if not one_token(group)]

    def before() -> dict[str, list[float]]:
        out = {}
        for t, group in by_task.items():
            if t in full_tasks:
                out[t] = engine.score_targets(model, proc, [(s, c) for s in group for c in candidate_targets(s)])
            else:  # the one-forward-per-item path, unchanged
                out[t] = [x for sc in engine.choice_scores(model, proc, group) for x in sc]
        return out

    def after() -> dict[str, list[float]]:
        return {t: [x for sc in engine.choice_scores(model, proc, group) for x in sc] for t, group in by_task.items()}

    paths = {"full forward per option (before)": before, "each prompt once (now)": after}
    times, outputs = alternate(paths, args.repeats)
    old, new = (outputs[name] for name in paths)
    diff = max((abs(a - b) for t in full_tasks for a, b in zip(old[t], new[t])), default=0.0)
    n_options = sum(len(candidate_targets(s)) for s in items)
    med = {name: statistics.median(v) for name, v in times.items()}
    ratio = med["full forward per option (before)"] / med["each prompt once (now)"]
    data = {
        "model": args.model,
        "items": len(items),
        "options": n_options,
        "tasks": len(by_task),
        "full_path_tasks": full_tasks,
        "repeats": args.repeats,
        "seconds": times,
        "median_seconds": med,
        "ratio_before_over_now": ratio,
        "max_abs_score_difference_full_path_tasks": diff,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "choice_scoring.json").write_text(json.dumps(data, indent=1) + "\n")
    lines = [
        "# Choice scoring: each prompt once vs a full forward per option",
        "",
        f"Generated by `python scripts/bench_choice_scoring.py` (see its docstring): `{args.model}`, one torch "
        f"thread, {len(items)} items of drake-synth's {len(by_task)} choice tasks with {n_options} options, one call "
        f"per task as the evaluator makes them, median of "
        f"{args.repeats} alternating repeats.",
        "",
        "| path | median seconds |",
        "|:---|---:|",
    ]
    lines += [f"| {name} | {v:.2f} |" for name, v in med.items()]
    lines += [
        "",
        f"Ratio before / now: **{ratio:.2f}x**. {len(full_tasks)} of the {len(by_task)} tasks took the full "
        f"path before; the largest score difference on them: {diff:.2e}.",
    ]
    (args.out / "choice_scoring.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    main()
