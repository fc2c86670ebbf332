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

from .errors import LeakageError


class AnswerType(str, Enum):
    """How an answer is scored (see drake_bench.evaluation.scoring)."""

    MULTIPLE_CHOICE = "multiple_choice"  # exact option match (letter or option text)
    YES_NO = "yes_no"  # scored as 2-way multiple choice
    OPEN = "open"  # short open answer: token-level correctness
    FREE_TEXT = "free_text"  # long response: Rouge-L


class Sample(BaseModel):
    """One benchmark item. ``images`` holds PIL images (decoded lazily by the store)."""

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
    """A training item as a method sees it: no task id, no source, an opaque uid."""

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
