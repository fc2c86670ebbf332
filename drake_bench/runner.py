"""Several methods side by side, from Python or the CLI: build once, prepare models once, run in workers.

:func:`run_methods` is what ``drake-bench run`` does, reachable from Python::

    from drake_bench import RunConfig, run_methods
    results = run_methods([RunConfig(method="sft"), RunConfig(method="fedit")])

It builds (or fetches) the benchmark once before any worker starts, so workers never race on it;
checks the allocation's tiny zoo models once (the shipped checkpoints against their sha256, or
their local pretraining with ``DRAKE_BENCH_ZOO=pretrain``, which takes minutes), so no worker
waits behind a bar stuck at zero; then runs one method per worker process. Methods are
independent runs, so running them side by side is exact.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from contextlib import nullcontext
from typing import Any

from rich.console import Console

from drake_bench.backends.worker_process import hidden_main, registered_targets
from drake_bench.core import numerics
from drake_bench.core.lock import RunLock
from drake_bench.core.progress import TimeLeft, format_duration
from drake_bench.errors import DrakeBenchError, UnknownNameError
from drake_bench.evaluator.run_config import RunConfig
from drake_bench.results.result_file import RunResult


def default_jobs() -> int:
    """One worker per core, at most two (the embedded default is measured on 2 cores)."""
    return max(1, min(2, os.cpu_count() or 1))


_progress_queue: Any = None


def _init_worker(queue: Any, parent_pid: int, registered: dict[str, str]) -> None:
    """Each worker process: where progress goes, the methods the parent registered in-process (by import path),
    and to die with the run (a killed run leaves no worker behind)."""
    global _progress_queue
    from drake_bench.backends.worker_process import die_with, import_target
    from drake_bench.plugins.registry import register_method

    _progress_queue = queue
    die_with(parent_pid)
    for name, target in registered.items():
        register_method(import_target(target), name=name)


def _worker(config_json: str, threads: int) -> tuple[str, str]:
    """Run one method in a worker process; errors come back as text (custom exceptions do not pickle)."""
    import torch

    from drake_bench.core.progress import quiet_libraries
    from drake_bench.evaluator.standard import RunCallbacks, run

    queue = _progress_queue
    quiet_libraries()
    torch.set_num_threads(threads)
    cfg = RunConfig.model_validate_json(config_json)
    numerics.apply(cfg.numerics)  # before any kernel runs here: an inline method computes in this process
    seeds = cfg.seeds

    class Callbacks(RunCallbacks):
        def on_round(self, seed: int, round_idx: int, total: int) -> None:
            queue.put(
                (
                    cfg.method,
                    seeds.index(seed) * total + round_idx,
                    total * len(seeds),
                    f"seed {seed} round {round_idx + 1}/{total}",
                )
            )

        def on_eval(self, seed: int, round_idx: int) -> None:
            queue.put((cfg.method, None, None, f"seed {seed} evaluating after round {round_idx + 1}"))

        def on_adaptation(self, seed: int, task: str, arch: str) -> None:
            queue.put((cfg.method, None, None, f"seed {seed} fast adaptation {task} ({arch})"))

        def on_kept_seed(self, seed: int) -> None:
            queue.put((cfg.method, None, None, f"seed {seed} finished earlier: taken from its result file"))

    queue.put((cfg.method, None, None, "started"))
    try:
        return "ok", run(cfg, Callbacks()).model_dump_json()
    except DrakeBenchError as exc:
        return "error", f"{type(exc).__name__}: {exc}"


def prepare_tiny_models(names: Sequence[str], console: Console) -> None:
    """Get the tiny zoo models among ``names`` ready before any worker starts.

    With the shipped zoo (the default) each one's files are checked against their recorded sha256,
    one line per model, so a corrupted or missing checkpoint fails here, once, not in every worker.
    With ``DRAKE_BENCH_ZOO=pretrain`` the missing ones are pretrained (once, then cached). Names
    that are not tiny zoo models (real checkpoints, models a method brings) need nothing here.
    """
    from drake_bench.models.shipped import zoo_source
    from drake_bench.models.zoo import model_info

    tiny = []
    for name in names:
        try:
            if model_info(name).tiny:
                tiny.append(name)
        except UnknownNameError:
            continue
    if zoo_source() == "shipped":
        verify_tiny_models(tiny, console)
        return
    from drake_bench.models.pretrain import DEFAULT_RECIPE, checkpoint_dir, ensure_pretrained, is_pretrained

    for name in [n for n in tiny if not is_pretrained(n)]:
        note = (
            f"pretraining {name} once (recipe {DEFAULT_RECIPE.version}; cached in {checkpoint_dir(name).parent}; "
            "the first multimodal model also trains the shared vision tower, about 4 minutes)"
        )
        if not console.is_terminal:
            console.print(note, highlight=False)
        with console.status(note):
            started = time.perf_counter()
            ensure_pretrained(name)
        console.print(f"pretrained {name} ({time.perf_counter() - started:.0f} s)", highlight=False)


def verify_tiny_models(names: Sequence[str], console: Console) -> None:
    """Check each shipped tiny model's files against the manifest, printing one line per model as it is done."""
    from drake_bench.models.shipped import shipped_identity, verify_shipped

    for name in names:
        started = time.perf_counter()
        path = verify_shipped(name)
        size = sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
        sha = shipped_identity(name)["weights_sha256"]
        console.print(
            f"verified {name}: shipped weights sha256 {sha[:12]}..., {size / 1e6:.1f} MB "
            f"({time.perf_counter() - started:.2f} s)",
            highlight=False,
        )
        console.file.flush()  # a log or pipe shows each line as it happens


def _run_in_workers(configs: Sequence[RunConfig], jobs: int, threads: int, console: Console) -> list[RunResult]:
    """Each config in a worker process with live bars (plain timestamped lines when not on a terminal)."""
    import multiprocessing as mp
    import queue as queue_mod
    from concurrent.futures import ProcessPoolExecutor

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    ctx = mp.get_context("spawn")
    q = ctx.Queue()  # a plain queue (no manager process that could outlive a killed run)
    started = time.perf_counter()
    left = TimeLeft()
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
        disable=not console.is_terminal,
    ) as bar:
        tasks = {c.method: bar.add_task(f"{c.method}: starting", total=None) for c in configs}
        with ProcessPoolExecutor(
            max_workers=jobs, mp_context=ctx, initializer=_init_worker, initargs=(q, os.getpid(), registered_targets())
        ) as pool:
            with hidden_main():  # the workers start on submit; they must not run the caller's script again
                futures = [pool.submit(_worker, c.model_dump_json(), threads) for c in configs]
            pending = set(futures)
            while pending:
                try:
                    method, done, total, text = q.get(timeout=0.5)
                    if done is not None:
                        seconds = left.estimate(method, done, total, time.perf_counter())
                        if seconds is not None:
                            text = f"{text} ({format_duration(seconds)} left)"
                    if not console.is_terminal:  # logs, CI, nohup: no live bars, so one plain line per milestone
                        console.print(f"[{time.perf_counter() - started:5.0f} s] {method}: {text}", highlight=False)
                    update: dict[str, Any] = {"description": f"{method}: {text}"}
                    if done is not None:
                        update.update(completed=done, total=total)
                    bar.update(tasks[method], **update)
                except queue_mod.Empty:
                    pass
                for f in [f for f in pending if f.done()]:
                    pending.discard(f)
            outcomes = [f.result() for f in futures]
        for c, (status, _payload) in zip(configs, outcomes):
            if status == "ok":
                bar.update(tasks[c.method], description=f"{c.method}: done", completed=1, total=1)
    results, failures = [], {}
    for c, (status, payload) in zip(configs, outcomes):
        if status != "ok":
            failures[c.method] = payload
            continue
        res = RunResult.model_validate_json(payload)
        if not console.is_terminal:
            console.print(f"{c.method}: wrote {res.path(c.out)}", highlight=False)
        results.append(res)
    if failures:
        raise SomeRunsFailed(failures, results)
    return results


class SomeRunsFailed(DrakeBenchError):
    """Some methods of a multi-method run failed; the others finished and their result files are written.

    One error used to stand for the whole run: with 11 of 14 methods failing, the 3 that finished printed no table.
    ``failures`` is method -> the located error, ``results`` the finished methods' results in the order given."""

    def __init__(self, failures: dict[str, str], results: list[RunResult]):
        self.failures, self.results = failures, results
        lines = [f"method {name!r}: {why}" for name, why in failures.items()]
        done = f"; {len(results)} finished ({', '.join(r.method.name for r in results)})" if results else ""
        head = f"{len(failures)} of {len(failures) + len(results)} methods failed{done}"
        super().__init__(lines[0] if len(lines) == 1 and not results else head + ":\n" + "\n".join(lines))


def run_methods(
    configs: Sequence[RunConfig], jobs: int | None = None, threads: int = 1, console: Console | None = None
) -> list[RunResult]:
    """Run each config (one method each; same benchmark) and return their results in the order given.

    Args:
        configs: one :class:`RunConfig` per method; they must share benchmark, data and allocation.
        jobs: worker processes (default: one per core, at most two; never more than ``len(configs)``).
        threads: torch intra-op threads per worker (1 is fastest for the tiny models on 2 cores).
        console: where progress goes (default: stderr). On a terminal, live bars; otherwise one
            timestamped line per milestone, from the first second.
    """
    from drake_bench.benchmarks.manifest import load_benchmark
    from drake_bench.streams.stream import open_built

    if not configs:
        return []
    names = [c.method for c in configs]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:  # two runs of one method would write the same result file
        raise DrakeBenchError(f"methods listed more than once: {', '.join(repeated)}")
    if len({(c.benchmark, c.data_dir, c.revision, c.allocation) for c in configs}) != 1:
        raise DrakeBenchError(
            "run_methods runs configs of one benchmark, data folder, revision and allocation together"
        )
    console = console or Console(stderr=True)
    first = configs[0]
    with RunLock(first.out) if len({c.out for c in configs}) == 1 else nullcontext():
        spec = load_benchmark(first.benchmark)
        if not console.is_terminal:
            console.print(f"[    0 s] preparing {spec.name} for {', '.join(names)}", highlight=False)
        open_built(spec, data_dir=first.data_dir, revision=first.revision)
        if spec.model_allocations:
            prepare_tiny_models(sorted(set(spec.allocation(first.allocation).values())), console)
        if first.backend == "flower":  # Flower schedules the clients: every method in one simulation, in this process
            return _run_on_flower(list(configs), threads, console)
        jobs = max(1, min(jobs or default_jobs(), len(configs)))
        return _run_in_workers(list(configs), jobs=jobs, threads=threads, console=console)


def _run_on_flower(configs: list[RunConfig], threads: int, console: Console) -> list[RunResult]:
    """The configs one after another in one Flower simulation (or each on the deployed federation they name),
    with one plain line per round (Ray and Flower print their own logs beside them). torch runs ``threads``
    intra-op threads here, as in a default-backend worker: the ServerApp and every ClientApp take this count, and
    floating-point reductions (so the numbers) depend on it."""
    import torch

    from drake_bench.core.progress import quiet_libraries
    from drake_bench.evaluator.standard import RunCallbacks, run_on_flower

    if len({c.backend for c in configs}) != 1:
        raise DrakeBenchError("run_methods runs configs of one backend together")
    started = time.perf_counter()

    class Lines(RunCallbacks):
        def on_round(self, seed: int, round_idx: int, total: int) -> None:
            console.print(
                f"[{time.perf_counter() - started:5.0f} s] seed {seed} round {round_idx + 1}/{total}", highlight=False
            )

    quiet_libraries()
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        results = run_on_flower(configs, Lines())
    finally:
        torch.set_num_threads(before)
    for c, res in zip(configs, results):
        console.print(f"{c.method}: wrote {res.path(c.out)}", highlight=False)
    return results
