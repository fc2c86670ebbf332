"""Result files: schema shipped = schema generated, atomic write/read round trip, clear errors, self-checks."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import jsonschema
import pytest

from drake_bench.results.result_file import (
    RESULT_SCHEMA_VERSION,
    BenchmarkRef,
    CostRecord,
    Environment,
    EvaluationSettings,
    FLSettings,
    MethodRef,
    ModelAllocationRef,
    RawTables,
    ResultFileError,
    RunResult,
    ScenarioRef,
    ScoreRecord,
    check_result,
    dump_result_data,
    new_result,
    read_result,
    result_files,
    result_path,
    result_schema,
    schema_text,
    shipped_schema,
    write_result,
)


def _rec(seed: int, rnd: int, client: int, task: str, owner: int, score: float) -> ScoreRecord:
    role = "self" if owner == client else "others"
    return ScoreRecord(seed=seed, eval_round=rnd, client=client, task=task, owner=owner, role=role, n=4, score=score)


def make_result(seeds: tuple[int, ...] = (0, 1), status: str = "complete") -> RunResult:
    scores = []
    for seed in seeds:
        bump = 0.1 * seed
        scores += [
            _rec(seed, 5, 0, "a", 0, 0.5 + bump),
            _rec(seed, 5, 1, "b", 1, 0.3 + bump),
            _rec(seed, 5, 0, "b", 1, 0.1),
            _rec(seed, 5, 1, "a", 0, 0.2),
            _rec(seed, 10, 0, "a", 0, 0.7 + bump),
            _rec(seed, 10, 1, "b", 1, 0.5 + bump),
            _rec(seed, 10, 0, "b", 1, 0.2),
            _rec(seed, 10, 1, "a", 0, 0.2),
        ]
    costs = [
        CostRecord(
            seed=s,
            round=r,
            client=c,
            uplink_bytes=1_000_000,
            downlink_bytes=2_000_000,
            train_seconds=1.5,
            peak_memory_bytes=10**9,
        )
        for s in seeds
        for r in range(1, 11)
        for c in (0, 1)  # every round of fl.rounds: check_result wants them all
    ]
    return new_result(
        benchmark=BenchmarkRef(name="drake-toy", version="1.0", manifest_hash="sha256:abc", data_hash="sha256:def"),
        scenario=ScenarioRef(tag="dynamic", config={"kind": "dynamic"}),
        method=MethodRef(name="org/fedmosaic", version="0.1", config={"lr": 2e-5, "rank": 8}),
        model_allocation=ModelAllocationRef(
            name="toy-hetero",
            clients={"0": "llama-s", "1": "qwen-m"},
            checkpoints={"llama-s": {"source": "test"}, "qwen-m": {"source": "test"}},
        ),
        seeds=list(seeds),
        fl=FLSettings(rounds=10, local_steps=100, batch_size=4, eval_every_rounds=5, eval_rounds=[5, 10]),
        evaluation=EvaluationSettings(
            decoding={"do_sample": False, "max_new_tokens": 16},
            batch_size=8,
            prompt_template_version="v1",
            padding_side="left",
        ),
        raw=RawTables(scores=scores, costs=costs),
        status=status,  # type: ignore[arg-type]
        environment=Environment(python="3.11.7", torch="2.3.0", platform="Linux", cpu_count=2, device="cpu"),
        notes=["toy run"],
        created_at=datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc),
    )


def test_shipped_schema_equals_generated() -> None:
    shipped = Path(__file__).resolve().parents[1] / "drake_bench" / "schemas" / "result.schema.json"
    assert shipped.read_text(encoding="utf-8") == schema_text(), "run `python -m drake_bench.schemas` to regenerate"
    assert shipped_schema() == result_schema()
    jsonschema.Draft202012Validator.check_schema(shipped_schema())


def test_new_result_computes_summary() -> None:
    r = make_result()
    assert r.schema_version == RESULT_SCHEMA_VERSION
    # seed 0: Self last (.7 + .5)/2 = .6, seed 1: (.8 + .6)/2 = .7 -> mean .65, population std .05
    assert r.summary.aggregate.self_last.mean == pytest.approx(0.65)
    assert r.summary.aggregate.self_last.std == pytest.approx(0.05)
    # Others last: c0 on b .2, c1 on a .2 -> .2 in both seeds
    assert r.summary.aggregate.others_last.mean == pytest.approx(0.2)
    # 2 clients x 1 MB per round
    assert r.summary.aggregate.uplink_bytes_per_round.mean == pytest.approx(2_000_000)
    assert check_result(r) == []


def test_write_read_round_trip(tmp_path: Path) -> None:
    r = make_result()
    path = write_result(r, r.path(tmp_path))
    assert path == tmp_path / "drake-toy" / "dynamic" / "org__fedmosaic" / "0.1" / "result.json"
    back = read_result(path)
    assert back == r
    assert check_result(path) == []
    assert sorted(p.name for p in path.parent.iterdir()) == sorted(p.name for p in result_files(path))  # no temp
    # overwrite in place
    write_result(make_result(seeds=(0,)), path)
    assert read_result(path).seeds == [0]


def test_result_path_layout() -> None:
    assert result_path("out", "drake", "async-3-7-3-7", "fedit", "1.2.0") == Path(
        "out/drake/async-3-7-3-7/fedit/1.2.0/result.json"
    )
    assert result_path("o", "b", "dirichlet-0.5", "my method", "v 1").parts[-3:-1] == ("my_method", "v_1")
    with pytest.raises(ResultFileError, match="method version"):
        result_path("o", "b", "s", "m", "..")


def test_write_refuses_a_summary_that_disagrees_with_raw(tmp_path: Path) -> None:
    r = make_result()
    data = r.model_dump()
    data["summary"]["aggregate"]["self_last"]["mean"] = 0.99
    tampered = RunResult.model_validate(data)
    problems = check_result(tampered)
    assert len(problems) == 1 and problems[0].startswith(
        "summary.aggregate.self_last.mean: stored 0.99, recomputed 0.6"
    )
    with pytest.raises(ResultFileError, match="self_last.mean"):
        write_result(tampered, tmp_path / "r.json")
    assert not (tmp_path / "r.json").exists()
    write_result(tampered, tmp_path / "r.json", check=False)  # explicit opt-out still validates the schema
    assert len(check_result(tmp_path / "r.json")) == 1


def test_check_result_seed_and_status_problems() -> None:
    r = make_result(seeds=(0, 1))
    data = r.model_dump()
    data["seeds"] = [0, 1, 2]
    data["summary"] = r.summary.model_dump()
    problems = check_result(RunResult.model_validate(data))
    assert "status: 'complete' but seeds [2] have no score records" in problems
    assert any(p.startswith("summary.per_seed: stored 2 entries, recomputed 3") for p in problems)

    data = r.model_dump()
    data["seeds"] = [0]
    problems = check_result(RunResult.model_validate(data))
    assert any(p.startswith("raw.scores: records for seeds [1]") for p in problems)
    assert any(p.startswith("raw.costs: records for seeds [1]") for p in problems)


def test_partial_result_with_missing_seed_is_consistent() -> None:
    r = make_result(seeds=(0,), status="partial")
    data = r.model_dump()
    data["seeds"] = [0, 1]
    from drake_bench.results.result_file import summarize

    data["summary"] = summarize(r.raw, seeds=[0, 1]).model_dump()
    assert check_result(RunResult.model_validate(data)) == []


def test_read_errors_name_file_and_field(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(ResultFileError, match="nope.json does not exist"):
        read_result(missing)

    bad = tmp_path / "bad.json"
    bad.write_text('{"schema_version": "1.0",\n  oops}')
    with pytest.raises(ResultFileError, match=r"bad.json is not valid JSON \(line 2"):
        read_result(bad)

    good = make_result().model_dump(mode="json")
    broken = json.loads(json.dumps(good))
    broken["raw"]["scores"][3]["score"] = 1.5
    p = tmp_path / "score.json"
    dump_result_data(broken, p)
    with pytest.raises(
        ResultFileError, match=r"score.json fails the result schema:\n  - raw.scores\[3\].score"
    ) as bad_score:
        read_result(p)
    assert "fields this drake_bench does not know" not in str(bad_score.value)  # only unknown fields get that note

    extra = json.loads(json.dumps(good))
    extra["method"]["secret"] = 1
    dump_result_data(extra, p)
    with pytest.raises(ResultFileError, match=r"- method: Additional properties") as refused:
        read_result(p)
    # the refusal says which drake_bench wrote the file and which reads it: a newer one adds optional fields
    assert (
        f"It has fields this drake_bench does not know: it was written by drake_bench "
        f"{good['drake_bench_version']}" in str(refused.value)
    )
    assert "upgrading drake_bench may read it" in str(refused.value)

    nofield = json.loads(json.dumps(good))
    del nofield["benchmark"]["manifest_hash"]
    dump_result_data(nofield, p)
    with pytest.raises(ResultFileError, match=r"- benchmark: 'manifest_hash' is a required property"):
        read_result(p)

    wrong_role = json.loads(json.dumps(good))
    wrong_role["raw"]["scores"][0]["owner"] = 1  # role self with another client's task: caught by the model
    dump_result_data(wrong_role, p)
    with pytest.raises(ResultFileError, match=r"score.json is inconsistent:\n  - raw.scores\[0\]"):
        read_result(p)

    future = json.loads(json.dumps(good))
    future["schema_version"] = "9.0"
    p.write_text(json.dumps(future))
    with pytest.raises(ResultFileError, match="schema_version '9.0' is not supported"):
        read_result(p)


def test_written_file_validates_against_shipped_schema(tmp_path: Path) -> None:
    path = write_result(make_result(), tmp_path / "r.json")
    data = json.loads(path.read_text())
    jsonschema.validate(data, shipped_schema())
    assert data["created_at"].startswith("2025-01-02T03:04:05")
    assert data["summary"]["conventions"]["seeds"].endswith("(ddof=0) over seeds")


def test_the_fast_validator_agrees_with_jsonschema_on_valid_and_broken_files() -> None:
    """results._schema_errors asks jsonschema-rs first and jsonschema only for what it rejects: both must agree,
    or a file the reference validator rejects could pass."""
    import copy

    import jsonschema_rs

    from drake_bench.results.encoding import TABLE_COLUMNS, encode_raw
    from drake_bench.results.result_file import _schema_errors, result_schema

    good = make_result().model_dump(mode="json")  # as a 2.0 file holds it: every raw value inside the JSON
    good["schema_version"] = "2.0"
    good["raw"] = encode_raw(good["raw"])

    def cell(d: dict, table: str, row: int, column: str, value: object) -> None:
        d["raw"][table]["rows"][row][TABLE_COLUMNS[table].index(column)] = value

    def extra_column(d: dict) -> None:
        d["raw"]["costs"]["columns"].append("sneaky")
        for row in d["raw"]["costs"]["rows"]:
            row.append(1)

    edits = {
        "valid": lambda d: None,
        "score is text": lambda d: cell(d, "scores", 3, "score", "high"),
        "score above 1": lambda d: cell(d, "scores", 3, "score", 1.5),
        "unknown record field": extra_column,
        "short row": lambda d: d["raw"]["scores"]["rows"][2].pop(),
        "missing seeds": lambda d: d.pop("seeds"),
        "negative bytes": lambda d: cell(d, "costs", 0, "uplink_bytes", -5),
        "status outside its enum": lambda d: d.__setitem__("status", "finished"),
        "null benchmark name": lambda d: d["benchmark"].__setitem__("name", None),
    }
    # a 2.0 file (raw tables inside the JSON, so every value is the schema's), checked by the 2.0 schema
    fast = jsonschema_rs.Draft202012Validator(result_schema("2.0"))
    reference = jsonschema.Draft202012Validator(result_schema("2.0"))
    for name, edit in edits.items():
        data = copy.deepcopy(good)
        edit(data)
        assert fast.is_valid(data) == reference.is_valid(data) == (name == "valid"), name
        assert bool(_schema_errors(data, "2.0")) == (name != "valid"), name

    # the shipped 3.0 schema: the raw index
    current = make_result().model_dump(mode="json")
    current["raw"] = {t: {"rows": 0, "sha256": None} for t in current["raw"]}
    current["raw"]["scores"] = {"rows": 4, "sha256": "a" * 64}
    edits3 = {
        "valid": lambda d: None,
        "negative rows": lambda d: d["raw"]["scores"].__setitem__("rows", -1),
        "a path for a digest": lambda d: d["raw"]["scores"].__setitem__("sha256", "../../etc/passwd"),
        "a table missing": lambda d: d["raw"].pop("costs"),
        "an unknown table": lambda d: d["raw"].__setitem__("extra", {"rows": 0, "sha256": None}),
    }
    fast = jsonschema_rs.Draft202012Validator(result_schema())
    reference = jsonschema.Draft202012Validator(result_schema())
    for name, edit in edits3.items():
        data = copy.deepcopy(current)
        edit(data)
        assert fast.is_valid(data) == reference.is_valid(data) == (name == "valid"), name
