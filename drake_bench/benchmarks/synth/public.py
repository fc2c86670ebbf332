"""Public data over the synthetic world: the stand-in for LLaVA-Instruct-158K.

Model pretraining and methods that need public data (distillation, alignment) use
these mixes. Their formats (captions, lists of colours/shapes, per-image
descriptions, translations) are disjoint from every benchmark task's question
templates, so public data teaches the world and its words but no benchmark task.

Like LLaVA-1.5's instruction mix (A-OKVQA-style multiple choice, VQAv2/GQA yes/no and
counting questions), most multimodal items are generic multiple-choice, yes/no and open questions
over the world's primitives, on one picture or several: which colour / shape / size / drawn style,
a colour-shape statement, is anything of a colour, how many things, which of two objects is further
left, which picture shows an object, do two pictures hold as many things, in how many pictures is a
colour. Without them the frozen bases never see the answer formats, and can name an attribute but
not verify or compare one, so LoRA fine-tuning spends the whole federation learning the format
instead of the tasks.

What the mix leaves out on purpose: the groups' own skills (cracks, comic state marks, image
distortions) and the groups' visual looks. The vision tower perceives them (as CLIP perceives
cracks), but no public question names them: a client learns to use them only from its own and its
group's tasks, which is what lets a group's clients help each other more than other groups'.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from drake_bench.benchmarks.sample import AnswerType, Sample
from drake_bench.benchmarks.synth.render import group_domain, render
from drake_bench.benchmarks.synth.world import (
    BASE_WORDS,
    COLORS,
    DISTORTIONS,
    DOMAINS,
    GROUP_DOMAINS,
    LANGUAGES,
    SHAPES,
    SIZES,
    STATES,
    STYLES,
    Obj,
    Scene,
    place,
    random_obj,
    rng_for,
    translate,
)

PUBLIC_SOURCE = "drake-synth/public"
PUBLIC_TEXT_SOURCE = "fedllm-synth/public"

_DOMAIN_WORDS = {
    "plain": "shapes on a grey background",
    "night": "shapes on a dark background",
    "paper": "outlined icons on white paper",
    "table": "food on a plate",
    "canvas": "a painting on canvas",
}


def _scene(rng: np.random.Generator) -> Scene:
    domain = str(rng.choice(list(DOMAINS)))
    n = int(rng.integers(1, 4))
    objs = place(rng, [random_obj(rng) for _ in range(n)])
    return Scene(objects=objs, domain=domain)


def _join(words: list[str]) -> str:
    words = list(dict.fromkeys(words))
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


MIX_GENERATIONS = {1: 19, 2: 24, 3: 25}
"""Public-mix generation -> number of item kinds. Generation 1: kinds 0-18 (captions, lists, generic questions
over colour, shape, size, drawn style, position and count). Generation 2 adds kinds 19-23, generic questions over
the groups' own skills (cracks, comic state marks, image distortions), in templates of their own. Generation 3 adds
kind 24, copying words of the world's vocabulary (:func:`vocabulary_item`), a quarter of its items."""

VOCABULARY_SHARE = 0.25
"""Share of generation-3 items that copy vocabulary words. Why: a word the pretraining never trains on keeps its input
embedding at initialisation and an output row that the softmax pushes, like every other unused word's, along one
shared direction (four dish names' rows of the shipped recipe-8 model are at cosine 0.994), so no fine-tuning of the
decoder can make the model say one rather than another (docs/findings/embedded-model-diagnosis.md). A quarter of
9,600 pretraining items, 4.5 words each, shows every word of the vocabulary about ten times."""


def public_item(index: int, seed: int = 0, generation: int = 1) -> Sample:
    """The ``index``-th public multimodal item (independent of ``n``: mixes of growing n are prefixes)."""
    rng = rng_for("public", seed, index)
    if generation >= 3 and rng.random() < VOCABULARY_SHARE:  # generations 1-2 draw nothing here: their items stay
        return vocabulary_item(rng, f"public/{seed}/{index:07d}")
    kind = int(rng.integers(0, MIX_GENERATIONS[min(generation, 2)]))
    if kind >= 19:
        return _skill_item(rng, kind, f"public/{seed}/{index:07d}")
    if kind >= 11:
        return _primitive_item(rng, kind, f"public/{seed}/{index:07d}")
    sc = _scene(rng)
    images = [render(sc)]
    answer_type = AnswerType.FREE_TEXT

    def choice_item(question: str, choices: list[str], answer: str, kind_type: AnswerType) -> Sample:
        return Sample(
            id=f"public/{seed}/{index:07d}",
            images=images,
            question=question,
            choices=choices,
            answer=answer,
            answer_type=kind_type,
            task_id="public",
            source=PUBLIC_SOURCE,
            meta={"kind": kind, "domain": sc.domain},
        )

    if kind == 0:
        q, a = "Describe the image.", sc.caption()
    elif kind == 1:
        q, a = "Write a short caption for this picture.", sc.caption()
    elif kind == 2:
        q, a, answer_type = "List every colour you see.", _join([o.color for o in sc.objects]), AnswerType.OPEN
    elif kind == 3:
        q, a, answer_type = "List every shape you see.", _join([o.shape for o in sc.objects]), AnswerType.OPEN
    elif kind == 4:
        q, a = "What kind of picture is this?", _DOMAIN_WORDS[sc.domain]
    elif kind in (6, 7):
        attr = "colour" if kind == 6 else "shape"
        pool = list(COLORS) if kind == 6 else list(SHAPES)
        present = [o.color if kind == 6 else o.shape for o in sc.objects]
        a = str(rng.choice(present))
        wrong = [str(x) for x in rng.permutation([x for x in pool if x not in present])[:3]]
        choices = [str(x) for x in rng.permutation([a] + wrong)]
        return choice_item(f"Pick the {attr} that is in the image.", choices, a, AnswerType.MULTIPLE_CHOICE)
    elif kind == 8:
        obj = sc.objects[int(rng.integers(len(sc.objects)))]
        truth = bool(rng.integers(0, 2))
        color = obj.color if truth else str(rng.choice([c for c in COLORS if c not in {o.color for o in sc.objects}]))
        return choice_item(
            f"Answer yes or no: the picture has a {color} {obj.shape}.",
            ["yes", "no"],
            "yes" if truth else "no",
            AnswerType.YES_NO,
        )
    elif kind == 9:  # verify an attribute (yes/no), not only name it
        truth = bool(rng.integers(0, 2))
        present = {o.color for o in sc.objects}
        color = str(rng.choice(sorted(present))) if truth else str(rng.choice([c for c in COLORS if c not in present]))
        return choice_item(
            f"Answer yes or no: is anything in the picture {color}?",
            ["yes", "no"],
            "yes" if truth else "no",
            AnswerType.YES_NO,
        )
    elif kind == 10:
        q, a, answer_type = "How many things are in the picture?", str(len(sc.objects)), AnswerType.OPEN
    else:
        k = int(rng.integers(2, 4))
        scenes = [sc] + [_scene(rng) for _ in range(k - 1)]
        images = [render(s) for s in scenes]
        q = "Describe each image."
        a = "; ".join(f"image {i + 1} shows {s.caption()}" for i, s in enumerate(scenes))
    return Sample(
        id=f"public/{seed}/{index:07d}",
        images=images,
        question=q,
        choices=[],
        answer=a,
        answer_type=answer_type,
        task_id="public",
        source=PUBLIC_SOURCE,
        meta={"kind": kind, "domain": sc.domain},
    )


def _pictures_word(k: int) -> list[str]:
    return [f"picture {i + 1}" for i in range(k)]


def _primitive_item(rng: np.random.Generator, kind: int, item_id: str) -> Sample:
    """Kinds 11-18: generic questions over one picture or several (size, drawn style, position, count,
    cross-picture comparisons). Options are shuffled and answers balanced, so the text alone tells little."""
    mc, yn_, open_ = AnswerType.MULTIPLE_CHOICE, AnswerType.YES_NO, AnswerType.OPEN

    def item(images: list[Any], q: str, a: str, t: AnswerType, choices: list[str] | None = None) -> Sample:
        return Sample(
            id=item_id,
            images=images,
            question=q,
            choices=choices or ([] if t == open_ else ["yes", "no"]),
            answer=a,
            answer_type=t,
            task_id="public",
            source=PUBLIC_SOURCE,
            meta={"kind": kind, "domain": "mixed"},
        )

    def scene(n: int | None = None, **obj: Any) -> Scene:
        domain = str(rng.choice(list(DOMAINS)))
        count = int(rng.integers(1, 4)) if n is None else n
        objs = [random_obj(rng, style=str(rng.choice(STYLES)), **obj) for _ in range(count)]
        return Scene(objects=place(rng, objs), domain=domain)

    if kind == 11:  # size of one named object
        sc = scene()
        o = sc.objects[int(rng.integers(len(sc.objects)))]
        return item(
            [render(sc)],
            f"Pick the size of the {o.color} {o.shape}.",
            o.size,
            mc,
            [str(x) for x in rng.permutation(list(SIZES))],
        )
    if kind == 12:  # drawn style of a lone object (the paper domain draws outlines only)
        sc = scene(1)
        o = sc.objects[0]
        style = "outlined" if sc.domain == "paper" else o.style
        return item(
            [render(sc)], f"Pick how the {o.shape} is drawn.", style, mc, [str(x) for x in rng.permutation(STYLES)]
        )
    if kind == 13:  # horizontal position of two objects
        sc = scene(2)
        a, b = sc.objects
        while a.shape == b.shape or a.x == b.x:  # placement is symmetric: yes and no are equally likely
            sc = scene(2)
            a, b = sc.objects
        return item(
            [render(sc)],
            f"Answer yes or no: the {a.shape} is further left than the {b.shape}.",
            "yes" if a.x < b.x else "no",
            yn_,
        )
    if kind == 14:  # which of 2-3 pictures shows a colour-shape pair
        k = int(rng.integers(2, 4))
        target_i = int(rng.integers(k))
        color, shape = str(rng.choice(list(COLORS))), str(rng.choice(SHAPES))
        scenes = []
        for i in range(k):
            sc = scene()
            if i == target_i:
                sc.objects[0].color, sc.objects[0].shape = color, shape
            else:
                for o in sc.objects:
                    while (o.color, o.shape) == (color, shape):
                        o.color = str(rng.choice(list(COLORS)))
            scenes.append(sc)
        return item(
            [render(sc) for sc in scenes],
            f"Pick the picture that shows a {color} {shape}.",
            f"picture {target_i + 1}",
            mc,
            _pictures_word(k),
        )
    if kind == 15:  # do two pictures hold as many things
        same = bool(rng.integers(0, 2))
        n1 = int(rng.integers(1, 4))
        n2 = n1 if same else int(rng.choice([n for n in (1, 2, 3) if n != n1]))
        return item(
            [render(scene(n1)), render(scene(n2))],
            "Answer yes or no: both pictures hold the same number of things.",
            "yes" if same else "no",
            yn_,
        )
    if kind == 16:  # in how many of 2-4 pictures is a colour
        k = int(rng.integers(2, 5))
        color = str(rng.choice(list(COLORS)))
        hits = int(rng.integers(0, k + 1))
        chosen = set(rng.permutation(k)[:hits].tolist())
        scenes = []
        for i in range(k):
            sc = scene()
            for o in sc.objects:
                while o.color == color:
                    o.color = str(rng.choice(list(COLORS)))
            if i in chosen:
                sc.objects[int(rng.integers(len(sc.objects)))].color = color
            scenes.append(sc)
        return item(
            [render(sc) for sc in scenes], f"Count the pictures with something {color} in them.", str(hits), open_
        )
    if kind == 17:  # how many things, as a choice
        sc = scene()
        n = len(sc.objects)
        options = [str(x) for x in rng.permutation([1, 2, 3, 4])]
        return item([render(sc)], "Pick the number of things in the picture.", str(n), mc, options)
    # kind 18: which of two pictures holds more things
    n1, n2 = (int(x) for x in rng.permutation([1, 2, 3])[:2])
    return item(
        [render(scene(n1)), render(scene(n2))],
        "Pick the picture with more things in it.",
        "picture 1" if n1 > n2 else "picture 2",
        mc,
        _pictures_word(2),
    )


PERCEPTION_DOMAINS: tuple[str, ...] = (*DOMAINS, *GROUP_DOMAINS)
"""Every visual domain the world draws in: the shared ones and the two group looks (studio, comic)."""
PERCEPTION_TEXTS: tuple[str, ...] = ("A", "B", "K", "7", "OK", "HI", "NO", "42")
"""Short strings drawn large in some perception pictures, so the tower learns to read rendered text."""


@dataclass(frozen=True)
class PerceptionPicture:
    """A public picture and everything drawn in it: what the vision tower is trained and probed on."""

    scene: Scene
    domain: str  # the visual domain it is drawn in (one of PERCEPTION_DOMAINS)
    image: Any  # PIL.Image.Image, 64 x 64 RGB


def draw_in(scene: Scene, domain: str) -> Any:
    """Render ``scene`` in ``domain``: a shared domain directly, a group look through ``group_domain``."""
    if domain in GROUP_DOMAINS:
        with group_domain(domain):
            return render(Scene(scene.objects, "plain", scene.distortion, scene.text, grain=scene.grain))
    return render(Scene(scene.objects, domain, scene.distortion, scene.text, grain=scene.grain))


def _rich_objects(rng: np.random.Generator, n: int) -> list[Obj]:
    objs = []
    for _ in range(n):
        o = random_obj(rng, style=str(rng.choice(STYLES)))
        o.cracked = bool(rng.random() < 0.2)
        if rng.random() < 0.3:
            o.state = str(rng.choice(STATES[1:]))
        objs.append(o)
    marks = any(o.state != "calm" for o in objs)  # room for emanata, as the reasoning generators leave
    return place(rng, objs, margin=9 if marks else 3, pad=8 if marks else 0)


def perception_picture(index: int, seed: int = 0, single: bool = False) -> PerceptionPicture:
    """The ``index``-th public perception picture (its own random stream; no benchmark question involved).

    Every primitive the benchmark's images draw, in every visual domain: 0-4 objects of any shape,
    colour, size and drawn style, some cracked (p 0.2) or drawn shining / shaking (p 0.3), a
    distortion on a quarter of the pictures, and large rendered text on half of the empty ones.
    ``single``: a separate stream of pictures with exactly one object (the rest drawn alike), where
    every label belongs to the one object, so the tower learns what an object looks like faster.
    """
    rng = rng_for("public-perception-single" if single else "public-perception", seed, index)
    domain = str(rng.choice(PERCEPTION_DOMAINS))
    n = 1 if single else int(rng.integers(0, 5))
    objs = _rich_objects(rng, n)
    distortion = str(rng.choice(DISTORTIONS)) if rng.random() < 0.25 else None
    text = str(rng.choice(PERCEPTION_TEXTS)) if n == 0 and rng.random() < 0.5 else None
    scene = Scene(objs, "plain", distortion, text, grain=2)
    return PerceptionPicture(scene, domain, draw_in(scene, domain))


def perception_pictures(start: int, n: int, seed: int = 0, single: bool = False) -> list[PerceptionPicture]:
    """Perception pictures ``start .. start+n-1`` (prefix-stable: the same index is the same picture)."""
    return [perception_picture(i, seed, single) for i in range(start, start + n)]


def public_mix(n: int, seed: int = 0, generation: int = 1) -> list[Sample]:
    """``n`` public multimodal items: captioning and generic descriptions over the synthetic world."""
    return [public_item(i, seed, generation) for i in range(n)]


def _skill_item(rng: np.random.Generator, kind: int, item_id: str) -> Sample:
    """Kinds 19-23 (generation 2): generic questions about cracks, comic state marks and distortions, on one
    picture or several, drawn in any visual domain. Answers balanced and options shuffled."""
    mc, yn_ = AnswerType.MULTIPLE_CHOICE, AnswerType.YES_NO

    def item(images: list[Any], q: str, a: str, t: AnswerType, choices: list[str] | None = None) -> Sample:
        return Sample(
            id=item_id,
            images=images,
            question=q,
            choices=choices or ["yes", "no"],
            answer=a,
            answer_type=t,
            task_id="public",
            source=PUBLIC_SOURCE,
            meta={"kind": kind, "domain": "mixed"},
        )

    def picture(n: int, cracked: int = 0, state: str | None = None, distortion: str | None = None) -> Any:
        objs = [random_obj(rng, style=str(rng.choice(STYLES))) for _ in range(n)]
        for o in objs[:cracked]:
            o.cracked = True
        if state:
            objs[0].state = state
        objs = place(rng, objs, margin=9 if state else 3, pad=8 if state else 0)
        return draw_in(Scene(objs, "plain", distortion, grain=2), str(rng.choice(PERCEPTION_DOMAINS)))

    if kind == 19:  # is something cracked
        truth = bool(rng.integers(0, 2))
        return item(
            [picture(int(rng.integers(1, 4)), cracked=int(truth))],
            "Answer yes or no: something in this picture shows a crack.",
            "yes" if truth else "no",
            yn_,
        )
    if kind == 20:  # which state a lone object is drawn in
        state = str(rng.choice(STATES))
        return item(
            [picture(1, state=None if state == "calm" else state)],
            "Pick the word for how the object looks.",
            state,
            mc,
            [str(x) for x in rng.permutation(STATES)],
        )
    if kind == 21:  # which distortion (or none)
        options = ["none", *DISTORTIONS]
        answer = str(rng.choice(options))
        shown = [answer] + [str(x) for x in rng.permutation([o for o in options if o != answer])[:3]]
        return item(
            [picture(int(rng.integers(1, 4)), distortion=None if answer == "none" else answer)],
            "Pick the effect applied to this picture.",
            answer,
            mc,
            [str(x) for x in rng.permutation(shown)],
        )
    if kind == 22:  # which of 2-3 pictures shows a crack
        k = int(rng.integers(2, 4))
        target_i = int(rng.integers(k))
        return item(
            [picture(int(rng.integers(1, 3)), cracked=int(i == target_i)) for i in range(k)],
            "Pick the picture with a cracked object.",
            f"picture {target_i + 1}",
            mc,
            _pictures_word(k),
        )
    # kind 23: is something shining / shaking in both of two pictures
    state = str(rng.choice(STATES[1:]))
    both = bool(rng.integers(0, 2))
    first = rng.integers(0, 2) == 0
    states = [state, state] if both else ([state, None] if first else [None, state])
    return item(
        [picture(int(rng.integers(1, 3)), state=s) for s in states],
        f"Answer yes or no: something is {state} in both pictures.",
        "yes" if both else "no",
        yn_,
    )


@functools.cache
def vocabulary() -> tuple[str, ...]:
    """The world's words, as the tokenizer's corpus holds them (:func:`corpus_texts`): the base lexicon and every word
    of the task generators' answers and options (names, numbers, "o'clock"), sorted. Their surface forms only: which
    word answers which question about which picture is nothing the mix says."""
    words = set(BASE_WORDS)
    from drake_bench.benchmarks.synth.registry import iter_generators

    for gen in iter_generators():
        for i in range(20):
            item = gen.item(i, seed=0)
            for text in [item.answer, *item.choices]:
                words.update(w for w in text.lower().split() if any(ch.isalnum() for ch in w))
    return tuple(sorted(words))


def vocabulary_item(rng: np.random.Generator, item_id: str) -> Sample:
    """Kind 24 (generation 3): copy three to six words of :func:`vocabulary`, text only, so every word is once an input
    and once a target of the language model."""
    words = vocabulary()
    picked = [words[int(i)] for i in rng.choice(len(words), size=int(rng.integers(3, 7)), replace=False)]
    text = " ".join(picked)
    return Sample(
        id=item_id,
        images=[],
        question=f"Copy these words: {text}",
        choices=[],
        answer=text,
        answer_type=AnswerType.OPEN,
        task_id="public",
        source=PUBLIC_SOURCE,
        meta={"kind": 24},
    )


_SUBJECTS = ["bird", "friend", "house", "tree", "river", "stone", "book", "road", "market", "song"]


def _sentence(rng: np.random.Generator) -> str:
    c = str(rng.choice(list(COLORS)))
    s = str(rng.choice(_SUBJECTS + SHAPES))
    z = str(rng.choice(list(SIZES)))
    form = int(rng.integers(0, 3))
    if form == 0:
        return f"the {s} is {c}"
    if form == 1:
        return f"the {z} {s} is in the {str(rng.choice(['market', 'house', 'river', 'night', 'day']))}"
    return f"a {c} {s} and a {z} {str(rng.choice(_SUBJECTS))}"


def public_text_item(index: int, seed: int = 0) -> Sample:
    rng = rng_for("public-text", seed, index)
    lang = str(rng.choice(list(LANGUAGES)))
    sent = _sentence(rng)
    kind = int(rng.integers(0, 3))
    if kind == 0:
        q, a = f"Translate to English: {translate(sent, lang)}", sent
    elif kind == 1:
        q, a = f"Translate to {lang}: {sent}", translate(sent, lang)
    else:
        q, a = f"Say this in {lang} and English: {sent}", f"{translate(sent, lang)} means {sent}"
    return Sample(
        id=f"public-text/{seed}/{index:07d}",
        images=[],
        question=q,
        choices=[],
        answer=a,
        answer_type=AnswerType.FREE_TEXT,
        task_id="public-text",
        source=PUBLIC_TEXT_SOURCE,
        meta={"language": lang, "kind": kind},
    )


def public_text_mix(n: int, seed: int = 0) -> list[Sample]:
    """``n`` public text instructions (translations between English and the synthetic languages)."""
    return [public_text_item(i, seed) for i in range(n)]


def corpus_texts(per_task: int = 20, public: int = 400) -> Iterator[str]:
    """Text for training a tokenizer: every vocabulary word, public items, and items of every task generator."""
    yield " ".join(BASE_WORDS)
    for lang in LANGUAGES:
        yield translate(" ".join(BASE_WORDS), lang)
    for s in public_mix(public):
        yield s.question
        yield s.answer
    for s in public_text_mix(public):
        yield s.question
        yield s.answer
    try:
        from drake_bench.benchmarks.synth.registry import iter_generators
    except ImportError:  # pragma: no cover - registry not importable
        return
    for gen in iter_generators():
        for i in range(per_task):
            item = gen.item(i, seed=0)
            yield item.question
            yield item.answer
            yield from item.choices


def sampler(modality: str):  # noqa: ANN201 - Callable[[int], list[Sample]]
    """``n -> n public items`` of the benchmark's modality: what a method's ``FederationContext.public_data`` gives.

    The same seeded draw wherever it is called, so the evaluator and a method's worker process agree.
    """

    def get(n: int) -> list[Sample]:
        return (public_mix if modality == "multimodal" else public_text_mix)(n, seed=0)

    return get
