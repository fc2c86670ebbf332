"""The Flower backend: the evaluator's rounds as a Flower ``ServerApp``, each client's calls in a ``ClientApp``.

``RunConfig(backend="flower")`` (``drake-bench run --backend flower``) runs the same federation as the default
backend on Flower (https://flower.ai), installed with the ``flower`` extra:

* the **ServerApp** is the evaluator itself (:func:`drake_bench.evaluator.standard.run`'s round loop): it reads each
  client's stream, draws the round's participants, calls the method's ``init_*``, ``aggregate``,
  ``post_federation`` and fast adaptation in its own method handle, schedules evaluations, scores every answer,
  checkpoints and writes the result file. It keeps every client's state, so a lost node loses nothing and a
  checkpoint resumes the run under either backend;
* each **ClientApp** runs the method's ``client_update`` and ``predict`` for the client its node stands for, on
  what the ServerApp sends it: that client's own batches of the round, its state and pending message, or
  evaluation queries with the answers removed. It never receives another client's data or any answer.

Messages carry drake_bench's own encoding of states, messages and samples (a JSON header and the tensors as
safetensors, :func:`drake_bench.backends.worker_process.dumps`; never pickle) as ``bytes`` in a Flower ``ConfigRecord``: Flower's
``ArrayRecord`` goes through numpy, which has no bfloat16. Every call is seeded exactly as the default backend
seeds it, so the result file has the same scores and bytes (docs/scale-out.md says what differs: timings).

Two runtimes, one ServerApp and one ClientApp:

* the **simulation runtime** (:func:`simulate`, Flower's ``run_simulation`` on Ray): one SuperNode per client,
  ``client_cpus`` / ``client_gpus`` reserved per running ClientApp, ``flower_workers`` of them at once. A Ray
  actor keeps the method (its loaded models) from one round to the next;
* the **deployment runtime** (:func:`deploy`): a SuperLink and SuperNodes started with ``flower-superlink`` and
  ``flower-supernode``; ``RunConfig.superlink`` names the SuperLink connection and :func:`deploy` submits the
  run with ``flwr run``. A SuperNode started with ``--node-config "partition-id=P num-partitions=N"`` serves the
  clients whose position in the sorted client list is P modulo N.

A node that does not answer (Flower's ``NODE_UNAVAILABLE`` for a SuperNode that stopped or lost its heartbeat, no
reply within ``round_timeout``) is recorded missing for that round (``raw.absences``, reason ``no reply``); its
client keeps its state, and its evaluation runs in the ServerApp's own method handle so every client is scored.
A method's own error on a node stops the run with that error, located as in the default backend.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from drake_bench.backends.client_calls import ClientCalls, PredictJob, TrainJob, TrainReply
from drake_bench.core.lock import TOKEN_ENV
from drake_bench.errors import DrakeBenchError

try:
    from flwr.app import ConfigRecord, Context, Message, RecordDict
    from flwr.clientapp import ClientApp
    from flwr.common.constant import ErrorCode
    from flwr.serverapp import Grid, ServerApp
except ImportError as _exc:  # pragma: no cover - the optional extra
    raise DrakeBenchError(
        f"backend='flower' needs Flower, which is not installed ({_exc}): pip install 'drake_bench[flower]'"
    ) from None

if TYPE_CHECKING:
    from drake_bench.evaluator.run_config import RunConfig
    from drake_bench.evaluator.standard import SeedRun
    from drake_bench.results.result_file import RunResult

__all__ = ["FlowerClients", "client_app", "deploy", "simulate", "write_app"]

RECORD = "drake"
"""The ConfigRecord every message carries: ``header`` (who the method is, for this seed) and ``payload`` (the call)."""
TRAIN, PREDICT, HELLO = "train", "evaluate", "query"
LOST = {
    ErrorCode.NODE_UNAVAILABLE,
    ErrorCode.MESSAGE_UNAVAILABLE,
    ErrorCode.REPLY_MESSAGE_UNAVAILABLE,
    ErrorCode.CLIENT_APP_CRASHED,
}
"""Flower errors that mean the node (or its ClientApp process) is gone: its client is missing for the round. Any
other error (the ClientApp raised, or could not be loaded) stops the run, naming it."""
NODE_WAIT_SECONDS = 300.0
"""How long the ServerApp waits for every SuperNode to connect before it says which are missing."""


# --------------------------------------------------------------------------- the ClientApp
client_app = ClientApp()
_methods: dict[str, Any] = {}  # header digest -> method handle (a Ray actor keeps it across rounds)


def _method(header: bytes) -> Any:
    """The method this header describes, set up once per process and seed: a Ray actor serves many rounds and
    clients with one loaded method, as the default backend's single method handle does."""
    from drake_bench.backends.worker_process import MethodProcess, import_target, loads
    from drake_bench.plugins.guard import GuardedMethod
    from drake_bench.plugins.registry import create_method, register_method

    key = hashlib.sha256(header).hexdigest()
    if key not in _methods:
        for old in _methods.values():  # one federation at a time per process: free the last one's models
            old.close()
        _methods.clear()
        h = loads(header)
        for name, target in h["registered"].items():
            register_method(import_target(target), name=name)
        import torch

        torch.set_num_threads(h["threads"])
        if h["isolation"] == "process":
            method: Any = MethodProcess(
                h["method"],
                h["method_config"],
                seed=h["seed"],
                call_timeout=h["call_timeout"],
                threads=h["threads"],
                numerics=h.get("numerics", "native"),
            )
        else:
            from drake_bench.core import numerics

            numerics.apply(h.get("numerics", "native"))  # in time where no kernel has run in this node process yet
            method = GuardedMethod(create_method(h["method"], h["method_config"]), h["seed"])
        method.setup(h["federation"], rng_seed=h["setup_seed"])
        _methods[key] = method
    return _methods[key]


def _answer(msg: Message, work: Callable[[Any, Any], Any]) -> Message:
    """Run one call and reply; a drake_bench error (a plugin's, located) goes back as data, so the ServerApp can
    raise it as the default backend would, instead of Flower turning it into a lost node."""
    from drake_bench.backends.worker_process import dumps, loads

    record = msg.content[RECORD]
    try:
        value = ("ok", work(_method(record["header"]), loads(record["payload"])))
    except DrakeBenchError as exc:
        value = ("error", type(exc).__name__, str(exc))
    return Message(RecordDict({RECORD: ConfigRecord({"payload": dumps(value)})}), reply_to=msg)


@client_app.train()
def _train(msg: Message, context: Context) -> Message:
    def work(method: Any, call: dict[str, Any]) -> dict[str, Any]:
        ctx = call["ctx"]
        t0 = time.perf_counter()
        upload, state = method.client_update(ctx, call["state"], call["message"], call["batches"], rng_seed=ctx.seed)
        seconds = time.perf_counter() - t0
        return {
            "upload": upload,
            "state": state,
            "seconds": seconds,
            "peak": method.peak_memory_bytes(),
            "diagnostics": method.client_diagnostics(ctx),
        }  # rows about this call live on this node

    return _answer(msg, work)


@client_app.evaluate()
def _predict(msg: Message, context: Context) -> Message:
    def work(method: Any, call: dict[str, Any]) -> dict[str, Any]:
        return {
            "predictions": [method.predict(call["ctx"], call["state"], q) for q in call["groups"]],
            "peak": method.peak_memory_bytes(),
        }

    return _answer(msg, work)


@client_app.query()
def _hello(msg: Message, context: Context) -> Message:
    """Which share of the clients this node serves: its ``partition-id`` of ``num-partitions`` (the simulation
    runtime sets both; a deployed SuperNode takes them from ``--node-config``)."""
    cfg = context.node_config
    part, parts = int(cfg.get("partition-id", -1)), int(cfg.get("num-partitions", 0))
    return Message(RecordDict({RECORD: ConfigRecord({"partition": part, "partitions": parts})}), reply_to=msg)


# --------------------------------------------------------------------------- the ServerApp side
class FlowerClients(ClientCalls):
    """The evaluator's client calls as Flower messages through a ``Grid`` (one ServerApp, one node per client share).

    Each round's calls go out together, so the nodes work in parallel; replies are matched to clients by the id of
    the message they answer.
    """

    def __init__(
        self,
        grid: Grid,
        config: RunConfig,
        clients: list[int],
        node_wait: float = NODE_WAIT_SECONDS,
        stopped: threading.Event | None = None,
    ):
        self.grid, self.config, self.clients = grid, config, sorted(clients)
        self.node_wait = node_wait
        self.stopped = stopped  # set when the simulation runtime is gone (Ctrl-C): stop waiting for replies
        self.partition_of: dict[int, tuple[int, int]] = {}  # node id -> (partition, partitions)
        self._headers: dict[tuple[str, int], bytes] = {}

    # -- nodes ----------------------------------------------------------------------
    def _refresh_nodes(self, wait: bool) -> None:
        """Learn the partition of every connected node not yet asked; with ``wait``, first wait until every client
        has a node (or ``node_wait`` seconds, then say what is missing)."""
        deadline = time.monotonic() + self.node_wait
        while True:
            live = set(self.grid.get_node_ids())
            for node in sorted(live - set(self.partition_of)):
                self.partition_of[node] = self._ask_partition(node)
            for node in set(self.partition_of) - live:
                del self.partition_of[node]
            unserved = [c for c in self.clients if self._node_of(c) is None]
            if not wait or not unserved:
                return
            if self.stopped is not None and self.stopped.is_set():
                raise DrakeBenchError("Flower's simulation runtime stopped before every client had a node")
            if time.monotonic() > deadline:
                raise DrakeBenchError(
                    f"after {self.node_wait:g} s, clients {unserved} have no Flower node: {len(live)} SuperNode(s) "
                    f"connected with partitions {sorted(set(self.partition_of.values()))}; start one SuperNode per "
                    f"partition with --node-config 'partition-id=P num-partitions=N' (docs/scale-out.md)"
                )
            time.sleep(0.2)

    def _ask_partition(self, node: int) -> tuple[int, int]:
        msg = Message(RecordDict({RECORD: ConfigRecord({})}), dst_node_id=node, message_type=HELLO)
        replies = list(self.grid.send_and_receive([msg], timeout=self.node_wait))
        if not replies or replies[0].has_error():
            return (-1, 0)
        rec = replies[0].content[RECORD]
        return int(rec["partition"]), int(rec["partitions"])

    def _node_of(self, client: int) -> int | None:
        """The node serving ``client``: the one whose partition is the client's position modulo the partitions."""
        pos = self.clients.index(client)
        for node, (part, parts) in sorted(self.partition_of.items()):
            if parts > 0 and pos % parts == part:
                return node
        return None

    # -- messages ---------------------------------------------------------------------
    def _header(self, run: SeedRun) -> bytes:
        """Who the method is for this seed (name, config, federation, isolation): a node sets it up once per header."""
        key = (self.config.model_dump_json(), run.seed)
        if key not in self._headers:
            import torch

            from drake_bench.backends.worker_process import dumps, registered_targets

            cfg = self.config
            self._headers[key] = dumps(
                {
                    "method": cfg.method,
                    "method_config": cfg.method_config,
                    "seed": run.seed,
                    "setup_seed": run.setup_seed,
                    "federation": run.federation,
                    "isolation": cfg.isolation,
                    "call_timeout": cfg.call_timeout,
                    "numerics": cfg.numerics,
                    "threads": torch.get_num_threads(),
                    "registered": registered_targets(),
                }
            )
        return self._headers[key]

    def _exchange(self, run: SeedRun, kind: str, calls: dict[int, dict[str, Any]]) -> dict[int, Any]:
        """Send one call per client, wait for the replies (up to ``round_timeout``), and return per client the
        decoded value, or a string saying why it has none. A method error on a node is raised here."""
        import drake_bench.errors as errors_mod
        from drake_bench.backends.worker_process import dumps, loads, rebuild_error
        from drake_bench.errors import PluginError

        self._refresh_nodes(wait=False)
        header = self._header(run)
        out: dict[int, Any] = {}
        pending: dict[str, int] = {}
        for c, call in calls.items():
            node = self._node_of(c)
            if node is None:
                out[c] = f"no connected SuperNode serves client {c}"
                continue
            msg = Message(
                RecordDict({RECORD: ConfigRecord({"header": header, "payload": dumps(call)})}),
                dst_node_id=node,
                message_type=kind,
            )
            ids = list(self.grid.push_messages([msg]))
            if ids:
                pending[ids[0]] = c
            else:
                out[c] = f"Flower refused a message to node {node}"
        timeout = self.config.round_timeout
        end = None if timeout is None else time.monotonic() + timeout
        while pending and (end is None or time.monotonic() < end):
            if self.stopped is not None and self.stopped.is_set():
                raise DrakeBenchError("Flower's simulation runtime stopped while the ServerApp waited for replies")
            for reply in self.grid.pull_messages(list(pending)):
                c = pending.pop(reply.metadata.reply_to_message_id, None)
                if c is None:
                    continue
                if reply.has_error():
                    if reply.error.code not in LOST:  # the ClientApp itself failed: not an absence, a broken run
                        raise DrakeBenchError(
                            f"client {c}'s ClientApp failed (Flower error {reply.error.code}): {reply.error.reason}"
                        )
                    out[c] = f"Flower error {reply.error.code}: {reply.error.reason}"
                    continue
                value = loads(reply.content[RECORD]["payload"])
                if value[0] != "ok":
                    cls = getattr(errors_mod, value[1], None)
                    if isinstance(cls, type) and issubclass(cls, DrakeBenchError):
                        raise rebuild_error(cls, value[2])
                    raise PluginError(f"{value[1]}: {value[2]}")
                out[c] = value[1]
            if pending:
                time.sleep(0.05)
        for c in pending.values():
            out[c] = f"no reply within round_timeout={timeout:g} s"
        return out

    # -- the evaluator's calls ------------------------------------------------------------
    def train(self, run: SeedRun, round_idx: int, jobs: list[TrainJob]) -> dict[int, TrainReply | str]:
        if not self.partition_of:
            self._refresh_nodes(wait=True)
        got = self._exchange(
            run,
            TRAIN,
            {j.client: {"ctx": j.ctx, "state": j.state, "message": j.message, "batches": j.batches} for j in jobs},
        )
        return {
            c: v
            if isinstance(v, str)
            else TrainReply(v["upload"], v["state"], v["seconds"], v["peak"], v["diagnostics"])
            for c, v in got.items()
        }

    def predict(self, run: SeedRun, jobs: list[PredictJob]) -> list[list[list[str]]]:
        if not self.partition_of:
            self._refresh_nodes(wait=True)
        got = self._exchange(
            run, PREDICT, {j.client: {"ctx": j.ctx, "state": j.state, "groups": j.groups} for j in jobs}
        )
        out = []
        for job in jobs:
            value = got[job.client]
            if isinstance(
                value, str
            ):  # its node is gone: the ServerApp's own handle answers, so every client is scored
                out.append([run.method.predict(job.ctx, job.state, q) for q in job.groups])
            else:
                run.client_peaks[job.client] = max(run.client_peaks.get(job.client, 0), value["peak"])
                out.append(value["predictions"])
        return out


# --------------------------------------------------------------------------- the simulation runtime
def simulate(
    configs: list[RunConfig], serve: Callable[[RunConfig, ClientCalls], RunResult], clients: list[int]
) -> list[RunResult]:
    """Run ``serve`` (the evaluator's whole run) for each config, one after another, as the ServerApp of one Flower
    simulation (one Ray start for all of them), one SuperNode per client; return their results in order.

    Ray reserves ``client_cpus`` CPUs and ``client_gpus`` GPUs for each running ClientApp and is given
    ``flower_workers x client_cpus`` CPUs in all (the first config's settings: they must agree)."""
    from flwr.simulation import run_simulation

    first = configs[0]
    resources = {(c.client_cpus, c.client_gpus, c.flower_workers) for c in configs}
    if len(resources) != 1:
        raise DrakeBenchError(
            f"runs in one Flower simulation share client_cpus, client_gpus and flower_workers; got "
            f"{sorted(resources, key=str)}"
        )
    import torch

    workers = first.flower_workers or max(1, int((os.cpu_count() or 1) // first.client_cpus))
    threads = torch.get_num_threads()  # the ServerApp's thread starts with torch's default: use the caller's count
    server_app = ServerApp()
    results: list[RunResult] = []
    stopped = threading.Event()  # Flower runs the ServerApp in a thread it never joins: it must end by itself

    @server_app.main()
    def _main(grid: Grid, context: Context) -> None:
        torch.set_num_threads(threads)
        calls = FlowerClients(grid, first, clients, stopped=stopped)
        for config in configs:
            calls.config = config
            results.append(serve(config, calls))

    backend_config = {
        "client_resources": {"num_cpus": first.client_cpus, "num_gpus": first.client_gpus},
        "init_args": {"num_cpus": workers * first.client_cpus, "include_dashboard": False},
    }
    try:
        run_simulation(
            server_app=server_app, client_app=client_app, num_supernodes=len(clients), backend_config=backend_config
        )  # type: ignore[arg-type]
    finally:
        stopped.set()
    if len(results) != len(configs):
        raise DrakeBenchError(
            "Flower's simulation ended before the ServerApp finished its runs (its log above says why)"
        )
    return results


# --------------------------------------------------------------------------- the deployment runtime
APP_MODULE = "drake_bench.flower_app"


def write_app(config: RunConfig, folder: Path) -> Path:
    """A Flower App folder for ``flwr run``: a pyproject.toml whose components are drake_bench's ServerApp and
    ClientApp (``drake_bench.flower_app``, imported from the installed package on the SuperLink's and SuperNodes'
    machines) and whose run config carries this RunConfig as JSON and this process's torch thread count (numbers
    depend on it: the ServerApp and the ClientApps use it, as the default backend's method process does)."""
    import tomli_w
    import torch

    from drake_bench.backends.worker_process import registered_targets

    folder = Path(folder)
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    doc = {
        "build-system": {"requires": ["hatchling"], "build-backend": "hatchling.build"},
        "project": {
            "name": "drake-bench-run",
            "version": "1.0.0",
            "description": "one drake_bench run",
            "license": "Apache-2.0",
            "dependencies": [],
        },
        "tool": {
            "flwr": {
                "app": {
                    "publisher": "drake-bench",
                    "components": {"serverapp": f"{APP_MODULE}:server_app", "clientapp": f"{APP_MODULE}:client_app"},
                    # the token of the run lock this process holds on `out` (if any): the ServerApp then works under it
                    "config": {
                        "run-config": config.model_dump_json(),
                        "lock-token": os.environ.get(TOKEN_ENV, ""),
                        "torch-threads": torch.get_num_threads(),
                        # methods registered in this process by import path (register_method), for the ServerApp
                        "registered-methods": json.dumps(registered_targets()),
                    },
                }
            }
        },
    }
    (folder / "pyproject.toml").write_text(tomli_w.dumps(doc))
    return folder


def deploy(config: RunConfig) -> RunResult:
    """Submit this run to the deployed federation ``config.superlink`` (a SuperLink connection of the Flower
    configuration, ``$FLWR_HOME/config.toml``) with ``flwr run --stream``, wait for it, and read its result file.

    The ServerApp runs where the SuperLink runs and writes the checkpoints and the result file under ``config.out``
    there; this waits on the same machine (the localhost recipe of docs/scale-out.md)."""
    from drake_bench.benchmarks.manifest import load_benchmark
    from drake_bench.results.result_file import read_result
    from drake_bench.streams.scenarios import benchmark_scenario

    assert config.superlink is not None
    app = write_app(config, Path(config.out) / "flower-app" / config.method)
    spec = load_benchmark(config.benchmark)
    scenario = benchmark_scenario(spec, config.scenario)
    flwr = shutil.which("flwr")
    if flwr is None:
        raise DrakeBenchError("the `flwr` command is not on PATH: pip install 'drake_bench[flower]'")
    log = app.with_name(f"{config.method}.flwr-run.log")  # beside the App folder: `flwr run` packs the folder
    started = time.time()
    with open(log, "wb") as f:
        done = subprocess.run(
            [flwr, "run", str(app), config.superlink, "--stream"], stdout=f, stderr=subprocess.STDOUT, check=False
        )
    written = [
        p
        for p in Path(config.out).glob(f"{spec.name}/{scenario.tag()}/{config.method}/*/result.json")
        if p.stat().st_mtime >= started
    ]
    if done.returncode != 0 or not written:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        raise DrakeBenchError(
            f"`flwr run` on SuperLink {config.superlink!r} did not write a result file under "
            f"{config.out} (exit code {done.returncode}); the end of {log}:\n{tail}"
        )
    return read_result(max(written, key=lambda p: p.stat().st_mtime))
