"""Leaderboard-style summary tables (rich for the terminal, markdown for docs and READMEs).

Columns: method, Self A_last, Self A_AUC, Others A_last, Others A_AUC, worst client (Self at
A_last), uplink MB per round. Scores are shown x100 as ``mean ± std`` (population std over seeds,
docs/design-notes.md#std-convention); MB are decimal megabytes (10^6 bytes), summed over clients per round.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from rich.table import Table

from .metrics import MeanStd

if TYPE_CHECKING:  # pragma: no cover
    from ..results import RunResult

HEADERS = ["Method", "Self A_last", "Self A_AUC", "Others A_last", "Others A_AUC", "Worst client", "Uplink MB/round"]
MISSING = "–"


def fmt(ms: MeanStd, scale: float = 100.0, digits: int = 2) -> str:
    """``mean ± std`` with ``scale`` applied; a dash when no seed has the value; std omitted for one seed."""
    if ms.mean is None:
        return MISSING
    if ms.n <= 1 or ms.std is None:
        return f"{ms.mean * scale:.{digits}f}"
    return f"{ms.mean * scale:.{digits}f} ± {ms.std * scale:.{digits}f}"


def rows(results: Sequence["RunResult"]) -> list[list[str]]:
    """One row of formatted cells per result, in the order given."""
    out = []
    for r in results:
        a = r.summary.aggregate
        name = r.label
        if r.status != "complete":
            name += " (partial)"
        out.append([
            name,
            fmt(a.self_last),
            fmt(a.self_auc),
            fmt(a.others_last),
            fmt(a.others_auc),
            fmt(a.worst_client_self),
            fmt(a.uplink_bytes_per_round, scale=1e-6),
        ])
    return out


def summary_table(results: Sequence["RunResult"], title: str | None = None) -> Table:
    """A rich table of :func:`rows`."""
    table = Table(title=title)
    for i, h in enumerate(HEADERS):
        table.add_column(h, justify="left" if i == 0 else "right", no_wrap=i == 0)  # "fedit 1.0" on one line
    for row in rows(results):
        table.add_row(*row)
    return table


def summary_markdown(results: Sequence["RunResult"]) -> str:
    """The same table as GitHub-flavoured markdown (ends with a newline)."""
    lines = [
        "| " + " | ".join(HEADERS) + " |",
        "|" + "|".join([":---"] + ["---:"] * (len(HEADERS) - 1)) + "|",
    ]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows(results)]
    return "\n".join(lines) + "\n"
