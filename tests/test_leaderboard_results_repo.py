"""A board's results as a Hub dataset repo: `leaderboard publish` (dry run) lists what a repo holds, and `leaderboard
fetch` brings a pinned revision back into a board folder that validates and renders like the built one.

The Hub is a local Hub cache standing in for it (`place_in_hf_cache` lays files out as huggingface_hub does), read
offline, so nothing here touches the network."""

from __future__ import annotations

import pytest
from minimal_method import Counter
from typer.testing import CliRunner

from drake_bench.benchmarks.hub import place_in_hf_cache
from drake_bench.cli import app
from drake_bench.errors import DrakeBenchError, HubError
from drake_bench.leaderboard.boards import load_board
from drake_bench.leaderboard.render import board_files
from drake_bench.leaderboard.results_repo import FETCH_RECORD, board_payloads, fetch_board, publish_board
from drake_bench.leaderboard.rules import validate
from drake_bench.plugins.registry import register_method
from drake_bench.results.result_file import read_result

register_method(Counter)

REPO = "test-org/drake-bench-results"
COMMIT = "c0ffee" + "0" * 34


def _cli(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(app, list(args))
    return r.exit_code, r.output + (r.stderr if r.stderr_bytes is not None else "")


@pytest.fixture
def published(tiny_board, tmp_path):
    """The tiny board's folder published to a stand-in Hub (a local cache) as tag v1 at COMMIT."""
    board_json, root = tiny_board
    board = load_board(board_json)
    cache = tmp_path / "hf-cache"
    payloads = board_payloads(board, root)
    place_in_hf_cache(((rel, p.read_bytes()) for rel, p in payloads), REPO, COMMIT, refs=("v1",), cache_dir=cache)
    return board, root, cache, board_json


def test_publish_lists_every_result_with_its_tables_and_pages_and_no_checkpoint(tiny_board):
    board_json, root = tiny_board
    board = load_board(board_json)
    ops = publish_board(board, REPO, root, dry_run=True)
    paths = [op.path_in_repo for op in ops]
    folder = board.results_dir(root)
    results = board_files(folder)
    assert results and all(f"{board.name}/{r.relative_to(folder).as_posix()}" in paths for r in results)
    assert sum(".scores." in p and p.endswith(".parquet") for p in paths) == len(results)
    assert f"{board.name}/summary.md" in paths
    assert not [p for p in paths if "checkpoints" in p or "/." in p]
    code, out = _cli("leaderboard", "publish", str(board_json), "--repo", REPO, "--root", str(root), "--dry-run")
    assert code == 0 and f"would upload {len(ops)} files" in out


def test_fetch_brings_a_pinned_revision_back_as_a_board_that_validates(published, tmp_path):
    board, root, cache, _ = published
    target = fetch_board(board, REPO, "v1", tmp_path / "fetched", cache_dir=cache, local_files_only=True)
    built = board_files(board.results_dir(root))
    fetched = board_files(target)
    assert [p.relative_to(target) for p in fetched] == [p.relative_to(board.results_dir(root)) for p in built]
    for a, b in zip(built, fetched):
        assert read_result(a) == read_result(b)
    assert f'"commit": "{COMMIT}"' in (target / FETCH_RECORD).read_text()
    assert validate(fetched, board)[1] == validate(built, board)[1]
    # fetching the same commit again is a no-op; results from elsewhere are never overwritten
    fetch_board(board, REPO, COMMIT, tmp_path / "fetched", cache_dir=cache, local_files_only=True)
    (target / FETCH_RECORD).unlink()
    with pytest.raises(DrakeBenchError, match=r"already holds results of board \w+ \(built here\)"):
        fetch_board(board, REPO, "v1", tmp_path / "fetched", cache_dir=cache, local_files_only=True)


def test_fetch_refuses_a_revision_that_is_not_there_or_a_tampered_table(published, tmp_path):
    board, root, cache, _ = published
    with pytest.raises(HubError, match="revision 'v2' of .* is not in the local Hub cache"):
        fetch_board(board, REPO, "v2", tmp_path / "a", cache_dir=cache, local_files_only=True)
    blob = next(
        p
        for p in (cache / f"datasets--{REPO.replace('/', '--')}" / "snapshots" / COMMIT).rglob("*.parquet")
        if ".scores." in p.name
    ).resolve()
    blob.chmod(0o644)
    blob.write_bytes(blob.read_bytes()[:-3] + b"bad")
    with pytest.raises(DrakeBenchError, match="is not the table the result file was written with"):
        fetch_board(board, REPO, "v1", tmp_path / "b", cache_dir=cache, local_files_only=True)
    assert not (tmp_path / "b").exists()  # nothing copied from a revision that does not read


def test_the_fetch_command_says_what_it_fetched(published, tmp_path, monkeypatch):
    from huggingface_hub import constants

    board, root, cache, board_json = published
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    code, out = _cli(
        "leaderboard", "fetch", str(board_json), "--repo", REPO, "--revision", "v1",
        "--root", str(tmp_path / "lb"), "--offline",
    )  # fmt: skip
    assert code == 0, out
    assert f"fetched {len(board_files(board.results_dir(root)))} result files of board {board.name}" in out
