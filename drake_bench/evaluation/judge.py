"""LLM judges: free-text answers rated 1-10 against a reference, the Fed-Aya protocol.

The FedMosaic paper scores Fed-Aya with a GPT-4 judge that rates each response 1 to 10 against a human reference,
with the prompt of the Aya paper (Singh et al. 2024; FedMosaic Fig. 9), and parses the rating from ``[[n]]``. A
paid API judge is neither reproducible (the model behind a name changes) nor available offline, so drake_bench
scores free text with Rouge-L by default (docs/design-notes.md#offline-judge) and takes a judge only when a run
asks for one (``RunConfig.judge``, ``drake-bench run --judge``):

* a causal LM by zoo name, Hub id or local path (:class:`drake_bench.models.judge.ModelJudge`: the prompt below,
  the tokenizer's chat template when it has one, greedy decoding), whose identity records the weights it loaded;
* any object with an ``identity`` and a ``rate`` method (:class:`Judge`), named ``module:attribute`` (a class or
  a function is called with no arguments), e.g. a client of an API judge a lab runs.

The evaluator calls the judge in its own process, which holds the answers; a method never sees the judge or its
ratings. A rating ``r`` scores ``r / 10`` (so tables, which show scores x100, show the paper's 1-10 scale x10);
a judgement with no parseable rating scores 0, as an unparseable multiple-choice answer does. The judge's
identity goes into the result file (``evaluation.judge``) and into the run's fingerprint: results judged by
different judges are never compared or resumed into one another.
"""

from __future__ import annotations

import hashlib
import importlib
import re
from dataclasses import dataclass
from typing import Any, Protocol, Sequence, runtime_checkable

from drake_bench.benchmarks.sample import AnswerType, Sample
from drake_bench.benchmarks.spec import BenchmarkSpec
from drake_bench.errors import DrakeBenchError
from drake_bench.evaluation.scoring import SCORER_VERSION, score_batch

JUDGE_PROMPT = """[Instruction]
Please act as an impartial judge and evaluate the quality of the response provided by an AI assistant to the user question displayed below. A good answer should follow these rules:
1. It should be in the same language as the question.
2. It should answer the request in the instruction.
3. It should be factually and semantically comprehensible.
4. It should be grammatically correct and fluent.
Begin your evaluation by providing a short explanation. Be as objective as possible. After providing your explanation, you must rate the response on a scale of 1 to 10 by strictly following this format: "[[rating]]", for example: "Rating: [[5]]". A human-annotated answer is given for reference.
[Question]
{question}
[The Start of Assistant's Answer]
{answer}
[The End of Assistant's Answer]
[Reference]
{reference}"""
"""The judge prompt of the Aya paper as the FedMosaic paper prints it (Fig. 9), verbatim."""

JUDGE_PROMPT_SHA = hashlib.sha256(JUDGE_PROMPT.encode()).hexdigest()[:12]
"""Part of every judge's identity: a result says which prompt its ratings answered."""

MODEL_JUDGE_MODULE = "drake_bench.models.judge"

_RATING = re.compile(r"\[\[(\d+(?:\.\d+)?)\]\]")


@dataclass(frozen=True)
class JudgeQuery:
    """One answer to rate: the question as the model saw it, the model's answer and the reference answer."""

    question: str
    answer: str
    reference: str


@runtime_checkable
class Judge(Protocol):
    """What the evaluator needs of a judge."""

    identity: str
    """Which judge this is, precisely enough to get the same ratings again (model, weights or API version,
    prompt): recorded as the result's ``evaluation.judge``."""

    def rate(self, queries: Sequence[JudgeQuery]) -> list[float | None]:
        """A rating in [1, 10] per query, in order; None where the judgement gave none."""
        ...


def parse_rating(judgement: str) -> float | None:
    """The first ``[[n]]`` in a judgement, when it is a rating in [1, 10]; else None.

    The first, not the last: the prompt asks for the explanation first and the rating after it, and a judge that
    goes on writing after its rating (small models do) should not be read from what it wrote next."""
    match = _RATING.search(judgement)
    if match is None:
        return None
    value = float(match.group(1))
    return value if 1.0 <= value <= 10.0 else None


def rating_score(rating: float | None) -> float:
    """A rating as a score in [0, 1]: ``rating / 10``; no rating scores 0."""
    return 0.0 if rating is None else rating / 10.0


def judged_tasks(spec: BenchmarkSpec) -> list[str]:
    """The tasks whose test answers a judge rates: free-text tasks tested on their own source. A task tested on a
    published evaluation set (``test_source``) keeps that set's scorer, so a judge has nothing of it to rate."""
    return [t.id for t in spec.tasks if t.answer_type == AnswerType.FREE_TEXT and t.test_source is None]


def require_judged_tasks(spec: BenchmarkSpec, judge: str) -> None:
    """Refuse a judge on a benchmark where it would rate nothing (checked by the CLI before any worker starts, and
    by the evaluator for runs started from Python)."""
    if not judged_tasks(spec):
        raise DrakeBenchError(
            f"judge {judge!r}: {spec.name} has no free-text tasks scored by Rouge-L, and a judge "
            "rates only those (tasks tested on an evaluation set keep its scorer)"
        )


def judged_scores(
    judge: Judge, predictions: Sequence[str], samples: Sequence[Sample], scorer_version: str = SCORER_VERSION
) -> list[float]:
    """Scores of aligned answers and samples: free-text items rated by ``judge`` (one call for all of them), every
    other item by its own rule (:func:`~drake_bench.evaluation.scoring.score_batch`, rules ``scorer_version``), and
    so are free-text items of an evaluation set with its own scorer (GSM8K's number, HumanEval's tests: a judge does
    not replace them)."""
    if len(predictions) != len(samples):
        raise ValueError(f"judged_scores: {len(predictions)} predictions for {len(samples)} samples")
    free = [i for i, s in enumerate(samples) if s.answer_type == AnswerType.FREE_TEXT and s.meta.get("scorer") is None]
    rated = set(free)
    rest = [i for i in range(len(samples)) if i not in rated]  # the rating replaces a free-text item's own score
    scores = [0.0] * len(samples)
    for i, score in zip(rest, score_batch([predictions[i] for i in rest], [samples[i] for i in rest], scorer_version)):
        scores[i] = score
    if not free:
        return scores
    ratings = judge.rate([JudgeQuery(samples[i].question, predictions[i], samples[i].answer) for i in free])
    if len(ratings) != len(free):
        raise DrakeBenchError(f"judge {judge.identity!r} returned {len(ratings)} ratings for {len(free)} answers")
    for i, rating in zip(free, ratings):
        if rating is not None and not 1.0 <= float(rating) <= 10.0:
            raise DrakeBenchError(
                f"judge {judge.identity!r} rated an answer {rating!r}: ratings are in [1, 10] (None where it gave none)"
            )
        scores[i] = rating_score(None if rating is None else float(rating))
    return scores


def load_judge(spec: str, *, device: str = "cpu") -> Judge:
    """The judge ``spec`` names: ``module:attribute`` (an instance, or a class or function called with no
    arguments, giving a :class:`Judge`), else a model for :class:`drake_bench.models.judge.ModelJudge`.

    The model judge is reached by its import path, as a third party's judge is: the evaluator's scoring does not
    depend on the model zoo (methods bring their models; the judge is the one model the evaluator runs)."""
    if ":" in spec and not spec.startswith(("/", ".")):
        module_name, _, attribute = spec.partition(":")
        try:
            obj: Any = getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError) as exc:
            raise DrakeBenchError(f"judge {spec!r}: cannot import {attribute!r} from {module_name!r}: {exc}") from None
        judge = obj() if isinstance(obj, type) or (callable(obj) and not isinstance(obj, Judge)) else obj
        if not isinstance(judge, Judge) or not isinstance(getattr(judge, "identity", None), str) or not judge.identity:
            raise DrakeBenchError(
                f"judge {spec!r} is not a judge: it needs an `identity` (a non-empty string naming "
                "the judge's model and version) and a `rate(queries)` method "
                "(drake_bench.evaluation.judge.Judge)"
            )
        return judge
    model_judge = importlib.import_module(MODEL_JUDGE_MODULE).ModelJudge
    return model_judge(spec, device=device)
