"""Per-answer scoring (spec A8): every case checked against a hand-computed value."""

from __future__ import annotations

import pytest

from drake_bench.evaluation.scoring import (
    normalize_answer,
    open_score,
    parse_choice,
    rouge_l_f1,
    score_batch,
    score_details,
    score_prediction,
)
from drake_bench.sample import AnswerType, Sample


def make(answer: str, kind: str, choices: list[str] | None = None, sid: str = "s1") -> Sample:
    return Sample(id=sid, question="q?", choices=choices or [], answer=answer, answer_type=AnswerType(kind),
                  task_id="t", source="src")


COLOURS = ["red", "blue", "green", "yellow"]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("B", 1),
        ("b", 1),
        ("(B)", 1),
        ("[C]", 2),
        ("B.", 1),
        ("D)", 3),
        ("Answer: B", 1),
        ("answer: c", 2),
        ("The answer is (A).", 0),
        ("The correct option is D", 3),
        ("ANSWER: (d)", 3),
        ("The answer is a red car", None),  # article after the keyword, not option A
        ("The answer is a", 0),  # ... but a lone lower-case letter ending the response is a letter
        ("B. blue", 1),
        ("(C) green", 2),
        ("blue", 1),
        ("  Blue. ", 1),
        ("The Yellow", 3),  # article stripped, then exact option text
        ("E", None),  # letter out of range
        ("A red car", None),  # leading article, not option A
        ("I think it is green", None),  # option text inside a sentence is not exact
        ("", None),
        ("purple", None),
    ],
)
def test_parse_choice(text: str, expected: int | None) -> None:
    assert parse_choice(text, COLOURS) == expected


def test_parse_choice_prefers_exact_option_text_over_letters() -> None:
    # options whose text is a letter: the text wins, so "A" means the option reading "A" (index 1)
    assert parse_choice("A", ["B", "A"]) == 1
    assert parse_choice("B", ["B", "A"]) == 0


def test_parse_choice_yes_no_leading_word() -> None:
    assert parse_choice("Yes, the two images match.", ["yes", "no"]) == 0
    assert parse_choice("No.", ["yes", "no"]) == 1
    assert parse_choice("Nope", ["yes", "no"]) is None
    # the leading-word rule is only for yes/no pairs
    assert parse_choice("red, surely", COLOURS) is None


def test_parse_choice_no_choices() -> None:
    assert parse_choice("A", []) is None


def test_multiple_choice_scores() -> None:
    s = make("green", "multiple_choice", COLOURS)
    assert score_prediction("C", s) == 1.0
    assert score_prediction("Answer: (C)", s) == 1.0
    assert score_prediction("green", s) == 1.0
    assert score_prediction("B", s) == 0.0
    assert score_prediction("no idea", s) == 0.0
    d = score_details("C", s)
    assert (d.score, d.exact_match, d.parsed) == (1.0, 1.0, 2)


def test_multiple_choice_answer_given_as_letter() -> None:
    s = make("B", "multiple_choice", COLOURS)
    assert score_prediction("blue", s) == 1.0
    assert score_prediction("red", s) == 0.0


def test_answer_not_among_choices_is_an_error_naming_the_sample() -> None:
    s = make("purple", "multiple_choice", COLOURS, sid="item-7")
    with pytest.raises(ValueError, match="item-7"):
        score_prediction("A", s)


def test_yes_no_without_explicit_choices() -> None:
    s = make("No", "yes_no")
    assert score_prediction("no", s) == 1.0
    assert score_prediction("B", s) == 1.0  # option B of the implicit (yes, no)
    assert score_prediction("Yes", s) == 0.0
    assert score_prediction("maybe", s) == 0.0


def test_normalize_answer() -> None:
    assert normalize_answer("The Two cats, an apple!") == ["2", "cats", "apple"]
    assert normalize_answer("3.5 kg; 1,000 items.") == ["3.5", "kg", "1000", "items"]
    assert normalize_answer("Twelve") == ["12"]
    # non-ASCII letters are kept, punctuation of other scripts removed
    assert normalize_answer("Café «très» chaud。") == ["café", "très", "chaud"]
    assert normalize_answer("Der Hund") == ["der", "hund"]  # only English articles are stripped


@pytest.mark.parametrize(
    "pred, gt, expected",
    [
        ("red car", "red car", 1.0),
        ("a red car", "the red car", 1.0),
        ("red", "red car", 0.5),
        ("car red blue", "red car", 1.0),  # extra tokens do not lower recall
        ("two dogs", "2 dogs", 1.0),  # number words as digits
        ("dog dog", "dog dog cat", 2 / 3),  # multiset: both dogs count
        ("dog", "dog dog cat", 1 / 3),  # ... but only as often as predicted
        ("dog dog dog dog", "dog cat", 0.5),  # repeats beyond GT count do not exceed it
        ("blue", "red car", 0.0),
        ("", "red", 0.0),
    ],
)
def test_open_score(pred: str, gt: str, expected: float) -> None:
    assert open_score(pred, gt) == pytest.approx(expected)
    assert score_prediction(pred, make(gt, "open")) == pytest.approx(expected)


def test_open_exact_match_logged() -> None:
    s = make("the red car", "open")
    assert score_details("Red car.", s).exact_match == 1.0
    d = score_details("car red", s)
    assert (d.score, d.exact_match) == (1.0, 0.0)


def test_open_answer_that_normalises_to_nothing() -> None:
    s = make("the", "open")
    assert score_prediction("", s) == 1.0
    assert score_prediction("a", s) == 1.0
    assert score_prediction("cat", s) == 0.0


def test_rouge_l_hand_computed() -> None:
    # LCS("the cat sat on the mat", "the cat is on the mat") = the cat on the mat = 5; P = R = 5/6
    assert rouge_l_f1("the cat sat on the mat", "the cat is on the mat") == pytest.approx(5 / 6)
    # pred 4 tokens, ref 3 tokens, LCS 3: P = 3/4, R = 1, F = 2PR/(P+R) = 6/7
    assert rouge_l_f1("Привет мир как дела", "привет как дела") == pytest.approx(6 / 7)
    # CJK split per character: LCS 2 of 4/4
    assert rouge_l_f1("我爱北京", "我爱上海") == pytest.approx(0.5)
    assert rouge_l_f1("completely different", "nothing shared") == 0.0
    assert rouge_l_f1("Same text.", "same TEXT") == pytest.approx(1.0)


def test_free_text_score_in_unit_interval() -> None:
    s = make("the cat is on the mat", "free_text")
    assert score_prediction("the cat sat on the mat", s) == pytest.approx(5 / 6)


def test_score_batch() -> None:
    samples = [make("blue", "multiple_choice", COLOURS), make("red car", "open"), make("yes", "yes_no", ["yes", "no"])]
    assert score_batch(["B", "red", "A"], samples) == pytest.approx([1.0, 0.5, 1.0])
    with pytest.raises(ValueError, match="2 predictions for 3 samples"):
        score_batch(["B", "red"], samples)
