"""Plots (PNG written, data drawn = summary x100) and summary tables (exact markdown)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from drake_bench.evaluation.metrics import AdaptationRecord, CostRecord, RawTables, ScoreRecord, summarize
from drake_bench.evaluation.plots import plot_accuracy_over_rounds, plot_adaptation, plot_relevance_heatmap
from drake_bench.evaluation.table import summary_markdown, summary_table
from drake_bench.results.result_file import (
    BenchmarkRef,
    Environment,
    EvaluationSettings,
    FLSettings,
    MethodRef,
    ModelAllocationRef,
    RunResult,
    ScenarioRef,
    new_result,
)

PNG = b"\x89PNG\r\n\x1a\n"


def _result(
    name: str, self_scores: dict[int, list[float]], others: float, up: int, status: str = "complete"
) -> RunResult:
    """Two clients, one own task each; ``self_scores[seed]`` = both clients' Self at rounds 5 and 10 (same value)."""
    scores, adapt, costs = [], [], []
    for seed, (s5, s10) in self_scores.items():
        for rnd, s in ((5, s5), (10, s10)):
            for c, task in ((0, "a"), (1, "b")):
                scores.append(
                    ScoreRecord(seed=seed, eval_round=rnd, client=c, task=task, owner=c, role="self", n=2, score=s)
                )
                other, otask = 1 - c, "b" if task == "a" else "a"
                scores.append(
                    ScoreRecord(
                        seed=seed, eval_round=rnd, client=c, task=otask, owner=other, role="others", n=2, score=others
                    )
                )
        for it, s in ((0, 0.1), (20, 0.5 + 0.1 * seed)):
            adapt.append(AdaptationRecord(seed=seed, task="u", arch="llama", init="method", iteration=it, score=s))
            adapt.append(AdaptationRecord(seed=seed, task="u", arch="llama", init="fresh", iteration=it, score=s / 2))
        costs.append(
            CostRecord(
                seed=seed, round=1, client=0, uplink_bytes=up, downlink_bytes=0, train_seconds=1.0, peak_memory_bytes=1
            )
        )
    seeds = sorted(self_scores)
    return new_result(
        benchmark=BenchmarkRef(name="drake-toy", version="1", manifest_hash="sha256:0"),
        scenario=ScenarioRef(tag="static"),
        method=MethodRef(name=name, version="1.0"),
        model_allocation=ModelAllocationRef(name="homo", clients={"0": "m", "1": "m"}),
        seeds=seeds,
        fl=FLSettings(rounds=10, local_steps=1, batch_size=1),
        evaluation=EvaluationSettings(decoding={}, batch_size=1, prompt_template_version="v1"),
        raw=RawTables(scores=scores, adaptation=adapt, costs=costs),
        status=status,  # type: ignore[arg-type]
        environment=Environment(python="3.11", platform="x", device="cpu"),
        created_at=datetime(2025, 1, 1, tzinfo=timezone.utc),
    )


# sft: Self 40/60 at rounds 5/10 for seed 0 and 50/80 for seed 1 -> means 45, 70 (std 5, 10); Others 10
SFT = _result("sft", {0: [0.4, 0.6], 1: [0.5, 0.8]}, others=0.1, up=0)
# fedit: one seed
FEDIT = _result("fedit", {0: [0.3, 0.9]}, others=0.25, up=2_500_000, status="partial")


def test_accuracy_over_rounds(tmp_path: Path) -> None:
    fig = plot_accuracy_over_rounds([SFT, FEDIT], tmp_path / "sub" / "acc.png")
    assert (tmp_path / "sub" / "acc.png").read_bytes()[:8] == PNG
    ax_self, ax_others = fig.axes[:2]
    assert [ln.get_label() for ln in ax_self.lines] == ["sft 1.0", "fedit 1.0"]
    np.testing.assert_allclose(ax_self.lines[0].get_xdata(), [5, 10])
    np.testing.assert_allclose(ax_self.lines[0].get_ydata(), [45.0, 70.0])
    np.testing.assert_allclose(ax_self.lines[1].get_ydata(), [30.0, 90.0])
    np.testing.assert_allclose(ax_others.lines[0].get_ydata(), [10.0, 10.0])
    # std band of sft Self: [45 ± 5, 70 ± 10]
    band = ax_self.collections[0].get_paths()[0].vertices
    assert band[:, 1].min() == pytest.approx(40.0) and band[:, 1].max() == pytest.approx(80.0)
    with pytest.raises(ValueError, match="no results"):
        plot_accuracy_over_rounds([], tmp_path / "x.png")


def test_a_board_of_two_dozen_methods_gets_distinct_styles_and_one_legend_below(tmp_path: Path) -> None:
    """With the default ten-colour cycle, a 24-entry board drew methods 1 and 11 alike, and a legend inside each
    axes covered the curves; each method must look different and the legend sit outside the axes."""
    from drake_bench.evaluation.plots import method_styles

    runs = [SFT.model_copy(update={"method": MethodRef(name=f"m{i:02d}", version="1.0")}) for i in range(24)]
    fig = plot_accuracy_over_rounds(runs, tmp_path / "acc.png")
    ax_self, ax_others = fig.axes[:2]
    looks = {(str(ln.get_color()), ln.get_marker()) for ln in ax_self.lines}
    assert len(ax_self.lines) == 24 and len(looks) == 24
    assert ax_self.get_legend() is None and ax_others.get_legend() is None
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == [f"m{i:02d} 1.0" for i in range(24)]
    few = method_styles(["a", "b", "c"])
    assert [few[k]["color"] for k in "abc"] == ["C0", "C1", "C2"]  # small boards keep matplotlib's usual look
    assert len({(str(v["color"]), v["marker"]) for v in method_styles([str(i) for i in range(60)]).values()}) == 60


def test_adaptation_plot(tmp_path: Path) -> None:
    fig = plot_adaptation([SFT], tmp_path / "adapt.png")
    assert (tmp_path / "adapt.png").read_bytes()[:8] == PNG
    ax = fig.axes[0]
    by_label = {ln.get_label(): ln for ln in ax.lines}
    assert set(by_label) == {"sft 1.0 (method)", "sft 1.0 (fresh)"}
    # method: it0 .1 both seeds; it20 .5 / .6 -> 55
    np.testing.assert_allclose(by_label["sft 1.0 (method)"].get_ydata(), [10.0, 55.0])
    np.testing.assert_allclose(by_label["sft 1.0 (fresh)"].get_ydata(), [5.0, 27.5])
    assert by_label["sft 1.0 (fresh)"].get_linestyle() == "--"


def test_relevance_heatmap(tmp_path: Path) -> None:
    m = [[1.0, 0.2, 0.1], [0.2, 1.0, 0.7], [0.1, 0.7, 1.0]]
    fig = plot_relevance_heatmap(m, ["c1", "c2", "c3"], tmp_path / "rel.png")
    assert (tmp_path / "rel.png").read_bytes()[:8] == PNG
    ax = fig.axes[0]
    np.testing.assert_allclose(ax.images[0].get_array(), m)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["c1", "c2", "c3"]
    assert "0.70" in [t.get_text() for t in ax.texts]
    with pytest.raises(ValueError, match="square"):
        plot_relevance_heatmap([[1, 2, 3]], ["a"], tmp_path / "bad.png")
    with pytest.raises(ValueError, match="2 labels for a 3x3"):
        plot_relevance_heatmap(m, ["a", "b"], tmp_path / "bad.png")


def test_summary_markdown_exact() -> None:
    expected = (
        "| Method | Self A_last | Self A_AUC | Others A_last | Others A_AUC | Worst client | Uplink MB/round |\n"
        "|:---|---:|---:|---:|---:|---:|---:|\n"
        # sft: last 70 ± 10; AUC seed0 (40+60)/2=50, seed1 (50+80)/2=65 -> 57.5 ± 7.5; worst = Self (both clients equal)
        "| sft 1.0 | 70.00 ± 10.00 | 57.50 ± 7.50 | 10.00 ± 0.00 | 10.00 ± 0.00 | 70.00 ± 10.00 | 0.00 ± 0.00 |\n"
        # fedit: one seed, std omitted; 2.5 MB in one round
        "| fedit 1.0 (partial) | 90.00 | 60.00 | 25.00 | 25.00 | 90.00 | 2.50 |\n"
    )
    assert summary_markdown([SFT, FEDIT]) == expected


def test_summary_table_rich() -> None:
    table = summary_table([SFT, FEDIT], title="toy")
    assert [c.header for c in table.columns][1:3] == ["Self A_last", "Self A_AUC"]
    assert table.row_count == 2
    console = Console(width=200, record=True)
    console.print(table)
    text = console.export_text()
    assert "70.00 ± 10.00" in text and "fedit 1.0 (partial)" in text


def test_summary_markdown_adds_the_wire_table_when_elements_were_counted() -> None:
    # 10^6 bf16 elements up (2 MB), 5 x 10^5 fp32 down: bytes and elements side by side, and fp32-equivalent MB
    costs = [
        c.model_copy(
            update={
                "uplink_bytes": 2_000_000,
                "uplink_elements": {"bfloat16": 1_000_000},
                "downlink_elements": {"float32": 500_000},
            }
        )
        for c in FEDIT.raw.costs
    ]
    counted = FEDIT.model_copy(update={"raw": FEDIT.raw.model_copy(update={"costs": costs})})
    counted = counted.model_copy(update={"summary": summarize(counted.raw, seeds=counted.seeds)})
    text = summary_markdown([SFT, counted])
    assert text.startswith(summary_markdown([SFT, FEDIT])[:60])
    assert text.endswith(
        "| Method | On the wire | Uplink k elements/round | Downlink k elements/round | Uplink MB/round | "
        "Uplink MB/round at fp32 |\n"
        "|:---|---:|---:|---:|---:|---:|\n"
        "| fedit 1.0 | bfloat16, float32 | 1000.0 | 500.0 | 2.00 | 4.00 |\n"
    )
    assert "On the wire" not in summary_markdown([SFT, FEDIT])  # no element counts, no wire table


def test_summary_markdown_shows_the_servers_time_beside_the_clients_when_it_was_timed() -> None:
    """Compute matching counts the clients' FLOPs only; a server that does real work (FedRPCA's robust PCA) must
    show beside them: 1 s of client training a round (one client, one round) against 0.25 s, then 2.5 s, of
    aggregation over two seeds."""
    from drake_bench.evaluation.metrics import ServerCostRecord

    server = [ServerCostRecord(seed=s, round=1, aggregate_seconds=t) for s, t in ((0, 0.25), (1, 2.5))]
    timed = SFT.model_copy(update={"raw": SFT.raw.model_copy(update={"server_costs": server})})
    timed = timed.model_copy(
        update={
            "summary": summarize(timed.raw, seeds=timed.seeds),
            "environment": timed.environment.model_copy(update={"cpu_model": "AMD EPYC", "cpu_count": 2}),
        }
    )
    text = summary_markdown([timed, FEDIT])
    assert text.endswith(
        "| Method | Client training s/round | Server s/round | Server / client | Machine |\n"
        "|:---|---:|---:|---:|---:|\n"
        "| sft 1.0 | 1.00 ± 0.00 | 1.375 ± 1.125 | 1.375 | AMD EPYC x2 |\n"
    )
    assert "Server s/round" not in summary_markdown([SFT, FEDIT])  # no server timed, no table


def test_summary_says_under_which_numerics_the_rows_were_trained() -> None:
    """Files made before the setting existed add nothing (the exact table above); a recorded setting adds one
    paragraph, per row where the rows differ."""
    from drake_bench.evaluation.table import numerics_note

    def recorded(res: RunResult, numerics: str, capability: str) -> RunResult:
        fl = res.fl.model_copy(update={"extra": {**res.fl.extra, "run_config": {"numerics": numerics}}})
        env = res.environment.model_copy(update={"cpu_capability": capability})
        return res.model_copy(update={"fl": fl, "environment": env})

    assert numerics_note([SFT, FEDIT]) == ""
    both = numerics_note([recorded(SFT, "portable", "AVX2"), recorded(FEDIT, "portable", "AVX2")])
    assert "every row portable, AVX2 kernels" in both
    mixed = numerics_note([recorded(SFT, "portable", "AVX2"), FEDIT])
    assert "sft 1.0: portable, AVX2 kernels" in mixed and "fedit 1.0: native, made before" in mixed
    assert summary_markdown([recorded(SFT, "native", "AVX512")]).endswith(
        numerics_note([recorded(SFT, "native", "AVX512")])
    )


def test_summary_adds_self_by_model_where_clients_hold_different_models() -> None:
    """Client 0 holds model a, client 1 model b: each model's column is its clients' Self A_last, mean ± std over
    seeds; one model (every other test here) adds no table."""
    scores = [
        r.model_copy(update={"score": r.score / 2}) if r.client == 1 and r.role == "self" else r for r in SFT.raw.scores
    ]
    raw = SFT.raw.model_copy(update={"scores": scores})
    mixed = SFT.model_copy(
        update={
            "raw": raw,
            "summary": summarize(raw, seeds=SFT.seeds),
            "model_allocation": ModelAllocationRef(name="mixed", clients={"0": "a", "1": "b"}),
        }
    )
    text = summary_markdown([mixed])
    # Self at round 10: seed 0 0.6, seed 1 0.8 -> a 70 ± 10; b half of it -> 35 ± 5 (overall 52.50 ± 7.50)
    assert (
        "| Method | a (1 client) | b (1 client) |\n|:---|---:|---:|\n| sft 1.0 | 70.00 ± 10.00 | 35.00 ± 5.00 |\n"
        in text
    )
    assert "| sft 1.0 | 52.50 ± 7.50 |" in text
    assert "by model" not in summary_markdown([SFT, FEDIT])
    assert "by model" not in summary_markdown([SFT, mixed])  # two allocations: no common columns to compare
