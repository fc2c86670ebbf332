"""scripts/paper_rank_report.py: the board-beside-paper comparison counts what it says it counts."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import paper_rank_report  # noqa: E402


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
    import shutil

    original = next(p for p in sorted(src.rglob("result.json")) if "checkpoints" not in p.parts)
    dest = tmp_path / board.name / original.relative_to(ROOT / "leaderboard" / board.name)
    dest.parent.mkdir(parents=True)
    shutil.copy(original, dest)
    data = json.loads(dest.read_text())
    data["seeds"] = data["seeds"][:2]
    dest.write_text(json.dumps(data))
    scores, refused = paper_rank_report.ours(board, tmp_path)
    assert scores == {} and refused and str(dest) in refused[0]


def test_the_scatter_is_drawn_only_with_two_methods(tmp_path: Path) -> None:
    paper = {"a": (60.0, 0.5), "b": (55.0, 0.5)}
    two = {"paper_table": "Table 2 (x)", "metrics": {m: paper_rank_report.compare({"a": (1.0, 0.1), "b": (2.0, 0.1)}, paper)
                                                    for m in ("self_last", "others_last")}}
    assert paper_rank_report.plot("b", two, tmp_path / "b.png") and (tmp_path / "b.png").stat().st_size > 1000
    one = {"paper_table": "Table 2 (x)", "metrics": {m: paper_rank_report.compare({"a": (1.0, 0.1)}, paper)
                                                    for m in ("self_last", "others_last")}}
    assert not paper_rank_report.plot("a", one, tmp_path / "a.png") and not (tmp_path / "a.png").exists()
