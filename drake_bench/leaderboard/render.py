"""``drake-bench leaderboard render`` and ``html``: a board re-rendered from its result files alone.

Rendering reads every ``result.json`` under the board's folder (``checkpoints/`` excluded), validates them against the
board's rules, and writes beside them ``summary.md`` (the package's summary table, every file, with the rules each
breaks listed under it), ``accuracy_over_rounds.png`` and ``board.html``. Refused files stay on the page, marked with
the rules they break: a board shows what it holds, and why a row does not count yet.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ..results import RunResult
from .boards import DEFAULT_ROOT, BoardDefinition
from .build import reproduce_command
from .html import Row, board_page, link
from .rules import Refusal, validate


def board_files(folder: str | Path) -> list[Path]:
    """Result files of a board folder, sorted; checkpoints are not results."""
    folder = Path(folder)
    return sorted(p for p in folder.rglob("result.json") if "checkpoints" not in p.relative_to(folder).parts)


def _command_for(board: BoardDefinition, res: RunResult, root: str | Path) -> str:
    """The board's command for an entry of the board; the run's own settings for any other file."""
    for e in board.entries:
        if e.method == res.method.name and e.settings == res.method_settings:
            return reproduce_command(board, e, root)
    rc = res.fl.extra.get("run_config") or {}
    return (f"drake-bench run --benchmark {rc.get('benchmark', res.benchmark.name)} --scenario {res.scenario.tag} "
            f"--methods {res.method.name} --seeds {','.join(map(str, res.seeds))} --out {rc.get('out', 'runs')} "
            "(as its run_config records; the method's package must be installed)")


def rows_for(board: BoardDefinition, files: Sequence[str | Path], page_dir: Path, root: str | Path = DEFAULT_ROOT,
             link_base: str | None = None) -> tuple[list[Row], list[Refusal]]:
    """One page row per readable result file, with the refusals that name it; plus every refusal."""
    results, refusals = validate(files, board)
    rows = []
    for path, res in results:
        mine = [r for r in refusals if r.file == path or path in r.message]
        rows.append(Row(label=res.label, method=res.method.name, result=res,
                        files=[link(path, page_dir, link_base)], command=_command_for(board, res, root), refusals=mine))
    return rows, refusals


def render(board: BoardDefinition, root: str | Path = DEFAULT_ROOT, *, results: str | Path | None = None,
           out: str | Path | None = None, link_base: str | None = None, note: str = "") -> tuple[Path, list[Refusal]]:
    """Write ``summary.md``, ``accuracy_over_rounds.png`` and ``board.html`` for ``board`` into ``out`` (default: the
    board's folder) from the result files under ``results`` (default: the board's folder). Returns the page and
    every refusal."""
    from ..evaluation.plots import plot_accuracy_over_rounds
    from ..evaluation.table import summary_markdown

    folder = Path(results) if results is not None else board.results_dir(root)
    out_dir = Path(out) if out is not None else board.results_dir(root)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = board_files(folder) if folder.exists() else []
    rows, refusals = rows_for(board, files, out_dir, root, link_base)
    runs = [r.result for r in rows]
    lines = [f"# {board.title}", "", f"Rendered by `drake-bench leaderboard render {board.name}` from "
             f"{len(files)} result file(s); `drake-bench leaderboard validate` checks them against the board's rules.", ""]
    plot = out_dir / "accuracy_over_rounds.png"
    if runs:
        lines.append(summary_markdown(runs))
        plot_accuracy_over_rounds(runs, plot)
    else:
        # a plot left from an earlier render would show entries this page no longer holds
        plot.unlink(missing_ok=True)
        lines += [f"No accepted result file yet: `drake-bench leaderboard build {board.name}` runs the board's entries.", ""]
    if refusals:
        lines += ["## Refused by the board's rules", ""] + [f"* `{r.rule}` {r.file}: {r.message}" for r in refusals] + [""]
    (out_dir / "summary.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    page = out_dir / "board.html"
    page.write_text(board_page(board, rows, note=note), encoding="utf-8")
    return page, refusals


def site(boards: Sequence[BoardDefinition], out: str | Path, root: str | Path = DEFAULT_ROOT,
         link_base: str | None = None) -> list[Path]:
    """``<out>/<board>.html`` for each board plus ``<out>/index.html`` linking them (a static site, no server)."""
    import html as _html

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    pages = []
    items = []
    for board in boards:
        folder = board.results_dir(root)
        files = board_files(folder) if folder.exists() else []
        rows, refusals = rows_for(board, files, out, root, link_base)
        page = out / f"{board.name}.html"
        page.write_text(board_page(board, rows), encoding="utf-8")
        pages.append(page)
        ok = sum(1 for r in rows if not r.refusals)
        items.append(f"<li><a href='{board.name}.html'>{_html.escape(board.title)}</a>: {len(rows)} result file(s), "
                     f"{ok} passing every rule, {len(board.entries)} entries defined</li>")
    index = out / "index.html"
    index.write_text("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>drake_bench boards</title></head>"
                     f"<body><h1>drake_bench boards</h1><ul>{''.join(items)}</ul></body></html>\n", encoding="utf-8")
    return [index, *pages]
