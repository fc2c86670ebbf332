"""The unit of data: one question about zero or more images, with its answer.

Two views exist. :class:`Sample` is the full record the builder writes and the
evaluator reads. :class:`MethodSample` is what a method plugin receives while
training: the same content minus everything that identifies the task, so the
protocol's promise "methods never see task identities" holds by construction.
"""

from __future__ import annotations

import hashlib
import hmac
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from drake_bench.errors import LeakageError


class AnswerType(str, Enum):
    """How an answer is scored (see drake_bench.evaluation.scoring)."""

    MULTIPLE_CHOICE = "multiple_choice"  # exact option match (letter or option text)
    YES_NO = "yes_no"  # scored as 2-way multiple choice
    OPEN = "open"  # short open answer: token-level correctness
    FREE_TEXT = "free_text"  # long response: Rouge-L


class Sample(BaseModel):
    """One benchmark item. ``images`` holds PIL images (decoded lazily by the store).

    The evaluator's full record; its fields are :class:`MethodSample`'s (see there for their types and sizes) plus
    the task identity, source and metadata a method never sees."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True, frozen=True)

    id: str = Field(description="Stable id, unique within the benchmark.")
    images: list[Any] = Field(default_factory=list, description="PIL images, in prompt order.")
    question: str = Field(description="Question or instruction shown to the model.")
    choices: list[str] = Field(default_factory=list, description="Options for multiple-choice / yes-no items.")
    answer: str = Field(description="Ground truth: option text for choice items, the answer string otherwise.")
    answer_type: AnswerType
    task_id: str
    source: str = Field(description="Source dataset (and variant) the item came from.")
    meta: dict[str, Any] = Field(default_factory=dict, description="Source metadata kept for partition rules.")

    def as_query(self, uid_key: bytes | None = None) -> "MethodSample":
        """The item as shown to ``predict``: no answer, no task identity."""
        return self.for_method(uid_key).model_copy(update={"answer": ""})

    def for_method(self, uid_key: bytes | None = None) -> "MethodSample":
        """The item as a method sees it. With ``uid_key`` (the evaluator's per-run secret) the uid is an
        HMAC of the item id, so it cannot be inverted into a task name and row by hashing public names."""
        if uid_key is not None:
            uid = hmac.new(uid_key, self.id.encode(), hashlib.sha256).hexdigest()[:16]
        else:
            uid = hashlib.sha1(self.id.encode()).hexdigest()[:16]
        return MethodSample(
            uid=uid,
            images=self.images,
            question=self.question,
            choices=self.choices,
            answer=self.answer,
            answer_type=self.answer_type,
        )


_HIDDEN = ("task_id", "source", "meta", "id")


class MethodSample(BaseModel):
    """A training item as a method sees it: no task id, no source, an opaque uid.

    What a batch of :meth:`ClientStream.round <drake_bench.streams.stream.ClientStream.round>` and a plugin's
    ``client_update`` hold, and, with ``answer`` blanked, what ``predict`` (and
    :func:`drake_bench.evaluate_client`'s ``predict_fn``) is asked about (:meth:`Sample.as_query`). Frozen.

    Attributes:
        uid: 16 hexadecimal characters, an opaque id of the item: a hash of its id. Where the evaluator (or
            ``evaluate_client``) hands items out it is keyed with a secret drawn per run (per call), so it cannot be
            turned back into a task name and row, and is stable within the run only; a ``load_client_stream`` batch
            gives the same unkeyed uid for an item every time (stable across runs and machines, so usable as a
            cache key), which is not secret: hashing a task's item ids finds them. The stream is your own code's
            view; what a plugin is shown is keyed.
        images: ``list`` of PIL images (``PIL.Image.Image``), in prompt order; ``[]`` for text-only benchmarks
            (``modality == "text"``, e.g. ``fedllm-synth``, ``fed-llm-large``, ``fed-aya``). Decoded from the built
            shards when the item is read; treat them as read-only (``.copy()`` or ``.convert(...)`` before drawing on
            one). The embedded synthetic benchmarks (``drake-synth``, ``hflb-synth``) give 64x64 ``RGB`` images
            decoded from lossless WebP (``image.format == "WEBP"``), 1 to 5 per item in ``drake-synth``, one in
            ``hflb-synth``; built real benchmarks keep each source's own images (JPEG or PNG, the source's size and
            mode, so convert with ``.convert("RGB")`` and resize to what a model wants). How many a task gives is its
            ``TaskSpec.num_images``.
        question: the question or instruction shown to the model (a ``str``; multilingual for Fed-Aya).
        choices: the options of a ``multiple_choice`` or ``yes_no`` item, as strings in their order (``["yes",
            "no"]`` for the yes/no items of the embedded benchmarks; 2 to 6 options in ``drake-synth``); ``[]`` for
            ``open`` and ``free_text`` items.
        answer: the ground truth as a ``str``: for choice items the text of the correct option (one of ``choices``,
            not its letter), a short answer for ``open`` items, a reference response for ``free_text``. ``""`` in a
            query (what ``predict`` receives): answers never leave the evaluator.
        answer_type: an :class:`AnswerType`, the rule the answer is scored by
            (:func:`drake_bench.evaluation.scoring.score_prediction`): the option named by a response for
            ``multiple_choice`` / ``yes_no`` (its text, or its letter A, B, ...), token F1 of the response's opening
            for ``open`` (token recall under the scoring rules 1.0 of the committed boards), Rouge-L for
            ``free_text``.

    Task identity, source and metadata are hidden: reading ``task_id``, ``source``, ``meta`` or ``id`` raises
    :class:`~drake_bench.errors.LeakageError`.
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True, frozen=True)

    uid: str
    images: list[Any] = Field(default_factory=list)
    question: str
    choices: list[str] = Field(default_factory=list)
    answer: str
    answer_type: AnswerType

    def __getattr__(self, name: str) -> Any:
        if name in _HIDDEN:
            raise LeakageError(
                f"MethodSample.{name} is hidden from methods: the protocol forbids task identities and "
                "source metadata during training (only the evaluator's view has them)"
            )
        return super().__getattr__(name)  # type: ignore[misc]
