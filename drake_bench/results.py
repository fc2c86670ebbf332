"""The result file: one typed, versioned JSON record per (benchmark, scenario, method, method version).

A result carries everything its numbers depend on (benchmark and data hashes, scenario, method
config, model allocation, seeds, FL and evaluation settings, environment), so two results are
comparable exactly when these agree, plus the *raw* score tables; the summary is derived from the
raw tables by :func:`drake_bench.evaluation.metrics.summarize`, and :func:`check_result` recomputes
it, so a submitted file whose headline numbers disagree with its own raw data is caught.

The JSON Schema shipped as ``drake_bench/schemas/result.schema.json`` is generated from
:class:`RunResult` (``python -m drake_bench.results`` rewrites it); third-party tools can
validate result files without Python. Layout on disk is MTEB-style, see :func:`result_path`.
"""

from __future__ import annotations

import json
import math
import os
import platform
import re
import sys
import tempfile
from datetime import datetime, timezone
from importlib import metadata, resources
from pathlib import Path
from typing import Any, Literal, Sequence

import jsonschema
from pydantic import ConfigDict, Field, ValidationError, model_validator

from ._base import StrictModel
from ._version import __version__
from .errors import DrakeBenchError
from .evaluation.metrics import (
    AdaptationRecord,
    CostRecord,
    RawTables,
    ScoreRecord,
    Summary,
    summarize,
)
from .evaluation.scoring import SCORER_VERSION

RESULT_SCHEMA_VERSION = "1.0"
SCHEMA_FILE = "result.schema.json"
RESULT_FILE = "result.json"

__all__ = [
    "RESULT_SCHEMA_VERSION",
    "AdaptationRecord",
    "BenchmarkRef",
    "CostRecord",
    "Environment",
    "EvaluationSettings",
    "FLSettings",
    "MethodRef",
    "ModelAllocationRef",
    "RawTables",
    "ResultFileError",
    "RunResult",
    "ScenarioRef",
    "ScoreRecord",
    "Summary",
    "capture_environment",
    "check_result",
    "new_result",
    "read_result",
    "result_path",
    "result_schema",
    "shipped_schema",
    "summarize",
    "write_result",
]


class ResultFileError(DrakeBenchError):
    """A result file is missing, malformed, fails its schema, or disagrees with its own raw tables."""


class BenchmarkRef(StrictModel):
    name: str
    version: str
    manifest_hash: str = Field(description="content_hash of the benchmark manifest.")
    data_hash: str | None = Field(default=None, description="Hash of the built data (splits) evaluated on.")


class ScenarioRef(StrictModel):
    tag: str = Field(description="Short form, e.g. 'static', 'dynamic', 'async-3-7-3-7', 'dirichlet-0.5'.")
    config: dict[str, Any] = Field(default_factory=dict, description="The full scenario object.")


class MethodRef(StrictModel):
    name: str
    version: str
    config: dict[str, Any] = Field(default_factory=dict, description="Full method configuration.")


class ModelAllocationRef(StrictModel):
    name: str
    clients: dict[str, str] = Field(description="client id (as a string) -> model id.")
    checkpoints: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="model id -> what fixes its weights: the pretraining recipe for tiny zoo models, the source otherwise.",
    )


def _legacy_learning_rate_schema(schema: dict[str, Any]) -> None:
    """Older result files hold ``fl.learning_rate: null``; the schema keeps accepting exactly that."""
    schema["properties"]["learning_rate"] = {
        "type": "null", "default": None, "deprecated": True, "title": "Learning Rate",
        "description": "Never set; read from older result files and no longer written (see method.config).",
    }


class FLSettings(StrictModel):
    rounds: int = Field(ge=1)
    local_steps: int = Field(ge=0)
    batch_size: int = Field(ge=1)
    eval_every_rounds: int | None = Field(default=None, ge=1)
    eval_rounds: list[int] = Field(default_factory=list, description="1-based rounds after which evaluation ran.")
    others_subsample: int | None = Field(
        default=None, description="Items per task for Others (a seeded subsample, as the manifest's fl.others_subsample); None = full test set."
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


class EvaluationSettings(StrictModel):
    """Every knob that moves scores, so two results are compared only when they were scored alike."""

    decoding: dict[str, Any] = Field(description="Generation parameters, e.g. do_sample, max_new_tokens, temperature.")
    batch_size: int = Field(ge=1)
    prompt_template_version: str
    padding_side: Literal["left", "right"] | None = None
    scorer_version: str = SCORER_VERSION
    judge: str | None = Field(default=None, description="LLM judge model and version when used; None = offline scorer.")
    extra: dict[str, Any] = Field(default_factory=dict)


class Environment(StrictModel):
    python: str
    torch: str | None = None
    transformers: str | None = None
    peft: str | None = None
    datasets: str | None = None
    platform: str
    cpu_count: int | None = None
    device: str


class RunResult(StrictModel):
    """One run of one method on one benchmark and scenario, over all its seeds."""

    schema_version: Literal["1.0"] = RESULT_SCHEMA_VERSION
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

    def path(self, out: str | Path) -> Path:
        """Where this result lives under ``out`` (see :func:`result_path`)."""
        return result_path(out, self.benchmark.name, self.scenario.tag, self.method.name, self.method.version)


# --------------------------------------------------------------------------- construction


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def capture_environment(device: str = "cpu") -> Environment:
    """Versions of the libraries that move scores, the platform and the device used."""
    return Environment(
        python=platform.python_version(),
        torch=_version("torch"),
        transformers=_version("transformers"),
        peft=_version("peft"),
        datasets=_version("datasets"),
        platform=platform.platform(),
        cpu_count=os.cpu_count(),
        device=device,
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


def result_schema() -> dict[str, Any]:
    """The JSON Schema of result files, generated from :class:`RunResult`."""
    schema = RunResult.model_json_schema(mode="serialization")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://drake-bench/schemas/result-{RESULT_SCHEMA_VERSION}.json",
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


def _schema_errors(data: Any) -> list[str]:
    validator = jsonschema.Draft202012Validator(shipped_schema())
    errors = sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
    return [f"{_field_path(e.absolute_path)}: {e.message}" for e in errors]


def _fail(where: str, problem: str, lines: list[str]) -> ResultFileError:
    shown = "\n".join(f"  - {x}" for x in lines[:10])
    more = f"\n  ... and {len(lines) - 10} more" if len(lines) > 10 else ""
    return ResultFileError(f"{where} {problem}:\n{shown}{more}")


# --------------------------------------------------------------------------- read / write / check


def write_result(result: RunResult, path: str | Path, *, check: bool = True) -> Path:
    """Write ``result`` atomically (temp file + rename) after validating it against the shipped schema.

    With ``check`` (default) the summary must agree with the raw tables, so a hand-edited
    summary cannot be written.
    """
    path = Path(path)
    data = result.model_dump(mode="json")
    errors = _schema_errors(data)
    if errors:
        raise _fail(str(path), "would fail the result schema", errors)
    if check:
        problems = check_result(result)
        if problems:
            raise _fail(str(path), "has a summary that disagrees with its raw tables", problems)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, ensure_ascii=False, allow_nan=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def _load(path: str | Path) -> Any:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ResultFileError(f"result file {path} does not exist") from None
    except OSError as exc:
        raise ResultFileError(f"cannot read result file {path}: {exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ResultFileError(f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}") from None


def read_result(path: str | Path) -> RunResult:
    """Load and validate a result file; errors name the file and the offending field."""
    data = _load(path)
    if isinstance(data, dict) and data.get("schema_version") not in (None, RESULT_SCHEMA_VERSION):
        raise ResultFileError(
            f"{path}: schema_version {data.get('schema_version')!r} is not supported "
            f"(this drake_bench reads {RESULT_SCHEMA_VERSION!r})"
        )
    errors = _schema_errors(data)
    if errors:
        raise _fail(str(path), "fails the result schema", errors)
    try:
        return RunResult.model_validate(data)
    except ValidationError as exc:
        raise _fail(str(path), "is inconsistent", [f"{_field_path(e['loc'])}: {e['msg']}" for e in exc.errors()]) from None


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
    """Mismatches between a result's summary and its raw tables, plus seed/status inconsistencies.

    An empty list means the file is self-consistent. A path is read with :func:`read_result` first.
    """
    if not isinstance(result, RunResult):
        result = read_result(result)
    problems: list[str] = []
    declared = set(result.seeds)
    raw = result.raw
    for table, recs in (("scores", raw.scores), ("adaptation", raw.adaptation), ("costs", raw.costs)):
        stray = sorted({r.seed for r in recs} - declared)
        if stray:
            problems.append(f"raw.{table}: records for seeds {stray} not listed in seeds {sorted(declared)}")
    if len(declared) != len(result.seeds):
        problems.append(f"seeds: duplicates in {result.seeds}")
    if result.status == "complete":
        missing = sorted(declared - {r.seed for r in raw.scores})
        if missing:
            problems.append(f"status: 'complete' but seeds {missing} have no score records")
    try:
        fresh = summarize(raw, seeds=result.seeds).model_dump(mode="json")
    except DrakeBenchError as exc:
        return problems + [f"raw: {exc}"]
    _diff(result.summary.model_dump(mode="json"), fresh, "summary", problems)
    return problems


def _main(argv: Sequence[str]) -> int:
    """``python -m drake_bench.results [PATH]``: (re)write the shipped JSON Schema."""
    target = Path(argv[0]) if argv else Path(__file__).parent / "schemas" / SCHEMA_FILE
    target.write_text(schema_text(), encoding="utf-8")
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(_main(sys.argv[1:]))
