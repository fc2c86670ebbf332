"""Printing tables whole: names are never cut, whatever the terminal (or pipe) width.

Rich fits a table to the console's width (80 columns when stdout is not a terminal) and cuts
cells with an ellipsis, so ``drake-bench list | cat`` printed ``hflb-synth`` as ``hflb-s…``.
A name cut short cannot be copied into the next command, so tables are printed at the width
they need.
"""

from __future__ import annotations

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table


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
