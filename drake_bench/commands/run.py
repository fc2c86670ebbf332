"""``drake-bench run`` (the main job), ``list``, ``describe``, ``check``, ``upgrade`` and ``report``.

``drake-bench run`` with no arguments runs the embedded default: drake-synth, PFL-Dynamic,
heterogeneous tiny models (the manifest's default allocation), SFT vs FedIT, one seed; it prints
Self/Others A_last/A_AUC, writes one result file per method and an accuracy-over-rounds plot.
The work itself is :func:`drake_bench.runner.run_methods`; this module only parses options.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.text import Text

from drake_bench.commands import fail
from drake_bench.core.console import DataTable, literal, print_table
from drake_bench.errors import DrakeBenchError
from drake_bench.evaluation.external import CODE_EXECUTION_ENV, code_executing_tasks, code_execution_allowed
from drake_bench.evaluator.run_config import RunConfig
from drake_bench.runner import SomeRunsFailed, default_jobs

_err = Console(stderr=True)
_out = Console()


def _help(field: str) -> str:
    """The option's help is the RunConfig field's description, so the CLI and Python say the same."""
    return RunConfig.model_fields[field].description or ""


OPTION_OF_FIELD = {
    "seeds": "--seeds",
    "rounds": "--rounds",
    "local_steps": "--local-steps",
    "eval_every_rounds": "--eval-every",
    "others_subsample": "--others-subsample",
    "call_timeout": "--call-timeout",
    "isolation": "--isolation",
    "participation": "--participation",
    "clients_per_round": "--clients-per-round",
    "backend": "--backend",
    "client_batching": "--client-batching",
    "client_cpus": "--client-cpus",
    "client_gpus": "--client-gpus",
    "flower_workers": "--flower-workers",
    "round_timeout": "--round-timeout",
    "superlink": "--superlink",
    "numerics": "--numerics",
    "judge": "--judge",
    "predict_per_client": "--predict-per-client",
    "scorer_version": "--scorer-version",
}
"""RunConfig field -> the ``run`` option that sets it, so a bad value is reported by the name the user typed."""


def int_list(text: str) -> list[int]:
    """A comma-separated option (``--seeds 0,1,2``) as ints, or the option's error."""
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
    from drake_bench.plugins.registry import method_class

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
        takers = [
            n for n in names if not hasattr(method_class(n), "Config") or field in method_class(n).Config.model_fields
        ]
        if not takers:
            raise typer.BadParameter(
                f"--set {item!r}: no selected method has a config field {field!r} ({', '.join(names)})"
            )
        for n in takers:
            out[n][field] = value
    return out


def register(app: typer.Typer) -> None:
    _register_check(app)
    _register_upgrade(app)
    _register_report(app)

    @app.callback(invoke_without_command=True)
    def _default(ctx: typer.Context) -> None:
        """Benchmarks, streams and the standard evaluator for personalized federated learning."""
        if ctx.invoked_subcommand is None:
            _out.print(ctx.get_help())

    @app.command("run")
    def run_cmd(
        benchmark: Annotated[str, typer.Option(help=_help("benchmark"))] = "drake-synth",
        scenario: Annotated[str | None, typer.Option(help=_help("scenario"))] = None,
        methods: Annotated[
            str,
            typer.Option(
                help="Comma-separated registered method names (`drake-bench list`; `drake-bench describe METHOD` shows a method's config). The default puts SFT and FedIT beside the untrained base (zero-shot), the reference every gain is measured from. Methods start in this order on the workers and the table lists them in it: the trained ones first, so the cheap zero-shot row fills a worker at the end instead of delaying one."
            ),
        ] = "sft,fedit,zero-shot",
        seeds: Annotated[str, typer.Option(help="Comma-separated seeds. " + _help("seeds"))] = "0",
        allocation: Annotated[str | None, typer.Option(help=_help("allocation"))] = None,
        out: Annotated[Path, typer.Option(help=_help("out"))] = Path("runs"),
        rounds: Annotated[int | None, typer.Option(help=_help("rounds"))] = None,
        local_steps: Annotated[int | None, typer.Option(help=_help("local_steps"))] = None,
        eval_every: Annotated[int | None, typer.Option(help=_help("eval_every_rounds"))] = None,
        others_subsample: Annotated[int | None, typer.Option(help=_help("others_subsample"))] = None,
        compute_matched: Annotated[bool, typer.Option(help=_help("compute_matched"))] = False,
        measure_compute: Annotated[bool, typer.Option(help=_help("measure_compute"))] = False,
        fast_adaptation: Annotated[bool, typer.Option(help=_help("fast_adaptation"))] = True,
        adaptation_tasks: Annotated[
            int | None, typer.Option(help="Use only the first N unseen tasks for fast adaptation.")
        ] = 2,
        resume: Annotated[bool, typer.Option(help=_help("resume"))] = True,
        threads: Annotated[
            int, typer.Option(help="torch intra-op threads per worker (1 is fastest for tiny models).")
        ] = 1,
        jobs: Annotated[
            int, typer.Option(help="Methods run in parallel worker processes (default: one per CPU core).")
        ] = default_jobs(),
        device: Annotated[str, typer.Option(help=_help("device"))] = "cpu",
        call_timeout: Annotated[float | None, typer.Option(help=_help("call_timeout"))] = None,
        isolation: Annotated[str, typer.Option(help=_help("isolation"))] = "process",
        participation: Annotated[float | None, typer.Option(help=_help("participation"))] = None,
        clients_per_round: Annotated[int | None, typer.Option(help=_help("clients_per_round"))] = None,
        client_batching: Annotated[bool, typer.Option(help=_help("client_batching"))] = False,
        predict_per_client: Annotated[bool, typer.Option(help=_help("predict_per_client"))] = False,
        numerics: Annotated[str, typer.Option(help=_help("numerics"))] = "portable",
        backend: Annotated[str, typer.Option(help=_help("backend"))] = "default",
        client_cpus: Annotated[float, typer.Option(help=_help("client_cpus"))] = 1.0,
        client_gpus: Annotated[float, typer.Option(help=_help("client_gpus"))] = 0.0,
        flower_workers: Annotated[int | None, typer.Option(help=_help("flower_workers"))] = None,
        round_timeout: Annotated[float | None, typer.Option(help=_help("round_timeout"))] = None,
        superlink: Annotated[str | None, typer.Option(help=_help("superlink"))] = None,
        judge: Annotated[str | None, typer.Option(help=_help("judge"))] = None,
        scorer_version: Annotated[str, typer.Option(help=_help("scorer_version"))] = RunConfig.model_fields[
            "scorer_version"
        ].default,
        allow_code_execution: Annotated[
            bool,
            typer.Option(
                help="Let the evaluator run model-written code where a benchmark is scored that way (Fed-Scope's HumanEval: each completion runs its unit tests in a child process with a time limit; not a security sandbox). Sets DRAKE_BENCH_ALLOW_CODE_EXECUTION=1 for the run's processes. Scores do not depend on it: without it such a run is refused before it starts."
            ),
        ] = False,
        data_dir: Annotated[Path | None, typer.Option(help=_help("data_dir"))] = None,
        revision: Annotated[str | None, typer.Option(help=_help("revision"))] = None,
        set_: Annotated[
            list[str] | None,
            typer.Option(
                "--set",
                help="Method config: KEY=VALUE for every method that has KEY, METHOD.KEY=VALUE for one "
                "(repeatable; VALUE read as JSON when it parses), e.g. --set learning_rate=1e-3.",
            ),
        ] = None,
        tuning_record: Annotated[
            Path | None,
            typer.Option(
                help="A tuning record (`drake-bench tune`'s tuning.json) of one of --methods: its selected values join "
                "that method's config, and the result records their selection on the validation split."
            ),
        ] = None,
    ) -> None:
        """Run methods through the standard evaluator and print Self/Others A_last/A_AUC."""
        from drake_bench.benchmarks.manifest import load_benchmark
        from drake_bench.evaluation.plots import plot_accuracy_over_rounds
        from drake_bench.evaluation.table import judge_note, summary_markdown, summary_table
        from drake_bench.plugins.registry import create_method
        from drake_bench.runner import run_methods

        try:
            spec = load_benchmark(benchmark)
        except DrakeBenchError as exc:
            raise fail(exc) from None
        names = [m.strip() for m in methods.split(",") if m.strip()]
        seed_list = int_list(seeds)
        unseen = spec.unseen_tasks[:adaptation_tasks] if adaptation_tasks else None
        try:
            from drake_bench.streams.scenarios import parse_scenario

            # validate here, before anything is built or any worker starts, so a typo costs nothing and
            # the error names the option at fault (not the first method that happened to hit it)
            parse_scenario(scenario if scenario is not None else spec.scenarios.default)
            if spec.model_allocations:
                spec.allocation(allocation)
            repeated = sorted({n for n in names if names.count(n) > 1})
            if repeated:  # two runs of one method would write the same result file
                raise typer.BadParameter(f"--methods lists {', '.join(repeated)} more than once")
            if judge is not None:
                from drake_bench.evaluation.judge import require_judged_tasks

                try:
                    require_judged_tasks(spec, judge)
                except DrakeBenchError as exc:
                    raise typer.BadParameter(f"--judge: {exc}") from None
            if allow_code_execution:
                os.environ[CODE_EXECUTION_ENV] = "1"
            executes = code_executing_tasks(spec)
            if executes and not code_execution_allowed():
                raise typer.BadParameter(
                    f"{spec.name}'s tasks {', '.join(executes)} are scored by running model-written "
                    "code (HumanEval's unit tests): pass --allow-code-execution to allow it (a child "
                    "process with a time limit, not a security sandbox)"
                )
            per_method = method_settings(set_ or [], names)
            for name in names:
                create_method(name, per_method[name])
            configs = [
                RunConfig(
                    benchmark=benchmark,
                    scenario=scenario,
                    method=name,
                    seeds=seed_list,
                    allocation=allocation,
                    out=str(out),
                    rounds=rounds,
                    local_steps=local_steps,
                    eval_every_rounds=eval_every,
                    others_subsample=others_subsample,
                    compute_matched=compute_matched,
                    measure_compute=measure_compute,
                    fast_adaptation=fast_adaptation,
                    fast_adaptation_tasks=unseen,
                    resume=resume,
                    device=device,
                    data_dir=str(data_dir) if data_dir else None,
                    revision=revision,
                    method_config=per_method[name],
                    call_timeout=call_timeout,
                    isolation=isolation,
                    participation=participation,
                    clients_per_round=clients_per_round,
                    client_batching=client_batching,
                    numerics=numerics,
                    predict_per_client=predict_per_client,
                    backend=backend,
                    client_cpus=client_cpus,
                    client_gpus=client_gpus,
                    flower_workers=flower_workers,
                    round_timeout=round_timeout,
                    superlink=superlink,
                    judge=judge,
                    scorer_version=scorer_version,
                )
                for name in names
            ]
            if tuning_record is not None:
                from drake_bench.tuning import apply_record, read_record

                tuned = read_record(tuning_record)[0].method
                if tuned not in names:
                    raise typer.BadParameter(
                        f"--tuning-record: {tuning_record} tuned {tuned!r}, which is not among --methods {names}"
                    )
                configs = [apply_record(c, tuning_record) if c.method == tuned else c for c in configs]
        except DrakeBenchError as exc:
            raise fail(exc) from None
        except ValidationError as exc:
            err = exc.errors()[0]
            if not err["loc"]:  # a rule across options (e.g. --participation with --clients-per-round)
                raise typer.BadParameter(str(err["msg"]).removeprefix("Value error, ")) from None
            option = OPTION_OF_FIELD.get(str(err["loc"][0]), str(err["loc"][0]))
            raise typer.BadParameter(f"{option}: {err['msg']}") from None
        started = time.perf_counter()
        failed: DrakeBenchError | None = None
        try:
            results = run_methods(configs, jobs=jobs, threads=threads, console=_err)
        except SomeRunsFailed as exc:  # the table of those that finished, then every failure
            results, failed = exc.results, exc
        except DrakeBenchError as exc:
            raise fail(exc) from None
        if not results:
            raise fail(failed) from None
        print_table(
            _out, summary_table(results, title=f"{spec.name} / {results[0].scenario.tag} ({len(seed_list)} seed(s))")
        )
        if judge_note(results):  # judged free text is on another scale than Rouge-L: say so under the table too
            _out.print(judge_note(results).strip(), highlight=False, soft_wrap=True)
        scen_dir = Path(out) / spec.name / results[0].scenario.tag
        scen_dir.mkdir(parents=True, exist_ok=True)
        plot = scen_dir / "accuracy_over_rounds.png"
        plot_accuracy_over_rounds(results, plot)
        (scen_dir / "summary.md").write_text(summary_markdown(results) + "\n")
        _out.print(f"results: {', '.join(str(r.path(out)) for r in results)}")
        _out.print(f"plot: {plot}   summary: {scen_dir / 'summary.md'}   ({time.perf_counter() - started:.0f} s)")
        if failed is not None:
            raise fail(failed)

    @app.command("list")
    def list_cmd() -> None:
        """List the benchmarks and the registered methods."""
        from drake_bench.benchmarks.manifest import archived_benchmarks, available_benchmarks, load_benchmark
        from drake_bench.plugins.registry import available_methods, method_class

        t = DataTable(title="benchmarks (archived versions load by pinned name, e.g. drake-synth@1.3.0)")
        for col in ("name", "version", "clients", "tasks", "unseen", "modality", "kind", "rounds x steps"):
            t.add_column(col, no_wrap=True)
        for name in available_benchmarks() + archived_benchmarks():
            s = load_benchmark(name)
            kind = f"embedded mirror of {s.mirrors}" if s.embedded else "real"
            t.add_row(
                name,
                s.version + (" (archived)" if "@" in name else ""),
                str(len(s.clients)),
                str(len(s.tasks) - len(s.unseen_tasks)),
                str(len(s.unseen_tasks)),
                s.modality,
                kind,
                f"{s.fl.rounds} x {s.fl.local_steps}",
            )
        print_table(_out, t)
        m = DataTable(
            title="methods (entry point group drake_bench.methods; `drake-bench describe NAME` for its config)"
        )
        for col in ("name", "version", "summary"):
            m.add_column(col, no_wrap=col != "summary")
        for name in available_methods():
            try:
                cls = method_class(name)
                m.add_row(name, cls.meta.version, cls.meta.summary)
            except DrakeBenchError as exc:
                m.add_row(name, "?", literal(exc, style="red"))
        print_table(_out, m)

    @app.command("describe")
    def describe_cmd(
        name: Annotated[
            str, typer.Argument(help="A method name (see `drake-bench list`), or `run` for the run settings.")
        ],
    ) -> None:
        """Every config field of a method (or of a run) with its type, default and what it does."""
        from drake_bench.plugins.protocol import OPTIONAL_CALLS
        from drake_bench.plugins.registry import method_class

        if name == "run":
            _out.print("[bold]run settings[/] (RunConfig; `drake-bench run --help` names the options)")
            print_table(_out, config_table(RunConfig, "RunConfig"))
            return
        try:
            cls = method_class(name)
        except DrakeBenchError as exc:
            raise fail(exc) from None
        meta = cls.meta
        _out.print(
            Text.assemble(literal(meta.name, style="bold"), " ", literal(f"{meta.version}: {meta.summary}")),
            highlight=False,
        )
        if meta.reference:
            _out.print(literal(f"reference: {meta.reference}"), highlight=False)
        optional = sorted(
            {proto.__name__ for call, proto in OPTIONAL_CALLS.items() if callable(getattr(cls, call, None))}
        )
        _out.print(
            literal(
                f"class: {cls.__module__}.{cls.__qualname__}; declared relative compute "
                f"{meta.relative_compute:g} (measured by --measure-compute); "
                f"optional protocols: {', '.join(optional) or 'none'}"
            ),
            highlight=False,
        )
        print_table(_out, config_table(cls.Config, f"{meta.name} config (set with --set {meta.name}.KEY=VALUE)"))


def config_table(config_cls: type, title: str) -> DataTable:
    """One row per pydantic field: name, type, default and its description."""
    table = DataTable(title=title)
    for col in ("field", "type", "default", "description"):
        table.add_column(col, no_wrap=col != "description", overflow="fold")
    for key, info in config_cls.model_fields.items():
        default = "(required)" if info.is_required() else repr(info.get_default(call_default_factory=True))
        ann = info.annotation
        kind = ann.__name__ if isinstance(ann, type) else str(ann).replace("typing.", "")
        table.add_row(key, kind, default, info.description or "")
    return table


def _register_check(app: typer.Typer) -> None:
    @app.command("check")
    def check_cmd(paths: Annotated[list[Path], typer.Argument(help="Result files to validate and recompute.")]) -> None:
        """Validate result files: schema, provenance (data and manifest hashes, method version and config, ...),
        raw tables complete for the benchmark, scenario, seeds and rounds they claim, and a summary that
        recomputes from them (see drake_bench.results.result_file.check_result)."""
        from rich.markup import escape

        from drake_bench.results.result_file import check_result, read_result, unpinned_weights, weights_conflicts

        bad = 0
        readable = []
        for p in paths:
            try:
                res = read_result(p)
                problems = check_result(res)
                readable.append((p, res))
            except DrakeBenchError as exc:
                if "\n" not in str(exc):  # a file that does not read (not there, not JSON, hostile JSON): one line
                    bad += 1
                    _err.print(literal(exc, "red"), highlight=False, soft_wrap=True)
                    continue
                problems = [str(exc)]
            if problems:
                bad += 1
                shown = "".join(f"\n  - {escape(x)}" for x in problems[:10])
                more = f"\n  ... and {len(problems) - 10} more" if len(problems) > 10 else ""
                _err.print(
                    f"[red]{escape(str(p))}[/]: {len(problems)} problem(s){shown}{more}",
                    highlight=False,
                    soft_wrap=True,
                )
            else:
                _out.print(f"{p}: ok")
        for note in unpinned_notes(unpinned_weights(readable)):
            _err.print(f"note: {escape(note)}", highlight=False, soft_wrap=True)
        for conflict in weights_conflicts(readable):  # each file is valid; they just cannot share a board
            _err.print(f"[yellow]not one board:[/] {escape(conflict)}", highlight=False, soft_wrap=True)
        if bad:
            raise typer.Exit(code=1)


def _register_upgrade(app: typer.Typer) -> None:
    @app.command("upgrade")
    def upgrade_cmd(
        paths: Annotated[list[Path], typer.Argument(help="Result files, or folders searched for result.json files.")],
    ) -> None:
        """Rewrite result files of an older schema version (1.0: one JSON object per raw record) in the current
        one (2.0: raw tables column-wise, about a third of the size). Lossless: each new file must read back to the
        same result before it replaces the old one; files already current are left alone."""
        from rich.markup import escape

        from drake_bench.results.result_file import RESULT_FILE, upgrade_result_file

        files: list[Path] = []
        for p in paths:
            files += sorted(p.rglob(RESULT_FILE)) if p.is_dir() else [p]
        files = list(dict.fromkeys(files))
        if not files:
            _err.print(f"no {RESULT_FILE} under {', '.join(map(str, paths))}")
            raise typer.Exit(code=1)
        bad = changed = 0
        for f in files:
            try:
                if upgrade_result_file(f):
                    changed += 1
                    _out.print(f"{f}: upgraded", highlight=False, soft_wrap=True)
            except DrakeBenchError as exc:
                bad += 1
                _err.print(f"[red]{escape(str(f))}[/]: {escape(str(exc))}", highlight=False, soft_wrap=True)
        _out.print(f"{changed} upgraded, {len(files) - changed - bad} already current, {bad} unreadable")
        if bad:
            raise typer.Exit(code=1)


def unpinned_notes(unpinned: dict[str, list[str]]) -> list[str]:
    """One line per tiny model whose weights some result files identify by pretraining recipe only."""
    return [
        f"{model}: weights identified by pretraining recipe only, no sha256, in {', '.join(files)} (made before "
        "the zoo shipped pinned weights, or pretrained locally: the weights were those of the machine that ran it)"
        for model, files in sorted(unpinned.items())
    ]


def _register_report(app: typer.Typer) -> None:
    @app.command("report")
    def report_cmd(
        paths: Annotated[
            list[Path], typer.Argument(help="Result files of one benchmark and scenario (any methods, any runs).")
        ],
        out: Annotated[
            Path | None,
            typer.Option(
                help="Folder for summary.md and accuracy_over_rounds.png, plus "
                "diagnostics_over_rounds.png when a method reported "
                "diagnostics (default: print only)."
            ),
        ] = None,
    ) -> None:
        """One board from result files written by separate runs: checked, then tabled and plotted together.

        Refuses files whose benchmark (manifest or data hash), scenario, free-text scorer (an LLM judge or
        Rouge-L) or scoring rules' version (evaluation.scorer_version: open answers by F1 or by recall)
        differ, or that ran one model name on different weights (different weights_sha256, or a
        sha256 in one file and only a pretraining recipe in the other): their numbers are not comparable, and a
        board must not mix them silently. Results whose tiny models are identified by recipe only (made before the zoo
        shipped pinned weights) are said to be so. Refuses duplicates too: one file given twice (same
        path, or same content under two paths), two files of one method name, version and given settings
        (``--set``; a row is labelled with them, e.g. ``fedrpca 1.0 (beta=1)``), or two
        files with the same raw tables (one run copied under another method name).
        """
        import hashlib

        from drake_bench.evaluation.plots import (
            numeric_diagnostic_values,
            plot_accuracy_over_rounds,
            plot_diagnostics_over_rounds,
        )
        from drake_bench.evaluation.table import judge_note, summary_markdown, summary_table
        from drake_bench.results.result_file import (
            benchmark_differences,
            check_result,
            read_result,
            unpinned_weights,
            weights_conflicts,
        )

        results = []
        seen: dict[str, tuple[str, Path]] = {}  # identity key -> (what it is, first file with it)

        def once(key: str, what: str, p: Path) -> None:
            if key in seen:
                kind, first = seen[key]
                raise fail(DrakeBenchError(f"{p}: {kind} as {first}; a board takes each run once (drop one of them)"))
            seen[key] = (what, p)

        for p in paths:
            try:
                res = read_result(p)
                problems = check_result(res)
            except DrakeBenchError as exc:
                raise fail(exc) from None
            if problems:
                raise fail(DrakeBenchError(f"{p}: " + "; ".join(problems[:5])))
            if results:  # not comparable is the first thing to say about two files, duplicates the next
                first_path, first = results[0]
                differs = benchmark_differences(first.benchmark, res.benchmark)
                if first.scenario.tag != res.scenario.tag:
                    differs.append(f"scenario {res.scenario.tag!r} (not {first.scenario.tag!r})")
                if first.evaluation.judge != res.evaluation.judge:  # ratings and Rouge-L are different scales
                    differs.append(
                        f"free text scored by {res.evaluation.judge or 'Rouge-L'!r} (not "
                        f"{first.evaluation.judge or 'Rouge-L'!r})"
                    )
                if first.evaluation.scorer_version != res.evaluation.scorer_version:  # F1 and recall: other scales
                    differs.append(
                        f"scored by rules {res.evaluation.scorer_version} (not "
                        f"{first.evaluation.scorer_version}; drake_bench/evaluation/scoring.py)"
                    )
                if differs:
                    raise fail(
                        DrakeBenchError(f"{p} is not comparable with {first_path} on one board: " + "; ".join(differs))
                    )
            once(f"path:{p.resolve()}", "the same file", p)
            once(f"content:{hashlib.sha256(p.read_bytes()).hexdigest()}", "the same content", p)
            once(f"method:{res.label}", f"the same method, version and settings ({res.label})", p)
            raw = hashlib.sha256(res.raw.model_dump_json().encode()).hexdigest()
            once(f"raw:{raw}", "the same raw score and cost tables (one run under two method names?)", p)
            results.append((p, res))
        conflicts = weights_conflicts(results)
        if conflicts:
            raise fail(DrakeBenchError("; ".join(conflicts)))
        notes = unpinned_notes(unpinned_weights(results))
        for note in notes:
            _err.print(f"note: {note}", highlight=False, soft_wrap=True)
        first = results[0][1]
        runs = [r for _, r in results]
        print_table(_out, summary_table(runs, title=f"{first.benchmark.name} / {first.scenario.tag}"))
        if judge_note(runs):
            _out.print(judge_note(runs).strip(), highlight=False, soft_wrap=True)
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            plot_accuracy_over_rounds(runs, out / "accuracy_over_rounds.png")
            with_diagnostics = [r for r in runs if r.raw.diagnostics]  # e.g. FedRPCA's beta and energy ratio
            values = numeric_diagnostic_values(with_diagnostics)
            if values:
                plot_diagnostics_over_rounds(with_diagnostics, out / "diagnostics_over_rounds.png", values)
            board_notes = "".join(f"\n* {n}" for n in notes)
            (out / "summary.md").write_text(summary_markdown(runs) + ("\n" + board_notes if notes else "") + "\n")
            _out.print(f"plot: {out / 'accuracy_over_rounds.png'}   summary: {out / 'summary.md'}")
