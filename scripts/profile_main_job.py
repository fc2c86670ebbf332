#!/usr/bin/env python
"""Where the main job's CPU goes: the README's `drake-bench run` under py-spy, every process sampled, stacks sorted.

The main job is SFT, FedIT and zero-shot on drake-synth with the default options. It runs under ``py-spy record
--subprocesses``, which follows the runner's workers, their fork server and the method workers. Each sample of a busy
thread is put in the first class whose function appears in its stack:

* **choice scoring**: ``engine.choice_scores`` (multiple-choice and yes/no items, prompt and options);
* **generation**: ``engine.generate`` (open answers);
* **training**: ``engine.train_step`` / ``engine.loss_on``, the local steps and fast adaptation's;
* **other**: data, set-up, checkpoints, the evaluator's bookkeeping, imports.

The choice-scoring share is the target of the performance issue (at most 10% of the main job's CPU, from 31.7% before
shared-prefix scoring). Samples count wall time of threads that are not idle, so on a machine shared with other
processes each class slows alike and the shares hold; the seconds do not.

    pip install py-spy
    python scripts/profile_main_job.py                 # about the main job's time, plus sampling overhead

Writes ``<out>/profile.json`` and ``profile.md`` (default docs/performance/) and keeps py-spy's raw stacks beside the
run (``<work>/stacks.txt``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

CLASSES = [
    ("choice scoring", ("choice_scores (",)),
    ("generation", ("generate (",)),
    ("training", ("train_step (", "loss_on (")),
]
"""(class, frames): a sample belongs to the first class one of whose frames (py-spy's ``function (file:line)``) is in
its stack."""


def classify(stack: str) -> str:
    frames = stack.split(";")
    for name, markers in CLASSES:
        if any(f.startswith(m) and "drake_bench/models/engine.py" in f for f in frames for m in markers):
            return name
    return "other"


def shares(raw: str) -> tuple[Counter, int]:
    """Samples per class from py-spy's raw (collapsed) output: one ``stack count`` line per distinct stack."""
    counts: Counter = Counter()
    for line in raw.splitlines():
        stack, _, n = line.rpartition(" ")
        if stack and n.isdigit():
            counts[classify(stack)] += int(n)
    return counts, sum(counts.values())


def inside_choice_scoring(raw: str, top: int = 6) -> list[tuple[str, float]]:
    """Where choice scoring's samples go: the innermost three engine.py functions of each of its stacks, as shares
    of choice scoring's samples."""
    parts: Counter = Counter()
    for line in raw.splitlines():
        stack, _, n = line.rpartition(" ")
        if n.isdigit() and classify(stack) == "choice scoring":
            engine = [f.split(" (")[0] for f in stack.split(";") if "drake_bench/models/engine.py" in f]
            parts[" > ".join(engine[-3:])] += int(n)
    total = sum(parts.values()) or 1
    return [(k, v / total) for k, v in parts.most_common(top)]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=int, default=50, help="samples per second per process")
    ap.add_argument("--work", type=Path, default=None, help="run folder (default: a fresh temporary one)")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "docs" / "performance")
    ap.add_argument(
        "--stacks",
        type=Path,
        default=None,
        help="read an earlier run's stacks.txt instead of running (its --work folder)",
    )
    args = ap.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="drake-profile-"))
    cmd = ["drake-bench", "run", "--out", str(work / "runs")]
    if args.stacks is not None:
        stacks, seconds = args.stacks, None
        cmd = ["drake-bench", "run", "--out", str(args.stacks.parent / "runs")]
    else:
        if shutil.which("py-spy") is None:
            sys.exit("py-spy is not installed: pip install py-spy")
        work.mkdir(parents=True, exist_ok=True)
        stacks = work / "stacks.txt"
        print("$ py-spy record ... --", " ".join(cmd), flush=True)
        t0 = time.perf_counter()
        subprocess.run(
            [
                "py-spy",
                "record",
                "--subprocesses",
                "--rate",
                str(args.rate),
                "--format",
                "raw",
                "--output",
                str(stacks),
                "--",
                *cmd,
            ],
            check=True,
        )
        seconds = time.perf_counter() - t0
    raw = stacks.read_text()
    counts, total = shares(raw)
    inside = inside_choice_scoring(raw)
    data = {
        "command": " ".join(cmd),
        "rate": args.rate,
        "wall_seconds": seconds,
        "samples": total,
        "share": {k: counts[k] / total for k in [c for c, _ in CLASSES] + ["other"]},
        "stacks": str(stacks),
        "inside_choice_scoring": dict(inside),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "profile.json").write_text(json.dumps(data, indent=1) + "\n")
    lines = [
        "# Where the main job's CPU goes",
        "",
        f"Generated by `python scripts/profile_main_job.py` (see its docstring): `{data['command']}` under "
        f"py-spy at {args.rate} samples per second in every process, {total:,} samples of busy threads"
        + (f", {seconds:.0f} s wall." if seconds else "."),
        "",
        "| class | share of samples |",
        "|:---|---:|",
    ]
    for k, v in data["share"].items():
        lines.append(f"| {k} | {100 * v:.1f}% |")
    lines += [
        "",
        "Inside choice scoring (the innermost engine.py functions of its samples):",
        "",
        "| where | share of choice scoring |",
        "|:---|---:|",
    ]
    lines += [f"| `{k}` | {100 * v:.1f}% |" for k, v in inside]
    (args.out / "profile.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[4:]))
    print(f"wrote {args.out / 'profile.md'}")


if __name__ == "__main__":
    main()
