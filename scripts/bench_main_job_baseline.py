#!/usr/bin/env python
"""The main job before and after the performance work, on the same machine, weights, data and schedule.

The performance issue's target is "the main job's wall time after install <= 0.5x today's on the same machine with
the same weights and schedule", today being the code before its first change (shared-prefix choice scoring,
commit 223e3fa). That code shipped the recipe-7 zoo; its pretraining code was already recipe 8, and the recipe-8
weights later changed only the weight files and their manifest. So the baseline is that commit's code with the
current ``drake_bench/models/weights/`` copied in: the same checkpoints, drake-synth 1.8.0 and the same 8 x 25
schedule, so the two runs differ only in the code.

The baseline runs from a git worktree installed (editable, no dependencies) into a virtual environment that sees
this one's packages (``--system-site-packages``: the same torch, transformers and peft), with its own
``DRAKE_BENCH_HOME``, where drake-synth is built before the clock starts; the current code runs with the usual home
(built there already, or built first, also off the clock). Each job is ``drake-bench run`` with the README's
defaults (SFT, FedIT and zero-shot, seed 0, two workers), timed as a whole command, one after the other on the
otherwise idle machine. Writes ``docs/performance/main_job_baseline.md`` and ``.json``::

    python scripts/bench_main_job_baseline.py                 # about 20 minutes on 2 idle cores
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "223e3fa^"  # the code before the performance issue's first change


def worktree(rev: str, where: Path) -> Path:
    if not where.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(where), rev], check=True)
    weights = where / "drake_bench" / "models" / "weights"
    shutil.rmtree(weights)
    shutil.copytree(ROOT / "drake_bench" / "models" / "weights", weights)
    return where


def venv_for(code: Path, where: Path) -> Path:
    """A virtual environment over this interpreter's packages with ``code`` installed editable: its own import
    hook for ``drake_bench`` and ``methods`` comes before this environment's (PYTHONPATH alone does not override
    an editable install's hook in the processes the evaluator starts)."""
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(where)], check=True)
    python = where / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "-e", str(code)], check=True)
    return python


def env_for(home: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if home is not None:
        env["DRAKE_BENCH_HOME"] = str(home)
    return env


def prepare(python: Path | str, env: dict[str, str], cwd: Path) -> None:
    """drake-synth built where this code looks for it (off the clock)."""
    code = "import drake_bench; print('code:', drake_bench.__file__); from drake_bench.benchmarks.synth import ensure_built; ensure_built('drake-synth')"
    subprocess.run([str(python), "-c", code], env=env, cwd=cwd, check=True)


def timed_job(python: Path | str, env: dict[str, str], cwd: Path, out: Path) -> float:
    cmd = [str(python), "-m", "drake_bench.cli", "run", "--out", str(out), "--no-resume"]
    started = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default=BASELINE, help="git revision of the code before the work")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "performance")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        base = worktree(args.baseline, tmp / "baseline")
        base_python = venv_for(base, tmp / "venv")
        base_env, now_env = env_for(tmp / "home"), env_for(None)
        prepare(base_python, base_env, tmp)
        prepare(sys.executable, now_env, tmp)
        data = {
            "baseline": {
                "revision": subprocess.run(
                    ["git", "-C", str(ROOT), "rev-parse", args.baseline], capture_output=True, text=True, check=True
                ).stdout.strip()
            },
            "current": {
                "revision": subprocess.run(
                    ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
                ).stdout.strip()
            },
        }
        for name, python, env in (("baseline", base_python, base_env), ("current", sys.executable, now_env)):
            out = tmp / f"run-{name}"
            data[name]["wall_seconds"] = timed_job(python, env, tmp, out)
            data[name]["summary"] = (out / "drake-synth" / "dynamic" / "summary.md").read_text()
            print(name, round(data[name]["wall_seconds"], 1), flush=True)
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], check=False)
    ratio = data["current"]["wall_seconds"] / data["baseline"]["wall_seconds"]
    data["ratio_current_over_baseline"] = ratio
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "main_job_baseline.json").write_text(json.dumps(data, indent=1) + "\n")
    lines = [
        "# The main job before and after the performance work",
        "",
        "Generated by `python scripts/bench_main_job_baseline.py` (see its docstring): the README's main job "
        f"(`drake-bench run`, seed 0, two workers on 2 cores) with the code of `{args.baseline}` "
        f"({data['baseline']['revision'][:7]}) and the current weights, then with the current code "
        f"({data['current']['revision'][:7]}), one after the other on the same machine.",
        "",
        "| code | wall time (s) |",
        "|:---|---:|",
        f"| before the performance work | {data['baseline']['wall_seconds']:.0f} |",
        f"| current | {data['current']['wall_seconds']:.0f} |",
        "",
        f"Current / before: **{ratio:.2f}x** (the target: at most 0.5x).",
        "",
        "The scores differ between the two by float noise (packed training, segment attention and the shared-"
        "prefix choice scoring each change the arithmetic within float tolerance). Before:",
        "",
        data["baseline"]["summary"].strip(),
        "",
        "Current:",
        "",
        data["current"]["summary"].strip(),
        "",
    ]
    (args.out / "main_job_baseline.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
