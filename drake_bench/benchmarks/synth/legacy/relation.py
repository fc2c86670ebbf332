"""Superseded visual-relation generators, kept only so archived drake-synth versions rebuild byte for byte.

Archived manifests (drake-synth 1.3.0 to 1.6.0) still name these tasks; no current manifest does (the
current relation tasks are in :mod:`drake_bench.benchmarks.synth.relation`). Result files cite the data hashes these
bodies produce, so they are frozen: never edit one.
"""

from __future__ import annotations

import numpy as np

from drake_bench.benchmarks.sample import AnswerType
from drake_bench.benchmarks.synth.registry import YES_NO, Item, generator, yn
from drake_bench.benchmarks.synth.relation import quantified
from drake_bench.benchmarks.synth.render import render
from drake_bench.benchmarks.synth.world import COLORS, Scene, an, place, random_obj

YN = AnswerType.YES_NO
COLS = list(COLORS)


@generator(
    "rel-same-count",
    "relation",
    YN,
    "multi",
    (2, 2),
    "Do two images hold the same number of objects? (VISION 2-image inspection analogue)",
)
def same_count(rng: np.random.Generator) -> Item:
    same = bool(rng.random() < 0.5)
    a = int(rng.integers(1, 5))
    b = a if same else int(rng.choice([n for n in range(1, 5) if n != a]))
    imgs = [render(Scene(place(rng, [random_obj(rng, size="small") for _ in range(n)]))) for n in (a, b)]
    return Item(imgs, "Do the two images contain the same number of objects?", yn(same), list(YES_NO))


@generator(
    "rel-statement-color",
    "relation",
    YN,
    "multi",
    (2, 2),
    "Is a statement about colours in two images true ('both' / 'exactly one')? (NLVR2 subset 2 analogue)",
)
def statement_color(rng: np.random.Generator) -> Item:
    color = str(rng.choice(COLS))
    quant, truth, has = quantified(rng)
    imgs = []
    for i in range(2):
        objs = [random_obj(rng, color=color, size="small")] if i in has else []
        objs += [
            random_obj(rng, colors=[c for c in COLS if c != color], size="small")
            for _ in range(int(rng.integers(1, 3)))
        ]
        imgs.append(render(Scene(place(rng, objs))))
    return Item(imgs, f"True or false: {quant} {an(color)} object.", yn(truth), list(YES_NO))
