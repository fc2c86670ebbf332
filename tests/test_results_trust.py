"""Results a board can trust: check_result refuses forged or incomplete files, report refuses duplicates, and every
committed result file passes."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from drake_bench.cli import app
from drake_bench.results.result_file import (
    RunResult,
    check_result,
    copy_result,
    dump_result_data,
    load_result_data,
    read_result,
    summarize,
    write_result,
)

REPO = Path(__file__).resolve().parents[1]
BOARD = REPO / "tests" / "results" / "main-job-recipe-6" / "drake-synth" / "dynamic"  # a copy of a fixed board
SFT, FEDIT, ZERO = (BOARD / m / "1.0" / "result.json" for m in ("sft", "fedit", "zero-shot"))
COMMITTED = sorted(
    p
    for p in (REPO / "leaderboard").rglob("*.json")  # resume state and tuning records are no results
    if "checkpoints" not in p.parts and p.name != "tuning.json"
)


def _run(*args) -> tuple[int, str]:
    r = CliRunner().invoke(app, [str(a) for a in args])
    return r.exit_code, r.output + (r.stderr if r.stderr_bytes is not None else "")


def _forged(data: dict) -> RunResult:
    """A result whose summary is recomputed from its (edited) raw tables, as a careful forger would."""
    res = RunResult.model_validate(data)
    return res.model_copy(update={"summary": summarize(res.raw, seeds=res.seeds)})


@pytest.mark.parametrize("path", COMMITTED, ids=[p.relative_to(REPO / "leaderboard").as_posix() for p in COMMITTED])
def test_every_committed_result_file_passes(path):
    assert check_result(path) == []


def test_a_result_without_one_clients_self_rows_fails_even_with_its_summary_recomputed(tmp_path):
    data = load_result_data(SFT)
    data["raw"]["scores"] = [r for r in data["raw"]["scores"] if not (r["client"] == 3 and r["role"] == "self")]
    forged = _forged(data)
    assert forged.summary != read_result(SFT).summary  # the means moved: the point of the forgery
    problems = check_result(forged)
    assert "raw.scores seed 0 round 2: client 3 has no Self rows for tasks it has seen: vqa-distortion-type" in problems
    assert any("Others rows (client, task, owner) for tasks their owner has no Self row for" in p for p in problems)
    path = tmp_path / "forged.json"
    write_result(forged, path, check=False)  # as a forger's own writer would
    code, text = _run("check", path)
    assert code == 1 and "client 3 has no Self rows" in text


def test_the_benchmarks_schedule_fixes_which_self_rows_a_round_has():
    """Dynamic: one more task per two rounds on drake-synth; a row for a task not yet met is as wrong as a gap."""
    data = load_result_data(SFT)
    rows = data["raw"]["scores"]
    late = next(
        r
        for r in rows
        if r["eval_round"] == 8
        and r["role"] == "self"
        and r["client"] == 5
        and not any(q["eval_round"] == 2 and q["task"] == r["task"] and q["client"] == 5 for q in rows)
    )
    rows.append({**late, "eval_round": 2})
    assert any(
        p.startswith("raw.scores seed 0 round 2: client 5 has Self rows for tasks it has not seen yet")
        for p in check_result(_forged(data))
    )


def test_a_dropped_evaluation_round_others_row_or_cost_record_fails():
    data = load_result_data(SFT)
    data["raw"]["scores"] = [r for r in data["raw"]["scores"] if r["eval_round"] != 4]
    assert "raw.scores seed 0: no records for evaluation rounds [4] of fl.eval_rounds [2, 4, 6, 8]" in check_result(
        _forged(data)
    )

    data = load_result_data(SFT)
    gone = next(r for r in data["raw"]["scores"] if r["role"] == "others" and r["eval_round"] == 6)
    data["raw"]["scores"].remove(gone)
    assert any(
        p.startswith("raw.scores seed 0 round 6: missing Others rows")
        and f"({gone['client']}, '{gone['task']}', {gone['owner']})" in p
        for p in check_result(_forged(data))
    )

    data = load_result_data(SFT)
    data["raw"]["costs"] = [c for c in data["raw"]["costs"] if not (c["round"] == 7 and c["client"] == 2)]
    assert "raw.costs seed 0: no cost record for (round, client) (7, 2)" in check_result(_forged(data))


def test_a_result_without_its_data_hash_or_other_provenance_fails(tmp_path):
    data = load_result_data(SFT)
    data["benchmark"]["data_hash"] = None
    assert check_result(_forged(data)) == [
        "benchmark.data_hash: missing; a result must cite the hash of the data it ran on"
    ]
    path = tmp_path / "no-hash.json"
    del data["benchmark"]["data_hash"]
    dump_result_data(data, path)
    code, text = _run("check", path)
    assert code == 1 and "benchmark.data_hash: missing" in text

    data = load_result_data(SFT)
    del data["method"]["config"]
    data["method"]["version"] = "unknown"
    data["model_allocation"]["checkpoints"].pop("tiny-llava-llama-s")
    problems = check_result(_forged(data))
    assert "method.config: missing; the full method configuration is required" in problems
    assert any(p.startswith("method.version: 'unknown'") for p in problems)
    assert any(
        p.startswith("model_allocation.checkpoints: no entry for models ['tiny-llava-llama-s']") for p in problems
    )


def test_without_the_manifest_the_rows_must_still_agree_with_each_other():
    """A benchmark drake_bench does not ship (a manifest file): clients come from the allocation, and Self/Others
    rows must still match."""
    data = load_result_data(SFT)
    data["benchmark"]["name"] = "my-own-benchmark"
    assert check_result(_forged(data)) == []
    data["raw"]["scores"] = [r for r in data["raw"]["scores"] if not (r["client"] == 3 and r["role"] == "self")]
    problems = check_result(_forged(data))
    assert "raw.scores seed 0 round 2: client 3 has no Self rows" in problems


# -------------------------------------------------------------------------- report refuses duplicates
def test_report_takes_distinct_runs(tmp_path):
    code, text = _run("report", SFT, FEDIT, ZERO)
    assert code == 0, text


@pytest.mark.parametrize("case", ["same-path", "same-content", "same-method-version", "renamed-method"])
def test_report_refuses_duplicates(tmp_path, case):
    if case == "same-path":
        files, message = [SFT, FEDIT, SFT], "the same file as"
    elif case == "same-content":
        copy = tmp_path / "copy.json"
        copy_result(SFT, copy)
        files, message = [SFT, copy], "the same content as"
    elif case == "same-method-version":
        data = load_result_data(SFT)
        data["notes"] = ["rerun"]
        other = tmp_path / "rerun.json"
        dump_result_data(data, other)
        files, message = [SFT, other], "the same method, version and settings (sft 1.0) as"
    else:
        data = load_result_data(SFT)
        data["method"]["name"] = "my-sft"
        renamed = tmp_path / "renamed.json"
        dump_result_data(data, renamed)
        files, message = [SFT, renamed], "the same raw score and cost tables"
    code, text = _run("report", *files)
    assert code == 1 and message in text and "Traceback" not in text
    assert str(files[-1]) in text and str(files[0]) in text


def test_a_run_with_given_settings_is_its_own_row(tmp_path):
    """An ablation (``--set beta=1``) of a method beside its default run: two rows, each named by what it was given."""
    data = load_result_data(SFT)
    data["fl"]["extra"]["run_config"]["method_config"] = {"learning_rate": 0.001}
    data["raw"]["scores"][0]["score"] = 0.2  # another run's numbers, or the raw-duplicate check would refuse it
    ablation = tmp_path / "ablation.json"
    write_result(_forged(data), ablation)
    assert read_result(ablation).label == "sft 1.0 (learning_rate=0.001)"
    code, text = _run("report", SFT, ablation, "--out", tmp_path / "board")
    assert code == 0, text
    summary = (tmp_path / "board" / "summary.md").read_text()
    assert "| sft 1.0 |" in summary and "| sft 1.0 (learning_rate=0.001) |" in summary
