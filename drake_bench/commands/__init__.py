"""CLI command groups. Each module defines ``register(app)`` and owns its commands.

``run``: run / list (evaluation); ``tune``: hyperparameter selection on the validation split; ``data``: build /
publish / download; ``cards``: task cards; ``leaderboard``: canonical boards (build, render, validate, submit, html).
:func:`fail` is every command's error line.
"""

from __future__ import annotations

import typer
from rich.console import Console
from rich.text import Text

from drake_bench.core.console import literal

MODULES = ["run", "tune", "data", "cards", "leaderboard"]

_err = Console(stderr=True)


def fail(exc: object) -> typer.Exit:
    """Print ``exc`` on stderr as one ``error:`` line and return the exit (code 1) for the command to raise.

    The message is printed as written (:func:`drake_bench.core.console.literal`: no rich markup read from it, no control
    character sent), since it may quote a plugin's or a file's text, which is anything. Every command reports its
    errors through here, so they all read alike."""
    _err.print(Text.assemble(("error: ", "bold red"), literal(exc)), highlight=False, soft_wrap=True)
    return typer.Exit(code=1)
