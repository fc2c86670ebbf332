#!/usr/bin/env python
"""Each canonical board's ranking beside the FedMosaic paper's: which of its orderings hold at toy scale.

The boards are built and rendered by the package (`drake-bench leaderboard build BOARD`); this script only reads
the result files a board's rules accept and the paper's numbers the package ships
(``drake_bench/leaderboard/paper_results.json``, the table the board's ``paper.key`` names), and writes
``<tables>/paper-ranks.md`` / ``.json`` (default docs/findings/) and a scatter per board of our means against
the paper's (``<tables>/paper-ranks/<board>.png``). Per board and metric (Self and Others, A_last and
A_AUC):

* every method both sides have: our mean ± population std over seeds and rank, the paper's mean ± std and rank.
  A rank is 1 + the number of methods whose whole ``mean ± std`` interval lies above this one's, so methods whose
  intervals overlap share a rank (``=``): a rank the paper's own tables can be set beside (the board page instead
  numbers rows in mean order and lists, for each, the ranks its interval overlaps; the ties are the same pairs);
* the pairs the paper *resolves* (intervals apart): how many keep the paper's order here, how many are reversed,
  and how many of each the board resolves in turn (its intervals apart too). A pair the paper does not resolve
  has no order to keep and is left out;
* Kendall's tau-a between the two mean orders over every pair (concordant minus discordant pairs, over all pairs),
  a single summary that counts unresolved pairs as well, so it is read beside the resolved-pair counts.

No method is tuned toward the paper: each runs the board's fixed settings with its registered defaults.

    python scripts/paper_rank_report.py                                   # every board that has a paper table
    python scripts/paper_rank_report.py --boards drake-synth-dynamic --tables /tmp/out
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
from pathlib import Path
from typing import Any

from drake_bench.leaderboard.boards import DEFAULT_ROOT, BoardDefinition, canonical_boards
from drake_bench.leaderboard.html import paper_results, ranks
from drake_bench.leaderboard.render import board_files
from drake_bench.leaderboard.rules import validate

METRICS = {
    "self_last": "Self A_last",
    "self_auc": "Self A_AUC",
    "others_last": "Others A_last",
    "others_auc": "Others A_AUC",
}
LABELS = {
    "sft": "SFT",
    "fedit": "FedIT",
    "ditto": "DITTO",
    "fedsim": "FedSim",
    "feddpa": "FedDPA",
    "feddat": "FedDAT",
    "perada": "PerAda",
    "fedmkt": "FedMKT",
    "takfl": "TAKFL",
    "fedmosaic": "FedMosaic",
}


TRAFFIC = (
    "uplink_bytes_per_round",
    "downlink_bytes_per_round",
    "uplink_elements_per_round",
    "downlink_elements_per_round",
)


def ours(
    board: BoardDefinition, root: Path
) -> tuple[dict[str, dict[str, list[float]]], dict[str, dict[str, float | None]], list[str], dict[str, list[int]]]:
    """Per method (default settings only, as the paper ran them): per metric, the per-seed scores x100 of the files
    the board's rules accept; the measured traffic per round (mean over seeds); one line per refused file; and the
    seeds done of each entry still being built (a partial file is left out as the rules say, but it is progress,
    not a fault, so it is not listed among the refusals)."""
    results, refusals = validate(board_files(board.results_dir(root)), board)
    partial = {path: res for path, res in results if res.status == "partial" and not res.method_settings}
    building = {res.method.name: sorted(res.seeds) for res in partial.values()}
    refused = {r.file for r in refusals}
    refusals = [r for r in refusals if r.file not in partial]
    out: dict[str, dict[str, list[float]]] = {}
    traffic: dict[str, dict[str, float | None]] = {}
    for path, res in results:
        if path in refused or res.method_settings:
            continue
        by_seed = {p.seed: p for p in res.summary.per_seed}
        out[res.method.name] = {m: [100 * getattr(by_seed[s], m) for s in res.seeds] for m in METRICS}
        traffic[res.method.name] = {t: getattr(res.summary.aggregate, t).mean for t in TRAFFIC}
    return out, traffic, sorted({f"`{r.rule}` {r.file}" for r in refusals}), building


def _missing(method: str, building: dict[str, list[int]]) -> str:
    """A method not on the board yet, with the seeds its partial result file holds where it is being built."""
    label = LABELS.get(method, method)
    if method not in building:
        return label
    seeds = building[method]
    return f"{label} (being built: seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))} done)"


def apart(a: tuple[float, float], b: tuple[float, float]) -> int:
    """+1 when a's interval lies wholly above b's, -1 below, 0 when they overlap."""
    if a[0] - a[1] > b[0] + b[1]:
        return 1
    if b[0] - b[1] > a[0] + a[1]:
        return -1
    return 0


def compare(toy: dict[str, tuple[float, float]], paper: dict[str, tuple[float, float]]) -> dict[str, Any]:
    """Ranks side by side, the paper-resolved pairs and Kendall's tau-a over the methods both have."""
    methods = [m for m in paper if m in toy]
    toy_rank = dict(zip(methods, ranks([toy[m] for m in methods])))
    paper_rank = dict(zip(methods, ranks([paper[m] for m in methods])))
    pairs = []
    concordant = discordant = 0
    for a, b in itertools.combinations(methods, 2):
        sign_paper = (paper[a][0] > paper[b][0]) - (paper[a][0] < paper[b][0])
        sign_toy = (toy[a][0] > toy[b][0]) - (toy[a][0] < toy[b][0])
        concordant += sign_paper * sign_toy > 0
        discordant += sign_paper * sign_toy < 0
        resolved = apart(paper[a], paper[b])
        if resolved:
            hi, lo = (a, b) if resolved > 0 else (b, a)
            toy_resolved = apart(toy[hi], toy[lo])
            pairs.append(
                {
                    "paper_higher": hi,
                    "paper_lower": lo,
                    "kept": toy[hi][0] > toy[lo][0],
                    "resolved_here": toy_resolved != 0,
                    "difference_here": toy[hi][0] - toy[lo][0],
                }
            )
    n_pairs = len(methods) * (len(methods) - 1) // 2
    return {
        "methods": methods,
        "rows": {
            m: {"ours": toy[m], "ours_rank": toy_rank[m], "paper": paper[m], "paper_rank": paper_rank[m]}
            for m in methods
        },
        "resolved_pairs": pairs,
        "kept": sum(p["kept"] for p in pairs),
        "kept_and_resolved_here": sum(p["kept"] and p["resolved_here"] for p in pairs),
        "reversed_and_resolved_here": sum(not p["kept"] and p["resolved_here"] for p in pairs),
        "kendall_tau_a": (concordant - discordant) / n_pairs if n_pairs else None,
    }


def report(boards: list[BoardDefinition], root: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for board in boards:
        table = paper_results(board.paper.key if board.paper else None)
        if table is None:
            continue
        scores, traffic, refused, building = ours(board, root)
        entry: dict[str, Any] = {
            "paper_table": table["table"],
            "refused": refused,
            "traffic": traffic,
            "building": {m: s for m, s in building.items() if m in table["methods"]},
            "seeds": {m: len(v["self_last"]) for m, v in scores.items()},
            "missing": [m for m in table["methods"] if m not in scores],
            "metrics": {},
        }
        for metric in METRICS:
            toy = {m: (statistics.fmean(v[metric]), statistics.pstdev(v[metric])) for m, v in scores.items()}
            paper = {m: tuple(v[metric]) for m, v in table["methods"].items() if metric in v}
            entry["metrics"][metric] = compare(toy, paper)
        out[board.name] = entry
    return out


def plot(name: str, entry: dict[str, Any], path: Path) -> bool:
    """Ours against the paper's, Self and Others A_last, one point per method with both sides' std as error bars:
    a board that keeps the paper's order lies along a rising line. False when there is nothing to draw."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [m for m in ("self_last", "others_last") if len(entry["metrics"][m]["methods"]) >= 2]
    if not panels:
        return False
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.4), squeeze=False)
    for ax, metric in zip(axes[0], panels):
        c = entry["metrics"][metric]
        for m in c["methods"]:
            (py, ps), (oy, os_) = c["rows"][m]["paper"], c["rows"][m]["ours"]
            ax.errorbar(py, oy, xerr=ps, yerr=os_, fmt="o", capsize=3)
            ax.annotate(LABELS.get(m, m), (py, oy), textcoords="offset points", xytext=(5, 4), fontsize=8)
        tau = c["kendall_tau_a"]
        ax.set_title(f"{METRICS[metric]}  (tau-a {tau:+.2f})" if tau is not None else METRICS[metric], fontsize=10)
        ax.set_xlabel("paper (x100)")
        ax.set_ylabel("this board (x100)")
        ax.grid(alpha=0.3)
    fig.suptitle(f"{name} beside {entry['paper_table'].split(' (')[0]}", fontsize=11)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# The predictions committed before the ten-method boards ran (docs/findings/paper-ranks-predictions.md), checked
# mechanically on each board they name. Each check reads only the board's means (x100) and measured traffic, and
# says None (not yet) until all ten of the paper's methods are on the board.
PREDICTION_BOARDS = ("drake-synth-dynamic", "hflb-synth-dynamic")
TEN = tuple(LABELS)
PREDICTION_NUMBERS = ("1", "2", "3", "4", "5a", "5b", "6", "7", "8", "9")


def _mean(entry: dict[str, Any], metric: str, method: str) -> float:
    return entry["metrics"][metric]["rows"][method]["ours"][0]


def check_predictions(entry: dict[str, Any]) -> list[tuple[str, bool | None, str]]:
    """(number, held on this board or None when the board lacks a method, the numbers behind it) per prediction."""
    missing = [m for m in TEN if m not in entry["metrics"]["self_last"]["rows"]]
    if missing:
        why = "not yet: " + ", ".join(LABELS[m] for m in missing) + " missing"
        return [(n, None, why) for n in PREDICTION_NUMBERS]
    s = {m: _mean(entry, "self_last", m) for m in TEN}
    o = {m: _mean(entry, "others_last", m) for m in TEN}
    out: list[tuple[str, bool | None, str]] = []
    span_s, span_o = max(s.values()) - min(s.values()), max(o.values()) - min(o.values())
    out.append(
        ("1", span_s <= 5.0 and span_o <= 3.5, f"Self span {span_s:.2f} (≤ 5.0), Others span {span_o:.2f} (≤ 3.5)")
    )
    c = entry["metrics"]["self_last"]
    n = len(c["resolved_pairs"])
    resolved_here = c["kept_and_resolved_here"] + c["reversed_and_resolved_here"]
    kept = c["kept"] / n if n else float("nan")
    tau = c["kendall_tau_a"]
    out.append(
        (
            "2",
            n > 0 and resolved_here <= n / 4 and 0.35 <= kept <= 0.75 and -0.3 <= tau <= 0.5,
            f"of {n} paper-resolved pairs: {resolved_here} resolved here (≤ {n / 4:.1f}), {c['kept']} kept in the mean "
            f"({100 * kept:.0f} %, 35-75 %); tau-a {tau:+.2f} (−0.3 to +0.5)",
        )
    )
    top = max(s, key=s.get)
    out.append(
        (
            "3",
            s[top] - s["sft"] <= 1.0,
            f"SFT {s['sft']:.2f}, highest {LABELS[top]} {s[top]:.2f} (gap {s[top] - s['sft']:.2f} ≤ 1.0)",
        )
    )
    out.append(("4", o["fedit"] > o["sft"], f"Others: FedIT {o['fedit']:.2f} against SFT {o['sft']:.2f}"))
    two_pass = ("ditto", "feddpa", "perada")
    out.append(
        (
            "5a",
            all(s[m] < s["sft"] for m in two_pass),
            "Self below SFT's " + f"{s['sft']:.2f}: " + ", ".join(f"{LABELS[m]} {s[m]:.2f}" for m in two_pass),
        )
    )
    out.append(
        (
            "5b",
            None,
            "below FedIT's Self on at least one board: "
            + ", ".join(f"{LABELS[m]} {s[m] - s['fedit']:+.2f}" for m in two_pass)
            + " (read across boards)",
        )
    )
    out.append(
        (
            "6",
            s["feddat"] < s["sft"] and s["feddat"] < s["fedit"] and o["sft"] < o["feddat"] <= o["fedit"] + 1.0,
            f"FedDAT Self {s['feddat']:.2f} (SFT {s['sft']:.2f}, FedIT {s['fedit']:.2f}); Others {o['feddat']:.2f} "
            f"(above SFT {o['sft']:.2f}, not above FedIT {o['fedit']:.2f} + 1.0)",
        )
    )
    distil = ("fedmkt", "takfl")
    out.append(
        (
            "7",
            all(abs(o[m] - o["fedit"]) <= 1.5 and abs(s[m] - s["fedit"]) <= 2.0 for m in distil),
            "against FedIT: "
            + ", ".join(
                f"{LABELS[m]} Others {o[m] - o['fedit']:+.2f} (±1.5), Self {s[m] - s['fedit']:+.2f} (±2.0)"
                for m in distil
            ),
        )
    )
    out.append(
        (
            "8",
            o["fedmosaic"] < o["fedit"] and abs(s["fedmosaic"] - s["sft"]) <= 2.0,
            f"FedMosaic Others {o['fedmosaic']:.2f} (FedIT {o['fedit']:.2f}); Self {s['fedmosaic'] - s['sft']:+.2f} "
            f"from SFT's (±2.0)",
        )
    )
    t = entry["traffic"]
    dual = ("ditto", "fedsim", "feddpa", "feddat")
    same = all(t[m][k] == t["fedit"][k] for m in dual for k in ("uplink_bytes_per_round", "downlink_bytes_per_round"))
    fewer = all(
        (t["fedmosaic"][k] or 0) < (t["fedit"][k] or 0)
        for k in ("uplink_elements_per_round", "downlink_elements_per_round")
    )
    sft_nothing = not t["sft"]["uplink_elements_per_round"] and not t["sft"]["downlink_elements_per_round"]
    out.append(
        (
            "9",
            same and fewer and sft_nothing,
            f"dual adapters' bytes equal FedIT's {t['fedit']['uplink_bytes_per_round']:.0f} B each way: {same}; "
            f"SFT sends no element: {sft_nothing}; FedMosaic {t['fedmosaic']['uplink_elements_per_round']:.0f} up / "
            f"{t['fedmosaic']['downlink_elements_per_round']:.0f} down elements against FedIT's "
            f"{t['fedit']['uplink_elements_per_round']:.0f}: fewer {fewer}",
        )
    )
    return out


def predictions_markdown(rep: dict[str, Any]) -> list[str]:
    """The predictions' section: one row per prediction, one column per board it names, and the verdict (held when
    it holds on every board; 5b, 'below FedIT on at least one board', is read across the boards)."""
    boards = [b for b in PREDICTION_BOARDS if b in rep]
    if not boards:
        return []
    checks = {b: {n: (held, detail) for n, held, detail in check_predictions(rep[b])} for b in boards}
    lines = [
        "## The predictions, checked",
        "",
        "Each prediction of [paper-ranks-predictions.md](paper-ranks-predictions.md), computed from the means "
        "above; it holds when it holds on every board it names.",
        "",
        "| # | " + " | ".join(boards) + " | verdict |",
        "|---|" + "---|" * (len(boards) + 1),
    ]
    mark = {True: "✓", False: "✗", None: "…"}
    for n in PREDICTION_NUMBERS:
        if n == "5b":  # each two-pass method below FedIT on at least one of the boards
            ready = len(boards) == len(PREDICTION_BOARDS) and all(checks[b]["5a"][0] is not None for b in boards)
            held: bool | None = None
            if ready:
                held = all(
                    any(_mean(rep[b], "self_last", m) < _mean(rep[b], "self_last", "fedit") for b in boards)
                    for m in ("ditto", "feddpa", "perada")
                )
            lines.append("| 5b | " + " | ".join(checks[b][n][1] for b in boards) + f" | {mark[held]} |")
            continue
        verdicts = [checks[b][n][0] for b in boards]
        held = None if None in verdicts or len(boards) < len(PREDICTION_BOARDS) else all(verdicts)
        lines.append(
            f"| {n} | "
            + " | ".join(f"{mark[checks[b][n][0]]} {checks[b][n][1]}" for b in boards)
            + f" | {mark[held]} |"
        )
    return lines + [""]


def _rank(r: tuple[int, bool]) -> str:
    return f"{r[0]}{'=' if r[1] else ''}"


def markdown(rep: dict[str, Any]) -> str:
    lines = [
        "# Canonical boards beside the FedMosaic paper's rankings",
        "",
        "Written by `python scripts/paper_rank_report.py` from the result files each canonical board's rules "
        "accept (default settings only) and the paper's numbers the package ships "
        "(`drake_bench/leaderboard/paper_results.json`). Scores x100, mean ± population std over seeds. Rank: 1 + "
        "the methods whose whole interval lies above, so overlapping methods share a rank (`=`). A pair is "
        "*resolved* where the two intervals lie apart. The paper's models are 1B/3B LLaVAs on the real "
        "benchmarks, 20 rounds of 100 steps; ours are the tiny zoo on the embedded mirrors, 8 rounds of 25: "
        "the comparison is of orderings, never of digits. The predictions made before the boards: "
        "[paper-ranks-predictions.md](paper-ranks-predictions.md).",
        "",
    ]
    for name, entry in rep.items():
        lines += [f"## {name}", "", f"Beside: {entry['paper_table']}.", ""]
        if entry["missing"]:
            lines += [
                f"Not on the board yet: {', '.join(_missing(m, entry['building']) for m in entry['missing'])}.",
                "",
            ]
        if entry["refused"]:
            lines += ["Refused by the board's rules, left out:", ""] + [f"* {r}" for r in entry["refused"]] + [""]
        if not entry["seeds"] or not any(entry["metrics"][m]["methods"] for m in METRICS):
            continue  # nothing both sides have yet: no table to print
        if entry.get("plot"):
            lines += [f"![{name}: ours against the paper's]({entry['plot']})", ""]
        for metric, label in METRICS.items():
            c = entry["metrics"][metric]
            lines += [f"### {label}", "", "| method | ours | rank | paper | paper rank |", "|:---|---:|---:|---:|---:|"]
            order = sorted(c["methods"], key=lambda m: -c["rows"][m]["paper"][0])
            for m in order:
                row = c["rows"][m]
                lines.append(
                    f"| {LABELS.get(m, m)} | {row['ours'][0]:.2f} ± {row['ours'][1]:.2f} | "
                    f"{_rank(row['ours_rank'])} | {row['paper'][0]:.2f} ± {row['paper'][1]:.2f} | "
                    f"{_rank(row['paper_rank'])} |"
                )
            n = len(c["resolved_pairs"])
            tau = "n/a" if c["kendall_tau_a"] is None else f"{c['kendall_tau_a']:+.2f}"
            lines += [
                "",
                f"Pairs the paper resolves: {n}; in the same order here {c['kept']} "
                f"({c['kept_and_resolved_here']} resolved here too); reversed {n - c['kept']} "
                f"({c['reversed_and_resolved_here']} resolved here). Kendall's tau-a over all "
                f"{len(c['methods'])} methods: {tau}.",
                "",
            ]
            held = [p for p in c["resolved_pairs"] if p["kept"] and p["resolved_here"]]
            flipped = [p for p in c["resolved_pairs"] if not p["kept"] and p["resolved_here"]]
            for title, group in (("Held and resolved here", held), ("Reversed and resolved here", flipped)):
                if group:
                    lines.append(
                        f"{title}: "
                        + "; ".join(
                            f"{LABELS.get(p['paper_higher'], p['paper_higher'])} > {LABELS.get(p['paper_lower'], p['paper_lower'])}"
                            f" ({p['difference_here']:+.2f})"
                            for p in group
                        )
                        + "."
                    )
                    lines.append("")
    lines += predictions_markdown(rep)
    return "\n".join(lines).rstrip() + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--boards", default="", help="comma-separated board names (default: every board with a paper table)"
    )
    ap.add_argument("--root", type=Path, default=Path(DEFAULT_ROOT), help="the leaderboard folder")
    ap.add_argument("--tables", type=Path, default=Path("docs/findings"), help="where paper-ranks.md/.json go")
    args = ap.parse_args()
    every = canonical_boards()
    names = [n for n in args.boards.split(",") if n] or sorted(every)
    unknown = [n for n in names if n not in every]
    if unknown:
        raise SystemExit(f"unknown board(s) {unknown}; the canonical boards are {sorted(every)}")
    rep = report([every[n] for n in names], args.root)
    args.tables.mkdir(parents=True, exist_ok=True)
    for name, entry in rep.items():  # one scatter per board: ours against the paper's
        rel = Path("paper-ranks") / f"{name}.png"
        if plot(name, entry, args.tables / rel):
            entry["plot"] = str(rel)
    (args.tables / "paper-ranks.json").write_text(json.dumps(rep, indent=1) + "\n", encoding="utf-8")
    (args.tables / "paper-ranks.md").write_text(markdown(rep), encoding="utf-8")
    print(f"wrote {args.tables / 'paper-ranks.md'} and .json ({', '.join(rep)})")


if __name__ == "__main__":
    main()
