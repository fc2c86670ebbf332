"""``drake-bench leaderboard verify``: a reproduced entry is told from a typed one, and the page says which is which.

A forged file whose summary is recomputed from edited raw scores passes ``check`` and every board rule (they read the
file itself); only rerunning its configuration tells. These tests rerun entries of the tiny board (toy benchmark,
model-free methods, seconds).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from minimal_method import Counter
from typer.testing import CliRunner

from drake_bench.cli import app
from drake_bench.leaderboard.verify import VERIFICATION_FILE, verification_state
from drake_bench.plugins.registry import register_method
from drake_bench.results.result_file import check_result, copy_result, read_result, summarize, write_result

register_method(Counter)


def _entry(tiny_board, tmp_path: Path, method: str) -> Path:
    """A copy of one entry's result folder of the built tiny board."""
    _, root = tiny_board
    src = next(p for p in root.rglob("result.json") if f"/{method}/" in p.as_posix() and "checkpoints" not in p.parts)
    dst = tmp_path / method / "result.json"
    dst.parent.mkdir(parents=True)
    copy_result(src, dst)
    return dst


def _forge(path: Path) -> None:
    """Every score of the file set to 1.0 and its summary recomputed: internally consistent, as a careful forger's."""
    res = read_result(path)
    raw = res.raw.model_copy(update={"scores": [s.model_copy(update={"score": 1.0}) for s in res.raw.scores]})
    forged = res.model_copy(update={"raw": raw, "summary": summarize(raw, seeds=res.seeds)})
    write_result(forged, path)
    assert check_result(path) == []  # check has nothing against it


@pytest.fixture(scope="module")
def verified_board(tiny_board, tmp_path_factory) -> tuple[Path, Path, str]:
    """A copy of the tiny board whose counter entry was verified once (a rerun costs the entry's own run), with
    the verify command's output."""
    board_json, root = tiny_board
    lb = tmp_path_factory.mktemp("verified") / "lb"
    shutil.copytree(root, lb)
    counter = next(p for p in lb.rglob("result.json") if "/counter/" in p.as_posix() and "checkpoints" not in p.parts)
    assert verification_state(counter) == "self-reported"
    result = CliRunner().invoke(app, ["leaderboard", "verify", str(counter)])
    assert result.exit_code == 0, result.output
    return board_json, counter, result.output


def test_a_rerun_reproduces_a_built_entry_digit_for_digit_and_the_record_names_the_file(verified_board, tmp_path):
    _, counter, output = verified_board
    assert "verified" in output
    path = tmp_path / "counter" / "result.json"  # a copy, so the edit below leaves the shared board alone
    path.parent.mkdir()
    copy_result(counter, path)
    shutil.copy(counter.parent / VERIFICATION_FILE, path.parent / VERIFICATION_FILE)
    record = json.loads((path.parent / VERIFICATION_FILE).read_text())
    assert record["reproduced"] is True and record["differences"] == [] and record["sandbox"] == "namespaces"
    assert verification_state(path) == "verified"
    path.write_text(path.read_text().replace('"status": "complete"', '"status": "complete" '))  # any edit voids it
    assert verification_state(path) == "self-reported"


def test_a_forged_consistent_file_is_not_reproduced(tiny_board, tmp_path):
    path = _entry(tiny_board, tmp_path, "counter")
    _forge(path)
    result = CliRunner().invoke(app, ["leaderboard", "verify", str(path)])
    assert result.exit_code == 1, result.output
    assert "not reproduced" in result.output and "score" in result.output
    assert verification_state(path) == "differs"


def test_the_page_marks_entries_verified_or_self_reported(verified_board):
    from drake_bench.leaderboard.boards import load_board
    from drake_bench.leaderboard.render import render

    board_json, counter, _ = verified_board
    lb = next(p for p in counter.parents if p.name == "lb")
    render(load_board(str(board_json)), lb)
    page = next(lb.rglob("board.html")).read_text()
    assert page.count('class="verification verified"') == 1
    assert page.count('class="verification self-reported"') == 1  # majority-answer: never rerun


def test_a_file_made_by_another_version_of_its_method_is_not_verified_against_this_one(tiny_board, tmp_path):
    path = _entry(tiny_board, tmp_path, "counter")
    data = json.loads(path.read_text())
    data["method"]["version"] = "9.9"
    path.write_text(json.dumps(data))
    result = CliRunner().invoke(app, ["leaderboard", "verify", str(path)])
    assert result.exit_code == 1 and "made by counter 9.9, but counter 1.0 is installed" in result.output


def test_a_rerun_is_scored_by_the_rules_the_file_was_scored_by(tiny_board, tmp_path):
    """``verify`` reruns under the file's ``evaluation.scorer_version``, not the run default (2.0): a file written
    before the setting existed records no scorer in its run config and was scored by 1.0 (as the committed boards
    were), and its rerun does not differ from it for the setting's absence."""
    from drake_bench.leaderboard.verify import rerun_config
    from drake_bench.results.result_file import comparable_differences

    path = _entry(tiny_board, tmp_path, "counter")
    res = read_result(path)
    assert res.evaluation.scorer_version == "1.0" and rerun_config(res, tmp_path / "a").scorer_version == "1.0"
    old = res.model_copy(deep=True)
    del old.fl.extra["run_config"]["scorer_version"]  # as a file made before RunConfig.scorer_version existed
    assert rerun_config(old, tmp_path / "b").scorer_version == "1.0"
    assert comparable_differences(old, res) == []  # the run config's copy is compared as evaluation.scorer_version
    rescored = res.model_copy(update={"evaluation": res.evaluation.model_copy(update={"scorer_version": "2.0"})})
    assert rerun_config(rescored, tmp_path / "c").scorer_version == "2.0"
    assert comparable_differences(res, rescored) == ["evaluation.scorer_version: first '1.0', second '2.0'"]
