"""The Flower backend's cost: the main job under the default backend and under Flower with 1 and 2 workers.

Runs ``drake-bench run`` (the README's main job: drake-synth, SFT and FedIT, seed 0; pass a smaller one with
``--extra``) three times in one invocation, each into a fresh folder and timed as a whole command:

* ``default``: the default backend (methods in two worker processes on 2 cores);
* ``flower-2``: ``--backend flower --flower-workers 2`` (methods one after another in one Flower simulation,
  two ClientApps at a time on Ray);
* ``flower-1``: ``--backend flower --flower-workers 1``.

It checks that the three runs' result files agree but for execution fields (drake_bench.results.result_file.comparable) and
writes the times and ratios to ``docs/performance.md`` (section "Flower backend"). Run it on an otherwise idle
machine, after a warm-up run that builds the data::

    python scripts/bench_flower.py                                   # the full main job: about 40 minutes on 2 cores
    python scripts/bench_flower.py --extra --rounds 4 --local-steps 2 --no-fast-adaptation   # a short one
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SECTION = "## Flower backend"
RUNS = {
    "default": [],
    "flower-2": ["--backend", "flower", "--flower-workers", "2"],
    "flower-1": ["--backend", "flower", "--flower-workers", "1"],
}


def run_job(out: Path, options: list[str]) -> float:
    cmd = [
        sys.executable,
        "-m",
        "drake_bench.cli",
        "run",
        "--methods",
        "sft,fedit",
        "--out",
        str(out),
        "--no-resume",
        *options,
    ]
    started = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def differences(a: Path, b: Path) -> list[str]:
    """Where two output folders' result files differ but for execution fields (empty: the same numbers)."""
    from drake_bench.results.result_file import comparable_differences, read_result

    out = []
    for path in sorted(a.glob("*/*/*/*/result.json")):
        other = b / path.relative_to(a)
        if not other.exists():
            out.append(f"{other} is missing")
            continue
        out += [f"{path.relative_to(a)}: {d}" for d in comparable_differences(read_result(path), read_result(other))]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="more `drake-bench run` options")
    ap.add_argument("--doc", type=Path, default=ROOT / "docs" / "performance.md")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="bench-flower-"))
    try:
        run_job(
            tmp / "warm-up", ["--scenario", "static", "--rounds", "1", "--local-steps", "1", "--no-fast-adaptation"]
        )
        times = {name: run_job(tmp / name, [*options, *args.extra]) for name, options in RUNS.items()}
        diffs = differences(tmp / "default", tmp / "flower-2") + differences(tmp / "default", tmp / "flower-1")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    job = "`drake-bench run --methods sft,fedit" + (" " + " ".join(args.extra) if args.extra else "") + "`"
    lines = [
        SECTION,
        "",
        f"The same job ({job}: drake-synth, seed 0, {os.cpu_count()} cores) under the default backend and under "
        "`--backend flower` with 1 and 2 ClientApps at a time, one after the other in one invocation of "
        f"`python scripts/bench_flower.py{' --extra ' + ' '.join(args.extra) if args.extra else ''}` (after a "
        f"warm-up run that builds the data; 1-minute load average {load:.1f} at the end).",
        "",
        "| run | wall time (s) |",
        "|:---|---:|",
        *[f"| {name} | {secs:.0f} |" for name, secs in times.items()],
        "",
        f"Flower overhead, flower-2 / default: **{times['flower-2'] / times['default']:.2f}**. Scaling, flower-1 / "
        f"flower-2: **{times['flower-1'] / times['flower-2']:.2f}**. The three runs' result files are "
        f"{'identical but for execution fields' if not diffs else 'NOT identical: ' + '; '.join(diffs[:3])}.",
        "",
    ]
    doc = args.doc
    text = doc.read_text() if doc.exists() else "# Performance\n\n"
    if SECTION in text:
        head, _, rest = text.partition(SECTION)
        tail = rest.split("\n## ", 1)
        text = head + "\n".join(lines) + ("\n## " + tail[1] if len(tail) > 1 else "")
    else:
        text = text.rstrip() + "\n\n" + "\n".join(lines)
    doc.write_text(text)
    print("\n".join(lines))
    return 0 if not diffs else 1


if __name__ == "__main__":
    raise SystemExit(main())
