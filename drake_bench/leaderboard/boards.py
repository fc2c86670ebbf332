"""Board definitions: what a canonical board ranks on, as typed data.

A board is one benchmark version x scenario x model allocation with fixed seeds, rounds, steps and evaluation
settings, the pinned identity of its data and zoo weights, and the method entries it ranks. Canonical boards ship
as JSON files next to this module (``drake_bench/leaderboard/definitions/*.json``, validated by
:class:`BoardDefinition`), so a reader, the validator and ``drake-bench leaderboard build`` all read the same
definition; a board file elsewhere (a test-only board on a toy benchmark) loads by its path.

Why pinned hashes: a result counts on a board only if it ran on the board's data and weights. The manifest hash and
the zoo's ``weights_sha256`` are pinned here; the data hash is pinned once a build has produced it (``None`` until
then, and all files of a board must then agree with each other).
"""

from __future__ import annotations

import json
import re
from functools import cached_property
from importlib import resources
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from drake_bench.core.strict_model import StrictModel
from drake_bench.errors import DrakeBenchError, JSONFileError
from drake_bench.core.json_files import SMALL_FILE_MAX_BYTES, parse_json, read_json
from drake_bench.core.numerics import Numerics

DEFINITIONS = "definitions"
DEFAULT_ROOT = "leaderboard"
"""Canonical boards live in ``leaderboard/<name>/`` of the repository (``--root`` moves them)."""
MIN_SEEDS = 3
WHAT = "board definition"


class BoardError(DrakeBenchError):
    """A board definition is missing, malformed, or does not fit the installed benchmark."""


class BoardEntry(StrictModel):
    """One row a board ranks: a registered method with the settings it runs with (none: its defaults)."""

    method: str = Field(description="Registered method name (`drake-bench list`).")
    settings: dict[str, Any] = Field(default_factory=dict,
                                     description="Method config fields given (`--set METHOD.KEY=VALUE`); {}: defaults.")
    note: str = Field(default="", description="Why the entry is on the board, or what it stands for.")

    @property
    def key(self) -> str:
        """The row's identity on the board (as :attr:`RunResult.label` without the version)."""
        if not self.settings:
            return self.method
        return self.method + " (" + ", ".join(f"{k}={v if isinstance(v, str) else json.dumps(v)}"
                                               for k, v in sorted(self.settings.items())) + ")"

    @property
    def runs_folder(self) -> str:
        """Sub-folder of the board's results for this entry: ``runs`` for defaults, ``runs-<settings>`` otherwise
        (two settings of one method would otherwise write one result path)."""
        if not self.settings:
            return "runs"
        slug = "-".join(f"{k}={v}" for k, v in sorted(self.settings.items()))
        return "runs-" + re.sub(r"[^A-Za-z0-9._=-]", "_", slug)


class PaperRef(StrictModel):
    """Where the paper reports this setting (numbers in ``paper_results.json``)."""

    key: str = Field(description="Key into drake_bench/leaderboard/paper_results.json.")


class BoardDefinition(StrictModel):
    """A board: everything a result must match to be ranked on it, and the entries it holds."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$", description="Board id, also its folder name.")
    title: str
    description: str = ""
    benchmark: str = Field(description="Benchmark name, or a manifest path for a test-only board.")
    benchmark_version: str
    manifest_hash: str | None = Field(default=None, description="Pinned content_hash of the manifest; None: the "
                                                                "installed manifest's (test-only boards).")
    data_hash: str | None = Field(default=None, description="Pinned data hash; None until a build produced one (the "
                                                            "benchmark rule refuses every file until it is pinned).")
    content_hash: str | None = Field(
        default=None,
        description="Pinned content hash of the same build (the data as read back, images as pixels): a file whose "
                    "data hash differs only because its build used other pyarrow / Pillow versions is accepted when "
                    "it cites this content hash. None: only the data hash is accepted.")
    data_dir: str | None = Field(default=None, description="A built benchmark folder (test-only boards).")
    scenario: str = Field(description="As `drake-bench run --scenario` takes it: static, dynamic, ...")
    allocation: str | None = Field(default=None, description="Model allocation name; None: the manifest's default.")
    seeds: list[int] = Field(min_length=MIN_SEEDS, description=f"Fixed seeds, at least {MIN_SEEDS}.")
    rounds: int = Field(ge=1)
    local_steps: int = Field(ge=1)
    eval_every_rounds: int = Field(ge=1)
    others_subsample: int | None = Field(default=None, ge=0, description="None: the manifest's.")
    fast_adaptation: bool = True
    fast_adaptation_tasks: int | None = Field(default=2, ge=1,
                                              description="First N unseen tasks adapted to (as `run --adaptation-tasks`).")
    compute_matched: bool = False
    sandbox: bool = Field(
        default=False,
        description="Every entry's method worker ran confined (fl.extra.sandbox 'namespaces': no benchmark file, "
                    "checkpoint or result readable from it, drake_bench/backends/confine.py). False for the boards built "
                    "before the confinement existed, whose files record none; a rebuild turns it on.")
    numerics: Numerics = Field(
        default="portable",
        description="The floating-point setting every entry runs under (RunConfig.numerics): 'portable' so that any "
                    "x86-64 host rebuilds the board's digits; a file made before the setting existed counts as "
                    "'native'.")
    scorer_version: Literal["1.0", "2.0"] = Field(
        default="1.0",
        description="The scoring rules every entry is scored by (RunConfig.scorer_version; a result's "
                    "evaluation.scorer_version, none recorded: '1.0'). '1.0' (open answers by token recall) for the "
                    "boards built before rule 2.0 (token F1 of a length-capped response) existed, so that their "
                    "entries validate, rebuild and verify under the rules that scored them; a rebuild on 2.0 sets "
                    "it.")
    weights: dict[str, str] = Field(default_factory=dict,
                                    description="Zoo model -> weights_sha256 every result must record; {}: model-free.")
    zoo_recipe: int | None = Field(default=None, description="The pretraining recipe of the pinned weights.")
    communication_budget_bytes: float | None = Field(
        default=None, gt=0, description="Optional: most bytes (uplink + downlink) per client and round, measured.")
    paper: PaperRef | None = None
    entries: list[BoardEntry] = Field(min_length=1)
    excluded: dict[str, str] = Field(default_factory=dict,
                                     description="Reference entries not on this board -> why they do not run on it.")
    folder: str | None = Field(default=None, description="Where results live, relative to the root; None: <name>.")

    @field_validator("folder")
    @classmethod
    def _inside_the_root(cls, folder: str | None) -> str | None:
        # build, render and html write under <root>/<folder>: a board file (a test-only board, or one a submitter
        # hands over) must not point them at another place on the disk
        if folder is None:
            return folder
        posix, windows = PurePosixPath(folder), PureWindowsPath(folder)
        if "\0" in folder or posix.is_absolute() or windows.is_absolute() or windows.drive or windows.root:
            raise ValueError(f"{folder!r} is not a folder inside the leaderboard root (--root): give a relative path")
        if ".." in windows.parts:  # (Windows' parts split at / and \ both)
            raise ValueError(f"{folder!r} leads out of the leaderboard root (--root) through '..': give a folder "
                             "inside it")
        return folder

    @field_validator("seeds")
    @classmethod
    def _distinct(cls, seeds: list[int]) -> list[int]:
        if len(set(seeds)) != len(seeds):
            raise ValueError(f"seeds must be distinct, got {seeds}")
        return sorted(seeds)

    @model_validator(mode="after")
    def _unique_entries(self) -> "BoardDefinition":
        keys = [e.key for e in self.entries]
        twice = sorted({k for k in keys if keys.count(k) > 1})
        if twice:
            raise ValueError(f"entries listed more than once: {twice}")
        return self

    # -- resolved against the installed benchmark -------------------------------------------------
    @property
    def pinned_benchmark(self) -> str:
        """The name that loads the board's own benchmark version: ``drake-synth@1.8.0`` for a board on an archived
        version (what its runs must be given, since a bare name loads the newest one), the bare name on the newest."""
        if Path(self.benchmark).suffix == ".json" or "@" in self.benchmark:
            return self.benchmark
        from drake_bench.benchmarks.manifest import load_benchmark

        try:
            newest = load_benchmark(self.benchmark).version
        except DrakeBenchError as exc:
            raise BoardError(f"board {self.name}: {exc}") from None
        return self.benchmark if newest == self.benchmark_version else f"{self.benchmark}@{self.benchmark_version}"

    @cached_property
    def spec(self) -> Any:
        """The benchmark manifest this board names, at the board's version (an archived one loads by its pinned
        name, so a board keeps ranking the data it was built on after a new version ships)."""
        from drake_bench.benchmarks.manifest import load_benchmark

        try:
            spec = load_benchmark(self.pinned_benchmark)
        except DrakeBenchError as exc:
            raise BoardError(f"board {self.name}: {exc}") from None
        if spec.version != self.benchmark_version:
            raise BoardError(f"board {self.name}: defined on {spec.name} {self.benchmark_version}, but this drake_bench "
                             f"ships {spec.name} {spec.version}; update the board definition (a new benchmark version "
                             "is a new board) or use the drake_bench that made it")
        return spec

    @property
    def benchmark_name(self) -> str:
        """The benchmark's own name (a manifest path resolves to the name inside it)."""
        return self.spec.name if Path(self.benchmark).suffix == ".json" else self.benchmark.partition("@")[0]

    @property
    def scenario_tag(self) -> str:
        from drake_bench.streams.scenarios import parse_scenario

        return parse_scenario(self.scenario).tag()

    @property
    def allocation_name(self) -> str:
        if self.allocation:
            return self.allocation
        return self.spec.default_allocation or "none"

    @property
    def expected_manifest_hash(self) -> str | None:
        return self.manifest_hash or self.spec.content_hash

    @property
    def adaptation_task_list(self) -> list[str] | None:
        """What RunConfig.fast_adaptation_tasks gets (as `drake-bench run --adaptation-tasks N` computes it)."""
        unseen = list(self.spec.unseen_tasks)
        return unseen[: self.fast_adaptation_tasks] if self.fast_adaptation_tasks else None

    def results_dir(self, root: str | Path = DEFAULT_ROOT) -> Path:
        return Path(root) / (self.folder or self.name)

    def entry_out(self, entry: BoardEntry, root: str | Path = DEFAULT_ROOT) -> Path:
        return self.results_dir(root) / entry.runs_folder


def _definitions_dir() -> Any:
    return resources.files("drake_bench.leaderboard").joinpath(DEFINITIONS)


def canonical_boards() -> dict[str, BoardDefinition]:
    """Every canonical board shipped with drake_bench, by name, in a fixed order."""
    out: dict[str, BoardDefinition] = {}
    for item in sorted(_definitions_dir().iterdir(), key=lambda p: p.name):
        if item.name.endswith(".json"):
            where = f"drake_bench/leaderboard/{DEFINITIONS}/{item.name}"
            try:
                data = parse_json(item.read_bytes(), where=where, what=WHAT)
            except JSONFileError as exc:
                raise BoardError(str(exc)) from None
            board = _parse(data, where)
            out[board.name] = board
    return out


def _parse(data: Any, where: str) -> BoardDefinition:
    try:
        return BoardDefinition.model_validate(data)
    except ValidationError as exc:
        lines = "\n".join(f"  - {'.'.join(map(str, e['loc'])) or '<root>'}: {e['msg']}" for e in exc.errors()[:10])
        raise BoardError(f"{where} is not a valid board definition:\n{lines}") from None


def load_board(name_or_path: str | Path) -> BoardDefinition:
    """A canonical board by name, or a board definition file by path (``*.json``; a file that is not JSON, or is
    hostile JSON, is one line naming it: :func:`drake_bench.core.json_files.read_json`)."""
    text = str(name_or_path)
    if text.endswith(".json") or Path(text).is_file():
        path = Path(text)
        if not path.is_file():
            raise BoardError(f"board definition {path} does not exist")
        try:
            data = read_json(path, what=WHAT, max_bytes=SMALL_FILE_MAX_BYTES)
        except JSONFileError as exc:
            raise BoardError(str(exc)) from None
        return _parse(data, str(path))
    boards = canonical_boards()
    if text not in boards:
        raise BoardError(f"no board {text!r}; canonical boards: {', '.join(boards)} (or give a board JSON file)")
    return boards[text]


def board_for(benchmark: str, scenario_tag: str, allocation: str) -> BoardDefinition | None:
    """The canonical board a result of this benchmark, scenario and allocation belongs to, if exactly one."""
    found = [b for b in canonical_boards().values()
             if b.benchmark == benchmark and b.scenario_tag == scenario_tag and b.allocation_name == allocation]
    return found[0] if len(found) == 1 else None
