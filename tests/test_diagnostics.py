"""The server's aggregation time (measured by the evaluator around ``aggregate``) and the optional diagnostics
channels (``ReportsDiagnostics``, ``ReportsClientDiagnostics``): recorded in the result file, checkpointed, checked,
plotted; older result files without either still read and check."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from minimal_method import ClientDiagnosing, Counter
from pydantic import ConfigDict
from test_results import make_result

from drake_bench import Diagnostic, PluginError, ReportsClientDiagnostics, ReportsDiagnostics
from drake_bench.evaluation.metrics import DiagnosticRecord, RawTables, ServerCostRecord, summarize
from drake_bench.evaluation.plots import diagnostic_curve, numeric_diagnostic_values, plot_diagnostics_over_rounds
from drake_bench.evaluator.standard import RunConfig, run
from drake_bench.plugins.protocol import MethodMeta
from drake_bench.plugins.registry import register_method
from drake_bench.results.result_file import check_result, read_result, write_result

SLEEP = 0.05
FIRST_SLEEP = 0.6  # the first round's server sleep: far above any client call, even on a loaded 2-core machine


class Diagnosing(Counter):
    """Counter whose server sleeps (a known aggregation time) and reports one row per round."""

    meta = MethodMeta(name="diagnosing", version="1.0")
    FAIL_ON = None

    class Config(Counter.Config):
        model_config = ConfigDict(extra="forbid")
        bad_row: str | None = None  # "nan" | "shape": a malformed row in round 2

    def aggregate(self, round_idx, server_state, uploads):
        time.sleep(FIRST_SLEEP if round_idx == 0 else SLEEP)
        messages, state = super().aggregate(round_idx, server_state, uploads)
        mean = next(iter(messages.values())).tensors["mean"]
        self._rows = [
            Diagnostic(
                key="counts", values={"yes": float(mean[0]), "round": round_idx + 1, "shared": True, "note": None}
            )
        ]
        return messages, state

    def round_diagnostics(self, round_idx):
        if self.config.bad_row and round_idx == 1:
            return [{"key": "counts", "values": {"yes": float("nan")}}] if self.config.bad_row == "nan" else [{"k": 1}]
        return self._rows


register_method(Diagnosing)
register_method(ClientDiagnosing)


def _cfg(toy, out, **kw):
    manifest, root = toy
    base = dict(benchmark=manifest, method="diagnosing", data_dir=root, out=str(out), seeds=[0], fast_adaptation=False)
    base.update(kw)
    return RunConfig(**base)


@pytest.mark.parametrize("isolation", ["process", "inline"])
def test_aggregation_time_and_diagnostics_reach_the_result_file(toy, tmp_path, isolation):
    assert isinstance(Diagnosing(), ReportsDiagnostics) and not isinstance(Counter(), ReportsDiagnostics)
    res = run(_cfg(toy, tmp_path, isolation=isolation))
    back = read_result(res.path(tmp_path))
    assert check_result(back) == []
    rounds = back.fl.rounds
    # one server record per round, timed around the real call: at least the planted sleep
    assert [c.round for c in back.raw.server_costs] == list(range(1, rounds + 1))
    assert all(c.aggregate_seconds >= SLEEP for c in back.raw.server_costs)
    seed = back.summary.per_seed[0]
    assert seed.aggregate_seconds_total == pytest.approx(sum(c.aggregate_seconds for c in back.raw.server_costs))
    assert seed.aggregate_seconds_per_round == pytest.approx(seed.aggregate_seconds_total / rounds)
    assert back.summary.aggregate.aggregate_seconds_per_round.n == 1
    # the clients' training time does not include the server's sleep (the long one of round 1 is only there)
    assert back.raw.server_costs[0].aggregate_seconds >= FIRST_SLEEP
    assert max(c.train_seconds for c in back.raw.costs) < FIRST_SLEEP
    # one diagnostics row per round, with the method's values as reported (types kept)
    assert [(d.round, d.key) for d in back.raw.diagnostics] == [(r, "counts") for r in range(1, rounds + 1)]
    first = back.raw.diagnostics[0].values
    assert first["round"] == 1 and first["shared"] is True and first["note"] is None and isinstance(first["yes"], float)


@pytest.mark.parametrize("isolation", ["process", "inline"])
def test_client_rows_are_filed_under_their_client_in_client_order(toy, tmp_path, isolation):
    assert isinstance(ClientDiagnosing(), ReportsClientDiagnostics) and not isinstance(
        Counter(), ReportsClientDiagnostics
    )
    res = run(_cfg(toy, tmp_path, method="client-diagnosing", isolation=isolation))
    assert check_result(res) == []
    rows = res.raw.diagnostics
    clients = sorted({c.client for c in res.raw.costs})
    assert [(d.round, d.key) for d in rows] == [
        (r, f"client/{c}/items") for r in range(1, res.fl.rounds + 1) for c in clients
    ]
    trained = {(c.round, c.client) for c in res.raw.costs}
    assert all((d.round, int(d.key.split("/")[1])) in trained for d in rows)
    assert all(d.values["n"] > 0 for d in rows)


def test_a_malformed_client_row_names_the_client_and_round(toy, tmp_path):
    with pytest.raises(
        PluginError,
        match=r"client_diagnostics \(seed 0, client 2, round 2\): row 0 \('items'\): "
        r"values \['n'\] are NaN",
    ):
        run(_cfg(toy, tmp_path, method="client-diagnosing", method_config={"bad_client_row": (2, 1)}))


def test_a_method_without_the_protocol_records_server_time_and_no_diagnostics(toy, tmp_path):
    from minimal_method import Counter as Plain

    register_method(Plain)
    res = run(_cfg(toy, tmp_path, method="counter"))
    assert len(res.raw.server_costs) == res.fl.rounds and res.raw.diagnostics == []


@pytest.mark.parametrize(
    "bad, message",
    [
        ("nan", r"round_diagnostics \(seed 0, round 2\): row 0 \('counts'\): values \['yes'\] are NaN or infinite"),
        ("shape", r"round_diagnostics \(seed 0, round 2\): row 0 is not a Diagnostic"),
    ],
)
def test_malformed_diagnostics_are_located_plugin_errors(toy, tmp_path, bad, message):
    with pytest.raises(PluginError, match=message):
        run(_cfg(toy, tmp_path, method_config={"bad_row": bad}))


def test_server_costs_and_diagnostics_survive_a_resume(toy, tmp_path, monkeypatch):
    out = tmp_path / "crash"
    monkeypatch.setattr(Diagnosing, "FAIL_ON", (2, 4))
    with pytest.raises(PluginError, match="boom"):
        run(_cfg(toy, out, isolation="inline"))
    monkeypatch.setattr(Diagnosing, "FAIL_ON", None)
    resumed = run(_cfg(toy, out))
    assert check_result(resumed) == []  # every round has exactly one server record, the first four from the checkpoint
    assert [d.round for d in resumed.raw.diagnostics] == list(range(1, resumed.fl.rounds + 1))


def test_result_files_from_before_server_costs_and_diagnostics_still_read_and_check(tmp_path):
    r = make_result()
    data = r.model_dump(mode="json")
    assert data["raw"]["server_costs"] == [] and data["raw"]["diagnostics"] == []
    # an older file: no such tables, no such summary fields
    for table in ("server_costs", "diagnostics"):
        del data["raw"][table]
    for s in data["summary"]["per_seed"]:
        del s["aggregate_seconds_total"], s["aggregate_seconds_per_round"]
    for k in ("aggregate_seconds_total", "aggregate_seconds_per_round"):
        del data["summary"]["aggregate"][k]
    data["schema_version"] = "1.0"  # and one object per raw record, as files of that time stored them
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    old = read_result(path)
    assert (
        check_result(old) == []
        and old.raw.server_costs == []
        and old.summary.per_seed[0].aggregate_seconds_total is None
    )


def test_check_result_wants_every_round_once_when_a_seed_has_server_costs(tmp_path):
    r = make_result(seeds=(0,))
    some = [ServerCostRecord(seed=0, round=k, aggregate_seconds=0.1) for k in (1, 2, 2)]
    raw = RawTables(**{**r.raw.model_dump(), "server_costs": [c.model_dump() for c in some]})
    broken = r.model_copy(update={"raw": raw, "summary": summarize(raw, seeds=[0])})
    problems = check_result(broken)
    assert any("no server cost record for rounds" in p and "(8 in all)" in p for p in problems)
    assert any("more than one record for rounds 2" in p for p in problems)
    with pytest.raises(Exception, match="server cost"):
        write_result(broken, tmp_path / "r.json")
    full = [ServerCostRecord(seed=0, round=k, aggregate_seconds=0.1) for k in range(1, 11)]
    raw = RawTables(**{**r.raw.model_dump(), "server_costs": [c.model_dump() for c in full]})
    fixed = r.model_copy(update={"raw": raw, "summary": summarize(raw, seeds=[0])})
    assert check_result(fixed) == [] and fixed.summary.aggregate.aggregate_seconds_total.mean == pytest.approx(1.0)


def test_diagnostics_plot_draws_the_mean_over_rows_per_round(tmp_path):
    r = make_result(seeds=(0, 1))
    rows = [
        DiagnosticRecord(seed=s, round=k, key=key, values={"beta": b + s, "energy_ratio": 0.5, "ok": True})
        for s in (0, 1)
        for k in (1, 2)
        for key, b in (("A", 1.0 * k), ("B", 3.0 * k))
    ]
    raw = RawTables(**{**r.raw.model_dump(), "diagnostics": [d.model_dump() for d in rows]})
    res = r.model_copy(update={"raw": raw})
    curve = diagnostic_curve(res, "beta")  # round k: rows average 2k (+ seed), seeds 0 and 1 -> 2k + 0.5, std 0.5
    assert [(p.x, p.mean, p.std, p.n) for p in curve] == [(1, 2.5, 0.5, 2), (2, 4.5, 0.5, 2)]
    assert diagnostic_curve(res, "ok") == [] and diagnostic_curve(res, "missing") == []
    assert numeric_diagnostic_values([res, r]) == ["beta", "energy_ratio"]  # the flag is not drawn
    fig = plot_diagnostics_over_rounds([res], tmp_path / "d.png", ("beta", "energy_ratio"))
    assert (tmp_path / "d.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    beta_ax = fig.axes[0]
    assert list(beta_ax.lines[0].get_ydata()) == [2.5, 4.5]
    with pytest.raises(ValueError, match="no values"):
        plot_diagnostics_over_rounds([res], tmp_path / "e.png", ())


def test_report_writes_the_diagnostics_plot_when_a_method_reported_some(toy, tmp_path):
    from typer.testing import CliRunner

    from drake_bench.cli import app

    res = run(_cfg(toy, tmp_path / "runs"))
    out = tmp_path / "board"
    cli = CliRunner().invoke(app, ["report", str(res.path(tmp_path / "runs")), "--out", str(out)])
    assert cli.exit_code == 0, cli.output
    assert (out / "diagnostics_over_rounds.png").is_file() and Path(out / "summary.md").is_file()
