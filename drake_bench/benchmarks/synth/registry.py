"""Registry of task generators: name -> how to make the ``index``-th item of a task.

A generator is a pure function of a numpy Generator; the item rng is seeded from
(benchmark seed, task id, generator version, index), so items are independent and
a pool at a larger scale extends the pool at a smaller one.

A generator name can hold several implementations, each tagged with the generator version
that introduced it. A manifest's task rule names the version it was built with, and the
registry serves the newest implementation not newer than that: an older benchmark version
(``drake-synth@1.3.0``) keeps building byte for byte after a generator is redesigned. Superseded
implementations live in :mod:`drake_bench.benchmarks.synth.legacy`, which :func:`get_generator` loads with the
family modules.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from PIL import Image

from drake_bench.benchmarks.sample import AnswerType
from drake_bench.benchmarks.synth.world import BASE_VERSION, GENERATOR_VERSION, rng_for
from drake_bench.errors import UnknownNameError


@dataclass
class Item:
    """One generated item before it becomes a :class:`~drake_bench.benchmarks.sample.Sample`."""

    images: list[Image.Image]
    question: str
    answer: str
    choices: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Generator:
    name: str
    family: str
    answer_type: AnswerType
    images: Literal["none", "single", "multi"]
    num_images: tuple[int, int]
    description: str
    fn: Callable[[np.random.Generator], Item]
    version: int = BASE_VERSION
    """Generator version that introduced this implementation (its items' rng seed uses it by default)."""

    def item(self, index: int, seed: int = 0, task_id: str | None = None, version: int | None = None) -> Item:
        it = self.fn(rng_for("item", seed, task_id or self.name, self.version if version is None else version, index))
        if self.answer_type in (AnswerType.MULTIPLE_CHOICE, AnswerType.YES_NO) and it.answer not in it.choices:
            raise AssertionError(f"generator {self.name!r}: answer {it.answer!r} not among choices {it.choices}")
        return it


_GENERATORS: dict[str, list[Generator]] = {}
"""name -> implementations, oldest first."""
_FAMILY_MODULES = ["relation", "reasoning", "vqa", "unseen", "hflb", "text", "legacy"]


def generator(
    name: str,
    family: str,
    answer_type: AnswerType,
    images: str,
    num_images: tuple[int, int],
    description: str,
    version: int = BASE_VERSION,
):
    """Decorator registering a generator function under ``name``, as the implementation introduced in ``version``."""

    def deco(fn: Callable[[np.random.Generator], Item]) -> Callable[[np.random.Generator], Item]:
        if version > GENERATOR_VERSION:
            raise ValueError(
                f"synth generator {name!r}: version {version} is newer than GENERATOR_VERSION {GENERATOR_VERSION}"
            )
        if any(g.version == version for g in _GENERATORS.get(name, [])):
            raise ValueError(f"duplicate synth generator {name!r} for generator version {version}")
        impls = _GENERATORS.setdefault(name, [])  # only once the registration is valid: a refusal leaves no trace
        impls.append(Generator(name, family, answer_type, images, num_images, description, fn, version))  # type: ignore[arg-type]
        impls.sort(key=lambda g: g.version)
        return fn

    return deco


def _load_all() -> None:
    import importlib

    for mod in _FAMILY_MODULES:
        try:
            importlib.import_module(f"{__package__}.{mod}")
        except ModuleNotFoundError as exc:  # a family not written yet
            if exc.name != f"{__package__}.{mod}":
                raise


def get_generator(name: str, version: int | None = None) -> Generator:
    """The implementation of ``name`` a manifest built with generator ``version`` uses (default: the newest)."""
    _load_all()
    if name not in _GENERATORS:
        raise UnknownNameError("synth generator", name, sorted(_GENERATORS))
    impls = _GENERATORS[name]
    if version is None:
        return impls[-1]
    usable = [g for g in impls if g.version <= version]
    if not usable:
        raise UnknownNameError(
            "generator version", version, [str(g.version) for g in impls], where=f"synth generator {name!r}"
        )
    return usable[-1]


def iter_generators(every_version: bool = False) -> Iterator[Generator]:
    """The newest implementation of every generator, by name (``every_version``: all of them, oldest first)."""
    _load_all()
    for k in sorted(_GENERATORS):
        yield from (_GENERATORS[k] if every_version else _GENERATORS[k][-1:])


# -- helpers shared by generator modules -------------------------------------------
YES_NO = ["yes", "no"]


def yn(flag: bool) -> str:
    return "yes" if flag else "no"


def mc(rng: np.random.Generator, answer: str, pool: list[str], k: int = 4) -> list[str]:
    """``k`` shuffled options: the answer plus distinct distractors drawn from ``pool``."""
    others = [p for p in dict.fromkeys(pool) if p != answer]
    picks = list(rng.choice(others, size=min(k - 1, len(others)), replace=False))
    opts = [answer] + [str(p) for p in picks]
    return [opts[i] for i in rng.permutation(len(opts))]


def image_options(n: int) -> list[str]:
    return [f"image {i + 1}" for i in range(n)]
