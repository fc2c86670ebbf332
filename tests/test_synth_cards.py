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
