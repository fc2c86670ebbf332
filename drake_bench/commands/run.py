"""``drake-bench run`` (the main job) and ``drake-bench list``.

``drake-bench run`` with no arguments runs the embedded default: drake-synth, PFL-Dynamic,
heterogeneous tiny models (the manifest's default allocation), SFT vs FedIT, one seed; it prints
Self/Others A_last/A_AUC, writes one result file per method and an accuracy-over-rounds plot.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..errors import DrakeBenchError

_err = Console(stderr=True)
_out = Console()


OPTION_OF_FIELD = {"seeds": "--seeds", "rounds": "--rounds", "local_steps": "--local-steps",
                   "eval_every_rounds": "--eval-every", "others_subsample": "--others-subsample"}
"""RunConfig field -> the ``run`` option that sets it, so a bad value is reported by the name the user typed."""


def _fail(exc: Exception) -> typer.Exit:
    _err.print(f"[bold red]error:[/] {exc}", markup=True, highlight=False, soft_wrap=True)
    return typer.Exit(code=1)


def _ints(text: str) -> list[int]:
    try:
        return [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise typer.BadParameter(f"expected comma-separated integers, got {text!r}") from None


def method_settings(settings: list[str], names: list[str]) -> dict[str, dict[str, Any]]:
    """``--set`` values as one config dict per method.

    ``KEY=VALUE`` goes to every selected method whose config declares KEY (an error when none does:
    a typo must not be ignored); ``METHOD.KEY=VALUE`` to that method only, validated by its config.
    VALUE is read as JSON when it parses (``1e-3``, ``true``, ``[1, 2]``), else as a string.
    """
    from ..registry import method_class

    out: dict[str, dict[str, Any]] = {n: {} for n in names}
    for item in settings:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"--set expects KEY=VALUE or METHOD.KEY=VALUE, got {item!r}")
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        target, dot, field = key.strip().rpartition(".")
        if dot:
            if target not in out:
                raise typer.BadParameter(f"--set {item!r}: method {target!r} is not among --methods {names}")
            out[target][field] = value
            continue
        takers = [n for n in names
                  if not hasattr(method_class(n), "Config") or field in method_class(n).Config.model_fields]
        if not takers:
            raise typer.BadParameter(f"--set {item!r}: no selected method has a config field {field!r} ({', '.join(names)})")
        for n in takers:
            out[n][field] = value
    return out


def _default_jobs() -> int:
    import os

    return max(1, min(2, os.cpu_count() or 1))


def _worker(config_json: str, threads: int, queue) -> tuple[str, str]:
    """Run one method in a worker process; errors come back as text (custom exceptions do not pickle)."""
    import torch

    from ..evaluator import RunCallbacks, RunConfig, run
    from ..progress import quiet_libraries

    quiet_libraries()
    torch.set_num_threads(threads)
    cfg = RunConfig.model_validate_json(config_json)
    seeds = cfg.seeds

    class Callbacks(RunCallbacks):
        def on_round(self, seed: int, round_idx: int, total: int) -> None:
            queue.put((cfg.method, seeds.index(seed) * total + round_idx, total * len(seeds), f"seed {seed} round {round_idx + 1}/{total}"))

        def on_eval(self, seed: int, round_idx: int) -> None:
            queue.put((cfg.method, None, None, f"seed {seed} evaluating after round {round_idx + 1}"))

        def on_adaptation(self, seed: int, task: str, arch: str) -> None:
            queue.put((cfg.method, None, None, f"seed {seed} fast adaptation {task} ({arch})"))

    try:
        return "ok", run(cfg, Callbacks()).model_dump_json()
    except DrakeBenchError as exc:
        return "error", f"{type(exc).__name__}: {exc}"


def pretrain_tiny_models(names: list[str], console: Console) -> None:
    """Pretrain (once, then cached) the allocation's tiny zoo models before any worker starts.

    Workers would otherwise wait on each other's file locks behind progress bars stuck at zero
    for the minutes a first pretraining takes; here the user sees what is being built.
    """
    from ..models.pretrain import DEFAULT_RECIPE, checkpoint_dir, ensure_pretrained, is_pretrained
    from ..errors import UnknownNameError
    from ..models.zoo import model_info

    todo = []
    for name in names:
        try:
            if model_info(name).tiny and not is_pretrained(name):
                todo.append(name)
        except UnknownNameError:  # a method bringing its own models: nothing to pretrain here
            continue
    for name in todo:
        with console.status(f"pretraining {name} once (recipe {DEFAULT_RECIPE.version}; cached in "
                            f"{checkpoint_dir(name).parent}; the first multimodal model also trains the "
                            f"shared vision tower, about 4 minutes)"):
            started = time.perf_counter()
            ensure_pretrained(name)
        console.print(f"pretrained {name} ({time.perf_counter() - started:.0f} s)")


def run_many(configs: list, jobs: int, threads: int, console: Console) -> list:
    """Run each config (one method each) in ``jobs`` worker processes with live progress bars
    (plain timestamped lines per round, evaluation and adaptation task when the console is not a terminal).

    Methods are independent runs, so running them side by side is exact: each worker gets its
    own process and ``threads`` torch threads (1 thread per worker is fastest for tiny models on
    a 2-core machine: measured in docs/models.md). Results come back in the order given.
    """
    import multiprocessing as mp
    import queue as queue_mod
    from concurrent.futures import ProcessPoolExecutor

    from ..results import RunResult

    ctx = mp.get_context("spawn")
    manager = ctx.Manager()
    q = manager.Queue()
    started = time.perf_counter()
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=False, disable=not console.is_terminal) as bar:
        tasks = {c.method: bar.add_task(f"{c.method}: starting", total=None) for c in configs}
        with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
            futures = [pool.submit(_worker, c.model_dump_json(), threads, q) for c in configs]
            pending = set(futures)
            while pending:
                try:
                    method, done, total, text = q.get(timeout=0.5)
                    if not console.is_terminal:  # logs, CI, nohup: no live bars, so one plain line per milestone
                        console.print(f"[{time.perf_counter() - started:5.0f} s] {method}: {text}", highlight=False)
                    update = {"description": f"{method}: {text}"}
                    if done is not None:
                        update.update(completed=done, total=total)
                    bar.update(tasks[method], **update)
                except queue_mod.Empty:
                    pass
                for f in [f for f in pending if f.done()]:
                    pending.discard(f)
            outcomes = [f.result() for f in futures]
        for c, (status, payload) in zip(configs, outcomes):
            if status == "ok":
                bar.update(tasks[c.method], description=f"{c.method}: done", completed=1, total=1)
    results = []
    for c, (status, payload) in zip(configs, outcomes):
        if status != "ok":
            raise DrakeBenchError(f"method {c.method!r}: {payload}")
        res = RunResult.model_validate_json(payload)
        if not console.is_terminal:
            console.print(f"{c.method}: wrote {res.path(c.out)}")
        results.append(res)
    return results


def register(app: typer.Typer) -> None:
    _register_check(app)
    _register_report(app)

    @app.callback(invoke_without_command=True)
    def _default(ctx: typer.Context) -> None:
        """Benchmarks, streams and the standard evaluator for personalized federated learning."""
        if ctx.invoked_subcommand is None:
            _out.print(ctx.get_help())

    @app.command("run")
    def run_cmd(
        benchmark: Annotated[str, typer.Option(help="Benchmark name or manifest path.")] = "drake-synth",
        scenario: Annotated[str | None, typer.Option(help="static | dynamic | async | async:3-7-3-7 | dirichlet:0.5 (default: manifest's).")] = None,
        methods: Annotated[str, typer.Option(help="Comma-separated registered method names.")] = "sft,fedit",
        seeds: Annotated[str, typer.Option(help="Comma-separated seeds, each run separately.")] = "0",
        allocation: Annotated[str | None, typer.Option(help="Model allocation from the manifest (default: its default).")] = None,
        out: Annotated[Path, typer.Option(help="Output folder for checkpoints, result files and plots.")] = Path("runs"),
        rounds: Annotated[int | None, typer.Option(help="Override the manifest's rounds.")] = None,
        local_steps: Annotated[int | None, typer.Option(help="Override the manifest's local steps per round.")] = None,
        eval_every: Annotated[int | None, typer.Option(help="Evaluate every N rounds (default: manifest's).")] = None,
        others_subsample: Annotated[int | None, typer.Option(help="Others items per task (default: manifest's).")] = None,
        compute_matched: Annotated[bool, typer.Option(help="Scale local steps by 1/relative compute (spec A10).")] = False,
        fast_adaptation: Annotated[bool, typer.Option(help="Evaluate fast adaptation on unseen tasks.")] = True,
        adaptation_tasks: Annotated[int | None, typer.Option(help="Use only the first N unseen tasks for fast adaptation.")] = 2,
        resume: Annotated[bool, typer.Option(help="Resume from checkpoints in --out.")] = True,
        threads: Annotated[int, typer.Option(help="torch intra-op threads per worker (1 is fastest for tiny models).")] = 1,
        jobs: Annotated[int, typer.Option(help="Methods run in parallel worker processes (default: one per CPU core).")] = _default_jobs(),
        device: Annotated[str, typer.Option(help="cpu, cuda, ...")] = "cpu",
        data_dir: Annotated[Path | None, typer.Option(help="Built benchmark folder (default: local build / embedded).")] = None,
        revision: Annotated[str | None, typer.Option(help="Hub revision to fetch the benchmark from.")] = None,
        set_: Annotated[list[str] | None, typer.Option(
            "--set", help="Method config: KEY=VALUE for every method that has KEY, METHOD.KEY=VALUE for one "
                          "(repeatable; VALUE read as JSON when it parses), e.g. --set learning_rate=1e-3.")] = None,
    ) -> None:
        """Run methods through the standard evaluator and print Self/Others A_last/A_AUC."""
        from ..evaluation.plots import plot_accuracy_over_rounds
        from ..evaluation.table import summary_markdown, summary_table
        from ..evaluator import RunConfig
        from ..manifest import load_benchmark
        from ..registry import create_method

        try:
            spec = load_benchmark(benchmark)
        except DrakeBenchError as exc:
            raise _fail(exc) from None
        names = [m.strip() for m in methods.split(",") if m.strip()]
        seed_list = _ints(seeds)
        unseen = spec.unseen_tasks[:adaptation_tasks] if adaptation_tasks else None
        try:
            from ..scenarios import parse_scenario

            # validate here, before anything is built or any worker starts, so a typo costs nothing and
            # the error names the option at fault (not the first method that happened to hit it)
            parse_scenario(scenario if scenario is not None else spec.scenarios.default)
            if spec.model_allocations:
                spec.allocation(allocation)
            repeated = sorted({n for n in names if names.count(n) > 1})
            if repeated:  # two runs of one method would write the same result file
                raise typer.BadParameter(f"--methods lists {', '.join(repeated)} more than once")
            per_method = method_settings(set_ or [], names)
            for name in names:
                create_method(name, per_method[name])
            configs = [
                RunConfig(
                    benchmark=benchmark, scenario=scenario, method=name, seeds=seed_list, allocation=allocation,
                    out=str(out), rounds=rounds, local_steps=local_steps, eval_every_rounds=eval_every,
                    others_subsample=others_subsample, compute_matched=compute_matched,
                    fast_adaptation=fast_adaptation, fast_adaptation_tasks=unseen, resume=resume, device=device,
                    data_dir=str(data_dir) if data_dir else None, revision=revision, method_config=per_method[name],
                )
                for name in names
            ]
        except DrakeBenchError as exc:
            raise _fail(exc) from None
        except ValidationError as exc:
            err = exc.errors()[0]
            option = OPTION_OF_FIELD.get(str(err["loc"][0]), str(err["loc"][0]))
            raise typer.BadParameter(f"{option}: {err['msg']}") from None
        started = time.perf_counter()
        try:
            # build / fetch the data once, before any worker starts, so workers never race on it
            from ..stream import open_built

            open_built(spec, data_dir=data_dir, revision=revision)
            if spec.model_allocations:
                pretrain_tiny_models(sorted(set(spec.allocation(allocation).values())), _err)
            results = run_many(configs, jobs=max(1, min(jobs, len(configs))), threads=threads, console=_err)
        except DrakeBenchError as exc:
            raise _fail(exc) from None
        _out.print(summary_table(results, title=f"{spec.name} / {results[0].scenario.tag} ({len(seed_list)} seed(s))"))
        scen_dir = Path(out) / spec.name / results[0].scenario.tag
        scen_dir.mkdir(parents=True, exist_ok=True)
        plot = scen_dir / "accuracy_over_rounds.png"
        plot_accuracy_over_rounds(results, plot)
        (scen_dir / "summary.md").write_text(summary_markdown(results) + "\n")
        _out.print(f"results: {', '.join(str(r.path(out)) for r in results)}")
        _out.print(f"plot: {plot}   summary: {scen_dir / 'summary.md'}   ({time.perf_counter() - started:.0f} s)")

    @app.command("list")
    def list_cmd() -> None:
        """List the benchmarks and the registered methods."""
        from ..manifest import archived_benchmarks, available_benchmarks, load_benchmark
        from ..registry import available_methods, method_class

        t = Table(title="benchmarks (archived versions load by pinned name, e.g. drake-synth@1.3.0)")
        for col in ("name", "version", "clients", "tasks", "unseen", "modality", "kind", "rounds x steps"):
            t.add_column(col)
        for name in available_benchmarks() + archived_benchmarks():
            s = load_benchmark(name)
            kind = f"embedded mirror of {s.mirrors}" if s.embedded else "real"
            t.add_row(name, s.version + (" (archived)" if "@" in name else ""), str(len(s.clients)),
                      str(len(s.tasks) - len(s.unseen_tasks)), str(len(s.unseen_tasks)), s.modality, kind,
                      f"{s.fl.rounds} x {s.fl.local_steps}")
        _out.print(t)
        m = Table(title="methods (entry point group drake_bench.methods)")
        for col in ("name", "version", "class"):
            m.add_column(col)
        for name in available_methods():
            try:
                cls = method_class(name)
                m.add_row(name, str(getattr(cls, "version", "?")), f"{cls.__module__}.{cls.__qualname__}")
            except DrakeBenchError as exc:
                m.add_row(name, "?", f"[red]{exc}[/]")
        _out.print(m)


def _register_check(app: typer.Typer) -> None:
    @app.command("check")
    def check_cmd(paths: Annotated[list[Path], typer.Argument(help="Result files to validate and recompute.")]) -> None:
        """Validate result files against the schema and recompute their summaries from the raw tables."""
        from ..results import check_result, read_result

        bad = 0
        for p in paths:
            try:
                problems = check_result(read_result(p))
            except DrakeBenchError as exc:
                problems = [str(exc)]
            if problems:
                bad += 1
                _err.print(f"[red]{p}[/]: " + "; ".join(problems[:5]))
            else:
                _out.print(f"{p}: ok")
        if bad:
            raise typer.Exit(code=1)


def _register_report(app: typer.Typer) -> None:
    @app.command("report")
    def report_cmd(
        paths: Annotated[list[Path], typer.Argument(help="Result files of one benchmark and scenario (any methods, any runs).")],
        out: Annotated[Path | None, typer.Option(help="Folder for summary.md and accuracy_over_rounds.png (default: print only).")] = None,
    ) -> None:
        """One board from result files written by separate runs: checked, then tabled and plotted together.

        Refuses files whose benchmark (manifest or data hash) or scenario differ: their numbers are
        not comparable, and a board must not mix them silently.
        """
        from ..evaluation.plots import plot_accuracy_over_rounds
        from ..evaluation.table import summary_markdown, summary_table
        from ..results import check_result, read_result

        results = []
        for p in paths:
            try:
                res = read_result(p)
                problems = check_result(res)
            except DrakeBenchError as exc:
                raise _fail(exc) from None
            if problems:
                raise _fail(DrakeBenchError(f"{p}: " + "; ".join(problems[:5])))
            results.append((p, res))
        first_path, first = results[0]
        for p, res in results[1:]:
            for what, a, b in (("benchmark", first.benchmark.model_dump(), res.benchmark.model_dump()),
                               ("scenario", first.scenario.tag, res.scenario.tag)):
                if a != b:
                    raise _fail(DrakeBenchError(f"{p}: {what} {b} differs from {first_path}'s {a}; not comparable on one board"))
        runs = [r for _, r in results]
        _out.print(summary_table(runs, title=f"{first.benchmark.name} / {first.scenario.tag}"))
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            plot_accuracy_over_rounds(runs, out / "accuracy_over_rounds.png")
            (out / "summary.md").write_text(summary_markdown(runs) + "\n")
            _out.print(f"plot: {out / 'accuracy_over_rounds.png'}   summary: {out / 'summary.md'}")
