"""Superseded multi-modal reasoning generators, kept only so archived drake-synth versions rebuild byte for byte.

Each function is the implementation an archived manifest's ``generator_version`` selects (see
:mod:`drake_bench.benchmarks.synth.registry`); the current ones live in :mod:`drake_bench.benchmarks.synth.reasoning`.
Result files cite the data hashes these bodies produce, so they are frozen: never edit one. Why
each was replaced is in docs/findings/synth-generator-history.md.
"""

from __future__ import annotations

import numpy as np

from drake_bench.benchmarks.sample import AnswerType
from drake_bench.benchmarks.synth.reasoning import (
    bongard,
    common,
    common_figure,
    in_state,
    near_misses,
    pick_among,
    state_odd_out,
)
from drake_bench.benchmarks.synth.registry import YES_NO, Item, generator, image_options, yn
from drake_bench.benchmarks.synth.relation import consistent, one
from drake_bench.benchmarks.synth.render import render
from drake_bench.benchmarks.synth.world import COLORS, SHAPES, STATES, Obj, Scene, an, other, place, random_obj

MC, YN, OPEN = AnswerType.MULTIPLE_CHOICE, AnswerType.YES_NO, AnswerType.OPEN
COLS = list(COLORS)


@generator(
    "rsn-find-image",
    "reasoning",
    MC,
    "multi",
    (3, 3),
    "Which of three images contains a named coloured shape? (VizWiz multi-image analogue)",
)
def find_image(rng: np.random.Generator) -> Item:
    c, s = str(rng.choice(COLS)), str(rng.choice(SHAPES))
    imgs, ans = pick_among(rng, Obj(s, c), near_misses(rng, c, s, 2))
    return Item(imgs, f"Which image contains {an(c + ' ' + s)}?", ans, image_options(3))


@generator(
    "rsn-state-coherence",
    "reasoning",
    YN,
    "multi",
    (4, 4),
    "Are the objects of four images all in the same state (size)? (MIT-States StateCoherence analogue)",
)
def state_coherence(rng: np.random.Generator) -> Item:
    same = bool(rng.random() < 0.5)
    z = str(rng.choice(["small", "large"]))
    sizes = [z] * 4
    if not same:
        for i in rng.permutation(4)[: int(rng.integers(1, 3))]:
            sizes[int(i)] = "large" if z == "small" else "small"
    imgs = [render(one(random_obj(rng, size=zz))) for zz in sizes]
    return Item(imgs, "Are all the objects the same size?", yn(same), list(YES_NO))


@generator(
    "rsn-state-coherence",
    "reasoning",
    YN,
    "multi",
    (4, 4),
    "Are the objects of four images all in the same state (calm, shining or shaking, drawn as comic emanata)? "
    "(MIT-States StateCoherence analogue)",
    version=7,
)
def state_coherence_emanata(rng: np.random.Generator) -> Item:
    same, states, _ = consistent(rng, STATES, 4)
    imgs = [render(one(in_state(rng, st, size="small"))) for st in states]
    return Item(imgs, "Are all the objects in the same state?", yn(same), list(YES_NO))


@generator(
    "rsn-bongard-concept",
    "reasoning",
    YN,
    "multi",
    (5, 5),
    "Bongard set whose rule is 'contains a <colour> object'; does the query follow it? (Bongard-OpenWorld analogue)",
)
def bongard_concept(rng: np.random.Generator) -> Item:
    color = str(rng.choice(COLS))
    rest = [c for c in COLS if c != color]

    def pos() -> Scene:
        objs = [random_obj(rng, color=color, size="small")] + [
            random_obj(rng, colors=rest, size="small") for _ in range(int(rng.integers(0, 2)))
        ]
        return Scene(place(rng, [objs[int(i)] for i in rng.permutation(len(objs))]))

    def neg() -> Scene:
        return Scene(place(rng, [random_obj(rng, colors=rest, size="small") for _ in range(int(rng.integers(1, 3)))]))

    return bongard(rng, None, pos, neg)


@generator(
    "rsn-bongard-concept",
    "reasoning",
    YN,
    "multi",
    (5, 5),
    "Bongard set whose rule is 'contains a <shining|shaking> object' (object states drawn as comic emanata); "
    "does the query follow it? (Bongard-OpenWorld analogue)",
    version=7,
)
def bongard_state(rng: np.random.Generator) -> Item:
    state = str(rng.choice(STATES[1:]))
    rest = [s for s in STATES if s != state]

    def pos() -> Scene:
        objs = [in_state(rng, state, "small")] + [
            in_state(rng, str(rng.choice(rest)), "small") for _ in range(int(rng.integers(0, 2)))
        ]
        return Scene(place(rng, [objs[int(i)] for i in rng.permutation(len(objs))], margin=9, pad=8))

    def neg() -> Scene:
        return Scene(
            place(
                rng,
                [in_state(rng, str(rng.choice(rest)), "small") for _ in range(int(rng.integers(1, 3)))],
                margin=9,
                pad=8,
            )
        )

    return bongard(rng, None, pos, neg)


@generator(
    "rsn-common-color",
    "reasoning",
    OPEN,
    "multi",
    (3, 3),
    "Name the colour shared by all images of a concept set (Bongard-OpenWorld concept query analogue).",
)
def common_color(rng: np.random.Generator) -> Item:
    return common(rng, "color")


@generator(
    "rsn-common-shape",
    "reasoning",
    OPEN,
    "multi",
    (3, 3),
    "Name the shape shared by all images of a concept set (Bongard-HOI concept query analogue).",
)
def common_shape(rng: np.random.Generator) -> Item:
    return common(rng, "shape")


@generator(
    "rsn-common-shape",
    "reasoning",
    OPEN,
    "multi",
    (3, 3),
    "Name the shape shared by all images of a concept set by its figure word ('wheel' for circle; Bongard-HOI "
    "concept query analogue).",
    version=4,
)
def common_shape_figure(rng: np.random.Generator) -> Item:
    return common_figure(rng, "shape")


@generator(
    "rsn-odd-one-out",
    "reasoning",
    MC,
    "multi",
    (4, 4),
    "Three images share a shape, one does not: which? (Bongard-HOI action incoherence analogue)",
)
def odd_one_out(rng: np.random.Generator) -> Item:
    s = str(rng.choice(SHAPES))
    odd = Obj(other(rng, SHAPES, s), str(rng.choice(COLS)))
    same = [Obj(s, str(rng.choice(COLS))) for _ in range(3)]
    imgs, ans = pick_among(rng, odd, same)
    return Item(imgs, "Which image does not fit with the others?", ans, image_options(4))


@generator(
    "rsn-odd-one-out",
    "reasoning",
    MC,
    "multi",
    (4, 4),
    "Three objects are in one state (calm, shining or shaking, drawn as comic emanata), one is not: which? "
    "(Bongard-HOI action incoherence analogue)",
    version=7,
)
def odd_state_out(rng: np.random.Generator) -> Item:
    z = str(rng.choice(STATES))
    return state_odd_out(rng, other(rng, STATES, z), z)
