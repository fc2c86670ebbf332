"""Printing to the terminal: tables whole, and text from plugins and files shown as written.

Rich fits a table to the console's width (80 columns when stdout is not a terminal) and cuts
cells with an ellipsis, so ``drake-bench list | cat`` printed ``hflb-synth`` as ``hflb-s…``.
A name cut short cannot be copied into the next command, so tables are printed at the width
they need.

Rich also reads ``[...]`` in a string as markup: a plugin whose name, version or error message held ``[/]`` crashed
the error report, ``drake-bench list`` and the run's table, and an ESC sequence in it reached the terminal raw (it
can rewrite what the screen shows). Text that comes from a plugin or a file goes through :func:`literal`, and
:class:`DataTable` does that for every cell.
"""

from __future__ import annotations

import re
from typing import Any

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def literal(text: object, style: str = "") -> Text:
    """``text`` as it is written: no markup read, control characters (ESC, BEL, CR, ...) shown as escapes."""
    return Text(_CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode(), str(text)), style=style)


class DataTable(Table):
    """A table whose string cells and title are data, shown by :func:`literal` (styled cells: pass a ``Text``)."""

    def __init__(self, *args: Any, title: object = None, **kwargs: Any):
        super().__init__(*args, title=literal(title) if isinstance(title, str) else title, **kwargs)

    def add_row(self, *cells: Any, **kwargs: Any) -> None:
        super().add_row(*(literal(c) if isinstance(c, str) else c for c in cells), **kwargs)


def print_table(console: Console, table: Table) -> None:
    """Print ``table`` at least as wide as its widest row needs, never cutting a cell."""
    needed = Measurement.get(console, console.options.update(width=10_000), table).maximum
    width = console.width
    if needed <= width:
        console.print(table)
        return
    console.width = needed
    try:
        console.print(table)
    finally:
        console.width = width
