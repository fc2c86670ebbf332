"""Submissions: a self-contained folder of result files plus what they need to be checked and reproduced.

As MTEB's contributors do, a method author runs the board's settings on their own machine and opens a pull request
with a folder the validator checks: ``submission.json`` (:class:`Submission`: the board, the method's name and
version, the package that provides it with its source URL or wheel hash, and the command that produced the
results) beside ``results/<benchmark>/<scenario>/<method>/<version>/result.json`` files, each listed with its sha256.
The validator runs every board rule on the results and the ``submission`` rule on the folder itself; a reviewer can
rerun the command to reproduce the digits.
"""

from __future__ import annotations

import re
import shutil
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import TYPE_CHECKING, Sequence

from pydantic import Field, ValidationError, model_validator

from drake_bench.core.strict_model import StrictModel
from drake_bench._version import __version__
from drake_bench.errors import DrakeBenchError, JSONFileError
from drake_bench.core.json_files import SMALL_FILE_MAX_BYTES, read_json
from drake_bench.benchmarks.store import file_sha256
from drake_bench.leaderboard.boards import BoardDefinition, canonical_boards
from drake_bench.leaderboard.rules import Refusal, read_for_board, summarise, validate
from drake_bench.results.result_file import copy_result

if TYPE_CHECKING:  # pragma: no cover
    from drake_bench.results.result_file import RunResult

SUBMISSION_FILE = "submission.json"
RESULTS_DIR = "results"
MISSING = "listed in submission.json but missing"


class SubmissionError(DrakeBenchError):
    """A submission cannot be written (its results break a board rule, or a field is missing)."""


class Submission(StrictModel):
    """``submission.json``: who submits what, and how to get it again."""

    board: str = Field(description="Canonical board name the results are for.")
    method: str
    version: str
    package: str = Field(min_length=1, description="The distribution that provides the method (pip name).")
    source_url: str | None = Field(default=None, description="Where the package's source is (a repository URL).")
    wheel_sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$",
                                     description="sha256 of the wheel the results were made with.")
    command: str = Field(min_length=1, description="The command that produced the result files.")
    drake_bench_version: str
    created_at: datetime
    files: dict[str, str] = Field(min_length=1, description="Path relative to the folder -> sha256 of the file.")

    @model_validator(mode="after")
    def _where_from(self) -> "Submission":
        if not (self.source_url or self.wheel_sha256):
            raise ValueError("give the package's source_url or its wheel_sha256: a reviewer must be able to get it")
        return self


def _normalized(name: str) -> str:
    """A distribution name as PEP 503 compares them (``Drake_Bench`` and ``drake-bench`` are one package)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def package_mismatch(package: str, result: RunResult) -> str | None:
    """Why ``result`` was not made with the method from ``package``, or None: a result file that names the
    distribution which registered its method (``method.package``, recorded since drake_bench recorded sources) must
    name the one a submission says to install; files made before that name none and are not held to it."""
    if not result.method.package:
        return None
    recorded = result.method.package.split(" ", 1)[0]
    if _normalized(recorded) == _normalized(package):
        return None
    return (f"made with {result.method.name} from package {result.method.package!r}; the submission says to install "
            f"{package!r}")


def read_submission(path: str | Path) -> Submission:
    """``submission.json`` read and validated; a file that is not JSON, is hostile JSON
    (:func:`drake_bench.core.json_files.read_json`) or lacks a field raises :class:`SubmissionError`, one line naming it."""
    try:
        data = read_json(path, what=SUBMISSION_FILE, max_bytes=SMALL_FILE_MAX_BYTES)
    except JSONFileError as exc:
        raise SubmissionError(str(exc)) from None
    try:
        return Submission.model_validate(data)
    except ValidationError as exc:
        raise SubmissionError(f"{path}: {_first_error(exc)}") from None


def _first_error(exc: ValidationError) -> str:
    e = exc.errors()[0]
    where = ".".join(map(str, e["loc"]))
    return f"{where}: {e['msg']}" if where else e["msg"]


def entry_problem(folder: Path, rel: str) -> str | None:
    """Why the ``files`` entry ``rel`` of the submission in ``folder`` names no file inside that folder, or None: an
    absolute path, a path through ``..``, a link to a file elsewhere, or no such file."""
    posix, windows = PurePosixPath(rel), PureWindowsPath(rel)
    if not rel or "\0" in rel:
        return "an empty path, or one with a NUL character: entries are paths inside the submission folder"
    if posix.is_absolute() or windows.is_absolute() or windows.drive or windows.root:
        return "an absolute path: entries are paths inside the submission folder (results/...)"
    if ".." in windows.parts:  # (Windows' parts split at / and \ both)
        return "a path out of the submission folder (through '..'): entries are paths inside it (results/...)"
    path = folder / rel
    try:
        if not path.is_file():
            return MISSING
        path.resolve().relative_to(folder.resolve())
    except ValueError:
        return "a link to a file outside the submission folder: entries are files inside it"
    except (OSError, RuntimeError) as exc:  # a name too long for the disk; a loop of links
        return f"cannot be read ({getattr(exc, 'strerror', None) or exc})"
    return None


def submit(board: BoardDefinition, results: Sequence[str | Path], out: str | Path, *, package: str, command: str,
           source_url: str | None = None, wheel: str | Path | None = None) -> Path:
    """Write the submission folder ``out`` for ``results`` on ``board``, refusing results that break a rule.

    The folder is written only when :func:`validate_submission` accepts it, so what a contributor sends is what the
    maintainers' validator will say yes to."""
    paths = [Path(p) for p in results]
    read = [read_for_board(p) for p in paths]
    bad = [r for _, why in read for r in why]
    if bad:
        raise SubmissionError("cannot submit:\n" + "\n".join(f"  - {r}" for r in bad))
    runs = [res for res, _ in read if res is not None]
    names = sorted({(r.method.name, r.method.version) for r in runs})
    if len(names) != 1:
        raise SubmissionError(f"a submission is one method at one version; these results are of {names}")
    _, refusals = validate(paths, board)
    if refusals:
        raise SubmissionError(f"the results break board {board.name}'s rules (`drake-bench leaderboard validate "
                              "--verbose` lists every refusal):\n" + "\n".join(f"  - {line}" for line in summarise(refusals)))
    other = [f"{p}: {why}" for p, res in zip(paths, runs) if (why := package_mismatch(package, res))]
    if other:
        raise SubmissionError("cannot submit:\n" + "\n".join(f"  - {x}" for x in other))
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise SubmissionError(f"{out} exists and is not empty; choose a new folder")
    wheel_sha = file_sha256(Path(wheel)) if wheel else None
    files: dict[str, str] = {}
    for p, res in zip(paths, runs):
        rel = res.path(RESULTS_DIR).as_posix()
        if rel in files:
            raise SubmissionError(f"{p}: a second result for {rel}")
        target = out / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        copy_result(p, target)  # with its raw tables, which the result file pins by sha256
        files[rel] = file_sha256(target)
    try:
        sub = Submission(board=board.name, method=names[0][0], version=names[0][1], package=package,
                         source_url=source_url, wheel_sha256=wheel_sha, command=command,
                         drake_bench_version=__version__, created_at=datetime.now(timezone.utc), files=files)
    except ValidationError as exc:
        shutil.rmtree(out, ignore_errors=True)
        raise SubmissionError(f"submission fields: {exc.errors()[0]['msg']}") from None
    (out / SUBMISSION_FILE).write_text(sub.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return out


def is_submission(path: str | Path) -> bool:
    return (Path(path) / SUBMISSION_FILE).is_file()


def submission_of(path: str | Path) -> Submission | None:
    """The submission whose ``submission.json`` lists the result file ``path`` (in a folder above it), if any.

    A submitted row is reproduced by the command its submitter ran, which the board cannot rebuild from its own
    flags when the method needs settings or a package of its own; an unreadable ``submission.json`` is the
    validator's to refuse (rule ``submission``), so here it counts as none."""
    path = Path(path)
    for folder in path.parents:
        if is_submission(folder):
            try:
                sub = read_submission(folder / SUBMISSION_FILE)
            except SubmissionError:
                return None
            return sub if path.relative_to(folder).as_posix() in sub.files else None
    return None


def validate_submission(folder: str | Path, board: BoardDefinition | None = None) -> tuple[Submission | None, list[Refusal]]:
    """Every refusal of a submission folder: its own fields and file hashes (rule ``submission``), then the board's
    rules on its result files. ``board`` defaults to the one ``submission.json`` names."""
    folder = Path(folder)
    meta = folder / SUBMISSION_FILE
    try:
        sub = read_submission(meta)
    except SubmissionError as exc:
        msg = str(exc).removeprefix(f"{meta}: ")
        return None, [Refusal("submission", str(meta), f"not a valid submission.json: {msg}")]
    refusals: list[Refusal] = []
    if board is None:  # by its name only: a path in a submitted file must not pick the board it is checked against
        boards = canonical_boards()
        if sub.board not in boards:
            return sub, [Refusal("submission", str(meta), f"board {sub.board!r} is not a canonical board "
                                                          f"({', '.join(boards)}); --board checks it against another")]
        board = boards[sub.board]
    if sub.board != board.name:
        refusals.append(Refusal("submission", str(meta), f"made for board {sub.board!r}, validated against {board.name!r}"))
    listed = set(sub.files)
    present = {p.relative_to(folder).as_posix() for p in (folder / RESULTS_DIR).rglob("*.json")}
    for rel in sorted(present - listed):
        refusals.append(Refusal("submission", str(folder / rel), "a result file submission.json does not list"))
    paths = []
    for rel, sha in sorted(sub.files.items()):
        why = entry_problem(folder, rel)
        if why == MISSING:
            refusals.append(Refusal("submission", str(folder / rel), why))
            continue
        if why:  # the entry is not a file of the folder: it is named, and nothing outside the folder is read
            shown = repr(rel) if len(rel) <= 100 else f"{rel[:60]!r}... ({len(rel)} characters)"
            refusals.append(Refusal("submission", str(meta), f"files entry {shown}: {why}"))
            continue
        path = folder / rel
        try:
            digest = file_sha256(path)
        except OSError as exc:
            refusals.append(Refusal("submission", str(path), f"cannot be read: {exc.strerror or exc}"))
            continue
        if digest != sha:
            refusals.append(Refusal("submission", str(path), "sha256 differs from the one submission.json lists (the "
                                                             "file changed after it was submitted)"))
        paths.append(path)
    results, board_refusals = validate(paths, board)
    for p, res in results:
        if (res.method.name, res.method.version) != (sub.method, sub.version):
            refusals.append(Refusal("submission", p, f"a result of {res.method.name} {res.method.version}, the "
                                                     f"submission is of {sub.method} {sub.version}"))
        why = package_mismatch(sub.package, res)
        if why:
            refusals.append(Refusal("submission", p, why))
    return sub, refusals + board_refusals
