"""Task cards and the cards CLI."""

from __future__ import annotations

from PIL import Image
from typer.testing import CliRunner

from drake_bench.benchmarks.synth.cards import render_grid, task_card
from drake_bench.cli import app


def test_task_card_content():
    card = task_card("drake-synth", "rel-spatial")
    assert "answer type: yes_no" in card and "client 5, position 4" in card and "VSR" in card
    assert "unseen task" in task_card("drake-synth", "un-similarity")


def test_task_card_reports_learnability_as_recorded(monkeypatch):
    from drake_bench.benchmarks.synth import cards

    row = {
        "train": 10,
        "test": 5,
        "vision": 0.4,
        "text_only": 0.5,
        "chance": 0.5,
        "metric": "exact-match accuracy",
        "learnable": False,
        "confirm": {"test": 7, "vision": 0.9, "text_only": 0.3, "chance": 0.5},
    }
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
    from drake_bench.benchmarks.manifest import load_benchmark
    from drake_bench.benchmarks.synth import cards

    monkeypatch.setattr(cards, "learnability", lambda: {"tasks": {"drake-synth/rel-spatial": {"learnable": True}}})
    spec = load_benchmark("drake-synth")
    rows = [r for r in cards.task_table("drake-synth").splitlines()[2:]]
    assert len(rows) == len(spec.clients) + 1  # + the unseen row
    for c, row in zip(spec.clients, rows):
        assert [t for t in spec.client(c.id).tasks] == [w.strip("`") for w in row.split() if w.startswith("`")]
    assert "`rel-spatial` (Y/N, 1 img)" in rows[4] and rows[4].endswith("| 1/4 |")  # client 5; only one recorded
    assert rows[-1].startswith("| unseen |") and rows[-1].endswith("| 0/7 |")


def test_benchmarks_page_task_table_is_current():
    """docs/benchmarks.md's drake-synth table is generated: `python scripts/bench_synth_learnability.py --docs-only`."""
    from pathlib import Path

    from drake_bench.benchmarks.synth.cards import replace_task_table

    page = (Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md").read_text()
    assert replace_task_table(page, "drake-synth") == page


def test_task_card_says_when_learnability_was_measured_on_other_data(monkeypatch):
    """A card of an archived version must not pass off numbers measured on the current version's data as its own."""
    from drake_bench.benchmarks.synth import cards

    row = {
        "train": 10,
        "test": 5,
        "vision": 0.9,
        "text_only": 0.5,
        "chance": 0.5,
        "metric": "exact-match accuracy",
        "learnable": True,
        "generator_version": 6,
    }
    monkeypatch.setattr(cards, "learnability", lambda: {"tasks": {"drake-synth/rel-spatial": row}})
    assert "measured on" not in task_card("drake-synth", "rel-spatial")  # 1.6.0 builds version 6
    old = task_card("drake-synth@1.5.0", "rel-spatial")
    assert (
        "measured on this task's generator version 6 data; this manifest builds version 3 (benchmark drake-synth@1.5.0)"
        in old
    )


def test_example_grid_of_a_relation_task_is_drawn_in_its_group_domain():
    from drake_bench.benchmarks.synth.render import group_domain, render
    from drake_bench.benchmarks.synth.world import Scene

    with group_domain("studio"):
        wall = render(Scene([])).getpixel((8, 2))

    def colours(task: str) -> set:
        return {c for _, c in render_grid("drake-synth", task, n=1).convert("RGB").getcolors(1 << 16)}

    assert wall in colours("rel-spatial") and wall not in colours("vqa-corners")


def test_client_gallery_has_a_row_per_client_in_its_domain():
    from drake_bench.benchmarks.synth.cards import render_clients
    from drake_bench.benchmarks.synth.render import group_domain, render
    from drake_bench.benchmarks.synth.world import Scene

    img = render_clients("drake-synth", per_task=1).convert("RGB")
    assert img.height == 22 + 10 * 70
    with group_domain("comic"):
        paper = render(Scene([])).getpixel((30, 30))
    rows = [
        {c for _, c in img.crop((150, 22 + r * 70, img.width, 22 + r * 70 + 64)).getcolors(1 << 16)} for r in range(10)
    ]
    assert [paper in cols for cols in rows] == [c in (7, 8, 9) for c in range(1, 11)]  # comic paper: reasoning rows
