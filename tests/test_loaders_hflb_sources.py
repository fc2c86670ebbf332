"""HFLB sources in their published layouts (issue 32, problems 6, 7, 9, 10): VizWiz, GQA, VQA abstract scenes, SNLI-VE.

Fixture formats (records made up, fields and places the publishers'):
* VizWiz: Annotations.zip -> ``Annotations/{train,val,test}.json`` (lists of {image, question, answers x10, answer_type,
  answerable}; test without answers), train.zip -> ``train/VizWiz_train_<8 digits>.jpg`` (vizwiz.org VQA archives
  VizWiz_final/vqa_data/Annotations.zip and VizWiz_final/images/train.zip; VizWiz API demo ``Annotations/%s.json``).
* GQA: questions1.2.zip -> ``questions1.2/{train,val,testdev}_balanced_questions.json`` beside answer-less
  ``test_*``, ``challenge_*`` and ``submission_all_questions.json``; images.zip -> ``images/<imageId>.jpg``.
* VQA abstract scenes: GT-Vision-Lab/VQA@a013f00 README "Files" and PythonHelperTools/vqaDemo.py: ``Questions/``,
  ``Annotations/``, ``Images/abstract_v002/<train2015|val2015>/``.
* SNLI-VE: necla-ml/SNLI-VE@e6cf745 vet/tools/snli_ve_generator.py (``line['Flickr30K_ID'] = imageId``, the id without
  ``.jpg``; output ``data/snli_ve_{train,dev,test}.jsonl``) and data/download (``Flickr30K/flickr30k_images/``).
"""

from __future__ import annotations

import pytest
from fixtures_real import dump, gqa_question, jsonl, png, snli_ve_row, vizwiz_row

from drake_bench.benchmarks.manifest import load_benchmark
from drake_bench.errors import SourceError
from drake_bench.loaders import get_loader


def _load(task, src):
    return list(get_loader(task.source.loader).load(task, src))


@pytest.fixture(scope="module")
def hflb():
    return load_benchmark("hflb")


def test_vizwiz_reads_the_official_annotations_folder(hflb, tmp_path) -> None:
    base = tmp_path / "VizWiz"
    train = [
        vizwiz_row(f"VizWiz_train_{i:08d}.jpg", q)
        for i, q in enumerate(["What does this label say?", "What brand is this soup?"] * 3)
    ]
    val = [vizwiz_row(f"VizWiz_val_{i:08d}.jpg", "What is the expiration date?") for i in range(2)]
    for split, rows in (("train", train), ("val", val)):
        dump(base / "Annotations" / f"{split}.json", rows)
        for r in rows:
            png(base / split / r["image"])
    dump(base / "Annotations" / "test.json", [{"image": "VizWiz_test_00000000.jpg", "question": "What is this?"}])
    ocr = _load(hflb.task("c8-vizwiz-ocr"), tmp_path)
    brand = _load(hflb.task("c8-vizwiz-food-brand-label"), tmp_path)
    assert len(ocr) == 5 and len(brand) == 3 and {s.answer for s in ocr} == {"soup"}


def test_vizwiz_without_annotations_is_an_error_not_an_empty_task(hflb, tmp_path) -> None:
    (tmp_path / "VizWiz" / "train").mkdir(parents=True)
    with pytest.raises(SourceError, match="Annotations/train.json"):
        _load(hflb.task("c8-vizwiz-ocr"), tmp_path)


def test_gqa_reads_questions1_2_beside_the_answerless_files(hflb, tmp_path) -> None:
    base = tmp_path / "GQA"
    qs = {
        f"{i:05d}": gqa_question(f"n{i}", f"Is there a cup ({i})?", "yes" if i % 2 else "no", "verify", "obj")
        for i in range(8)
    }
    dump(base / "questions1.2" / "train_balanced_questions.json", dict(list(qs.items())[:5]))
    dump(base / "questions1.2" / "val_balanced_questions.json", dict(list(qs.items())[5:]))
    noanswer = {
        k: v
        for k, v in gqa_question("n99", "What is it?", "cup", "query", "obj").items()
        if k not in ("answer", "fullAnswer")
    }
    for name in (
        "test_balanced_questions.json",
        "testdev_all_questions.json",
        "challenge_balanced_questions.json",
        "submission_all_questions.json",
    ):
        dump(base / "questions1.2" / name, {"t1": noanswer})
    for q in qs.values():
        png(base / "images" / f"{q['imageId']}.jpg")
    items = _load(hflb.task("c1-gqa-yes-no-object"), tmp_path)
    assert len(items) == 8 and {s.answer for s in items} == {"yes", "no"}
    t = hflb.task("c1-gqa-yes-no-object").model_copy(deep=True)
    t.source.rule["files"] = ["challenge_balanced_questions.json"]
    with pytest.raises(SourceError, match="no 'answer'"):
        _load(t, tmp_path)


def test_vqa_abstract_reads_the_vqa_api_layout(hflb, tmp_path) -> None:
    base = tmp_path / "VQA"
    for sub, n in (("train2015", 3), ("val2015", 2)):
        qs = [
            {"image_id": 100 * k + i, "question": f"How many trees are there {i}?", "question_id": 1000 * k + i}
            for k in (1,)
            for i in range(n)
        ]
        anns = [
            {
                "question_id": q["question_id"],
                "image_id": q["image_id"],
                "question_type": "how many",
                "answer_type": "number",
                "multiple_choice_answer": "2",
                "answers": [{"answer": "2", "answer_confidence": "yes", "answer_id": 1}],
            }
            for q in qs
        ]
        dump(
            base / "Questions" / f"OpenEnded_abstract_v002_{sub}_questions.json",
            {"questions": qs, "task_type": "Open-Ended"},
        )
        dump(base / "Annotations" / f"abstract_v002_{sub}_annotations.json", {"annotations": anns})
        for q in qs:
            png(base / "Images" / "abstract_v002" / sub / f"abstract_v002_{sub}_{q['image_id']:012d}.png")
    items = _load(hflb.task("c4-abstract-vqa-number"), tmp_path)
    assert len(items) == 5 and {s.id.split("/")[1].split("-")[0] for s in items} == {"train2015", "val2015"}


def test_snli_ve_reads_both_image_id_spellings(hflb, tmp_path) -> None:
    data = tmp_path / "SNLI-VE" / "data"
    new = [snli_ve_row(str(2000 + i), f"a man running far {i}", "entailment", i) for i in range(3)]
    old = [
        snli_ve_row(f"{3000 + i}.jpg", f"a dog running near {i}", "neutral", i, id_field="Flikr30kID") for i in range(2)
    ]
    jsonl(data / "snli_ve_train.jsonl", new)
    jsonl(data / "snli_ve_dev.jsonl", old)
    for i in range(3):
        png(data / "Flickr30K" / "flickr30k_images" / f"{2000 + i}.jpg")
    for i in range(2):
        png(data / "Flickr30K" / "flickr30k_images" / f"{3000 + i}.jpg")
    items = _load(hflb.task("c5-snli-ve-action"), tmp_path)
    assert len(items) == 5 and {s.answer for s in items} == {"entailment", "neutral"}
