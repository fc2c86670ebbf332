"""Task cards and the cards CLI."""

from __future__ import annotations

from PIL import Image
from typer.testing import CliRunner

from drake_bench.cli import app
from drake_bench.synth.cards import render_grid, task_card


def test_task_card_content():
    card = task_card("drake-synth", "rel-spatial")
    assert "answer type: yes_no" in card and "client 5, position 4" in card and "VSR" in card
    assert "unseen task" in task_card("drake-synth", "un-similarity")


def test_task_card_reports_learnability_as_recorded(monkeypatch):
    from drake_bench.synth import cards

    row = {"train": 10, "test": 5, "vision": 0.4, "text_only": 0.5, "chance": 0.5, "metric": "exact-match accuracy",
           "learnable": False, "confirm": {"test": 7, "vision": 0.9, "text_only": 0.3, "chance": 0.5}}
    monkeypatch.setattr(cards, "learnability", lambda: {"tasks": {"drake-synth/rel-spatial": row}})
    card = task_card("drake-synth", "rel-spatial")
    assert "image+question model 0.40, text-only model 0.50" in card and "not learnt by any probe run" in card
    assert "held-out confirmation (7 items" in card and "image+question model 0.90" in card


def test_render_grid_size():
    img = render_grid("drake-synth", "rel-count-across", n=3)
    assert img.height > 3 * 112 and img.width > 5 * 112


def test_cli_task_card_and_cards(tmp_path):
    runner = CliRunner()
    r = runner.invoke(app, ["task-card", "hflb-synth", "hflb-c8-ocr", "--out", str(tmp_path / "x.png")])
    assert r.exit_code == 0, r.output
    assert "hflb-c8-ocr" in r.output and Image.open(tmp_path / "x.png").size[0] > 112
    r = runner.invoke(app, ["cards", "fedllm-synth", "--out", str(tmp_path / "cards"), "--examples", "1"])
    assert r.exit_code == 0, r.output
    assert len(list((tmp_path / "cards").glob("*.md"))) == 104
    r = runner.invoke(app, ["task-card", "drake-synth", "nope"])
    assert r.exit_code != 0


def test_task_table_lists_every_client_task_in_order(monkeypatch):
    from drake_bench.manifest import load_benchmark
    from drake_bench.synth import cards

    monkeypatch.setattr(cards, "learnability", lambda: {"tasks": {"drake-synth/rel-spatial": {"learnable": True}}})
    spec = load_benchmark("drake-synth")
    rows = [r for r in cards.task_table("drake-synth").splitlines()[2:]]
    assert len(rows) == len(spec.clients) + 1  # + the unseen row
    for c, row in zip(spec.clients, rows):
        assert [t for t in spec.client(c.id).tasks] == [w.strip("`") for w in row.split() if w.startswith("`")]
    assert "`rel-spatial` (Y/N, 1 img)" in rows[4] and rows[4].endswith("| 1/4 |")  # client 5; only one recorded
    assert rows[-1].startswith("| unseen |") and rows[-1].endswith("| 0/7 |")


def test_readme_task_table_is_current():
    """The README's drake-synth table is generated; regenerate it with replace_task_table if this fails."""
    from pathlib import Path

    from drake_bench.synth.cards import replace_task_table

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert replace_task_table(readme, "drake-synth") == readme
