"""Unseen-task generators (DRAKE's 7 fast-adaptation tasks): new task types and familiar formats in new domains.

Formats here appear in no client task: similarity judgement, caption retrieval over five
images, recipe coherence and step order in the dish domain, and edit description and
caption matching in the dark "night" domain.
"""

from __future__ import annotations

import numpy as np

from drake_bench.benchmarks.sample import AnswerType
from drake_bench.benchmarks.synth.registry import Item, generator, image_options
from drake_bench.benchmarks.synth.relation import edit_pair, not_matching, one, two_related
from drake_bench.benchmarks.synth.render import render
from drake_bench.benchmarks.synth.vqa import dish
from drake_bench.benchmarks.synth.world import COLORS, DISHES, SHAPES, STYLES, Obj, Scene, an, other, place, random_obj

MC, OPEN = AnswerType.MULTIPLE_CHOICE, AnswerType.OPEN
COLS = list(COLORS)


@generator(
    "un-similarity",
    "unseen",
    MC,
    "multi",
    (3, 3),
    "Which of two candidates is more similar to a reference (one vs three attributes changed) (DreamSim analogue).",
)
def similarity(rng: np.random.Generator) -> Item:
    ref = random_obj(rng, size="large")
    close = Obj(**ref.__dict__)
    attr = str(rng.choice(["color", "shape", "style"]))
    setattr(close, attr, other(rng, {"color": COLS, "shape": SHAPES, "style": STYLES}[attr], getattr(ref, attr)))
    far = Obj(other(rng, SHAPES, ref.shape), other(rng, COLS, ref.color), "large", style=other(rng, STYLES, ref.style))
    first_close = bool(rng.random() < 0.5)
    cands = [close, far] if first_close else [far, close]
    imgs = [render(one(Obj(**o.__dict__))) for o in [ref] + cands]
    return Item(
        imgs,
        "Which of image 2 and image 3 is more similar to image 1?",
        "image 2" if first_close else "image 3",
        ["image 2", "image 3"],
    )


@generator(
    "un-caption-retrieval",
    "unseen",
    MC,
    "multi",
    (5, 5),
    "Pick which of five images a relational description fits (Image-CoDe analogue).",
)
def caption_retrieval(rng: np.random.Generator) -> Item:
    rel = str(rng.choice(["left of", "above"]))
    inv = {"left of": "right of", "above": "below"}[rel]
    a, b = two_related(rng, rel)
    desc = f"{an(a.color)} {a.shape} {rel} {an(b.color)} {b.shape}"
    scenes = [Scene([a, b])]
    a2, b2 = two_related(rng, inv)  # same objects, inverted relation
    a2.color, a2.shape, b2.color, b2.shape = a.color, a.shape, b.color, b.shape
    scenes.append(Scene([a2, b2]))
    while len(scenes) < 5:
        x, y = two_related(rng, rel)
        if rng.random() < 0.5:
            x.color, x.shape = a.color, a.shape
        # no distractor may fit the description too (checked after the recolouring)
        if (x.color, x.shape, y.color, y.shape) != (a.color, a.shape, b.color, b.shape):
            scenes.append(Scene([x, y]))
    order = rng.permutation(5)
    imgs = [render(scenes[int(i)]) for i in order]
    return Item(imgs, f"Which image shows {desc}?", f"image {int(np.where(order == 0)[0][0]) + 1}", image_options(5))


@generator(
    "un-recipe-coherence",
    "unseen",
    MC,
    "multi",
    (4, 4),
    "Three plates are the same recipe, one is not: which? (RecipeQA image coherence analogue, dish domain)",
)
def recipe_coherence(rng: np.random.Generator) -> Item:
    name, _ = dish(rng)
    other_name = other(rng, sorted(DISHES.values()), name)
    scenes = [dish(rng, other_name)[1]] + [dish(rng, name)[1] for _ in range(3)]
    order = rng.permutation(4)
    imgs = [render(scenes[int(i)]) for i in order]
    return Item(
        imgs,
        "Which plate is not from the same recipe as the others?",
        f"image {int(np.where(order == 0)[0][0]) + 1}",
        image_options(4),
    )


@generator(
    "un-recipe-order",
    "unseen",
    MC,
    "multi",
    (3, 3),
    "Recipe steps add one ingredient each; which shuffled image is the first step? (RecipeQA visual cloze / frame ordering analogue)",
)
def recipe_order(rng: np.random.Generator) -> Item:
    name, _ = dish(rng)
    steps = [dish(rng, name, k=k)[1] for k in (1, 2, 3)]
    order = rng.permutation(3)
    imgs = [render(steps[int(i)]) for i in order]
    return Item(
        imgs,
        "These are steps of one recipe, shuffled. Which image is the first step?",
        f"image {int(np.where(order == 0)[0][0]) + 1}",
        image_options(3),
    )


@generator(
    "un-edit-night",
    "unseen",
    OPEN,
    "multi",
    (2, 2),
    "Name the edit between two images in the dark 'night' domain (HQ-Edit analogue: familiar format, new domain).",
)
def edit_night(rng: np.random.Generator) -> Item:
    return edit_pair(rng, "night")


def contrast_caption(rng: np.random.Generator, domain: str) -> Item:
    a = random_obj(rng, size="large")
    b = not_matching(rng, a.color, a.shape)
    b.size = "small"
    objs = place(rng, [a, b])
    caption = f"{an(a.color)} {a.shape} and {an(b.color)} {b.shape}"
    swap = [Obj(**a.__dict__), Obj(**b.__dict__)]
    swap[0].color, swap[1].color = b.color, a.color
    if swap[0].color == a.color:  # same colours: change a shape instead
        swap[0].shape = other(rng, SHAPES, a.shape, b.shape)
    alt = [Obj(**a.__dict__), Obj(**b.__dict__)]
    alt[1].shape = other(rng, SHAPES, b.shape, a.shape)
    scenes = [Scene(objs, domain), Scene(swap, domain), Scene(alt, domain)]
    order = rng.permutation(3)
    imgs = [render(scenes[int(i)]) for i in order]
    return Item(
        imgs,
        f"Which image matches the caption '{caption}'?",
        f"image {int(np.where(order == 0)[0][0]) + 1}",
        image_options(3),
    )


@generator(
    "un-contrast-caption",
    "unseen",
    MC,
    "multi",
    (3, 3),
    "Match a caption against contrastive distractors (swapped colours, changed shape) (Mantis contrast-caption, familiar images).",
)
def contrast_plain(rng: np.random.Generator) -> Item:
    return contrast_caption(rng, "plain")


@generator(
    "un-contrast-caption-night",
    "unseen",
    MC,
    "multi",
    (3, 3),
    "Contrastive caption matching in the unseen dark 'night' domain (Mantis contrast-caption, new images).",
)
def contrast_night(rng: np.random.Generator) -> Item:
    return contrast_caption(rng, "night")
