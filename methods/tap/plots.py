"""TAP's replacement curve (the paper's Fig. 3: cumulative replacements per task over rounds) from result files.

The counts come from the rows TAP reports about each client's round (``client_diagnostics``, filed in
``raw.diagnostics`` as ``client/<id>/<task key>``): a key's count in a round is how many clients' personal copies
took the FL copy's components of that key. The curve is their running sum over rounds, per key and in total, the
mean over the file's seeds with a ± population-std band. It draws from result files alone, so a board's curve is
redrawn without rerunning anything::

    python -m drake_bench.methods.tap.plots RESULT.json [RESULT.json ...] --out replacements.png
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

    from drake_bench.results.result_file import RunResult

CLIENT_PREFIX = "client/"
TOTAL = "all keys"
COUNTS = ("replaced", "first_replaced", "clients")


def replacement_table(rows: Iterable[Mapping[str, Any]]) -> dict[int, dict[int, dict[str, dict[str, int]]]]:
    """seed -> round -> task key -> {replaced, first_replaced (on the +inf rule), clients} from diagnostic rows as
    dicts (``seed``, ``round``, ``key``, ``values``); rows other than TAP's per-client rows are skipped."""
    out: dict[int, dict[int, dict[str, dict[str, int]]]] = defaultdict(lambda: defaultdict(dict))
    for row in rows:
        values = row["values"]
        if not str(row["key"]).startswith(CLIENT_PREFIX) or "task_key" not in values:
            continue
        cell = out[row["seed"]][row["round"]].setdefault(str(values["task_key"]), dict.fromkeys(COUNTS, 0))
        cell["clients"] += 1
        cell["replaced"] += int(bool(values["replaced"]))
        cell["first_replaced"] += int(bool(values["replaced"]) and bool(values["first"]))
    return out


def per_seed_counts(result: "RunResult") -> dict[int, dict[str, dict[int, int]]]:
    """seed -> key -> round -> replacements that round (rounds the seed reported; a key absent from a round: 0)."""
    out: dict[int, dict[str, dict[int, int]]] = defaultdict(lambda: defaultdict(dict))
    table = replacement_table(row.model_dump() for row in result.raw.diagnostics)
    for seed, by_round in table.items():
        for r, by_key in by_round.items():
            for key, cell in by_key.items():
                out[seed][key][r] = cell["replaced"]
    return out


def replacement_counts(result: "RunResult") -> dict[tuple[str, int], float]:
    """(key, round) -> replacements in that round, the mean over seeds."""
    seeds = per_seed_counts(result)
    cells: dict[tuple[str, int], list[int]] = defaultdict(list)
    for by_key in seeds.values():
        for key, by_round in by_key.items():
            for r, n in by_round.items():
                cells[(key, r)].append(n)
    return {k: float(np.mean(v)) for k, v in sorted(cells.items())}


def cumulative_curves(result: "RunResult") -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """key (and ``TOTAL``) -> (rounds, mean cumulative count, std) over the result's seeds."""
    seeds = per_seed_counts(result)
    rounds = sorted({r for by_key in seeds.values() for counts in by_key.values() for r in counts})
    keys = sorted({k for by_key in seeds.values() for k in by_key})
    out = {}
    for key in [*keys, TOTAL]:
        rows = []
        for by_key in seeds.values():
            per_round = [sum(by_key[k].get(r, 0) for k in (keys if key == TOTAL else [key])) for r in rounds]
            rows.append(np.cumsum(per_round))
        arr = np.array(rows, dtype=float)
        out[key] = (np.array(rounds), arr.mean(0), arr.std(0))
    return out


def plot_replacements(results: Sequence["RunResult"], path: str | Path) -> "Figure":
    """One panel per result file: cumulative replacements per key (and all keys) against the round."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    if not results:
        raise ValueError("plot_replacements: no results")
    fig = Figure(figsize=(5.5 * len(results), 4.0))
    for i, result in enumerate(results):
        ax = fig.add_subplot(1, len(results), i + 1)
        for key, (x, mean, std) in cumulative_curves(result).items():
            (line,) = ax.plot(
                x,
                mean,
                marker="o",
                linewidth=2.5 if key == TOTAL else 1.2,
                color="black" if key == TOTAL else None,
                label=key,
            )
            ax.fill_between(x, mean - std, mean + std, color=line.get_color(), alpha=0.15, linewidth=0)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("round")
        ax.set_ylabel("cumulative replacements (clients)")
        ax.set_title(f"{result.method.name} {result.benchmark.name} / {result.scenario.tag}", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(fig)
    fig.savefig(path, format="png", dpi=120)
    return fig


def main(argv: Sequence[str] | None = None) -> int:
    from drake_bench.results.result_file import read_result

    ap = argparse.ArgumentParser(
        description="TAP's cumulative replacements per task key over rounds, from result files."
    )
    ap.add_argument("results", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, default=Path("replacements.png"))
    args = ap.parse_args(argv)
    plot_replacements([read_result(p) for p in args.results], args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
