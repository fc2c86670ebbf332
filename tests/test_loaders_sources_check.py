"""``drake-bench sources check`` (issue 32) on a complete, a partial and a wrongly laid-out source folder."""

from __future__ import annotations

import shutil

import pytest
from fixtures_real import write_fixtures
from typer.testing import CliRunner

from drake_bench.benchmarks.manifest import load_benchmark
from drake_bench.benchmarks.sources import check_sources
from drake_bench.cli import app


def _run(*args: str):
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result, result.output + (result.stderr if result.stderr_bytes is not None else "")


@pytest.fixture(scope="module")
def hflb_src(tmp_path_factory):
    return write_fixtures(load_benchmark("hflb"), tmp_path_factory.mktemp("hflb-src"), per_task=2)


def test_complete_folder_passes_with_record_counts(hflb_src) -> None:
    result, out = _run("sources", "check", "hflb", "--source-dir", hflb_src)
    assert result.exit_code == 0, out
    assert "36 of 36 tasks have every required file" in out
    assert "GQA/questions1.2/train_balanced_questions.json [12 records]" in out  # 24 GQA questions, half in train
    assert "VizWiz/Annotations/train.json [9 records]" in out
    assert "format not confirmed" not in out  # notes are shown with -v or for incomplete tasks only
    result, out = _run("sources", "check", "hflb", "--source-dir", hflb_src, "--task", "c6-coco-qa-color", "-v")
    assert result.exit_code == 0 and "found    COCO-QA train questions.txt" in out and "format not confirmed" in out


def test_partial_folder_lists_what_is_missing_and_where_to_get_it(hflb_src, tmp_path) -> None:
    src = tmp_path / "src"
    shutil.copytree(hflb_src, src)
    shutil.rmtree(src / "VizWiz")
    (src / "VQA" / "Annotations" / "abstract_v002_val2015_annotations.json").unlink()
    result, out = _run("sources", "check", "hflb", "--source-dir", src)
    assert result.exit_code == 1, out
    assert (
        "c8-vizwiz-ocr [vizwiz]: MISSING" in out
        and "missing  VizWiz train annotations: expected at VizWiz/Annotations/train.json" in out
    )
    assert (
        "download Annotations.zip (-> Annotations/): https://vizwiz.cs.colorado.edu/VizWiz_final/vqa_data/Annotations.zip"
        in out
    )
    assert (
        "missing  VQA abstract val2015 annotations: expected at VQA/Annotations/abstract_v002_val2015_annotations.json"
        in out
    )
    assert "https://visualqa.org/vqa_v1_download.html" in out
    assert "28 of 36 tasks have every required file" in out  # 4 VizWiz + 4 VQA tasks miss files
    assert "c1-gqa-yes-no-attribute [gqa]: ok" in out


def test_wrong_layout_points_at_the_misplaced_files(hflb_src, tmp_path) -> None:
    src = tmp_path / "src"
    shutil.copytree(hflb_src, src)
    # GQA's questions unpacked one level too deep, VizWiz's annotations left beside the images
    (src / "GQA" / "questions1.2").rename(src / "GQA" / "downloads")
    shutil.move(str(src / "VizWiz" / "Annotations" / "train.json"), str(src / "VizWiz" / "train" / "train.json"))
    report = check_sources("hflb", src, tasks=["c1-gqa-yes-no-global", "c8-vizwiz-ocr"])
    assert not report.ok
    result, out = _run(
        "sources", "check", "hflb", "--source-dir", src, "--task", "c1-gqa-yes-no-global", "--task", "c8-vizwiz-ocr"
    )
    assert result.exit_code == 1, out
    assert (
        "found elsewhere: GQA/downloads/train_balanced_questions.json -> move it to GQA/questions1.2/train_balanced_questions.json"
        in out
    )
    assert "found elsewhere: VizWiz/train/train.json -> move it to VizWiz/Annotations/train.json" in out


def test_not_a_folder_and_embedded_benchmarks(tmp_path) -> None:
    result, out = _run("sources", "check", "hflb", "--source-dir", tmp_path / "nope")
    assert result.exit_code == 1 and "does not exist" in out
    result, out = _run("sources", "check", "hflb-synth", "--source-dir", tmp_path)
    assert result.exit_code == 0 and "generated on the fly" in out
