"""Prompts and training targets in LLaVA-1.5's conversation format.

One function renders every item the same way for training, generation and scoring:

    USER: <image>\n<image>\n{question}\nA. {opt1}\nB. {opt2}\n{instruction} ASSISTANT:

* one ``<image>`` line per image, before the question (LLaVA-1.5 / LLaVA-Interleave);
* choice items (multiple choice and yes/no) list lettered options, as LLaVA-1.5 does, with the
  instruction "Answer with the option from the given choices directly.";
  yes/no items without explicit choices get the options ("yes", "no");
* open items use LLaVA-1.5's "Answer the question using a single word or phrase.";
  free-text items have no instruction.

Training target: the answer **text** for every item, choice items included (the
"cloze formulation" of multiple choice; the option is scored by its text's likelihood, as
lm-eval-harness does for ARC or HellaSwag). LLaVA-1.5 trains choice items on the option
letter; OLMES (Gu et al. 2024) shows that small models do not acquire that letter-matching
format and must be scored in cloze form, and the tiny zoo does not acquire it either
(docs/findings/synth-generator-history.md). The target is preceded by one space (the model continues
"ASSISTANT:") and followed by eos; loss is taken on target tokens only. The same string is
what the processor's chat template renders
(``apply_chat_template(messages(sample), add_generation_prompt=True)``).
"""

from __future__ import annotations

import string
from typing import Any

from drake_bench.benchmarks.sample import AnswerType
from drake_bench.errors import DrakeBenchError
from drake_bench.models.tokenizer import IMAGE

TEMPLATE_VERSION = "llava-1.5/v2-cloze"  # recorded in every result file; bump when a prompt or target changes
MC_INSTRUCTION = "Answer with the option from the given choices directly."
OPEN_INSTRUCTION = "Answer the question using a single word or phrase."
LETTERS = string.ascii_uppercase
YES_NO = ["yes", "no"]


def _sid(sample: Any) -> str:
    return str(getattr(sample, "uid", None) or sample.__dict__.get("id", "?"))


def is_choice(sample: Any) -> bool:
    """Whether an item is scored as multiple choice (multiple choice and yes/no)."""
    return AnswerType(sample.answer_type) in (AnswerType.MULTIPLE_CHOICE, AnswerType.YES_NO)


def options(sample: Any) -> list[str]:
    """The item's options (yes/no items without choices get ``["yes", "no"]``)."""
    if sample.choices:
        if len(sample.choices) > len(LETTERS):
            raise DrakeBenchError(
                f"sample {_sid(sample)!r} has {len(sample.choices)} choices; at most 26 are supported"
            )
        return list(sample.choices)
    if AnswerType(sample.answer_type) == AnswerType.YES_NO:
        return list(YES_NO)
    raise DrakeBenchError(f"multiple-choice sample {_sid(sample)!r} has no choices")


def user_text(sample: Any) -> str:
    """The text part of the user turn (question, options, instruction), without image tokens."""
    parts = [sample.question.strip()]
    if is_choice(sample):
        parts += [f"{LETTERS[i]}. {opt}" for i, opt in enumerate(options(sample))]
        parts.append(MC_INSTRUCTION)
    elif AnswerType(sample.answer_type) == AnswerType.OPEN:
        parts.append(OPEN_INSTRUCTION)
    return "\n".join(parts)


def messages(sample: Any, with_answer: bool = False) -> list[dict[str, Any]]:
    """The item as chat messages (for ``processor.apply_chat_template``)."""
    content: list[dict[str, Any]] = [{"type": "image"} for _ in sample.images]
    content.append({"type": "text", "text": user_text(sample)})
    msgs = [{"role": "user", "content": content}]
    if with_answer:
        msgs.append({"role": "assistant", "content": [{"type": "text", "text": target(sample).lstrip()}]})
    return msgs


def build_prompt(sample: Any) -> str:
    """Prompt for a Sample or MethodSample, ending with ``ASSISTANT:`` (generation prompt)."""
    images = "".join(f"{IMAGE}\n" for _ in sample.images)
    return f"USER: {images}{user_text(sample)} ASSISTANT:"


def answer_letter(sample: Any) -> str:
    """Letter of the correct option; accepts an answer given as option text or as a letter."""
    opts = options(sample)
    ans = sample.answer.strip()
    for i, opt in enumerate(opts):
        if ans == opt.strip():
            return LETTERS[i]
    low = [o.strip().lower() for o in opts]
    if ans.lower() in low:
        return LETTERS[low.index(ans.lower())]
    if len(ans) == 1 and ans.upper() in LETTERS[: len(opts)]:
        return ans.upper()
    raise DrakeBenchError(f"sample {_sid(sample)!r}: answer {sample.answer!r} is not one of its options {opts}")


def target(sample: Any) -> str:
    """Training target (without eos): " <option text>" for choice items, " <answer>" otherwise."""
    if is_choice(sample):
        return " " + options(sample)[LETTERS.index(answer_letter(sample))].strip()
    return " " + sample.answer.strip()


def candidate_targets(sample: Any) -> list[str]:
    """The targets scored by multiple-choice scoring, one per option, in option order."""
    return [" " + opt.strip() for opt in options(sample)]
