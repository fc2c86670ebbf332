"""One self-contained HTML page per board: no server, no CDN, no network (inline CSS, JavaScript and data).

The page holds what a reader of a board needs to trust and reproduce a row, laid out to read at a glance in a
1,400 px window: the sortable table in mean order of Self A_last (mean ± population std over the board's seeds),
each rank naming the entries whose ± std intervals overlap its own (the seeds do not resolve it from those), the
method column sticky and the cost columns compact and collapsible; the paper's numbers beside ours where the paper
ran the same method (cited by table); Self / Others and the measured cost (bytes, seconds labelled with the machine
the result file says measured them, memory); a per-client and per-task drill-down under each row; Self A_last by
model where the clients hold different models; the accuracy-over-rounds plot, drawn in the browser for the methods
the reader picks; two methods side by side, client by client; the Self-vs-Others plot; and for each row its result
files, the rules it passes or breaks, and the command that reproduces it. Every number comes from the result files'
summaries (which the validator recomputes from their raw tables).

A result file is submitted text: everything it says reaches the page escaped, through ``html.escape`` in the markup
and :func:`script_json` in the data the script reads.
"""

from __future__ import annotations

import base64
import html
import json
import os
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from statistics import mean, pstdev
from typing import Any, Sequence

from drake_bench.evaluation.compute import ComputeProbe
from drake_bench.evaluation.metrics import CurvePoint, MeanStd
from drake_bench.evaluation.table import MODEL_NOTE, model_groups, model_headers, model_rows
from drake_bench.results.result_file import Environment, RunResult
from drake_bench.core.provenance import describe
from drake_bench.leaderboard.boards import BoardDefinition
from drake_bench.leaderboard.rules import Refusal

PAPER_FILE = "paper_results.json"
METRICS = [("self_last", "Self A_last"), ("self_auc", "Self A_AUC"), ("others_last", "Others A_last"),
           ("others_auc", "Others A_AUC"), ("worst_client_self", "Worst client")]
TOP_PICKS = 5
"""Methods the accuracy plot draws before the reader picks: the top of the table; two dozen lines read as none."""

RANK_RULE = ("Rows are in descending order of mean Self A_last and ranked by it; “(ties 2–5)” lists the ranks whose "
             "mean ± std interval overlaps this entry's (its own included): the seeds do not resolve it from those.")


def paper_results(key: str | None) -> dict[str, Any] | None:
    """The paper's table for a board (``paper.key``), or None."""
    if not key:
        return None
    data = json.loads(resources.files("drake_bench.leaderboard").joinpath(PAPER_FILE).read_text(encoding="utf-8"))
    return data.get(key)


@dataclass
class Row:
    """One entry of the page: its result file and what the board says about it."""

    label: str
    method: str
    result: RunResult
    files: list[str]
    command: str
    refusals: list[Refusal] = field(default_factory=list)
    verification: str = "self-reported"  # verify.verification_state: verified, differs or self-reported


# ---------------------------------------------------------------------------------------------------- ranking


def _above(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Whether ``a``'s whole ``mean ± std`` interval lies above ``b``'s: the one way the seeds tell two apart."""
    return a[0] - a[1] > b[0] + b[1]


def ranks(values: Sequence[tuple[float | None, float]]) -> list[tuple[int, bool]]:
    """Rank by mean (higher is better): 1 + the number of entries whose whole ``mean ± std`` interval lies above
    this one's; a tie where another entry gets the same rank (their intervals overlap, or none is clearly above).
    scripts/paper_rank_report.py compares boards with the paper by this rule; the page orders by
    :func:`standings`, whose rank follows the mean."""
    out = []
    for m, s in values:
        if m is None:
            out.append(len(values))
            continue
        out.append(1 + sum(1 for m2, s2 in values if m2 is not None and _above((m2, s2), (m, s))))
    counts = Counter(out)
    return [(r, counts[r] > 1) for r in out]


def _spans(numbers: Sequence[int]) -> str:
    """Integers as runs, ``[1, 2, 3, 5]`` -> ``1–3, 5``: a tie with a dozen entries reads as one range."""
    runs: list[list[int]] = []
    for n in sorted(numbers):
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(f"{r[0]}–{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


@dataclass(frozen=True)
class Standing:
    """An entry's place in mean order and the places of the entries the board does not resolve it from."""

    rank: int | None
    """1-based position in descending mean order; None for an entry without a mean (it goes last)."""
    ties: tuple[int, ...] = ()
    """The ranks whose interval overlaps this one's, its own included; empty when no other does."""

    @property
    def tie_text(self) -> str:
        """What the page writes beside the rank: ``(ties 2–5)``, or nothing where every other entry is resolved."""
        return f"(ties {_spans(self.ties)})" if self.ties else ""


def standings(values: Sequence[tuple[float | None, float]]) -> list[Standing]:
    """Per ``(mean, std)`` in the order given: the rank in descending mean order (equal means keep the order given)
    and the ranks it ties with, those whose interval is neither wholly above nor wholly below its own. Unlike
    :func:`ranks`, an entry never ranks below one of lower mean: the overlap is shown beside the rank, not folded
    into it."""
    known = {i: (m, s) for i, (m, s) in enumerate(values) if m is not None}
    order = sorted(known, key=lambda i: -known[i][0])
    rank = {i: k for k, i in enumerate(order, start=1)}
    out = []
    for i in range(len(values)):
        if i not in known:
            out.append(Standing(None))
            continue
        tied = tuple(rank[j] for j in order if not _above(known[j], known[i]) and not _above(known[i], known[j]))
        out.append(Standing(rank[i], tied if len(tied) > 1 else ()))
    return out


def _ordered(rows: Sequence[Row]) -> list[tuple[Row, Standing]]:
    """The rows with their standings by Self A_last, in rank order: equal means by label, rows without one last."""
    rows = sorted(rows, key=lambda r: r.label)
    places = standings([_scaled(r.result.summary.aggregate.self_last) for r in rows])
    return sorted(zip(rows, places), key=lambda p: (p[1].rank is None, p[1].rank or 0))


# ---------------------------------------------------------------------------------------------------- numbers


def _scaled(ms: MeanStd, scale: float = 100.0) -> tuple[float | None, float]:
    """``(mean, std)`` times ``scale``; std 0 where one seed (or none) leaves nothing to spread."""
    if ms.mean is None:
        return None, 0.0
    return ms.mean * scale, ((ms.std or 0.0) * scale if ms.n > 1 else 0.0)


def _ms(ms: MeanStd, scale: float = 100.0, digits: int = 2) -> tuple[str, float | None]:
    """``mean ± std`` as text (std left out for one seed) and the mean, both times ``scale``."""
    if ms.mean is None:
        return "–", None
    text = f"{ms.mean * scale:.{digits}f}"
    if ms.n > 1 and ms.std is not None:
        text += f" ± {ms.std * scale:.{digits}f}"
    return text, ms.mean * scale


def _value_cell(mean_: float | None, std: float | None, cls: str = "num", digits: int = 2) -> str:
    """A mean with its ± std beside it in small type, sortable by the mean: a glance compares the means."""
    if mean_ is None:
        return f'<td class="{cls}">–</td>'
    sd = "" if std is None else f'<span class="sd"> ± {std:.{digits}f}</span>'
    return f'<td class="{cls}" data-sort="{mean_:.6f}">{mean_:.{digits}f}{sd}</td>'


def _score_cell(ms: MeanStd) -> str:
    """A score column's cell (x100); no ± for a single seed."""
    mean_, std = _scaled(ms)
    return _value_cell(mean_, std if ms.n > 1 else None)


def _cell(text: str, value: float | None, cls: str = "num") -> str:
    """A cell of plain text, sortable by ``value`` where there is one."""
    sort = "" if value is None else f' data-sort="{value:.6f}"'
    return f'<td class="{cls}"{sort}>{html.escape(text)}</td>'


def _cost_cell(ms: MeanStd, scale: float, digits: int, mark: str = "", where: str = "") -> str:
    """A cost column's cell: the mean alone, with ``mean ± std`` (and ``where`` it was measured) in its tooltip, so
    the cost columns fit beside the scores; ``mark`` (markup) follows the number."""
    text, value = _ms(ms, scale, digits)
    if value is None:
        return '<td class="num cost">–</td>'
    return (f'<td class="num cost" data-sort="{value:.6f}" title="{html.escape(text + where)}">'
            f'{value:.{digits}f}{mark}</td>')


def _flops_cell(res: RunResult) -> str:
    """The method's training FLOPs over SFT's at the steps it ran (the compute probe's record), marked where its
    fixed costs put it over a compute-matched budget; a dash for a run without a probe."""
    record = res.fl.extra.get("compute")
    if not record:
        return _cell("–", None, "num cost")
    probe, steps = ComputeProbe.from_record(record), res.fl.local_steps
    ratio = probe.relative_compute_at(steps)
    over = probe.over_budget_at(steps)
    return _cell(f"{ratio:.2f}" + (" over budget" if over else ""), ratio, "num cost over-budget" if over else "num cost")


def _pair(v: tuple[float, float] | None) -> str:
    """A drill-down's ``mean ± std``, or a dash."""
    return "–" if v is None else f"{v[0]:.2f} ± {v[1]:.2f}"


def script_json(data: Any) -> str:
    """``data`` as JSON that is inert inside a ``<script>`` element: ``<``, ``>`` and ``&`` become ``\\u`` escapes
    (which JSON.parse reads back), so no string of a result file can close the element or open another."""
    return json.dumps(data).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


# ---------------------------------------------------------------------------------------------------- machines


def machine(env: Environment) -> str:
    """The machine a result file's wall-clock seconds come from, as far as the file says: it records no host name,
    so the CPU model, its cores, the device and the OS build stand for it."""
    cores = f", {env.cpu_count} cores" if env.cpu_count else ""
    return f"{env.cpu_model or 'CPU model not recorded'}{cores}, {env.device}, {env.platform}"


def machine_tags(results: Sequence[RunResult]) -> dict[str, str]:
    """``M1``, ``M2``, ... per distinct :func:`machine`, in the order the results first name them."""
    tags: dict[str, str] = {}
    for r in results:
        tags.setdefault(machine(r.environment), f"M{len(tags) + 1}")
    return tags


def _machines_note(results: Sequence[RunResult], tags: dict[str, str]) -> str:
    """Which machine each tag of the wall-clock cells is: seconds from two machines do not compare."""
    count = Counter(machine(r.environment) for r in results)
    items = "".join(f"<li><b>{tag}</b> {html.escape(m)} ({count[m]} row{'s' * (count[m] > 1)})</li>"
                    for m, tag in tags.items())
    lead = ("Wall-clock seconds (Train s/round, and the drill-down's training and aggregation seconds) as each result "
            "file records its machine" + (": one machine" if len(tags) == 1 else
                                          f": {len(tags)} machines, so compare seconds only between rows of one"))
    return f"<div class='machines'><p>{lead}.</p><ul>{items}</ul></div>"


# ---------------------------------------------------------------------------------------------------- plots


def _png(fig: Any) -> str:
    from drake_bench.evaluation.plots import png_bytes

    return base64.b64encode(png_bytes(fig, dpi=90)).decode("ascii")


def self_vs_others_plot(results: Sequence[RunResult]) -> str:
    """Self A_last against Others A_last, one point per method with its ± std bars (x100), as base64 PNG."""
    from matplotlib.figure import Figure

    from drake_bench.evaluation.plots import legend_below, legend_height, method_styles

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


def _curve(points: Sequence[CurvePoint]) -> list[list[float]]:
    """A curve as ``[round, mean, std]`` triples (x100), what the page's script draws."""
    return [[p.x, round(100 * p.mean, 4), round(100 * p.std, 4)] for p in points]


def page_data(pairs: Sequence[tuple[Row, Standing]]) -> dict[str, Any]:
    """What the page's script draws from, in table order: per method its rank, Self and Others curves, board Self
    A_last, and per client ``[client, model, mean, std]`` of Self A_last (x100). The script colours the lines the
    reader picks from ten distinct colours: a board's two dozen colours would give two picked lines near twins."""
    methods = []
    for r, place in pairs:
        res = r.result
        clients = [[c["client"], res.model_allocation.clients.get(str(c["client"]), ""), *c.get("self_last", (None, None))]
                   for c in per_client(res)]
        methods.append({"label": r.label, "rank": place.rank, "self": _curve(res.summary.self_curve),
                        "others": _curve(res.summary.others_curve),
                        "self_last": list(_scaled(res.summary.aggregate.self_last)), "clients": clients})
    return {"methods": methods, "top": TOP_PICKS}


# ---------------------------------------------------------------------------------------------------- drill-down


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


VERIFICATION_LABELS = {"verified": "verified", "differs": "rerun differs", "self-reported": "self-reported"}
VERIFICATION_TEXT = {
    "verified": "Verified: <code>drake-bench leaderboard verify</code> reran this file's configuration and got this "
                "file's numbers, digit for digit (its record, verification.json, names this file's sha256).",
    "differs": "Not reproduced: <code>drake-bench leaderboard verify</code> reran this file's configuration and got "
               "other numbers (verification.json lists where they differ).",
    "self-reported": "Self-reported: no rerun of this file's configuration has been recorded for the file as it is "
                     "(<code>drake-bench leaderboard verify FILE</code> makes one). Every rule reads the file itself, "
                     "so a file whose summary recomputes passes them whoever wrote it.",
}
"""What the page says of an entry's verification (drake_bench/leaderboard/verify.py)."""


def _detail(row: Row, tags: dict[str, str]) -> str:
    """The drill-down under a row: how to reproduce it, what computed it, its files, rules, cost, clients, tasks."""
    res = row.result
    clients = "".join(
        f"<tr><td>{c['client']}</td><td>{html.escape(res.model_allocation.clients.get(str(c['client']), ''))}</td>"
        f"<td>{_pair(c.get('self_last'))}</td><td>{_pair(c.get('self_auc'))}</td>"
        f"<td>{_pair(c.get('others_last'))}</td><td>{_pair(c.get('others_auc'))}</td></tr>" for c in per_client(res))
    tasks = "".join(
        f"<tr><td>{html.escape(t['task'])}</td><td>{t['owner'] if t['owner'] is not None else ''}</td>"
        f"<td>{_pair(t['self'])}</td><td>{_pair(t['others'])}</td><td>{t['items']}</td></tr>" for t in per_task(res))
    rules = ("<p class='ok'>passes every rule of this board</p>" if not row.refusals else
             "<ul class='refused'>" + "".join(f"<li><b>{html.escape(r.rule)}</b>: {html.escape(r.message)}</li>"
                                              for r in row.refusals) + "</ul>")
    rules += f"<p>{VERIFICATION_TEXT[row.verification]}</p>"
    files = "".join(f'<li><a href="{html.escape(f)}">{html.escape(f)}</a></li>' for f in row.files)
    a = res.summary.aggregate
    env = res.environment
    cost = (f"uplink {_ms(a.uplink_bytes_total, 1e-6)[0]} MB total, downlink {_ms(a.downlink_bytes_total, 1e-6)[0]} MB "
            f"total; training {_ms(a.train_seconds_total, 1, 1)[0]} s; aggregation "
            f"{_ms(a.aggregate_seconds_total, 1, 2)[0]} s (seconds on {tags[machine(env)]}: {machine(env)}); "
            f"peak memory {_ms(a.peak_memory_bytes, 1e-6, 0)[0]} MB")
    numerics = res.numerics or "native (made before the setting existed)"
    computed = (f"numerics {numerics}; kernels {env.cpu_capability or 'not recorded'}"
                f"{f' on {env.cpu_model}' if env.cpu_model else ''}; torch {env.torch}, transformers {env.transformers}, "
                f"peft {env.peft}; {env.device}; {describe(res.drake_bench_version, env.drake_bench_source)}"
                f"{f'; method from {res.method.package}' if res.method.package else ''}"
                f"; scoring rules {res.evaluation.scorer_version}")
    return (f"<div class='drill'><h4>{html.escape(row.label)}</h4>"
            f"<p>Reproduce: <code class='cmd'>{html.escape(row.command)}</code></p>"
            f"<p class='computed'>Computed with: {html.escape(computed)}</p>"
            f"<p>Result files:</p><ul>{files}</ul><p>Rules:</p>{rules}<p>Cost (mean over seeds): {html.escape(cost)}</p>"
            "<h5>Per client (x100, mean ± std over seeds)</h5><table class='sub clients'><tr><th>client</th><th>model</th>"
            f"<th>Self A_last</th><th>Self A_AUC</th><th>Others A_last</th><th>Others A_AUC</th></tr>{clients}</table>"
            "<h5>Per task at the last round (Self: the owner's model; Others: every other client's)</h5>"
            "<table class='sub tasks'><tr><th>task</th><th>owner</th><th>Self</th><th>Others</th><th>items (Self, "
            f"all seeds)</th></tr>{tasks}</table></div>")


# ---------------------------------------------------------------------------------------------------- the table


def _head(paper: dict[str, Any] | None, tags: dict[str, str]) -> list[str]:
    """The board table's header cells; the cost ones carry ``cost`` (the toggle hides them), the seconds name the
    machines their numbers came from."""
    def th(col: str, text: str, title: str = "", cls: str = "") -> str:
        attrs = (f' title="{html.escape(title)}"' if title else "") + (f' class="{cls}"' if cls else "")
        return f'<th data-col="{col}"{attrs}>{text}</th>'

    head = [th("method", "Method", cls="label"), th("rank", "Rank", RANK_RULE)]
    head += [th(k, t, f"{t}, x100, mean ± std over seeds", "sorted-desc" if k == "self_last" else "") for k, t in METRICS]
    if paper:
        head += [th(f"paper_{k}", f"Paper {t}", f"{paper['table']}: {t}") for k, t in
                 (("self_last", "Self A_last"), ("others_last", "Others A_last"))]
    machines = "; ".join(f"{tag}: {m}" for m, tag in tags.items())
    head += [th("uplink", "Up MB/round", "uplink MB per round, summed over clients", "cost"),
             th("downlink", "Down MB/round", "downlink MB per round, summed over clients", "cost"),
             th("train_s", f"Train s/round <span class='on'>on {'/'.join(tags.values())}</span>",
                f"training seconds per round, on {machines}", "cost"),
             th("flops", "FLOPs x SFT", "training FLOPs over SFT's, at the local steps the method ran", "cost"),
             th("memory", "Peak mem MB", "peak memory, MB", "cost"),
             th("rules", "Rules"), "<th>Drill-down</th>"]
    return head


def _paper_cells(paper: dict[str, Any] | None, method: str) -> list[str]:
    """The paper's Self and Others A_last for a method it ran, dashes for one it did not; none without a paper."""
    if not paper:
        return []
    got = paper["methods"].get(method) or {}
    return [_value_cell(*(got.get(k) or (None, None)), cls="paper") for k in ("self_last", "others_last")]


def _entry(i: int, row: Row, place: Standing, paper: dict[str, Any] | None, tags: dict[str, str], width: int) -> str:
    """One entry's row of the table and its (closed) drill-down row."""
    a, did = row.result.summary.aggregate, f"detail-{i}"
    where = machine(row.result.environment)
    tag = f' <sup class="machine">{tags[where]}</sup>'
    ties = f' <span class="ties">{place.tie_text}</span>' if place.ties else ""
    rank = (f'<td class="num rank" data-sort="{-place.rank}">{place.rank}{ties}</td>' if place.rank is not None
            else '<td class="num rank">–</td>')
    cells = [f'<td class="label">{html.escape(row.label)}</td>', rank]
    cells += [_score_cell(getattr(a, k)) for k, _ in METRICS]
    cells += _paper_cells(paper, row.method)
    cells += [_cost_cell(a.uplink_bytes_per_round, 1e-6, 3), _cost_cell(a.downlink_bytes_per_round, 1e-6, 3),
              _cost_cell(a.train_seconds_per_round, 1, 1, tag, f" s, on {tags[where]}: {where}"),
              _flops_cell(row.result), _cost_cell(a.peak_memory_bytes, 1e-6, 0)]
    rules = sorted({x.rule for x in row.refusals})
    verdict = "ok" if not rules else f"refused ({', '.join(rules)})"
    badge = f'<br><span class="verification {row.verification}">{VERIFICATION_LABELS[row.verification]}</span>'
    cells.append(f'<td class="{"refused" if rules else "ok"}" data-sort="{len(row.refusals)}">{html.escape(verdict)}'
                 f'{badge}</td>')
    cells.append(f'<td><button class="drill" data-detail="{did}">details</button></td>')
    cls = "entry" + (" is-refused" if row.refusals else "")
    return (f'<tr class="{cls}" data-method="{html.escape(row.label)}" data-detail="{did}">{"".join(cells)}</tr>'
            f'<tr class="detail" id="{did}"><td colspan="{width}">{_detail(row, tags)}</td></tr>')


def _board_table(pairs: Sequence[tuple[Row, Standing]], paper: dict[str, Any] | None, tags: dict[str, str]) -> str:
    """The sortable table in its scrolling frame, with the button that folds the cost columns."""
    head = _head(paper, tags)
    body = "".join(_entry(i, r, place, paper, tags, len(head)) for i, (r, place) in enumerate(pairs))
    return ("<p class='controls'><button type='button' id='toggle-cost'>hide cost columns</button></p>"
            f"<div class='table-wrap' id='board-wrap'><table id='board'><thead><tr>{''.join(head)}</tr></thead>"
            f"<tbody>{body}</tbody></table></div>")


def _plain_table(headers: Sequence[str], body: Sequence[Sequence[str]], table_id: str) -> str:
    """A small table of text cells, every one escaped; columns after the first right-aligned."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    rows = "".join("<tr>" + "".join(f"<td{' class=num' if j else ''}>{html.escape(c)}</td>" for j, c in enumerate(r))
                   + "</tr>" for r in body)
    return f"<table class='sub' id='{table_id}'><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def _model_section(results: Sequence[RunResult]) -> str:
    """Self A_last by model, as summary.md has it, where the clients hold different models: an overall mean can
    hide a group of clients that gains nothing."""
    groups = model_groups(results)
    if not groups:
        return ""
    return (f"<h2 id='by-model'>Self A_last by model</h2><p>{html.escape(MODEL_NOTE)} Rows in the table's order.</p>"
            + _plain_table(model_headers(groups), model_rows(results, groups), "by-model-table"))


PLOT_SECTION = f"""<h2 id="over-rounds">Accuracy over rounds</h2>
<p>Self and Others (x100) after each evaluation round, mean over seeds with a ± std band; the top of the table is
drawn first. Pick methods: <button type="button" data-pick="top">top {TOP_PICKS}</button> <button type="button"
data-pick="all">all</button> <button type="button" data-pick="none">none</button></p>
<div id="plot-pick"></div>
<div class="plots"><svg id="plot-self" role="img" aria-label="Self over rounds"></svg>
<svg id="plot-others" role="img" aria-label="Others over rounds"></svg></div>"""

COMPARE_SECTION = """<h2 id="compare">Two methods, client by client</h2>
<p>Self A_last (x100, mean ± std over seeds) of each client under method A and method B, and A − B, the difference
of their means.</p>
<p><label>A <select id="cmp-a"></select></label> <label>B <select id="cmp-b"></select></label>
<span id="cmp-summary"></span></p>
<table class="sub" id="compare-table"><thead><tr><th>client</th><th>model</th><th id="cmp-head-a">A</th>
<th id="cmp-head-b">B</th><th>A − B</th></tr></thead><tbody></tbody></table>"""


# ---------------------------------------------------------------------------------------------------- the page


CSS = r"""
body{font-family:system-ui,sans-serif;margin:1em;color:#222}
table{border-collapse:collapse;font-size:13px}th,td{border:1px solid #ccc;padding:3px 5px}#board th,#board td{padding:2px 4px}
.table-wrap{overflow-x:auto;max-width:100%}
#board{font-size:12.5px}#board td{white-space:nowrap}
#board th{background:#f0f0f0;cursor:pointer;vertical-align:bottom;font-weight:600}
#board th.sorted-desc:after{content:" \25BC"}#board th.sorted-asc:after{content:" \25B2"}
#board .label{position:sticky;left:0;z-index:1;background:#fff;box-shadow:inset -1px 0 0 #999}
#board th.label{background:#f0f0f0;z-index:2}#board tr.entry:hover td{background:#f4f7ff}
td.num{text-align:right;white-space:nowrap}td.paper{color:#666;text-align:right;white-space:nowrap;font-style:italic}
.sd,.ties,th .on{color:#777;font-size:11px;font-weight:normal}sup.machine{color:#06c;font-size:10px}
table.hide-cost .cost{display:none}
tr.detail{display:none}tr.detail.open{display:table-row}tr.is-refused td.label{color:#a00}
.drill{max-width:1200px;white-space:normal}.ok{color:#070}.refused{color:#a00}.over-budget{color:#a60}
.verification{font-size:11px}.verification.verified{color:#070}.verification.differs{color:#a00}.verification.self-reported{color:#777}
code.cmd{background:#f6f6f6;padding:2px 4px;font-size:12px;word-break:break-all}
img{max-width:100%}.meta td{border:none;padding:1px 8px}.machines ul{margin-top:0}.machines{font-size:13px}
.nav a{margin-right:1em}table.sub td.num{text-align:right}
#plot-pick{display:grid;grid-template-columns:repeat(auto-fill,minmax(14em,1fr));font-size:13px;margin:.3em 0}
#plot-pick label{white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.swatch{display:inline-block;width:.8em;height:.8em;margin:0 .3em;vertical-align:middle;border:1px solid #ccc}
.plots{display:flex;flex-wrap:wrap;gap:1em}.plots svg{width:640px;max-width:100%;height:auto;font-size:11px}
svg .grid{stroke:#ddd}svg .axis{stroke:#666}svg .line{fill:none;stroke-width:2}svg .title{font-weight:600;font-size:13px}
#compare-table td.pos{color:#070}#compare-table td.neg{color:#a00}#compare-table tr.total td{font-weight:600}
"""

JS = r"""
"use strict";
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
function toggleCost(btn){var hidden=document.getElementById('board').classList.toggle('hide-cost');
 btn.textContent=hidden?'show cost columns':'hide cost columns';}

// the accuracy-over-rounds plot, one SVG panel per score, drawn from the page's data for the picked methods
var SVG_NS='http://www.w3.org/2000/svg';
function svgEl(parent,tag,attrs,text){var e=document.createElementNS(SVG_NS,tag);
 Object.keys(attrs).forEach(function(k){e.setAttribute(k,attrs[k]);});
 if(text!==undefined){e.textContent=text;}parent.appendChild(e);return e;}
function ticks(lo,hi){var raw=(hi-lo)/5;var mag=Math.pow(10,Math.floor(Math.log10(raw)));
 var step=[1,2,5,10].map(function(f){return f*mag;}).find(function(s){return s>=raw;});var out=[];
 for(var v=Math.ceil(lo/step)*step;v<=hi;v+=step){out.push(Math.round(v/step)*step);}return out;}
function drawPanel(svg,data,key,title,chosen){
 var W=640,H=320,L=46,R=10,T=24,B=36;svg.setAttribute('viewBox','0 0 '+W+' '+H);
 while(svg.firstChild){svg.removeChild(svg.firstChild);}
 svgEl(svg,'text',{x:L,y:15,'class':'title'},title);
 var xs=[].concat.apply([],data.methods.map(function(m){return m[key].map(function(p){return p[0];});}));
 var shown=chosen.length?chosen:data.methods;
 var ys=[].concat.apply([],shown.map(function(m){return [].concat.apply([],m[key].map(function(p){return [p[1]-p[2],p[1]+p[2]];}));}));
 if(!xs.length||!ys.length){svgEl(svg,'text',{x:W/2,y:H/2,'text-anchor':'middle'},'no evaluation points');return;}
 var x0=Math.min.apply(null,xs),x1=Math.max.apply(null,xs),y0=Math.min.apply(null,ys),y1=Math.max.apply(null,ys);
 if(x1===x0){x0-=1;x1+=1;}if(y1-y0<1e-9){y0-=1;y1+=1;}var pad=(y1-y0)*0.05;y0-=pad;y1+=pad;
 function X(v){return L+(v-x0)/(x1-x0)*(W-L-R);}function Y(v){return H-B-(v-y0)/(y1-y0)*(H-T-B);}
 ticks(y0,y1).forEach(function(v){svgEl(svg,'line',{x1:L,x2:W-R,y1:Y(v),y2:Y(v),'class':'grid'});
  svgEl(svg,'text',{x:L-4,y:Y(v)+4,'text-anchor':'end'},String(+v.toFixed(2)));});
 var rounds=xs.filter(function(v,i){return xs.indexOf(v)===i;});
 (rounds.length<=12?rounds:ticks(x0,x1)).forEach(function(v){
  svgEl(svg,'text',{x:X(v),y:H-B+14,'text-anchor':'middle'},String(v));});
 svgEl(svg,'line',{x1:L,x2:W-R,y1:H-B,y2:H-B,'class':'axis'});svgEl(svg,'line',{x1:L,x2:L,y1:T,y2:H-B,'class':'axis'});
 svgEl(svg,'text',{x:(L+W-R)/2,y:H-4,'text-anchor':'middle'},'round');
 svgEl(svg,'text',{x:12,y:(T+H-B)/2,'text-anchor':'middle',transform:'rotate(-90 12 '+(T+H-B)/2+')'},'score (x100)');
 chosen.forEach(function(m){var pts=m[key];if(!pts.length){return;}
  var upper=pts.map(function(p){return X(p[0])+','+Y(p[1]+p[2]);});
  var lower=pts.slice().reverse().map(function(p){return X(p[0])+','+Y(p[1]-p[2]);});
  svgEl(svg,'polygon',{points:upper.concat(lower).join(' '),fill:m.color,'fill-opacity':0.12,'class':'band'});
  var line=svgEl(svg,'polyline',{points:pts.map(function(p){return X(p[0])+','+Y(p[1]);}).join(' '),
   stroke:m.color,'class':'line','data-method':m.label});
  svgEl(line,'title',{},m.label);
  pts.forEach(function(p){var c=svgEl(svg,'circle',{cx:X(p[0]),cy:Y(p[1]),r:3,fill:m.color,'class':'point'});
   svgEl(c,'title',{},m.label+': round '+p[0]+', '+p[1].toFixed(2)+' \u00b1 '+p[2].toFixed(2));});});}
var PALETTE=['#1f77b4','#ff7f0e','#2ca02c','#d62728','#9467bd','#8c564b','#e377c2','#7f7f7f','#bcbd22','#17becf'];
// a picked method keeps its colour while it stays picked; a new pick takes the first colour no other picked one has
function pickColours(data){var boxes=document.querySelectorAll('#plot-pick input');var used={};var chosen=[];
 boxes.forEach(function(cb){var m=data.methods[+cb.value];if(!cb.checked){m.color=null;}else if(m.color){used[m.color]=1;}});
 boxes.forEach(function(cb,i){var m=data.methods[+cb.value];
  if(cb.checked&&!m.color){m.color=PALETTE.filter(function(c){return !used[c];})[0]||PALETTE[i%PALETTE.length];used[m.color]=1;}
  if(cb.checked){chosen.push(m);}cb.nextSibling.style.background=m.color||'transparent';});
 return chosen;}
function drawPlots(data){var chosen=pickColours(data);
 drawPanel(document.getElementById('plot-self'),data,'self','Self',chosen);
 drawPanel(document.getElementById('plot-others'),data,'others','Others',chosen);}
function buildPicker(data){var box=document.getElementById('plot-pick');
 data.methods.forEach(function(m,i){var lab=document.createElement('label');var cb=document.createElement('input');
  cb.type='checkbox';cb.value=i;cb.checked=i<data.top;cb.addEventListener('change',function(){drawPlots(data);});
  var sw=document.createElement('span');sw.className='swatch';
  lab.appendChild(cb);lab.appendChild(sw);lab.appendChild(document.createTextNode((m.rank||'\u2013')+'. '+m.label));lab.title=m.label;
  box.appendChild(lab);});
 document.querySelectorAll('button[data-pick]').forEach(function(b){b.addEventListener('click',function(){
  var how=b.getAttribute('data-pick');
  box.querySelectorAll('input').forEach(function(cb,i){cb.checked=how==='all'||(how==='top'&&i<data.top);});
  drawPlots(data);});});
 drawPlots(data);}

// two methods, client by client
function fmtPair(v){return v&&v[0]!==null&&v[0]!==undefined?v[0].toFixed(2)+(v[1]?' \u00b1 '+v[1].toFixed(2):''):'\u2013';}
function addCell(tr,text,cls){var td=tr.insertCell();td.textContent=text;if(cls){td.className=cls;}return td;}
function addDiff(tr,a,b){if(a===null||a===undefined||b===null||b===undefined){addCell(tr,'\u2013','num');return 0;}
 var d=a-b;addCell(tr,(d>0?'+':'')+d.toFixed(2),'num diff '+(d>0?'pos':d<0?'neg':'even'));return d;}
function drawCompare(data){var a=data.methods[+document.getElementById('cmp-a').value];
 var b=data.methods[+document.getElementById('cmp-b').value];
 document.getElementById('cmp-head-a').textContent='A: '+a.label;document.getElementById('cmp-head-b').textContent='B: '+b.label;
 var body=document.querySelector('#compare-table tbody');while(body.firstChild){body.removeChild(body.firstChild);}
 function byClient(m){var out={};m.clients.forEach(function(c){out[c[0]]=c;});return out;}
 var ca=byClient(a),cb=byClient(b);var ids=Object.keys(ca).concat(Object.keys(cb).filter(function(k){return !(k in ca);}));
 ids.sort(function(x,y){return x-y;});var ahead=0,behind=0;
 ids.forEach(function(id){var x=ca[id]||[],y=cb[id]||[];var tr=body.insertRow();tr.className='client';
  addCell(tr,id);addCell(tr,[x[1],y[1]].filter(function(v,i,all){return v&&all.indexOf(v)===i;}).join(' / '));
  addCell(tr,fmtPair([x[2],x[3]]),'num');addCell(tr,fmtPair([y[2],y[3]]),'num');
  var d=addDiff(tr,x[2],y[2]);if(d>0){ahead++;}else if(d<0){behind++;}});
 var tr=body.insertRow();tr.className='total';addCell(tr,'all');addCell(tr,'board Self A_last');
 addCell(tr,fmtPair(a.self_last),'num');addCell(tr,fmtPair(b.self_last),'num');addDiff(tr,a.self_last[0],b.self_last[0]);
 document.getElementById('cmp-summary').textContent='A is ahead on '+ahead+' and behind on '+behind+' of '+ids.length+' clients.';}
function buildCompare(data){['cmp-a','cmp-b'].forEach(function(id,k){var sel=document.getElementById(id);
  data.methods.forEach(function(m,i){var o=document.createElement('option');o.value=i;o.textContent=(m.rank||'\u2013')+'. '+m.label;
   sel.appendChild(o);});
  sel.value=String(Math.min(k,data.methods.length-1));sel.addEventListener('change',function(){drawCompare(data);});});
 drawCompare(data);}

document.addEventListener('DOMContentLoaded',function(){
 document.querySelectorAll('#board thead th[data-col]').forEach(function(th){th.addEventListener('click',function(){sortBy(th);});});
 document.querySelectorAll('button.drill').forEach(function(b){b.addEventListener('click',function(){toggle(b);});});
 var cost=document.getElementById('toggle-cost');if(cost){cost.addEventListener('click',function(){toggleCost(cost);});}
 var data=JSON.parse(document.getElementById('board-data').textContent);
 if(data.methods.length){buildPicker(data);buildCompare(data);}});
"""


def _meta_table(board: BoardDefinition) -> str:
    """The board's settings: which benchmark, data, scenario, seeds and budget every row was run under."""
    meta = [("benchmark", f"{board.benchmark_name} {board.benchmark_version}"), ("manifest hash", board.expected_manifest_hash or "–"),
            ("data hash", board.data_hash or "(not pinned yet: every file must agree)"),
            ("content hash", board.content_hash or "(not pinned: only the data hash is accepted)"), ("scenario", board.scenario_tag),
            ("allocation", board.allocation_name), ("seeds", ", ".join(map(str, board.seeds))),
            ("rounds x local steps", f"{board.rounds} x {board.local_steps}, evaluated every {board.eval_every_rounds}"),
            ("zoo weights", ", ".join(f"{m} {s[:12]}" for m, s in sorted(board.weights.items())) or "model-free"),
            ("communication budget", f"{board.communication_budget_bytes:,.0f} bytes per client and round"
             if board.communication_budget_bytes else "none")]
    rows = "".join(f"<tr><td><b>{html.escape(k)}</b></td><td>{html.escape(v)}</td></tr>" for k, v in meta)
    return f'<table class="meta">{rows}</table>'


def _paper_note(paper: dict[str, Any] | None) -> str:
    """Where the paper columns come from, and how far they compare."""
    if not paper:
        return ""
    return (f"<p>Paper columns: {html.escape(paper['source'])}, {html.escape(paper['table'])}, mean ± std over "
            "3 seeds, on the real benchmark with 1B/3B LLaVA models and 20 rounds x 100 steps: the setting "
            "this embedded board mirrors, so they show the ordering the paper found, not digits to match.</p>")


def _nav(results: Sequence[RunResult]) -> str:
    """Links to the page's sections, the by-model one only where it is there; none on an empty board."""
    if not results:
        return ""
    sections = [("board", "Table"), ("by-model", "By model"), ("over-rounds", "Accuracy over rounds"),
                ("compare", "Two methods"), ("self-vs-others", "Self vs Others")]
    return "".join(f"<a href='#{k}'>{t}</a>" for k, t in sections if k != "by-model" or model_groups(results))


def _sections(results: Sequence[RunResult], tags: dict[str, str]) -> str:
    """Everything below the table: the machines, Self A_last by model, the plots and the comparison."""
    if not results:
        return ""
    return (_machines_note(results, tags) + _model_section(results) + PLOT_SECTION + COMPARE_SECTION
            + f"<h2 id='self-vs-others'>Self vs Others (A_last)</h2><img alt='Self vs Others' "
            f"src='data:image/png;base64,{self_vs_others_plot(results)}'>")


def board_page(board: BoardDefinition, rows: list[Row], *, note: str = "") -> str:
    """The page's HTML text, rows in rank order."""
    paper = paper_results(board.paper.key if board.paper else None)
    pairs = _ordered(rows)
    results = [r.result for r, _ in pairs]
    tags = machine_tags(results)
    empty = ("" if rows else f"<p><b>No result files yet.</b> Build the board with "
                             f"<code class='cmd'>drake-bench leaderboard build {html.escape(board.name)}</code>.</p>")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(board.title)}</title>
<style>{CSS}</style><script>{JS}</script></head><body>
<h1>{html.escape(board.title)}</h1><p>{html.escape(board.description)}</p>{f'<p>{html.escape(note)}</p>' if note else ''}
{_meta_table(board)}
<p class="nav">{_nav(results)}</p>
<p>Scores x100, mean ± population std over the seeds. {html.escape(RANK_RULE)} Click a column to sort;
<i>details</i> opens the per-client and per-task drill-down, the result files and the command that reproduces the
row. Cost columns show the mean over seeds (the ± std in each cell's tooltip).</p>{_paper_note(paper)}{empty}
{_board_table(pairs, paper, tags) if rows else ''}
{_sections(results, tags)}
<script type="application/json" id="board-data">{script_json(page_data(pairs))}</script>
<p>Written by <code>drake-bench leaderboard html</code> from the result files; the rules: <code>drake-bench leaderboard validate</code>.</p>
</body></html>
"""


def link(path: str | Path, page_dir: Path, link_base: str | None = None) -> str:
    """How the page links a result file: under ``link_base`` (e.g. a repository URL) by its repository path, else
    relative to the page, so the file opens from a checkout."""
    if link_base:
        return link_base.rstrip("/") + "/" + Path(path).as_posix().lstrip("./")
    return Path(os.path.relpath(Path(path).resolve(), page_dir.resolve())).as_posix()
