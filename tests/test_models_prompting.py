"""Prompting: LLaVA-style prompts, lettered options with cloze targets, chat template agreement, image-token expansion."""

from __future__ import annotations

import pytest

from drake_bench.benchmarks.sample import AnswerType, Sample
from drake_bench.errors import DrakeBenchError
from drake_bench.models.prompting import build_prompt, candidate_targets, messages, options, target
from drake_bench.models.testing import toy_image, toy_processor, toy_tokenizer
from drake_bench.models.tokenizer import IMAGE_SIZE, IMAGE_TOKENS


def _s(**kw):
    base = dict(
        id="x",
        images=[],
        question="What colour?",
        choices=[],
        answer="red",
        answer_type=AnswerType.OPEN,
        task_id="t",
        source="s",
    )
    base.update(kw)
    return Sample(**base)


def test_multiple_choice_prompt_and_cloze_target():
    s = _s(
        images=[toy_image("red"), toy_image("blue")],
        choices=["blue", "red", "green"],
        answer_type=AnswerType.MULTIPLE_CHOICE,
    )
    p = build_prompt(s)
    assert p == (
        "USER: <image>\n<image>\nWhat colour?\nA. blue\nB. red\nC. green\n"
        "Answer with the option from the given choices directly. ASSISTANT:"
    )
    assert target(s) == " red"
    assert candidate_targets(s) == [" blue", " red", " green"]
    assert build_prompt(s.for_method()) == p and target(s.for_method()) == " red"
    # an answer given as the letter still trains on the option text
    assert target(_s(choices=["blue", "red"], answer="B", answer_type=AnswerType.MULTIPLE_CHOICE)) == " red"


def test_yes_no_defaults_and_open_and_free_text():
    yn = _s(answer="no", answer_type=AnswerType.YES_NO)
    assert options(yn) == ["yes", "no"] and target(yn) == " no"
    assert "A. yes\nB. no" in build_prompt(yn)
    op = _s()
    assert build_prompt(op).endswith("Answer the question using a single word or phrase. ASSISTANT:")
    assert target(op) == " red"
    ft = _s(answer="a long answer", answer_type=AnswerType.FREE_TEXT)
    assert build_prompt(ft) == "USER: What colour? ASSISTANT:"


def test_answer_outside_options_names_the_sample():
    bad = _s(id="item-7", choices=["a", "b"], answer="c", answer_type=AnswerType.MULTIPLE_CHOICE)
    with pytest.raises(DrakeBenchError, match="item-7"):
        target(bad)
    assert target(_s(choices=["a", "b"], answer="b", answer_type=AnswerType.MULTIPLE_CHOICE)) == " b"
    assert target(_s(choices=["x", "y"], answer="B", answer_type=AnswerType.MULTIPLE_CHOICE)) == " y"


def test_chat_template_renders_the_same_prompt():
    proc = toy_processor()
    for s in [
        _s(images=[toy_image("red")] * 3, choices=["red", "blue"], answer_type=AnswerType.MULTIPLE_CHOICE),
        _s(),
        _s(images=[toy_image("green")], answer_type=AnswerType.FREE_TEXT),
    ]:
        rendered = proc.apply_chat_template(messages(s), add_generation_prompt=True, tokenize=False)
        assert rendered == build_prompt(s)
        full = proc.apply_chat_template(messages(s, with_answer=True), tokenize=False)
        assert full == build_prompt(s) + target(s) + "</s>"


def test_processor_expands_each_image_to_its_tokens():
    proc = toy_processor()
    tok = toy_tokenizer()
    image_id = tok.convert_tokens_to_ids("<image>")
    assert [tok.pad_token_id, tok.bos_token_id, tok.eos_token_id, image_id] == [0, 1, 2, 3]
    for n in (1, 3, 5):
        s = _s(images=[toy_image("red")] * n)
        out = proc(text=build_prompt(s), images=s.images, return_tensors="pt")
        assert int((out["input_ids"] == image_id).sum()) == n * IMAGE_TOKENS
        assert tuple(out["pixel_values"].shape) == (n, 3, IMAGE_SIZE, IMAGE_SIZE) == (n, 3, 64, 64)  # native size
        assert int(out["input_ids"][0, 0]) == tok.bos_token_id


def test_byte_level_tokenizer_round_trips_any_text():
    tok = toy_tokenizer()
    for text in ["zorbl klatu ñandú 東京 🙂", "A. red\nB. blue"]:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert tok.decode(ids) == text
