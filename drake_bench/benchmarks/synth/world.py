"""The synthetic visual world shared by drake-synth, hflb-synth and the public mix.

Small closed vocabularies (bold colours, big shapes, two sizes, three styles, four
visual domains) keep every image legible at 48 px and every answer short. All
tables are fixed: changing one changes the data, so bump ``GENERATOR_VERSION``.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType

import numpy as np

GENERATOR_VERSION = 8
"""The newest generator version. A redesigned generator is registered as a new implementation tagged with
the new version (the old one stays, so older manifests still build byte for byte); a change to the shared
world tables changes every generator's bytes and needs a new version for all of them."""
BASE_VERSION = 3
"""Version of every implementation not redesigned since (all of them at drake_bench's 1.3.0 manifests). What
each later version changed, and why: docs/findings/synth-generator-history.md."""

COLORS: dict[str, tuple[int, int, int]] = {
    "red": (220, 40, 40),
    "green": (30, 170, 60),
    "blue": (40, 80, 230),
    "yellow": (240, 210, 20),
    "purple": (150, 50, 190),
    "orange": (250, 130, 10),
}
SHAPES: list[str] = ["circle", "square", "triangle", "diamond", "cross", "star"]
CORNERS: dict[str, int] = {"circle": 0, "square": 4, "triangle": 3, "diamond": 4, "cross": 12, "star": 10}
SIZES: dict[str, int] = {"small": 7, "large": 13}
"""Radius in pixels of a 64 px image: small objects are still ~5 px at 48 px."""
STYLES: list[str] = ["filled", "outlined", "striped"]
STATES: list[str] = ["calm", "shining", "shaking"]
"""Object states of the multimodal-reasoning group (MIT-States analogue, generator version 7), drawn as comic emanata:
short rays around a shining object, tremble strokes either side of a shaking one. Only reasoning tasks draw them."""

DOMAINS: dict[str, tuple[int, int, int]] = {
    "plain": (232, 232, 232),  # default domain: light grey background, filled shapes
    "night": (28, 28, 44),  # unseen visual domain: dark background
    "paper": (255, 255, 255),  # icon domain: white paper, black-outlined icons
    "table": (150, 100, 60),  # dish domain: wooden table with a plate
    "canvas": (225, 210, 170),  # art domain (hflb AQUA analogue): textured canvas
}

GROUP_DOMAINS: dict[str, tuple[int, int, int]] = {
    "studio": (214, 222, 236),  # visual-relation group (product and fashion photos): wall, floor, cast shadows
    "comic": (250, 240, 214),  # multimodal-reasoning group (figurative art, Bongard drawings, comics): halftone, ink
}
"""Visual domains of one DRAKE group each (generator version 6), kept apart from ``DOMAINS``: the public mix and the
tiny models' pretraining targets draw from ``DOMAINS`` and must not change. A task renders in one when its rule names
it as ``visual_domain``; its generator's default "plain" scenes are then drawn in that domain."""

NUMBER_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
DIRECTIONS = ["left", "right", "up", "down"]
DISTORTIONS = ["blur", "noise", "darkness", "glare"]

# Figurative lexicon (IRFL analogue): words that stand for a colour or a shape.
COLOR_FIGURES: dict[str, str] = {
    "fire": "red",
    "leaf": "green",
    "sea": "blue",
    "sun": "yellow",
    "plum": "purple",
    "carrot": "orange",
}
SHAPE_FIGURES: dict[str, str] = {
    "wheel": "circle",
    "box": "square",
    "tent": "triangle",
    "kite": "diamond",
    "plus": "cross",
    "spark": "star",
}

# Dish domain (WCVQA analogue): a dish is recognised by its ingredient colour and shape.
DISHES: dict[tuple[str, str], str] = {
    ("red", "circle"): "tomato salad",
    ("green", "square"): "herb tofu",
    ("yellow", "triangle"): "cheese pie",
    ("orange", "circle"): "carrot stew",
    ("purple", "diamond"): "plum tart",
    ("blue", "star"): "berry jelly",
    ("red", "triangle"): "pepper wrap",
    ("green", "circle"): "pea soup",
}
DISH_ORIGIN: dict[str, str] = {
    "tomato salad": "avalon",
    "herb tofu": "brindle",
    "cheese pie": "corvale",
    "carrot stew": "avalon",
    "plum tart": "brindle",
    "berry jelly": "corvale",
    "pepper wrap": "dunmore",
    "pea soup": "dunmore",
}
PLACES = sorted(set(DISH_ORIGIN.values()))

# Synthetic languages (Fed-Aya analogue): each has its own syllable inventory.
LANGUAGES: dict[str, tuple[str, str]] = {
    "zorvian": ("zkrvt", "aou"),
    "kelanese": ("klnsm", "eai"),
    "mirathi": ("mrthd", "iau"),
    "tuvalic": ("tvlgp", "uoe"),
    "oshkan": ("shkbw", "oai"),
    "brellic": ("brlfn", "eio"),
}
BASE_WORDS: list[str] = (
    list(COLORS)
    + SHAPES
    + list(SIZES)
    + NUMBER_WORDS[1:7]
    + [
        "the",
        "is",
        "a",
        "and",
        "of",
        "in",
        "on",
        "big",
        "with",
        "has",
        "what",
        "which",
        "how",
        "many",
        "colour",
        "shape",
        "picture",
        "answer",
        "question",
        "yes",
        "no",
        "water",
        "bread",
        "house",
        "tree",
        "bird",
        "river",
        "stone",
        "light",
        "night",
        "day",
        "friend",
        "market",
        "road",
        "song",
        "book",
    ]
)


def stable_seed(*parts: object) -> list[int]:
    """A numpy seed sequence from arbitrary parts (crc32 of strings), stable across runs and platforms."""
    out: list[int] = []
    for p in parts:
        out.append(p if isinstance(p, int) and p >= 0 else zlib.crc32(str(p).encode()))
    return out


def rng_for(*parts: object) -> np.random.Generator:
    return np.random.default_rng(stable_seed(*parts))


@lru_cache(maxsize=None)
def vocabulary(language: str) -> MappingProxyType:
    """English base word -> word of a synthetic ``language`` (deterministic, injective). Cached: every translated
    sentence needs it and drawing it took 70% of fedllm-synth's build; read-only, so the cache cannot be edited."""
    cons, vows = LANGUAGES[language]
    rng = rng_for("language", language)
    out: dict[str, str] = {}
    used: set[str] = set()
    for w in BASE_WORDS:
        while True:
            n = int(rng.integers(1, 4))
            word = "".join(str(rng.choice(list(cons))) + str(rng.choice(list(vows))) for _ in range(n))
            if len(word) >= 2 and word not in used:
                used.add(word)
                out[w] = word
                break
    return MappingProxyType(out)


def translate(text: str, language: str) -> str:
    voc = vocabulary(language)
    return " ".join(voc.get(w, w) for w in text.split())


@dataclass
class Obj:
    shape: str
    color: str
    size: str = "large"
    x: int = 32
    y: int = 32
    style: str = "filled"
    cracked: bool = False
    rotation: int = 0  # degrees; used for upright vs upside-down triangles
    state: str = field(default="calm", repr=False)  # out of repr: older scenes keep their seeds (``hash_scene``)

    def phrase(self) -> str:
        return f"{self.size} {self.color} {self.shape}"


@dataclass
class Scene:
    objects: list[Obj] = field(default_factory=list)
    domain: str = "plain"
    distortion: str | None = None
    text: str | None = None  # large text rendered in the image (OCR-style tasks)
    # noise cell side: 1 = independent colour noise per pixel (generator version 3); 2 = monochrome (luma) grain on
    # 2x2 cells, as visible and a fifth the size on disk (version 5). Out of repr, so scene seeds stay the same.
    grain: int = field(default=1, repr=False)

    def caption(self) -> str:
        if self.text:
            return f"the text {self.text}"
        parts = [an(o.phrase()) for o in self.objects]
        if not parts:
            return "an empty picture"
        return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def place(
    rng: np.random.Generator,
    objs: list[Obj],
    margin: int = 3,
    tries: int = 300,
    fixed: list[Obj] | None = None,
    pad: int = 0,
) -> list[Obj]:
    """Give each object a non-overlapping position (rejection sampling, deterministic given rng).

    A large object that cannot fit after ``tries`` is shrunk to small, so callers must read
    sizes after placement (generators form questions from the placed objects). ``fixed``
    objects keep their positions and are avoided; the returned list excludes them. ``pad`` keeps objects that
    farther from the image border (room for marks drawn around an object, such as state emanata).
    """
    placed: list[Obj] = list(fixed or [])
    for o in objs:
        for attempt in range(2 * tries):
            if attempt == tries:
                o.size = "small"
            r = SIZES[o.size]
            x = int(rng.integers(r + 1 + pad, 64 - r - pad))
            y = int(rng.integers(r + 1 + pad, 64 - r - pad))
            if all((x - p.x) ** 2 + (y - p.y) ** 2 > (r + SIZES[p.size] + margin) ** 2 for p in placed):
                break
        o.x, o.y = x, y
        placed.append(o)
    return placed[len(fixed or []) :]


def random_obj(
    rng: np.random.Generator,
    *,
    shape: str | None = None,
    color: str | None = None,
    size: str | None = None,
    style: str = "filled",
    shapes: list[str] | None = None,
    colors: list[str] | None = None,
) -> Obj:
    return Obj(
        shape=shape or str(rng.choice(shapes or SHAPES)),
        color=color or str(rng.choice(colors or list(COLORS))),
        size=size or str(rng.choice(list(SIZES))),
        style=style,
    )


def other(rng: np.random.Generator, options: list[str], *exclude: str) -> str:
    """A random option different from ``exclude``."""
    return str(rng.choice([o for o in options if o not in exclude]))


def an(phrase: str) -> str:
    """English indefinite article: 'an orange circle', 'a red circle'."""
    return ("an " if phrase[:1] in "aeiou" else "a ") + phrase


def plural(noun: str) -> str:
    return noun + ("es" if noun.endswith(("s", "x", "sh", "ch")) else "s")
