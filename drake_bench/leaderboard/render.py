"""``drake-bench leaderboard render`` and ``html``: a board re-rendered from its result files alone.

Rendering reads every ``result.json`` under the board's folder (``checkpoints/`` excluded), validates them against the
board's rules, and writes beside them ``summary.md`` (the package's summary table, every file, with the rules each
breaks listed under it), ``accuracy_over_rounds.png`` and ``board.html``. Refused files stay on the page, marked with
the rules they break: a board shows what it holds, and why a row does not count yet.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

from drake_bench.results.result_file import RunResult
from drake_bench.core.write_failure import once_there_is_space, write_failure
from drake_bench.leaderboard.boards import DEFAULT_ROOT, BoardDefinition, BoardEntry, BoardError
from drake_bench.leaderboard.build import reproduce_command
from drake_bench.leaderboard.html import Row, board_page, link
from drake_bench.leaderboard.rules import Refusal, validate
from drake_bench.leaderboard.submission import submission_of
from drake_bench.leaderboard.verify import verification_state


def board_files(folder: str | Path) -> list[Path]:
    """Result files of a board folder, sorted; checkpoints are not results."""
    folder = Path(folder)
    return sorted(p for p in folder.rglob("result.json") if "checkpoints" not in p.relative_to(folder).parts)


CLONE_HINT = "the committed boards' results are in the leaderboard/ folder of a clone of the drake_bench repository"
"""Where the results are, said by every command that found none where it looked (each adds how to point at them)."""


def _holds_results(folder: Path) -> bool:
    """Whether ``folder`` holds a result file, stopping at the first (a built board's checkpoints are many files)."""
    return folder.is_dir() and any("checkpoints" not in p.relative_to(folder).parts for p in folder.rglob("result.json"))


def empty_root(boards: Sequence[BoardDefinition], root: str | Path = DEFAULT_ROOT) -> str | None:
    """Why ``root`` shows every one of ``boards`` unbuilt, or None when one of them holds a result file there.

    The default root is ``./leaderboard``, which outside a clone of the repository holds nothing: each board then
    reads 0/N and renders an empty page, although its committed results are one ``--root`` away. Saying so names
    the root the command read and the way to the results."""
    if any(_holds_results(b.results_dir(root)) for b in boards):
        return None
    root = Path(root)
    shown = f"--root {root}" + ("" if root.is_absolute() else f" ({root.resolve()})")
    what = f"board {boards[0].name}" if len(boards) == 1 else "any of these boards"
    state = "does not exist" if not root.is_dir() else f"holds no result file of {what}"
    return (f"{shown} {state}; {CLONE_HINT}: run from the clone's top folder, or point --root at that folder "
            "(--root /path/to/drake_bench/leaderboard)")


def command_for(board: BoardDefinition, path: str | Path, res: RunResult, root: str | Path = DEFAULT_ROOT) -> str:
    """The command a row of the board's page gives to reproduce the result file ``path``.

    A submitted file's is the command its submission says produced it (its method may need settings or a
    package the board's flags do not carry); any other file's is the board's command for its method and settings
    (:func:`~.build.reproduce_command`, the one ``build`` runs), so that what the page describes is a run the board
    accepts, ``--compute-matched`` and every other flag included, whether or not the method is an entry."""
    sub = submission_of(path)
    if sub is not None:
        return sub.command
    return reproduce_command(board, BoardEntry(method=res.method.name, settings=res.method_settings), root)


def rows_for(board: BoardDefinition, files: Sequence[str | Path], page_dir: Path, root: str | Path = DEFAULT_ROOT,
             link_base: str | None = None) -> tuple[list[Row], list[Refusal]]:
    """One page row per readable result file, with the refusals that name it; plus every refusal."""
    results, refusals = validate(files, board)
    rows = []
    for path, res in results:
        mine = [r for r in refusals if r.file == path or path in r.message]
        rows.append(Row(label=res.label, method=res.method.name, result=res,
                        files=[link(path, page_dir, link_base)], command=command_for(board, path, res, root), refusals=mine,
                        verification=verification_state(path)))
    return rows, refusals


def render(board: BoardDefinition, root: str | Path = DEFAULT_ROOT, *, results: str | Path | None = None,
           out: str | Path | None = None, link_base: str | None = None, note: str = "") -> tuple[Path, list[Refusal]]:
    """Write ``summary.md``, ``accuracy_over_rounds.png`` and ``board.html`` for ``board`` into ``out`` (default: the
    board's folder) from the result files under ``results`` (default: the board's folder). Returns the page and
    every refusal."""
    from drake_bench.evaluation.plots import plot_accuracy_over_rounds
    from drake_bench.evaluation.table import summary_markdown

    folder = Path(results) if results is not None else board.results_dir(root)
    out_dir = Path(out) if out is not None else board.results_dir(root)
    with _writing(out_dir):
        out_dir.mkdir(parents=True, exist_ok=True)
    files = board_files(folder) if folder.exists() else []
    rows, refusals = rows_for(board, files, out_dir, root, link_base)
    runs = [r.result for r in rows]
    lines = [f"# {board.title}", "", f"Rendered by `drake-bench leaderboard render {board.name}` from "
             f"{len(files)} result file(s); `drake-bench leaderboard validate` checks them against the board's rules.", ""]
    plot = out_dir / "accuracy_over_rounds.png"
    if runs:
        lines.append(summary_markdown(runs))
        with _writing(plot):
            plot_accuracy_over_rounds(runs, plot)
    else:
        # a plot left from an earlier render would show entries this page no longer holds
        plot.unlink(missing_ok=True)
        lines += [f"No accepted result file yet: `drake-bench leaderboard build {board.name}` runs the board's entries.", ""]
    skipped = unreadable(refusals)
    if refusals:
        lines += ["## Refused by the board's rules", ""] + [f"* `{r.rule}` {r.file}: {r.message}" for r in refusals] + [""]
    if skipped:  # no row can show a file that does not read as a result: the page says it left them off
        note = " ".join(x for x in (note, f"{len(skipped)} file(s) that do not read as result files are left off "
                                          f"this page (summary.md says why): {', '.join(skipped)}.") if x)
    with _writing(out_dir / "summary.md"):
        (out_dir / "summary.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    page = out_dir / "board.html"
    with _writing(page):
        page.write_text(board_page(board, rows, note=note), encoding="utf-8")
    return page, refusals


def unreadable(refusals: Sequence[Refusal]) -> list[str]:
    """The files among ``refusals`` that do not read as result files at all (rule ``schema``: not JSON, hostile
    JSON, not a result), so no page row shows them, in order, each once."""
    return list(dict.fromkeys(r.file for r in refusals if r.rule == "schema"))


@contextmanager
def _writing(path: Path) -> Iterator[None]:
    """A page, plot or folder that cannot be written (a full disk, above all) is one :class:`BoardError` naming it:
    the board's result files are only read, so they stay as they were, and rendering again writes the pages."""
    try:
        yield
    except OSError as exc:
        raise BoardError(f"cannot write {path}: {write_failure(exc)}; the board's result files are untouched, and "
                         f"rendering again writes its pages{once_there_is_space(exc)}") from None


def site(boards: Sequence[BoardDefinition], out: str | Path, root: str | Path = DEFAULT_ROOT,
         link_base: str | None = None) -> list[Path]:
    """``<out>/<board>.html`` for each board plus ``<out>/index.html`` linking them (a static site, no server)."""
    import html as _html

    out = Path(out)
    with _writing(out):
        out.mkdir(parents=True, exist_ok=True)
    pages = []
    items = []
    for board in boards:
        folder = board.results_dir(root)
        files = board_files(folder) if folder.exists() else []
        rows, refusals = rows_for(board, files, out, root, link_base)
        page = out / f"{board.name}.html"
        with _writing(page):
            page.write_text(board_page(board, rows), encoding="utf-8")
        pages.append(page)
        ok = sum(1 for r in rows if not r.refusals)
        items.append(f"<li><a href='{board.name}.html'>{_html.escape(board.title)}</a>: {len(rows)} result file(s), "
                     f"{ok} passing every rule, {len(board.entries)} entries defined</li>")
    index = out / "index.html"
    with _writing(index):
        index.write_text("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>drake_bench boards</title></head>"
                         f"<body><h1>drake_bench boards</h1><ul>{''.join(items)}</ul></body></html>\n", encoding="utf-8")
    return [index, *pages]
