"""Multi-modal reasoning generators (DRAKE clients 7, 8, 9): figurative phrases, Bongard sets, odd one out, states.

The group's text speaks one figurative lexicon (``world.COLOR_FIGURES`` / ``SHAPE_FIGURES``:
'fire' means red, 'wheel' means circle), read or written by tasks on all three clients
(rsn-find-image reads it on client 7, rsn-common-color answers in it on client 9), so
knowledge learnt on one reasoning client carries to the others, which is the within-group
relatedness DRAKE shows; the other groups name colours and shapes literally, so their
answers to the same visual questions differ (interference across groups).

The group also has a visual skill no other group's task draws: object states (``world.STATES``,
MIT-States analogue: calm, shining, shaking), drawn as comic emanata. rsn-state-coherence (client 7),
rsn-bongard-concept (client 8), rsn-odd-one-out and rsn-common-state (client 9) ask about them. The
questions are about presence (is every object in a named state, does the query show the positives'
marks, which image is the one not calm), the format of the relation group's crack tasks: a small model
learns such a question from a few hundred items, while a same/different comparison across images it
hardly learns when the comparison is one task among several.

Implementations that only archived benchmark versions draw are in :mod:`drake_bench.benchmarks.synth.legacy`;
docs/findings/synth-generator-history.md says why each was replaced.
"""

from __future__ import annotations

import numpy as np

from drake_bench.benchmarks.sample import AnswerType
from drake_bench.benchmarks.synth.registry import YES_NO, Item, generator, image_options, yn
from drake_bench.benchmarks.synth.relation import consistent, one, two_related
from drake_bench.benchmarks.synth.render import render
from drake_bench.benchmarks.synth.world import (
    COLOR_FIGURES,
    COLORS,
    SHAPE_FIGURES,
    SHAPES,
    STATES,
    Obj,
    Scene,
    other,
    place,
    random_obj,
)

MC, YN, OPEN = AnswerType.MULTIPLE_CHOICE, AnswerType.YES_NO, AnswerType.OPEN
COLS = list(COLORS)
FIG_OF_COLOR = {v: k for k, v in COLOR_FIGURES.items()}
FIG_OF_SHAPE = {v: k for k, v in SHAPE_FIGURES.items()}


def figure(color: str, shape: str) -> str:
    return f"{FIG_OF_COLOR[color]} {FIG_OF_SHAPE[shape]}"


def near_misses(rng: np.random.Generator, color: str, shape: str, k: int) -> list[Obj]:
    """``k`` distinct objects differing from (color, shape) in one or both attributes."""
    out: list[Obj] = []
    seen = {(color, shape)}
    while len(out) < k:
        mode = int(rng.integers(0, 3))
        c = color if mode == 1 else other(rng, COLS, color)
        s = shape if mode == 0 else other(rng, SHAPES, shape)
        if (c, s) not in seen:
            seen.add((c, s))
            out.append(Obj(s, c))
    return out


def pick_among(rng: np.random.Generator, target: Obj, distractors: list[Obj], offset: int = 0) -> tuple[list, str]:
    objs = [target] + distractors
    order = rng.permutation(len(objs))
    imgs = [render(one(Obj(**objs[int(i)].__dict__))) for i in order]
    return imgs, f"image {int(np.where(order == 0)[0][0]) + 1 + offset}"


@generator(
    "rsn-metaphor-match",
    "reasoning",
    MC,
    "multi",
    (4, 4),
    "Pick the image a figurative phrase ('a fire wheel' = red circle) describes (IRFL metaphor matching analogue).",
)
def metaphor_match(rng: np.random.Generator) -> Item:
    c, s = str(rng.choice(COLS)), str(rng.choice(SHAPES))
    imgs, ans = pick_among(rng, Obj(s, c), near_misses(rng, c, s, 3))
    return Item(imgs, f"Which image is 'a {figure(c, s)}'?", ans, image_options(4))


def bongard(rng: np.random.Generator, rule_holds, make_pos, make_neg) -> Item:
    """2 positives, 2 negatives, 1 query; the answer says whether the query follows the rule."""
    truth = bool(rng.random() < 0.5)
    scenes = [make_pos(), make_pos(), make_neg(), make_neg(), make_pos() if truth else make_neg()]
    q = "Images 1 and 2 follow a rule; images 3 and 4 break it. Does image 5 follow the rule?"
    return Item([render(s) for s in scenes], q, yn(truth), list(YES_NO))


@generator(
    "rsn-bongard-relation",
    "reasoning",
    YN,
    "multi",
    (5, 5),
    "Bongard set whose rule is a spatial relation between two shapes; does the query follow it? (Bongard-HOI analogue)",
)
def bongard_relation(rng: np.random.Generator) -> Item:
    sa, sb = rng.choice(SHAPES, size=2, replace=False).tolist()
    rel = str(rng.choice(["above", "left of"]))
    inv = {"above": "below", "left of": "right of"}[rel]

    def make(r: str) -> Scene:
        a, b = two_related(rng, r)
        a.shape, b.shape = sa, sb
        return Scene([a, b])

    return bongard(rng, None, lambda: make(rel), lambda: make(inv))


@generator(
    "rsn-find-image",
    "reasoning",
    MC,
    "multi",
    (3, 3),
    "Which of three two-object images contains a figuratively named object ('a sea box' = blue square)? The "
    "other objects differ in colour, shape or both (VizWiz multi-image analogue).",
    version=4,
)
def find_image_figurative(rng: np.random.Generator) -> Item:
    c, s = str(rng.choice(COLS)), str(rng.choice(SHAPES))
    nm = near_misses(rng, c, s, 5)  # every other object misses one word of the phrase or both
    scenes = [[Obj(s, c, size="small"), nm[0]], nm[1:3], nm[3:5]]
    order = rng.permutation(3)
    imgs = []
    for i in order:
        objs = [Obj(o.shape, o.color, size="small") for o in scenes[int(i)]]
        imgs.append(render(Scene(place(rng, [objs[int(k)] for k in rng.permutation(2)]))))
    ans = f"image {int(np.where(order == 0)[0][0]) + 1}"
    return Item(imgs, f"Which image contains 'a {figure(c, s)}'?", ans, image_options(3))


def in_state(rng: np.random.Generator, state: str, size: str | None = None) -> Obj:
    o = random_obj(rng, size=size)
    o.state = state
    return o


@generator(
    "rsn-state-coherence",
    "reasoning",
    YN,
    "multi",
    (4, 4),
    "Are the objects of four images all in a named state (calm, shining or shaking, drawn as comic emanata)? "
    "(MIT-States StateCoherence analogue)",
    version=8,
)
def state_coherence_named(rng: np.random.Generator) -> Item:
    # naming the state makes it a presence question per image (is any object not <state>?), as the relation
    # group's crack tasks are, rather than a comparison across the four images
    same, states, named = consistent(rng, STATES, 4)  # 'no': one or two of the four are not in the named state
    imgs = [render(one(in_state(rng, st, size="small"))) for st in states]
    return Item(imgs, f"Are all four objects {named}?", yn(same), list(YES_NO))


@generator(
    "rsn-figurative-verify",
    "reasoning",
    YN,
    "single",
    (1, 1),
    "Does one image show a figurative phrase ('a sea box' = blue square)? (IRFL figurative verification analogue)",
)
def figurative_verify(rng: np.random.Generator) -> Item:
    c, s = str(rng.choice(COLS)), str(rng.choice(SHAPES))
    truth = bool(rng.random() < 0.5)
    o = Obj(s, c, size="large") if truth else near_misses(rng, c, s, 1)[0]
    o.size = "large"
    return Item([render(one(o))], f"Does the picture show 'a {figure(c, s)}'?", yn(truth), list(YES_NO))


@generator(
    "rsn-idiom-match",
    "reasoning",
    MC,
    "multi",
    (3, 3),
    "Pick the image showing a counted figurative phrase ('two fire tents') (IRFL idiom matching analogue).",
)
def idiom_match(rng: np.random.Generator) -> Item:
    c, s = str(rng.choice(COLS)), str(rng.choice(SHAPES))
    n = int(rng.integers(1, 4))
    words = {1: "one", 2: "two", 3: "three"}
    target = [(c, s)] * n
    d_count = [(c, s)] * int(rng.choice([k for k in (1, 2, 3) if k != n]))
    alt = near_misses(rng, c, s, 1)[0]
    d_attr = [(alt.color, alt.shape)] * n
    cands = [target, d_count, d_attr]
    order = rng.permutation(3)
    imgs = [render(Scene(place(rng, [Obj(sh, co, size="small") for co, sh in cands[int(i)]]))) for i in order]
    ans = f"image {int(np.where(order == 0)[0][0]) + 1}"
    plural = "s" if n > 1 else ""
    return Item(imgs, f"Which image shows '{words[n]} {figure(c, s)}{plural}'?", ans, image_options(3))


@generator(
    "rsn-bongard-concept",
    "reasoning",
    YN,
    "multi",
    (5, 5),
    "Bongard set whose rule is 'contains a <shining|shaking> object' against calm negatives (object states "
    "drawn as comic emanata); does the query follow it? (Bongard-OpenWorld analogue)",
    version=8,
)
def bongard_state_presence(rng: np.random.Generator) -> Item:
    # the negatives are calm, so the query follows the rule exactly when it shows the marks the positives share
    state = str(rng.choice(STATES[1:]))

    def scene(marked: bool) -> Scene:
        n_calm = int(rng.integers(0, 2) if marked else rng.integers(1, 3))  # one or two objects per image
        objs = [in_state(rng, "calm", "small") for _ in range(n_calm)]
        if marked:
            objs.insert(int(rng.integers(0, len(objs) + 1)), in_state(rng, state, "small"))
        return Scene(place(rng, objs, margin=9, pad=8))

    return bongard(rng, None, lambda: scene(True), lambda: scene(False))


@generator(
    "rsn-panel-sequence",
    "reasoning",
    MC,
    "multi",
    (3, 3),
    "Three panels grow by a fixed number of objects (one or two) each; how many objects will the next panel show? (COMICS next-panel analogue)",
)
def panel_sequence(rng: np.random.Generator) -> Item:
    # four equally likely stories with four different next counts (4, 5, 6, 7), and the options are always
    # those four: the question and options say nothing about the answer, the panels do
    start, step = [(1, 1), (2, 1), (3, 1), (1, 2)][int(rng.integers(0, 4))]
    counts = [start + step * t for t in range(3)]
    nxt = counts[-1] + step
    s, c = str(rng.choice(SHAPES)), str(rng.choice(COLS))
    imgs = [render(Scene(place(rng, [Obj(s, c, size="small") for _ in range(n)]))) for n in counts]
    opts = [str(k) for k in rng.permutation([4, 5, 6, 7]).tolist()]
    return Item(imgs, "The panels tell a story. How many objects will the next panel show?", str(nxt), opts)


@generator(
    "rsn-phrase-select",
    "reasoning",
    MC,
    "single",
    (1, 1),
    "Pick the figurative phrase that describes one image (IRFL phrase selection analogue).",
)
def phrase_select(rng: np.random.Generator) -> Item:
    c, s = str(rng.choice(COLS)), str(rng.choice(SHAPES))
    ans = f"a {figure(c, s)}"
    # the options form a 2x2 grid (colour word x shape word) with the answer in one corner: every word occurs
    # in two options, so the options alone do not point at the answer (near misses around it used to)
    c2, s2 = other(rng, COLS, c), other(rng, SHAPES, s)
    opts = [f"a {figure(x, y)}" for x, y in ((c, s), (c2, s), (c, s2), (c2, s2))]
    opts = [opts[int(i)] for i in rng.permutation(4)]
    return Item([render(one(Obj(s, c)))], "Which phrase describes the picture?", ans, opts)


def common(rng: np.random.Generator, attr: str) -> Item:
    values = COLS if attr == "color" else SHAPES
    shared = str(rng.choice(values))
    imgs = []
    used_other: set[str] = set()
    for _ in range(3):
        o1 = random_obj(rng, size="small", **{attr: shared})
        # the second object's value differs from the shared one and from earlier images' fillers
        fill = (
            other(rng, values, shared, *used_other) if len(used_other) < len(values) - 2 else other(rng, values, shared)
        )
        used_other.add(fill)
        o2 = random_obj(rng, size="small", **{attr: fill})
        objs = [o1, o2] if rng.random() < 0.5 else [o2, o1]
        imgs.append(render(Scene(place(rng, objs))))
    word = "colour" if attr == "color" else "shape"
    return Item(imgs, f"Which {word} appears in every image?", shared)


def common_figure(rng: np.random.Generator, attr: str) -> Item:
    """``common`` answered with the lexicon's word for the shared value ('fire', not 'red')."""
    it = common(rng, attr)
    word = FIG_OF_COLOR[it.answer] if attr == "color" else FIG_OF_SHAPE[it.answer]
    kind = "colour" if attr == "color" else "shape"
    return Item(
        it.images,
        f"Which {kind} appears in every image? Answer with its figure word.",
        word,
        meta={"literal": it.answer},
    )


@generator(
    "rsn-common-color",
    "reasoning",
    OPEN,
    "multi",
    (3, 3),
    "Name the colour shared by all images of a concept set by its figure word ('fire' for red; Bongard-OpenWorld "
    "concept query analogue).",
    version=4,
)
def common_color_figure(rng: np.random.Generator) -> Item:
    return common_figure(rng, "color")


def state_odd_out(rng: np.random.Generator, odd_state: str, same_state: str) -> Item:
    """Four one-object images, three in ``same_state`` and one in ``odd_state``: which does not fit?"""
    odd = in_state(rng, odd_state, "small")
    same = [in_state(rng, same_state, "small") for _ in range(3)]
    imgs, ans = pick_among(rng, odd, same)
    return Item(imgs, "Which image does not fit with the others?", ans, image_options(4))


@generator(
    "rsn-odd-one-out",
    "reasoning",
    MC,
    "multi",
    (4, 4),
    "Three objects are calm, one shines or shakes (comic emanata): which image does not fit? (Bongard-HOI action "
    "incoherence analogue)",
    version=8,
)
def odd_marked_out(rng: np.random.Generator) -> Item:
    # the three alike are calm, so the odd image is the one with marks
    return state_odd_out(rng, str(rng.choice(STATES[1:])), "calm")


@generator(
    "rsn-common-state",
    "reasoning",
    OPEN,
    "multi",
    (3, 3),
    "Name the state (calm, shining or shaking, drawn as comic emanata) shared by all images of a concept set "
    "(Bongard-HOI concept query analogue).",
    version=8,
)
def common_state(rng: np.random.Generator) -> Item:
    shared = str(rng.choice(STATES))
    imgs, fills = [], [other(rng, STATES, shared) for _ in range(3)]
    if len(set(fills)) == 1:  # both other states occur, so only the shared one is in every image
        fills[int(rng.integers(0, 3))] = other(rng, STATES, shared, fills[0])
    for f in fills:
        objs = [in_state(rng, shared, "small"), in_state(rng, f, "small")]
        imgs.append(render(Scene(place(rng, [objs[int(i)] for i in rng.permutation(2)], margin=9, pad=8))))
    return Item(imgs, "Which state appears in every image?", shared)
