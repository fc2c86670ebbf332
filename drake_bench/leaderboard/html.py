"""One self-contained HTML page per board: no server, no CDN (inline CSS and JavaScript, plots as base64 PNG).

The page holds what a reader of a board needs to trust and reproduce a row: the sortable table (mean ± population
std over the board's seeds; the rank marks ties where the ± std intervals overlap), the paper's numbers beside ours
where the paper ran the same method (cited by table), Self / Others and the measured cost (bytes, seconds, memory),
a per-client and per-task drill-down under each row, the accuracy-over-rounds and Self-vs-Others plots, and for
each row its result files, the rules it passes or breaks, and the command that reproduces it. Every number comes
from the result files' summaries (which the validator recomputes from their raw tables).
"""

from __future__ import annotations

import base64
import html
import io
import json
import os
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from statistics import mean, pstdev
from typing import Any, Sequence

from ..compute import ComputeProbe
from ..evaluation.metrics import MeanStd
from ..results import RunResult
from ..source_revision import describe
from .boards import BoardDefinition
from .rules import Refusal

PAPER_FILE = "paper_results.json"
METRICS = [("self_last", "Self A_last"), ("self_auc", "Self A_AUC"), ("others_last", "Others A_last"),
           ("others_auc", "Others A_AUC"), ("worst_client_self", "Worst client")]


def paper_results(key: str | None) -> dict[str, Any] | None:
    """The paper's table for a board (``paper.key``), or None."""
    if not key:
        return None
    data = json.loads(resources.files("drake_bench.leaderboard").joinpath(PAPER_FILE).read_text(encoding="utf-8"))
    return data.get(key)


@dataclass
class Row:
    """One entry of the page, everything already formatted or numeric for sorting."""

    label: str
    method: str
    result: RunResult
    files: list[str]
    command: str
    refusals: list[Refusal] = field(default_factory=list)
    rank: int = 0
    tie: bool = False


def _ms(ms: MeanStd, scale: float = 100.0, digits: int = 2) -> tuple[str, float | None]:
    if ms.mean is None:
        return "–", None
    text = f"{ms.mean * scale:.{digits}f}"
    if ms.n > 1 and ms.std is not None:
        text += f" ± {ms.std * scale:.{digits}f}"
    return text, ms.mean * scale


def ranks(values: Sequence[tuple[float | None, float]]) -> list[tuple[int, bool]]:
    """Rank by mean (higher is better): 1 + the number of entries whose whole ``mean ± std`` interval lies above
    this one's; a tie where another entry gets the same rank (their intervals overlap, or none is clearly above)."""
    out = []
    for m, s in values:
        if m is None:
            out.append((len(values), False))
            continue
        above = sum(1 for m2, s2 in values if m2 is not None and m2 - s2 > m + s)
        out.append((1 + above, False))
    counts = defaultdict(int)
    for r, _ in out:
        counts[r] += 1
    return [(r, counts[r] > 1) for r, _ in out]


def _png(fig: Any) -> str:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def accuracy_plot(results: Sequence[RunResult]) -> str:
    """The package's accuracy-over-rounds plot, as base64 PNG."""
    from ..evaluation.plots import plot_accuracy_over_rounds

    with tempfile.TemporaryDirectory() as tmp:
        fig = plot_accuracy_over_rounds(list(results), Path(tmp) / "plot.png")
    return _png(fig)


def self_vs_others_plot(results: Sequence[RunResult]) -> str:
    """Self A_last against Others A_last, one point per method with its ± std bars (x100), as base64 PNG."""
    from matplotlib.figure import Figure

    from ..evaluation.plots import legend_below, legend_height, method_styles

    styles = method_styles([r.label for r in results])
    fig = Figure(figsize=(7.5, 5 + legend_height(len(styles) + 1)), layout="constrained")
    ax = fig.subplots()
    for r in results:
        a = r.summary.aggregate
        if a.self_last.mean is None or a.others_last.mean is None:
            continue
        ax.errorbar(100 * a.others_last.mean, 100 * a.self_last.mean, xerr=100 * (a.others_last.std or 0),
                    yerr=100 * (a.self_last.std or 0), capsize=3, label=r.label, elinewidth=0.8, **styles[r.label])
    lo, hi = ax.get_xlim()
    lo2, hi2 = ax.get_ylim()
    lim = (min(lo, lo2), max(hi, hi2))
    ax.plot(lim, lim, color="grey", linewidth=0.8, linestyle=":", label="Self = Others")
    ax.set_xlabel("Others A_last (x100)")
    ax.set_ylabel("Self A_last (x100)")
    ax.grid(alpha=0.3)
    legend_below(fig, len(styles) + 1)
    return _png(fig)


def per_client(res: RunResult) -> list[dict[str, Any]]:
    """Per client, mean over seeds of Self and Others A_last / A_AUC (x100)."""
    acc: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for s in res.summary.per_seed:
        for c in s.per_client:
            for k in ("self_last", "self_auc", "others_last", "others_auc"):
                v = getattr(c, k)
                if v is not None:
                    acc[c.client][k].append(100 * v)
    return [{"client": c, **{k: (mean(v), pstdev(v)) for k, v in d.items()}} for c, d in sorted(acc.items())]


def per_task(res: RunResult) -> list[dict[str, Any]]:
    """Per task at the last round: Self (its owner's model) and Others (the other clients' models), mean over seeds
    of the per-seed mean (x100), with the number of items scored."""
    last = res.fl.rounds
    acc: dict[tuple[str, int | None], dict[str, dict[int, list[float]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    items: dict[tuple[str, int | None], int] = defaultdict(int)
    for r in res.raw.scores:
        if r.eval_round != last or r.role == "unseen":
            continue
        acc[(r.task, r.owner)][r.role][r.seed].append(r.score)
        if r.role == "self":
            items[(r.task, r.owner)] += r.n
    out = []
    for (task, owner), roles in sorted(acc.items(), key=lambda kv: (kv[0][1] or 0, kv[0][0])):
        row: dict[str, Any] = {"task": task, "owner": owner, "items": items[(task, owner)]}
        for role in ("self", "others"):
            seeds = [100 * mean(v) for v in roles.get(role, {}).values()]
            row[role] = (mean(seeds), pstdev(seeds)) if seeds else None
        out.append(row)
    return out


def _cell(text: str, value: float | None, cls: str = "num") -> str:
    sort = "" if value is None else f' data-sort="{value:.6f}"'
    return f'<td class="{cls}"{sort}>{html.escape(text)}</td>'


def _flops_cell(res: RunResult) -> str:
    """The method's training FLOPs over SFT's at the steps it ran (the compute probe's record), marked where its
    fixed costs put it over a compute-matched budget; a dash for a run without a probe."""
    record = res.fl.extra.get("compute")
    if not record:
        return _cell("–", None)
    probe, steps = ComputeProbe.from_record(record), res.fl.local_steps
    ratio = probe.relative_compute_at(steps)
    over = probe.over_budget_at(steps)
    return _cell(f"{ratio:.2f}" + (" over budget" if over else ""), ratio, "num over-budget" if over else "num")


def _pair(v: tuple[float, float] | None) -> str:
    return "–" if v is None else f"{v[0]:.2f} ± {v[1]:.2f}"


def _detail(row: Row) -> str:
    res = row.result
    clients = "".join(
        f"<tr><td>{c['client']}</td><td>{res.model_allocation.clients.get(str(c['client']), '')}</td>"
        f"<td>{_pair(c.get('self_last'))}</td><td>{_pair(c.get('self_auc'))}</td>"
        f"<td>{_pair(c.get('others_last'))}</td><td>{_pair(c.get('others_auc'))}</td></tr>" for c in per_client(res))
    tasks = "".join(
        f"<tr><td>{html.escape(t['task'])}</td><td>{t['owner'] if t['owner'] is not None else ''}</td>"
        f"<td>{_pair(t['self'])}</td><td>{_pair(t['others'])}</td><td>{t['items']}</td></tr>" for t in per_task(res))
    rules = ("<p class='ok'>passes every rule of this board</p>" if not row.refusals else
             "<ul class='refused'>" + "".join(f"<li><b>{html.escape(r.rule)}</b>: {html.escape(r.message)}</li>"
                                              for r in row.refusals) + "</ul>")
    files = "".join(f'<li><a href="{html.escape(f)}">{html.escape(f)}</a></li>' for f in row.files)
    a = res.summary.aggregate
    cost = (f"uplink {_ms(a.uplink_bytes_total, 1e-6)[0]} MB total, downlink {_ms(a.downlink_bytes_total, 1e-6)[0]} MB "
            f"total; training {_ms(a.train_seconds_total, 1, 1)[0]} s; aggregation "
            f"{_ms(a.aggregate_seconds_total, 1, 2)[0]} s; peak memory {_ms(a.peak_memory_bytes, 1e-6, 0)[0]} MB")
    env = res.environment
    numerics = res.numerics or "native (made before the setting existed)"
    computed = (f"numerics {numerics}; kernels {env.cpu_capability or 'not recorded'}"
                f"{f' on {env.cpu_model}' if env.cpu_model else ''}; torch {env.torch}, transformers {env.transformers}, "
                f"peft {env.peft}; {env.device}; {describe(res.drake_bench_version, env.drake_bench_source)}"
                f"{f'; method from {res.method.package}' if res.method.package else ''}")
    return (f"<div class='drill'><h4>{html.escape(row.label)}</h4>"
            f"<p>Reproduce: <code class='cmd'>{html.escape(row.command)}</code></p>"
            f"<p class='computed'>Computed with: {html.escape(computed)}</p>"
            f"<p>Result files:</p><ul>{files}</ul><p>Rules:</p>{rules}<p>Cost (mean over seeds): {html.escape(cost)}</p>"
            "<h5>Per client (x100, mean ± std over seeds)</h5><table class='sub clients'><tr><th>client</th><th>model</th>"
            f"<th>Self A_last</th><th>Self A_AUC</th><th>Others A_last</th><th>Others A_AUC</th></tr>{clients}</table>"
            "<h5>Per task at the last round (Self: the owner's model; Others: every other client's)</h5>"
            "<table class='sub tasks'><tr><th>task</th><th>owner</th><th>Self</th><th>Others</th><th>items (Self, "
            f"all seeds)</th></tr>{tasks}</table></div>")


CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:1400px}
table{border-collapse:collapse;font-size:13px}th,td{border:1px solid #ccc;padding:3px 6px}
#board th{background:#f0f0f0;cursor:pointer;white-space:nowrap}#board th.sorted-desc:after{content:" \\25BC"}
#board th.sorted-asc:after{content:" \\25B2"}td.num{text-align:right;white-space:nowrap}
td.paper{color:#666;text-align:right;white-space:nowrap;font-style:italic}tr.detail{display:none}
tr.detail.open{display:table-row}tr.is-refused td.label{color:#a00}.drill{max-width:1200px;white-space:normal}.ok{color:#070}.refused{color:#a00}.over-budget{color:#a60}
code.cmd{background:#f6f6f6;padding:2px 4px;font-size:12px;word-break:break-all}.tie{color:#a60}
img{max-width:100%}.meta td{border:none;padding:1px 8px}
"""

JS = """
function cellValue(row, col){var c=row.children[col];var v=c.getAttribute('data-sort');
 if(v===null){return c.textContent.trim().toLowerCase();}return parseFloat(v);}
function sortBy(th){var table=document.getElementById('board');var body=table.tBodies[0];
 var col=Array.prototype.indexOf.call(th.parentNode.children,th);
 var desc=!th.classList.contains('sorted-desc');
 Array.prototype.forEach.call(th.parentNode.children,function(h){h.classList.remove('sorted-desc','sorted-asc');});
 th.classList.add(desc?'sorted-desc':'sorted-asc');
 var pairs=[];var rows=body.querySelectorAll('tr.entry');
 rows.forEach(function(r){pairs.push([r,document.getElementById(r.getAttribute('data-detail'))]);});
 pairs.sort(function(a,b){var x=cellValue(a[0],col),y=cellValue(b[0],col);
  var xs=(typeof x==='number'&&!isNaN(x)),ys=(typeof y==='number'&&!isNaN(y));
  if(xs!==ys){return xs?-1:1;}if(x<y){return desc?1:-1;}if(x>y){return desc?-1:1;}return 0;});
 pairs.forEach(function(p){body.appendChild(p[0]);body.appendChild(p[1]);});}
function toggle(btn){var d=document.getElementById(btn.getAttribute('data-detail'));
 var open=d.classList.toggle('open');btn.textContent=open?'hide':'details';}
document.addEventListener('DOMContentLoaded',function(){
 document.querySelectorAll('#board thead th[data-col]').forEach(function(th){th.addEventListener('click',function(){sortBy(th);});});
 document.querySelectorAll('button.drill').forEach(function(b){b.addEventListener('click',function(){toggle(b);});});});
"""


def board_page(board: BoardDefinition, rows: list[Row], *, note: str = "") -> str:
    """The page's HTML text."""
    paper = paper_results(board.paper.key if board.paper else None)
    ranked = ranks([(_ms(r.result.summary.aggregate.self_last)[1], 100 * (r.result.summary.aggregate.self_last.std or 0))
                    for r in rows])
    for r, (k, tie) in zip(rows, ranked):
        r.rank, r.tie = k, tie
    rows = sorted(rows, key=lambda r: (r.rank, -(_ms(r.result.summary.aggregate.self_last)[1] or -1e9), r.label))
    paper_cols = [("self_last", "Paper Self A_last"), ("others_last", "Paper Others A_last")] if paper else []
    head = ["<th data-col='rank'>Rank</th>", "<th data-col='method'>Method</th>"]
    head += [f"<th data-col='{k}'>{t}</th>" for k, t in METRICS]
    head += [f"<th data-col='paper_{k}' title='{html.escape(paper['table'])}'>{t}</th>" for k, t in paper_cols] if paper else []
    head += ["<th data-col='uplink'>Uplink MB/round</th>", "<th data-col='downlink'>Downlink MB/round</th>",
             "<th data-col='train_s'>Train s/round</th>",
             "<th data-col='flops' title='training FLOPs over SFT&#39;s, at the local steps the method ran'>FLOPs x SFT</th>",
             "<th data-col='memory'>Peak memory MB</th>",
             "<th data-col='rules'>Rules</th>", "<th>Drill-down</th>"]
    body = []
    for i, r in enumerate(rows):
        a = r.result.summary.aggregate
        did = f"detail-{i}"
        cells = [f'<td class="num" data-sort="{-r.rank}">{r.rank}{"=" if r.tie else ""}</td>',
                 f'<td class="label">{html.escape(r.label)}</td>']
        cells += [_cell(*_ms(getattr(a, k))) for k, _ in METRICS]
        if paper:
            got = paper["methods"].get(r.method)
            for k, _ in paper_cols:
                v = got.get(k) if got else None
                cells.append(f'<td class="paper"{"" if v is None else f" data-sort={v[0]}"}>'
                             f'{"–" if v is None else f"{v[0]:.2f} ± {v[1]:.2f}"}</td>')
        cells += [_cell(*_ms(a.uplink_bytes_per_round, 1e-6, 3)), _cell(*_ms(a.downlink_bytes_per_round, 1e-6, 3)),
                  _cell(*_ms(a.train_seconds_per_round, 1, 2)), _flops_cell(r.result),
                  _cell(*_ms(a.peak_memory_bytes, 1e-6, 0))]
        verdict = "ok" if not r.refusals else f"refused ({', '.join(sorted({x.rule for x in r.refusals}))})"
        cells.append(f'<td class="{"ok" if not r.refusals else "refused"}" data-sort="{len(r.refusals)}">{verdict}</td>')
        cells.append(f'<td><button class="drill" data-detail="{did}">details</button></td>')
        cls = "entry" + (" is-refused" if r.refusals else "")
        body.append(f'<tr class="{cls}" data-method="{html.escape(r.label)}" data-detail="{did}">{"".join(cells)}</tr>')
        body.append(f'<tr class="detail" id="{did}"><td colspan="{len(head)}">{_detail(r)}</td></tr>')
    results = [r.result for r in rows]
    plots = ""
    if results:
        plots = (f"<h2>Accuracy over rounds</h2><img alt='accuracy over rounds' src='data:image/png;base64,{accuracy_plot(results)}'>"
                 f"<h2>Self vs Others (A_last)</h2><img alt='Self vs Others' src='data:image/png;base64,{self_vs_others_plot(results)}'>")
    paper_note = ""
    if paper:
        paper_note = (f"<p>Paper columns: {html.escape(paper['source'])}, {html.escape(paper['table'])}, mean ± std over "
                      "3 seeds, on the real benchmark with 1B/3B LLaVA models and 20 rounds x 100 steps: the setting "
                      "this embedded board mirrors, so they show the ordering the paper found, not digits to match.</p>")
    meta = [("benchmark", f"{board.benchmark_name} {board.benchmark_version}"), ("manifest hash", board.expected_manifest_hash or "–"),
            ("data hash", board.data_hash or "(not pinned yet: every file must agree)"),
            ("content hash", board.content_hash or "(not pinned: only the data hash is accepted)"), ("scenario", board.scenario_tag),
            ("allocation", board.allocation_name), ("seeds", ", ".join(map(str, board.seeds))),
            ("rounds x local steps", f"{board.rounds} x {board.local_steps}, evaluated every {board.eval_every_rounds}"),
            ("zoo weights", ", ".join(f"{m} {s[:12]}" for m, s in sorted(board.weights.items())) or "model-free"),
            ("communication budget", f"{board.communication_budget_bytes:,.0f} bytes per client and round"
             if board.communication_budget_bytes else "none")]
    meta_html = "".join(f"<tr><td><b>{html.escape(k)}</b></td><td>{html.escape(v)}</td></tr>" for k, v in meta)
    empty = ("" if rows else f"<p><b>No result files yet.</b> Build the board with "
                             f"<code class='cmd'>drake-bench leaderboard build {html.escape(board.name)}</code>.</p>")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(board.title)}</title>
<style>{CSS}</style><script>{JS}</script></head><body>
<h1>{html.escape(board.title)}</h1><p>{html.escape(board.description)}</p>{f'<p>{html.escape(note)}</p>' if note else ''}
<table class="meta">{meta_html}</table>
<p>Scores x100, mean ± population std over the seeds. Rank: by Self A_last; <span class="tie">n=</span> marks a tie
(another entry's mean ± std interval overlaps). Click a column to sort; <i>details</i> opens the per-client and per-task
drill-down, the result files and the command that reproduces the row.</p>{paper_note}{empty}
<table id="board"><thead><tr>{''.join(head)}</tr></thead><tbody>{''.join(body)}</tbody></table>
{plots}
<p>Written by <code>drake-bench leaderboard html</code> from the result files; the rules: <code>drake-bench leaderboard validate</code>.</p>
</body></html>
"""


def link(path: str | Path, page_dir: Path, link_base: str | None = None) -> str:
    """How the page links a result file: under ``link_base`` (e.g. a repository URL) by its repository path, else
    relative to the page, so the file opens from a checkout."""
    if link_base:
        return link_base.rstrip("/") + "/" + Path(path).as_posix().lstrip("./")
    return Path(os.path.relpath(Path(path).resolve(), page_dir.resolve())).as_posix()
