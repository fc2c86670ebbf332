#!/usr/bin/env python
"""Audit FedMosaic's PQ-LoRA weight alignment on the shipped, pretrained zoo models (not a test).

For each drake-synth model allocation with more than one architecture, FedMosaic's ``setup`` runs exactly as in
a board (the evaluator's federation context, the run's public data, the plugin's defaults plus the settings
given), and its alignment audit is read back (``round_diagnostics``, the rows a run writes to its result file):

* ``heldout_l2_ratio``: the A-code L2 distance to the pivot after alignment over before, on public items the
  alignment never saw. Target: below 0.5 (FedMosaic's toy-scale expectation, "well below the random-init L2").
* ``cca_corr_top``: the top canonical correlation of the paired layers' outputs that B's mapping used. Target:
  "high on warmed-up bases"; this audit reads high as at least 0.9.
* ``heldout_cca_corr_top`` / ``_mean``: the correlation of the paired layers' outputs along the canonical
  directions B's mapping was built on, measured on the held-out items (does the shared space generalise?).

Medians over an allocation's aligned (architecture, module) pairs; each setting is one "alignment budget"
(--settings "align_epochs=4;public_size=2000" ...). Writes ``<out>.json`` and ``<out>.md``.

    python scripts/fedmosaic_alignment_audit.py                       # the plugin's defaults
    python scripts/fedmosaic_alignment_audit.py --settings "" "align_epochs=4" "align_epochs=4;public_size=2000"
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from drake_bench.evaluator.run_config import RunConfig
from drake_bench.evaluator.standard import Evaluator
from drake_bench.streams.stream import load_federated_data

THRESHOLD_L2_RATIO = 0.5
THRESHOLD_TOP_CORR = 0.9
ALLOCATIONS = ["hetero", "cross-family", "three-sizes"]


def _settings(text: str) -> dict:
    out = {}
    for item in filter(None, (t.strip() for t in text.split(";"))):
        key, _, value = item.partition("=")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def audit(allocation: str, settings: dict) -> dict:
    ev = Evaluator(
        RunConfig(
            benchmark="drake-synth",
            scenario="dynamic",
            method="fedmosaic",
            allocation=allocation,
            method_config=settings,
            isolation="inline",
            out="/tmp/fedmosaic-audit",
        )
    )
    method = ev.start_method(0)
    ev.describe_models(method)
    fed = load_federated_data(ev.spec, ev.scenario, 0)
    t0 = time.perf_counter()
    method.setup(ev.federation_context(fed, 0, ev.spec.fl.local_steps), rng_seed=ev.setup_seed(0))
    seconds = time.perf_counter() - t0
    rows = [d["values"] | {"key": d["key"]} for d in method.round_diagnostics(0) if d["key"].startswith("alignment/")]
    med = lambda k: statistics.median(r[k] for r in rows)  # noqa: E731
    return {
        "allocation": allocation,
        "settings": settings,
        "modules": len(rows),
        "setup_seconds": round(seconds, 1),
        "pivot": rows[0]["pivot"],
        "architectures": sorted({r["key"].split("/")[1] for r in rows}),
        "median_heldout_l2_ratio": med("heldout_l2_ratio"),
        "median_train_l2_ratio": med("l2_ratio"),
        "median_cca_corr_top": med("cca_corr_top"),
        "median_heldout_cca_corr_top": med("heldout_cca_corr_top"),
        "median_heldout_cca_corr_mean": med("heldout_cca_corr_mean"),
        "share_l2_below_threshold": sum(r["heldout_l2_ratio"] < THRESHOLD_L2_RATIO for r in rows) / len(rows),
        "share_corr_above_threshold": sum(r["cca_corr_top"] >= THRESHOLD_TOP_CORR for r in rows) / len(rows),
        "rows": rows,
    }


def render(results: list[dict]) -> str:
    lines = [
        "| allocation | settings | pivot | modules | held-out L2 after/before | train L2 ratio | top CCA corr | "
        "held-out top / mean CCA corr | L2 < 0.5 | corr ≥ 0.9 | setup s |",
        "|:---|:---|:---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        s = ", ".join(f"{k}={v}" for k, v in r["settings"].items()) or "defaults"
        lines.append(
            f"| {r['allocation']} | {s} | {r['pivot']} | {r['modules']} | {r['median_heldout_l2_ratio']:.3f} | "
            f"{r['median_train_l2_ratio']:.3f} | {r['median_cca_corr_top']:.3f} | "
            f"{r['median_heldout_cca_corr_top']:.3f} / {r['median_heldout_cca_corr_mean']:.3f} | "
            f"{r['share_l2_below_threshold']:.0%} | {r['share_corr_above_threshold']:.0%} | {r['setup_seconds']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--allocations", nargs="+", default=ALLOCATIONS)
    ap.add_argument("--settings", nargs="+", default=[""], help="alignment budgets: 'KEY=VALUE;KEY=VALUE' each")
    ap.add_argument("--out", type=Path, default=Path("docs/findings/fedmosaic-alignment-audit"))
    args = ap.parse_args(argv)
    done: list[dict] = []
    path = args.out.with_suffix(".json")
    if path.is_file():  # resume: keep what was measured
        done = json.loads(path.read_text())
    for text in args.settings:
        settings = _settings(text)
        for allocation in args.allocations:
            if any(r["allocation"] == allocation and r["settings"] == settings for r in done):
                continue
            print(f"auditing {allocation} with {settings or 'defaults'}", file=sys.stderr, flush=True)
            done.append(audit(allocation, settings))
            path.write_text(json.dumps(done, indent=1))
            args.out.with_suffix(".md").write_text(render(done))
            print(render(done[-1:]), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
