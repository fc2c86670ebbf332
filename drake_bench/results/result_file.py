"""The result file: one typed, versioned JSON record per (benchmark, scenario, method, method version).

A result carries everything its numbers depend on (benchmark and data hashes, scenario, method
config, model allocation, seeds, FL and evaluation settings, environment), so two results are
comparable exactly when these agree, plus the *raw* score tables; the summary is derived from the
raw tables by :func:`drake_bench.evaluation.metrics.summarize`, and :func:`check_result` recomputes
it, so a submitted file whose headline numbers disagree with its own raw data is caught.

The JSON Schema shipped as ``drake_bench/schemas/result.schema.json`` is generated from
:class:`RunResult` (``python -m drake_bench.schemas`` rewrites it); third-party tools can
validate result files without Python. Layout on disk is MTEB-style, see :func:`result_path`;
the raw tables are Parquet files beside the JSON (:mod:`drake_bench.results.tables`), and files of older
layouts read through :mod:`drake_bench.results.converters`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import platform
import re
import tempfile
from datetime import datetime, timezone
from importlib import metadata, resources
from pathlib import Path
from typing import Any, Iterable, Literal, Sequence

import jsonschema
from pydantic import ConfigDict, Field, ValidationError, model_validator

from drake_bench._version import __version__
from drake_bench.core.json_files import read_json
from drake_bench.core.strict_model import StrictModel
from drake_bench.core.write_failure import once_there_is_space, write_failure
from drake_bench.errors import DrakeBenchError, JSONFileError
from drake_bench.evaluation.metrics import (
    AbsenceRecord,
    AdaptationRecord,
    CostRecord,
    DiagnosticRecord,
    PostFederationCostRecord,
    RawTables,
    ScoreRecord,
    ServerCostRecord,
    Summary,
    summarize,
)
from drake_bench.evaluation.scoring import LEGACY_SCORER_VERSION
from drake_bench.results import encoding as result_encoding
from drake_bench.results import tables as raw_tables
from drake_bench.results.converters import CONVERTERS

RESULT_SCHEMA_VERSION = "3.0"
READABLE_SCHEMA_VERSIONS = ("1.0", "2.0", RESULT_SCHEMA_VERSION)
"""Versions :func:`read_result` reads: 1.0 stored each raw record as its own object, 2.0 each table column-wise
inside the JSON, 3.0 each table as a Parquet file beside it. All describe the same :class:`RunResult`; writing
always writes 3.0."""
SCHEMA_FILE = "result.schema.json"
RESULT_FILE = "result.json"

__all__ = [
    "RESULT_SCHEMA_VERSION",
    "AbsenceRecord",
    "AdaptationRecord",
    "BenchmarkRef",
    "CostRecord",
    "DiagnosticRecord",
    "Environment",
    "EvaluationSettings",
    "FLSettings",
    "MethodRef",
    "ModelAllocationRef",
    "PostFederationCostRecord",
    "RawTables",
    "ResultFileError",
    "RunResult",
    "ScenarioRef",
    "ScoreRecord",
    "ServerCostRecord",
    "Summary",
    "capture_environment",
    "check_result",
    "comparable",
    "comparable_differences",
    "copy_result",
    "completeness_problems",
    "provenance_problems",
    "new_result",
    "read_result",
    "result_files",
    "result_path",
    "result_schema",
    "shipped_schema",
    "summarize",
    "unpinned_weights",
    "weights_conflicts",
    "write_result",
]


class ResultFileError(DrakeBenchError):
    """A result file is missing, malformed, fails its schema, or disagrees with its own raw tables."""


class BenchmarkRef(StrictModel):
    name: str
    version: str
    manifest_hash: str = Field(description="content_hash of the benchmark manifest.")
    data_hash: str | None = Field(
        default=None,
        description="Hash of the built data (splits) evaluated on: over the shard files' bytes (build_info.json).",
    )
    content_hash: str | None = Field(
        default=None,
        description="Hash of the same data as read back (every column, images as decoded pixels): equal for two "
        "builds of the same data with other pyarrow or Pillow versions, whose file bytes (data_hash) "
        "differ. None in files written before drake_bench recorded it.",
    )
    verified_files: dict[str, str] = Field(
        default_factory=dict,
        description="Shard path (relative to the built folder) -> sha256, checked against build_info.json when the "
        "run read it: the exact data the numbers come from.",
    )


def benchmark_differences(a: BenchmarkRef, b: BenchmarkRef) -> list[str]:
    """Why two results' benchmarks are not the same data, one phrase per field; empty when they are.

    The identity is name, version, manifest hash and data hash; where both files cite a content hash, an equal
    content hash stands for the data hash (the same data written by other pyarrow / Pillow versions has other
    file bytes) and a different one is a difference. ``verified_files`` lists the shards a run happened to check
    as it read them (a resumed run may read and list fewer), so two lists need not be equal: only a shard both
    checked must have the same sha256 in both, where the two cite the same file bytes."""
    both_content = bool(a.content_hash and b.content_hash)
    fields = ["name", "version", "manifest_hash"]
    if not (both_content and a.content_hash == b.content_hash):
        fields.append("data_hash")
    out = [f"{f} {getattr(b, f)!r} (not {getattr(a, f)!r})" for f in fields if getattr(a, f) != getattr(b, f)]
    if both_content and a.content_hash != b.content_hash:
        out.append(f"content_hash {b.content_hash!r} (not {a.content_hash!r})")
    if a.data_hash == b.data_hash:
        clash = sorted(
            k for k in set(a.verified_files) & set(b.verified_files) if a.verified_files[k] != b.verified_files[k]
        )
        if clash:
            out.append(f"{len(clash)} shard(s) with another sha256, e.g. {clash[0]}")
    return out


class ScenarioRef(StrictModel):
    tag: str = Field(description="Short form, e.g. 'static', 'dynamic', 'async-3-7-3-7', 'dirichlet-0.5'.")
    config: dict[str, Any] = Field(default_factory=dict, description="The full scenario object.")


class MethodRef(StrictModel):
    name: str
    version: str
    config: dict[str, Any] = Field(default_factory=dict, description="Full method configuration.")
    package: str | None = Field(
        default=None,
        description="The distribution that registered the method, its version and, where one can be known, the "
        "source revision its code ran from (drake_bench/core/provenance.py): a method version alone does "
        "not say which code made the numbers. None for a method registered in-process.",
    )


class ModelAllocationRef(StrictModel):
    name: str
    clients: dict[str, str] = Field(description="client id (as a string) -> model id.")
    checkpoints: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="model id -> what fixes its weights: for tiny zoo models the shipped checkpoint's weights_sha256 "
        "(older results, and locally pretrained ones, record only the pretraining recipe), the source "
        "otherwise.",
    )


def _legacy_learning_rate_schema(schema: dict[str, Any]) -> None:
    """Older result files hold ``fl.learning_rate: null``; the schema keeps accepting exactly that."""
    schema["properties"]["learning_rate"] = {
        "type": "null",
        "default": None,
        "deprecated": True,
        "title": "Learning Rate",
        "description": "Never set; read from older result files and no longer written (see method.config).",
    }


class FLSettings(StrictModel):
    rounds: int = Field(ge=1)
    local_steps: int = Field(ge=0)
    batch_size: int = Field(ge=1)
    eval_every_rounds: int | None = Field(default=None, ge=1)
    eval_rounds: list[int] = Field(default_factory=list, description="1-based rounds after which evaluation ran.")
    others_subsample: int | None = Field(
        default=None,
        description="Items per task for Others (a seeded subsample, as the manifest's fl.others_subsample); None = full test set; 0 = Others not scored.",
    )
    num_clients: int | None = Field(default=None, ge=1)
    extra: dict[str, Any] = Field(default_factory=dict)

    model_config = ConfigDict(json_schema_extra=_legacy_learning_rate_schema)

    @model_validator(mode="before")
    @classmethod
    def _drop_legacy_learning_rate(cls, data: Any) -> Any:
        # result files written before the field was removed carry "learning_rate": null (nothing ever set it; a
        # method's learning rate is in method.config); read them, never write it
        if isinstance(data, dict) and "learning_rate" in data and data["learning_rate"] is None:
            return {k: v for k, v in data.items() if k != "learning_rate"}
        return data


PREDICT_CALLS_KEY = "predict_calls"
"""``evaluation.extra`` key of a run that asked each client once per evaluation point (``RunConfig.predict_per_client``):
the evaluator writes it, the board rules refuse it."""


class EvaluationSettings(StrictModel):
    """Every knob that moves scores, so two results are compared only when they were scored alike."""

    decoding: dict[str, Any] = Field(description="Generation parameters, e.g. do_sample, max_new_tokens, temperature.")
    batch_size: int = Field(ge=1)
    prompt_template_version: str
    padding_side: Literal["left", "right"] | None = None
    scorer_version: str = Field(
        default=LEGACY_SCORER_VERSION,
        description="Version of the scoring rules applied (drake_bench/evaluation/scoring.py; RunConfig.scorer_version "
        "chooses it): '2.0' scores open answers by token F1 of a length-capped response, '1.0' by token "
        "recall. The evaluator always writes it; a file that records none was scored by '1.0'.",
    )
    judge: str | None = Field(default=None, description="LLM judge model and version when used; None = offline scorer.")
    extra: dict[str, Any] = Field(default_factory=dict)


class Environment(StrictModel):
    python: str
    torch: str | None = None
    transformers: str | None = None
    peft: str | None = None
    datasets: str | None = None
    pyarrow: str | None = Field(
        default=None, description="Wrote and read the Parquet shards (it moves data_hash, not content_hash)."
    )
    pillow: str | None = Field(
        default=None, description="Encoded and decoded the images (it moves data_hash, not content_hash)."
    )
    platform: str
    cpu_count: int | None = None
    device: str
    cpu_model: str | None = Field(default=None, description="The CPU's model name as the OS reports it.")
    cpu_capability: str | None = Field(
        default=None,
        description="The instruction set torch's CPU kernels used where the method trained (AVX2, AVX512, ...): "
        "trained digits reproduce bit for bit only on the same one (run_config.numerics; "
        "drake_bench/core/numerics.py).",
    )
    drake_bench_source: str | None = Field(
        default=None,
        description="The source revision of the drake_bench that ran the evaluator: 'git:<commit>' from a checkout "
        "('+modified' when its tracked code differed from the commit), pip's record of a VCS or archive "
        "install, None for a release (drake_bench_version names it).",
    )


class RunResult(StrictModel):
    """One run of one method on one benchmark and scenario, over all its seeds."""

    schema_version: Literal["3.0"] = RESULT_SCHEMA_VERSION
    drake_bench_version: str
    created_at: datetime
    benchmark: BenchmarkRef
    scenario: ScenarioRef
    method: MethodRef
    model_allocation: ModelAllocationRef
    seeds: list[int] = Field(min_length=1)
    fl: FLSettings
    evaluation: EvaluationSettings
    environment: Environment
    raw: RawTables
    summary: Summary
    status: Literal["complete", "partial"]
    notes: list[str] = Field(default_factory=list)

    @property
    def method_settings(self) -> dict[str, Any]:
        """The method settings the run was given (``drake-bench run --set``), as opposed to the full config."""
        run_config = self.fl.extra.get("run_config") or {}
        return dict(run_config.get("method_config") or {})

    @property
    def numerics(self) -> str | None:
        """The floating-point setting the run was given (``RunConfig.numerics``); None for a file made before the
        setting existed, which computed natively."""
        return (self.fl.extra.get("run_config") or {}).get("numerics")

    @property
    def label(self) -> str:
        """The method as a board names it: ``name version``, plus the settings given, e.g.
        ``fedrpca 1.0 (beta=1)``, so an ablation and the default are two rows, not a clash."""
        base = f"{self.method.name} {self.method.version}"
        given = self.method_settings
        if not given:
            return base
        return (
            base
            + " ("
            + ", ".join(f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in sorted(given.items()))
            + ")"
        )

    def path(self, out: str | Path) -> Path:
        """Where this result lives under ``out`` (see :func:`result_path`)."""
        return result_path(out, self.benchmark.name, self.scenario.tag, self.method.name, self.method.version)


# --------------------------------------------------------------------------- construction


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def capture_environment(device: str = "cpu", cpu_capability: str | None = None) -> Environment:
    """Versions of the libraries that move scores, the platform, the CPU and the device used. ``cpu_capability``: the
    instruction set of the process that trained (a method worker's), when it is not this one."""
    from drake_bench.core.numerics import cpu_capability as this_process_capability
    from drake_bench.core.numerics import cpu_model
    from drake_bench.core.provenance import drake_bench_source

    return Environment(
        python=platform.python_version(),
        torch=_version("torch"),
        transformers=_version("transformers"),
        peft=_version("peft"),
        datasets=_version("datasets"),
        pyarrow=_version("pyarrow"),
        pillow=_version("pillow"),
        platform=platform.platform(),
        cpu_count=os.cpu_count(),
        device=device,
        cpu_model=cpu_model(),
        cpu_capability=cpu_capability or this_process_capability(),
        drake_bench_source=drake_bench_source(),
    )


def new_result(
    *,
    benchmark: BenchmarkRef,
    scenario: ScenarioRef,
    method: MethodRef,
    model_allocation: ModelAllocationRef,
    seeds: Sequence[int],
    fl: FLSettings,
    evaluation: EvaluationSettings,
    raw: RawTables,
    status: Literal["complete", "partial"],
    environment: Environment | None = None,
    notes: Sequence[str] = (),
    created_at: datetime | None = None,
) -> RunResult:
    """A result with its summary computed from ``raw`` (the only way a summary should be made)."""
    return RunResult(
        drake_bench_version=__version__,
        created_at=created_at or datetime.now(timezone.utc),
        benchmark=benchmark,
        scenario=scenario,
        method=method,
        model_allocation=model_allocation,
        seeds=list(seeds),
        fl=fl,
        evaluation=evaluation,
        environment=environment or capture_environment(),
        raw=raw,
        summary=summarize(raw, seeds=list(seeds)),
        status=status,
        notes=list(notes),
    )


# --------------------------------------------------------------------------- paths

_UNSAFE = re.compile(r"[^A-Za-z0-9._+=-]")


def _safe(part: str, what: str) -> str:
    """A path component: '/' becomes '__' (as MTEB does for model ids), other unsafe characters '_'."""
    s = _UNSAFE.sub("_", str(part).replace("/", "__"))
    if not s or s in (".", ".."):
        raise ResultFileError(f"cannot use {part!r} as the {what} part of a result path")
    return s


def result_path(out: str | Path, benchmark: str, scenario: str, method: str, method_version: str) -> Path:
    """``<out>/<benchmark>/<scenario>/<method>/<method_version>/result.json`` (MTEB-style layout)."""
    return (
        Path(out)
        / _safe(benchmark, "benchmark")
        / _safe(scenario, "scenario")
        / _safe(method, "method")
        / _safe(method_version, "method version")
        / RESULT_FILE
    )


# --------------------------------------------------------------------------- schema


def result_schema(version: str = RESULT_SCHEMA_VERSION) -> dict[str, Any]:
    """The JSON Schema of result files of ``version``, generated from :class:`RunResult`: 3.0 (the shipped one)
    with the raw tables in Parquet files beside the JSON (``raw`` holds each one's row count and sha256), 2.0
    (still read) with column-wise raw tables inside the JSON, 1.0 (still read) with one object per raw record."""
    if version not in READABLE_SCHEMA_VERSIONS:
        raise ValueError(f"no result schema {version!r}; this drake_bench knows {', '.join(READABLE_SCHEMA_VERSIONS)}")
    schema = RunResult.model_json_schema(mode="serialization")
    if version == RESULT_SCHEMA_VERSION:
        defs = schema["$defs"]
        defs["RawTables"] = raw_tables.index_schema()
        for record in raw_tables.RECORD_TYPES.values():  # their columns are typed in the Parquet files
            defs.pop(record.__name__, None)
    else:
        if version == "2.0":
            schema = result_encoding.file_schema(schema)
        schema["properties"]["schema_version"] = {
            **schema["properties"]["schema_version"],
            "const": version,
            "default": version,
        }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://drake-bench/schemas/result-{version}.json",
        **schema,
    }


def schema_text() -> str:
    """The shipped file's exact text (sorted keys, 2-space indent, trailing newline)."""
    return json.dumps(result_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def shipped_schema() -> dict[str, Any]:
    """The JSON Schema shipped as package data (what external tools validate against)."""
    return json.loads(resources.files("drake_bench.schemas").joinpath(SCHEMA_FILE).read_text())


def _field_path(path: Sequence[Any]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".") or "<root>"


def _schema_for(version: str) -> dict[str, Any]:
    return shipped_schema() if version == RESULT_SCHEMA_VERSION else result_schema(version)


@functools.lru_cache(maxsize=len(READABLE_SCHEMA_VERSIONS))
def _fast_validator(version: str = RESULT_SCHEMA_VERSION) -> Any:
    """jsonschema-rs's compiled validator of the schema of ``version``, or None where it is not installed."""
    try:
        import jsonschema_rs
    except ImportError:  # pragma: no cover - a dependency; the reference validator below still works alone
        return None
    return jsonschema_rs.Draft202012Validator(_schema_for(version))


def _schema_errors(data: Any, version: str = RESULT_SCHEMA_VERSION) -> list[str]:
    """Every place ``data`` breaks the shipped schema, one line each (see :func:`_schema_report`)."""
    return _schema_report(data, version)[0]


def _schema_report(data: Any, version: str = RESULT_SCHEMA_VERSION) -> tuple[list[str], bool]:
    """Every place ``data`` breaks the shipped schema, one line each, and whether it has fields the schema does
    not know.

    A board's result files run to megabytes (52 clients x every round's records), where the reference
    ``jsonschema`` validator takes seconds per file; jsonschema-rs (a compiled Draft 2020-12 validator) answers
    "valid" a hundred times faster, so only a file it rejects goes through ``jsonschema``, whose error messages
    are the ones reported (tests/test_results.py checks that both validators agree). Paths name records, not
    the file's rows: ``raw.scores[3].score``, not ``raw.scores.rows[3][7]``."""
    fast = _fast_validator(version)
    if fast is not None and fast.is_valid(data):
        return [], False
    validator = jsonschema.Draft202012Validator(_schema_for(version))
    errors = sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
    return [_error_line(e) for e in errors], any(e.validator == "additionalProperties" for e in errors)


def _unknown_fields_note(data: Any) -> str:
    """Why a file being read may hold fields this drake_bench does not know: a newer drake_bench adds optional
    fields without a new schema version (so that older files stay readable), and the package version alone cannot
    say which of two drake_bench is newer, so the note names the drake_bench (and source) the file records beside
    this one, for the reader to compare."""
    from drake_bench.core.provenance import describe, drake_bench_source

    data = data if isinstance(data, dict) else {}
    env = data.get("environment")
    written = data.get("drake_bench_version")
    by = (
        describe(written, env.get("drake_bench_source") if isinstance(env, dict) else None)
        if written
        else "an unrecorded drake_bench"
    )
    here = describe(__version__, drake_bench_source())
    return (
        f"It has fields this drake_bench does not know: it was written by {by} and is read by {here}. A newer "
        "drake_bench adds optional fields, so upgrading drake_bench may read it; a field added by hand is refused "
        "by every version."
    )


def _error_line(error: jsonschema.ValidationError) -> str:
    """One schema error as a line: the record-wise path and the message, with the offending value cut short (a
    wrong table would otherwise be quoted whole)."""
    path = list(error.absolute_path)
    where = _field_path(result_encoding.error_path(path))
    if len(path) == 2 and path[0] == "raw" and isinstance(error.instance, (list, dict)):
        layout = (
            "a list of records, as schema 1.0 files store a table"
            if isinstance(error.instance, list)
            else "laid out otherwise than this file's schema_version stores a table"
        )
        return (
            f'{where}: {layout} (schema 2.0 stores it as {{"columns": [...], "rows": [[...]]}}, schema 3.0 as '
            f'{{"rows": n, "sha256": ...}} with the table in a Parquet file beside the result file)'
        )
    message = error.message if len(error.message) <= 300 else error.message[:300] + " ..."
    return f"{where}: {message}"


def _fail(where: str, problem: str, lines: list[str], note: str = "") -> ResultFileError:
    shown = "\n".join(f"  - {x}" for x in lines[:10])
    more = f"\n  ... and {len(lines) - 10} more" if len(lines) > 10 else ""
    return ResultFileError(f"{where} {problem}:\n{shown}{more}" + (f"\n{note}" if note else ""))


# --------------------------------------------------------------------------- read / write / check


def write_result(result: RunResult, path: str | Path, *, check: bool = True) -> Path:
    """Write ``result`` atomically (temp file + rename) after validating it against the shipped schema.

    With ``check`` (default) the result must pass :func:`check_result` (provenance present, raw tables
    complete, the summary agreeing with them), so neither a hand-edited summary nor a gap can be written.
    """
    path = Path(path)
    data, blobs = _file_layout(result.model_dump(mode="json"), path)
    errors = _schema_errors(data)
    if errors:
        raise _fail(str(path), "would fail the result schema", errors)
    if check:
        problems = check_result(result)
        if problems:
            raise _fail(
                str(path), "fails check_result (provenance, complete raw tables, a summary that recomputes)", problems
            )
    _write_layout(data, blobs, path)
    return path


def _file_layout(data: dict[str, Any], path: Path) -> tuple[dict[str, Any], dict[str, bytes]]:
    """A result as ``model_dump(mode="json")`` gives it -> (the JSON this schema version writes, the raw tables'
    Parquet bytes)."""
    try:
        index, blobs = raw_tables.encode_tables(data.get("raw") or {})
    except raw_tables.RawTableError as exc:
        raise ResultFileError(f"{path}: {exc}") from None
    return {**data, "schema_version": RESULT_SCHEMA_VERSION, "raw": index}, blobs


def _write_layout(data: dict[str, Any], blobs: dict[str, bytes], path: Path) -> None:
    """Write the raw tables under their content-addressed names, then replace the JSON (temp file + rename), then
    remove the tables only the replaced JSON named: at every moment the folder holds one readable result."""
    text = result_encoding.dumps(data)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        raw_tables.write_tables(path, data["raw"], blobs)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        raw_tables.remove_stale_tables(path, data["raw"])
    except OSError as exc:  # a full disk, above all: one line, not the evaluator's whole stack
        raise ResultFileError(_unwritable(f"result file {path}", exc)) from None


def result_files(path: str | Path) -> list[Path]:
    """The files a result consists of: the JSON at ``path`` and, for schema 3.0, its raw tables beside it (what
    copying a result must copy). The JSON is read only for its ``raw`` index."""
    path = Path(path)
    data = _load(path)
    raw = data.get("raw") if isinstance(data, dict) else None
    if not isinstance(data, dict) or data.get("schema_version") != RESULT_SCHEMA_VERSION or not isinstance(raw, dict):
        return [path]
    return [path, *raw_tables.table_files(path, raw)]


def _unwritable(what: str, exc: OSError) -> str:
    """One line for a result file that could not be written (a full disk, above all): which, why, and that what was
    written before it stays (a partial result, the seeds' checkpoints) and the same command resumes from it."""
    return (
        f"cannot write {what}: {write_failure(exc)}; the result files and checkpoints written before it stay, "
        f"and running the same command again resumes from them{once_there_is_space(exc)}"
    )


def _load(path: str | Path) -> Any:
    """A result file's JSON, or one line naming the file and why it cannot be read (not there, too large, not UTF-8,
    not JSON, nested too deep, a number out of range: :func:`drake_bench.core.json_files.read_json`)."""
    try:
        return read_json(path, what="result file")
    except JSONFileError as exc:
        raise ResultFileError(str(exc)) from None


EXECUTION_FIELDS = (
    "created_at",
    "environment",
    "train_seconds",
    "aggregate_seconds",
    "post_federation_seconds",
    "phase_seconds",
    "seed_fingerprints",
    "sandbox",
    "peak_memory_bytes",
    "train_seconds_total",
    "train_seconds_per_round",
    "aggregate_seconds_total",
    "aggregate_seconds_per_round",
)
"""Result fields that say how and where a run executed (clock times, memory of the processes, when, on what),
never what it computed: :func:`comparable` drops them."""
EXECUTION_SETTINGS = (
    "backend",
    "client_cpus",
    "client_gpus",
    "flower_workers",
    "round_timeout",
    "superlink",
    "out",
    "isolation",
    "call_timeout",
)
"""RunConfig fields that choose where a run executes, not what it computes (fl.extra.run_config keeps them)."""
RECORDED_ELSEWHERE = ("scorer_version",)
"""RunConfig fields the result records in a field of its own, where :func:`comparable` compares them: the scoring
rules' version is ``evaluation.scorer_version``, which files written before the setting existed hold while their
run config does not name it (so their rerun by ``leaderboard verify`` agrees with them)."""


def comparable(result: RunResult) -> dict[str, Any]:
    """The result as JSON without its execution fields (:data:`EXECUTION_FIELDS`, and the :data:`EXECUTION_SETTINGS`
    of its stored RunConfig; its :data:`RECORDED_ELSEWHERE` fields are compared where the result records them): two
    runs of one configuration agree on this exactly, scores and bytes included, under any backend, isolation or
    output folder (tests/test_flower.py checks the default and Flower backends)."""

    def strip(obj: Any) -> Any:
        if isinstance(obj, dict):
            return {k: strip(v) for k, v in obj.items() if k not in EXECUTION_FIELDS}
        if isinstance(obj, list):
            return [strip(v) for v in obj]
        return obj

    data = strip(result.model_dump(mode="json"))
    run_config = data["fl"]["extra"].get("run_config")
    if isinstance(run_config, dict):
        data["fl"]["extra"]["run_config"] = {
            k: v for k, v in run_config.items() if k not in EXECUTION_SETTINGS and k not in RECORDED_ELSEWHERE
        }
    return data


def comparable_differences(a: RunResult, b: RunResult) -> list[str]:
    """Where two results differ but for execution fields, one line per value (exact: no tolerance); empty when they
    are the same run's numbers."""
    out: list[str] = []
    _diff(comparable(a), comparable(b), "", out, rel=0.0, abs_=0.0)
    return [line.lstrip(".").replace("stored", "first").replace("recomputed", "second") for line in out]


def copy_result(src: str | Path, dst: str | Path) -> Path:
    """Copy the result file ``src`` to ``dst`` with its raw tables (named for ``dst``); returns ``dst``."""
    import shutil

    src, dst = Path(src), Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    for table in result_files(src)[1:]:
        shutil.copyfile(table, dst.with_name(dst.stem + table.name[len(src.stem) :]))
    shutil.copyfile(src, dst)
    return dst


def dump_result_data(data: dict[str, Any], path: str | Path) -> Path:
    """Write a result given as plain JSON data (one object per raw record, as :func:`load_result_data` returns it)
    in the current file format, without validating it: for tools and tests that edit a file's numbers on purpose
    (:func:`write_result` is the way to write a result)."""
    path = Path(path)
    _write_layout(*_file_layout(data, path), path)
    return path


def load_result_data(path: str | Path) -> dict[str, Any]:
    """A result file's JSON with its raw tables as lists of records, whatever its schema version, unvalidated:
    for scripts that read one table, or edit a file (:func:`read_result` is the way to read a result)."""
    data = _load(path)
    if isinstance(data, dict) and isinstance(data.get("raw"), dict):
        version = data.get("schema_version")
        if version == RESULT_SCHEMA_VERSION:
            data["raw"] = _read_tables(path, data["raw"])
        else:
            data["raw"] = result_encoding.decode_raw(data["raw"])
    return data


def _read_tables(path: str | Path, index: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    try:
        return raw_tables.read_tables(path, index)
    except raw_tables.RawTableError as exc:
        raise ResultFileError(str(exc)) from None


def read_result(path: str | Path) -> RunResult:
    """Load and validate a result file of any readable schema version (:data:`READABLE_SCHEMA_VERSIONS`); errors
    name the file and the offending field."""
    return _result_from(_load(path), path)


def _result_from(data: Any, path: str | Path) -> RunResult:
    """A result file's parsed JSON -> the validated result (see :func:`read_result`); ``data`` is consumed."""
    version = data.get("schema_version") if isinstance(data, dict) else None
    if isinstance(data, dict) and version not in (None, *READABLE_SCHEMA_VERSIONS):
        raise ResultFileError(
            f"{path}: schema_version {version!r} is not supported "
            f"(this drake_bench reads {', '.join(map(repr, READABLE_SCHEMA_VERSIONS))})"
        )
    version = version if version in READABLE_SCHEMA_VERSIONS else RESULT_SCHEMA_VERSION
    errors, unknown_fields = _schema_report(data, version)
    if errors:
        raise _fail(str(path), "fails the result schema", errors, _unknown_fields_note(data) if unknown_fields else "")
    if version == RESULT_SCHEMA_VERSION:
        data["raw"] = _read_tables(path, data["raw"])
        # the tables' values are checked as strictly as a 1.0 file's records, with the same record-wise paths
        errors, _ = _schema_report({**data, "schema_version": "1.0"}, "1.0")
        if errors:
            raise _fail(str(path), "fails the result schema", errors)
    else:
        data = CONVERTERS[version](data)
    data["schema_version"] = RESULT_SCHEMA_VERSION  # in memory a result has no layout: an old file reads as 3.0
    try:
        return RunResult.model_validate(data)
    except ValidationError as exc:
        raise _fail(
            str(path), "is inconsistent", [f"{_field_path(e['loc'])}: {e['msg']}" for e in exc.errors()]
        ) from None


def upgrade_result_file(path: str | Path) -> bool:
    """Rewrite a result file of an older schema version in the current one; False when it already is current.

    Lossless or nothing: the new file is written into a folder beside the old one, read back, and must give the same
    result, field for field (times and environment included), before its raw tables move beside the old file and
    its JSON replaces it."""
    path = Path(path)
    data = _load(path)
    if isinstance(data, dict) and data.get("schema_version") == RESULT_SCHEMA_VERSION:
        return False
    result = _result_from(data, path)
    staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.upgrade-", dir=path.parent))
    try:
        new = staging / path.name
        write_result(result, new, check=False)  # upgrading keeps what the file says; `check` judges it separately
        if read_result(new).model_dump(mode="json") != result.model_dump(mode="json"):  # pragma: no cover - guard
            raise ResultFileError(f"{path}: the upgraded file would not read back to the same result; left as it was")
        for table in result_files(new)[1:]:
            os.replace(table, path.with_name(table.name))
        os.replace(new, path)
    finally:
        for leftover in staging.iterdir():
            leftover.unlink()
        staging.rmdir()
    return True


def _diff(stored: Any, fresh: Any, where: str, out: list[str], rel: float = 1e-9, abs_: float = 1e-12) -> None:
    if isinstance(stored, dict) and isinstance(fresh, dict):
        for k in sorted(set(stored) | set(fresh)):
            sub = f"{where}.{k}"
            if k not in stored:
                out.append(f"{sub}: missing, recomputed {fresh[k]!r}")
            elif k not in fresh:
                out.append(f"{sub}: stored {stored[k]!r}, not produced by recomputation")
            else:
                _diff(stored[k], fresh[k], sub, out, rel, abs_)
    elif isinstance(stored, list) and isinstance(fresh, list):
        if len(stored) != len(fresh):
            out.append(f"{where}: stored {len(stored)} entries, recomputed {len(fresh)}")
            return
        for i, (a, b) in enumerate(zip(stored, fresh)):
            _diff(a, b, f"{where}[{i}]", out, rel, abs_)
    elif isinstance(stored, (int, float)) and isinstance(fresh, (int, float)) and not isinstance(stored, bool):
        if not math.isclose(stored, fresh, rel_tol=rel, abs_tol=abs_):
            out.append(f"{where}: stored {stored!r}, recomputed {fresh!r}")
    elif stored != fresh:
        out.append(f"{where}: stored {stored!r}, recomputed {fresh!r}")


def check_result(result: RunResult | str | Path) -> list[str]:
    """Everything that makes a result file untrustworthy; an empty list means it can go on a board.

    * seeds and status agree with the records (no stray seeds, a complete file has every seed);
    * provenance: the data hash, the manifest hash, the method's version and config, the scenario object, a
      checkpoint description for every allocated model and the library versions are present
      (:func:`provenance_problems`);
    * the raw tables are complete for the benchmark, scenario, seeds and evaluation rounds the file claims
      (:func:`completeness_problems`), so rows cannot be dropped to move a mean;
    * the summary recomputes from the raw tables.

    A path is read with :func:`read_result` first.
    """
    if not isinstance(result, RunResult):
        result = read_result(result)
    problems: list[str] = []
    declared = set(result.seeds)
    raw = result.raw
    for table, recs in (
        ("scores", raw.scores),
        ("adaptation", raw.adaptation),
        ("costs", raw.costs),
        ("server_costs", raw.server_costs),
        ("diagnostics", raw.diagnostics),
        ("post_federation_costs", raw.post_federation_costs),
        ("absences", raw.absences),
        ("scores_before_post_federation", raw.scores_before_post_federation),
    ):
        stray = sorted({r.seed for r in recs} - declared)
        if stray:
            problems.append(f"raw.{table}: records for seeds {stray} not listed in seeds {sorted(declared)}")
    if len(declared) != len(result.seeds):
        problems.append(f"seeds: duplicates in {result.seeds}")
    if result.status == "complete":
        missing = sorted(declared - {r.seed for r in raw.scores})
        if missing:
            problems.append(f"status: 'complete' but seeds {missing} have no score records")
    problems += provenance_problems(result)
    problems += completeness_problems(result)
    try:
        fresh = summarize(raw, seeds=result.seeds).model_dump(mode="json")
    except DrakeBenchError as exc:
        return problems + [f"raw: {exc}"]
    _diff(result.summary.model_dump(mode="json"), fresh, "summary", problems)
    return problems


def provenance_problems(result: RunResult) -> list[str]:
    """Fields a result must carry so that it says exactly what it ran on and with what.

    A partial result (a seed failed) may lack the method's version (no seed reported it); everything else is
    required of both.
    """
    out: list[str] = []
    b = result.benchmark
    if not b.data_hash:
        out.append("benchmark.data_hash: missing; a result must cite the hash of the data it ran on")
    elif not b.data_hash.startswith("sha256:"):
        out.append(f"benchmark.data_hash: {b.data_hash!r} is not a sha256 data hash")
    if b.content_hash is not None and not b.content_hash.startswith("sha256:"):
        out.append(f"benchmark.content_hash: {b.content_hash!r} is not a sha256 content hash")
    if not b.manifest_hash.startswith("sha256:"):
        out.append(f"benchmark.manifest_hash: {b.manifest_hash!r} is not a sha256 manifest hash")
    if not b.version:
        out.append("benchmark.version: empty")
    if result.status == "complete" and result.method.version in ("", "unknown"):
        out.append(f"method.version: {result.method.version!r}; a complete result names the method version it ran")
    if "config" not in result.method.model_fields_set:
        out.append("method.config: missing; the full method configuration is required")
    if not result.scenario.config:
        out.append("scenario.config: empty; the full scenario object is required")
    alloc = result.model_allocation
    if not alloc.clients:
        out.append("model_allocation.clients: empty")
    undescribed = sorted(set(alloc.clients.values()) - set(alloc.checkpoints))
    if undescribed:
        out.append(
            f"model_allocation.checkpoints: no entry for models {undescribed}; what fixes their weights must be recorded"
        )
    for model, identity in sorted(alloc.checkpoints.items()):
        sha = identity.get(WEIGHTS_SHA256)
        if sha is not None and not (isinstance(sha, str) and _SHA256.fullmatch(sha)):
            out.append(f"model_allocation.checkpoints[{model!r}].{WEIGHTS_SHA256}: {sha!r} is not a sha256 hex digest")
    if not result.environment.torch:
        out.append("environment.torch: missing")
    if not result.fl.eval_rounds:
        out.append("fl.eval_rounds: empty; the rounds after which evaluation ran are required")
    return out


WEIGHTS_SHA256 = "weights_sha256"
"""Key of a checkpoint identity that pins the exact weights (the sha256 of the model's safetensors)."""
_SHA256 = re.compile(r"[0-9a-f]{64}")


def weights_conflicts(results: Sequence[tuple[str | Path, RunResult]]) -> list[str]:
    """Why these results cannot share one board: one model name, different weights.

    For every model name, each file's checkpoint identity is compared with the first file's that
    has it: two recorded ``weights_sha256`` must be equal; an identity with a sha256 and one
    without (a recipe only: made before the zoo shipped pinned weights, or pretrained locally) are
    refused too, since nothing shows their weights are the same; identities without sha256 must be
    equal as a whole. Each problem names the model, both files and both hashes (or identities).
    """
    first: dict[str, tuple[str, dict[str, Any]]] = {}
    out: list[str] = []
    for path, res in results:
        for model, ident in sorted(res.model_allocation.checkpoints.items()):
            if model not in first:
                first[model] = (str(path), ident)
                continue
            fpath, fident = first[model]
            a, b = fident.get(WEIGHTS_SHA256), ident.get(WEIGHTS_SHA256)
            if a and b:
                if a != b:
                    out.append(
                        f"model {model!r}: {fpath} was made with weights sha256 {a}, {path} with sha256 {b}; "
                        "results of different weights cannot share a board"
                    )
            elif a or b:
                pinned, unpinned = (fpath, path) if a else (path, fpath)
                out.append(
                    f"model {model!r}: {pinned} records weights sha256 {a or b}, {unpinned} records no sha256 "
                    f"(weights identified by {_describe_identity(ident if a else fident)} only: pretrained on "
                    "the machine that ran it, before the zoo shipped pinned weights, or locally), so nothing "
                    "shows they are the same weights; rerun it with the shipped weights, or report them on "
                    "separate boards"
                )
            elif ident != fident:
                out.append(
                    f"model {model!r}: {fpath} records weights {_describe_identity(fident)}, {path} records "
                    f"{_describe_identity(ident)}; results of different weights cannot share a board"
                )
    return out


def unpinned_weights(results: Sequence[tuple[str | Path, RunResult]]) -> dict[str, list[str]]:
    """Tiny zoo models whose weights a result identifies by pretraining recipe only (no sha256) -> those files."""
    out: dict[str, list[str]] = {}
    for path, res in results:
        for model, ident in sorted(res.model_allocation.checkpoints.items()):
            if "recipe" in ident and not ident.get(WEIGHTS_SHA256):
                out.setdefault(model, []).append(str(path))
    return out


def _describe_identity(ident: dict[str, Any]) -> str:
    recipe = ident.get("recipe")
    if isinstance(recipe, dict):
        digest = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:12]
        return f"pretraining recipe (version {recipe.get('version', '?')}, recipe digest {digest})"
    text = json.dumps(ident, sort_keys=True)
    return text if len(text) <= 200 else text[:200] + "..."


def _benchmark_spec(ref: BenchmarkRef) -> Any:
    """The manifest the result claims (``name@version``, archived versions included), or None when this
    drake_bench does not ship it (a benchmark from a manifest file): then only the data-free rules apply."""
    from drake_bench.benchmarks.manifest import load_benchmark

    try:
        return load_benchmark(f"{ref.name}@{ref.version}")
    except DrakeBenchError:
        return None


def _examples(items: Any, n: int = 4) -> str:
    items = sorted(items, key=str)
    return ", ".join(map(str, items[:n])) + (f" ... ({len(items)} in all)" if len(items) > n else "")


def _cells(rows: Iterable[ScoreRecord]) -> set[tuple[int, str, int | None, str]]:
    """What a score row is about, without its value: (client, task, owner, role)."""
    return {(r.client, r.task, r.owner, r.role) for r in rows}


def completeness_problems(result: RunResult) -> list[str]:
    """Rows the raw tables must hold for the benchmark, scenario, seeds and rounds the result claims.

    Checked without the built data (a result is checked where the data may not be):

    * every client of the benchmark (of the manifest when it ships with drake_bench, else of the model
      allocation) and only those; every evaluation round of ``fl.eval_rounds`` (which must be the rounds that
      ``fl.eval_every_rounds`` and ``fl.rounds`` give) for every seed, and no other; a cost record or else an
      absence (partial participation, a lost node) for every (seed, round, client), never both; where a seed has server cost records (files written before they were measured have
      none), exactly one for each of its rounds; at most one post-federation record per seed;
    * Self rows: a client's Self tasks at an evaluation round are the tasks it has seen by then. For Dynamic and
      Async the manifest and the seed fix them exactly (a task is seen from the first round of its segment); for
      Static they are some of the client's tasks and all of them at the last round; for Dirichlet some of the
      merged task set. Everywhere a client keeps what it has seen (later rounds hold a superset) and, but in
      Dirichlet (where a client's test share of a task may be empty), has at least one Self row;
    * Others rows: client c is scored on exactly the tasks every other client j has Self rows for, at the same
      round and seed, owned by j;
    * every row scored at least one item.

    For a partial result only the seeds with score records are checked.
    """
    from drake_bench.streams.scenarios import Asynchronous, Dirichlet, Dynamic, Static, parse_scenario
    from drake_bench.streams.schedule import split_rounds

    out: list[str] = []
    fl, raw = result.fl, result.raw
    spec = _benchmark_spec(result.benchmark)
    try:
        alloc_clients = sorted(int(c) for c in result.model_allocation.clients)
    except ValueError:
        return [f"model_allocation.clients: client ids must be integers, got {sorted(result.model_allocation.clients)}"]
    clients = list(spec.client_ids) if spec is not None else alloc_clients
    if spec is not None and alloc_clients != sorted(clients):
        out.append(
            f"model_allocation.clients: {alloc_clients} are not the clients {sorted(clients)} of "
            f"{result.benchmark.name}@{result.benchmark.version}"
        )
    if fl.num_clients is not None and fl.num_clients != len(clients):
        out.append(f"fl.num_clients: {fl.num_clients}, but the benchmark has {len(clients)} clients")

    eval_rounds = list(fl.eval_rounds)
    if fl.eval_every_rounds:
        derived = [r for r in range(1, fl.rounds + 1) if r % fl.eval_every_rounds == 0 or r == fl.rounds]
        if eval_rounds and eval_rounds != derived:
            out.append(
                f"fl.eval_rounds: {eval_rounds}, but rounds={fl.rounds} and eval_every_rounds="
                f"{fl.eval_every_rounds} evaluate after rounds {derived}"
            )
        eval_rounds = eval_rounds or derived
    if not eval_rounds:
        return out  # reported by provenance_problems; nothing to check rows against

    try:
        scenario = parse_scenario(result.scenario.config or result.scenario.tag)
    except DrakeBenchError as exc:
        out.append(f"scenario: {exc}")
        scenario = None
    if scenario is not None and scenario.tag() != result.scenario.tag:
        out.append(f"scenario.tag: {result.scenario.tag!r}, but scenario.config is {scenario.tag()!r}")

    def client_tasks(c: int) -> list[str] | None:
        if spec is None:
            return None
        if isinstance(scenario, Dirichlet):
            return list(spec.scenarios.dirichlet.tasks) if spec.scenarios.dirichlet else []
        return list(spec.client(c).tasks)

    def scheduled(c: int, seed: int) -> list[int] | None:
        """0-based first round of each of c's tasks, when the scenario fixes it without the data."""
        if spec is None or not isinstance(scenario, (Dynamic, Asynchronous)):
            return None
        n = len(spec.client(c).tasks)
        if isinstance(scenario, Dynamic):
            per = split_rounds(fl.rounds, n) if n <= fl.rounds else None
        else:
            try:
                per = list(scenario.client_pattern(spec, c, seed))
            except DrakeBenchError:
                per = None
            if per is not None and (len(per) != n or sum(per) != fl.rounds):
                per = None
        if per is None:
            out.append(f"scenario: {scenario.tag()} cannot lay out client {c}'s {n} tasks over {fl.rounds} rounds")
            return None
        starts, at = [], 0
        for k in per:
            starts.append(at)
            at += k
        return starts

    by_point: dict[tuple[int, int], list[ScoreRecord]] = {}
    for r in raw.scores:
        by_point.setdefault((r.seed, r.eval_round), []).append(r)
    seeds = list(result.seeds) if result.status == "complete" else sorted({r.seed for r in raw.scores})
    known = set(clients)
    for seed in seeds:
        where = f"raw.scores seed {seed}"
        present = sorted({er for (sd, er) in by_point if sd == seed})
        missing_rounds = sorted(set(eval_rounds) - set(present))
        if missing_rounds:
            out.append(f"{where}: no records for evaluation rounds {missing_rounds} of fl.eval_rounds {eval_rounds}")
        extra_rounds = sorted(set(present) - set(eval_rounds))
        if extra_rounds:
            out.append(f"{where}: records for rounds {extra_rounds} not in fl.eval_rounds {eval_rounds}")
        starts = {c: scheduled(c, seed) for c in clients}
        before: dict[int, set[str]] = {c: set() for c in clients}
        for er in sorted(set(eval_rounds) & set(present)):
            rows = by_point[(seed, er)]
            at = f"{where} round {er}"
            strangers = sorted({r.client for r in rows} - known) + sorted(
                {r.owner for r in rows if r.owner is not None} - known
            )
            if strangers:
                out.append(f"{at}: rows for clients {sorted(set(strangers))} that the benchmark does not have")
            empty = [(r.client, r.task) for r in rows if r.n < 1]
            if empty:
                out.append(f"{at}: rows scored on no items: {_examples(empty)}")
            seen: dict[int, set[str]] = {c: set() for c in clients}
            for r in rows:
                if r.role == "self" and r.client in seen:
                    seen[r.client].add(r.task)
            for c in clients:
                tasks, first = client_tasks(c), starts[c]
                if first is not None and tasks is not None:
                    expected = {t for t, s in zip(tasks, first) if s <= er - 1}
                    lacking, surplus = expected - seen[c], seen[c] - expected
                    if lacking:
                        out.append(f"{at}: client {c} has no Self rows for tasks it has seen: {_examples(lacking)}")
                    if surplus:
                        out.append(
                            f"{at}: client {c} has Self rows for tasks it has not seen yet: {_examples(surplus)}"
                        )
                elif tasks is not None:
                    foreign = seen[c] - set(tasks)
                    if foreign:
                        out.append(
                            f"{at}: client {c} has Self rows for tasks that are not its own: {_examples(foreign)}"
                        )
                    if isinstance(scenario, Static) and er == fl.rounds and set(tasks) - seen[c]:
                        out.append(
                            f"{at}: client {c} has no Self rows for tasks it has seen (all of them by the last "
                            f"round): {_examples(set(tasks) - seen[c])}"
                        )
                if not seen[c] and not isinstance(scenario, Dirichlet) and first is None:
                    out.append(f"{at}: client {c} has no Self rows")
                forgotten = before[c] - seen[c]
                if forgotten:
                    out.append(f"{at}: client {c} lost Self rows it had at an earlier round: {_examples(forgotten)}")
                before[c] |= seen[c]
            expected_others = (
                set()
                if fl.others_subsample == 0
                else {  # 0: the run did not score Others
                    (c, t, j) for c in clients for j in clients if j != c for t in seen[j]
                }
            )
            actual_others = {(r.client, r.task, r.owner) for r in rows if r.role == "others"}
            lacking_o, surplus_o = expected_others - actual_others, actual_others - expected_others
            if lacking_o:
                out.append(f"{at}: missing Others rows (client, task, owner): {_examples(lacking_o)}")
            if surplus_o:
                out.append(
                    f"{at}: Others rows (client, task, owner) for tasks their owner has no Self row for: "
                    f"{_examples(surplus_o)}"
                )
        costs = {(c.round, c.client) for c in raw.costs if c.seed == seed}
        absent = {(a.round, a.client) for a in raw.absences if a.seed == seed}  # not drawn, or its node lost
        lacking_c = {(r, c) for r in range(1, fl.rounds + 1) for c in clients} - costs - absent
        if lacking_c:
            out.append(f"raw.costs seed {seed}: no cost record for (round, client) {_examples(lacking_c)}")
        if costs & absent:
            out.append(
                f"raw.absences seed {seed}: (round, client) both absent and with a cost record: "
                f"{_examples(costs & absent)}"
            )
        stray_a = absent - {(r, c) for r in range(1, fl.rounds + 1) for c in clients}
        if stray_a:
            out.append(
                f"raw.absences seed {seed}: (round, client) outside the run's rounds and clients: {_examples(stray_a)}"
            )
        # server cost records came later: a file without any is an older one; one with some has every round once
        server_rounds = [c.round for c in raw.server_costs if c.seed == seed]
        if server_rounds:
            lacking_s = set(range(1, fl.rounds + 1)) - set(server_rounds)
            if lacking_s:
                out.append(f"raw.server_costs seed {seed}: no server cost record for rounds {_examples(lacking_s)}")
            doubled = sorted({r for r in server_rounds if server_rounds.count(r) > 1})
            if doubled:
                out.append(f"raw.server_costs seed {seed}: more than one record for rounds {_examples(doubled)}")
            beyond = sorted(set(server_rounds) - set(range(1, fl.rounds + 1)))
            if beyond:
                out.append(
                    f"raw.server_costs seed {seed}: records for rounds {_examples(beyond)} past fl.rounds {fl.rounds}"
                )
        post = [c for c in raw.post_federation_costs if c.seed == seed]
        if len(post) > 1:
            out.append(f"raw.post_federation_costs seed {seed}: {len(post)} records, at most one per seed")
        # the replaced final point came later still: none in older files; where present it is the final point's
        # rows (the same (client, task, owner, role) cells), and only for a seed whose method ran the stage
        replaced = [r for r in raw.scores_before_post_federation if r.seed == seed]
        if replaced:
            where_r = f"raw.scores_before_post_federation seed {seed}"
            if not post:
                out.append(f"{where_r}: rows for a seed without a post_federation stage (no raw.post_federation_costs)")
            off = sorted({r.eval_round for r in replaced} - {fl.rounds})
            if off:
                out.append(f"{where_r}: rows for rounds {off}; only the last round, {fl.rounds}, is replaced")
            final = _cells(r for r in raw.scores if r.seed == seed and r.eval_round == fl.rounds)
            mine = _cells(replaced)
            if mine != final:
                out.append(
                    f"{where_r}: its cells differ from the final point's in raw.scores (only there: "
                    f"{_examples(mine - final)}; only in raw.scores: {_examples(final - mine)})"
                )
    return out
