"""What a hostile (or careless) plugin hands the evaluator never crashes a command nor reaches the terminal raw.

Each test plants one attack through the public protocol and checks it is refused with a located error or shown
harmlessly. (The state-key attack, whose run died with a raw TypeError on resume, is in tests/test_protocol.py.)
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from minimal_method import Counter
from pydantic import BaseModel
from rich.console import Console
from typer.testing import CliRunner

from drake_bench.cli import app
from drake_bench.core.console import DataTable, literal, print_table
from drake_bench.errors import PluginError
from drake_bench.plugins.protocol import MethodMeta, State
from drake_bench.plugins.registry import register_method
from drake_bench.results.result_file import copy_result

MARKUP = "1.0[/red]"  # a closing tag with nothing open: rich raised MarkupError on it
ESCAPE = "\x1b]0;owned\x07\x1b[2J"  # sets the terminal's title, then clears the screen


class MarkupInItsName:
    meta = MethodMeta(name="markup-in-its-name", version=MARKUP, summary=f"looks [/] harmless {ESCAPE}")

    class Config(BaseModel):
        pass

    def __init__(self, config: Config | None = None):
        self.config = config or self.Config()

    def setup(self, federation):
        pass

    def init_client(self, ctx):
        return State()

    def init_server(self):
        return State()

    def client_update(self, ctx, state, message, batches):
        return State(), state

    def aggregate(self, round_idx, server_state, uploads):
        return {c: State() for c in uploads}, server_state

    def predict(self, ctx, state, queries):
        return ["" for _ in queries]


register_method(MarkupInItsName)


def _printed(renderable) -> str:
    console = Console(record=True, width=200, force_terminal=True)
    console.print(renderable)
    return console.export_text()


def test_literal_text_reads_no_markup_and_sends_no_control_character():
    text = literal(f"{MARKUP} {ESCAPE}")
    out = _printed(text)
    assert "[/red]" in out and "\x1b" not in text.plain and "\\x1b]0;owned\\x07" in text.plain


def test_a_table_of_plugin_text_prints_it_as_written():
    table = DataTable(title=f"board [/] {ESCAPE}")
    table.add_column("method")
    table.add_row(f"evil {MARKUP}")
    console = Console(record=True, width=200)
    print_table(console, table)
    out = console.export_text()
    assert f"evil {MARKUP}" in out and "board [/]" in out and "\x1b" not in out


def test_list_and_describe_show_a_method_whose_meta_holds_markup_and_escapes():
    for args in (["list"], ["describe", "markup-in-its-name"]):
        result = CliRunner().invoke(app, args, env={"COLUMNS": "250"})
        assert result.exit_code == 0, (args, result.output, result.exception)
        assert MARKUP in result.output and "\x1b" not in result.output


def test_an_error_message_with_markup_is_reported_not_crashed_on():
    import drake_bench.commands as commands  # every command reports its errors through commands.fail

    console = Console(record=True, width=200, stderr=True)
    saved, commands._err = commands._err, console
    try:
        exit_ = commands.fail(PluginError(f"method 'x' failed in predict: ValueError: bad [/] value {ESCAPE}"))
    finally:
        commands._err = saved
    assert exit_.exit_code == 1
    out = console.export_text()
    assert "bad [/] value" in out and "\x1b" not in out


# -- a detached child that outlives its call (it rewrote result.json after the evaluator wrote it) -----------------
class Forger(Counter):
    """Counter whose first client_update leaves a detached grandchild (double fork + setsid) that waits, then writes."""

    meta = MethodMeta(name="forger", version="1.0")

    class Config(Counter.Config):
        trace: str = ""  # a folder: the grandchild writes its pid there at once, and `forged` if it survives

    def client_update(self, ctx, state, message, batches):
        if ctx.round_idx == 0 and ctx.client_id == 1:
            trace = Path(self.config.trace)
            if os.fork() == 0:  # child: detach, fork the grandchild, leave
                os.setsid()
                if os.fork() == 0:
                    (trace / "pid").write_text(str(os.getpid()))
                    time.sleep(3)
                    (trace / "forged").write_text("100/100")
                os._exit(0)
            os.wait()
            deadline = time.time() + 5
            while not (trace / "pid").exists() and time.time() < deadline:
                time.sleep(0.01)
        return super().client_update(ctx, state, message, batches)


register_method(Forger)


def test_no_process_a_method_starts_survives_its_call(toy, tmp_path):
    from drake_bench import RunConfig, run
    from drake_bench.core.lock import pid_alive

    trace = tmp_path / "trace"
    trace.mkdir()
    manifest, root = toy
    run(
        RunConfig(
            benchmark=manifest,
            method="forger",
            data_dir=root,
            out=str(tmp_path / "out"),
            seeds=[0],
            rounds=4,
            fast_adaptation=False,
            method_config={"trace": str(trace)},
        )
    )
    pid = int((trace / "pid").read_text())
    assert not pid_alive(pid), "the detached grandchild outlived the call that started it"
    time.sleep(3.5)  # past the moment it would have written
    assert not (trace / "forged").exists()


# -- a run where some methods fail still reports the ones that finished -------------------------------------------
class FailsInPredict(Counter):
    meta = MethodMeta(name="fails-in-predict", version="1.0")

    def predict(self, ctx, state, queries):
        raise RuntimeError("planted fault")


register_method(FailsInPredict)
register_method(Counter)  # idempotent: other test modules register it too


def test_a_run_with_failed_methods_prints_the_finished_ones_and_every_failure(toy, tmp_path):
    manifest, root = toy
    result = CliRunner().invoke(
        app,
        [
            "run",
            "--benchmark",
            manifest,
            "--data-dir",
            root,
            "--methods",
            "fails-in-predict,counter",
            "--rounds",
            "4",
            "--no-fast-adaptation",
            "--out",
            str(tmp_path / "out"),
            "--jobs",
            "2",
        ],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 1, result.output
    assert "counter 1.0" in result.output  # the finished method's row
    assert "1 of 2 methods failed; 1 finished (counter)" in result.output
    assert "method 'fails-in-predict': PluginError" in result.output and "planted fault" in result.output
    assert (tmp_path / "out").rglob("counter/*/result.json")


def test_a_hang_in_a_plugins_init_is_under_the_call_time_limit():
    from drake_bench.backends.worker_process import MethodProcess

    started = time.perf_counter()
    try:
        MethodProcess("hangs-in-init", {}, call_timeout=3)
    except PluginError as exc:
        assert "no answer within 3 s" in str(exc) and "__init__" in str(exc)
    else:
        raise AssertionError("a plugin that hangs in __init__ started")
    assert time.perf_counter() - started < 60


def test_a_call_to_a_worker_that_is_gone_is_a_located_error():
    from drake_bench.backends.worker_process import MethodProcess

    worker = MethodProcess("counter", {})
    worker._proc.kill()
    worker._proc.join(5)
    try:
        worker.init_server()
    except PluginError as exc:
        assert "failed in init_server" in str(exc) and "worker process died" in str(exc)
    else:
        raise AssertionError("a call to a dead worker returned")
    finally:
        worker.close()


class HangsInInit(Counter):
    meta = MethodMeta(name="hangs-in-init", version="1.0")

    def __init__(self, config=None):
        time.sleep(600)


register_method(HangsInInit)


# -- reading the answers from disk (scored 100.00), or the run's uid secret ----------------------------------------
class DiskReader(Counter):
    """Counter that, in setup, looks for the benchmark's shards and the run's progress file (its uid secret) and
    fails the run if it can read any of them; it also writes a file in its own work folder, which it may."""

    meta = MethodMeta(name="disk-reader", version="1.0")

    class Config(Counter.Config):
        data_dir: str = ""

    def setup(self, federation):
        found = sorted(str(p) for p in Path(self.config.data_dir).rglob("*.parquet"))
        home = Path(os.environ["DRAKE_BENCH_HOME"]) / "built"
        found += sorted(str(p) for p in home.rglob("*.parquet")) if home.is_dir() else []
        progress = federation.workdir.parent / "progress.json"
        if progress.exists():
            found.append(str(progress))
        if found:
            raise RuntimeError(f"read {len(found)} files it must not see, e.g. {found[0]}")
        (federation.workdir / "scratch.txt").write_text("a method may write here")
        super().setup(federation)


register_method(DiskReader)


def test_the_method_worker_cannot_read_the_shards_nor_the_run_secret(toy, tmp_path, monkeypatch):
    from drake_bench import RunConfig, run
    from drake_bench.backends.confine import SANDBOX

    manifest, root = toy
    monkeypatch.setenv("DRAKE_BENCH_HOME", str(tmp_path / "home"))
    (tmp_path / "home" / "built" / "x" / "data").mkdir(parents=True)
    (tmp_path / "home" / "built" / "x" / "data" / "test-0.parquet").write_bytes(b"answers")
    out = tmp_path / "out"
    res = run(
        RunConfig(
            benchmark=manifest,
            method="disk-reader",
            data_dir=root,
            out=str(out),
            seeds=[0],
            rounds=4,
            fast_adaptation=False,
            resume=False,
            method_config={"data_dir": root},
        )
    )
    assert res.fl.extra["sandbox"] == SANDBOX
    assert list(out.rglob("work/scratch.txt"))  # its own work folder stayed writable, and the evaluator sees it
    assert list(Path(root).rglob("*.parquet"))  # the evaluator's own view is untouched


def test_an_inline_run_records_that_it_had_no_sandbox(toy, tmp_path):
    from drake_bench import RunConfig, run

    manifest, root = toy
    res = run(
        RunConfig(
            benchmark=manifest,
            method="counter",
            data_dir=root,
            out=str(tmp_path / "out"),
            seeds=[0],
            rounds=4,
            fast_adaptation=False,
            isolation="inline",
        )
    )
    assert res.fl.extra["sandbox"] == "none (inline)"


def test_a_run_with_other_seeds_does_not_silently_replace_a_finished_result(toy, tmp_path):
    from drake_bench import RunConfig, run
    from drake_bench.errors import DrakeBenchError
    from drake_bench.results.result_file import read_result

    manifest, root = toy

    def cfg(seeds):
        return RunConfig(
            benchmark=manifest,
            method="counter",
            data_dir=root,
            out=str(tmp_path / "out"),
            seeds=seeds,
            rounds=4,
            fast_adaptation=False,
            isolation="inline",
        )

    first = run(cfg([0]))
    path = first.path(str(tmp_path / "out"))
    try:
        run(cfg([1]))
    except DrakeBenchError as exc:
        assert "holds seeds [0]" in str(exc) and "--seeds 0,1" in str(exc)
    else:
        raise AssertionError("seeds [1] replaced the finished seed-0 result")
    assert read_result(path).seeds == [0]
    both = run(cfg([0, 1]))  # the command the error gives: seed 0 from the file, seed 1 from its checkpoint
    assert both.seeds == [0, 1] and read_result(path).seeds == [0, 1]


def test_a_method_version_that_reads_as_mathtext_does_not_stop_the_plot(toy, tmp_path):
    from drake_bench import RunConfig, run
    from drake_bench.evaluation.plots import plot_accuracy_over_rounds

    manifest, root = toy
    res = run(
        RunConfig(
            benchmark=manifest,
            method="counter",
            data_dir=root,
            out=str(tmp_path / "out"),
            seeds=[0],
            rounds=4,
            fast_adaptation=False,
            isolation="inline",
        )
    )
    hostile = res.model_copy(update={"method": res.method.model_copy(update={"version": "1.0 $\\frac{$ $x^$"})})
    fig = plot_accuracy_over_rounds([hostile], tmp_path / "plot.png")
    assert (tmp_path / "plot.png").stat().st_size > 0
    assert any("$\\frac{$" in t.get_text().replace("\\$", "$") for t in fig.legends[0].get_texts())


def test_a_board_that_requires_the_sandbox_refuses_an_unconfined_run(tiny_board, tmp_path):
    import json

    from drake_bench.leaderboard.boards import load_board
    from drake_bench.leaderboard.rules import validate

    board_json, root = tiny_board
    board = load_board(str(board_json)).model_copy(update={"sandbox": True})
    files = [p for p in root.rglob("result.json") if "checkpoints" not in p.parts]
    _, refusals = validate(files, board)
    assert not [r for r in refusals if r.rule == "sandbox"]  # built confined
    unconfined = tmp_path / "result.json"
    copy_result(files[0], unconfined)
    data = json.loads(unconfined.read_text())
    data["fl"]["extra"]["sandbox"] = "none (unshare: Operation not permitted)"
    unconfined.write_text(json.dumps(data))
    _, refusals = validate([unconfined], board)
    assert [r.rule for r in refusals if r.rule == "sandbox"] == ["sandbox"]
    _, refusals = validate([unconfined], board.model_copy(update={"sandbox": False}))
    assert not [r for r in refusals if r.rule == "sandbox"]  # the boards built before the confinement


class PipeWriter(Counter):
    """Counter that finds the worker's connection to the evaluator (gc) and writes garbage on it before answering."""

    meta = MethodMeta(name="pipe-writer", version="1.0")

    def init_server(self):
        import gc
        from multiprocessing.connection import Connection

        for conn in [o for o in gc.get_objects() if isinstance(o, Connection)]:
            try:
                conn.send_bytes(b"\xff" * 64)
            except OSError:
                pass
        return super().init_server()


register_method(PipeWriter)


def test_bytes_a_plugin_writes_on_the_evaluators_pipe_are_a_located_error():
    import pytest

    from drake_bench.backends.worker_process import MethodProcess

    worker = MethodProcess("pipe-writer", {})
    try:
        with pytest.raises(PluginError, match=r"failed in init_server.*not a reply of drake_bench's worker"):
            worker.init_server()
    finally:
        worker.close()


def test_an_output_folder_that_holds_the_import_path_is_not_masked_and_the_run_says_why(tmp_path):
    """Masking such a folder (``--out ~`` with a venv in the home folder) would hide the worker's own code."""
    import sys

    from drake_bench.backends.confine import Confinement, ConfinementUnavailable, confine

    site = tmp_path / "home" / "venv" / "site-packages"
    site.mkdir(parents=True)
    saved = list(sys.path)
    sys.path.insert(0, str(site))
    try:
        confine(Confinement(hidden=(str(tmp_path / "home"),)))
    except ConfinementUnavailable as exc:
        assert f"{tmp_path / 'home'} holds {site}" in str(exc)
    else:
        raise AssertionError("the folder holding the import path was masked")
    finally:
        sys.path[:] = saved
