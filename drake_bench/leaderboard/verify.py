"""Reproduced or typed: ``drake-bench leaderboard verify`` reruns a result file's run and compares it digit for digit.

Every rule a board applies reads the file itself, and a file is consistent by construction once its summary
recomputes from its raw tables: a submitter who edits raw scores and recomputes the summary passes ``check`` and
``validate``. What tells a reproduced entry from a typed one is that its recorded configuration, run again, gives the
same file: the evaluator's numbers are deterministic (same seed, same numbers; ``numerics="portable"`` holds the
kernels to AVX2, so another x86-64 host gives the same digits). ``verify`` reruns the configuration the file records
(``fl.extra.run_config``) in this environment, the method's workers confined as in any run
(:mod:`drake_bench.backends.confine`), compares everything but the execution fields (:func:`~drake_bench.results.result_file.comparable`),
and writes a :class:`Verification` beside the file. The record names the file's sha256, so an edit after verification
voids it; the board page marks each entry *verified* when a matching record says so, else *self-reported*.

It needs the method installed at the version the file records (a plugin's package, as the submission names it),
and refuses otherwise, saying what is installed: verifying against other code would prove nothing.
"""

from __future__ import annotations

import json
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from drake_bench.core.strict_model import StrictModel
from drake_bench._version import __version__
from drake_bench.errors import DrakeBenchError
from drake_bench.backends.confine import SANDBOX_KEY
from drake_bench.core.json_files import SMALL_FILE_MAX_BYTES
from drake_bench.results.result_file import RunResult, comparable_differences, read_result
from drake_bench.benchmarks.store import file_sha256

VERIFICATION_FILE = "verification.json"
"""Beside a result file: the record of its last verification."""

State = Literal["verified", "differs", "self-reported"]
MAX_DIFFERENCES = 20
"""How many differing fields a record keeps (the first ones: one edited score breaks every mean derived from it)."""


class Verification(StrictModel):
    """What one rerun of a result file's configuration gave."""

    result_sha256: str = Field(description="sha256 of the result file verified: a later edit voids the record.")
    reproduced: bool = Field(description="The rerun equals the file in everything but execution fields.")
    differences: list[str] = Field(default_factory=list, description=f"The first fields that differ (at most {MAX_DIFFERENCES}).")
    drake_bench_version: str
    drake_bench_source: str | None = None
    cpu_model: str | None = None
    sandbox: str | None = Field(default=None, description="What the rerun's method worker could not see.")
    created_at: str


def rerun_config(result: RunResult, out: str | Path) -> Any:
    """The :class:`~drake_bench.evaluator.run_config.RunConfig` the file records, writing into ``out``, scored by the rules the
    file was scored by (``evaluation.scorer_version``: a run config recorded before the setting existed names none,
    and RunConfig's default is a later rule than the one such a file was scored with)."""
    from drake_bench.evaluator.run_config import RunConfig

    recorded = result.fl.extra.get("run_config")
    if not isinstance(recorded, dict):
        raise DrakeBenchError("the file records no run configuration (fl.extra.run_config): it cannot be rerun")
    benchmark = recorded.get("benchmark", result.benchmark.name)
    if Path(str(benchmark)).suffix != ".json" and "@" not in str(benchmark):  # a bare name loads the newest version
        benchmark = f"{result.benchmark.name}@{result.benchmark.version}"
    try:
        return RunConfig.model_validate({**recorded, "benchmark": benchmark,
                                         "scorer_version": result.evaluation.scorer_version, "out": str(out)})
    except ValueError as exc:
        raise DrakeBenchError(f"its recorded run configuration is not one this drake_bench ({__version__}) runs: "
                              f"{str(exc).splitlines()[0]}") from None


def require_same_method(result: RunResult) -> None:
    """Refuse to verify against a method other than the one that made the file."""
    from drake_bench.plugins.registry import method_class

    name, version = result.method.name, result.method.version
    try:
        installed = method_class(name).meta.version
    except DrakeBenchError as exc:
        raise DrakeBenchError(f"method {name!r} is not usable here ({exc}); install the package the file names "
                              f"({result.method.package or 'not recorded'}) to verify it") from None
    if installed != version:
        raise DrakeBenchError(f"the file was made by {name} {version}, but {name} {installed} is installed: install "
                              f"{result.method.package or 'the version it names'} to verify it")


def verify(path: str | Path, *, work: str | Path | None = None, console: Any = None) -> Verification:
    """Rerun ``path``'s configuration, compare, and write the :class:`Verification` beside it (also returned)."""
    from drake_bench.core.numerics import cpu_model
    from drake_bench.runner import run_methods
    from drake_bench.core.provenance import drake_bench_source

    path = Path(path)
    result = read_result(path)
    sha = file_sha256(path)
    require_same_method(result)
    with tempfile.TemporaryDirectory(prefix="drake-bench-verify-", dir=work) as tmp:
        (rerun,) = run_methods([rerun_config(result, tmp)], jobs=1, console=console)
    differences = comparable_differences(result, rerun)
    record = Verification(result_sha256=sha, reproduced=not differences, differences=differences[:MAX_DIFFERENCES],
                          drake_bench_version=__version__, drake_bench_source=drake_bench_source(),
                          cpu_model=cpu_model(), sandbox=rerun.fl.extra.get(SANDBOX_KEY),
                          created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    target = path.parent / VERIFICATION_FILE
    tmp_file = target.with_suffix(".tmp")
    tmp_file.write_text(json.dumps(record.model_dump(mode="json"), indent=1) + "\n")
    os.replace(tmp_file, target)
    return record


def verification_state(path: str | Path) -> State:
    """``verified`` when a record beside ``path`` reproduced this very file, ``differs`` when its rerun did not,
    ``self-reported`` when there is no record for the file as it is now (none, or the file changed since)."""
    from drake_bench.errors import JSONFileError
    from drake_bench.core.json_files import read_json

    record_path = Path(path).parent / VERIFICATION_FILE
    if not record_path.is_file():
        return "self-reported"
    try:
        record = Verification.model_validate(read_json(record_path, what="verification record", max_bytes=SMALL_FILE_MAX_BYTES))
    except (JSONFileError, ValueError):
        return "self-reported"
    if record.result_sha256 != file_sha256(path):
        return "self-reported"
    return "verified" if record.reproduced else "differs"
