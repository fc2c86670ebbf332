"""The cost of the process boundary: the main job with the method in its own process vs in the evaluator's.

Runs ``drake-bench run`` (the README's main job: drake-synth, SFT and FedIT, seed 0) twice in one
invocation, ``--isolation process`` then ``--isolation inline``, each into a fresh folder, times both
as whole commands, checks that their scores and bytes are identical, and writes the ratio to
``docs/performance.md`` (section "Process isolation"). Run it on an otherwise idle machine::

    python scripts/bench_isolation.py            # about 15 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from drake_bench.results.result_file import load_result_data

ROOT = Path(__file__).resolve().parents[1]
SECTION = "## Process isolation"


def run_job(isolation: str, out: Path, extra: list[str]) -> float:
    cmd = ["drake-bench", "run", "--isolation", isolation, "--out", str(out), "--no-resume", *extra]
    started = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def numbers(out: Path) -> dict[str, list]:
    found = {}
    for path in sorted(out.glob("drake-synth/*/*/*/result.json")):
        res = load_result_data(path)
        found[res["method"]["name"]] = [
            [s["score"] for s in res["raw"]["scores"]],
            [a["score"] for a in res["raw"]["adaptation"]],
            [(c["uplink_bytes"], c["downlink_bytes"]) for c in res["raw"]["costs"]],
        ]
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="more `drake-bench run` options")
    ap.add_argument("--doc", type=Path, default=ROOT / "docs" / "performance.md")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="bench-isolation-"))
    try:
        run_job(
            "process", tmp / "warm-up", ["--rounds", "4", "--local-steps", "1", "--no-fast-adaptation", *args.extra]
        )
        times = {iso: run_job(iso, tmp / iso, args.extra) for iso in ("process", "inline")}
        same = numbers(tmp / "process") == numbers(tmp / "inline") and numbers(tmp / "process")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ratio = times["process"] / times["inline"]
    lines = [
        SECTION,
        "",
        "The main job (`drake-bench run`: drake-synth, SFT and FedIT, seed 0, two workers on 2 cores), timed as a whole "
        "command with the method in its own worker process (the default) and inside the evaluator's process "
        "(`--isolation inline`), one after the other in one invocation of `python scripts/bench_isolation.py` "
        "(after a short warm-up run that builds the data and pretrains the models).",
        "",
        "| isolation | wall time (s) |",
        "|:---|---:|",
        f"| process | {times['process']:.0f} |",
        f"| inline | {times['inline']:.0f} |",
        "",
        f"Ratio process / inline: **{ratio:.3f}** ({(ratio - 1) * 100:+.1f}%). Scores, fast-adaptation scores and "
        f"message bytes of the two runs are {'identical' if same else 'NOT identical'}.",
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
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
