"""``drake-bench task-card`` and ``drake-bench cards``: task cards with rendered example grids."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer


def register(app: typer.Typer) -> None:
    @app.command("task-card")
    def task_card_cmd(
        benchmark: Annotated[str, typer.Argument(help="Benchmark name (e.g. drake-synth) or manifest path.")],
        task: Annotated[str, typer.Argument(help="Task id.")],
        out: Annotated[Optional[Path], typer.Option("--out", help="Write the example grid PNG here.")] = None,
        examples: Annotated[int, typer.Option(help="Examples in the grid.")] = 4,
    ) -> None:
        """Print a task's card (description, answer type, learnability) and optionally render its example grid."""
        from drake_bench.benchmarks.synth.cards import render_grid, task_card

        typer.echo(task_card(benchmark, task))
        if out is not None:
            out.parent.mkdir(parents=True, exist_ok=True)
            render_grid(benchmark, task, examples).save(out)
            typer.echo(f"wrote {out}")

    @app.command("cards")
    def cards_cmd(
        benchmark: Annotated[str, typer.Argument(help="Benchmark name or manifest path.")],
        out: Annotated[Path, typer.Option("--out", help="Folder for <task>.md and <task>.png.")],
        examples: Annotated[int, typer.Option(help="Examples per grid.")] = 4,
    ) -> None:
        """Write every task's card and example grid (PNG) into a folder."""
        from drake_bench.benchmarks.synth.cards import write_cards

        written = write_cards(benchmark, out, examples)
        typer.echo(f"wrote {len(written)} files to {out}")
