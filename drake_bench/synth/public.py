"""Public data over the synthetic world: the stand-in for LLaVA-Instruct-158K.

Model pretraining and methods that need public data (distillation, alignment) use
these mixes. Their formats (captions, lists of colours/shapes, per-image
descriptions, translations) are disjoint from every benchmark task's question
templates, so public data teaches the world and its words but no benchmark task.

Like LLaVA-1.5's instruction mix (A-OKVQA-style multiple choice, VQAv2/GQA yes/no and
counting questions), about 40% of the multimodal items are generic multiple-choice, yes/no and
counting questions (which colour / which shape is in the picture, a colour-shape statement, is
anything of a colour, how many things). Without them the frozen bases never see the choice
format, and can name an attribute but not verify one, so LoRA fine-tuning spends the whole
federation learning the format instead of the tasks.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ..sample import AnswerType, Sample
from .render import render
from .world import (
    BASE_WORDS, COLORS, DOMAINS, LANGUAGES, SHAPES, SIZES, STYLES, Scene, place, random_obj, rng_for, translate,
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


def public_item(index: int, seed: int = 0) -> Sample:
    """The ``index``-th public multimodal item (independent of ``n``: mixes of growing n are prefixes)."""
    rng = rng_for("public", seed, index)
    kind = int(rng.integers(0, 11))
    sc = _scene(rng)
    images = [render(sc)]
    answer_type = AnswerType.FREE_TEXT

    def choice_item(question: str, choices: list[str], answer: str, kind_type: AnswerType) -> Sample:
        return Sample(
            id=f"public/{seed}/{index:07d}", images=images, question=question, choices=choices, answer=answer,
            answer_type=kind_type, task_id="public", source=PUBLIC_SOURCE, meta={"kind": kind, "domain": sc.domain},
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
        return choice_item(f"Answer yes or no: the picture has a {color} {obj.shape}.", ["yes", "no"],
                           "yes" if truth else "no", AnswerType.YES_NO)
    elif kind == 9:  # verify an attribute (yes/no), not only name it
        truth = bool(rng.integers(0, 2))
        present = {o.color for o in sc.objects}
        color = str(rng.choice(sorted(present))) if truth else str(rng.choice([c for c in COLORS if c not in present]))
        return choice_item(f"Answer yes or no: is anything in the picture {color}?", ["yes", "no"],
                           "yes" if truth else "no", AnswerType.YES_NO)
    elif kind == 10:
        q, a, answer_type = "How many things are in the picture?", str(len(sc.objects)), AnswerType.OPEN
    else:
        k = int(rng.integers(2, 4))
        scenes = [sc] + [_scene(rng) for _ in range(k - 1)]
        images = [render(s) for s in scenes]
        q = "Describe each image."
        a = "; ".join(f"image {i + 1} shows {s.caption()}" for i, s in enumerate(scenes))
    return Sample(
        id=f"public/{seed}/{index:07d}", images=images, question=q, choices=[], answer=a,
        answer_type=answer_type, task_id="public", source=PUBLIC_SOURCE, meta={"kind": kind, "domain": sc.domain},
    )


def public_scenes(n: int, seed: int = 0, start: int = 0) -> list[Scene]:
    """``n`` random public scenes (the same world as the public mix, a separate random stream).

    Vision pretraining (:func:`drake_bench.models.pretrain.align_vision`) learns the world's
    attributes from them; no benchmark question template is involved.
    """
    return [_scene(rng_for("public-scene", seed, i)) for i in range(start, start + n)]


def public_objects(start: int, n: int, seed: int = 0) -> list[Scene]:
    """Single-object public scenes ``start .. start+n-1`` (a separate random stream, any domain).

    The shared vision tower (:mod:`drake_bench.models.vision`) learns each object's shape,
    colour, size and style from them: one object per picture makes every label unambiguous,
    which is what lets a tiny ViT learn shapes at all (on multi-object scenes alone it stays at
    chance; docs/findings/synth-generator-history.md).
    """
    out = []
    for i in range(start, start + n):
        rng = rng_for("public-object", seed, i)
        domain = str(rng.choice(list(DOMAINS)))
        out.append(Scene(objects=place(rng, [random_obj(rng, style=str(rng.choice(STYLES)))]), domain=domain))
    return out


def public_mix(n: int, seed: int = 0) -> list[Sample]:
    """``n`` public multimodal items: captioning and generic descriptions over the synthetic world."""
    return [public_item(i, seed) for i in range(n)]


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
        id=f"public-text/{seed}/{index:07d}", images=[], question=q, choices=[], answer=a,
        answer_type=AnswerType.FREE_TEXT, task_id="public-text", source=PUBLIC_TEXT_SOURCE,
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
        from .registry import iter_generators
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
