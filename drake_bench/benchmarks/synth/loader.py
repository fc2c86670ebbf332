"""The ``"synth"`` source loader: generates a task's candidate pool instead of reading files.

The pool is a pure function of (rule seed, task id, generator version, scale); the shared
builder then subsamples it exactly as it does for real sources.
"""

from __future__ import annotations

import contextvars
import os
from collections.abc import Iterator
from pathlib import Path

from drake_bench.benchmarks.sample import Sample
from drake_bench.benchmarks.spec import TaskSpec
from drake_bench.benchmarks.synth.registry import Generator, get_generator
from drake_bench.benchmarks.synth.render import group_domain
from drake_bench.benchmarks.synth.world import GENERATOR_VERSION, GROUP_DOMAINS
from drake_bench.errors import SourceError, UnknownNameError

DOMAIN_VERSION = 6
"""First generator version that knows ``visual_domain`` (an older one would silently draw plain scenes)."""

SCALE_ENV = "DRAKE_BENCH_SYNTH_SCALE"
_scale: contextvars.ContextVar[float | None] = contextvars.ContextVar("synth_scale", default=None)


def current_scale() -> float:
    """Scale of generated pools: ``build_synth(scale=)`` if active, else ``$DRAKE_BENCH_SYNTH_SCALE``, else 1."""
    s = _scale.get()
    if s is None:
        raw = os.environ.get(SCALE_ENV, "1")
        try:
            s = float(raw)
        except ValueError:
            raise SourceError(f"${SCALE_ENV}={raw!r} is not a number") from None
    if s <= 0:
        raise SourceError(f"synth scale must be positive, got {s}")
    return s


def pool_size(task: TaskSpec, scale: float | None = None) -> int:
    base = int(task.source.rule.get("pool_size", 250))
    return max(10, int(round(base * (current_scale() if scale is None else scale))))


class SynthLoader:
    """Source loader for embedded benchmarks (``task.source.variant`` names the generator)."""

    name = "synth"

    def load(self, task: TaskSpec, source_dir: Path | None) -> Iterator[Sample]:
        gen, version = task_generator(task)
        seed = int(task.source.rule.get("seed", 0))
        domain = task_domain(task, version)
        for i in range(pool_size(task)):
            yield _sample(task, i, seed, gen, version, domain)


def task_generator(task: TaskSpec) -> tuple[Generator, int]:
    """The generator implementation and generator version a task's manifest rule asks for."""
    rule = task.source.rule
    if not task.source.variant:
        raise SourceError(f"task {task.id!r}: synth source needs source.variant (the generator name)")
    version = int(rule.get("generator_version", GENERATOR_VERSION))
    if version > GENERATOR_VERSION:
        raise SourceError(
            f"task {task.id!r}: manifest asks for synth generator version {version}, this drake_bench has at most "
            f"{GENERATOR_VERSION}; install a newer drake_bench"
        )
    try:
        gen = get_generator(task.source.variant, version)
    except UnknownNameError as exc:
        raise SourceError(f"task {task.id!r}: {exc}") from None
    if gen.answer_type != task.answer_type:
        raise SourceError(
            f"task {task.id!r}: manifest answer_type {task.answer_type.value} but generator "
            f"{gen.name!r} (version {gen.version}) makes {gen.answer_type.value}"
        )
    return gen, version


def task_domain(task: TaskSpec, version: int) -> str | None:
    """The group visual domain a task's rule names (``visual_domain``), checked; None for the generator's own."""
    domain = task.source.rule.get("visual_domain")
    if domain is None:
        return None
    if domain not in GROUP_DOMAINS:
        raise SourceError(
            f"task {task.id!r}: source.rule.visual_domain {domain!r} is not a group visual domain; "
            f"known: {sorted(GROUP_DOMAINS)}"
        )
    if version < DOMAIN_VERSION:
        raise SourceError(
            f"task {task.id!r}: source.rule.visual_domain needs generator_version >= {DOMAIN_VERSION}, "
            f"the rule says {version}"
        )
    return str(domain)


def _sample(task: TaskSpec, index: int, seed: int, gen: Generator, version: int, domain: str | None = None) -> Sample:
    with group_domain(domain):
        it = gen.item(index, seed=seed, task_id=task.id, version=version)
    return Sample(
        id=f"{task.id}/{index:06d}",
        images=it.images,
        question=it.question,
        choices=it.choices,
        answer=it.answer,
        answer_type=gen.answer_type,
        task_id=task.id,
        source=f"{task.source.dataset}/{task.source.variant}",
        meta={**it.meta, "index": index},
    )


def fresh_items(task: TaskSpec, n: int, seed: int) -> list[Sample]:
    """``n`` items of an embedded task drawn with another ``seed`` than its pool's: more data of the same
    task for studies outside the benchmark (probes, transfer measurements), never its train or test split
    when ``seed`` differs from the manifest's rule seed."""
    if seed == int(task.source.rule.get("seed", 0)):
        raise SourceError(f"task {task.id!r}: seed {seed} is the benchmark pool's own seed; pick another")
    gen, version = task_generator(task)
    domain = task_domain(task, version)
    return [_sample(task, i, seed, gen, version, domain) for i in range(n)]


SYNTH_LOADER = SynthLoader()
