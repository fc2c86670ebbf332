"""Result file layouts: 3.0 (written) keeps the raw tables as Parquet files beside the JSON; 2.0 (column-wise
inside the JSON) and 1.0 (one object per record) still read, through `drake_bench.results.converters`, and
`drake-bench upgrade` rewrites them without changing a number. A table file that is missing, replaced, tampered
with or not Parquet is one error naming it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from test_results import make_result
from typer.testing import CliRunner

from drake_bench.cli import app
from drake_bench.results import tables
from drake_bench.results.encoding import TABLE_COLUMNS, dumps, encode_raw, error_path
from drake_bench.results.result_file import (
    RESULT_SCHEMA_VERSION,
    ResultFileError,
    dump_result_data,
    load_result_data,
    read_result,
    result_files,
    upgrade_result_file,
    write_result,
)

REPO = Path(__file__).resolve().parents[1]
BOARD_ENTRY = REPO / "tests/results/main-job-3-seeds-recipe-8/drake-synth/dynamic/sft/1.0/result.json"


def _as_v1(tmp_path: Path, name: str = "old.json") -> Path:
    """A file as drake_bench wrote it before 2.0: indented, one JSON object per raw record."""
    data = make_result().model_dump(mode="json")
    data["schema_version"] = "1.0"
    path = tmp_path / name
    path.write_text(json.dumps(data, indent=2))
    return path


def _as_v2(tmp_path: Path, name: str = "two.json") -> Path:
    """A file as drake_bench wrote it before 3.0: the raw tables column-wise inside the JSON."""
    data = make_result().model_dump(mode="json")
    data["schema_version"] = "2.0"
    data["raw"] = encode_raw(data["raw"])
    path = tmp_path / name
    path.write_text(dumps(data))
    return path


def test_a_written_file_keeps_each_table_as_parquet_beside_it_that_pandas_and_arrow_read(tmp_path: Path) -> None:
    result = make_result()
    path = write_result(result, tmp_path / "result.json")
    data = json.loads(path.read_text())
    assert data["schema_version"] == RESULT_SCHEMA_VERSION == "3.0"
    assert set(data["raw"]) == set(tables.TABLE_NAMES)
    files = result_files(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in files)  # no temp file left
    scores = data["raw"]["scores"]
    assert scores["rows"] == len(result.raw.scores)
    table = tmp_path / f"result.scores.{scores['sha256'][:16]}.parquet"
    assert table in files and hashlib.sha256(table.read_bytes()).hexdigest() == scores["sha256"]
    frame = pq.read_table(table).to_pandas()
    first = result.raw.scores[0].model_dump(mode="json")
    assert list(frame.columns) == list(TABLE_COLUMNS["scores"]) and len(frame) == len(result.raw.scores)
    assert frame.iloc[0]["task"] == first["task"] and frame.iloc[0]["score"] == first["score"]
    empty = [t for t, e in data["raw"].items() if e["rows"] == 0]
    assert empty and all(e["sha256"] is None for t, e in data["raw"].items() if t in empty)  # no file for those
    assert read_result(path) == result


def test_rewriting_a_result_replaces_its_tables_and_leaves_no_stale_one(tmp_path: Path) -> None:
    path = write_result(make_result(), tmp_path / "result.json")
    before = {p.name for p in result_files(path)}
    write_result(make_result(), path)  # the same tables: the same names, untouched
    assert {p.name for p in result_files(path)} == before
    write_result(make_result(seeds=(0,)), path)
    after = {p.name for p in result_files(path)}
    assert after != before and {p.name for p in tmp_path.iterdir()} == after
    assert read_result(path).seeds == [0]


def test_a_missing_replaced_tampered_or_foreign_table_is_one_error_naming_it(tmp_path: Path) -> None:
    path = write_result(make_result(), tmp_path / "result.json")
    data = json.loads(path.read_text())
    table = next(p for p in result_files(path) if ".scores." in p.name)
    good = table.read_bytes()

    table.unlink()
    with pytest.raises(ResultFileError, match=r"raw.scores \(result.scores.[0-9a-f]{16}.parquet\) is not there"):
        read_result(path)

    table.write_bytes(good[:-7] + b"garbage")  # tampered: the JSON's sha256 no longer matches
    with pytest.raises(ResultFileError, match="is not the table the result file was written with"):
        read_result(path)

    bogus = b"not parquet at all"
    sha = hashlib.sha256(bogus).hexdigest()  # a consistent but foreign file: named, not a pyarrow traceback
    data["raw"]["scores"]["sha256"] = sha
    path.write_text(json.dumps(data))
    tables.table_path(path, "scores", sha).write_bytes(bogus)
    with pytest.raises(ResultFileError, match="is not a Parquet table this version reads"):
        read_result(path)

    import pyarrow as pa  # Parquet, but of other columns

    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"seed": [0], "score": ["high"]}), other)
    sha = hashlib.sha256(other.read_bytes()).hexdigest()
    data["raw"]["scores"]["sha256"] = sha
    path.write_text(json.dumps(data))
    other.rename(tables.table_path(path, "scores", sha))
    with pytest.raises(ResultFileError, match="has columns .* of types other than this version's"):
        read_result(path)

    table.write_bytes(good)  # the right file, but the JSON claims another row count
    data["raw"]["scores"]["sha256"] = hashlib.sha256(good).hexdigest()
    data["raw"]["scores"]["rows"] += 1
    path.write_text(json.dumps(data))
    with pytest.raises(ResultFileError, match=r"holds \d+ rows; the result file says \d+"):
        read_result(path)

    data["raw"]["scores"]["sha256"] = "../" * 20 + "x"  # never a path: the schema refuses it before any read
    path.write_text(json.dumps(data))
    with pytest.raises(ResultFileError, match=r"raw.scores.sha256"):
        read_result(path)


def test_a_table_claiming_a_huge_decoded_size_is_refused_before_it_is_read(tmp_path: Path, monkeypatch) -> None:
    path = write_result(make_result(), tmp_path / "result.json")
    monkeypatch.setattr(tables, "MAX_TABLE_DECODED_BYTES", 10)
    with pytest.raises(ResultFileError, match="says it decodes to \\d+ bytes"):
        read_result(path)


def test_older_layouts_read_to_the_same_result_and_upgrade_losslessly(tmp_path: Path) -> None:
    for old in (_as_v1(tmp_path), _as_v2(tmp_path)):
        result = read_result(old)
        assert result == make_result() and result.schema_version == RESULT_SCHEMA_VERSION
        assert load_result_data(old)["raw"] == make_result().model_dump(mode="json")["raw"]

        assert upgrade_result_file(old) is True
        assert json.loads(old.read_text())["schema_version"] == "3.0" and read_result(old) == result
        assert upgrade_result_file(old) is False  # already current: untouched
    assert not [p for p in tmp_path.iterdir() if "upgrade" in p.name]  # no staging folder left behind
    assert load_result_data(tmp_path / "two.json")["raw"] == make_result().model_dump(mode="json")["raw"]


def test_a_board_entry_takes_under_a_fifth_of_its_2_0_size(tmp_path: Path) -> None:
    """The reason for the layout: a board entry (3 seeds, thousands of score rows) written column-wise inside the
    JSON (2.0), against the same result written now, its tables included."""
    result = read_result(BOARD_ENTRY)
    data = result.model_dump(mode="json")
    data["schema_version"] = "2.0"
    data["raw"] = encode_raw(data["raw"])
    old = tmp_path / "old.json"
    old.write_text(dumps(data))
    new = write_result(result, tmp_path / "new" / "result.json", check=False)
    assert read_result(new) == read_result(old) == result
    size = sum(p.stat().st_size for p in result_files(new))
    assert size < 0.2 * old.stat().st_size, (size, old.stat().st_size)


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
        cost["sneaky"] = 1  # a field the record does not have: refused, not dropped
    with pytest.raises(ResultFileError, match=r"raw.costs has fields no costs record has: sneaky"):
        dump_result_data(data, tmp_path / "r.json")

    two = json.loads(_as_v2(tmp_path).read_text())  # a 2.0 file: its rows' values are checked by its own schema
    two["raw"]["scores"]["rows"][3][TABLE_COLUMNS["scores"].index("score")] = 1.5
    (tmp_path / "two.json").write_text(json.dumps(two))
    with pytest.raises(ResultFileError, match=r"raw.scores\[3\].score: 1.5 is greater"):
        read_result(tmp_path / "two.json")

    rows_form = make_result().model_dump(mode="json")  # 3.0 claimed, 1.0 layout: say what is wrong, briefly
    (tmp_path / "mixed.json").write_text(json.dumps(rows_form))
    with pytest.raises(ResultFileError) as info:
        read_result(tmp_path / "mixed.json")
    assert "raw.scores: a list of records, as schema 1.0 files store a table" in str(info.value)
    assert max(map(len, str(info.value).splitlines())) < 400

    assert error_path(["raw", "scores", "rows", 3, 7]) == ["raw", "scores", 3, "score"]
    assert error_path(["raw", "scores", "rows", 2]) == ["raw", "scores", 2]
    assert error_path(["summary", "per_seed", 0]) == ["summary", "per_seed", 0]


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
    """A board mixing layouts would still read, but the repository's files should not cost twenty times their size."""
    root = Path(__file__).resolve().parents[1] / "leaderboard"

    def head(p: Path) -> str:  # the version is the file's first field: no need to read megabytes
        with p.open(encoding="utf-8") as f:
            return f.read(200)

    old = [
        str(p.relative_to(root))
        for p in root.rglob("result.json")
        if "checkpoints" not in p.parts and f'"schema_version": "{RESULT_SCHEMA_VERSION}"' not in head(p)
    ]
    assert old == [], f"run `drake-bench upgrade leaderboard` for: {old[:5]}"
