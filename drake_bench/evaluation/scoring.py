"""Per-item scoring: turn one model response into a score in [0, 1].

The FedMosaic paper (App. A.6) scores "the correct choice for multi-choice questions and the correct tokens
compared to the ground-truth answer for the open-ended questions"; the exact rules below are drake_bench's
(docs/design-notes.md#open-answer-scoring).

Every rule that can move a score is fixed here, under a version that result files record
(``evaluation.scorer_version``), so that two results are comparable only when scored alike. Two versions exist
and both stay selectable (``RunConfig.scorer_version``, ``drake-bench run --scorer-version``): they differ only in
the open-answer rule.

* multiple choice and yes/no: parse the response to an option index (:func:`parse_choice`),
  score 1 when it is the ground-truth option, else 0; an unparseable response scores 0.
* open, rule 2.0 (:data:`SCORER_VERSION`, the default for new runs): normalise both strings
  (:func:`normalize_answer`), keep the first :func:`answer_cap` tokens of the response, and score the token F1
  of the two multisets (:func:`open_f1`); exact match is logged too.
* open, rule 1.0 (:data:`LEGACY_SCORER_VERSION`, what the committed boards were scored with): the token recall
  ``|multiset(GT) ∩ multiset(pred)| / |GT|`` (:func:`open_recall`). Recall has no precision term, so a response
  listing every answer a client trained on scores as if it knew each one (the answer-stuffing attack).
* items of a published evaluation set with its own rule (GSM8K, HumanEval): that rule
  (:mod:`drake_bench.evaluation.external`).
* free text: Rouge-L F1 with a tokenizer that keeps non-ASCII text (Fed-Aya is multilingual;
  rouge-score's default tokenizer would drop every non-ASCII character). Scores stay in [0, 1]
  here; the x100 convention belongs to display.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections import Counter
from typing import Any, Literal, NamedTuple, Sequence

from drake_bench.benchmarks.sample import AnswerType, Sample

ScorerVersion = Literal["1.0", "2.0"]
SCORER_VERSIONS: tuple[str, ...] = ("1.0", "2.0")
"""Every scoring rule version this drake_bench applies (they differ in the open-answer rule only)."""
SCORER_VERSION = "2.0"
"""The rule new runs are scored by unless they choose another (``RunConfig.scorer_version``): open answers by
capped token F1."""
LEGACY_SCORER_VERSION = "1.0"
"""Open answers by token recall: what every board committed before 2.0 was scored with, and what a result file that
records no scorer version was scored with."""

_ARTICLES = frozenset({"a", "an", "the"})
# [R] Word-by-word number mapping (as in the VQA evaluation script, extended to twenty and the tens);
# compounds such as "twenty one" are not merged.
_NUMBER_WORDS = {
    w: str(i)
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
        "fifteen sixteen seventeen eighteen nineteen twenty".split()
    )
}
_NUMBER_WORDS.update(
    {
        "thirty": "30",
        "forty": "40",
        "fifty": "50",
        "sixty": "60",
        "seventy": "70",
        "eighty": "80",
        "ninety": "90",
        "hundred": "100",
    }
)

_DIGIT_SEP = re.compile(r"(?<=\d)[.,](?=\d)")


def _strip_punctuation(text: str) -> str:
    """Replace every Unicode punctuation/symbol character by a space, keeping decimal points and thousands commas."""
    protected = _DIGIT_SEP.sub(lambda m: "\x00" if m.group(0) == "." else "", text)
    out = []
    for ch in protected:
        cat = unicodedata.category(ch)
        out.append(" " if cat[0] in "PS" else ch)
    return "".join(out).replace("\x00", ".")


def normalize_answer(text: str) -> list[str]:
    """Normalised tokens of a short answer (docs/design-notes.md#open-answer-scoring): lowercase, punctuation and articles removed, number words as digits.

    Why tokens and not a string: the OPEN score is a multiset overlap of these tokens (F1 or recall).
    Unicode-aware (NFKC, ``str.casefold``) so non-English answers keep their letters.
    """
    text = unicodedata.normalize("NFKC", text).casefold()
    tokens = _strip_punctuation(text).split()
    return [_NUMBER_WORDS.get(t, t) for t in tokens if t not in _ARTICLES]


def _norm_str(text: str) -> str:
    return " ".join(normalize_answer(text))


def _choice_key(text: str) -> str:
    """Normalised option text; an option that normalises to nothing (e.g. "A", an article) keeps its casefolded text."""
    return _norm_str(text) or unicodedata.normalize("NFKC", text).strip().casefold()


# --------------------------------------------------------------------------- multiple choice

_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
# whole response is a bare letter, optionally bracketed / followed by . : )
_BARE = re.compile(r"^\s*[\(\[]?\s*([A-Za-z])\s*[\)\]]?\s*[.:)]?\s*$")
# "Answer: B", "The answer is (B)", "Option C.", "correct choice is d": after the keyword, a bracketed
# letter, an upper-case letter, or a lower-case letter that ends the response -- so that
# "the answer is a red car" (article) is not read as option A.
_KW = r"\b(?i:answer|option|choice)\b\s*(?i:is\b)?\s*[:：]?\s*"
_KEYWORD = re.compile(_KW + r"(?:[\(\[]\s*([A-Za-z])\s*[\)\]]|([A-Z])(?![A-Za-z0-9])|([a-z])\s*[.:)]?\s*$)")
# "B. red", "(B) red", "B) red", "B: red" -- an upper-case letter with a delimiter, so that
# a response such as "A red car" (article) is not read as option A.
_LEADING = re.compile(r"^\s*(?:\(([A-Z])\)|\[([A-Z])\]|([A-Z])[.:)])(?=\s|$)")


def _letter_index(letter: str, n: int) -> int | None:
    i = _LETTERS.find(letter.upper())
    return i if 0 <= i < n else None


def parse_choice(text: str, choices: Sequence[str]) -> int | None:
    """Index of the option a response names, or None when it names none (scored 0).

    Accepted, in this order of precedence ([R], docs/design-notes.md#open-answer-scoring):

    1. the exact option text after :func:`normalize_answer` (checked first, so options whose
       text is itself a letter or a yes/no word are read as text);
    2. a bare letter: "B", "(B)", "b.", "[B]";
    3. a keyword form: "Answer: B", "The answer is (B)", "Option C";
    4. a leading upper-case letter with a delimiter: "B. red", "(B) red", "B) red";
    5. for two options that are yes and no only: a leading "yes"/"no" word ("Yes, it is.").

    A letter outside the option range is unparseable.
    """
    if not choices:
        return None
    normed = [_choice_key(c) for c in choices]
    pred = _choice_key(text)
    if pred and normed.count(pred) == 1:
        return normed.index(pred)
    m = _BARE.match(text)
    if m:
        return _letter_index(m.group(1), len(choices))
    m = _KEYWORD.search(text)
    if m:
        return _letter_index(next(g for g in m.groups() if g), len(choices))
    m = _LEADING.match(text)
    if m:
        return _letter_index(next(g for g in m.groups() if g), len(choices))
    if sorted(normed) == ["no", "yes"]:
        first = normalize_answer(text)[:1]
        if first and first[0] in ("yes", "no"):
            return normed.index(first[0])
    return None


_YES_NO = ("yes", "no")


def _choices_of(sample: Sample) -> list[str]:
    """Options of a choice item; yes/no items without explicit options get ("yes", "no")."""
    if sample.choices:
        return list(sample.choices)
    if sample.answer_type == AnswerType.YES_NO:
        return list(_YES_NO)
    raise ValueError(f"sample {sample.id!r} ({sample.answer_type.value}) has no choices to score against")


def answer_index(sample: Sample) -> int:
    """The ground-truth option index: the option equal to ``sample.answer`` (normalised), or its letter."""
    choices = _choices_of(sample)
    normed = [_choice_key(c) for c in choices]
    gt = _choice_key(sample.answer)
    if gt in normed:
        return normed.index(gt)
    m = _BARE.match(sample.answer)
    if m and _letter_index(m.group(1), len(choices)) is not None:
        return _letter_index(m.group(1), len(choices))  # type: ignore[return-value]
    raise ValueError(f"sample {sample.id!r}: answer {sample.answer!r} is not one of its choices {choices}")


# --------------------------------------------------------------------------- open and free text


def check_scorer_version(version: str) -> str:
    """``version`` when it is one of :data:`SCORER_VERSIONS`, else a ValueError naming them."""
    if version not in SCORER_VERSIONS:
        raise ValueError(
            f"scorer version {version!r} is not one this drake_bench applies ({', '.join(SCORER_VERSIONS)})"
        )
    return version


def open_recall(prediction: str, answer: str) -> float:
    """Rule 1.0: token recall of the ground truth, |GT ∩ pred| / |GT| over multisets, clipped to [0, 1]
    (docs/design-notes.md#open-answer-scoring).

    An answer that normalises to nothing (e.g. only an article) falls back to exact match of the
    normalised strings, so the ratio is never 0/0. Extra tokens cost nothing: a response that lists every
    candidate answer scores 1 on each of them, which is why rule 2.0 replaced it for new runs.
    """
    gt = normalize_answer(answer)
    pred = normalize_answer(prediction)
    if not gt:
        return float(not pred)
    overlap = sum((Counter(gt) & Counter(pred)).values())
    return min(1.0, max(0.0, overlap / len(gt)))


def answer_cap(n_answer_tokens: int) -> int:
    """How many normalised tokens of a response rule 2.0 scores against an answer of ``n_answer_tokens`` tokens:
    ``max(2 n, n + 3)`` (1 -> 4, 2 -> 5, 3 -> 6, 5 -> 10).

    Why this cap: an open answer is short and its length is known to the scorer (never to the model), so the cap
    is per item and derived from it (the task metadata records no answer lengths; drake-synth's run from one
    token, "3", to three, "make it red"). ``n + 3`` leaves room for a short
    lead-in around a one- or two-token answer ("it is red", "the answer is 3" normalise to 3 tokens), and ``2 n``
    for a longer answer restated with as many words again. What lies beyond the cap can only add guesses: a
    response is scored on its opening, so a list of every candidate answer counts only as its first few.
    """
    return max(2 * n_answer_tokens, n_answer_tokens + 3)


def open_f1(prediction: str, answer: str) -> float:
    """Rule 2.0: token F1 (SQuAD-style) of the response's first :func:`answer_cap` normalised tokens against the
    answer's, over multisets (docs/design-notes.md#open-answer-scoring).

    precision = overlap / |pred|, recall = overlap / |GT|, F1 = 2PR / (P + R), with overlap = |GT ∩ pred| and
    ``pred`` the capped response. Precision is what recall lacks: every token beyond the answer costs, so listing
    c candidates as long as the answer earns at most 2/(c + 1) of what the right answer alone earns, and the cap
    keeps a long list from counting as more than its opening. An answer that normalises to nothing (e.g. only an
    article) falls back to exact match of the normalised strings, as in rule 1.0; an empty response scores 0.
    """
    gt = normalize_answer(answer)
    pred = normalize_answer(prediction)
    if not gt:
        return float(not pred)
    pred = pred[: answer_cap(len(gt))]
    overlap = sum((Counter(gt) & Counter(pred)).values())
    if overlap == 0:
        return 0.0
    precision, recall = overlap / len(pred), overlap / len(gt)
    return 2 * precision * recall / (precision + recall)


_OPEN_RULES = {"1.0": open_recall, "2.0": open_f1}


def open_score(prediction: str, answer: str, scorer_version: str = SCORER_VERSION) -> float:
    """The score of an open answer under ``scorer_version``'s rule: :func:`open_f1` (2.0, the default) or
    :func:`open_recall` (1.0)."""
    return _OPEN_RULES[check_scorer_version(scorer_version)](prediction, answer)


def exact_match(prediction: str, answer: str) -> float:
    """1.0 when both strings normalise to the same token sequence."""
    return float(normalize_answer(prediction) == normalize_answer(answer))


# CJK ideographs, kana and other scripts written without spaces become one token per character;
# everything else is split into Unicode word runs, so Cyrillic, Arabic, Devanagari... are kept.
_ROUGE_TOKEN = re.compile(
    r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u0e00-\u0e7f]|[^\W_]+",
)


class _UnicodeTokenizer:
    """rouge-score tokenizer that keeps non-ASCII text (its default drops it), lowercased, no stemming."""

    def tokenize(self, text: str) -> list[str]:
        return _ROUGE_TOKEN.findall(unicodedata.normalize("NFKC", text).casefold())


@functools.cache
def _rouge_scorer() -> Any:
    """Built on first use: rouge-score imports nltk and scipy.stats (over a second), which every process that
    imports drake_bench (a method worker, a Flower ClientApp) would otherwise pay without scoring anything."""
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False, tokenizer=_UnicodeTokenizer())


def rouge_l_f1(prediction: str, reference: str) -> float:
    """Rouge-L F1 in [0, 1] (Fed-LLM-Large, and the offline default for Fed-Aya: docs/design-notes.md#offline-judge)."""
    return float(_rouge_scorer().score(reference, prediction)["rougeL"].fmeasure)


# --------------------------------------------------------------------------- public API


class Scored(NamedTuple):
    """One scored response: ``score`` is what metrics aggregate; ``exact_match`` is logged alongside."""

    score: float
    exact_match: float
    parsed: int | None  # chosen option for choice items, else None


def score_details(prediction: str, sample: Sample, scorer_version: str = SCORER_VERSION) -> Scored:
    """Score one response with the rule of the sample's answer type, or of the evaluation set it comes from when
    the build tagged it (``meta["scorer"]``: GSM8K's final number, HumanEval's unit tests; see
    :mod:`drake_bench.evaluation.external`). ``scorer_version`` chooses the open-answer rule (:func:`open_score`);
    every other rule is the same in both versions."""
    check_scorer_version(scorer_version)
    if sample.meta.get("scorer") is not None:
        from drake_bench.evaluation.external import external_score

        hit = external_score(prediction, sample)
        return Scored(hit, hit, None)  # type: ignore[arg-type]
    kind = sample.answer_type
    if kind in (AnswerType.MULTIPLE_CHOICE, AnswerType.YES_NO):
        parsed = parse_choice(prediction, _choices_of(sample))
        hit = float(parsed is not None and parsed == answer_index(sample))
        return Scored(hit, hit, parsed)
    if kind == AnswerType.OPEN:
        return Scored(
            open_score(prediction, sample.answer, scorer_version), exact_match(prediction, sample.answer), None
        )
    if kind == AnswerType.FREE_TEXT:
        return Scored(rouge_l_f1(prediction, sample.answer), exact_match(prediction, sample.answer), None)
    raise ValueError(f"sample {sample.id!r}: no scorer for answer type {kind!r}")  # pragma: no cover


def score_prediction(prediction: str, sample: Sample, scorer_version: str = SCORER_VERSION) -> float:
    """Score in [0, 1] of one model response for one sample."""
    return score_details(prediction, sample, scorer_version).score


def score_batch(preds: Sequence[str], samples: Sequence[Sample], scorer_version: str = SCORER_VERSION) -> list[float]:
    """Scores of aligned responses and samples under ``scorer_version``; refuses misaligned lengths rather than
    truncating."""
    if len(preds) != len(samples):
        raise ValueError(f"score_batch: {len(preds)} predictions for {len(samples)} samples")
    check_scorer_version(scorer_version)
    return [score_prediction(p, s, scorer_version) for p, s in zip(preds, samples)]
