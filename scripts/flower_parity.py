"""Every registered method under the default backend and under Flower's simulation: the same result file?

CI checks SFT, FedIT and FedMosaic (tests/test_flower.py); this script checks every entry of ``drake-bench list``
on a small configuration of an embedded benchmark (tiny pools, the random tiny testing models, 2 rounds of 1 step,
fast adaptation on one unseen task), all methods in one Flower simulation, and prints one line per method: the
same numbers but for execution fields (drake_bench.results.result_file.comparable), or the first differences::

    python scripts/flower_parity.py                       # drake-synth, every method
    python scripts/flower_parity.py --methods tap,ditto --clients-per-round 3

It builds into its own DRAKE_BENCH_HOME (a temporary folder unless --home is given).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--benchmark", default="drake-synth")
    ap.add_argument("--methods", default="", help="comma-separated (default: every registered method)")
    ap.add_argument("--clients-per-round", type=int, default=None, help="also draw this many clients per round")
    ap.add_argument("--scale", default="0.05", help="DRAKE_BENCH_SYNTH_SCALE for the build")
    ap.add_argument("--home", default=None)
    args = ap.parse_args(argv)
    os.environ["DRAKE_BENCH_HOME"] = args.home or tempfile.mkdtemp(prefix="flower-parity-")
    os.environ.setdefault("DRAKE_BENCH_SYNTH_SCALE", args.scale)
    os.environ.setdefault("DRAKE_BENCH_NO_PROGRESS", "1")

    import torch

    from drake_bench.benchmarks.manifest import load_benchmark
    from drake_bench.evaluator.standard import RunConfig, run_on_flower
    from drake_bench.plugins.registry import available_methods, method_class
    from drake_bench.results.result_file import comparable_differences
    from drake_bench.runner import run_methods

    torch.set_num_threads(1)
    names = [m for m in args.methods.split(",") if m] or available_methods()
    spec = load_benchmark(args.benchmark)
    out = os.path.join(os.environ["DRAKE_BENCH_HOME"], "runs")

    def config(name: str, **extra: object) -> RunConfig:
        fields = getattr(method_class(name), "Config", None)
        loader = {"model_loader": "testing"} if fields is not None and "model_loader" in fields.model_fields else {}
        return RunConfig(
            benchmark=args.benchmark,
            method=name,
            method_config=loader,
            scenario="static",
            rounds=2,
            local_steps=1,
            batch_size=2,
            eval_every_rounds=1,
            others_subsample=1,
            self_subsample=2,
            fast_adaptation=bool(spec.unseen_tasks),
            fast_adaptation_tasks=spec.unseen_tasks[:1] or None,
            fast_adaptation_iters=1,
            fast_adaptation_eval_every=1,
            fast_adaptation_test_items=2,
            clients_per_round=args.clients_per_round,
            resume=False,
            **extra,
        )  # fresh: a finished
        # run would be rewritten from its checkpoints, and a parity check must run the code as it is now

    started = time.perf_counter()
    default = run_methods([config(n, out=f"{out}/default") for n in names], jobs=2)
    t_default = time.perf_counter() - started
    started = time.perf_counter()
    flower = run_on_flower([config(n, out=f"{out}/flower", backend="flower", flower_workers=2) for n in names])
    t_flower = time.perf_counter() - started
    bad = 0
    for name, a, b in zip(names, default, flower):
        diffs = comparable_differences(a, b)
        bad += bool(diffs)
        print(f"{name:20s} {'same' if not diffs else 'DIFFERENT: ' + '; '.join(diffs[:3])}", flush=True)
    print(
        f"{len(names) - bad}/{len(names)} methods identical but for execution fields ({args.benchmark}, "
        f"default {t_default:.0f} s, flower {t_flower:.0f} s)"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
