#!/usr/bin/env python
"""Build the tiny zoo's shipped checkpoints (drake_bench/models/weights/): pretrain, export, hash.

Every tiny zoo model is pretrained once with the current recipe (drake_bench.models.pretrain,
cached under $DRAKE_BENCH_MODELS as in development), exported in bfloat16 safetensors with its
processor or tokenizer, and the folder's manifest.json records every file's sha256 and the
recipe (drake_bench.models.shipped). Commit the resulting folder: every machine then loads these
exact bytes, and a fresh install never pretrains. Pretraining is single-threaded and seeded, so
rebuilding on one machine gives the same bytes; another machine may give other bytes, which is
why the weights ship instead of being rebuilt.

Usage: python scripts/build_zoo.py [--models tiny-llava-llama-s ...] [--root DIR] [--dtype bfloat16] [--workers 2]
       [--publish [--no-dry-run] [--repo-prefix drake-bench]]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def _say(line: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {line}", flush=True)


def _pretrain_one(name: str) -> str:
    """Worker: pretrain one model into the local cache (resumes from its own snapshots)."""
    import torch

    from drake_bench.models.pretrain import ensure_pretrained

    torch.set_num_threads(1)
    return str(ensure_pretrained(name, progress=_say))


def build(names: list[str], root: Path, dtype: str = "bfloat16", workers: int = 1) -> dict:
    """Pretrain (or reuse the local cache of) each model, export it under ``root``, then write the manifest.

    The tokenizer and the shared vision tower are built first (every LLaVA needs them), then the models in
    ``workers`` processes of one thread each. Every stage resumes: finished models are cache entries, an
    interrupted tower or language-model stage continues from its last snapshot.
    """
    from drake_bench.models import load_base
    from drake_bench.models.pretrain import DEFAULT_RECIPE, ensure_tokenizer
    from drake_bench.models.shipped import MANIFEST, WEIGHTS_FILE, export_checkpoint, write_manifest
    from drake_bench.models.vision import ensure_vision_tower, tower_report
    from drake_bench.models.zoo import model_info, tiny_names

    recipe = DEFAULT_RECIPE.as_dict()
    left = sorted(set(tiny_names()) - set(names))
    if left and (root / MANIFEST).is_file():  # a partial build keeps the other folders: they must share the recipe
        previous = json.loads((root / MANIFEST).read_text()).get("recipe")
        kept = [n for n in left if (root / n).is_dir()]
        if kept and previous != recipe:
            raise SystemExit(f"{root / MANIFEST} was built with another recipe, and {kept} would keep it; "
                             "rebuild every model (leave out --models)")
    _say(f"tokenizer: {ensure_tokenizer()}")
    if any(model_info(n).multimodal for n in names):
        import torch

        torch.set_num_threads(1)
        tower = ensure_vision_tower(DEFAULT_RECIPE, progress=_say)
        probe = tower_report(tower).get("probe", {}).get("accuracy", {})
        _say("vision tower probes (held-out): " + ", ".join(f"{k} {v}" for k, v in probe.items()))
    # the largest models first, so the pool ends with short jobs
    order = sorted(names, key=lambda n: (not model_info(n).multimodal, -(model_info(n).hidden_size or 0)))
    if workers > 1:
        from concurrent.futures import ProcessPoolExecutor
        from multiprocessing import get_context

        with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
            for name, path in zip(order, pool.map(_pretrain_one, order)):
                _say(f"{name}: pretrained ({path})")
    for i, name in enumerate(names, 1):
        started = time.perf_counter()
        if workers <= 1:
            _pretrain_one(name)
        model, processor = load_base(name, source="pretrain")
        hashes = export_checkpoint(model, processor, name, root=root, dtype=dtype)
        _say(f"[{i}/{len(names)}] {name}: exported, {WEIGHTS_FILE} sha256 {hashes[WEIGHTS_FILE]} "
             f"({time.perf_counter() - started:.0f} s)")
    manifest = write_manifest(root, recipe)
    size = sum(m["bytes"] for m in manifest["models"].values())
    _say(f"wrote {root / MANIFEST}: {len(manifest['models'])} models, {size / 1e6:.1f} MB")
    return manifest


def main(argv: list[str] | None = None) -> None:
    from drake_bench.models.shipped import HUB_PREFIX, publish_models, weights_root
    from drake_bench.models.zoo import tiny_names

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=tiny_names(), help="zoo names (default: every tiny model)")
    ap.add_argument("--root", type=Path, default=None, help="weights folder (default: $DRAKE_BENCH_WEIGHTS or "
                                                              "drake_bench/models/weights)")
    ap.add_argument("--dtype", default="bfloat16", help="storage dtype of the exported safetensors")
    ap.add_argument("--workers", type=int, default=1, help="models pretrained in parallel (one thread each)")
    ap.add_argument("--publish", action="store_true", help="then upload each model folder as a Hub model repo")
    ap.add_argument("--no-dry-run", action="store_true", help="with --publish: really upload (default: print the plan)")
    ap.add_argument("--repo-prefix", default=HUB_PREFIX)
    args = ap.parse_args(argv)
    unknown = sorted(set(args.models) - set(tiny_names()))
    if unknown:
        raise SystemExit(f"not tiny zoo names: {unknown}; known: {tiny_names()}")
    root = args.root or weights_root()
    build(list(args.models), root, args.dtype, args.workers)
    if args.publish:
        plan = publish_models(args.models, repo_prefix=args.repo_prefix, dry_run=not args.no_dry_run, root=root)
        for item in plan:
            print(f"{'published' if args.no_dry_run else 'would publish'} {item['repo_id']}: {len(item['files'])} files, "
                  f"{item['bytes'] / 1e6:.1f} MB, weights sha256 {item['weights_sha256']}", flush=True)


if __name__ == "__main__":
    main()
