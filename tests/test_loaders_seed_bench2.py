"""SEED-Bench-2 (issue 32, problem 2): published dimension names, data_source image folders, 8-frame video questions.

Fixture format: AILab-CVC/SEED-Bench@991e849 DATASET.md ("Data Preparation for SEED-Bench-2": questions with data_id,
data_source, data_type; the question_type map) and SEED-Bench-2/eval.py (cc3m -> cc3m_dir, 'SEED-Bench v2' ->
seed_bench_v2_dir, data_id joined as is, lists for several images). Questions are made up.
"""

from __future__ import annotations

import pytest
from fixtures_real import SEED2_TYPES, dump, png, seed2_question

from drake_bench.benchmarks.manifest import load_benchmark
from drake_bench.errors import SourceError
from drake_bench.loaders import get_loader


def _load(task, src):
    return list(get_loader(task.source.loader).load(task, src))


def _write(src, n: int = 2) -> None:
    base = src / "SEED-Bench-2"
    qs = []
    for dim in (
        "Instance Identity",
        "Instance Attributes",
        "Instance Location",
        "Instances Counting",
        "Instance Interaction",
        "Scene Understanding",
    ):
        for i in range(n):
            data_id = f"{1454426 + len(qs)}_{2591111986 + i}"  # cc3m: the image file name, no extension (DATASET.md)
            png(base / "cc3m-image" / data_id, i)
            qs.append(seed2_question(SEED2_TYPES[dim], len(qs), data_id, "cc3m", "Single Image", "ABCD"[i % 4]))
    for i in range(n):
        data_id = f"task14/science/{i}.jpg"
        png(base / "SEED-Bench-2-image" / data_id, i)
        qs.append(seed2_question(14, len(qs), data_id, "SEED-Bench v2", "Single Image", "B", choice_d=""))
    for dim in ("Action Recognition", "Action Prediction", "Procedure Understanding"):
        for i in range(n):
            frames = [f"task{SEED2_TYPES[dim]}/Charades_test_frame/V{len(qs)}/{f}.png" for f in range(1, 9)]
            for f, name in enumerate(frames):
                png(base / "SEED-Bench-2-image" / name, f)
            qs.append(seed2_question(SEED2_TYPES[dim], len(qs), frames, "SEED-Bench v2", "Video", "C"))
    dump(base / "SEED-Bench_v2_level1_2_3.json", {"questions": qs, "question_type": SEED2_TYPES})


def test_three_tasks_read_the_published_file(tmp_path) -> None:
    spec = load_benchmark("drake")
    _write(tmp_path)
    inst = _load(spec.task("seedbench2-instanceqa"), tmp_path)
    assert len(inst) == 10 and {s.meta["data_source"] for s in inst} == {"cc3m"}  # five Instance dimensions, not Scene
    kg = _load(spec.task("seedbench2-kgqa"), tmp_path)
    assert len(kg) == 2 and all(
        s.choices == ["One", "Two", "Three"] and s.answer == "Two" for s in kg
    )  # the empty option is dropped
    temporal = _load(spec.task("seedbench2-temporalqa"), tmp_path)
    assert len(temporal) == 6 and all(len(s.images) == 8 and s.answer == "Three" for s in temporal)


def test_dimension_names_and_folders_are_checked(tmp_path) -> None:
    spec = load_benchmark("drake")
    _write(tmp_path)
    t = spec.task("seedbench2-instanceqa").model_copy(deep=True)
    t.source.rule["dimensions"] = ["Instance Attribute"]
    with pytest.raises(SourceError, match="Instance Attributes"):
        _load(t, tmp_path)
    (tmp_path / "SEED-Bench-2" / "SEED-Bench-2-image").rename(tmp_path / "SEED-Bench-2" / "elsewhere")
    with pytest.raises(SourceError, match="SEED-Bench-2-image"):
        _load(spec.task("seedbench2-kgqa"), tmp_path)
