"""IconQA (issue 32, problem 3): pid_splits.json also holds trainval and mini* lists; each pid is read once.

Fixture format: lupantech/IconQA@4b053f3 run_choose_txt/dataset.py and run_fill_in_blank/dataset.py
(``pid_splits['%s_%s' % (task, name)]`` with names train, val, test, trainval, minitrain, minival, minitest;
``problems[pid]`` fields; choose_txt answers are option indices), tools/create_ans_label.py (``fill_in_blank_trainval``),
tools/generate_img_patch_feature.py (``iconqa/<split>/<task>/<pid>/image.png``). Problems are made up.
"""

from __future__ import annotations

from fixtures_real import dump, png

from drake_bench.benchmarks.manifest import load_benchmark
from drake_bench.loaders import get_loader


def _write(src) -> dict[str, list[str]]:
    base = src / "iconqa_data"
    problems, splits = {}, {}
    for qtype in ("choose_txt", "fill_in_blank", "choose_img"):
        for split in ("train", "val", "test"):
            pids = []
            for grade in ("kindergarten", "grade1", "prek"):
                pid = str(len(problems) + 1)
                problems[pid] = {
                    "question": f"How many dots? ({pid})",
                    "choices": ["1", "2", "3"] if qtype == "choose_txt" else None,
                    "answer": 1 if qtype == "choose_txt" else "4",
                    "ques_type": qtype,
                    "grade": grade,
                    "label": "counting",
                    "split": split,
                }
                pids.append(pid)
                png(base / "iconqa" / split / qtype / pid / "image.png")
            splits[f"{qtype}_{split}"] = pids
        splits[f"{qtype}_trainval"] = splits[f"{qtype}_train"] + splits[f"{qtype}_val"]
        splits[f"{qtype}_minitrain"] = splits[f"{qtype}_train"][:2]
        splits[f"{qtype}_minival"] = splits[f"{qtype}_val"][:2]
        splits[f"{qtype}_minitest"] = splits[f"{qtype}_test"][:2]
    dump(base / "problems.json", problems)
    dump(base / "pid_splits.json", splits)
    return splits


def test_derived_split_keys_are_not_image_folders_and_pids_count_once(tmp_path) -> None:
    spec = load_benchmark("drake")
    _write(tmp_path)
    for tid, qtype, grade in (
        ("iconqa-multichoice-easy", "choose_txt", "kindergarten"),
        ("iconqa-shortanswer-hard", "fill_in_blank", "grade1"),
    ):
        t = spec.task(tid)
        items = list(get_loader(t.source.loader).load(t, tmp_path))
        assert len(items) == 3, tid  # one per real split; trainval / mini* repeat them
        assert len({s.id for s in items}) == 3 and {s.meta["split"] for s in items} == {"train", "val", "test"}
        assert {s.meta["grade"] for s in items} == {grade} and {s.meta["ques_type"] for s in items} == {qtype}
        if qtype == "choose_txt":
            assert all(s.answer == "2" and s.choices == ["1", "2", "3"] for s in items)
        else:
            assert all(s.answer == "4" and s.choices == [] for s in items)
