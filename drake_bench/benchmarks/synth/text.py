"""fedllm-synth generators: text-only instruction following, scored by Rouge-L (Fed-LLM-Large analogue).

Three sources like Fed-LLM-Large's: "flan" (English task types), "aya" (six synthetic
languages, each with its own vocabulary) and "chatbot" (open requests answered from the
synthetic world's facts). Responses are one or two templated sentences.
"""

from __future__ import annotations

import numpy as np

from drake_bench.benchmarks.sample import AnswerType
from drake_bench.benchmarks.synth.registry import Item, generator
from drake_bench.benchmarks.synth.world import (
    COLORS,
    CORNERS,
    DISH_ORIGIN,
    DISHES,
    LANGUAGES,
    NUMBER_WORDS,
    PLACES,
    SHAPES,
    an,
    plural,
    translate,
)

FT = AnswerType.FREE_TEXT
COLS = list(COLORS)
WORDS = ["bird", "friend", "house", "tree", "river", "stone", "book", "road", "market", "song", "water", "bread"]
FACTS = {"tree": "green", "river": "blue", "stone": "purple", "bread": "orange", "bird": "red", "book": "yellow"}
DISH_OF = {v: k for k, v in DISHES.items()}


def T(name: str, description: str):
    return generator(name, "text", FT, "none", (0, 0), description)


def _words(rng: np.random.Generator, k: int) -> list[str]:
    return [str(w) for w in rng.choice(WORDS, size=k, replace=False)]


@T("flan-sort", "Sort 3-5 words alphabetically (Fed-FLAN analogue).")
def flan_sort(rng: np.random.Generator) -> Item:
    w = _words(rng, int(rng.integers(3, 6)))
    return Item(
        [], f"Sort these words alphabetically: {', '.join(w)}.", f"The sorted words are {', '.join(sorted(w))}."
    )


@T("flan-reverse", "Reverse the order of 3-5 words (Fed-FLAN analogue).")
def flan_reverse(rng: np.random.Generator) -> Item:
    w = _words(rng, int(rng.integers(3, 6)))
    return Item(
        [], f"Write these words in reverse order: {' '.join(w)}.", f"In reverse order: {' '.join(reversed(w))}."
    )


@T("flan-arith", "Add two small numbers and answer in a sentence (Fed-FLAN analogue).")
def flan_arith(rng: np.random.Generator) -> Item:
    a, b = int(rng.integers(1, 6)), int(rng.integers(1, 6))
    return Item(
        [],
        f"What is {NUMBER_WORDS[a]} plus {NUMBER_WORDS[b]}?",
        f"{NUMBER_WORDS[a]} plus {NUMBER_WORDS[b]} is {NUMBER_WORDS[a + b]}.",
    )


@T("flan-plural", "Give the plural of two nouns (Fed-FLAN analogue).")
def flan_plural(rng: np.random.Generator) -> Item:
    a, b = (str(x) for x in rng.choice(WORDS + SHAPES, size=2, replace=False))
    return Item(
        [],
        f"Give the plural of {a} and {b}.",
        f"The plural of {a} is {plural(a)} and the plural of {b} is {plural(b)}.",
    )


@T("flan-corners", "State how many corners a shape has (Fed-FLAN knowledge analogue).")
def flan_corners(rng: np.random.Generator) -> Item:
    s = str(rng.choice(SHAPES))
    n = CORNERS[s]
    return Item(
        [],
        f"How many corners does {an(s)} have?",
        f"{an(s).capitalize()} has {NUMBER_WORDS[n] if n <= 10 else n} corners.",
    )


@T("flan-describe", "Describe an object given its size, colour and shape (Fed-FLAN data-to-text analogue).")
def flan_describe(rng: np.random.Generator) -> Item:
    s, c, z = str(rng.choice(SHAPES)), str(rng.choice(COLS)), str(rng.choice(["small", "large"]))
    return Item([], f"Write a sentence from: shape={s}, colour={c}, size={z}.", f"This is {an(z)} {c} {s}.")


@T("chat-recipe", "Chat: how to make a dish of the synthetic world (Fed-ChatbotIT analogue).")
def chat_recipe(rng: np.random.Generator) -> Item:
    d = str(rng.choice(sorted(DISH_OF)))
    c, s = DISH_OF[d]
    return Item(
        [],
        f"Can you tell me how to make {d}?",
        f"Sure! To make {d}, put a few {c} {plural(s)} on a plate. It is a dish from {DISH_ORIGIN[d]}.",
    )


@T("chat-place", "Chat: what a place of the synthetic world is known for (Fed-ChatbotIT analogue).")
def chat_place(rng: np.random.Generator) -> Item:
    p = str(rng.choice(PLACES))
    ds = sorted(d for d, o in DISH_ORIGIN.items() if o == p)
    return Item(
        [],
        f"I am travelling to {p}. What should I eat there?",
        f"In {p} you should try {' and '.join(ds)}. Enjoy your trip!",
    )


@T("chat-advice", "Chat: advice on painting an object a liked colour (Fed-ChatbotIT analogue).")
def chat_advice(rng: np.random.Generator) -> Item:
    w, c = str(rng.choice(WORDS)), str(rng.choice(COLS))
    return Item(
        [],
        f"I like {c}. What colour should I paint my {w}?",
        f"Paint your {w} {c}, since you like {c}. A {c} {w} will make you happy.",
    )


def _aya_facts(lang: str):
    def fn(rng: np.random.Generator) -> Item:
        w = str(rng.choice(sorted(FACTS)))
        q = translate(f"what colour is the {w}", lang) + " ?"
        return Item([], q, translate(f"the {w} is {FACTS[w]}", lang) + " .")

    return fn


def _aya_count(lang: str):
    def fn(rng: np.random.Generator) -> Item:
        s, n = str(rng.choice(SHAPES)), int(rng.integers(1, 6))
        items = " ".join([translate(s, lang)] * n)
        q = translate("how many", lang) + f" : {items} ?"
        return Item([], q, translate(f"{NUMBER_WORDS[n]} {s}", lang) + " .")

    return fn


for _lang in LANGUAGES:
    T(f"aya-{_lang}-facts", f"Answer a world-fact question in the synthetic language {_lang} (Fed-Aya analogue).")(
        _aya_facts(_lang)
    )
    T(f"aya-{_lang}-count", f"Count repeated words and answer in {_lang} (Fed-Aya analogue).")(_aya_count(_lang))

FLAN = ["flan-sort", "flan-reverse", "flan-arith", "flan-plural", "flan-corners", "flan-describe"]
CHAT = ["chat-recipe", "chat-place", "chat-advice"]
