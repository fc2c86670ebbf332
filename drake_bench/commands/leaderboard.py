"""``drake-bench leaderboard``: list, build, reprobe, publish, fetch, render, validate, submit and html (drake_bench.leaderboard does the work)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from drake_bench.commands import fail
from drake_bench.core.console import literal, print_table
from drake_bench.errors import DrakeBenchError

if TYPE_CHECKING:  # pragma: no cover - the CLI imports the leaderboard lazily, so `drake-bench --help` stays fast
    from drake_bench.leaderboard.boards import BoardDefinition
    from drake_bench.leaderboard.rules import Refusal

_err = Console(stderr=True)
_out = Console()

ROOT_HELP = "Folder holding the boards' result folders (the repository's leaderboard/)."


def _board(name: str) -> BoardDefinition:
    from drake_bench.leaderboard.boards import load_board

    try:
        board = load_board(name)
        board.spec  # noqa: B018 - resolve now: a board of another benchmark version fails here, by name
        return board
    except DrakeBenchError as exc:
        raise fail(exc) from None


VERBOSE_HELP = "List every refusal, not one line per rule."


def _print_refusals(refusals: list[Refusal], verbose: bool = False) -> None:
    """Every refusal with ``verbose``, else one line per rule (:func:`~drake_bench.leaderboard.rules.summarise`):
    one changed number breaks dozens of derived values, which would bury the other rules broken."""
    from drake_bench.leaderboard.rules import summarise

    if verbose:
        for r in refusals:
            _err.print(
                f"[red]refused[/] [bold]\\[{escape(r.rule)}][/] {escape(r.file)}: {escape(r.message)}",
                highlight=False,
                soft_wrap=True,
            )
        return
    # a file that does not read as a result (not JSON, hostile JSON, fails the schema) breaks no other rule: each
    # is one line of its own, its first reason; the rules the readable files break are summed up, one line each
    unread = [r for r in refusals if r.rule == "schema"]
    for r in unread:
        first, *more = r.message.strip().splitlines() or [""]
        line = first.strip() + (f" (and {len(more)} more: --verbose)" if more else "")
        _err.print(
            Text.assemble(
                ("refused ", "red"),
                ("[schema] ", "bold"),  # the file, once: most reasons name it
                literal(line if r.file in line else f"{r.file}: {line}"),
            ),
            highlight=False,
            soft_wrap=True,
        )
    rest = [r for r in refusals if r.rule != "schema"]
    for line in summarise(rest):
        _err.print(f"[red]refused[/] {escape(line)}", highlight=False, soft_wrap=True)
    if len(rest) > len({r.rule for r in rest}) or any(r.message.strip().count("\n") for r in unread):
        _err.print("(--verbose lists every refusal)", highlight=False)


def _warn(message: str) -> None:
    _err.print(f"[bold yellow]warning:[/] {escape(message)}", highlight=False, soft_wrap=True)


def _check_root(boards: list[BoardDefinition], root: Path, *, writes: bool) -> None:
    """Say when ``root`` holds no result file of ``boards`` (run outside a clone, every board reads unbuilt); a
    command that writes pages fails when the root does not exist at all, rather than write empty pages (and, for
    ``render``, a new ``leaderboard/`` folder wherever it was run)."""
    from drake_bench.leaderboard.render import empty_root

    why = empty_root(boards, root)
    if why is None:
        return
    if writes and not root.is_dir():
        raise fail(DrakeBenchError(why))
    _warn(why)


def _result_files(paths: list[Path]) -> list[Path]:
    """The result files ``paths`` name: each file as given, each folder's result files (checkpoints left out)."""
    from drake_bench.leaderboard.render import board_files

    return [f for p in paths for f in (board_files(p) if p.is_dir() else [p])]


def register(app: typer.Typer) -> None:
    lb = typer.Typer(
        help="Canonical boards: build, render, validate result files, submit, and a static web page.",
        no_args_is_help=True,
    )
    app.add_typer(lb, name="leaderboard")

    @lb.command("list")
    def list_cmd(root: Annotated[Path, typer.Option(help=ROOT_HELP)] = Path("leaderboard")) -> None:
        """The canonical boards, their settings and how far each is built."""
        from drake_bench.leaderboard.boards import canonical_boards
        from drake_bench.leaderboard.build import plan, seconds_left

        def hours(seconds: float | None) -> str:
            return "-" if seconds is None else f"{seconds / 3600:.1f}"

        t = Table(title="canonical boards (drake_bench/leaderboard/definitions/)")
        for col in (
            "board",
            "benchmark",
            "scenario",
            "allocation",
            "seeds",
            "rounds x steps",
            "entries done",
            "seeds done",
            "hours run",
            "hours left (est.)",
        ):
            t.add_column(col, no_wrap=True)
        for b in canonical_boards().values():
            try:
                planned = plan(b, root)
                states = [p.state for p in planned]
                done = f"{states.count('done')}/{len(states)}"
                seeds = f"{sum(p.seeds_done for p in planned)}/{len(planned) * len(b.seeds)}"
                run = hours(
                    sum(s for p in planned for s in p.seed_seconds) if any(p.seed_seconds for p in planned) else None
                )
                left = hours(seconds_left(b, planned))
            except DrakeBenchError as exc:
                done, seeds, run, left = f"? ({exc})", "?", "?", "?"
            t.add_row(
                b.name,
                f"{b.benchmark} {b.benchmark_version}",
                b.scenario,
                b.allocation or "default",
                ",".join(map(str, b.seeds)),
                f"{b.rounds} x {b.local_steps}",
                done,
                seeds,
                run,
                left,
            )
        print_table(_out, t)
        _out.print(
            "hours: the wall time the result files record for their seeds (one process a seed, on the machine "
            "that made them); what is left is estimated from them, entry by entry",
            highlight=False,
            soft_wrap=True,
        )
        _check_root(list(canonical_boards().values()), root, writes=False)  # last: the line a reader sees

    @lb.command("build")
    def build_cmd(
        board: Annotated[
            str, typer.Argument(help="A canonical board name (`drake-bench leaderboard list`) or a board JSON file.")
        ],
        root: Annotated[Path, typer.Option(help=ROOT_HELP)] = Path("leaderboard"),
        methods: Annotated[
            str | None,
            typer.Option(
                help="Only these entries (comma-separated method names); with "
                "--dry-run any method, an entry or not: the board's command "
                "for it."
            ),
        ] = None,
        jobs: Annotated[
            int | None,
            typer.Option(help="Worker processes per `drake-bench run` (default: one per core, at most two)."),
        ] = None,
        dry_run: Annotated[
            bool, typer.Option("--dry-run", "--print-commands", help="Print the plan and the commands; run nothing.")
        ] = False,
        render: Annotated[bool, typer.Option(help="Re-render the board after building.")] = True,
    ) -> None:
        """Build a board: run every entry that has no complete result file (resuming partial ones from the
        evaluator's checkpoints), then render it. Run again after an interruption: it continues."""
        from drake_bench.leaderboard import build as b
        from drake_bench.leaderboard.boards import BoardEntry
        from drake_bench.leaderboard.render import render as render_board

        bd = _board(board)
        only = [m.strip() for m in methods.split(",") if m.strip()] if methods else None
        try:
            planned = b.plan(bd, root)
            if not dry_run:
                b.require_entries(bd, only or [], root)
        except DrakeBenchError as exc:
            raise fail(exc) from None
        t = Table(title=f"{bd.name}: {bd.title}")
        for col in ("entry", "version", "state", "hours run / left (est.)", "result file"):
            t.add_column(col, overflow="fold")
        for p, left in zip(planned, b.entry_seconds_left(bd, planned)):
            hours = f"{sum(p.seed_seconds) / 3600:.2f} / " + ("-" if left is None else f"{left / 3600:.2f}")
            t.add_row(p.entry.key, p.version, p.state + (f" ({p.why})" if p.why else ""), hours, str(p.result))
        print_table(_out, t)
        selected = [p for p in planned if not only or p.entry.method in only]
        todo = [p for p in selected if p.state not in ("done", "stale")]
        stale = [p for p in selected if p.state == "stale"]
        if stale:
            _out.print(
                f"{len(stale)} stale entr{'y' if len(stale) == 1 else 'ies'} ({', '.join(p.entry.key for p in stale)}): "
                "build refuses to replace committed results; each one's state says what to do",
                highlight=False,
                soft_wrap=True,
            )
        if only:  # the board's command for each method asked for, whatever its state: how a submitter gets it
            for p in selected:
                if p.state == "done":
                    _out.print(
                        f"{p.entry.key} is complete ({p.result}); the board's command that made it:",
                        highlight=False,
                        soft_wrap=True,
                    )
                    _out.print("made by: " + b.reproduce_command(bd, p.entry, root), highlight=False, soft_wrap=True)
            for m in b.off_board(bd, only):
                _out.print(
                    f"{m} is not an entry of board {bd.name}; the board's command for it (run it, then "
                    "`drake-bench leaderboard submit` its result file):",
                    highlight=False,
                    soft_wrap=True,
                )
                _out.print(
                    "to run: " + b.reproduce_command(bd, BoardEntry(method=m), root), highlight=False, soft_wrap=True
                )
        elif not todo and not stale:
            _out.print(
                "nothing to run: every entry has a complete result file (`--dry-run --methods NAME` prints the "
                "board's command for a method, an entry or your own)",
                highlight=False,
                soft_wrap=True,
            )
        for cmd in b.commands(bd, todo, jobs):
            _out.print(("would run: " if dry_run else "runs: ") + shlex.join(cmd), highlight=False, soft_wrap=True)
        if dry_run:
            return
        try:
            b.build(bd, root, jobs=jobs, methods=only, console=_err)
            if render:
                page, refusals = render_board(bd, root)
                _out.print(
                    f"board: {page}   ({len(refusals)} refusal(s); `drake-bench leaderboard validate` lists them)"
                )
        except DrakeBenchError as exc:
            raise fail(exc) from None

    @lb.command("reprobe")
    def reprobe_cmd(
        board: Annotated[str, typer.Argument(help="A canonical board name or a board JSON file.")],
        root: Annotated[Path, typer.Option(help=ROOT_HELP)] = Path("leaderboard"),
        methods: Annotated[str | None, typer.Option(help="Only these entries (comma-separated method names).")] = None,
    ) -> None:
        """Carry entries priced by an older compute probe over to the evaluator's: each is probed again (two client
        rounds per model, cached with the checkpoints) and kept, with the new probe recorded, when it matches the same
        local steps; an entry whose steps change is listed to be rebuilt. Exits 1 if any is."""
        from drake_bench.leaderboard.reprobe import reprobe

        bd = _board(board)
        only = [m.strip() for m in methods.split(",")] if methods else None
        try:
            done = reprobe(bd, root, methods=only, console=_err)
        except DrakeBenchError as exc:
            raise fail(exc) from None
        if not done:
            _out.print(f"{bd.name}: every probed entry already has the current compute probe")
            return
        t = Table(title=f"{bd.name}: reprobed")
        for col in ("entry", "steps run", "steps matched now", "relative compute now", "outcome"):
            t.add_column(col, overflow="fold")
        for d in done:
            outcome = (
                "kept (probe recorded)"
                if d.carried_over
                else f"rebuild: move {d.entry.result} and its checkpoints away"
            )
            t.add_row(
                d.entry.entry.key,
                str(d.recorded_steps),
                str(d.matched_steps),
                f"{d.measured_relative_compute:.3f}",
                outcome,
            )
        print_table(_out, t)
        if any(not d.carried_over for d in done):
            raise typer.Exit(code=1)

    @lb.command("publish")
    def publish_cmd(
        board: Annotated[str, typer.Argument(help="A canonical board name or a board JSON file.")],
        repo: Annotated[str, typer.Option(help="Hub dataset repo to upload to, e.g. my-org/drake-bench-results.")],
        root: Annotated[Path, typer.Option(help=ROOT_HELP)] = Path("leaderboard"),
        tag: Annotated[str | None, typer.Option(help="Tag the commit (a published revision never moves).")] = None,
        dry_run: Annotated[
            bool, typer.Option("--dry-run", help="List what would be uploaded; upload nothing.")
        ] = False,
    ) -> None:
        """Upload a board's result files (with their Parquet tables) and pages to a Hub dataset repo, one commit."""
        from drake_bench.leaderboard.results_repo import publish_board

        bd = _board(board)
        try:
            ops = publish_board(bd, repo, root, revision_tag=tag, dry_run=dry_run)
        except DrakeBenchError as exc:
            raise fail(exc) from None
        size = sum(op.upload_info.size for op in ops)
        if dry_run:
            for op in ops:
                _out.print(literal(op.path_in_repo), highlight=False)
        verb = "would upload" if dry_run else "uploaded"
        _out.print(
            f"{verb} {len(ops)} files ({size / 1e6:.1f} MB) of board {escape(bd.name)} to datasets/{escape(repo)}"
        )

    @lb.command("fetch")
    def fetch_cmd(
        board: Annotated[str, typer.Argument(help="A canonical board name or a board JSON file.")],
        repo: Annotated[str, typer.Option(help="Hub dataset repo holding the board's results.")],
        revision: Annotated[str, typer.Option(help="Tag, branch or commit to fetch (pin a tag or a commit).")],
        root: Annotated[Path, typer.Option(help=ROOT_HELP)] = Path("leaderboard"),
        offline: Annotated[bool, typer.Option("--offline", help="Use only the local Hub cache.")] = False,
    ) -> None:
        """Download a board's result files from a Hub dataset repo at a pinned revision into its folder."""
        from drake_bench.leaderboard.render import board_files
        from drake_bench.leaderboard.results_repo import fetch_board

        bd = _board(board)
        try:
            folder = fetch_board(bd, repo, revision, root, local_files_only=offline)
        except DrakeBenchError as exc:
            raise fail(exc) from None
        _out.print(
            f"fetched {len(board_files(folder))} result files of board {escape(bd.name)} from "
            f"{escape(repo)}@{escape(revision)} into {escape(str(folder))}"
        )

    @lb.command("render")
    def render_cmd(
        board: Annotated[str, typer.Argument(help="A canonical board name or a board JSON file.")],
        root: Annotated[Path, typer.Option(help=ROOT_HELP)] = Path("leaderboard"),
        results: Annotated[
            Path | None, typer.Option(help="Read result files from this folder instead of the board's.")
        ] = None,
        out: Annotated[
            Path | None,
            typer.Option(help="Write summary.md, the plot and board.html here (default: the board's folder)."),
        ] = None,
        link_base: Annotated[
            str | None, typer.Option(help="Link result files under this URL instead of by relative path.")
        ] = None,
        verbose: Annotated[bool, typer.Option("--verbose", help=VERBOSE_HELP)] = False,
    ) -> None:
        """Re-render a board from its result files: summary.md, accuracy_over_rounds.png and board.html."""
        from drake_bench.leaderboard.render import render, unreadable

        bd = _board(board)
        if results is None:
            _check_root([bd], root, writes=out is None)
        elif not results.is_dir():
            raise fail(DrakeBenchError(f"--results {results} is not a folder"))
        try:
            page, refusals = render(bd, root, results=results, out=out, link_base=link_base)
        except DrakeBenchError as exc:
            raise fail(exc) from None
        _print_refusals(refusals, verbose)
        skipped = unreadable(refusals)
        if skipped:
            _err.print(
                f"note: {len(skipped)} file(s) that do not read as result files (above) are left off the page",
                highlight=False,
                soft_wrap=True,
            )
        _out.print(f"board: {page}")

    @lb.command("validate")
    def validate_cmd(
        paths: Annotated[list[Path], typer.Argument(help="Result files, folders of them, or submission folders.")],
        board: Annotated[
            str | None,
            typer.Option(
                help="The board to check against (default: the submission's, or "
                "the canonical board of the files' benchmark, scenario and allocation)."
            ),
        ] = None,
        verbose: Annotated[bool, typer.Option("--verbose", help=VERBOSE_HELP)] = False,
    ) -> None:
        """Check result files against a board's rules: one line per rule broken, naming it, its count and the first
        file (--verbose: every refusal). Exit 1 on any, and when the paths hold no result file."""
        from drake_bench.leaderboard.boards import board_for, load_board
        from drake_bench.leaderboard.render import CLONE_HINT, board_files
        from drake_bench.leaderboard.rules import RULES, read_for_board, validate
        from drake_bench.leaderboard.submission import is_submission, validate_submission

        refusals = []
        files: list[Path] = []
        checked = 0
        try:
            chosen = load_board(board) if board else None
            for p in paths:
                if not p.exists():
                    raise DrakeBenchError(
                        f"{p} does not exist ({p.absolute()}); {CLONE_HINT}: give a path "
                        "inside it (e.g. /path/to/drake_bench/leaderboard/drake-synth-dynamic)"
                    )
                if p.is_dir() and is_submission(p):
                    sub, why = validate_submission(p, chosen)
                    refusals += why
                    checked += len(sub.files) if sub else 0
                elif p.is_dir():
                    files += board_files(p)
                else:
                    files.append(p)
            if files:
                target = chosen
                unread: list[Refusal] = []
                if target is None:  # the board of the first file that reads as a result
                    for f in files:
                        res, why = read_for_board(f)
                        unread += why
                        if res is not None:
                            target = board_for(res.benchmark.name, res.scenario.tag, res.model_allocation.name)
                            if target is None:
                                raise DrakeBenchError(
                                    f"{f}: no canonical board matches its benchmark, scenario and "
                                    "allocation; name one with --board"
                                )
                            break
                if target is None:  # not one file reads: each is refused, no board is needed to say so
                    refusals += unread
                else:
                    _, why = validate(files, target)
                    refusals += why
                    _out.print(f"board {target.name}: {len(files)} result file(s)")
                checked += len(files)
            if not checked and not refusals:  # "ok: 0 result file(s)" would pass a folder that holds none
                raise DrakeBenchError(
                    f"no result file in {', '.join(map(str, paths))} (checkpoints are not results): "
                    f"nothing to check ({CLONE_HINT})"
                )
        except DrakeBenchError as exc:
            raise fail(exc) from None
        _print_refusals(refusals, verbose)
        if refusals:
            broken = sorted({r.rule for r in refusals})
            _err.print(
                f"{len(refusals)} refusal(s); rules broken: " + "; ".join(f"{r} ({RULES[r]})" for r in broken),
                highlight=False,
                soft_wrap=True,
            )
            raise typer.Exit(code=1)
        _out.print(f"ok: {checked} result file(s) pass every rule")

    @lb.command("submit")
    def submit_cmd(
        results: Annotated[list[Path], typer.Argument(help="The method's result files (or folders of them).")],
        board: Annotated[str, typer.Option(help="The canonical board (or board JSON file) they are for.")],
        out: Annotated[Path, typer.Option(help="The submission folder to write (new or empty).")],
        package: Annotated[str, typer.Option(help="The distribution that provides the method (its pip name).")],
        command: Annotated[str, typer.Option(help="The command that produced the result files.")],
        source_url: Annotated[str | None, typer.Option(help="Where the package's source is.")] = None,
        wheel: Annotated[
            Path | None, typer.Option(help="The wheel the results were made with (its sha256 is recorded).")
        ] = None,
    ) -> None:
        """Write a self-contained submission folder (result files, method, version, package, source URL or wheel
        hash, command); refused, with the rules named, when the results break the board's rules."""
        from drake_bench.leaderboard.submission import submit

        bd = _board(board)
        files = _result_files(results)
        try:
            folder = submit(bd, files, out, package=package, command=command, source_url=source_url, wheel=wheel)
        except DrakeBenchError as exc:
            raise fail(exc) from None
        _out.print(
            f"submission: {folder} (open a pull request adding it under leaderboard/{bd.name}/submissions/; "
            "docs/leaderboard.md)"
        )

    @lb.command("verify")
    def verify_cmd(
        results: Annotated[list[Path], typer.Argument(help="Result files, or folders (a submission) holding them.")],
    ) -> None:
        """Rerun each result file's recorded configuration and compare it digit for digit (the method installed at
        the file's version); write verification.json beside it, which the board page reads (verified or
        self-reported). Exit 1 when a file is not reproduced."""
        from drake_bench.leaderboard.verify import MAX_DIFFERENCES, verify

        files = _result_files(results)
        if not files:
            raise fail(DrakeBenchError(f"no result file in {', '.join(map(str, results))}"))
        failed = 0
        for f in files:
            try:
                record = verify(f, console=_err)
            except DrakeBenchError as exc:
                _err.print(Text.assemble(("cannot verify ", "red"), literal(f), ": ", literal(exc)), soft_wrap=True)
                failed += 1
                continue
            if record.reproduced:
                _out.print(
                    Text.assemble(
                        ("verified ", "green"),
                        literal(f),
                        " (rerun digit for digit, sandbox ",
                        literal(record.sandbox),
                        ")",
                    ),
                    soft_wrap=True,
                )
            else:
                failed += 1
                many = f"{len(record.differences)}{'+' if len(record.differences) == MAX_DIFFERENCES else ''}"
                _err.print(
                    Text.assemble(
                        ("not reproduced ", "bold red"),
                        literal(f),
                        f": {many} fields differ, first: ",
                        literal(record.differences[0]),
                    ),
                    soft_wrap=True,
                )
        if failed:
            raise typer.Exit(code=1)

    @lb.command("html")
    def html_cmd(
        out: Annotated[Path, typer.Option(help="Folder for <board>.html pages and index.html.")] = Path("site"),
        boards: Annotated[
            str | None, typer.Option(help="Comma-separated boards (default: every canonical board).")
        ] = None,
        root: Annotated[Path, typer.Option(help=ROOT_HELP)] = Path("leaderboard"),
        link_base: Annotated[
            str | None, typer.Option(help="Link result files under this URL instead of by relative path.")
        ] = None,
    ) -> None:
        """One self-contained HTML page per board (sortable table, drill-down, plots; no server, no CDN)."""
        from drake_bench.leaderboard.boards import canonical_boards
        from drake_bench.leaderboard.render import site

        chosen = [_board(b.strip()) for b in boards.split(",")] if boards else list(canonical_boards().values())
        _check_root(chosen, root, writes=True)
        try:
            pages = site(chosen, out, root, link_base)
        except DrakeBenchError as exc:
            raise fail(exc) from None
        _out.print("pages: " + ", ".join(str(p) for p in pages))
