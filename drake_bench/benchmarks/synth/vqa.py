"""VQA generators (DRAKE clients 2, 3, 4, 10): image quality, general VQA, icon domain, dish domain.

Each VQA client holds one task of each split (quality -> general -> icon -> dish), as
in DRAKE; the icon and dish splits use their own visual domains ("paper", "table").
"""

from __future__ import annotations

from functools import partial

import numpy as np

from drake_bench.benchmarks.sample import AnswerType
from drake_bench.benchmarks.synth.registry import YES_NO, Item, generator, image_options, mc, yn
from drake_bench.benchmarks.synth.relation import one
from drake_bench.benchmarks.synth.render import render, render_bars, render_clock
from drake_bench.benchmarks.synth.world import (
    COLORS,
    CORNERS,
    DISH_ORIGIN,
    DISHES,
    DISTORTIONS,
    PLACES,
    SHAPES,
    Obj,
    Scene,
    other,
    place,
    plural,
    random_obj,
)

MC, YN, OPEN = AnswerType.MULTIPLE_CHOICE, AnswerType.YES_NO, AnswerType.OPEN
COLS = list(COLORS)
QUALITY_Q = {
    "blur": ("Which image is sharper?", "Is this image blurry?"),
    "noise": ("Which image is less noisy?", "Is this image noisy?"),
    "darkness": ("Which image is brighter?", "Is this image too dark?"),
    "glare": ("Which image is less washed out?", "Is this image too bright?"),
}


def scene(rng: np.random.Generator, n: tuple[int, int] = (1, 3)) -> Scene:
    return Scene(place(rng, [random_obj(rng) for _ in range(int(rng.integers(n[0], n[1] + 1)))]))


def with_distortion(sc: Scene, d: str | None, grain: int = 1) -> Scene:
    return Scene(sc.objects, sc.domain, d, sc.text, grain=grain)


# The four image-quality tasks draw their noise as monochrome (luma) grain on 2x2 cells: as visible as independent
# colour noise per pixel, and the images compress to about a fifth of the size. The bodies take the noise cell side
# (``grain``) as a parameter, so the superseded per-pixel variant registers from the same bodies (synth.legacy.vqa).
PAIR = "Compare the quality of two renderings of one scene (Co-Instruct 2-image compare analogue)."
TYPE = "Name the distortion of one image: blur, noise, darkness or glare (Co-Instruct how/what analogue)."
TRIPLE = "Pick the best-quality image of three renderings (Co-Instruct 3-image compare analogue)."
YESNO = "Does one image have a named distortion? (Co-Instruct yes/no analogue)"


def quality_pair(rng: np.random.Generator, grain: int = 1) -> Item:
    d = str(rng.choice(DISTORTIONS))
    sc = scene(rng)
    clean = int(rng.integers(0, 2))
    imgs = [render(with_distortion(sc, None if i == clean else d, grain)) for i in range(2)]
    return Item(imgs, QUALITY_Q[d][0], f"image {clean + 1}", image_options(2))


def distortion_type(rng: np.random.Generator, grain: int = 1) -> Item:
    d = str(rng.choice(DISTORTIONS))
    return Item(
        [render(with_distortion(scene(rng), d, grain))],
        "What is wrong with the quality of this image?",
        d,
        list(DISTORTIONS),
    )


def quality_triple(rng: np.random.Generator, grain: int = 1) -> Item:
    sc = scene(rng)
    clean = int(rng.integers(0, 3))
    ds = rng.choice(DISTORTIONS, size=2, replace=False).tolist()
    imgs, k = [], 0
    for i in range(3):
        if i == clean:
            imgs.append(render(sc))
        else:
            imgs.append(render(with_distortion(sc, ds[k], grain)))
            k += 1
    return Item(imgs, "Which image has the best quality?", f"image {clean + 1}", image_options(3))


def quality_yesno(rng: np.random.Generator, grain: int = 1) -> Item:
    d = str(rng.choice(DISTORTIONS))
    truth = bool(rng.random() < 0.5)
    actual = d if truth else (None if rng.random() < 0.5 else other(rng, DISTORTIONS, d))
    return Item([render(with_distortion(scene(rng), actual, grain))], QUALITY_Q[d][1], yn(truth), list(YES_NO))


QUALITY_TASKS = [
    ("vqa-quality-pair", MC, "multi", (2, 2), PAIR, quality_pair),
    ("vqa-distortion-type", MC, "single", (1, 1), TYPE, distortion_type),
    ("vqa-quality-triple", MC, "multi", (3, 3), TRIPLE, quality_triple),
    ("vqa-quality-yesno", YN, "single", (1, 1), YESNO, quality_yesno),
]


def register_quality(version: int, grain: int, note: str) -> None:
    """Register the four image-quality tasks as generator ``version``, drawing noise on ``grain`` x ``grain`` cells."""
    for name, kind, images, n, text, body in QUALITY_TASKS:
        generator(name, "vqa", kind, images, n, text + note, version=version)(partial(body, grain=grain))


register_quality(5, 2, " Noise is monochrome grain on 2x2 cells.")


@generator(
    "vqa-corners",
    "vqa",
    MC,
    "single",
    (1, 1),
    "How many corners the shown shape has: recognise it, then recall a fact about it (SEED-Bench-2 knowledge QA analogue).",
)
def corners(rng: np.random.Generator) -> Item:
    s = str(rng.choice(SHAPES))
    ans = str(CORNERS[s])
    opts = mc(rng, ans, sorted({str(v) for v in CORNERS.values()}), 4)
    return Item(
        [render(one(random_obj(rng, shape=s, size="large")))], "How many corners does this shape have?", ans, opts
    )


@generator(
    "vqa-bar-chart",
    "vqa",
    OPEN,
    "single",
    (1, 1),
    "Read a bar chart: tallest bar, a bar's height, or a comparison (DVQA analogue).",
)
def bar_chart(rng: np.random.Generator) -> Item:
    n = int(rng.integers(3, 5))
    cols = rng.choice(COLS, size=n, replace=False).tolist()
    heights = rng.choice(np.arange(1, 6), size=n, replace=False).tolist()
    values = dict(zip(cols, [int(h) for h in heights]))
    kind = int(rng.integers(0, 3))
    if kind == 0:
        q, a = "Which bar is the tallest?", max(values, key=values.get)
    elif kind == 1:
        c = str(rng.choice(cols))
        q, a = f"How tall is the {c} bar?", str(values[c])
    else:
        c1, c2 = rng.choice(cols, size=2, replace=False).tolist()
        q, a = f"Is the {c1} bar taller than the {c2} bar?", yn(values[c1] > values[c2])
    return Item([render_bars(values)], q, a, meta={"kind": kind})


@generator(
    "vqa-instance-count",
    "vqa",
    MC,
    "single",
    (1, 1),
    "Count the objects of one colour in a scene (SEED-Bench-2 instance QA analogue).",
)
def instance_count(rng: np.random.Generator) -> Item:
    color = str(rng.choice(COLS))
    k = int(rng.integers(0, 4))
    rest = [c for c in COLS if c != color]
    objs = [random_obj(rng, color=color, size="small") for _ in range(k)]
    objs += [random_obj(rng, colors=rest, size="small") for _ in range(int(rng.integers(1 if k == 0 else 0, 3)))]
    objs = [objs[int(i)] for i in rng.permutation(len(objs))]
    img = render(Scene(place(rng, objs)))
    return Item([img], f"How many {color} objects are there?", str(k), ["0", "1", "2", "3"])


@generator(
    "vqa-size-compare",
    "vqa",
    MC,
    "single",
    (1, 1),
    "Which of two objects is larger, as an option or a true/false statement (TQA diagram analogue).",
)
def size_compare(rng: np.random.Generator) -> Item:
    a = random_obj(rng, size="large")
    b = random_obj(rng, size="small")
    while (b.color, b.shape) == (a.color, a.shape):
        b = random_obj(rng, size="small")
    objs = place(rng, [a, b] if rng.random() < 0.5 else [b, a])
    big, small = (a, b) if a.size == "large" else (b, a)
    if big.size == small.size:  # placement shrank the large one: fall back to a sure layout
        big.size, big.x, big.y, small.x, small.y = "large", 18, 32, 50, 32
    img = render(Scene(objs))
    if rng.random() < 0.5:
        opts = [f"the {o.color} {o.shape}" for o in (a, b)]
        return Item(
            [img], "Which object is larger?", f"the {big.color} {big.shape}", [opts[int(i)] for i in rng.permutation(2)]
        )
    x, y = (big, small) if rng.random() < 0.5 else (small, big)
    q = f"True or false: the {x.color} {x.shape} is larger than the {y.color} {y.shape}."
    return Item([img], q, "true" if x is big else "false", ["true", "false"])


# -- icon domain (IconQA analogue) --------------------------------------------------
def icons(rng: np.random.Generator, shape: str, k: int, distractors: int = 0) -> Scene:
    color = str(rng.choice(COLS))
    objs = [Obj(shape, color, size="small") for _ in range(k)]
    objs += [Obj(other(rng, SHAPES, shape), str(rng.choice(COLS)), size="small") for _ in range(distractors)]
    return Scene(place(rng, [objs[int(i)] for i in rng.permutation(len(objs))]), domain="paper")


@generator(
    "icon-count-easy",
    "vqa",
    OPEN,
    "single",
    (1, 1),
    "Count identical icons, 1-5 (IconQA short answer, kindergarten analogue).",
)
def icon_count_easy(rng: np.random.Generator) -> Item:
    s, k = str(rng.choice(SHAPES)), int(rng.integers(1, 6))
    return Item([render(icons(rng, s, k))], f"How many {plural(s)} are there?", str(k))


@generator(
    "icon-count-hard",
    "vqa",
    OPEN,
    "single",
    (1, 1),
    "Count one kind of icon among other icons (IconQA short answer, grade-1 analogue).",
)
def icon_count_hard(rng: np.random.Generator) -> Item:
    s, k = str(rng.choice(SHAPES)), int(rng.integers(1, 5))
    return Item([render(icons(rng, s, k, int(rng.integers(1, 3))))], f"How many {plural(s)} are there?", str(k))


@generator(
    "icon-shape-mc",
    "vqa",
    MC,
    "single",
    (1, 1),
    "Name the icon shown, choosing from four names (IconQA multi-choice, easy analogue).",
)
def icon_shape(rng: np.random.Generator) -> Item:
    s = str(rng.choice(SHAPES))
    sc = Scene([Obj(s, str(rng.choice(COLS)), size="large", x=32, y=32)], domain="paper")
    return Item([render(sc)], "Which shape is this?", s, mc(rng, s, SHAPES, 4))


@generator(
    "icon-clock", "vqa", MC, "single", (1, 1), "Read the hour on a clock face (IconQA multi-choice, hard analogue)."
)
def icon_clock(rng: np.random.Generator) -> Item:
    h = int(rng.integers(1, 13))
    ans = f"{h} o'clock"
    return Item(
        [render_clock(h)],
        "What time does the clock show?",
        ans,
        mc(rng, ans, [f"{k} o'clock" for k in range(1, 13)], 4),
    )


# -- dish domain (WorldCuisines analogue) --------------------------------------------
DISH_NAMES = sorted(DISHES.values())


def dish(rng: np.random.Generator, name: str | None = None, k: int | None = None) -> tuple[str, Scene]:
    key = (
        list(DISHES)[int(rng.integers(0, len(DISHES)))]
        if name is None
        else next(k_ for k_, v in DISHES.items() if v == name)
    )
    n = k if k is not None else int(rng.integers(2, 5))
    objs = [Obj(key[1], key[0], size="small") for _ in range(n)]
    return DISHES[key], Scene(place(rng, objs), domain="table")


@generator(
    "dish-name",
    "vqa",
    OPEN,
    "single",
    (1, 1),
    "Name the dish on the plate; a dish is defined by its ingredient colour and shape (WCVQA dish name analogue).",
)
def dish_name(rng: np.random.Generator) -> Item:
    name, sc = dish(rng)
    return Item([render(sc)], "What is the name of this dish?", name)


@generator(
    "dish-name-context",
    "vqa",
    MC,
    "single",
    (1, 1),
    "Name the dish given a true hint about where it comes from (WCVQA contextual dish name analogue).",
)
def dish_name_context(rng: np.random.Generator) -> Item:
    name, sc = dish(rng)
    place_ = DISH_ORIGIN[name]
    same_place = [d for d in DISH_NAMES if DISH_ORIGIN[d] == place_ and d != name]
    opts = mc(rng, name, same_place + [d for d in DISH_NAMES if d != name], 4) if not same_place else None
    if opts is None:  # the other dish from the same place is always a distractor, so the image is needed
        rest = [d for d in DISH_NAMES if d not in (name, same_place[0])]
        opts = [name, same_place[0]] + [str(x) for x in rng.choice(rest, size=2, replace=False)]
        opts = [opts[int(i)] for i in rng.permutation(4)]
    return Item([render(sc)], f"This dish comes from {place_}. What is it called?", name, opts)


@generator(
    "dish-name-adversarial",
    "vqa",
    MC,
    "single",
    (1, 1),
    "Name the dish despite a misleading hint about its origin (WCVQA adversarial context analogue).",
)
def dish_name_adversarial(rng: np.random.Generator) -> Item:
    name, sc = dish(rng)
    wrong = other(rng, PLACES, DISH_ORIGIN[name])
    return Item(
        [render(sc)], f"Some say this dish comes from {wrong}. What is it called?", name, mc(rng, name, DISH_NAMES, 4)
    )


@generator(
    "dish-location",
    "vqa",
    MC,
    "single",
    (1, 1),
    "Say where the dish on the plate comes from (WCVQA location analogue).",
)
def dish_location(rng: np.random.Generator) -> Item:
    name, sc = dish(rng)
    return Item([render(sc)], "Where does this dish come from?", DISH_ORIGIN[name], list(PLACES))
