"""Small fixtures for fast tests of code built on the zoo (no synth data, no pretraining).

Method and evaluator tests need real tiny models but not a minute of pretraining:
:func:`toy_loader` builds a randomly initialised zoo model with a tokenizer trained
on :func:`toy_samples`, and has ``load_base``'s signature so it plugs into
``ModelPool(..., loader=toy_loader)``.
"""

from __future__ import annotations

import functools
from typing import Any

from drake_bench.benchmarks.sample import AnswerType, Sample
from drake_bench.models.prompting import LETTERS, MC_INSTRUCTION, OPEN_INSTRUCTION, build_prompt

_COLORS = {"red": (220, 30, 30), "green": (30, 200, 30), "blue": (30, 30, 220), "yellow": (230, 220, 20)}


def toy_image(color: str, size: int = 64):
    """A 64x64 RGB image: a coloured square on grey (like the synthetic renderer's output)."""
    from PIL import Image, ImageDraw

    im = Image.new("RGB", (size, size), (128, 128, 128))
    ImageDraw.Draw(im).rectangle([16, 16, 47, 47], fill=_COLORS[color])
    return im


def toy_samples(n: int = 8, seed: int = 0, with_images: bool = True) -> list[Sample]:
    """``n`` items cycling through the four answer types, with 0-3 images each."""
    import random

    rng = random.Random(seed)
    names = sorted(_COLORS)
    out = []
    for i in range(n):
        col = rng.choice(names)
        kind = [AnswerType.MULTIPLE_CHOICE, AnswerType.YES_NO, AnswerType.OPEN, AnswerType.FREE_TEXT][i % 4]
        n_img = (1 + i % 3) if with_images else 0
        imgs = [toy_image(col) for _ in range(n_img)]
        if kind == AnswerType.MULTIPLE_CHOICE:
            choices = rng.sample(names, 3)
            if col not in choices:
                choices[rng.randrange(3)] = col
            q, a = "What colour is the square?", col
        elif kind == AnswerType.YES_NO:
            other = rng.choice(names)
            choices, q, a = ["yes", "no"], f"Is the square {other}?", "yes" if other == col else "no"
        elif kind == AnswerType.OPEN:
            choices, q, a = [], "Name the colour of the square.", col
        else:
            choices, q, a = [], "Describe the picture.", f"a {col} square on a grey background"
        if not with_images:  # text-only items carry the fact in the question
            q = f"The square is {col}. {q}"
        out.append(
            Sample(
                id=f"toy/{seed}/{i}",
                images=imgs,
                question=q,
                choices=choices,
                answer=a,
                answer_type=kind,
                task_id="toy",
                source="toy",
            )
        )
    return out


@functools.lru_cache(maxsize=2)
def toy_tokenizer(vocab_size: int = 512):
    """A byte-level BPE trained on toy prompts (cached per process)."""
    from drake_bench.models.tokenizer import train_tokenizer

    texts = [build_prompt(s) + " " + s.answer for s in toy_samples(64, 0)]
    texts += [MC_INSTRUCTION, OPEN_INSTRUCTION, " ".join(LETTERS)]
    return train_tokenizer(texts * 4, vocab_size)


@functools.lru_cache(maxsize=2)
def toy_processor():
    from drake_bench.models.tokenizer import make_processor

    return make_processor(toy_tokenizer())


def toy_loader(name: str, device: str = "cpu", dtype: Any = None, *, seed: int = 0):
    """``load_base`` stand-in: a frozen, randomly initialised tiny model and a toy processor."""
    from drake_bench.models.zoo import build_tiny, model_info

    model = build_tiny(name, seed=seed)
    if dtype is not None:
        model.to(dtype)
    model.to(device).eval().requires_grad_(False)
    return model, (toy_processor() if model_info(name).multimodal else toy_tokenizer())
