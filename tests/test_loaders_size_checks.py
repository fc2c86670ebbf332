"""No silent emptiness (issue 32): a task with 0 items, or far fewer than its manifest expects, fails its build naming
the task, the files read and what was expected; loaders whose format could not be confirmed make the build warn."""

from __future__ import annotations

import warnings

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fixtures_real import dump, jsonl, png, vizwiz_row

from drake_bench.benchmarks.build import build_benchmark
from drake_bench.benchmarks.manifest import load_benchmark
from drake_bench.benchmarks.sources import EXPECTED_FRACTION, UnconfirmedFormatWarning
from drake_bench.errors import SourceError


def _hflb_subset(tids):
    spec = load_benchmark("hflb")
    return spec, [spec.task(t) for t in tids]


def test_a_task_with_no_items_names_the_files_read_and_what_was_expected(tmp_path) -> None:
    spec, _ = _hflb_subset([])
    base = tmp_path / "VizWiz"
    rows = [vizwiz_row("VizWiz_train_00000000.jpg", "What brand is this soup?")]  # no OCR question
    dump(base / "Annotations" / "train.json", rows)
    dump(base / "Annotations" / "val.json", [])
    png(base / "train" / "VizWiz_train_00000000.jpg")
    (base / "val").mkdir()
    with pytest.raises(SourceError) as err:
        build_benchmark(spec, source_dir=tmp_path, out=tmp_path / "built", tasks=["c8-vizwiz-ocr"], show_progress=False)
    msg = str(err.value)
    assert "c8-vizwiz-ocr" in msg and "yielded 0 items" in msg
    assert "Annotations/train.json" in msg and "Annotations/val.json" in msg  # the files read
    assert "category='ocr'" in msg  # what was expected


def test_far_fewer_items_than_expected_fails_unless_allowed(tmp_path) -> None:
    spec = load_benchmark("fed-scope")
    t = spec.task("dolly")
    assert t.source.rule["expected_items"] == 6000
    rows = [{"instruction": f"Say {i}", "context": "", "response": str(i), "category": "open_qa"} for i in range(40)]
    jsonl(tmp_path / "databricks-dolly-15k" / "databricks-dolly-15k.jsonl", rows)
    with pytest.raises(SourceError, match=r"yielded 40 items.*far fewer than the 6000.*databricks-dolly-15k.jsonl"):
        build_benchmark(spec, source_dir=tmp_path, out=tmp_path / "b1", tasks=["dolly"], show_progress=False)
    # the task's test split is MMLU (its test source), a sample of which is allowed the same way
    (tmp_path / "mmlu" / "all").mkdir(parents=True)
    pq.write_table(
        pa.Table.from_pylist([{"question": "2 + 2?", "subject": "math", "choices": ["3", "4", "5", "6"], "answer": 1}]),
        tmp_path / "mmlu" / "all" / "test-00000-of-00001.parquet",
    )
    full = tmp_path / "full"
    jsonl(
        full / "databricks-dolly-15k" / "databricks-dolly-15k.jsonl",
        [{"instruction": f"Say {i}", "context": "", "response": str(i), "category": "open_qa"} for i in range(3000)],
    )
    (full / "mmlu").symlink_to(tmp_path / "mmlu")
    with (
        pytest.raises(
            SourceError, match=r"task 'dolly': source loader 'mmlu' yielded 1 items.*far fewer than the 14042"
        ),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore", UnconfirmedFormatWarning)
        build_benchmark(spec, source_dir=full, out=tmp_path / "b3", tasks=["dolly"], show_progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnconfirmedFormatWarning)
        root = build_benchmark(
            spec, source_dir=tmp_path, out=tmp_path / "b2", tasks=["dolly"], show_progress=False, check_expected=False
        )
    assert (root / "data" / "dolly").is_dir()
    assert 0 < EXPECTED_FRACTION < 1


def test_unconfirmed_formats_warn_once_per_loader(tmp_path) -> None:
    spec = load_benchmark("hflb")
    with pytest.warns(UnconfirmedFormatWarning, match="coco_qa") as rec:
        with pytest.raises(SourceError):
            build_benchmark(
                spec,
                source_dir=tmp_path,
                out=tmp_path / "built",
                tasks=["c6-coco-qa-object", "c6-coco-qa-color"],
                show_progress=False,
            )
    assert sum("coco_qa" in str(w.message) for w in rec) == 1
