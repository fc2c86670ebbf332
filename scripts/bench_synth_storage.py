#!/usr/bin/env python
"""Disk size and build time of the embedded benchmarks, current encoding against the one before (not a test).

Builds each embedded benchmark at its default size twice in one process, side by side: the shipped version and
its predecessor (archived manifest, the older storage encoding), then reads every shard once through the store
(which makes datasets' Arrow cache). Reports per version:

  * shards: bytes of the Parquet files (what is published on the Hub and downloaded);
  * on disk: the built folder as ``du`` counts it (4 KiB blocks, so many small shards cost more than their bytes);
  * arrow cache: datasets' decoded copy made on first read (dropped and remade by each rebuild);
  * build seconds (one process; building uses no torch) and how many task splits hold the same content (ids, text and
    decoded pixels: ``drake_bench.benchmarks.hub.shard_digest``) in both versions.

Then builds each later version of a benchmark whose content changed since (``CONTENT_PAIRS``: drake-synth 1.6.0
against 1.5.0, 1.7.0 against 1.6.0, then the shipped 1.8.0 against 1.7.0) and totals the shipped suite.

    python scripts/bench_synth_storage.py          # about a minute on one core; writes docs/synth_storage.md
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAIRS = [
    ("drake-synth@1.5.0", "drake-synth@1.4.0"),
    ("hflb-synth", "hflb-synth@1.3.0"),
    ("fedllm-synth", "fedllm-synth@1.3.0"),
]
"""(new encoding, old encoding). drake-synth is pinned to 1.5.0, the version that introduced the compact encoding:
1.6.0 redraws 24 tasks in their group's visual domain, which is a content change, not an encoding one."""
CONTENT_PAIRS = [
    ("drake-synth@1.6.0", "drake-synth@1.5.0"),
    ("drake-synth@1.7.0", "drake-synth@1.6.0"),
    ("drake-synth", "drake-synth@1.7.0"),
]
"""(later, previous) of each content change in the same encoding, oldest first (a previous version is one built
before it): what each redesign costs on disk."""
SHIPPED = ["drake-synth", "hflb-synth", "fedllm-synth"]


def _du(path: Path) -> int:
    """Bytes as du counts them: every file and folder rounded up to 4 KiB blocks."""
    total = 0
    for p in [path, *path.rglob("*")]:
        size = p.stat().st_size if p.is_file() else 4096
        total += -(-size // 4096) * 4096
    return total


def measure(name: str, out: Path) -> dict:
    from drake_bench.benchmarks.manifest import load_benchmark
    from drake_bench.benchmarks.store import ARROW_CACHE, BuiltBenchmark
    from drake_bench.benchmarks.synth.builder import build_synth

    spec = load_benchmark(name)
    t0 = time.perf_counter()
    root = build_synth(spec, out=out)
    seconds = time.perf_counter() - t0
    shards = sorted((root / "data").glob("*/*.parquet"))
    on_disk = _du(root)
    built = BuiltBenchmark.open(root)
    for p in shards:
        built.table(p.parent.name, p.name.split("-")[0])
    cache = sum(p.stat().st_size for p in (root / ARROW_CACHE).rglob("*") if p.is_file())
    return {
        "benchmark": name,
        "version": spec.version,
        "storage": spec.storage.model_dump(),
        "root": str(root),
        "shards": len(shards),
        "shard_bytes": sum(p.stat().st_size for p in shards),
        "on_disk_bytes": on_disk,
        "arrow_cache_bytes": cache,
        "build_seconds": round(seconds, 1),
    }


def same_content(a: Path, b: Path) -> tuple[int, int, list[str]]:
    """Splits of ``b`` with the same content in ``a``; a split of a task only one version has counts as differing."""
    from drake_bench.benchmarks.hub import shard_digest

    rels = sorted(p.relative_to(b) for p in (b / "data").glob("*/*.parquet"))
    differ = [str(r) for r in rels if not (a / r).is_file() or shard_digest(a / r) != shard_digest(b / r)]
    return len(rels) - len(differ), len(rels), differ


def report(rows: list[dict], content: list[dict] | None = None) -> str:
    mb = lambda n: f"{n / 1e6:.2f}"  # noqa: E731
    lines = [
        "# Embedded benchmarks on disk",
        "",
        "Written by `python scripts/bench_synth_storage.py` (one process; both versions built side by "
        "side in the same run). MB = 10^6 bytes. *Shards* is what the Hub holds and a download fetches; *on disk* "
        "counts 4 KiB blocks as `du` does; the *Arrow cache* is datasets' decoded copy, made on first read.",
        "",
        "| benchmark | version | images | Parquet | shards | shards MB | on disk MB | Arrow cache MB | build s "
        "| same content |",
        "|:---|:---|:---|:---|---:|---:|---:|---:|---:|:---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['benchmark'].split('@')[0]} | {r['version']} | {r['storage']['images']} | "
            f"{r['storage']['parquet_compression']} | {r['shards']} | {mb(r['shard_bytes'])} | "
            f"{mb(r['on_disk_bytes'])} | {mb(r['arrow_cache_bytes'])} | {r['build_seconds']} | "
            f"{r.get('same_content', '')} |"
        )
    new = [r for r in rows if "same_content" in r]
    old = [r for r in rows if "same_content" not in r]
    tot = lambda rs, k: sum(r[k] for r in rs)  # noqa: E731
    lines += ["", "| whole suite | shards MB | on disk MB | Arrow cache MB | build s |", "|:---|---:|---:|---:|---:|"]
    for label, rs in (("previous encoding (PNG)", old), ("compact encoding (WebP, zstd)", new)):
        lines.append(
            f"| {label} | {mb(tot(rs, 'shard_bytes'))} | {mb(tot(rs, 'on_disk_bytes'))} | "
            f"{mb(tot(rs, 'arrow_cache_bytes'))} | {tot(rs, 'build_seconds'):.1f} |"
        )
    lines.append(
        f"| ratio compact / previous | {tot(new, 'shard_bytes') / tot(old, 'shard_bytes'):.2f} | "
        f"{tot(new, 'on_disk_bytes') / tot(old, 'on_disk_bytes'):.2f} | "
        f"{tot(new, 'arrow_cache_bytes') / tot(old, 'arrow_cache_bytes'):.2f} | "
        f"{tot(new, 'build_seconds') / tot(old, 'build_seconds'):.2f} |"
    )
    lines += [
        "",
        "*Same content* counts the task splits whose ids, text and decoded pixels are identical in both "
        "versions; the splits that differ are those of tasks redesigned in the new version (drake-synth 1.5.0: "
        "the four image-quality tasks, whose noise became luma grain).",
        "",
    ]
    if content:
        lines += [
            "## Content changes since, in the same encoding",
            "",
            "| benchmark | version | shards | shards MB | on disk MB | Arrow cache MB | build s | same content as |",
            "|:---|:---|---:|---:|---:|---:|---:|:---|",
        ]
        for r in content:
            lines.append(
                f"| {r['benchmark'].split('@')[0]} | {r['version']} | {r['shards']} | {mb(r['shard_bytes'])} | "
                f"{mb(r['on_disk_bytes'])} | {mb(r['arrow_cache_bytes'])} | {r['build_seconds']} | "
                f"{r.get('against', '')}: {r.get('same_content', '')} |"
            )
        shipped = {r["benchmark"]: r for r in rows + content if r["benchmark"] in SHIPPED}
        names = ", ".join(f"{b} {shipped[b]['version']}" for b in SHIPPED)
        lines += [
            "",
            f"The shipped suite ({names}): "
            f"{mb(tot(shipped.values(), 'shard_bytes'))} MB of shards, {mb(tot(shipped.values(), 'on_disk_bytes'))} "
            f"MB on disk, built in {tot(shipped.values(), 'build_seconds'):.1f} s. drake-synth 1.6.0 draws the "
            "relation and reasoning clients' 24 tasks in their group's visual domain (studio photographs, comic "
            "drawings); 1.7.0 replaces two relation tasks and redraws three reasoning tasks (the groups' own "
            "skills: cracks, object states); 1.8.0 redraws those three and replaces one more reasoning task (state "
            "tasks about presence). The other tasks' splits are unchanged.",
            "",
        ]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "synth_storage.md")
    args = ap.parse_args()
    os.environ.setdefault("DRAKE_BENCH_NO_PROGRESS", "1")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for current, previous in PAIRS:
            old = measure(previous, Path(tmp) / previous)
            new = measure(current, Path(tmp) / current)
            same, n, differ = same_content(Path(old["root"]), Path(new["root"]))
            new["same_content"] = f"{same}/{n}"
            new["differing"] = differ
            rows += [old, new]
            print(
                f"{current}: {old['shard_bytes'] / 1e6:.2f} -> {new['shard_bytes'] / 1e6:.2f} MB, same content "
                f"{same}/{n}",
                flush=True,
            )
        content = []
        for current, previous in CONTENT_PAIRS:  # the previous version was built above
            prev_root = next(Path(r["root"]) for r in rows + content if r["benchmark"] == previous)
            new = measure(current, Path(tmp) / current)
            same, n, differ = same_content(prev_root, Path(new["root"]))
            new.update(same_content=f"{same}/{n}", differing=differ, against=previous.split("@")[-1])
            content.append(new)
            print(f"{current}: {new['shard_bytes'] / 1e6:.2f} MB, same content as {previous} {same}/{n}", flush=True)
    for r in rows + content:
        r.pop("root")
    args.out.write_text(report(rows, content))
    args.out.with_suffix(".json").write_text(json.dumps({"encoding": rows, "content": content}, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
