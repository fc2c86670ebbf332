"""Figures from result files: accuracy over rounds, fast adaptation, client relevance heatmaps, method diagnostics.

Why an explicit Agg canvas instead of pyplot: plotting must work headless (CI, clusters) and must
not change the caller's global matplotlib backend. Each function writes a PNG and returns the
:class:`~matplotlib.figure.Figure` so callers (and tests) can inspect what was drawn.
Values are shown x100 (scores are stored in [0, 1]); bands are ± population std over seeds.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from drake_bench.evaluation.metrics import CurvePoint

if TYPE_CHECKING:  # pragma: no cover
    from drake_bench.results.result_file import RunResult

SCALE = 100.0
DPI = 120


def compact_png(png: bytes) -> bytes:
    """A figure's PNG as 256 colours (Pillow's median cut), a quarter of matplotlib's true-colour file.

    A line plot has a few dozen colours plus their anti-aliased edges; as a palette image the lines and text look
    the same (the mean pixel differs by under 1 of 255), and the committed boards' 89 figures drop from 14 MB to
    about 4. Figures are opaque, so nothing is lost with the alpha channel."""
    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        palette = image.convert("RGB").quantize(256, method=Image.Quantize.MEDIANCUT)
    out = io.BytesIO()
    palette.save(out, format="PNG", optimize=True)
    return out.getvalue()


def png_bytes(fig: Figure, dpi: int = DPI) -> bytes:
    """``fig`` as a compact PNG (:func:`compact_png`)."""
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return compact_png(buf.getvalue())


def _save(fig: Figure, path: str | Path) -> Figure:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(png_bytes(fig))
    return fig


def plain(text: str) -> str:
    """``text`` as matplotlib must show it: two ``$`` in a method's name or version made it mathtext, and a malformed
    expression there (``$\\frac$``) stopped the run's plot."""
    return text.replace("$", r"\$")


def _label(result: "RunResult") -> str:
    return plain(result.label)


MARKERS = "os^Dv<>pPXh*"
LEGEND_COLUMNS = 4


def method_styles(labels: Sequence[str]) -> dict[str, dict[str, object]]:
    """A colour and marker per label, distinct for every label of a board (24 methods and more).

    Up to ten labels take matplotlib's ten default colours, all with round markers. Beyond ten, the default cycle
    would give two methods one colour, so colours come from the 20 of ``tab20`` and every label also gets its own
    marker: no two labels share a (colour, marker) pair below 60 of them."""
    unique = list(dict.fromkeys(labels))
    if len(unique) <= 10:
        colors = [f"C{i}" for i in range(10)]
        return {lab: {"color": colors[i], "marker": "o"} for i, lab in enumerate(unique)}
    from matplotlib import colormaps

    tab20 = colormaps["tab20"].colors
    return {lab: {"color": tab20[i % len(tab20)], "marker": MARKERS[i % len(MARKERS)]} for i, lab in enumerate(unique)}


def legend_below(fig: Figure, n: int) -> None:
    """One legend for the whole figure, under the axes, in up to four columns: a legend inside an axes with a board's
    two dozen methods covers the curves it labels."""
    handles, labels = [], []
    for ax in fig.axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    if handles:
        fig.legend(
            handles,
            labels,
            loc="outside lower center",
            ncol=min(max(n, 1), LEGEND_COLUMNS),
            fontsize="small",
            frameon=False,
        )


def legend_height(n: int) -> float:
    """Inches a figure grows by to hold :func:`legend_below`'s legend of ``n`` entries, so the axes keep their size."""
    return 0.22 * -(-n // LEGEND_COLUMNS)


def _draw_curve(
    ax,
    curve: Sequence[CurvePoint],
    label: str,
    linestyle: str = "-",
    scale: float = SCALE,
    style: dict[str, object] | None = None,
    band_alpha: float = 0.2,
) -> bool:
    """Mean line with a ± std band, values times ``scale``; False when the curve is empty (nothing drawn)."""
    if not curve:
        return False
    x = np.array([p.x for p in curve], dtype=float)
    mean = np.array([p.mean for p in curve]) * scale
    std = np.array([p.std for p in curve]) * scale
    (line,) = ax.plot(x, mean, linestyle=linestyle, label=label, **(style or {"marker": "o"}))
    ax.fill_between(x, mean - std, mean + std, color=line.get_color(), alpha=band_alpha, linewidth=0)
    return True


def plot_accuracy_over_rounds(results: Sequence["RunResult"], path: str | Path) -> Figure:
    """Self and Others (x100) against evaluation round, one line per method, mean ± std band over seeds."""
    if not results:
        raise ValueError("plot_accuracy_over_rounds: no results to plot")
    styles = method_styles([_label(r) for r in results])
    fig = Figure(figsize=(10, 4 + legend_height(len(styles))), layout="constrained")
    ax_self, ax_others = fig.subplots(1, 2, sharex=True)
    band = 0.2 if len(styles) <= 10 else 0.07  # two dozen bands at 0.2 merge into one grey field
    for r in results:
        _draw_curve(ax_self, r.summary.self_curve, _label(r), style=styles[_label(r)], band_alpha=band)
        _draw_curve(ax_others, r.summary.others_curve, _label(r), style=styles[_label(r)], band_alpha=band)
    for ax, title in ((ax_self, "Self"), (ax_others, "Others")):
        ax.set_title(title)
        ax.set_xlabel("round")
        ax.set_ylabel("score (x100)")
        ax.grid(alpha=0.3)
    legend_below(fig, len(styles))
    bench = results[0]
    fig.suptitle(plain(f"{bench.benchmark.name} / {bench.scenario.tag}"))
    return _save(fig, path)


def plot_adaptation(results: Sequence["RunResult"], path: str | Path) -> Figure:
    """Fast adaptation on unseen tasks (FedMosaic paper Sec. 6.2, Fig. 7; docs/design-notes.md#fast-adaptation): score vs fine-tuning iteration per method and init
    (solid = init from the method's aggregate, dashed = fresh adapters), mean ± std over seeds."""
    if not results:
        raise ValueError("plot_adaptation: no results to plot")
    fig = Figure(figsize=(6, 4), layout="constrained")
    ax = fig.subplots()
    for r in results:
        for init, curve in sorted(r.summary.adaptation.items()):
            _draw_curve(ax, curve, f"{_label(r)} ({init})", "-" if init == "method" else "--")
    ax.set_xlabel("fine-tuning iteration")
    ax.set_ylabel("unseen-task score (x100)")
    ax.set_title("Fast adaptation on unseen tasks")
    ax.grid(alpha=0.3)
    if ax.lines:
        ax.legend(fontsize="small")
    return _save(fig, path)


def plot_relevance_heatmap(
    matrix: Sequence[Sequence[float]] | np.ndarray,
    labels: Sequence[str],
    path: str | Path,
    title: str = "Client relevance",
) -> Figure:
    """Square client-by-client relevance matrix (e.g. FedMosaic's gradient similarity) as a heatmap;
    cells are annotated when there are at most 12 clients."""
    m = np.asarray(matrix, dtype=float)
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise ValueError(f"plot_relevance_heatmap: matrix must be square, got shape {m.shape}")
    if len(labels) != m.shape[0]:
        raise ValueError(f"plot_relevance_heatmap: {len(labels)} labels for a {m.shape[0]}x{m.shape[0]} matrix")
    size = max(4.0, 0.5 * len(labels) + 2)
    fig = Figure(figsize=(size, size * 0.85), layout="constrained")
    ax = fig.subplots()
    im = ax.imshow(m, cmap="viridis")
    fig.colorbar(im, ax=ax)
    ax.set_xticks(range(len(labels)), labels=list(labels), rotation=45, ha="right")
    ax.set_yticks(range(len(labels)), labels=list(labels))
    ax.set_title(title)
    if len(labels) <= 12:
        threshold = (np.nanmin(m) + np.nanmax(m)) / 2
        for i in range(m.shape[0]):
            for j in range(m.shape[1]):
                ax.text(
                    j,
                    i,
                    f"{m[i, j]:.2f}",
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="black" if m[i, j] > threshold else "white",
                )
    return _save(fig, path)


def _is_number(v: object) -> bool:
    """A diagnostic value that can be drawn: an int or float, not a bool (a flag), None or text."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def numeric_diagnostic_values(results: Sequence["RunResult"]) -> list[str]:
    """The diagnostic value names that some row of ``results`` reports as a number, sorted (what
    :func:`plot_diagnostics_over_rounds` can draw)."""
    return sorted({k for r in results for d in r.raw.diagnostics for k, v in d.values.items() if _is_number(v)})


def diagnostic_curve(result: "RunResult", value: str) -> list[CurvePoint]:
    """One diagnostic value over rounds: per seed and round the mean over the rows (keys) that report it as a
    number, then mean ± population std over seeds. Empty when no row has it."""
    per_seed: dict[int, dict[int, list[float]]] = {}
    for row in result.raw.diagnostics:
        v = row.values.get(value)
        if _is_number(v):
            per_seed.setdefault(row.seed, {}).setdefault(row.round, []).append(float(v))
    by_round: dict[int, list[float]] = {}
    for rounds in per_seed.values():
        for rnd, vals in rounds.items():
            by_round.setdefault(rnd, []).append(float(np.mean(vals)))
    out = []
    for rnd in sorted(by_round):
        vals = np.array(by_round[rnd])
        out.append(CurvePoint(x=rnd, mean=float(vals.mean()), std=float(vals.std()), n=len(vals)))
    return out


def plot_diagnostics_over_rounds(
    results: Sequence["RunResult"], path: str | Path, values: Sequence[str] = ("beta", "energy_ratio")
) -> Figure:
    """Method diagnostics (``raw.diagnostics``) against round, one panel per value (three to a row) and one line
    per result: the mean over the rows of a round (e.g. FedRPCA's weight matrices), mean ± std band over seeds.
    Values are drawn as reported (no x100)."""
    if not results:
        raise ValueError("plot_diagnostics_over_rounds: no results to plot")
    if not values:
        raise ValueError("plot_diagnostics_over_rounds: no values to plot")
    cols = min(3, len(values))
    rows = -(-len(values) // cols)
    fig = Figure(figsize=(5 * cols, 4 * rows), layout="constrained")
    axes = fig.subplots(rows, cols, sharex=True, squeeze=False).ravel()
    for ax in axes[len(values) :]:
        ax.set_visible(False)
    for ax, value in zip(axes, values):
        for r in results:
            _draw_curve(ax, diagnostic_curve(r, value), _label(r), scale=1.0)
        ax.set_title(plain(f"{value} (mean over rows)"))
        ax.set_xlabel("round")
        ax.set_ylabel(value)
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize="small")
    bench = results[0]
    fig.suptitle(plain(f"{bench.benchmark.name} / {bench.scenario.tag}: method diagnostics"))
    return _save(fig, path)
