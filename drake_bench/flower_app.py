"""The Flower App components for the deployment runtime: what ``flwr run`` loads on the SuperLink and SuperNodes.

:func:`drake_bench.backends.flower.write_app` writes an App folder whose ``pyproject.toml`` names ``server_app`` and
``client_app`` here and carries the run's :class:`~drake_bench.evaluator.run_config.RunConfig` as JSON (run config key
``run-config``). The SuperLink starts ``server_app`` in a ``flwr-serverapp`` process: the evaluator's whole run,
with its client calls sent to the SuperNodes, which run ``client_app`` (the same ClientApp as the simulation's).
This module sits above both the evaluator and :mod:`drake_bench.backends.flower`, so neither imports the other's caller.
"""

from __future__ import annotations

import json
import os

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from drake_bench.backends.flower import FlowerClients, client_app
from drake_bench.backends.worker_process import import_target
from drake_bench.benchmarks.manifest import load_benchmark
from drake_bench.core.lock import TOKEN_ENV, RunLock
from drake_bench.evaluator.run_config import RunConfig
from drake_bench.evaluator.standard import run_holding_lock
from drake_bench.plugins.registry import register_method

__all__ = ["client_app", "server_app"]

server_app = ServerApp()


@server_app.main()
def _main(grid: Grid, context: Context) -> None:
    """One drake_bench run (every seed), its result file written under the RunConfig's ``out`` on this machine."""
    config = RunConfig.model_validate_json(str(context.run_config["run-config"]))
    for name, target in json.loads(str(context.run_config.get("registered-methods", "{}"))).items():
        register_method(import_target(target), name=name)
    import torch

    torch.set_num_threads(int(context.run_config.get("torch-threads", torch.get_num_threads())))
    token = str(context.run_config.get("lock-token", ""))
    if token:  # `drake-bench run` holds `out` and submitted this run: work under its lock, as its own workers do
        os.environ[TOKEN_ENV] = token
    clients = list(load_benchmark(config.benchmark).client_ids)
    with RunLock(config.out):
        run_holding_lock(config, None, FlowerClients(grid, config, clients))
