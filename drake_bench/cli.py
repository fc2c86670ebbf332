"""``drake-bench`` command line: one Typer app, command groups in drake_bench.commands."""

from __future__ import annotations

import importlib

import typer

from drake_bench.commands import MODULES

app = typer.Typer(
    name="drake-bench",
    help="Benchmarks, streams and the standard evaluator for personalized federated learning.",
    no_args_is_help=False,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)

for _mod in MODULES:
    importlib.import_module(f"drake_bench.commands.{_mod}").register(app)


def main() -> None:  # pragma: no cover - console entry point
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
