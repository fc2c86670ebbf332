"""hflb-synth generators: 9 single-image VQA clients x 4 question-type tasks (HFLB analogue).

Clients differ by answer format (yes/no, 4-choice, 2-choice, open) and visual domain,
tasks inside a client by question type, as HFLB splits each dataset by question type.
"""

from __future__ import annotations

import numpy as np

from drake_bench.benchmarks.sample import AnswerType
from drake_bench.benchmarks.synth.registry import YES_NO, Item, generator, mc, yn
from drake_bench.benchmarks.synth.relation import one, two_related
from drake_bench.benchmarks.synth.render import render
from drake_bench.benchmarks.synth.vqa import dish
from drake_bench.benchmarks.synth.world import (
    COLORS,
    NUMBER_WORDS,
    SHAPES,
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
BACKGROUNDS = {"plain": "grey", "night": "dark", "paper": "white", "canvas": "beige"}


def distinct_objs(rng: np.random.Generator, n: int, domain: str = "plain", size: str | None = "small") -> Scene:
    """``n`` objects with pairwise distinct shapes and colours (so every reference is unambiguous)."""
    shapes = rng.choice(SHAPES, size=n, replace=False).tolist()
    cols = rng.choice(COLS, size=n, replace=False).tolist()
    return Scene(place(rng, [Obj(s, c, size=size or "small") for s, c in zip(shapes, cols)]), domain=domain)


def H(name: str, answer_type: AnswerType, description: str):
    return generator(name, "hflb", answer_type, "single", (1, 1), description)


# client 1: GQA yes/no ------------------------------------------------------------------
@H("hflb-c1-attribute", YN, "Yes/no: does an object have a colour? (GQA yes/no, attribute)")
def c1_attr(rng: np.random.Generator) -> Item:
    sc = distinct_objs(rng, int(rng.integers(1, 4)))
    o = sc.objects[int(rng.integers(0, len(sc.objects)))]
    truth = bool(rng.random() < 0.5)
    c = o.color if truth else other(rng, COLS, *[x.color for x in sc.objects])
    return Item([render(sc)], f"Is the {o.shape} {c}?", yn(truth), list(YES_NO))


@H("hflb-c1-relation", YN, "Yes/no: is one object above/below another? (GQA yes/no, relation)")
def c1_rel(rng: np.random.Generator) -> Item:
    rel = str(rng.choice(["above", "below"]))
    truth = bool(rng.random() < 0.5)
    a, b = two_related(rng, rel if truth else {"above": "below", "below": "above"}[rel])
    if b.shape == a.shape:  # 'is the circle above the circle?' would not say which circle
        b.shape = other(rng, SHAPES, a.shape)
    return Item([render(Scene([a, b]))], f"Is the {a.shape} {rel} the {b.shape}?", yn(truth), list(YES_NO))


@H("hflb-c1-object", YN, "Yes/no: is there a given shape? (GQA yes/no, object)")
def c1_obj(rng: np.random.Generator) -> Item:
    s = str(rng.choice(SHAPES))
    truth = bool(rng.random() < 0.5)
    objs = [random_obj(rng, shapes=[x for x in SHAPES if x != s], size="small") for _ in range(int(rng.integers(1, 3)))]
    if truth:
        objs.append(random_obj(rng, shape=s, size="small"))
    return Item([render(Scene(place(rng, objs)))], f"Is there {an(s)} in the picture?", yn(truth), list(YES_NO))


@H("hflb-c1-global", YN, "Yes/no: is the background dark? (GQA yes/no, global)")
def c1_global(rng: np.random.Generator) -> Item:
    truth = bool(rng.random() < 0.5)
    sc = distinct_objs(rng, int(rng.integers(1, 3)), domain="night" if truth else str(rng.choice(["plain", "paper"])))
    return Item([render(sc)], "Is the background dark?", yn(truth), list(YES_NO))


# clients 2 and 3: GQA 4-choice and 2-choice ------------------------------------------------
def gqa_choice(rng: np.random.Generator, kind: str, k: int) -> Item:
    if kind == "global":
        dom = str(rng.choice(list(BACKGROUNDS)))
        sc = distinct_objs(rng, int(rng.integers(1, 3)), domain=dom)
        ans = BACKGROUNDS[dom]
        return Item([render(sc)], "What colour is the background?", ans, mc(rng, ans, list(BACKGROUNDS.values()), k))
    sc = distinct_objs(rng, int(rng.integers(2, 4)))
    o = sc.objects[0]
    if kind == "attribute":
        return Item([render(sc)], f"What colour is the {o.shape}?", o.color, mc(rng, o.color, COLS, k))
    if kind == "category":
        return Item([render(sc)], f"What shape is the {o.color} object?", o.shape, mc(rng, o.shape, SHAPES, k))
    rel = str(rng.choice(["left of", "above"]))
    a, b = two_related(rng, rel)
    if a.shape == b.shape:  # otherwise the answer would be the shape named in the question (a text shortcut)
        a.shape = other(rng, SHAPES, b.shape)
    q = f"What is {rel} the {b.color} {b.shape}?"
    return Item([render(Scene([a, b]))], q, a.shape, mc(rng, a.shape, [s for s in SHAPES if s != b.shape], k))


for _k, _fmt, _cid in ((4, "four", 2), (2, "two", 3)):
    for _kind in ("attribute", "relation", "category", "global"):

        def _make(kind: str = _kind, k: int = _k):
            return lambda rng: gqa_choice(rng, kind, k)

        H(f"hflb-c{_cid}-{_kind}", MC, f"{_fmt.capitalize()}-choice {_kind} question (GQA {_fmt}-choice, {_kind}).")(
            _make()
        )


# client 4: Abstract VQA (outlined cartoon shapes) --------------------------------------------
def cartoon(rng: np.random.Generator, n: int) -> Scene:
    sc = distinct_objs(rng, n)
    for o in sc.objects:
        o.style = "outlined"
    return sc


@H("hflb-c4-attribute", OPEN, "Open: colour of a named cartoon shape (Abstract VQA, attribute).")
def c4_attr(rng: np.random.Generator) -> Item:
    sc = cartoon(rng, int(rng.integers(1, 4)))
    o = sc.objects[0]
    return Item([render(sc)], f"What colour is the {o.shape}?", o.color)


@H("hflb-c4-number", OPEN, "Open: number of cartoon shapes (Abstract VQA, number).")
def c4_num(rng: np.random.Generator) -> Item:
    n = int(rng.integers(1, 5))
    return Item([render(cartoon(rng, n))], "How many shapes are there?", str(n))


@H("hflb-c4-yesno", YN, "Yes/no: is there an object of a colour? (Abstract VQA, yes/no)")
def c4_yn(rng: np.random.Generator) -> Item:
    sc = cartoon(rng, int(rng.integers(1, 4)))
    truth = bool(rng.random() < 0.5)
    c = sc.objects[0].color if truth else other(rng, COLS, *[o.color for o in sc.objects])
    return Item([render(sc)], f"Is there {an(c)} shape?", yn(truth), list(YES_NO))


@H("hflb-c4-others", OPEN, "Open: shape of a cartoon object of a named colour (Abstract VQA, others).")
def c4_other(rng: np.random.Generator) -> Item:
    sc = cartoon(rng, int(rng.integers(1, 4)))
    o = sc.objects[0]
    return Item([render(sc)], f"Which shape is {o.color}?", o.shape)


# client 5: SNLI-VE (does the image support a claim) ------------------------------------------
def claim(rng: np.random.Generator, truth: bool, make) -> Item:
    sc, text = make(truth)
    return Item([render(sc)], f"Does the picture support the claim: {text}?", yn(truth), list(YES_NO))


@H("hflb-c5-action", YN, "Does the picture support a claim about where a triangle points? (SNLI-VE, action)")
def c5_action(rng: np.random.Generator) -> Item:
    d = str(rng.choice(["up", "down"]))

    def make(truth: bool):
        o = random_obj(rng, shape="triangle", size="large")
        o.rotation = 0 if (d == "up") == truth else 180
        return one(o), f"the triangle points {d}"

    return claim(rng, bool(rng.random() < 0.5), make)


@H("hflb-c5-scene", YN, "Does the picture support a claim about the scene (day or night)? (SNLI-VE, scene context)")
def c5_scene(rng: np.random.Generator) -> Item:
    w = str(rng.choice(["day", "night"]))

    def make(truth: bool):
        night = (w == "night") == truth
        return distinct_objs(rng, int(rng.integers(1, 3)), domain="night" if night else "plain"), f"it is {w}"

    return claim(rng, bool(rng.random() < 0.5), make)


@H("hflb-c5-object", YN, "Does the picture support a claim about how many objects there are? (SNLI-VE, object-centric)")
def c5_object(rng: np.random.Generator) -> Item:
    n = int(rng.integers(1, 5))

    def make(truth: bool):
        m = n if truth else other(rng, ["1", "2", "3", "4"], str(n))
        return distinct_objs(rng, int(m)), f"there are {NUMBER_WORDS[n]} objects"

    return claim(rng, bool(rng.random() < 0.5), make)


@H(
    "hflb-c5-commonsense",
    YN,
    "Does the picture support the claim that something can be eaten (a dish)? (SNLI-VE, commonsense)",
)
def c5_common(rng: np.random.Generator) -> Item:
    def make(truth: bool):
        return (dish(rng)[1] if truth else distinct_objs(rng, int(rng.integers(1, 4)))), "something here can be eaten"

    return claim(rng, bool(rng.random() < 0.5), make)


# client 6: COCO-QA (open, one word) ------------------------------------------------------------
@H("hflb-c6-object", OPEN, "Open: which shape has a named colour (COCO-QA, object).")
def c6_obj(rng: np.random.Generator) -> Item:
    sc = distinct_objs(rng, int(rng.integers(1, 4)), size=None)
    o = sc.objects[0]
    return Item([render(sc)], f"What is the {o.color} object?", o.shape)


@H("hflb-c6-number", OPEN, "Open: count one shape among others (COCO-QA, number).")
def c6_num(rng: np.random.Generator) -> Item:
    s, k = str(rng.choice(SHAPES)), int(rng.integers(1, 5))
    objs = [random_obj(rng, shape=s, size="small") for _ in range(k)]
    objs += [
        random_obj(rng, shapes=[x for x in SHAPES if x != s], size="small") for _ in range(int(rng.integers(0, 2)))
    ]
    return Item([render(Scene(place(rng, objs)))], f"How many {plural(s)} are there?", str(k))


@H("hflb-c6-color", OPEN, "Open: colour of a named shape (COCO-QA, colour).")
def c6_col(rng: np.random.Generator) -> Item:
    sc = distinct_objs(rng, int(rng.integers(1, 4)), size=None)
    o = sc.objects[0]
    return Item([render(sc)], f"What colour is the {o.shape}?", o.color)


@H("hflb-c6-location", OPEN, "Open: which side of the picture an object is on (COCO-QA, location).")
def c6_loc(rng: np.random.Generator) -> Item:
    side = str(rng.choice(["left", "right", "top", "bottom"]))
    o = random_obj(rng, size="small")
    c = int(rng.integers(12, 53))
    o.x, o.y = {"left": (12, c), "right": (52, c), "top": (c, 12), "bottom": (c, 52)}[side]
    if side in ("left", "right"):
        o.y = 32
    else:
        o.x = 32
    return Item([render(Scene([o]))], f"Where is the {o.shape}?", side)


# client 7: NLVR2-style statements on one image -------------------------------------------------
def statement(rng: np.random.Generator, make) -> Item:
    truth = bool(rng.random() < 0.5)
    sc, text = make(truth)
    return Item([render(sc)], f"True or false: {text}.", yn(truth), list(YES_NO))


@H("hflb-c7-negation", YN, "Is 'there is no <colour> object' true? (NLVR2, presupposition/negation)")
def c7_neg(rng: np.random.Generator) -> Item:
    c = str(rng.choice(COLS))

    def make(truth: bool):
        objs = [
            random_obj(rng, colors=[x for x in COLS if x != c], size="small") for _ in range(int(rng.integers(1, 3)))
        ]
        if not truth:
            objs.append(random_obj(rng, color=c, size="small"))
        return Scene(place(rng, objs)), f"there is no {c} object"

    return statement(rng, make)


@H("hflb-c7-spatial", YN, "Is 'the <shape> is left of the <shape>' true? (NLVR2, spatial/comparative)")
def c7_spatial(rng: np.random.Generator) -> Item:
    def make(truth: bool):
        a, b = two_related(rng, "left of" if truth else "right of")
        return (
            Scene([a, b]),
            f"the {a.shape} is left of the {b.shape}"
            if a.shape != b.shape
            else f"the {a.color} {a.shape} is left of the {b.color} {b.shape}",
        )

    return statement(rng, make)


@H("hflb-c7-cardinality", YN, "Is 'there are exactly N <shapes>' true? (NLVR2, cardinality/existential)")
def c7_card(rng: np.random.Generator) -> Item:
    s, n = str(rng.choice(SHAPES)), int(rng.integers(1, 4))

    def make(truth: bool):
        k = n if truth else int(other(rng, ["0", "1", "2", "3", "4"], str(n)))
        objs = [random_obj(rng, shape=s, size="small") for _ in range(k)]
        objs += [random_obj(rng, shapes=[x for x in SHAPES if x != s], size="small")]
        return Scene(place(rng, objs)), f"there are exactly {NUMBER_WORDS[n]} {plural(s) if n != 1 else s}"

    return statement(rng, make)


@H("hflb-c7-coordination", YN, "Is 'there is a <colour> and a <colour> object' true? (NLVR2, coordination)")
def c7_coord(rng: np.random.Generator) -> Item:
    c1, c2 = rng.choice(COLS, size=2, replace=False).tolist()

    def make(truth: bool):
        cols = [c1, c2] if truth else [str(rng.choice([c1, c2]))]
        rest = [x for x in COLS if x not in (c1, c2)]
        objs = [random_obj(rng, color=c, size="small") for c in cols] + [random_obj(rng, colors=rest, size="small")]
        return Scene(place(rng, objs)), f"there is {an(c1)} object and {an(c2)} object"

    return statement(rng, make)


# client 8: VizWiz (blurry photos, open) --------------------------------------------------------
def photo(sc: Scene, rng: np.random.Generator) -> Scene:
    return Scene(sc.objects, sc.domain, "blur" if rng.random() < 0.3 else None, sc.text)


@H("hflb-c8-food", OPEN, "Open: name the dish in a possibly blurry photo (VizWiz, food/label identification).")
def c8_food(rng: np.random.Generator) -> Item:
    name, sc = dish(rng)
    return Item([render(photo(sc, rng))], "What food is this?", name)


@H("hflb-c8-color", OPEN, "Open: colour of the single object held up to the camera (VizWiz, colour/type).")
def c8_color(rng: np.random.Generator) -> Item:
    o = random_obj(rng, size="large")
    return Item([render(photo(one(o), rng))], "What colour is this?", o.color)


_GLYPHS = "ABCDEFHKLMNPRSTUXYZ2345679"


@H("hflb-c8-ocr", OPEN, "Open: read two large characters printed in the photo (VizWiz, OCR).")
def c8_ocr(rng: np.random.Generator) -> Item:
    text = "".join(str(c) for c in rng.choice(list(_GLYPHS), size=2))
    return Item([render(Scene([], "paper", None, text))], "What does the label say?", text.lower())


@H("hflb-c8-object", OPEN, "Open: what the single object is (VizWiz, general object identification).")
def c8_obj(rng: np.random.Generator) -> Item:
    o = random_obj(rng, size="large")
    return Item([render(photo(one(o), rng))], "What is this?", o.shape)


# client 9: AQUA (art on canvas), question keywords ----------------------------------------------
@H(
    "hflb-c9-standing",
    OPEN,
    "Open: colour of the upright ('standing') triangle among upside-down ones (AQUA, 'standing').",
)
def c9_standing(rng: np.random.Generator) -> Item:
    cols = rng.choice(COLS, size=3, replace=False).tolist()
    objs = place(rng, [Obj("triangle", c, "small") for c in cols])
    up = int(rng.integers(0, 3))
    for i, o in enumerate(objs):
        o.rotation = 0 if i == up else 180
    return Item([render(Scene(objs, "canvas"))], "Which colour is the standing triangle?", objs[up].color)


@H("hflb-c9-sit", OPEN, "Open: which shape sits on top of a square (AQUA, 'sit').")
def c9_sit(rng: np.random.Generator) -> Item:
    base = Obj("square", str(rng.choice(COLS)), "large", x=int(rng.integers(16, 49)), y=46)
    top = Obj(other(rng, SHAPES, "square"), other(rng, COLS, base.color), "small", x=base.x, y=25)
    return Item([render(Scene([base, top], "canvas"))], f"What sits on the {base.color} square?", top.shape)


@H("hflb-c9-hold", OPEN, "Open: which small shape a large outlined shape holds inside it (AQUA, 'wear/hold').")
def c9_hold(rng: np.random.Generator) -> Item:
    outer = Obj(str(rng.choice(["circle", "square"])), str(rng.choice(COLS)), "large", style="outlined")
    outer.x, outer.y = 32, 32
    inner = Obj(other(rng, SHAPES, "cross"), other(rng, COLS, outer.color), "small", x=32, y=32)
    inner.size = "small"
    return Item([render(Scene([outer, inner], "canvas"))], f"What does the {outer.shape} hold?", inner.shape)


@H("hflb-c9-other", OPEN, "Open: colour of a named shape in a painting (AQUA, other keywords).")
def c9_other(rng: np.random.Generator) -> Item:
    sc = distinct_objs(rng, int(rng.integers(1, 3)), domain="canvas", size=None)
    o = sc.objects[0]
    return Item([render(sc)], f"In this painting, what colour is the {o.shape}?", o.color)
