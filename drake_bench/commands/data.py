"""``drake-bench sources check / build / publish / download``: the data life cycle of a benchmark.

``sources check`` reports, before any build, which source files every task finds, misses or
finds in the wrong place, with record counts and what to download from where;
``build`` turns sources into the Hub-ready layout (Parquet shards, dataset card,
hashes); ``publish`` pushes a build to a Hub dataset repo and tags the revision;
``download`` fetches a pinned revision, only the clients/tasks asked for, and
verifies every file. Errors are printed as one clear message (exit code 1), not a
traceback: they name the file, task or revision at fault.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from drake_bench.commands import fail
from drake_bench.errors import DrakeBenchError

_err = Console(stderr=True)
_out = Console()


def _print_warnings(caught: list) -> None:
    for w in caught:
        _err.print(f"[yellow]warning:[/] {w.message}", markup=True, highlight=False, soft_wrap=True)


def _human(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover


def _print_standing(spec: Any, root: Path) -> None:
    """The build's two hashes, and whether each canonical board on this benchmark version takes runs on it."""
    import json

    from drake_bench.benchmarks.store import BUILD_INFO
    from drake_bench.leaderboard.rules import build_standing

    info = json.loads((root / BUILD_INFO).read_text())
    _out.print(
        f"data hash {info['data_hash']}, content hash {info.get('content_hash', '(not recorded)')}", highlight=False
    )
    for line in build_standing(spec.name, spec.version, info["data_hash"], info.get("content_hash")):
        _out.print(line, highlight=False, markup=False)


def register(app: typer.Typer) -> None:
    """Add the ``sources check``, ``build``, ``publish`` and ``download`` commands to the CLI."""

    sources = typer.Typer(help="Check a source folder against what a benchmark's loaders read.", no_args_is_help=True)
    app.add_typer(sources, name="sources")

    @sources.command("check")
    def sources_check(
        benchmark: Annotated[str, typer.Argument(help="Benchmark name (e.g. drake, hflb) or manifest path.")],
        source_dir: Annotated[
            Path, typer.Option("--source-dir", help="Folder holding the sources as their publishers distribute them.")
        ],
        task: Annotated[list[str] | None, typer.Option("--task", help="Check only this task (repeatable).")] = None,
        verbose: Annotated[
            bool, typer.Option("--verbose", "-v", help="List every file, also for complete tasks.")
        ] = False,
        count: Annotated[
            bool, typer.Option("--count/--no-count", help="Count the records of every annotation file found.")
        ] = True,
    ) -> None:
        """List per task the files found (with record counts), expected but missing, and what to download from where.

        Exits 1 when any task lacks a required file.
        """
        from drake_bench.benchmarks.sources import check_sources, render

        try:
            report = check_sources(benchmark, source_dir, tasks=task or None, count=count)
        except DrakeBenchError as exc:
            raise fail(exc) from None
        _out.print(render(report, verbose=verbose), highlight=False, markup=False, soft_wrap=True)
        if not report.ok:
            raise typer.Exit(code=1)

    @app.command("build")
    def build(
        benchmark: Annotated[str, typer.Argument(help="Benchmark name (e.g. drake, drake-synth) or manifest path.")],
        source_dir: Annotated[
            Path | None,
            typer.Option("--source-dir", help="Folder holding the sources as their publishers distribute them."),
        ] = None,
        out: Annotated[
            Path | None, typer.Option("--out", help="Output folder (default: $DRAKE_BENCH_HOME/built/<name>).")
        ] = None,
        task: Annotated[list[str] | None, typer.Option("--task", help="Build only this task (repeatable).")] = None,
        resume: Annotated[bool, typer.Option("--resume/--no-resume", help="Skip tasks already built.")] = True,
        allow_small: Annotated[
            bool,
            typer.Option(
                "--allow-small",
                help="Accept tasks far smaller than the manifest expects "
                "(a sample of the sources); a task with no items still fails.",
            ),
        ] = False,
    ) -> None:
        """Build a benchmark from its sources into Hub-ready Parquet shards, dataset card and hashes."""
        import warnings

        from drake_bench.benchmarks.build import build_benchmark
        from drake_bench.benchmarks.manifest import load_benchmark
        from drake_bench.benchmarks.sources import UnconfirmedFormatWarning
        from drake_bench.benchmarks.store import BUILD_INFO

        caught: list[warnings.WarningMessage] = []
        try:
            spec = load_benchmark(benchmark)
            if spec.embedded and not task:
                # embedded benchmarks are generated: build_synth stamps scale and generator version so
                # load_client_stream recognises the build instead of regenerating it
                from drake_bench.benchmarks.synth.builder import build_synth

                root = build_synth(spec, out=out, show_progress=True)
            else:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always", UnconfirmedFormatWarning)
                    root = build_benchmark(
                        spec,
                        source_dir=source_dir,
                        out=out,
                        tasks=task or None,
                        resume=resume,
                        check_expected=not allow_small,
                    )
        except DrakeBenchError as exc:
            _print_warnings(caught)
            raise fail(exc) from None
        _print_warnings(caught)
        _out.print(f"built {benchmark} -> {root} (see {root / BUILD_INFO} and {root / 'README.md'})", highlight=False)
        _print_standing(spec, root)

    @app.command("publish")
    def publish(
        benchmark: Annotated[str, typer.Argument(help="Benchmark name or manifest path.")],
        repo: Annotated[
            str | None, typer.Option("--repo", help="Hub dataset repo id org/name (default: the manifest's hub_repo).")
        ] = None,
        tag: Annotated[
            str | None, typer.Option("--tag", help="Tag the published commit with this revision name (e.g. v1.0).")
        ] = None,
        root: Annotated[
            Path | None, typer.Option("--root", help="Built folder (default: $DRAKE_BENCH_HOME/built/<name>).")
        ] = None,
        dry_run: Annotated[
            bool, typer.Option("--dry-run", help="List exactly what would be uploaded; touch nothing.")
        ] = False,
        private: Annotated[bool, typer.Option("--private", help="Create the repo as private.")] = False,
    ) -> None:
        """Publish a built benchmark to a Hub dataset repo (create repo, one commit, tag the revision)."""
        from drake_bench.benchmarks.hub import publish as do_publish
        from drake_bench.benchmarks.manifest import load_benchmark
        from drake_bench.benchmarks.store import built_root

        try:
            spec = load_benchmark(benchmark)
            repo_id = repo or spec.hub_repo
            if not repo_id:
                raise DrakeBenchError(f"benchmark {spec.name!r} has no hub_repo in its manifest; pass --repo org/name")
            if root is None and spec.embedded:
                from drake_bench.benchmarks.synth.builder import synth_root

                root = synth_root(spec)  # an archived version builds beside the current one
            folder = root or built_root(spec.name)
            ops = do_publish(folder, repo_id, tag, dry_run=dry_run, spec=spec, private=private or None)
        except DrakeBenchError as exc:
            raise fail(exc) from None
        table = Table(
            title=f"{'would upload' if dry_run else 'uploaded'} to datasets/{repo_id}" + (f" @ {tag}" if tag else "")
        )
        table.add_column("path in repo", overflow="fold")
        table.add_column("bytes", justify="right")
        table.add_column("size", justify="right")
        total = 0
        for op in ops:
            size = op.upload_info.size
            total += size
            table.add_row(op.path_in_repo, str(size), _human(size))
        _out.print(table)
        _out.print(
            f"{len(ops)} files, {total} bytes ({_human(total)})" + (" (dry run: nothing uploaded)" if dry_run else ""),
            highlight=False,
            markup=False,
        )

    @app.command("download")
    def download(
        benchmark: Annotated[str, typer.Argument(help="Benchmark name or manifest path.")],
        revision: Annotated[
            str, typer.Option("--revision", help="Tag, branch or commit to fetch (required: results cite it).")
        ],
        client: Annotated[
            list[int] | None, typer.Option("--client", help="Fetch this client's tasks (repeatable).")
        ] = None,
        task: Annotated[list[str] | None, typer.Option("--task", help="Fetch this task (repeatable).")] = None,
        unseen: Annotated[bool, typer.Option("--unseen", help="Also fetch the unseen (held-out) tasks.")] = False,
        repo: Annotated[
            str | None, typer.Option("--repo", help="Hub dataset repo id (default: the manifest's hub_repo).")
        ] = None,
        cache_dir: Annotated[
            Path | None, typer.Option("--cache-dir", help="Hub cache folder (default: HF_HUB_CACHE).")
        ] = None,
        source_dir: Annotated[
            Path | None, typer.Option("--source-dir", help="Your copy of sources whose license forbids redistribution.")
        ] = None,
        out: Annotated[
            Path | None,
            typer.Option("--out", help="Folder to assemble the benchmark in (default under $DRAKE_BENCH_HOME/hub)."),
        ] = None,
        offline: Annotated[
            bool, typer.Option("--offline", help="Use only the local Hub cache (like HF_HUB_OFFLINE=1).")
        ] = False,
    ) -> None:
        """Fetch a pinned revision (only the clients/tasks asked for) and verify every file's sha256."""
        from drake_bench.benchmarks.hub import fetch_benchmark, fetch_tasks_for_clients
        from drake_bench.benchmarks.manifest import load_benchmark

        try:
            spec = load_benchmark(benchmark)
            tasks: list[str] | None = None
            if client or task or unseen:
                tasks = fetch_tasks_for_clients(spec, client or [], unseen=unseen) + list(task or [])
                tasks = list(dict.fromkeys(tasks))
            path = fetch_benchmark(
                spec,
                revision,
                tasks=tasks,
                cache_dir=cache_dir,
                repo_id=repo,
                source_dir=source_dir,
                local_dir=out,
                local_files_only=offline,
            )
        except DrakeBenchError as exc:
            raise fail(exc) from None
        n = len(tasks) if tasks is not None else len(spec.tasks)
        _print_standing(spec, path)  # before the last line, which is the folder alone (for scripts)
        _out.print(f"fetched {n} task(s) of {spec.name}@{revision}, all hashes verified -> {path}", highlight=False)
        _out.print(str(path), highlight=False, soft_wrap=True)
