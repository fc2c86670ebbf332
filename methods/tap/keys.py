"""TAP's task keys and components on drake_bench's clients: what the paper keys on, rebuilt from what a method may see.

The paper's clients are mixture-of-experts stacks whose components are keyed by **modality** and **task** (TAP
§3.1, §5.1, A.2): a MoTE expert E[m][t] per (modality, task type), modality-shared and task-shared experts,
a shared-shared expert, per-task heads. A forward pass for task o of type t on modalities M_o goes through four
routes, shared-shared, shared-task, modality-task and modality-shared, whose pooled outputs are averaged.

drake_bench's methods never see a task's identity (the leakage guard: a :class:`~drake_bench.benchmarks.sample.MethodSample`
carries images, question, choices, answer and ``answer_type``, never a task id). What they do see is exactly
what the paper's keys are made of:

* the **input modality** of an item, from its number of images: ``text`` (none), ``image`` (one), ``images``
  (several). The paper's modalities are image and text; a multi-image item is the nearest visible thing to a
  third input kind and gets its own key, because drake-synth's multi-image tasks (comparisons, sequences) are
  unlike its single-image ones;
* the **output format**, from ``answer_type``: ``yes_no``, ``multiple_choice``, ``open``, ``free_text``. It
  plays the part of the paper's task type: the paper's types are image/text classification and image/text
  generation; here every client generates text, and the format is what distinguishes a two-way choice, a
  k-way choice, a short answer and a long one.

A **task key** ``o`` is the pair ``(modality, format)`` (``"image/yes_no"``). It is coarser than a task: two tasks
of one client with the same modality and format share a key, their losses are one history value and their
components are replaced together (the paper counts MMLU's three subsets as one text-generation task for the same
reason: one task type, one set of experts).
What this changes: replacement decisions are per key, not per task; two clients' different tasks that share a key
share that key's experts in the server's average (as the paper's clients share a task type's stacks).

Components (one LoRA adapter each, :func:`components`): ``shared``, ``mod-<m>`` per modality, ``fmt-<f>`` per
format and ``exp-<m>-<f>`` per pair. The forward path of key (m, f) (:func:`path`) is the four routes of the paper:
shared-shared (``shared``), modality-shared (``mod-m``), shared-task (``fmt-f``) and modality-task (``exp-m-f``).
The paper's heads (one per dataset) have no counterpart: every client answers through the language model's own
head, which stays frozen.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeVar

from drake_bench.benchmarks.sample import AnswerType, MethodSample

MODALITIES: tuple[str, ...] = ("text", "image", "images")
"""Input modality of an item by its number of images: none, one, several."""

FORMATS: tuple[str, ...] = tuple(t.value for t in AnswerType)
"""Output formats, as the items' ``answer_type`` names them: yes_no, multiple_choice, open, free_text."""

CHOICE_FORMATS: frozenset[str] = frozenset({AnswerType.YES_NO.value, AnswerType.MULTIPLE_CHOICE.value})
"""The formats that stand for the paper's classification tasks (a fixed set of answers); the others (open,
free_text) stand for its text generation."""

SHARED = "shared"


def modality_of(sample: MethodSample) -> str:
    """``text``, ``image`` or ``images`` by the item's number of images."""
    n = len(sample.images)
    return MODALITIES[min(n, 2)]


def format_of(sample: MethodSample) -> str:
    """The item's output format (its ``answer_type`` value)."""
    t = sample.answer_type
    return t.value if isinstance(t, AnswerType) else str(t)


def key_of(sample: MethodSample) -> str:
    """The item's task key ``"<modality>/<format>"``."""
    return f"{modality_of(sample)}/{format_of(sample)}"


def split_key(key: str) -> tuple[str, str]:
    modality, _, fmt = key.partition("/")
    if modality not in MODALITIES or fmt not in FORMATS:
        raise ValueError(f"not a TAP task key: {key!r} (modality in {MODALITIES}, format in {FORMATS})")
    return modality, fmt


def all_keys() -> list[str]:
    return [f"{m}/{f}" for m in MODALITIES for f in FORMATS]


def components(modalities: Sequence[str] = MODALITIES) -> list[str]:
    """Every component of a federation whose items have ``modalities`` (peft adapter names: no dots, which peft's
    module dicts refuse), in a fixed order. A text-only federation (``text``) has 10, a multimodal one 20."""
    return (
        [SHARED]
        + [f"mod-{m}" for m in modalities]
        + [f"fmt-{f}" for f in FORMATS]
        + [f"exp-{m}-{f}" for m in modalities for f in FORMATS]
    )


def modalities_of(benchmark_modality: str) -> tuple[str, ...]:
    """The input modalities a benchmark's items can have: a text benchmark's items carry no images (its clients may
    be text-only models), so only ``text``; a multimodal benchmark's may have none, one or several."""
    return ("text",) if benchmark_modality == "text" else MODALITIES


def path(key: str) -> tuple[str, ...]:
    """The components the forward pass of ``key`` goes through: the paper's four routes (shared-shared,
    modality-shared, shared-task, modality-task)."""
    m, f = split_key(key)
    return (SHARED, f"mod-{m}", f"fmt-{f}", f"exp-{m}-{f}")


PATH_LENGTH = 4
"""Every key's path has four components (the paper's four routes)."""


def paths(keys: Iterable[str]) -> list[str]:
    """The union of the paths of ``keys``, in :func:`components` order."""
    used = {c for k in keys for c in path(k)}
    return [c for c in components() if c in used]


def is_choice(key: str) -> bool:
    """Whether the key's format stands for the paper's classification (yes/no, multiple choice)."""
    return split_key(key)[1] in CHOICE_FORMATS


T = TypeVar("T")


def group_by_key(items: Sequence[T], key=key_of) -> dict[str, list[int]]:
    """Positions of ``items`` per task key, keys in order of first appearance (a batch's sub-batches)."""
    out: dict[str, list[int]] = {}
    for i, s in enumerate(items):
        out.setdefault(key(s), []).append(i)
    return out
