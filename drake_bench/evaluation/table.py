"""Leaderboard-style summary tables (rich for the terminal, markdown for docs and READMEs).

Columns: method, Self A_last, Self A_AUC, Others A_last, Others A_AUC, worst client (Self at
A_last), uplink MB per round. Scores are shown x100 as ``mean ± std`` (population std over seeds,
docs/design-notes.md#std-convention); MB are decimal megabytes (10^6 bytes), summed over clients per round.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from drake_bench.core.console import DataTable
from drake_bench.evaluation.compute import ComputeProbe
from drake_bench.evaluation.metrics import MeanStd, mean_std

if TYPE_CHECKING:  # pragma: no cover
    from drake_bench.results.result_file import RunResult

HEADERS = ["Method", "Self A_last", "Self A_AUC", "Others A_last", "Others A_AUC", "Worst client", "Uplink MB/round"]
MISSING = "–"


def fmt(ms: MeanStd, scale: float = 100.0, digits: int = 2) -> str:
    """``mean ± std`` with ``scale`` applied; a dash when no seed has the value; std omitted for one seed."""
    if ms.mean is None:
        return MISSING
    if ms.n <= 1 or ms.std is None:
        return f"{ms.mean * scale:.{digits}f}"
    return f"{ms.mean * scale:.{digits}f} ± {ms.std * scale:.{digits}f}"


def score_label(result: "RunResult") -> str:
    """A score row's method cell: the result's label, marked where not every seed is in."""
    return result.label + ("" if result.status == "complete" else " (partial)")


def rows(results: Sequence["RunResult"]) -> list[list[str]]:
    """One row of formatted cells per result, in the order given."""
    out = []
    for r in results:
        a = r.summary.aggregate
        out.append(
            [
                score_label(r),
                fmt(a.self_last),
                fmt(a.self_auc),
                fmt(a.others_last),
                fmt(a.others_auc),
                fmt(a.worst_client_self),
                fmt(a.uplink_bytes_per_round, scale=1e-6),
            ]
        )
    return out


def summary_table(results: Sequence["RunResult"], title: str | None = None) -> DataTable:
    """A rich table of :func:`rows`."""
    table = DataTable(title=title)
    for i, h in enumerate(HEADERS):
        table.add_column(h, justify="left" if i == 0 else "right", no_wrap=i == 0)  # "fedit 1.0" on one line
    for row in rows(results):
        table.add_row(*row)
    return table


def _markdown(headers: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    lines = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join([":---"] + ["---:"] * (len(headers) - 1)) + "|",
    ]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in body]
    return "\n".join(lines) + "\n"


def model_groups(results: Sequence["RunResult"]) -> dict[str, list[int]]:
    """The clients of each model the results' allocations name (sorted), or {} unless they name one allocation of
    two or more models: the by-model table is for boards whose clients hold different models."""
    allocations = {tuple(sorted(r.model_allocation.clients.items())) for r in results}
    if len(allocations) != 1:
        return {}
    groups: dict[str, list[int]] = {}
    for client, model in allocations.pop():
        groups.setdefault(model, []).append(int(client))
    return {m: sorted(c) for m, c in sorted(groups.items())} if len(groups) > 1 else {}


MODEL_NOTE = (
    "Self A_last by model: per seed, the mean over the clients that hold each model, then mean ± std over seeds."
)


def model_headers(groups: dict[str, list[int]]) -> list[str]:
    """The by-model table's header (summary.md's and the board page's): each model with its number of clients."""
    return ["Method", *(f"{m} ({len(c)} client{'s' * (len(c) > 1)})" for m, c in groups.items())]


def model_rows(results: Sequence["RunResult"], groups: dict[str, list[int]]) -> list[list[str]]:
    """Per result, Self A_last of each model's clients: per seed the mean of those clients' own Self A_last, then
    mean ± std over seeds (the board's Self A_last is the same mean over every client). On a heterogeneous
    board an overall mean can hide a group of clients that gains nothing: this is where that shows."""
    out = []
    for r in results:
        cells = [score_label(r)]
        for clients in groups.values():
            values: list[float | None] = []
            for s in r.summary.per_seed:
                own = [c.self_last for c in s.per_client if c.client in clients and c.self_last is not None]
                values.append(sum(own) / len(own) if own else None)
            cells.append(fmt(mean_std(values)))
        out.append(cells)
    return out


WIRE_HEADERS = [
    "Method",
    "On the wire",
    "Uplink k elements/round",
    "Downlink k elements/round",
    "Uplink MB/round",
    "Uplink MB/round at fp32",
]


def wire_rows(results: Sequence["RunResult"]) -> list[list[str]]:
    """Per result with element counts: the dtypes it sent and its traffic in elements beside bytes. Bytes depend on
    the precision a method chose to send; elements at one precision (the last column, 4 bytes each) compare
    methods on what they communicate."""
    out = []
    for r in results:
        a, dtypes = r.summary.aggregate, sorted({d for s in r.summary.per_seed for d in (s.wire_dtypes or [])})
        if a.uplink_elements_per_round.mean is None:
            continue
        out.append(
            [
                r.label,
                ", ".join(dtypes) or "nothing",
                fmt(a.uplink_elements_per_round, scale=1e-3, digits=1),
                fmt(a.downlink_elements_per_round, scale=1e-3, digits=1),
                fmt(a.uplink_bytes_per_round, scale=1e-6),
                fmt(a.uplink_elements_per_round, scale=4e-6),
            ]
        )
    return out


COMPUTE_HEADERS = [
    "Method",
    "Local steps",
    "Relative compute (measured)",
    "Declared",
    "Relative compute as run",
    "Training TFLOPs",
    "Setup TFLOPs",
]


OVER_BUDGET_NOTE = (
    " Over budget: the method's setup and post-federation stage alone leave it less than half a local "
    "step a round, so compute matching gives it the minimum of one and it still spends more than "
    "SFT: that row is not at equal compute."
)


def compute_rows(results: Sequence["RunResult"]) -> list[list[str]]:
    """Per result the evaluator's compute probe measured (drake_bench/evaluation/compute.py): the steps the method ran, its
    federation training FLOPs over SFT's at the benchmark's steps, what the plugin declares, the same ratio at the
    steps it ran (about 1 on a compute-matched board, unless a method's fixed costs leave it no steps to cut:
    marked "over budget"), and the totals at the steps it ran."""
    out = []
    for r in results:
        record = r.fl.extra.get("compute")
        if not record:
            continue
        probe, steps = ComputeProbe.from_record(record), r.fl.local_steps
        as_run = f"{probe.relative_compute_at(steps):.3f}"
        if probe.over_budget_at(steps):
            as_run += " (over budget)"
        out.append(
            [
                r.label,
                str(steps),
                f"{record['measured_relative_compute']:.3f}",
                f"{record['declared_relative_compute']:g}",
                as_run,
                f"{probe.flops_at_steps(steps) / 1e12:.3g}",
                f"{record['setup_flops'] / 1e12:.3g}",
            ]
        )
    return out


POST_FEDERATION_HEADERS = [
    "Method",
    "Self A_last before",
    "Self A_last after",
    "Others A_last before",
    "Others A_last after",
    "Stage seconds",
]


def post_federation_rows(results: Sequence["RunResult"]) -> list[list[str]]:
    """Per result whose method has a post-federation stage and recorded the point it replaced: the last point's Self
    and Others on the clients' own last models (before) beside the stage's models (after, the board's A_last). A
    stage that hands every client a shared model, or post-trains one, can lift or sink a method's A_last on its
    own; this shows by how much."""
    out = []
    for r in results:
        a = r.summary.aggregate
        if a.self_last_before_post_federation.mean is None:
            continue
        out.append(
            [
                score_label(r),
                fmt(a.self_last_before_post_federation),
                fmt(a.self_last),
                fmt(a.others_last_before_post_federation),
                fmt(a.others_last),
                fmt(a.post_federation_seconds, scale=1.0, digits=1),
            ]
        )
    return out


TIME_HEADERS = ["Method", "Client training s/round", "Server s/round", "Server / client", "Machine"]
TIME_NOTE = (
    "Time per round, measured (wall-clock seconds on the machine each file records; mean ± std over seeds): the "
    "clients' local training summed over the round's clients, beside the server's aggregation, which compute "
    "matching does not count (it matches the clients' FLOPs only)."
)


def time_rows(results: Sequence["RunResult"]) -> list[list[str]]:
    """Per result that timed its server: client training and server aggregation seconds per round, and their
    ratio (of the means). A method whose server does real work (FedRPCA's robust PCA, HeteroTune's alignment)
    shows it here, beside the client compute that the board matches."""
    out = []
    for r in results:
        a = r.summary.aggregate
        server, client = a.aggregate_seconds_per_round, a.train_seconds_per_round
        if server.mean is None:
            continue
        ratio = f"{server.mean / client.mean:.3f}" if client.mean else MISSING
        env = r.environment
        machine = f"{env.cpu_model or 'cpu'} x{env.cpu_count}" if env.cpu_count else (env.cpu_model or MISSING)
        out.append([score_label(r), fmt(client, scale=1.0, digits=2), fmt(server, scale=1.0, digits=3), ratio, machine])
    return out


def summary_markdown(results: Sequence["RunResult"]) -> str:
    """The same table as GitHub-flavoured markdown (ends with a newline), followed by Self A_last by model
    (:func:`model_rows`) where the clients hold different models, the wire-format table
    (:func:`wire_rows`) when any result counted elements, the compute table (:func:`compute_rows`) when any
    result was probed, the time table (:func:`time_rows`: client training beside server aggregation) when any result
    timed its server, and the post-federation table (:func:`post_federation_rows`) when any result recorded the
    point its stage replaced."""
    text = _markdown(HEADERS, rows(results))
    groups = model_groups(results)
    if groups:
        text += f"\n{MODEL_NOTE}\n\n" + _markdown(model_headers(groups), model_rows(results, groups))
    wire = wire_rows(results)
    if wire:
        text += (
            "\nCommunication at equal precision: elements sent per round (summed over clients) beside the bytes "
            "each method's chosen dtype made of them.\n\n" + _markdown(WIRE_HEADERS, wire)
        )
    compute = compute_rows(results)
    if compute:
        text += (
            "\nTraining compute as the evaluator's probe counted it (FLOPs of matrix products and attention, "
            "forward and backward), relative to SFT at the benchmark's local steps and at the steps the method "
            "ran; training TFLOPs at the steps the method ran, setup and any post-federation stage included."
            + (OVER_BUDGET_NOTE if any("over budget" in row[4] for row in compute) else "")
            + "\n\n"
            + _markdown(COMPUTE_HEADERS, compute)
        )
    timed = time_rows(results)
    if timed:
        text += f"\n{TIME_NOTE}\n\n" + _markdown(TIME_HEADERS, timed)
    post = post_federation_rows(results)
    if post:
        text += (
            "\nThe last evaluation point before and after each method's post-federation stage (its A_last is the "
            "after): before scores what every client held after its last local training, after what the stage "
            "gave it.\n\n" + _markdown(POST_FEDERATION_HEADERS, post)
        )
    return text + numerics_note(results) + judge_note(results)


def judge_note(results: Sequence["RunResult"]) -> str:
    """A paragraph naming the LLM judge that rated the free-text answers (``RunConfig.judge``), since its scores are
    ratings, not Rouge-L; empty when no result was judged."""
    judged = [(r.label, r.evaluation.judge) for r in results if r.evaluation.judge]
    if not judged:
        return ""
    body = "; ".join(f"{label}: {judge}" for label, judge in judged)
    return (
        f"\nFree text rated by an LLM judge ({body}): a rating r in 1-10 scores r/10, so these columns show the "
        "1-10 scale x10 (docs/concepts.md, 'Scoring').\n"
    )


def numerics_note(results: Sequence["RunResult"]) -> str:
    """A paragraph saying under which floating-point setting the rows were trained (``RunConfig.numerics``), so a
    reader knows on which hosts the digits rebuild. Empty when no result records the setting (files made before it
    existed)."""
    recorded = [(r.label, (r.numerics, r.environment.cpu_capability)) for r in results]
    if all(n is None for _, (n, _cap) in recorded):
        return ""

    def say(numerics: str | None, capability: str | None) -> str:
        if numerics is None:
            return "native, made before the setting was recorded"
        return f"{numerics}, {capability} kernels" if capability else numerics

    kinds = {say(*v) for _, v in recorded}
    if len(kinds) == 1:
        body = f"every row {kinds.pop()}"
    else:
        body = "; ".join(f"{label}: {say(*v)}" for label, v in recorded)
    return (
        f"\nNumerics ({body}): portable rows rebuild digit for digit on any x86-64 host with AVX2, native ones "
        "only on a host of the same capability (docs/concepts.md, 'Same seed, same numbers, on any host').\n"
    )
