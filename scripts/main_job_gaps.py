#!/usr/bin/env python
"""The main job's two gaps, per seed and as mean ± population std, from a board's result files (not a test).

SFT Self A_last minus zero-shot Self A_last (does local training move a client's own tasks?) and SFT Self
A_last minus SFT Others A_last (does it personalize?), x100, paired by seed; plus each gap divided by its seed
std (the embedded model's targets ask for >= 15 and >= 12 points, each >= 3 stds).

    python scripts/main_job_gaps.py leaderboard/archive/recipe-8/main-job-3-seeds/drake-synth/dynamic
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from drake_bench.results.result_file import load_result_data


def per_seed(board: Path, method: str) -> dict[int, dict]:
    data = load_result_data(board / method / "1.0" / "result.json")
    return {s["seed"]: s for s in data["summary"]["per_seed"]}


def main() -> None:
    board = Path(
        sys.argv[1] if len(sys.argv) > 1 else "leaderboard/archive/recipe-8/main-job-3-seeds/drake-synth/dynamic"
    )
    zs, sft = per_seed(board, "zero-shot"), per_seed(board, "sft")
    seeds = sorted(set(zs) & set(sft))
    gaps = {
        "SFT Self - zero-shot Self": [100 * (sft[s]["self_last"] - zs[s]["self_last"]) for s in seeds],
        "SFT Self - SFT Others": [100 * (sft[s]["self_last"] - sft[s]["others_last"]) for s in seeds],
    }
    print(f"| gap (A_last, x100) | {' | '.join(f'seed {s}' for s in seeds)} | mean ± std | mean / std |")
    print("|:---|" + "---:|" * (len(seeds) + 2))
    for name, xs in gaps.items():
        m, sd = statistics.mean(xs), statistics.pstdev(xs)
        ratio = f"{m / sd:.1f}" if sd > 0 else "inf"
        print(f"| {name} | {' | '.join(f'{x:+.2f}' for x in xs)} | {m:+.2f} ± {sd:.2f} | {ratio} |")


if __name__ == "__main__":
    main()
