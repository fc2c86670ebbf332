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


def _pretrain_one(name: str, overrides: dict | None = None) -> str:
    """Worker: pretrain one model into the local cache (resumes from its own snapshots)."""
    import torch

    from drake_bench.models.pretrain import ensure_pretrained

    torch.set_num_threads(1)
    return str(ensure_pretrained(name, recipe=_recipe(overrides), progress=_say))


def _recipe(overrides: dict | None):
    import dataclasses

    from drake_bench.models.pretrain import DEFAULT_RECIPE

    return dataclasses.replace(DEFAULT_RECIPE, **(overrides or {}))


def build(
    names: list[str], root: Path, dtype: str = "bfloat16", workers: int = 1, overrides: dict | None = None
) -> dict:
    """Pretrain (or reuse the local cache of) each model, export it under ``root``, then write the manifest.

    The tokenizer and the shared vision tower are built first (every LLaVA needs them), then the models in
    ``workers`` processes of one thread each. Every stage resumes: finished models are cache entries, an
    interrupted tower or language-model stage continues from its last snapshot. ``overrides`` changes recipe
    fields (experiments; the shipped zoo is built with the default recipe).
    """
    from drake_bench.models.pretrain import ensure_tokenizer
    from drake_bench.models.shipped import MANIFEST, WEIGHTS_FILE, build_environment, export_checkpoint, write_manifest
    from drake_bench.models.vision import ensure_vision_tower, tower_report
    from drake_bench.models.zoo import load_pretrained, model_info, tiny_names

    recipe = _recipe(overrides).as_dict()
    left = sorted(set(tiny_names()) - set(names))
    if left and (root / MANIFEST).is_file():  # a partial build keeps the other folders: they must share the recipe
        previous = json.loads((root / MANIFEST).read_text()).get("recipe")
        kept = [n for n in left if (root / n).is_dir()]
        if kept and previous != recipe:
            raise SystemExit(
                f"{root / MANIFEST} was built with another recipe, and {kept} would keep it; "
                "rebuild every model (leave out --models)"
            )
    _say(f"tokenizer: {ensure_tokenizer()}")
    if any(model_info(n).multimodal for n in names):
        import torch

        torch.set_num_threads(1)
        tower = ensure_vision_tower(_recipe(overrides), progress=_say)
        probe = tower_report(tower).get("probe", {}).get("accuracy", {})
        _say("vision tower probes (held-out): " + ", ".join(f"{k} {v}" for k, v in probe.items()))
    # the largest models first, so the pool ends with short jobs
    order = sorted(names, key=lambda n: (not model_info(n).multimodal, -(model_info(n).hidden_size or 0)))
    if workers > 1:
        from concurrent.futures import ProcessPoolExecutor
        from multiprocessing import get_context

        with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
            for name, path in zip(order, pool.map(_pretrain_one, order, [overrides] * len(order))):
                _say(f"{name}: pretrained ({path})")
    for i, name in enumerate(names, 1):
        started = time.perf_counter()
        model, processor = load_pretrained(_pretrain_one(name, overrides))  # pretrains here unless a worker did
        hashes = export_checkpoint(model, processor, name, root=root, dtype=dtype)
        _say(
            f"[{i}/{len(names)}] {name}: exported, {WEIGHTS_FILE} sha256 {hashes[WEIGHTS_FILE]} "
            f"({time.perf_counter() - started:.0f} s)"
        )
    manifest = write_manifest(root, recipe, build_environment())
    size = sum(m["bytes"] for m in manifest["models"].values())
    _say(f"wrote {root / MANIFEST}: {len(manifest['models'])} models, {size / 1e6:.1f} MB")
    return manifest


def write_report(names: list[str], manifest: dict, out: Path) -> None:
    """``out``.md / .json: the tower's held-out probes, each model's pretraining record and shipped hash.

    Read from the build's cache records (``drake_pretrain.json`` next to each cached checkpoint), so it
    is written by the machine that built the weights, in the same run."""
    from drake_bench.models.cache import RECIPE_FILE, VISION_DIR, models_home
    from drake_bench.models.pretrain import checkpoint_dir

    recipe = manifest.get("recipe", {})  # what these weights were built with (overrides included)

    tower_file = models_home() / VISION_DIR / RECIPE_FILE
    tower = json.loads(tower_file.read_text()) if tower_file.is_file() else {}
    models = {}
    for name in names:
        rec = json.loads((checkpoint_dir(name) / RECIPE_FILE).read_text())
        losses = rec.get("losses", [])
        models[name] = {
            "train_seconds": rec.get("train_seconds"),
            "first_loss": losses[0] if losses else None,
            "last_loss_mean_of_50": round(sum(losses[-50:]) / max(1, len(losses[-50:])), 4),
            "steps": len(losses),
            "weights_sha256": manifest["models"][name]["weights_sha256"],
            "bytes": manifest["models"][name]["bytes"],
        }
    probe = tower.get("probe", {})
    tl = tower.get("losses", [])
    data = {
        "recipe": recipe,
        "built_on": manifest.get("built_on"),
        "tower_probe": probe,
        "tower_loss_first": tl[0] if tl else None,
        "tower_loss_last_mean_of_50": round(sum(tl[-50:]) / max(1, len(tl[-50:])), 4) if tl else None,
        "models": models,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    lines = [
        "# The shipped zoo: how it was built",
        "",
        "Written by `python scripts/build_zoo.py` in the run that built the shipped weights "
        f"(recipe version {recipe.get('version')}; built on {manifest.get('built_on', {}).get('cpu', '?')}, "
        f"torch {manifest.get('built_on', {}).get('torch', '?')}). What the recipe does and why: "
        "[models](models.md); what the weights do on the benchmark: "
        "[the embedded model findings](findings/embedded-model.md).",
        "",
    ]
    if probe:
        lines += [
            "## The vision tower's perception (linear probes on frozen features)",
            "",
            f"{recipe.get('tower_steps')} training steps of batch {recipe.get('tower_batch')}; probes fitted "
            "on 3/4 of held-out perception pictures (a random stream the tower never trained on) and scored on "
            "the rest. Per object from the token of its cell; count, domain, distortion and text from the mean "
            "token; position (which quadrant, single-object pictures) from all tokens. *chance*: the majority "
            "class's share of the scored rows.",
            "",
            "| attribute | accuracy | chance | rows |",
            "|:---|---:|---:|---:|",
        ]
        for k, v in probe["accuracy"].items():
            lines.append(f"| {k} | {v} | {probe['chance'][k]} | {probe['n'][k]} |")
        lines.append("")
    lines += [
        "## Checkpoints",
        "",
        "| model | pretraining steps | seconds | loss first / last 50 | MB | weights sha256 |",
        "|:---|---:|---:|---:|---:|:---|",
    ]
    for name, m in models.items():
        lines.append(
            f"| `{name}` | {m['steps']} | {m['train_seconds']} | {m['first_loss']} / "
            f"{m['last_loss_mean_of_50']} | {m['bytes'] / 1e6:.1f} | `{m['weights_sha256'][:16]}…` |"
        )
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    _say(f"wrote {out.with_suffix('.md')}")


def main(argv: list[str] | None = None) -> None:
    from drake_bench.models.shipped import HUB_PREFIX, publish_models, weights_root
    from drake_bench.models.zoo import tiny_names

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=tiny_names(), help="zoo names (default: every tiny model)")
    ap.add_argument(
        "--root",
        type=Path,
        default=None,
        help="weights folder (default: $DRAKE_BENCH_WEIGHTS or drake_bench/models/weights)",
    )
    ap.add_argument("--dtype", default="bfloat16", help="storage dtype of the exported safetensors")
    ap.add_argument("--workers", type=int, default=1, help="models pretrained in parallel (one thread each)")
    ap.add_argument("--mix", type=int, default=None, help="public-mix generation (experiments; default: the recipe's)")
    ap.add_argument(
        "--report",
        type=lambda v: Path(v) if v else None,
        default=Path(__file__).resolve().parents[1] / "docs" / "zoo-build.md",
        help="where the build report goes (.md and .json); '' for none",
    )
    ap.add_argument("--publish", action="store_true", help="then upload each model folder as a Hub model repo")
    ap.add_argument("--no-dry-run", action="store_true", help="with --publish: really upload (default: print the plan)")
    ap.add_argument("--repo-prefix", default=HUB_PREFIX)
    args = ap.parse_args(argv)
    unknown = sorted(set(args.models) - set(tiny_names()))
    if unknown:
        raise SystemExit(f"not tiny zoo names: {unknown}; known: {tiny_names()}")
    root = args.root or weights_root()
    overrides = {"mix": args.mix} if args.mix is not None else None
    manifest = build(list(args.models), root, args.dtype, args.workers, overrides)
    if args.report:
        write_report(list(args.models), manifest, args.report)
    if args.publish:
        plan = publish_models(args.models, repo_prefix=args.repo_prefix, dry_run=not args.no_dry_run, root=root)
        for item in plan:
            print(
                f"{'published' if args.no_dry_run else 'would publish'} {item['repo_id']}: {len(item['files'])} files, "
                f"{item['bytes'] / 1e6:.1f} MB, weights sha256 {item['weights_sha256']}",
                flush=True,
            )


if __name__ == "__main__":
    main()
