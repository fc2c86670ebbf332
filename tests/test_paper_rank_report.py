"""scripts/paper_rank_report.py: the board-beside-paper comparison counts what it says it counts."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import paper_rank_report  # noqa: E402

from drake_bench.results.result_file import copy_result  # noqa: E402


def test_resolved_pairs_kept_reversed_and_tau() -> None:
    paper = {"a": (60.0, 0.5), "b": (55.0, 0.5), "c": (54.8, 0.5)}  # a > b and a > c resolved; b, c overlap
    toy = {"a": (30.0, 0.2), "b": (35.0, 0.2), "c": (34.0, 4.0)}  # a < b resolved here; a < c in the mean only
    c = paper_rank_report.compare(toy, paper)
    pairs = {(p["paper_higher"], p["paper_lower"]): p for p in c["resolved_pairs"]}
    assert set(pairs) == {("a", "b"), ("a", "c")}  # (b, c) overlaps in the paper: no order to keep
    assert not pairs[("a", "b")]["kept"] and pairs[("a", "b")]["resolved_here"]
    assert not pairs[("a", "c")]["kept"] and not pairs[("a", "c")]["resolved_here"]
    assert (c["kept"], c["reversed_and_resolved_here"]) == (0, 1)
    # means: paper a > b > c, toy b > c > a: (a,b) and (a,c) discordant, (b,c) concordant
    assert c["kendall_tau_a"] == pytest.approx((1 - 2) / 3)
    assert c["rows"]["a"]["paper_rank"] == (1, False) and c["rows"]["b"]["paper_rank"] == (2, True)


def test_only_methods_both_sides_have() -> None:
    c = paper_rank_report.compare({"a": (1.0, 0.0)}, {"a": (2.0, 0.0), "b": (1.0, 0.0)})
    assert c["methods"] == ["a"] and c["resolved_pairs"] == [] and c["kendall_tau_a"] is None


def test_refused_files_are_left_out_and_named(tmp_path: Path) -> None:
    from drake_bench.leaderboard.boards import canonical_boards

    board = canonical_boards()["drake-synth-dynamic"]
    src = ROOT / "leaderboard" / board.name / "runs"
    if not any(src.rglob("result.json")):
        pytest.skip("no committed result file on drake-synth-dynamic")
    # a copy of one committed file with another seed set must be refused by rule `seeds` and left out
    import json

    original = next(p for p in sorted(src.rglob("result.json")) if "checkpoints" not in p.parts)
    dest = tmp_path / board.name / original.relative_to(ROOT / "leaderboard" / board.name)
    dest.parent.mkdir(parents=True)
    copy_result(original, dest)
    data = json.loads(dest.read_text())
    data["seeds"] = data["seeds"][:2]
    dest.write_text(json.dumps(data))
    scores, traffic, refused, building = paper_rank_report.ours(board, tmp_path)
    assert scores == {} and traffic == {} and refused and str(dest) in refused[0] and building == {}


def test_an_entry_being_built_is_progress_not_a_refusal(tmp_path: Path) -> None:
    import json

    from drake_bench.leaderboard.boards import canonical_boards

    board = canonical_boards()["drake-synth-dynamic"]
    src = ROOT / "leaderboard" / board.name / "runs" / "drake-synth" / "dynamic" / "ditto" / "1.0" / "result.json"
    if not src.is_file():
        pytest.skip("no committed DITTO result file on drake-synth-dynamic")
    dest = tmp_path / board.name / src.relative_to(ROOT / "leaderboard" / board.name)
    dest.parent.mkdir(parents=True)
    copy_result(src, dest)
    data = json.loads(dest.read_text())
    data["status"] = "partial"  # as a build writes it after each finished seed
    dest.write_text(json.dumps(data))
    scores, _, refused, building = paper_rank_report.ours(board, tmp_path)
    assert scores == {} and refused == [] and building == {"ditto": [0, 1, 2]}
    assert paper_rank_report._missing("ditto", building) == "DITTO (being built: seeds 0, 1, 2 done)"
    assert paper_rank_report._missing("fedsim", building) == "FedSim"


def test_the_scatter_is_drawn_only_with_two_methods(tmp_path: Path) -> None:
    paper = {"a": (60.0, 0.5), "b": (55.0, 0.5)}
    two = {
        "paper_table": "Table 2 (x)",
        "metrics": {
            m: paper_rank_report.compare({"a": (1.0, 0.1), "b": (2.0, 0.1)}, paper)
            for m in ("self_last", "others_last")
        },
    }
    assert paper_rank_report.plot("b", two, tmp_path / "b.png") and (tmp_path / "b.png").stat().st_size > 1000
    one = {
        "paper_table": "Table 2 (x)",
        "metrics": {m: paper_rank_report.compare({"a": (1.0, 0.1)}, paper) for m in ("self_last", "others_last")},
    }
    assert not paper_rank_report.plot("a", one, tmp_path / "a.png") and not (tmp_path / "a.png").exists()


def _entry(self_last: dict[str, float], others_last: dict[str, float], paper: dict[str, float]) -> dict:
    """A report entry of the ten methods: our means (std 0.1) beside paper means (std 0.1), FedIT-sized traffic for the
    dual adapters, none for SFT, fewer elements for FedMosaic."""
    metrics = {
        "self_last": paper_rank_report.compare(
            {m: (v, 0.1) for m, v in self_last.items()}, {m: (v, 0.1) for m, v in paper.items()}
        ),
        "others_last": paper_rank_report.compare(
            {m: (v, 0.1) for m, v in others_last.items()}, {m: (v, 0.1) for m, v in paper.items()}
        ),
    }
    fedit = {
        "uplink_bytes_per_round": 100.0,
        "downlink_bytes_per_round": 100.0,
        "uplink_elements_per_round": 25.0,
        "downlink_elements_per_round": 25.0,
    }
    traffic = {m: dict(fedit) for m in paper_rank_report.TEN}
    traffic["sft"] = {k: 0.0 for k in fedit}
    traffic["fedmosaic"] = {k: v / 2 for k, v in fedit.items()}
    return {"metrics": metrics, "traffic": traffic}


def test_predictions_are_checked_from_the_means_and_say_not_yet_while_a_method_is_missing() -> None:
    ten = paper_rank_report.TEN  # sft, fedit, ditto, fedsim, feddpa, feddat, perada, fedmkt, takfl, fedmosaic
    paper = {m: 70.0 - i for i, m in enumerate(ten)}
    self_last = {
        "sft": 38.0,
        "fedit": 36.0,
        "ditto": 34.0,
        "fedsim": 36.5,
        "feddpa": 35.0,
        "feddat": 35.5,
        "perada": 37.0,
        "fedmkt": 36.2,
        "takfl": 35.8,
        "fedmosaic": 38.5,
    }
    others_last = {m: 31.0 for m in ten} | {"fedit": 32.0, "sft": 30.5, "feddat": 31.5, "fedmosaic": 31.5}
    checks = {
        n: (held, why) for n, held, why in paper_rank_report.check_predictions(_entry(self_last, others_last, paper))
    }
    assert list(checks) == list(paper_rank_report.PREDICTION_NUMBERS)
    assert checks["1"][0] is True  # Self span 4.5, Others span 1.5
    assert checks["3"][0] is True  # FedMosaic 0.5 above SFT
    assert checks["4"][0] is True and checks["5a"][0] is True and checks["6"][0] is True
    assert checks["7"][0] is True and checks["8"][0] is True and checks["9"][0] is True
    assert checks["5b"][0] is None  # read across the boards
    # each change below fails the prediction it names
    worse = dict(self_last, ditto=32.0)  # Self span 6.5 > 5.0
    assert paper_rank_report.check_predictions(_entry(worse, others_last, paper))[0][1] is False
    entry = _entry(self_last, others_last, paper)
    entry["traffic"]["feddpa"]["uplink_bytes_per_round"] += 1  # one byte more than FedIT: prediction 9 fails
    assert dict((n, h) for n, h, _ in paper_rank_report.check_predictions(entry))["9"] is False
    # a missing method: every prediction says not yet, naming it
    partial = _entry({m: v for m, v in self_last.items() if m != "takfl"}, others_last, paper)
    rows = paper_rank_report.check_predictions(partial)
    assert all(held is None and "TAKFL" in why for _, held, why in rows)


def test_prediction_2_counts_resolved_pairs_and_tau() -> None:
    ten = paper_rank_report.TEN
    paper = {m: 70.0 - 3 * i for i, m in enumerate(ten)}  # every pair resolved in the paper
    same_order = {m: 40.0 - 3 * i for i, m in enumerate(ten)}  # every pair kept and resolved here: too many
    held = {n: h for n, h, _ in paper_rank_report.check_predictions(_entry(same_order, same_order, paper))}
    assert held["2"] is False
    md = paper_rank_report.predictions_markdown({"drake-synth-dynamic": _entry(same_order, same_order, paper)})
    assert md[0] == "## The predictions, checked" and any(line.startswith("| 2 | ✗") for line in md)
