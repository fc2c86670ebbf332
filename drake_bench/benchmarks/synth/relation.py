"""Visual-relation generators (DRAKE clients 1, 5, 6): mostly multi-image comparisons.

Every yes/no label and every option position is drawn first and the scene is built to
match it, so question text alone carries no information about the answer.

The group's own skill is defect inspection: every relation client has a task that asks about cracks
(rel-defect-2 on client 1, rel-defect-4 on 5, rel-statement-defect on 6), and no other group's task draws
one, as image quality is the VQA clients' own skill. A skill only the group teaches is what lets its
clients gain more from each other than from other groups; counting and colours, which every group
teaches, would not. Generators that only archived benchmark versions draw are in
:mod:`drake_bench.benchmarks.synth.legacy`.
"""

from __future__ import annotations

import numpy as np

from drake_bench.benchmarks.sample import AnswerType
from drake_bench.benchmarks.synth.registry import YES_NO, Item, generator, yn
from drake_bench.benchmarks.synth.render import render
from drake_bench.benchmarks.synth.world import (
    COLORS,
    DIRECTIONS,
    SHAPES,
    STYLES,
    Obj,
    Scene,
    an,
    other,
    place,
    plural,
    random_obj,
)

MC, YN, OPEN = AnswerType.MULTIPLE_CHOICE, AnswerType.YES_NO, AnswerType.OPEN
COLS = list(COLORS)


def one(o: Obj, domain: str = "plain") -> Scene:
    o.x, o.y = 32, 32
    return Scene(objects=[o], domain=domain)


def not_matching(rng: np.random.Generator, color: str, shape: str) -> Obj:
    """An object that is not a ``color`` ``shape`` (may share one attribute)."""
    while True:
        o = random_obj(rng)
        if (o.color, o.shape) != (color, shape):
            return o


@generator(
    "rel-count-across",
    "relation",
    MC,
    "multi",
    (5, 5),
    "Count how many of five images contain a given coloured shape (Fashion200K cloth-counting analogue).",
)
def count_across(rng: np.random.Generator) -> Item:
    color, shape = str(rng.choice(COLS)), str(rng.choice(SHAPES))
    k = int(rng.integers(0, 6))
    has = set(rng.permutation(5)[:k].tolist())
    images = []
    for i in range(5):
        objs = [Obj(shape, color)] if i in has else []
        objs += [not_matching(rng, color, shape) for _ in range(int(rng.integers(0 if i in has else 1, 2)))]
        images.append(render(Scene(objects=place(rng, objs))))
    return Item(images, f"How many images contain {an(color + ' ' + shape)}?", str(k), [str(i) for i in range(6)])


def edit_pair(rng: np.random.Generator, domain: str) -> Item:
    """Source and edited image; the answer is the edit instruction (MagicBrush analogue)."""
    objs = place(rng, [random_obj(rng, size="large") for _ in range(int(rng.integers(1, 3)))])
    before = [Obj(**o.__dict__) for o in objs]
    kind = int(rng.integers(0, 3))
    after = [Obj(**o.__dict__) for o in objs]
    if kind == 0:
        new = place(rng, [random_obj(rng, size="small")], fixed=after)[0]
        after = after + [new]
        ans = f"add {new.color} {new.shape}"
    elif kind == 1 and len(after) > 1:
        gone = after.pop(int(rng.integers(0, len(after))))
        ans = f"remove {gone.color} {gone.shape}"
    else:
        t = after[int(rng.integers(0, len(after)))]
        t.color = other(rng, COLS, t.color)
        ans = f"make {t.shape} {t.color}"
    imgs = [render(Scene(before, domain)), render(Scene(after, domain))]
    return Item(imgs, "What edit turns the first image into the second?", ans, meta={"edit": ans.split()[0]})


@generator(
    "rel-relative-caption",
    "relation",
    OPEN,
    "multi",
    (2, 2),
    "Say how the target differs from the reference: 'make it <colour|shape>' (FashionIQ analogue).",
)
def relative_caption(rng: np.random.Generator) -> Item:
    o = random_obj(rng, size="large")
    t = Obj(**o.__dict__)
    if rng.random() < 0.5:
        t.color = other(rng, COLS, o.color)
        ans = f"make it {t.color}"
    else:
        t.shape = other(rng, SHAPES, o.shape)
        ans = f"make it {t.shape}"
    return Item([render(one(o)), render(one(t))], "How should the first item change to look like the second?", ans)


@generator(
    "rel-edit-instruction",
    "relation",
    OPEN,
    "multi",
    (2, 2),
    "Name the edit (add / remove / recolour) between a source and an edited image (MagicBrush analogue).",
)
def edit_instruction(rng: np.random.Generator) -> Item:
    return edit_pair(rng, "plain")


def consistent(rng: np.random.Generator, values: list[str], n: int) -> tuple[bool, list[str], str]:
    """``n`` values of one attribute, all the same with probability 1/2 (drawn first), else one or two changed; and
    the value they were changed from (uniform and independent of the answer, so a question may name it)."""
    same = bool(rng.random() < 0.5)
    v = str(rng.choice(values))
    out = [v] * n
    if not same:
        for i in rng.permutation(n)[: int(rng.integers(1, 3))]:
            out[int(i)] = other(rng, values, v)
    return same, out, v


@generator(
    "rel-color-consistency",
    "relation",
    YN,
    "multi",
    (4, 4),
    "Do the objects in four images all have the same colour? (Fashion200K ColorConsistency analogue)",
)
def color_consistency(rng: np.random.Generator) -> Item:
    same, cols, _ = consistent(rng, COLS, 4)
    imgs = [render(one(random_obj(rng, color=col, size="large"))) for col in cols]
    return Item(imgs, "Do all four objects have the same colour?", yn(same), list(YES_NO))


@generator(
    "rel-statement-count",
    "relation",
    YN,
    "multi",
    (2, 2),
    "Is a statement comparing shape counts across two images true? (NLVR2 subset 1 analogue)",
)
def statement_count(rng: np.random.Generator) -> Item:
    shape = str(rng.choice(SHAPES))
    truth = bool(rng.random() < 0.5)
    a, b = sorted(rng.choice(4, size=2, replace=False).tolist(), reverse=truth)
    imgs = []
    for n in (a, b):
        objs = [random_obj(rng, shape=shape, size="small") for _ in range(n)]
        objs += [
            random_obj(rng, shapes=[s for s in SHAPES if s != shape], size="small")
            for _ in range(int(rng.integers(0, 2)))
        ]
        imgs.append(render(Scene(place(rng, objs))))
    q = f"True or false: the left image has more {plural(shape)} than the right image."
    return Item(imgs, q, yn(truth), list(YES_NO))


@generator(
    "rel-defect-4",
    "relation",
    YN,
    "multi",
    (4, 4),
    "Does any of four objects carry a crack? (VISION 4-image defect inspection analogue)",
)
def defect4(rng: np.random.Generator) -> Item:
    return inspection(rng, 4, "Is any of the objects cracked?")


def inspection(rng: np.random.Generator, n: int, question: str) -> Item:
    """``n`` images of one large object each; with probability 1/2 one of them is cracked (VISION analogues)."""
    flag = bool(rng.random() < 0.5)
    bad = int(rng.integers(0, n))
    imgs = []
    for i in range(n):
        o = random_obj(rng, size="large")
        o.cracked = flag and i == bad
        imgs.append(render(one(o)))
    return Item(imgs, question, yn(flag), list(YES_NO))


@generator(
    "rel-defect-2",
    "relation",
    YN,
    "multi",
    (2, 2),
    "Is either of two objects cracked? (VISION 2-image defect inspection analogue)",
    version=7,
)
def defect2(rng: np.random.Generator) -> Item:
    return inspection(rng, 2, "Is either of the two objects cracked?")


@generator(
    "rel-statement-defect",
    "relation",
    YN,
    "multi",
    (2, 2),
    "Is a statement about cracked objects in two images true ('both' / 'exactly one')? (NLVR2 subset 2 analogue)",
    version=7,
)
def statement_defect(rng: np.random.Generator) -> Item:
    quant, truth, has = quantified(rng)
    imgs = []
    for i in range(2):
        objs = [random_obj(rng, size="large") for _ in range(int(rng.integers(1, 3)))]
        if i in has:
            objs[int(rng.integers(0, len(objs)))].cracked = True
        imgs.append(render(Scene(place(rng, objs))))
    return Item(imgs, f"True or false: {quant} a cracked object.", yn(truth), list(YES_NO))


RELS = {"left of": (0, -1), "right of": (0, 1), "above": (1, -1), "below": (1, 1)}
OPPOSITE = {"left of": "right of", "right of": "left of", "above": "below", "below": "above"}


def two_related(rng: np.random.Generator, rel: str) -> tuple[Obj, Obj]:
    """Two distinct objects with ``a rel b`` true and a clear margin along the relation's axis."""
    a = random_obj(rng, size="small")
    b = not_matching(rng, a.color, a.shape)
    b.size = "small"
    axis, sign = RELS[rel]
    lo, hi = int(rng.integers(10, 22)), int(rng.integers(42, 55))
    pa, pb = (lo, hi) if sign < 0 else (hi, lo)
    cross_a, cross_b = int(rng.integers(12, 53)), int(rng.integers(12, 53))
    if axis == 0:
        a.x, a.y, b.x, b.y = pa, cross_a, pb, cross_b
    else:
        a.x, a.y, b.x, b.y = cross_a, pa, cross_b, pb
    return a, b


@generator(
    "rel-spatial",
    "relation",
    YN,
    "single",
    (1, 1),
    "Is one object left of / right of / above / below another? (VSR analogue)",
)
def spatial(rng: np.random.Generator) -> Item:
    rel = str(rng.choice(list(RELS)))
    truth = bool(rng.random() < 0.5)
    a, b = two_related(rng, rel if truth else OPPOSITE[rel])
    q = f"Is the {a.color} {a.shape} {rel} the {b.color} {b.shape}?"
    return Item([render(Scene([a, b]))], q, yn(truth), list(YES_NO))


@generator(
    "rel-style-consistency",
    "relation",
    YN,
    "multi",
    (2, 3),
    "Do objects in 2-3 images share one drawing style (filled, outlined, striped)? (StyleConsistency analogue)",
)
def style_consistency(rng: np.random.Generator) -> Item:
    n = int(rng.integers(2, 4))
    same = bool(rng.random() < 0.5)
    st = str(rng.choice(STYLES))
    styles = [st] * n
    if not same:
        styles[int(rng.integers(0, n))] = other(rng, STYLES, st)
    imgs = [render(one(random_obj(rng, size="large", style=s))) for s in styles]
    return Item(imgs, "Are these objects drawn in the same style?", yn(same), list(YES_NO))


def quantified(rng: np.random.Generator) -> tuple[str, bool, set[int]]:
    """An NLVR2-style quantifier over two images, its truth (drawn first) and which images must hold the property."""
    quant = str(rng.choice(["both images contain", "exactly one image contains"]))
    truth = bool(rng.random() < 0.5)
    n_with = (
        (2 if truth else int(rng.integers(0, 2)))
        if quant.startswith("both")
        else (1 if truth else int(rng.choice([0, 2])))
    )
    return quant, truth, set(rng.permutation(2)[:n_with].tolist())


@generator(
    "rel-composed-retrieval",
    "relation",
    MC,
    "multi",
    (4, 4),
    "Given a reference and a modification, pick the matching candidate image (CIRR analogue).",
)
def composed_retrieval(rng: np.random.Generator) -> Item:
    ref = random_obj(rng, size="large")
    new = other(rng, COLS, ref.color)
    target = Obj(ref.shape, new)
    d1 = Obj(other(rng, SHAPES, ref.shape), new)
    d2 = Obj(ref.shape, other(rng, COLS, ref.color, new))
    cands = [target, d1, d2]
    order = rng.permutation(3)
    imgs = [render(one(ref))] + [render(one(cands[int(i)])) for i in order]
    ans = f"image {int(np.where(order == 0)[0][0]) + 2}"
    q = f"Image 1 is the reference. Which other image shows the same item but {new}?"
    return Item(imgs, q, ans, ["image 2", "image 3", "image 4"])


@generator(
    "rel-motion",
    "relation",
    MC,
    "multi",
    (3, 3),
    "Direction of motion of a shape across three frames (SEED-Bench-2 TemporalQA analogue).",
)
def motion(rng: np.random.Generator) -> Item:
    d = str(rng.choice(DIRECTIONS))
    o = random_obj(rng, size="small")
    dx, dy = {"left": (-1, 0), "right": (1, 0), "up": (0, -1), "down": (0, 1)}[d]
    start = (32 - 18 * dx + int(rng.integers(-6, 7)) * (dx == 0), 32 - 18 * dy + int(rng.integers(-6, 7)) * (dy == 0))
    imgs = []
    for t in range(3):
        f = Obj(**o.__dict__)
        f.x, f.y = start[0] + 18 * dx * t, start[1] + 18 * dy * t
        imgs.append(render(Scene([f])))
    return Item(imgs, f"The images are frames in order. Which way does the {o.shape} move?", d, list(DIRECTIONS))
