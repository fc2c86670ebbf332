"""A real multi-process federation on localhost: one SuperLink and two SuperNodes (insecure, loopback only).

The run goes through `flwr run` (drake_bench.backends.flower.deploy): its first round must be the default backend's (records
and settings but for execution fields); then a SuperNode is stopped in the middle of round 2 (SIGTERM while its
ClientApp trains): Flower reports the node unavailable, its clients are recorded missing for that round
(raw.absences, 'no reply'), are still scored, and the run completes. Whole-file parity of a complete run is
tests/test_flower.py's (the simulation runtime: same ServerApp, same messages).

The method is the model-free counter of tests/minimal_method.py, so the time goes to Flower's processes (one
ClientApp process per message in the deployment runtime), not to models.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("flwr")

from minimal_method import Counter  # noqa: E402

from drake_bench.evaluator.standard import RunConfig, run  # noqa: E402
from drake_bench.plugins.registry import register_method  # noqa: E402
from drake_bench.results.result_file import check_result, comparable, read_result  # noqa: E402

TESTS = Path(__file__).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def pair(toy_loader, tmp_path_factory) -> tuple[str, str]:
    """A 2-client x 1-task toy benchmark (manifest path, built folder): few messages, so few ClientApp processes."""
    import json

    from conftest import toy_spec

    from drake_bench.benchmarks.build import build_benchmark
    from drake_bench.benchmarks.manifest import manifest_dict

    spec = toy_spec(n_clients=2, tasks_per_client=1, pool_size=10)
    root = tmp_path_factory.mktemp("pair") / "built"
    build_benchmark(spec, source_dir=None, out=root, show_progress=False)
    path = root.parent / "pair.json"
    path.write_text(json.dumps(manifest_dict(spec)))
    return str(path), str(root)


def _config(benchmark: tuple[str, str], out: Path, rounds: int, **extra) -> RunConfig:
    """The counter method, evaluated after every round; inline on the nodes (one process per message is enough)."""
    return RunConfig(
        benchmark=benchmark[0],
        method="counter",
        data_dir=benchmark[1],
        out=str(out),
        rounds=rounds,
        local_steps=2,
        eval_every_rounds=1,
        fast_adaptation=False,
        isolation="inline",
        **extra,
    )


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    """``sig`` to every process of ``proc``'s group (its own session: ``start_new_session``), if any is left."""
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class Federation:
    """A SuperLink and SuperNodes on 127.0.0.1, each a process this test starts and stops by its pid."""

    def __init__(self, home: Path):
        self.home, self.procs = home, {}
        self.port = _free_port()
        home.mkdir(parents=True, exist_ok=True)
        (home / "config.toml").write_text(
            f'[superlink]\ndefault = "drake-test"\n\n[superlink.drake-test]\n'
            f'address = "127.0.0.1:{self.port}"\ninsecure = true\n'
        )
        # the Flower processes import drake_bench and the test's counter method as this process does
        self.env = {
            **os.environ,
            "FLWR_HOME": str(home),
            "PYTHONPATH": os.pathsep.join([str(TESTS), *filter(None, [os.environ.get("PYTHONPATH")])]),
        }

    def start(self, name: str, args: list[str], **env: str) -> None:
        log = open(self.home / f"{name}.log", "wb")
        # a session of its own, so that stop() ends what the process starts too (a SuperNode's ClientApps: one stalled
        # inside a plugin call outlives its SuperNode otherwise)
        self.procs[name] = subprocess.Popen(
            args, stdout=log, stderr=subprocess.STDOUT, env={**self.env, **env}, start_new_session=True
        )

    def superlink(self) -> None:
        self.start(
            "superlink",
            [
                _tool("flower-superlink"),
                "--insecure",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--disable-runtime-dependency-installation",
            ],
        )

    def supernode(self, partition: int, partitions: int, **env: str) -> None:
        self.start(
            f"node-{partition}",
            [
                _tool("flower-supernode"),
                "--insecure",
                "--superlink",
                f"127.0.0.1:{self.port}",
                "--port",
                str(_free_port()),
                "--node-config",
                f"partition-id={partition} num-partitions={partitions}",
            ],
            **env,
        )

    def stop(self, name: str) -> None:
        proc = self.procs.pop(name)
        _signal_group(proc, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        _signal_group(proc, signal.SIGKILL)  # whatever of its group is left (a ClientApp stuck in a call)
        proc.wait()

    def close(self) -> None:
        for name in list(self.procs):
            self.stop(name)


def _tool(name: str) -> str:
    return str(Path(sys.executable).parent / name) if (Path(sys.executable).parent / name).exists() else name


@pytest.fixture
def federation(tmp_path, monkeypatch):
    """A SuperLink on a free loopback port (nodes are started by the test), stopped at the end whatever happens."""
    fed = Federation(tmp_path / "flwr-home")
    monkeypatch.setenv("FLWR_HOME", str(fed.home))
    fed.superlink()
    try:
        yield fed
    finally:
        fed.close()


def _through_round_1(result) -> dict:
    """The result but for what depends on rounds after the first: its raw records of round 1 and everything that
    is not a record (benchmark, settings, allocation, method), execution fields removed (results.comparable)."""
    data = comparable(result)
    data.pop("summary")
    data["raw"] = {
        table: [r for r in rows if r.get("eval_round", r.get("round", 1)) <= 1] for table, rows in data["raw"].items()
    }
    return data


@pytest.mark.slow
def test_localhost_superlink_reproduces_the_default_backend_and_survives_a_lost_node(pair, tmp_path, federation):
    """One deployed run of two rounds: round 1 must be the default backend's, to the byte; node 1 is stopped
    inside round 2's client_update, and the run must complete with its client recorded missing and still scored.
    (One run, not two: each message starts a ClientApp process, so a second deployed run costs most of a minute.)"""
    register_method(Counter, name="counter")
    stalls = tmp_path / "stalls"
    stalls.mkdir()
    federation.supernode(0, 2)
    federation.supernode(1, 2, COUNTER_STALL=f"1:{stalls}")  # serves client 2; hangs in round 2 once armed
    (stalls / "armed").touch()
    out = tmp_path / "lost"
    submitted = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import sys; sys.path.insert(0, sys.argv[1]); from minimal_method import Counter; "
                "from drake_bench.plugins.registry import register_method; register_method(Counter, name='counter'); "
                "from drake_bench.evaluator.standard import RunConfig, run; run(RunConfig.model_validate_json(sys.argv[2]))"
            ),
            str(TESTS),
            _config(pair, out, 2, backend="flower", superlink="drake-test").model_dump_json(),
        ],
        env=federation.env,
    )
    try:
        while not (stalls / "client-2-round-1").exists():  # node 1's ClientApp is inside round 2's client_update
            assert submitted.poll() is None, "the run ended before node 1 reached round 2"
            time.sleep(0.2)
        federation.stop("node-1")
        assert submitted.wait(timeout=600) == 0
    finally:
        if submitted.poll() is None:
            submitted.kill()
    lost = read_result(next(out.glob("*/*/counter/*/result.json")))
    assert check_result(lost) == []
    assert lost.fl.extra["run_config"]["backend"] == "flower"

    # round 1 went through the SuperLink as the default backend runs it: same records, same settings
    reference = run(_config(pair, tmp_path / "default-2", 2))
    assert _through_round_1(lost) == _through_round_1(reference)
    assert any(s.eval_round == 1 for s in lost.raw.scores) and any(c.round == 1 for c in lost.raw.costs)

    # round 2: client 2's node is gone; its client is missing, keeps its round-1 state and is still scored
    assert [(a.round, a.client, a.reason) for a in lost.raw.absences] == [(2, 2, "no reply")]
    assert "Flower" in lost.raw.absences[0].detail or "SuperNode" in lost.raw.absences[0].detail
    assert {(c.round, c.client) for c in lost.raw.costs} == {(1, 1), (1, 2), (2, 1)}
    assert {(s.eval_round, s.client) for s in lost.raw.scores if s.role == "self"} == {(1, 1), (1, 2), (2, 1), (2, 2)}
    after_1 = {(r.task, r.owner): r.score for r in lost.raw.scores if r.eval_round == 1 and r.client == 2}
    assert {(r.task, r.owner): r.score for r in lost.raw.scores if r.eval_round == 2 and r.client == 2} == after_1
