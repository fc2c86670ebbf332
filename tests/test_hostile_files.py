"""Hostile files and values never crash a command (issue #64, item 5).

A hostile-but-fair submitter hands drake_bench files of its own: deeply nested, not UTF-8, a 100,000-digit integer,
NaN, paths out of the submission folder, a board whose folder is elsewhere on the disk; and a disk fills up. Each is
refused (or reported) in one line naming the file, through the real commands, and the command goes on with the other
files. The fuzz tests at the end hold the JSON reader (:func:`drake_bench.core.json_files.read_json`) and the worker codec
(:mod:`drake_bench.backends.worker_process`) to their contracts on arbitrary input.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from test_hub import built as licensed_build  # noqa: F401  (test_hub's fixtures: a licensed build, and an offline
from test_hub import offline as hub_cache  # noqa: F401  private Hub cache)
from typer.testing import CliRunner

from drake_bench.backends import worker_process as isolation
from drake_bench.benchmarks.store import BUILD_INFO, BuiltBenchmark
from drake_bench.cli import app
from drake_bench.core.json_files import MAX_DEPTH, read_json
from drake_bench.errors import CheckpointError, JSONFileError
from drake_bench.evaluator import checkpoint
from drake_bench.leaderboard.boards import BoardError, load_board
from drake_bench.plugins.protocol import Message, State
from drake_bench.results.result_file import ResultFileError, copy_result, read_result, result_files, write_result

REPO = Path(__file__).resolve().parents[1]
SMALL_RESULT = (
    REPO / "tests" / "results" / "main-job-recipe-6" / "drake-synth" / "dynamic" / "sft" / "1.0" / "result.json"
)  # a committed result that checks in a fraction of a second
BOARD = "drake-synth-dynamic"
BOARD_FILE = REPO / "drake_bench" / "leaderboard" / "definitions" / f"{BOARD}.json"
ENOSPC = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _cli(*args: object) -> tuple[int, str]:
    """The command's exit code and output (stdout and stderr); an exception typer did not turn into an exit code is
    a traceback on a user's terminal, so it fails the test here."""
    r = CliRunner().invoke(app, [str(a) for a in args])
    assert r.exception is None or isinstance(r.exception, SystemExit), f"{type(r.exception).__name__}: {r.exception}"
    assert "Traceback" not in r.output
    return r.exit_code, r.output


def _lines(out: str, needle: str) -> list[str]:
    return [line for line in out.splitlines() if needle in line]


# ---------------------------------------------------------------------- hostile result files, through `check`
HOSTILE: dict[str, tuple[bytes, str]] = {
    "deeper-than-the-decoder": (b"[" * 100_000, "levels deep"),
    "deeper-than-any-result": (b'{"raw": ' + b"[" * 200 + b"]" * 200 + b"}", f"more than {MAX_DEPTH} levels deep"),
    "latin-1": ('{"method": {"name": "caf\u00e9"}}'.encode("latin-1"), "is not UTF-8 text (byte 24"),
    "utf-16": ('{"seeds": [0]}'.encode("utf-16"), "is not UTF-8 text"),
    "100k-digit-int": (b'{"seeds": [' + b"9" * 100_000 + b"]}", "an integer of 100000 digits"),
    "nan": (b'{"summary": {"mean": NaN}}', "it holds NaN, which JSON has no number for"),
    "minus-infinity": (b'{"summary": {"mean": -Infinity}}', "it holds -Infinity"),
    "out-of-range": (b'{"summary": {"mean": 1e400}}', "the number 1e400, beyond the range of a double"),
    "lone-surrogate": (b'{"method": {"name": "\\ud800"}}', "unpaired surrogate"),
    "lone-surrogate-key": (b'{"\\udfff": 1}', "a key with an unpaired surrogate"),
    "not-json": (b"{not json", "is not valid JSON (line 1, column 2)"),
    "empty": (b"", "is not valid JSON (line 1, column 1)"),
    "bom": (b"\xef\xbb\xbf{}", "Unexpected UTF-8 BOM"),
}


def _plant(folder: Path, kind: str) -> Path:
    path = folder / kind / "result.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(HOSTILE[kind][0])
    return path


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_check_refuses_a_hostile_result_file_in_one_line_naming_it(kind, tmp_path):
    path = _plant(tmp_path, kind)
    code, out = _cli("check", path)
    lines = [line for line in out.splitlines() if line.strip()]
    assert code == 1 and len(lines) == 1, out
    assert lines[0].startswith(str(path)) and HOSTILE[kind][1] in lines[0], out


def test_check_refuses_a_file_larger_than_any_result_without_reading_it_all(tmp_path):
    path = tmp_path / "huge" / "result.json"
    path.parent.mkdir()
    with open(path, "wb") as f:  # sparse: 64 MiB + 1 on the disk's books, nothing written
        f.truncate(64 * 2**20 + 1)
    code, out = _cli("check", path)
    assert code == 1 and _lines(out, str(path)) == [
        f"{path} is larger than 64 MiB, more than any result file is; not read further"
    ], out


def test_check_goes_on_with_the_other_files(tmp_path):
    bad = [_plant(tmp_path, kind) for kind in ("deeper-than-the-decoder", "latin-1", "100k-digit-int")]
    code, out = _cli("check", bad[0], SMALL_RESULT, *bad[1:], tmp_path / "nope.json")
    assert code == 1, out
    assert f"{SMALL_RESULT}:ok" in "".join(out.split())  # the good file after the first bad one is checked
    for p in bad:
        assert len(_lines(out, str(p))) == 1, out
    assert _lines(out, "nope.json") == [f"result file {tmp_path / 'nope.json'} does not exist"], out


def test_read_result_raises_the_result_files_error_for_each(tmp_path):
    for kind in HOSTILE:
        with pytest.raises(ResultFileError, match=re.escape(HOSTILE[kind][1])):
            read_result(_plant(tmp_path, kind))


# ---------------------------------------------------------------------- `leaderboard validate` and `render`
def test_validate_refuses_each_hostile_file_of_a_folder_in_a_line_of_its_own(tmp_path):
    kinds = ["deeper-than-the-decoder", "latin-1", "100k-digit-int", "nan"]
    planted = [_plant(tmp_path / "board", k) for k in kinds]
    for args in (["--board", BOARD], []):  # without --board: no file reads, so none picks a board; each is refused
        code, out = _cli("leaderboard", "validate", tmp_path / "board", *args)
        assert code == 1, out
        for p, k in zip(planted, kinds):
            assert len(lines := _lines(out, str(p))) == 1 and lines[0].startswith("refused [schema]"), out
            assert HOSTILE[k][1] in lines[0], out
        assert "4 refusal(s); rules broken: schema" in out


def test_render_leaves_hostile_files_off_the_page_with_a_note_and_renders_the_rest(tmp_path):
    planted = [_plant(tmp_path / "board", k) for k in ("deeper-than-the-decoder", "utf-16")]
    code, out = _cli("leaderboard", "render", BOARD, "--results", tmp_path / "board", "--out", tmp_path / "page")
    assert code == 0, out
    assert "note: 2 file(s) that do not read as result files (above) are left off the page" in out
    assert all(len(_lines(out, str(p))) == 1 for p in planted), out
    page = (tmp_path / "page" / "board.html").read_text()
    assert "2 file(s) that do not read as result files are left off this page" in page and str(planted[0]) in page
    assert str(planted[1]) in (tmp_path / "page" / "summary.md").read_text()


def _submission(folder: Path, files: dict[str, str], board: str = BOARD) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "submission.json").write_text(
        json.dumps(
            {
                "board": board,
                "method": "sft",
                "version": "1.0",
                "package": "drake_bench",
                "source_url": "https://example.org",
                "command": "drake-bench run",
                "drake_bench_version": "0.1.0",
                "created_at": "2025-01-01T00:00:00Z",
                "files": files,
            }
        )
    )
    return folder


def test_validate_refuses_a_hostile_submission_json_in_one_line(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "submission.json").write_bytes(b'{"files": ' + b"[" * 50_000)
    code, out = _cli("leaderboard", "validate", sub)
    assert code == 1, out
    assert _lines(out, "refused [submission]") == [
        f"refused [submission] 1 refusal (first: {sub / 'submission.json'}: not a valid submission.json: "
        f"{sub / 'submission.json'} nests arrays and objects more than {MAX_DEPTH} levels deep (deeper than Python's "
        "JSON decoder goes))"
    ], out


# ---------------------------------------------------------------------- paths inside submitted files
def test_a_submission_entry_out_of_its_folder_is_refused_naming_it_and_never_read(tmp_path, monkeypatch):
    from drake_bench.leaderboard import rules

    outside = tmp_path / "outside" / "result.json"
    outside.parent.mkdir()
    copy_result(SMALL_RESULT, outside)
    sha = "0" * 64
    sub = _submission(
        tmp_path / "sub",
        {
            "../outside/result.json": sha,
            str(outside): sha,
            "..\\outside\\result.json": sha,
            "results/link/result.json": sha,
            "results/missing/result.json": sha,
        },
    )
    (sub / "results" / "link").mkdir(parents=True)
    (sub / "results" / "link" / "result.json").symlink_to(outside)
    read: list[str] = []
    real = rules.read_result
    monkeypatch.setattr(rules, "read_result", lambda p: (read.append(str(p)), real(p))[1])

    code, out = _cli("leaderboard", "validate", sub, "--verbose")
    assert code == 1, out
    meta = sub / "submission.json"
    flat = " ".join(out.split())
    assert f"{meta}: files entry '../outside/result.json': a path out of the submission folder (through '..')" in flat
    assert f"{meta}: files entry '..\\\\outside\\\\result.json': a path out of the submission folder" in flat
    assert f"{meta}: files entry '{outside}': an absolute path" in flat
    assert f"{meta}: files entry 'results/link/result.json': a link to a file outside the submission folder" in flat
    assert f"{sub / 'results/missing/result.json'}: listed in submission.json but missing" in flat
    assert read == [], "a file outside the submission folder was read as one of its results"


def test_a_submission_names_its_board_by_name_not_by_a_path(tmp_path):
    own = tmp_path / "lenient-board.json"
    own.write_text(BOARD_FILE.read_text())
    sub = _submission(tmp_path / "sub", {"results/x/result.json": "0" * 64}, board=str(own))
    code, out = _cli("leaderboard", "validate", sub)
    assert code == 1 and f"board {str(own)!r} is not a canonical board" in " ".join(out.split()), out


@pytest.mark.parametrize(
    "folder", ["ABSOLUTE", "../elsewhere", "runs/../../elsewhere", "..\\elsewhere", "C:\\elsewhere", "C:elsewhere"]
)
def test_a_board_whose_folder_is_outside_the_root_is_refused_naming_the_field(folder, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    folder = str(elsewhere) if folder == "ABSOLUTE" else folder
    board = json.loads(BOARD_FILE.read_text()) | {"folder": folder}
    path = tmp_path / "root" / "board.json"
    path.parent.mkdir()
    path.write_text(json.dumps(board))
    code, out = _cli("leaderboard", "render", path, "--root", tmp_path / "root")
    flat = " ".join(out.split())
    assert code == 1 and "is not a valid board definition" in flat and f"- folder: Value error, {folder!r}" in flat, out
    assert not elsewhere.exists() and not (tmp_path / "root" / "elsewhere").exists()
    with pytest.raises(BoardError, match="folder"):
        load_board(path)


def test_a_board_folder_inside_the_root_is_accepted(tmp_path):
    path = tmp_path / "board.json"
    path.write_text(json.dumps(json.loads(BOARD_FILE.read_text()) | {"folder": "mine/dynamic"}))
    assert load_board(path).results_dir(tmp_path / "root") == tmp_path / "root" / "mine" / "dynamic"


def test_a_hostile_board_definition_file_is_one_line(tmp_path):
    path = tmp_path / "board.json"
    path.write_bytes(b"[" * 100_000)
    code, out = _cli("leaderboard", "render", path)
    assert code == 1 and _lines(out, "error:") == [
        f"error: {path} nests arrays and objects more than {MAX_DEPTH} "
        "levels deep (deeper than Python's JSON decoder goes)"
    ], out


def test_a_hostile_manifest_given_by_path_is_one_line(tmp_path):
    path = tmp_path / "manifest.json"
    path.write_bytes(b'{"clients": ' + b"[" * 100_000)
    code, out = _cli("run", "--benchmark", path)
    assert code == 1 and _lines(out, str(path)) == [
        f"error: {path} nests arrays and objects more than {MAX_DEPTH} "
        "levels deep (deeper than Python's JSON decoder goes)"
    ], out


# ---------------------------------------------------------------------- a full disk
def test_a_full_disk_while_writing_a_result_is_one_line_and_keeps_the_file_before(tmp_path, monkeypatch):
    res = read_result(SMALL_RESULT)
    path = write_result(res, tmp_path / "out" / "result.json", check=False)
    before = path.read_bytes()

    def full(fd):
        raise ENOSPC

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(ResultFileError) as err:
        write_result(res.model_copy(update={"notes": ["a second write"]}), path, check=False)
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"cannot write result file {path}: No space left on device")
    assert "written before it stay" in text and "resumes from them once there is space" in text
    assert path.read_bytes() == before and sorted(p.name for p in path.parent.iterdir()) == sorted(
        p.name for p in result_files(path)
    )  # the result and its tables as they were, no temporary file


def _progress(rounds: int) -> checkpoint.RunProgress:
    return checkpoint.RunProgress(
        completed_rounds=rounds,
        clients={1: State(tensors={"w": torch.ones(2) * rounds})},
        server=State(metadata={"r": rounds}),
        messages={1: Message(tensors={"m": torch.ones(1)})},
        records={"scores": [], "diagnostics": [{"values": {"x": float("nan")}}]},
        extra={},
    )


def test_a_full_disk_while_writing_a_checkpoint_is_one_line_and_the_one_before_stays(tmp_path, monkeypatch):
    from safetensors import SafetensorError

    run_dir = tmp_path / "seed-0"
    checkpoint.save(run_dir, _progress(2))
    real_write_text = Path.write_text

    def full_write_text(self, *a, **k):
        if self.name.startswith(checkpoint.PROGRESS):
            raise ENOSPC
        return real_write_text(self, *a, **k)

    monkeypatch.setattr(Path, "write_text", full_write_text)
    with pytest.raises(CheckpointError) as err:
        checkpoint.save(run_dir, _progress(3))
    text = str(err.value)
    assert "\n" not in text and f"{run_dir / 'progress.json.tmp'}: No space left on device" in text
    assert "the checkpoint before it and the result files written so far stay" in text and "resumes" in text
    monkeypatch.undo()

    def full_save(self, path):  # what safetensors raises on a full disk (its Rust core's I/O error)
        raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")

    monkeypatch.setattr(State, "save", full_save)
    with pytest.raises(CheckpointError) as err:
        checkpoint.save(run_dir, _progress(3))
    assert f"{run_dir / 'round-0003.tmp' / 'client-1.safetensors'}: No space left on device (os error 28)" in str(
        err.value
    )
    monkeypatch.undo()
    got = checkpoint.load(run_dir)  # the checkpoint of round 2 is still the run's, NaN of a diagnostic and all
    assert got.completed_rounds == 2 and math.isnan(got.records["diagnostics"][0]["values"]["x"])


def test_a_checkpoint_naming_a_round_folder_elsewhere_is_refused(tmp_path):
    run_dir = tmp_path / "seed-0"
    checkpoint.save(run_dir, _progress(2))
    doc = json.loads((run_dir / checkpoint.PROGRESS).read_text().replace("NaN", "null"))
    (run_dir / checkpoint.PROGRESS).write_text(json.dumps(doc | {"round_dir": "../../elsewhere"}))
    with pytest.raises(CheckpointError, match=r"names the round folder '\.\./\.\./elsewhere', not a round-NNNN folder"):
        checkpoint.load(run_dir)


def test_a_full_disk_while_rendering_a_page_is_one_line(tmp_path, monkeypatch):
    real_write_text = Path.write_text

    def full_write_text(self, *a, **k):
        if self.suffix in (".md", ".html"):
            raise ENOSPC
        return real_write_text(self, *a, **k)

    monkeypatch.setattr(Path, "write_text", full_write_text)
    (tmp_path / "results").mkdir()
    code, out = _cli("leaderboard", "render", BOARD, "--results", tmp_path / "results", "--out", tmp_path / "page")
    assert code == 1 and [line for line in out.splitlines() if line.strip()] == [
        f"error: cannot write {tmp_path / 'page' / 'summary.md'}: No space left on device; the board's result files "
        "are untouched, and rendering again writes its pages once there is space"
    ], out


def test_a_full_disk_mid_run_keeps_the_finished_seed_and_the_run_resumes(toy, tmp_path, monkeypatch):
    from minimal_method import Counter

    from drake_bench import RunConfig, run
    from drake_bench.plugins.registry import register_method

    register_method(Counter)  # idempotent
    manifest, root = toy
    cfg = RunConfig(
        benchmark=manifest,
        method="counter",
        data_dir=root,
        out=str(tmp_path / "out"),
        seeds=[0, 1],
        rounds=4,
        fast_adaptation=False,
        isolation="inline",
        numerics="native",
    )
    real_write_text = Path.write_text

    def full_on_seed_1(self, *a, **k):
        if "seed-1" in self.parts and self.name.startswith(checkpoint.PROGRESS):
            raise ENOSPC
        return real_write_text(self, *a, **k)

    monkeypatch.setattr(Path, "write_text", full_on_seed_1)
    with pytest.raises(CheckpointError) as err:
        run(cfg)
    assert "\n" not in str(err.value) and "No space left on device" in str(err.value) and "resumes" in str(err.value)
    partial = read_result(next((tmp_path / "out").rglob("counter/1.0/result.json")))
    assert partial.status == "partial" and sorted({r.seed for r in partial.raw.scores}) == [0]
    monkeypatch.undo()
    done = run(cfg)  # space again: seed 0 comes from the partial file, seed 1 runs
    assert done.status == "complete" and done.seeds == [0, 1]
    assert [r for r in done.raw.scores if r.seed == 0] == [r for r in partial.raw.scores if r.seed == 0]


# ---------------------------------------------------------------------- files from a disk others write to
# Caches, records and locks drake_bench reads back from a folder that may be shared, copied or downloaded. A cache
# that does not read is measured or built again, with a warning naming the file; a record that guards something
# (the run lock, the shipped weights, a published index) is refused in one line naming the file.
REFUSED = [
    "deeper-than-the-decoder",
    "deeper-than-any-result",
    "latin-1",
    "100k-digit-int",
    "lone-surrogate",
    "not-json",
]
"""The hostile kinds each reader below is fed (:data:`HOSTILE`): each is refused whatever the reader."""


def _hostile(*extra: tuple[str, bytes]) -> dict[str, bytes]:
    return {k: HOSTILE[k][0] for k in REFUSED} | {"array": b"[]"} | dict(extra)


def _warned(record: list, *paths: Path) -> list[str]:
    """The warnings' texts, each one line, after checking that each path is named in one of them."""
    texts = [str(w.message) for w in record]
    assert all("\n" not in t for t in texts), texts
    for p in paths:
        assert any(str(p) in t for t in texts), (p, texts)
    return texts


def _probe_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """probe_compute on a stand-in evaluator whose measurements are stubbed: (probe(), the methods measured)."""
    from types import SimpleNamespace as NS

    from drake_bench.evaluation import compute

    measured: list[str] = []

    def measure(ev, name, *args):
        measured.append(name)
        flops = {"m": 100 if name == compute.REFERENCE_METHOD else 150}
        return compute._Measured(setup=0, first=flops, later=flops, post={})

    monkeypatch.setattr(compute, "_probe_one", measure)
    ev = NS(
        config=NS(method="x", local_steps=None, method_config={}),
        spec=NS(fl=NS(local_steps=4), content_hash="h"),
        settings=NS(local_steps=4),  # the evaluator's resolved settings (drake_bench.evaluator.settings)
        allocation={1: "m", 2: "m"},
        checkpoints={"m": {"weights_sha256": "0" * 64}},
    )
    fed = NS(config=NS(rounds=3, batch_size=2), clients=[1, 2], store=NS(data_hash="d"))
    return (lambda: compute.probe_compute(ev, fed, 0, {}, 1.0, cache_dir=tmp_path / "out" / "x")), measured


def test_a_compute_probe_cache_that_does_not_read_is_measured_again_with_a_warning(tmp_path, monkeypatch):
    probe, measured = _probe_host(tmp_path, monkeypatch)
    first = probe()
    cache = tmp_path / "out" / "x" / "compute-probe.json"
    ref = next((tmp_path / "out" / "compute-reference").glob("*.json"))
    good, good_ref = cache.read_bytes(), ref.read_bytes()
    assert measured == ["x", "sft"] and probe() == first and measured == ["x", "sft"]  # a good cache: read back
    wrong = json.dumps({"key": json.loads(good)["key"], "probe": {"method": 1}}).encode()
    for kind, data in _hostile(("a-probe-of-nothing", wrong)).items():
        measured.clear()
        cache.write_bytes(data)
        ref.write_bytes(data)
        with pytest.warns(RuntimeWarning) as record:
            assert probe() == first, kind
        texts = _warned(record, cache, *([ref] if kind != "a-probe-of-nothing" else []))
        assert all("measured again" in t for t in texts), texts
        if kind in HOSTILE:
            assert any(HOSTILE[kind][1] in t for t in texts), texts
        assert measured == ["x", "sft"] and cache.read_bytes() == good and ref.read_bytes() == good_ref, kind


def test_a_lock_file_that_does_not_read_is_never_taken_over_and_is_one_line(tmp_path, monkeypatch):
    from drake_bench.core.lock import LOCK_FILE, TOKEN_ENV, RunLock, RunLockedError

    monkeypatch.delenv(TOKEN_ENV, raising=False)
    for kind, data in _hostile(
        ("no-pid", b'{"command": "x"}'), ("pid-text", b'{"pid": "1"}'), ("pid-true", b'{"pid": true}')
    ).items():
        out = tmp_path / kind
        out.mkdir()
        (out / LOCK_FILE).write_bytes(data)
        with pytest.raises(RunLockedError) as err:
            RunLock(out).acquire()
        text = str(err.value)
        assert "\n" not in text and f"its lock file cannot be read ({out / LOCK_FILE}" in text, (kind, text)
        assert f"delete {out / LOCK_FILE} and run again" in text and (kind not in HOSTILE or HOSTILE[kind][1] in text)
        assert (out / LOCK_FILE).read_bytes() == data, kind  # left for its holder, if there is one


def test_a_lock_of_a_pid_no_process_can_have_is_taken_over(tmp_path, monkeypatch):
    from drake_bench.core.lock import LOCK_FILE, TOKEN_ENV, RunLock

    monkeypatch.delenv(TOKEN_ENV, raising=False)
    (tmp_path / LOCK_FILE).write_text(json.dumps({"pid": 10**30, "command": "a run of long ago"}))
    with pytest.warns(RuntimeWarning, match=r"taking over the lock of run pid 1000000000000000000000000000000 "):
        lock = RunLock(tmp_path).acquire()
    lock.release()
    assert not (tmp_path / LOCK_FILE).exists()


def test_the_lock_of_a_run_whose_arguments_are_no_utf8_reads_back(tmp_path, monkeypatch):
    """Python keeps an argument that is no UTF-8 as lone surrogates; the lock records it as text, so another run
    reads it (and is refused naming the holder) and the holder removes it."""
    import sys

    from drake_bench.core import lock
    from drake_bench.core.lock import LOCK_FILE, TOKEN_ENV, RunLock, RunLockedError

    monkeypatch.delenv(TOKEN_ENV, raising=False)
    monkeypatch.setattr(sys, "argv", ["drake-bench", "run", "--out", os.fsdecode(b"caf\xe9"), "x" * 10_000])
    with RunLock(tmp_path):
        holder = read_json(tmp_path / LOCK_FILE, what="run lock file")
        assert holder["command"].startswith("drake-bench run --out caf\\udce9 xxx")
        assert len(holder["command"]) == lock.COMMAND_MAX_CHARS and holder["command"].endswith("...")
        monkeypatch.delenv(TOKEN_ENV)  # as another process would see it
        with pytest.raises(RunLockedError, match=f"in use by another run: pid {os.getpid()} "):
            RunLock(tmp_path).acquire()
    assert not (tmp_path / LOCK_FILE).exists()


def test_a_shipped_weights_manifest_that_does_not_read_is_one_line(tmp_path):
    from drake_bench.models.shipped import MANIFEST, read_manifest

    for kind, data in _hostile().items():
        (tmp_path / kind).mkdir()
        path = tmp_path / kind / MANIFEST
        path.write_bytes(data)
        with pytest.raises(CheckpointError) as err:
            read_manifest(path.parent)
        text = str(err.value)
        assert "\n" not in text and text.startswith(str(path)) and "reinstall drake_bench" in text, (kind, text)
        assert kind not in HOSTILE or HOSTILE[kind][1] in text, (kind, text)
    with open(tmp_path / MANIFEST, "wb") as f:  # sparse: never read past its limit
        f.truncate(2**20 + 1)
    with pytest.raises(CheckpointError, match=r"larger than 1 MiB, more than any shipped-weights manifest is"):
        read_manifest(tmp_path)


def _sha(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize(
    "entry, why",
    [
        ("OUTSIDE", "lists the file '../../outside.bin', which is not a path inside the model's folder"),
        ([], "is not a JSON object (it is a list)"),
        ({"files": {"model.safetensors": 5}, "weights_sha256": "5", "hub_repo": "r"}, "has no 'files' object"),
        ({"files": {}, "hub_repo": "r"}, "has no 'weights_sha256' string"),
    ],
)
def test_a_shipped_manifest_entry_that_is_no_entry_of_its_folder_is_refused(entry, why, tmp_path):
    from drake_bench.models.shipped import MANIFEST, verify_shipped

    root = tmp_path / "weights"
    (root / "m").mkdir(parents=True)
    (root / "m" / "model.safetensors").write_bytes(b"weights")
    (tmp_path / "outside.bin").write_bytes(b"someone else's file")
    if entry == "OUTSIDE":  # every hash right: the file outside would be hashed, and uploaded by publish_models
        files = {"model.safetensors": _sha(b"weights"), "../../outside.bin": _sha(b"someone else's file")}
        entry = {"files": files, "weights_sha256": files["model.safetensors"], "hub_repo": "drake-bench/m"}
    (root / MANIFEST).write_text(json.dumps({"format": 1, "recipe": {}, "models": {"m": entry}}))
    with pytest.raises(CheckpointError) as err:
        verify_shipped("m", root)
    assert str(err.value).startswith(f"{root / MANIFEST}: the entry of m {why}")


def test_a_direct_url_json_that_does_not_read_records_no_revision_with_a_warning(tmp_path, monkeypatch):
    from drake_bench.core.provenance import direct_url_revision

    cases = _hostile(
        ("vcs-info-array", b'{"vcs_info": [1]}'),
        ("a-revision-of-two-lines", json.dumps({"vcs_info": {"vcs": "git", "commit_id": "ab\n<b>"}}).encode()),
    )
    files = {}
    for i, (kind, data) in enumerate(cases.items()):
        info = tmp_path / f"hostile_{i}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: hostile_{i}\nVersion: 1.0\n")
        files[kind] = info / "direct_url.json"
        files[kind].write_bytes(data)
    monkeypatch.syspath_prepend(str(tmp_path))
    for i, kind in enumerate(cases):
        with pytest.warns(RuntimeWarning) as record:
            assert direct_url_revision(f"hostile_{i}") is None, kind
        texts = _warned(record, files[kind])
        assert f"no source revision of hostile_{i} is recorded" in texts[0], texts
        assert kind not in HOSTILE or HOSTILE[kind][1] in texts[0], texts


def test_a_task_mark_that_does_not_read_is_built_again_and_the_other_tasks_kept(tmp_path, toy_loader):
    from conftest import toy_spec

    from drake_bench.benchmarks.build import DONE_MARK, build_benchmark

    spec = toy_spec(n_clients=1, tasks_per_client=2, pool_size=8)
    root = build_benchmark(spec, out=tmp_path / "built", show_progress=False)
    hit, kept = (root / "data" / t.id / DONE_MARK for t in spec.tasks[:2])
    good, before = hit.read_bytes(), kept.stat().st_mtime_ns
    for kind in ["deeper-than-the-decoder", "latin-1", "100k-digit-int"]:
        hit.write_bytes(HOSTILE[kind][0])
        build_benchmark(spec, out=root, show_progress=False)
        assert hit.read_bytes() == good, kind  # built again: the mark is the build's
    assert kept.stat().st_mtime_ns == before  # the other task was never touched
    BuiltBenchmark.open(root).verify()


def test_a_synth_build_record_or_mark_that_does_not_read_means_a_rebuild(tmp_path):
    from types import SimpleNamespace

    from drake_bench.benchmarks.build import DONE_MARK
    from drake_bench.benchmarks.synth import builder

    spec = SimpleNamespace(name="drake-synth", content_hash="sha256:manifest")
    root = tmp_path / "built"
    root.mkdir()
    info = root / BUILD_INFO
    info.write_text(json.dumps(builder._stamp(spec, 1.0) | {"failed_tasks": []}))
    assert builder._matches(root, spec, 1.0)  # a good record: the build is used as it is
    for kind, data in _hostile().items():
        info.write_bytes(data)
        with pytest.warns(RuntimeWarning) as record:
            assert not builder._matches(root, spec, 1.0), kind
        assert "building drake-synth again" in _warned(record, info)[0]
    for i, data in enumerate(_hostile(("an-int", b"5")).values()):  # marks: the task is dropped and built again
        (root / "data" / f"t{i}").mkdir(parents=True)
        (root / "data" / f"t{i}" / DONE_MARK).write_bytes(data)
    (root / "data" / "kept").mkdir()
    (root / "data" / "kept" / DONE_MARK).write_text(json.dumps({"train": 3, "test": 2, "recipe": "0" * 64}))
    builder._drop_unrecorded(root)
    assert [p.name for p in (root / "data").iterdir()] == ["kept"]


# the hub: a fetch into a folder holding a record that does not read, and a published index that does not
def test_a_fetch_into_a_folder_whose_record_does_not_read_records_the_tasks_fetched_now(
    licensed_build, hub_cache, tmp_path
):
    from test_hub import COMMIT, REPO

    from drake_bench.benchmarks.hub import add_to_hf_cache, fetch_benchmark

    spec, root = licensed_build
    add_to_hf_cache(root, REPO, commit=COMMIT, refs=("v1.0",), cache_dir=hub_cache, spec=spec)
    (tmp_path / "outside.parquet").write_bytes(b"someone else's file")
    escape = json.dumps({"commit": COMMIT, "files": {"../outside.parquet": "0" * 64}, "fetched_tasks": ["c2-t1"]})
    for kind, data in _hostile(("a-file-out-of-the-folder", escape.encode())).items():
        out = tmp_path / "fetched" / kind
        out.mkdir(parents=True)
        (out / BUILD_INFO).write_bytes(data)
        with pytest.warns(RuntimeWarning) as record:
            got = fetch_benchmark(
                spec, "v1.0", tasks=["c1-t0"], cache_dir=hub_cache, local_dir=out, show_progress=False
            )
        assert "not the record of an earlier fetch" in _warned(record, out / BUILD_INFO)[0]
        store = BuiltBenchmark.open(got)
        assert store.info["fetched_tasks"] == ["c1-t0"] and all(
            r.startswith("data/c1-t0/") for r in store.info["files"]
        )
        store.verify()


@pytest.mark.parametrize(
    "index, why",
    [
        (HOSTILE["deeper-than-the-decoder"][0], HOSTILE["deeper-than-the-decoder"][1]),
        (HOSTILE["100k-digit-int"][0], HOSTILE["100k-digit-int"][1]),
        (b'{"splits": {"train": {"ids": [1], "content_digest": "sha256:0"}}}', "is not a task index of"),
    ],
    ids=["deeper-than-the-decoder", "100k-digit-int", "an-id-that-is-a-number"],
)
def test_a_published_task_index_that_does_not_read_is_one_integrity_error(
    index, why, licensed_build, hub_cache, tmp_path, monkeypatch
):
    from test_hub import COMMIT, NC_TASK, REPO

    from drake_bench.benchmarks import hub
    from drake_bench.errors import IntegrityError

    spec, root = licensed_build
    real = hub.json_bytes
    monkeypatch.setattr(hub, "json_bytes", lambda obj: index if "splits" in obj else real(obj))
    hub.add_to_hf_cache(root, REPO, commit=COMMIT, refs=("v1.0",), cache_dir=hub_cache, spec=spec)
    monkeypatch.undo()
    (tmp_path / "my-copy").mkdir()
    with pytest.raises(IntegrityError) as err:
        hub.fetch_benchmark(
            spec,
            "v1.0",
            tasks=[NC_TASK],
            cache_dir=hub_cache,
            source_dir=tmp_path / "my-copy",
            local_dir=tmp_path / "v",
            show_progress=False,
        )
    text = str(err.value)
    assert "\n" not in text and why in text and f"data/{NC_TASK}/index.json" in text, text


def test_a_model_cache_record_that_does_not_read_is_built_again_with_a_warning(tmp_path):
    from drake_bench.models.cache import RECIPE_FILE, build_cached, record_matches

    entry, record = tmp_path / "tiny", {"name": "tiny", "recipe": {"steps": 3}}
    built: list[int] = []

    def build(tmp: Path) -> dict:
        tmp.mkdir()
        (tmp / "weights.bin").write_bytes(b"w")
        built.append(1)
        return {"losses": [1.0, float("nan")]}  # json.dumps writes NaN: the record still reads back

    build_cached(entry, record, build)
    good = (entry / RECIPE_FILE).read_bytes()
    assert b"NaN" in good and record_matches(entry, record) and build_cached(entry, record, build) and built == [1]
    for kind, data in _hostile().items():
        (entry / RECIPE_FILE).write_bytes(data)
        assert not record_matches(entry, record), kind  # a query only: no warning, nothing built
        with pytest.warns(RuntimeWarning) as record_of_warnings:
            build_cached(entry, record, build)
        assert "is built again" in _warned(record_of_warnings, entry / RECIPE_FILE)[0]
        assert (entry / RECIPE_FILE).read_bytes() == good, kind
    assert len(built) == 1 + len(_hostile())


# ---------------------------------------------------------------------- fuzz: the JSON reader
JSON_TOKENS = st.sampled_from(
    [
        b"[",
        b"]",
        b"{",
        b"}",
        b'"',
        b":",
        b",",
        b"0",
        b"9" * 5000,
        b"-",
        b".",
        b"e",
        b"1e999",
        b"NaN",
        b"Infinity",
        b"true",
        b"null",
        b"\\u",
        b"d800",
        b"\\",
        b" ",
        b"\xff",
        b"\xc3",
        b"\xa9",
        b"\xef\xbb\xbf",
        b"\x00",
        b"[" * 300,
        b"]" * 300,
        b'"\\ud800"',
    ]
)
HOSTILE_BYTES = st.one_of(st.binary(max_size=200), st.lists(JSON_TOKENS, max_size=40).map(b"".join))

TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)  # Unicode text: no lone surrogates
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**60), max_value=10**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(TEXT, inner, max_size=5),
    max_leaves=30,
)


def _same(a, b) -> bool:
    """Equal and of the same types all the way down (1 == 1.0 == True in Python; not in a file), NaN equal to NaN,
    tensors bit for bit."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and _bits(a) == _bits(b)
    if isinstance(a, (State, Message)):
        return _same(a.tensors, b.tensors) and _same(a.metadata, b.metadata)
    return a == b


def _bits(t: torch.Tensor) -> bytes:
    t = t.contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()


FUZZ = settings(
    max_examples=200,
    deadline=None,
    database=None,  # (a failure prints its example)
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


@FUZZ
@given(data=HOSTILE_BYTES)
def test_read_json_on_any_bytes_returns_json_or_raises_the_one_error(data, tmp_path):
    path = tmp_path / "f.json"
    path.write_bytes(data)
    try:
        value = read_json(path, what="result file")
    except JSONFileError as exc:
        assert "\n" not in str(exc) and str(path) in str(exc)
        return
    assert _same(value, json.loads(data.decode("utf-8")))  # what it reads, json reads the same


@FUZZ
@given(value=JSON_VALUES, indent=st.sampled_from([None, 2]), ascii_only=st.booleans())
def test_read_json_reads_back_exactly_what_json_dumps_wrote(value, indent, ascii_only, tmp_path):
    path = tmp_path / "f.json"
    path.write_text(json.dumps(value, indent=indent, ensure_ascii=ascii_only), encoding="utf-8")
    assert _same(read_json(path, what="result file"), value)


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(depth=st.integers(min_value=1, max_value=3 * MAX_DEPTH), inner=st.sampled_from(["[]", "{}", "1"]))
def test_read_json_takes_nesting_up_to_its_limit_and_no_deeper(depth, inner, tmp_path):
    text = (
        '{"a": ' * (depth // 2) + "[" * (depth - depth // 2) + inner + "]" * (depth - depth // 2) + "}" * (depth // 2)
    )
    path = tmp_path / "f.json"
    path.write_text(text)
    levels = depth + (inner != "1")
    if levels <= MAX_DEPTH:
        assert _same(read_json(path, what="x"), json.loads(text))
    else:
        with pytest.raises(JSONFileError, match=f"more than {MAX_DEPTH} levels deep"):
            read_json(path, what="x")


# ---------------------------------------------------------------------- fuzz: the worker codec
DTYPES = [np.float32, np.float64, np.float16, np.int64, np.int32, np.int8, np.uint8, np.bool_]


@st.composite
def tensors(draw) -> torch.Tensor:
    if draw(st.booleans()):  # bfloat16 has no NumPy dtype: drawn as float32, rounded
        arr = draw(hnp.arrays(np.float32, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)))
        return torch.from_numpy(arr).to(torch.bfloat16)
    dtype = draw(st.sampled_from(DTYPES))
    arr = draw(hnp.arrays(dtype, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)))
    return torch.from_numpy(arr.copy(order="C"))  # (np.ascontiguousarray would make a 0-d array 1-d)


KEYS = st.one_of(st.text(max_size=8), st.sampled_from(["__db__", "name", "tensor", "items", "dict"]))
CODEC_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64)
    | st.floats()
    | st.text(max_size=8)
    | tensors()
)  # NaN, infinities and lone surrogates too
CODEC_VALUES = st.recursive(
    CODEC_LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(KEYS, inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
        | st.builds(
            lambda t, m: State(tensors=t, metadata=m),
            st.dictionaries(KEYS, tensors(), max_size=3),
            st.dictionaries(KEYS, JSON_VALUES, max_size=3),
        )
        | st.builds(
            lambda t, m: Message(tensors=t, metadata=m),
            st.dictionaries(KEYS, tensors(), max_size=3),
            st.dictionaries(KEYS, JSON_VALUES, max_size=3),
        )
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None, database=None)
@given(value=CODEC_VALUES)
def test_the_worker_codec_round_trips_metadata_and_tensors_exactly(value):
    assert _same(isolation.loads(isolation.dumps(value)), value)


@settings(max_examples=50, deadline=None, database=None)
@given(value=CODEC_VALUES, bad=st.sampled_from([{1, 2}, b"bytes", object(), 1j, bytearray(b"x"), frozenset()]))
def test_the_worker_codec_refuses_what_cannot_cross_naming_its_type(value, bad):
    with pytest.raises(TypeError, match=rf"a {type(bad).__name__} cannot cross the process boundary"):
        isolation.dumps({"ok": value, "bad": [bad]})


# --------------------------------------------------------------------------- the zoo build's training snapshots
def _snapshot(tmp_path: Path):
    from drake_bench.models.resume import save_progress

    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.ones(1, 3)).sum().backward()
    opt.step()
    folder = tmp_path / "stage"
    save_progress(folder, 7, {"model": model}, opt, extra={"loss": 0.5})
    fresh = torch.nn.Linear(3, 2)
    return folder, fresh, torch.optim.AdamW(fresh.parameters(), lr=0.1)


def test_a_training_snapshot_resumes_where_it_was_saved(tmp_path):
    from drake_bench.models.resume import load_progress

    folder, model, opt = _snapshot(tmp_path)
    assert load_progress(folder, {"model": model}, opt) == (7, {"loss": 0.5})


@pytest.mark.parametrize(
    "record",
    [b"\xff\xfe not utf-8", b"[1, 2]", b'{"step": "7"}', b'{"step": -1}', b'{"step": 7.5}', b"[" * 5000, b"{"],
)
def test_a_hostile_training_snapshot_record_is_one_located_error(record, tmp_path):
    from drake_bench.models.resume import STATE_FILE, load_progress

    folder, model, opt = _snapshot(tmp_path)
    (folder / STATE_FILE).write_bytes(record)
    with pytest.raises(CheckpointError, match=re.escape(str(folder))) as err:
        load_progress(folder, {"model": model}, opt)
    assert "delete that folder" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("damage", ["garbage", "other model"])
def test_training_snapshot_tensors_that_do_not_fit_are_one_located_error(damage, tmp_path):
    from drake_bench.models.resume import TENSORS_FILE, load_progress, save_progress

    folder, model, opt = _snapshot(tmp_path)
    if damage == "garbage":
        (folder / TENSORS_FILE).write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not a header}")
    else:  # a snapshot of another stage's model put in this one's folder
        other = torch.nn.Linear(5, 4)
        other_opt = torch.optim.AdamW(other.parameters(), lr=0.1)
        other(torch.ones(1, 5)).sum().backward()
        other_opt.step()
        save_progress(folder, 7, {"model": other}, other_opt)
    with pytest.raises(CheckpointError, match=re.escape(TENSORS_FILE)):
        load_progress(folder, {"model": model}, opt)


# --------------------------------------------------------------------------- a wheel's recorded build revision
@pytest.mark.parametrize("content", [b"\xff\xfe\x00git", b"git:" + b"a" * 5000, b"git:abc\x00\x1b[2J"])
def test_a_hostile_built_from_file_records_no_revision_with_a_warning(content, tmp_path):
    from drake_bench.core.provenance import BUILT_FROM, built_revision

    (tmp_path / BUILT_FROM).write_bytes(content)
    with pytest.warns(RuntimeWarning, match=re.escape(str(tmp_path / BUILT_FROM))):
        assert built_revision(tmp_path) is None
