#!/usr/bin/env python
"""Seed a models home with the shipped zoo's shared stages, for pretraining experiments on the language stage only
(not a test; not how the shipped zoo is built).

``scripts/build_zoo.py`` trains the shared tokenizer and vision tower before any language model. An experiment that
changes only the language stage (a public-mix generation, ``--mix``) need not retrain them: this writes the shipped
``tiny-llava-llama-m``'s tokenizer and vision tower into ``<home>/_tokenizer`` and ``<home>/_vision`` with the cache
records the recipe's own build would write, so ``DRAKE_BENCH_MODELS=<home> python scripts/build_zoo.py --mix N
--models ...`` pretrains only the language models. The tower comes from the shipped bf16 weights, so it is the
recipe's tower rounded to bf16 (what every shipped model holds), not its float32 original.

    python scripts/seed_zoo_cache.py /tmp/mix3-home --mix 3
    DRAKE_BENCH_MODELS=/tmp/mix3-home python scripts/build_zoo.py --mix 3 --models tiny-llava-llama-m \\
        --root /tmp/mix3-weights --report ''
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("home", type=Path, help="the models home to seed (DRAKE_BENCH_MODELS of the experiment)")
    ap.add_argument("--mix", type=int, default=None, help="the public-mix generation the experiment will build with")
    args = ap.parse_args(argv)

    import torch

    from drake_bench.models import load_base
    from drake_bench.models.cache import RECIPE_FILE, TOKENIZER_DIR, VISION_DIR
    from drake_bench.models.pretrain import DEFAULT_RECIPE
    from drake_bench.models.vision import _record as tower_record

    recipe = DEFAULT_RECIPE if args.mix is None else dataclasses.replace(DEFAULT_RECIPE, mix=args.mix)
    model, processor = load_base("tiny-llava-llama-m")
    tower = args.home / VISION_DIR
    tower.mkdir(parents=True, exist_ok=True)
    model.model.vision_tower.to(torch.float32).save_pretrained(tower)
    (tower / RECIPE_FILE).write_text(
        json.dumps({**tower_record(recipe), "seeded_from": "shipped tiny-llava-llama-m"}, indent=1)
    )
    tok = args.home / TOKENIZER_DIR
    processor.tokenizer.save_pretrained(tok)
    (tok / RECIPE_FILE).write_text(
        json.dumps(
            {"vocab_size": recipe.vocab_size, "version": recipe.version, "seeded_from": "shipped tiny-llava-llama-m"},
            indent=1,
        )
    )
    print(f"seeded {tower} and {tok} (recipe {recipe.version}, mix {recipe.mix})")


if __name__ == "__main__":
    main()
