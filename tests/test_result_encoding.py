"""Result files store raw tables column-wise (schema 2.0); 1.0 files (one object per record) still read, and
`drake-bench upgrade` rewrites them without changing a number."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_results import make_result
from typer.testing import CliRunner

from drake_bench.cli import app
from drake_bench.results.encoding import TABLE_COLUMNS, decode_raw, dumps, encode_raw, error_path
from drake_bench.results.result_file import (
    RESULT_SCHEMA_VERSION,
    ResultFileError,
    dump_result_data,
    load_result_data,
    read_result,
    upgrade_result_file,
    write_result,
)


def _as_v1(tmp_path: Path, name: str = "old.json") -> Path:
    """A file as drake_bench wrote it before 2.0: indented, one JSON object per raw record."""
    data = make_result().model_dump(mode="json")
    data["schema_version"] = "1.0"
    path = tmp_path / name
    path.write_text(json.dumps(data, indent=2))
    return path


def test_a_written_file_stores_each_table_as_columns_and_one_line_per_row(tmp_path: Path) -> None:
    result = make_result()
    path = write_result(result, tmp_path / "r.json")
    data = json.loads(path.read_text())
    assert data["schema_version"] == RESULT_SCHEMA_VERSION == "2.0"
    scores = data["raw"]["scores"]
    assert scores["columns"] == list(TABLE_COLUMNS["scores"]) and len(scores["rows"]) == len(result.raw.scores)
    first = result.raw.scores[0].model_dump(mode="json")
    assert scores["rows"][0] == [first[c] for c in scores["columns"]]
    text = path.read_text()
    assert json.dumps(scores["rows"][0]) in text.splitlines()[text.splitlines().index('      "rows": [') + 1]
    assert read_result(path) == result


def test_a_schema_1_0_file_reads_to_the_same_result_and_upgrades_losslessly(tmp_path: Path) -> None:
    old = _as_v1(tmp_path)
    before = old.stat().st_size
    result = read_result(old)
    assert result == make_result() and result.schema_version == RESULT_SCHEMA_VERSION
    assert load_result_data(old)["raw"] == make_result().model_dump(mode="json")["raw"]

    assert upgrade_result_file(old) is True
    assert json.loads(old.read_text())["schema_version"] == "2.0" and read_result(old) == result
    assert old.stat().st_size < before
    assert upgrade_result_file(old) is False  # already current: untouched
    assert not list(tmp_path.glob(".*upgrade"))  # no temporary file left behind


def test_a_board_entry_takes_under_two_fifths_of_its_1_0_size(tmp_path: Path) -> None:
    """The reason for the layout: a committed board entry (3 seeds, thousands of score rows) written as 1.0 was
    (json.dump, indent=2) against the same result written now."""
    committed = (
        Path(__file__).resolve().parents[1]
        / "leaderboard"
        / "archive"
        / "recipe-8"
        / "main-job-3-seeds"
        / "drake-synth"
        / "dynamic"
        / "sft"
        / "1.0"
        / "result.json"
    )
    data = load_result_data(committed)
    data["schema_version"] = "1.0"
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    new = write_result(read_result(old), tmp_path / "new.json", check=False)
    assert read_result(new) == read_result(committed)
    assert new.stat().st_size < 0.4 * old.stat().st_size, (new.stat().st_size, old.stat().st_size)


def test_the_upgrade_command_walks_folders_and_names_an_unreadable_file(tmp_path: Path) -> None:
    (tmp_path / "a" / "sft").mkdir(parents=True)
    _as_v1(tmp_path / "a" / "sft", "result.json")
    write_result(make_result(), tmp_path / "a" / "result.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    r = CliRunner().invoke(app, ["upgrade", str(tmp_path / "a"), str(bad)])
    assert r.exit_code == 1
    assert "a/sft/result.json: upgraded" in r.output and "1 upgraded, 1 already current, 1 unreadable" in r.output
    assert "bad.json is not valid JSON" in r.output
    assert read_result(tmp_path / "a" / "sft" / "result.json") == make_result()


def test_schema_errors_name_the_record_and_field_not_the_row_and_column(tmp_path: Path) -> None:
    data = load_result_data(write_result(make_result(), tmp_path / "r.json"))
    data["raw"]["scores"][3]["score"] = 1.5
    dump_result_data(data, tmp_path / "r.json")
    with pytest.raises(ResultFileError, match=r"fails the result schema:\n  - raw.scores\[3\].score: 1.5 is greater"):
        read_result(tmp_path / "r.json")

    data["raw"]["scores"][3]["score"] = 0.5
    for cost in data["raw"]["costs"]:
        cost["sneaky"] = 1  # a column the record does not have: refused, not dropped
    dump_result_data(data, tmp_path / "r.json")
    with pytest.raises(ResultFileError, match=r"- raw.costs.columns: .* was expected"):
        read_result(tmp_path / "r.json")

    rows_form = make_result().model_dump(mode="json")  # 2.0 claimed, 1.0 layout: say what is wrong, briefly
    (tmp_path / "mixed.json").write_text(json.dumps(rows_form))
    with pytest.raises(ResultFileError) as info:
        read_result(tmp_path / "mixed.json")
    assert "raw.scores: a list of records, as schema 1.0 files store a table" in str(info.value)
    assert max(map(len, str(info.value).splitlines())) < 400

    assert error_path(["raw", "scores", "rows", 3, 7]) == ["raw", "scores", 3, "score"]
    assert error_path(["raw", "scores", "rows", 2]) == ["raw", "scores", 2]
    assert error_path(["summary", "per_seed", 0]) == ["summary", "per_seed", 0]


def test_encoding_round_trips_every_table_and_refuses_a_ragged_one() -> None:
    raw = make_result().model_dump(mode="json")["raw"]
    assert decode_raw(encode_raw(raw)) == raw
    ragged = {"scores": [dict(raw["scores"][0]), {k: v for k, v in raw["scores"][1].items() if k != "n"}]}
    with pytest.raises(ValueError, match=r"raw.scores\[1\] lacks n"):
        encode_raw(ragged)


def test_dumps_is_json_that_reads_back_the_same() -> None:
    data = {
        "a": [1, 2.5, None, "x"],
        "b": {"c": [[1, {"k": [1, 2]}], [2, {}]], "d": [{"e": 1}, {"f": []}]},
        "g": {},
        "h": [],
        "i": "ü",
    }
    text = dumps(data)
    assert json.loads(text) == data and text.endswith("\n")
    assert '  "a": [1, 2.5, null, "x"],' in text and '      [1, {"k": [1, 2]}],' in text


def test_committed_result_files_are_all_current() -> None:
    """A board mixing layouts would still read, but the repository's files should not cost three times their size."""
    root = Path(__file__).resolve().parents[1] / "leaderboard"

    def head(p: Path) -> str:  # the version is the file's first field: no need to read megabytes
        with p.open(encoding="utf-8") as f:
            return f.read(200)

    old = [
        str(p.relative_to(root))
        for p in root.rglob("result.json")
        if "checkpoints" not in p.parts and '"schema_version": "2.0"' not in head(p)
    ]
    assert old == [], f"run `drake-bench upgrade leaderboard` for: {old[:5]}"
