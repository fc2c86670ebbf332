"""The compute probe: FLOPs counted by the evaluator around the plugin's calls, a method priced against SFT on
the same steps, and ``compute_matched`` giving the costlier method fewer steps from that measurement.

Runs on conftest's 4-client toy benchmark with tiny random models of two families and two sizes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import torch_threads  # noqa: E402

from drake_bench.evaluator.standard import RunConfig, run

pytestmark = pytest.mark.usefixtures("one_torch_thread")

STEPS = 4


def _cfg(bench, out, method, **kw):
    manifest, root = bench
    base = dict(
        benchmark=manifest,
        method=method,
        data_dir=root,
        out=str(out),
        seeds=[0],
        rounds=2,
        local_steps=STEPS,
        others_subsample=1,
        self_subsample=1,
        fast_adaptation=False,
        eval_every_rounds=2,
        method_config={"model_loader": "testing"},
    )
    base.update(kw)
    return RunConfig(**base)


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    """One output folder for both methods, as a leaderboard's: they share one SFT reference probe."""
    return tmp_path_factory.mktemp("runs")


@pytest.fixture(scope="module")
def fedit_measured(toy_mixed, out):
    with torch_threads(1):
        return run(_cfg(toy_mixed, out, "fedit", measure_compute=True))


PROBED: dict[str, list[str]] = {}  # run -> the methods its compute probe ran


@pytest.fixture(scope="module")
def fedmosaic_matched(toy_mixed, out, fedit_measured):
    from drake_bench.evaluation import compute

    probe_one = compute._probe_one

    def recorded(ev, name, *args, **kwargs):
        PROBED.setdefault("fedmosaic", []).append(name)
        return probe_one(ev, name, *args, **kwargs)

    cfg = {"model_loader": "testing", "public_size": 16, "grad_interval": 1, "alignment_audit_size": 4}
    with torch_threads(1), pytest.MonkeyPatch.context() as mp:
        mp.setattr(compute, "_probe_one", recorded)
        return run(_cfg(toy_mixed, out, "fedmosaic", compute_matched=True, method_config=cfg))


def test_plain_lora_training_costs_what_sft_costs(fedit_measured):
    """FedIT trains each client exactly as SFT does (only the server differs): the probe must find 1.0 for every
    model, and the run keeps the benchmark's steps (measure_compute only measures)."""
    probe = fedit_measured.fl.extra["compute"]
    assert set(probe["round_flops"]) == set(fedit_measured.model_allocation.clients.values())
    assert all(v > 0 for v in probe["round_flops"].values())
    assert probe["round_flops"] == probe["reference_round_flops"]
    # the second round trains on the first round's batches: a method whose rounds are alike prices them alike
    assert probe["first_round_flops"] == probe["round_flops"]
    assert probe["reference_first_round_flops"] == probe["reference_round_flops"]
    assert probe["setup_flops"] == probe["reference_setup_flops"] == 0
    assert probe["measured_relative_compute"] == 1.0
    assert fedit_measured.fl.local_steps == STEPS


def test_bigger_models_cost_more_per_round(fedit_measured):
    flops = fedit_measured.fl.extra["compute"]["reference_round_flops"]
    assert flops["tiny-llava-llama-m"] > flops["tiny-llava-llama-s"]


def test_fedmosaic_is_measured_costlier_and_matched_to_fewer_steps(fedmosaic_matched):
    """FedMosaic's dual path, W_s gradients (every step here) and one-off alignment cost more FLOPs than SFT's
    LoRA; compute matching gives it the steps whose federation total is closest to SFT's, recorded."""
    probe = fedmosaic_matched.fl.extra["compute"]
    assert probe["setup_flops"] > 0  # the weight alignment on public data
    assert all(probe["round_flops"][m] > probe["reference_round_flops"][m] for m in probe["round_flops"])
    assert probe["measured_relative_compute"] > 1.0
    steps = probe["matched_local_steps"]
    assert fedmosaic_matched.fl.local_steps == steps < STEPS
    per_step = probe["method_total_flops"] - probe["setup_flops"]
    spent = probe["setup_flops"] + per_step * steps / STEPS
    alternatives = [probe["setup_flops"] + per_step * s / STEPS for s in (steps - 1, steps + 1) if s >= 1]
    target = probe["reference_total_flops"]
    assert all(abs(spent - target) <= abs(a - target) for a in alternatives)
    assert fedmosaic_matched.fl.extra["compute_matched"] is True


def test_the_probe_is_cached_with_the_checkpoints(fedit_measured, fedmosaic_matched):
    """A resumed run reads the probe back instead of measuring again (same key, same numbers); the two methods
    priced themselves against one SFT probe, measured once."""
    out = Path(fedmosaic_matched.fl.extra["run_config"]["out"])
    files = {p.parent.name: p for p in out.rglob("compute-probe.json")}
    assert set(files) == {"fedit", "fedmosaic"}
    stored = json.loads(files["fedmosaic"].read_text())
    assert stored["probe"]["round_flops"] == fedmosaic_matched.fl.extra["compute"]["round_flops"]
    assert len(list(out.rglob("compute-reference/*.json"))) == 1
    a, b = fedit_measured.fl.extra["compute"], fedmosaic_matched.fl.extra["compute"]
    assert a["reference_round_flops"] == b["reference_round_flops"]

    assert PROBED["fedmosaic"] == ["fedmosaic"]  # its run measured itself only and read SFT's probe back


def test_the_summary_shows_measured_beside_declared_compute(fedit_measured, fedmosaic_matched):
    from drake_bench.evaluation.table import summary_markdown

    text = summary_markdown([fedit_measured, fedmosaic_matched])
    assert "Relative compute (measured)" in text
    probe = fedmosaic_matched.fl.extra["compute"]
    assert f"{probe['measured_relative_compute']:.3f} | 1.161 |" in text
    assert f"| {fedit_measured.label} | {STEPS} | 1.000 | 1 |" in text


@pytest.fixture(scope="module")
def feddpa_matched(toy_mixed, out, fedit_measured):
    with torch_threads(1):
        return run(_cfg(toy_mixed, out, "feddpa", compute_matched=True))


def test_a_method_that_trains_more_from_its_second_round_is_priced_by_it(feddpa_matched):
    """FedDPA trains only its global adapter in a client's first round and both adapters after (two passes per
    step): the probe's second round must see that, and matching must give FedDPA the steps whose whole federation,
    first round at its price and the others at theirs, costs what SFT's does (not the first round's price for every
    round, which would hand it about twice SFT's compute)."""
    from drake_bench.evaluation.compute import PROBE_VERSION, ComputeProbe

    probe = feddpa_matched.fl.extra["compute"]
    assert probe["version"] == PROBE_VERSION == 3 and probe["post_federation_flops"] == {}
    for m, first in probe["first_round_flops"].items():
        assert probe["round_flops"][m] > 1.5 * first  # a second pass (its backward skips the detached branch)
        assert first >= probe["reference_first_round_flops"][m]
    steps = probe["matched_local_steps"]
    assert feddpa_matched.fl.local_steps == steps < STEPS
    first_only = ComputeProbe.from_record(probe).model_copy(update={"round_flops": probe["first_round_flops"]})
    assert first_only.matched_local_steps > steps  # what pricing the first round only would have given


@pytest.fixture(scope="module")
def post_train_matched(toy_mixed, out, fedit_measured):
    cfg = {"model_loader": "testing", "post_steps": 2}
    with torch_threads(1):
        return run(_cfg(toy_mixed, out, "fedavg-post-train", compute_matched=True, method_config=cfg))


def test_a_post_federation_stage_that_trains_is_priced(post_train_matched):
    """FedAvg + post-train trains every client P more steps after the last round (TAP's Stage 2): the probe prices
    that stage per model, and matching takes it out of the budget the rounds share (P does not scale with the local
    steps), so the rounds get fewer steps than they would if the stage were free."""
    from drake_bench.evaluation.compute import ComputeProbe

    probe = post_train_matched.fl.extra["compute"]
    for m, later in probe["round_flops"].items():
        assert 0 < probe["post_federation_flops"][m] < later  # P = 2 steps against a round's 4
    assert probe["reference_post_federation_flops"] == {}
    steps = probe["matched_local_steps"]
    assert post_train_matched.fl.local_steps == steps < STEPS
    recorded = ComputeProbe.from_record(probe)
    assert recorded.model_copy(update={"post_federation_flops": {}}).matched_local_steps > steps
    # the totals at the steps it ran: the stage is paid in full, only the rounds shrink
    post = sum(n * probe["post_federation_flops"][m] for m, n in probe["clients_per_model"].items())
    assert recorded.flops_at_steps(STEPS) == pytest.approx(probe["method_total_flops"])
    assert recorded.flops_at_steps(0) == pytest.approx(probe["setup_flops"] + post)


def test_the_federation_total_prices_the_first_round_then_the_later_ones():
    from drake_bench.evaluation.compute import ComputeProbe

    probe = ComputeProbe(
        method="m",
        local_steps=10,
        rounds=4,
        clients_per_model={"s": 2, "m": 1},
        probe_clients={"s": 0, "m": 2},
        setup_flops=50,
        first_round_flops={"s": 10, "m": 30},
        round_flops={"s": 20, "m": 60},
        reference_setup_flops=0,
        reference_first_round_flops={"s": 10, "m": 30},
        reference_round_flops={"s": 10, "m": 30},
        declared_relative_compute=2.0,
    )
    assert probe.method_total_flops == 50 + 2 * (10 + 3 * 20) + (30 + 3 * 60)
    assert probe.reference_total_flops == 4 * (2 * 10 + 30)
    assert probe.measured_relative_compute == probe.method_total_flops / 200
    # (200 - 50) of budget at (2 * 70 + 210) / 10 = 35 FLOPs a step: 4.29 -> 4 steps
    assert probe.matched_local_steps == 4
    # a version-1 probe recorded no first round: every round at the one price it measured
    v1 = ComputeProbe(
        **{**probe.model_dump(), "version": 1, "first_round_flops": None, "reference_first_round_flops": None}
    )
    assert v1.method_total_flops == 50 + 4 * (2 * 20 + 60)


def test_fixed_costs_beyond_the_budget_are_over_budget_not_matched():
    """Setup and a post-federation stage do not shrink with the local steps: when they leave less than half a step
    a round of SFT's budget, matching can only give the floor of one step, and the run spends more than SFT."""
    from drake_bench.evaluation.compute import ComputeProbe

    base = dict(
        method="m",
        local_steps=10,
        rounds=4,
        clients_per_model={"s": 2, "m": 1},
        probe_clients={"s": 0, "m": 2},
        first_round_flops={"s": 10, "m": 30},
        round_flops={"s": 20, "m": 60},
        reference_setup_flops=0,
        reference_first_round_flops={"s": 10, "m": 30},
        reference_round_flops={"s": 10, "m": 30},
        declared_relative_compute=1.0,
    )
    # 35 FLOPs a step against a 200-FLOP budget: setup 150 leaves 1.43 steps, setup 190 leaves 0.29
    fits, over = ComputeProbe(setup_flops=150, **base), ComputeProbe(setup_flops=190, **base)
    assert fits.matched_local_steps == over.matched_local_steps == 1
    assert not fits.over_budget and fits.over_budget_note() == ""
    assert fits.matched_relative_compute == pytest.approx((150 + 35) / 200)
    assert over.over_budget and over.matched_relative_compute == pytest.approx((190 + 35) / 200)
    assert "'m'" in over.over_budget_note() and "1.12x sft" in over.over_budget_note()
    assert over.summary()["over_budget"] is True and ComputeProbe.from_record(over.summary()) == over
    # a method whose rounds cost nothing has nothing to match, so nothing to be over
    free = ComputeProbe(
        setup_flops=0, **{**base, "first_round_flops": {"s": 0, "m": 0}, "round_flops": {"s": 0, "m": 0}}
    )
    assert not free.over_budget and free.matched_local_steps == 10


@pytest.mark.slow
def test_a_stage_costlier_than_sfts_federation_is_run_and_marked_over_budget(toy_mixed, out, fedit_measured):
    """FedAvg + post-train with 10 post-training steps against SFT's 2 rounds of 4: the run warns, runs one step a
    round, records by how much it overspends, and the board's compute table marks the row."""
    from drake_bench.evaluation.compute import ComputeProbe
    from drake_bench.evaluation.table import summary_markdown

    cfg = {"model_loader": "testing", "post_steps": 10}
    with torch_threads(1), pytest.warns(RuntimeWarning, match=r"'fedavg-post-train'.*minimum of 1 local step"):
        res = run(_cfg(toy_mixed, out / "over", "fedavg-post-train", compute_matched=True, method_config=cfg))
    record = res.fl.extra["compute"]
    assert res.fl.local_steps == record["matched_local_steps"] == 1 and record["over_budget"] is True
    assert record["matched_relative_compute"] > 1.2  # about (10 + 2) / 8
    assert record["matched_relative_compute"] == pytest.approx(ComputeProbe.from_record(record).relative_compute_at(1))
    text = summary_markdown([fedit_measured, res])
    assert f"{record['matched_relative_compute']:.3f} (over budget)" in text and "not at equal compute" in text
    assert "over budget" not in summary_markdown([fedit_measured])
    from drake_bench.leaderboard.html import _flops_cell  # the board page's column, the same mark

    assert "over budget" in _flops_cell(res) and f'data-sort="{record["matched_relative_compute"]:.6f}"' in _flops_cell(
        res
    )
    assert ">1.00<" in _flops_cell(fedit_measured).replace("</td>", "<")
