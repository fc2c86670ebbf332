"""WorldCuisines (issue 32, problem 1): rows as the authors publish them in hf_prompt/, images from food-kb or a folder.

Fixture format: worldcuisines/worldcuisines@d4d1c44 generate_vqa/generated_data/hf_prompt/<folder>/<lang>_<folder>.jsonl
(fields multi_choice_prompt, multi_choice_answer counted from 1, prompt_type "1".."4"), generate_vqa/resources/query_ctx.csv
(prompt types), evaluation/src/base_model.py (images from food-kb by image_url). Rows are made up; fields are the publisher's.
"""

from __future__ import annotations

import pytest
from fixtures_real import WC_INSTRUCTION, jsonl, parquet, png, png_bytes, url_file, wc_row

from drake_bench.benchmarks.manifest import load_benchmark
from drake_bench.errors import SourceError
from drake_bench.loaders import get_loader

TASKS = {"wcvqa-dishname": "1", "wcvqa-contextdishname": "3", "wcvqa-advcontextdishname": "4", "wcvqa-location": "2"}


def _load(task, src):
    return list(get_loader(task.source.loader).load(task, src))


def _write(src, folder_by_task: dict[int, str], n: int = 3, images: str = "food-kb") -> list[dict]:
    """Rows of every prompt type for task 1 and of type "2" for task 2, one file per language, as published."""
    rows_all = []
    for task_no, folder in folder_by_task.items():
        types = ("1", "3", "4") if task_no == 1 else ("2",)
        rows = [wc_row(f"{folder}-{p}-{i}", "en", p, task_no, i, folder) for p in types for i in range(n)]
        jsonl(src / "vqa" / "hf_prompt" / folder / f"en_{folder}.jsonl", rows)
        jsonl(src / "vqa" / "hf_prompt" / folder / f"fr_{folder}.jsonl", [{**rows[0], "lang": "fr", "qa_id": "fr-1"}])
        rows_all += rows
    if images == "food-kb":
        parquet(
            src / "food-kb" / "data" / "train-00000-of-00001.parquet",
            [
                {
                    "food_id": r["food_id"],
                    "image1_url": r["image_url"],
                    "image1": {"bytes": png_bytes(k), "path": None},
                    **{f"image{j}_url": None for j in range(2, 9)},
                    **{f"image{j}": None for j in range(2, 9)},
                }
                for k, r in enumerate(rows_all)
            ],
        )
    else:
        for k, r in enumerate(rows_all):
            png(src / "vqa" / "images" / url_file(r["image_url"]), k)
    return rows_all


def test_each_prompt_type_is_its_own_task_with_one_based_answers(tmp_path) -> None:
    spec = load_benchmark("drake")
    _write(tmp_path, {1: "train_task1", 2: "train_task2"})
    for tid, ptype in TASKS.items():
        items = _load(spec.task(tid), tmp_path)
        assert len(items) == 3, tid  # the other prompt types and the fr file are someone else's
        assert {s.meta["prompt_type"] for s in items} == {ptype} and {s.meta["lang"] for s in items} == {"en"}
        for s in items:
            assert len(s.choices) == 5 and s.answer in s.choices
            assert not any("Print only" in c for c in s.choices) and "Print only" not in s.question
            assert len(s.images) == 1 and s.images[0].size == (8, 8)
    first = _load(spec.task("wcvqa-dishname"), tmp_path)
    by_id = {s.id.rsplit("/", 1)[1]: s for s in first}
    # multi_choice_answer counts from 1: i=0 -> option 1
    assert by_id["train-train_task1-1-0-en"].answer == "Kelp broth"
    assert by_id["train-train_task1-1-1-en"].answer == "Bean stew"


def test_evaluation_folders_and_image_file_names(tmp_path) -> None:
    spec = load_benchmark("drake")
    _write(tmp_path, {1: "small_eval_task1", 2: "large_eval_task2"}, images="folder")
    small = spec.task("wcvqa-advcontextdishname").model_copy(deep=True)
    small.source.rule["split"] = "test_small"
    large = spec.task("wcvqa-location").model_copy(deep=True)
    large.source.rule["split"] = "test_large"
    # images named by the URL's file name: no "?download", %-escapes decoded
    assert url_file("https://x.org/a/Dish_%C3%A9t%C3%A9.jpg?download") == "Dish_été.jpg"
    assert len(_load(small, tmp_path)) == 3 and len(_load(large, tmp_path)) == 3


def test_missing_rows_or_images_are_named(tmp_path) -> None:
    spec = load_benchmark("drake")
    with pytest.raises(SourceError, match="train_task1"):
        _load(spec.task("wcvqa-dishname"), tmp_path)
    jsonl(
        tmp_path / "vqa" / "hf_prompt" / "train_task1" / "en_train_task1.jsonl",
        [wc_row("x", "en", "1", 1, 0, "train_task1")],
    )
    with pytest.raises(SourceError, match="food-kb"):
        _load(spec.task("wcvqa-dishname"), tmp_path)
    assert WC_INSTRUCTION.startswith("Print only")
