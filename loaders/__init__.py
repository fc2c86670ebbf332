"""Source loaders: read a benchmark source as its publisher distributes it into drake_bench samples.

A loader is any object with a ``name`` and a ``load(task, source_dir)`` method (see
:class:`SourceLoader`). Register with :func:`register_loader`; the manifest's
``task.source.loader`` names which loader builds a task. Name clashes are errors.
Third-party loaders register through the ``drake_bench.loaders`` entry-point group.

Two optional members serve ``drake-bench sources check`` and the build's messages:
``layout(task) -> list[Need]`` (the files a task reads, see :class:`~drake_bench.loaders._common.Need`)
and ``unconfirmed`` (a tuple of sentences naming the parts of the source format that could not be
checked against the publisher's files; a build warns with them). See docs/data-sources.md.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from importlib.metadata import entry_points
from pathlib import Path
from typing import Protocol, runtime_checkable

from drake_bench.benchmarks.sample import Sample
from drake_bench.benchmarks.spec import TaskSpec
from drake_bench.errors import DrakeBenchError, UnknownNameError


@runtime_checkable
class SourceLoader(Protocol):
    """Reads one task's candidate items (after the task's partition rule) from a source."""

    name: str

    def load(self, task: TaskSpec, source_dir: Path | None) -> Iterator[Sample]:
        """Yield every item of ``task`` found in ``source_dir``; raise SourceError naming the file at fault."""
        ...


def loader_layout(loader: object, task: TaskSpec) -> list | None:
    """The loader's ``layout(task)``, or None when it does not describe one."""
    layout = getattr(loader, "layout", None)
    return list(layout(task)) if callable(layout) else None


_LOADERS: dict[str, SourceLoader | Callable[[], SourceLoader]] = {}
# Built-in loaders live in sibling modules; importing them registers them lazily.
_BUILTIN_MODULES: list[str] = [
    "synth",
    "llava_conversation",
    "seed_bench2",
    "iconqa",
    "worldcuisines",
    "vqa_simple",
    "gqa",
    "vqa_v2",
    "snli_ve",
    "coco_qa",
    "nlvr2",
    "text_sources",
    "eval_sets",
]
_discovered = False


def register_loader(loader: SourceLoader) -> SourceLoader:
    if loader.name in _LOADERS and _LOADERS[loader.name] is not loader:
        raise DrakeBenchError(f"source loader name clash: {loader.name!r} is already registered")
    _LOADERS[loader.name] = loader
    return loader


def _discover() -> None:
    global _discovered
    if _discovered:
        return
    _discovered = True
    for mod in _BUILTIN_MODULES:
        importlib.import_module(f"{__name__}.{mod}")
    for ep in entry_points(group="drake_bench.loaders"):
        obj = ep.load()
        register_loader(obj() if isinstance(obj, type) else obj)


def get_loader(name: str) -> SourceLoader:
    _discover()
    if name not in _LOADERS:
        raise UnknownNameError("source loader", name, sorted(_LOADERS))
    return _LOADERS[name]  # type: ignore[return-value]


def available_loaders() -> list[str]:
    _discover()
    return sorted(_LOADERS)
