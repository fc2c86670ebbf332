"""Source loaders: partition rules (HFLB keyword splits, IconQA levels, Co-Instruct types, halves, shards) and error messages."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fixtures_real import write_fixtures

from drake_bench.benchmarks.manifest import load_benchmark
from drake_bench.errors import SourceError
from drake_bench.loaders import get_loader
from drake_bench.loaders._common import categorize
from drake_bench.loaders.gqa import two_options
from drake_bench.loaders.llava_conversation import parse_options


def _load(spec, tid, src):
    t = spec.task(tid)
    return list(get_loader(t.source.loader).load(t, src))


@pytest.fixture(scope="module")
def drake_src(tmp_path_factory):
    spec = load_benchmark("drake")
    return spec, write_fixtures(spec, tmp_path_factory.mktemp("drake"), per_task=6)


@pytest.fixture(scope="module")
def hflb_src(tmp_path_factory):
    spec = load_benchmark("hflb")
    return spec, write_fixtures(spec, tmp_path_factory.mktemp("hflb"), per_task=6)


def test_iconqa_levels_and_types_are_disjoint(drake_src) -> None:
    spec, src = drake_src
    got = {
        tid: _load(spec, tid, src)
        for tid in (
            "iconqa-shortanswer-easy",
            "iconqa-shortanswer-hard",
            "iconqa-multichoice-easy",
            "iconqa-multichoice-hard",
        )
    }
    assert {s.meta["grade"] for s in got["iconqa-shortanswer-easy"]} == {"kindergarten"}
    assert {s.meta["grade"] for s in got["iconqa-multichoice-hard"]} == {"grade1"}
    assert all(s.choices == [] for s in got["iconqa-shortanswer-hard"])
    assert all(s.answer in s.choices for s in got["iconqa-multichoice-easy"])
    ids = [s.id.split("/", 1)[1] for v in got.values() for s in v]
    assert len(ids) == len(set(ids)) == 24  # the prek / grade2 / choose_img decoys are excluded


def test_coinstruct_question_types(drake_src) -> None:
    spec, src = drake_src
    yn, hw = _load(spec, "coinstruct-yesno", src), _load(spec, "coinstruct-howwhat", src)
    two, three = _load(spec, "coinstruct-2imgcompare", src), _load(spec, "coinstruct-3imgcompare", src)
    assert {s.answer for s in yn} <= {"yes", "no"} and all(len(s.images) == 1 for s in yn)
    assert all(s.question.lower().startswith("how") and s.answer == "high" for s in hw)
    assert {len(s.images) for s in two} == {2} and {len(s.images) for s in three} == {3}
    assert not {s.id for s in yn} & {s.id for s in hw}


def test_nlvr2_halves_and_wcvqa_tasks(drake_src) -> None:
    spec, src = drake_src
    a, b = _load(spec, "nlvr2-subset1", src), _load(spec, "nlvr2-subset2", src)
    assert len(a) == len(b) == 6 and not {s.id.split("/")[1] for s in a} & {s.id.split("/")[1] for s in b}
    for tid, kind in (("wcvqa-dishname", "1"), ("wcvqa-advcontextdishname", "4")):
        items = _load(spec, tid, src)
        assert {s.meta["prompt_type"] for s in items} == {kind} and {s.meta["lang"] for s in items} == {"en"}
        assert all(s.answer in s.choices and len(s.choices) == 5 for s in items)


def test_hflb_keyword_splits_partition_each_client(hflb_src) -> None:
    spec, src = hflb_src
    for cid in (5, 7, 8, 9):
        seen: dict[str, str] = {}
        for tid in spec.client(cid).tasks:
            for s in _load(spec, tid, src):
                assert s.id.split("/", 1)[1] not in seen, f"item in two tasks of client {cid}"
                seen[s.id.split("/", 1)[1]] = tid
        assert len(seen) == 24
    rule = spec.task("c9-aqua-standing").source.rule
    assert all("stand" in s.question for s in _load(spec, "c9-aqua-standing", src))
    assert rule["keywords"][0] == "standing"
    assert (
        categorize(
            "what number is on the label", spec.task("c8-vizwiz-ocr").source.rule["categories"], "general-object"
        )
        == "ocr"
    )


def test_hflb_answer_type_and_question_type_splits(hflb_src) -> None:
    spec, src = hflb_src
    assert {s.meta["answer_type"] for s in _load(spec, "c4-abstract-vqa-number", src)} == {"number"}
    attr, others = _load(spec, "c4-abstract-vqa-attribute", src), _load(spec, "c4-abstract-vqa-others", src)
    assert all(s.question.lower().startswith("what color") for s in attr) and not any(
        s.question.lower().startswith("what color") for s in others
    )
    assert {s.meta["type"] for s in _load(spec, "c6-coco-qa-color", src)} == {2}
    four = _load(spec, "c2-gqa-four-choice-attribute", src)
    assert all(len(s.choices) == 4 and s.answer in s.choices for s in four)
    assert all(s.choices == ["red", "blue"] for s in _load(spec, "c3-gqa-two-choice-relation", src))
    assert {s.answer for s in _load(spec, "c1-gqa-yes-no-object", src)} <= {"yes", "no"}


def test_option_parsers() -> None:
    assert parse_options("Pick one\nA. cat\nB. dog") == ("Pick one", ["cat", "dog"])
    assert two_options("Is the cup red or blue?", "blue") == ["red", "blue"]
    assert two_options("What is it?", "cup") is None


def test_missing_or_malformed_sources_name_the_file(tmp_path) -> None:
    spec = load_benchmark("drake")
    t = spec.task("tqa")
    with pytest.raises(SourceError, match="M4-Instruct-Data"):
        list(get_loader(t.source.loader).load(t, tmp_path))
    (tmp_path / "M4-Instruct-Data").mkdir()
    (tmp_path / "M4-Instruct-Data" / "m4_instruct_annotations.json").write_text("{not json")
    with pytest.raises(SourceError, match="m4_instruct_annotations.json: not valid JSON"):
        list(get_loader(t.source.loader).load(t, tmp_path))
    (tmp_path / "M4-Instruct-Data" / "m4_instruct_annotations.json").write_text(
        json.dumps([{"id": "1", "image": "TQA/a.png", "metadata": {"dataset": "TQA"}}])
    )
    with pytest.raises(SourceError, match="conversations"):
        list(get_loader(t.source.loader).load(t, tmp_path))


def test_text_loaders(tmp_path) -> None:
    scope, large, aya = (load_benchmark(n) for n in ("fed-scope", "fed-llm-large", "fed-aya"))
    g = tmp_path / "gsm8k"
    g.mkdir()
    (g / "train.jsonl").write_text(
        "".join(json.dumps({"question": f"q{i}?", "answer": f"#### {i}"}) + "\n" for i in range(40))
    )
    a, b = (_load(scope, t, tmp_path) for t in ("gsm8k-part1", "gsm8k-part2"))
    assert len(a) + len(b) == 40 and not {s.question for s in a} & {s.question for s in b}
    fb = tmp_path / "FedLLM-Bench" / "data" / "Fed-ChatbotIT"
    fb.mkdir(parents=True)
    conv = lambda i: {"conversations": [{"from": "human", "value": f"hi {i}"}, {"from": "gpt", "value": f"hello {i}"}]}  # noqa: E731
    (fb / "chatbotIT_237c_6k.json").write_text(json.dumps({"u1": [conv(1)], "u2": [conv(2), conv(3)]}))
    top = _load(large, "c1-chatbotit-u0", tmp_path)
    assert [s.meta["client"] for s in top] == ["u2", "u2"] and top[0].answer == "hello 2"
    ad = tmp_path / "aya_dataset" / "data"
    ad.mkdir(parents=True)
    rows = [
        {
            "inputs": f"question {i}",
            "targets": f"answer {i}",
            "language": "x",
            "language_code": ["eng", "fra", "deu"][i % 3],
        }
        for i in range(30)
    ]
    pq.write_table(pa.Table.from_pylist(rows), ad / "train-00000-of-00001.parquet")
    got = [s for t in aya.client(1).tasks for s in _load(aya, t, tmp_path)]
    assert len(got) == 20 and {s.meta["language_code"] for s in got} == {"eng", "fra"}
