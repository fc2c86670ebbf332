"""``drake-bench leaderboard`` as a new user meets it (issue #61, part 4).

1. ``build --dry-run --methods X`` prints the board's command for any method X, on a complete board too;
2. ``list``, ``render``, ``html`` and ``validate`` say when the root (or the path) holds no board results, naming it
   and the way to a clone's ``leaderboard/``, instead of showing every board unbuilt;
3. the page's Reproduce command is the submission's own, else the board's command (the one ``build`` assembles),
   checked by parsing it with ``drake-bench run``'s own parser into the RunConfigs ``build`` runs;
4. ``validate`` says a refusal per rule, with a count and the first, every line only with ``--verbose``.

All on the session's tiny board (``tiny_board`` in conftest.py).
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from drake_bench.cli import app
from drake_bench.evaluator.run_config import RunConfig
from drake_bench.leaderboard.boards import BoardDefinition, load_board
from drake_bench.leaderboard.build import plan, run_configs
from drake_bench.leaderboard.render import board_files, rows_for
from drake_bench.leaderboard.submission import SUBMISSION_FILE, submit
from drake_bench.results.result_file import dump_result_data, load_result_data

REPO = Path(__file__).resolve().parents[1]
UNREGISTERED = "someones-plugin"  # a third party's method, not installed here


def _cli(*args: str) -> tuple[int, str]:
    """Exit code and output (stdout and stderr as a terminal shows them: CliRunner's output interleaves both)."""
    r = CliRunner().invoke(app, list(args))
    return r.exit_code, r.output


def _copy_board(tiny_board: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path]:
    board_json, root = tiny_board
    shutil.copytree(root, tmp_path / "lb")
    return board_json, tmp_path / "lb"


def _commands(out: str, prefix: str) -> list[str]:
    """The commands of ``build``'s output lines that start with ``prefix`` (``would run:``, ``made by:``, ...)."""
    return [line.removeprefix(prefix).strip() for line in out.splitlines() if line.startswith(prefix)]


class _Parsed(Exception):
    """Stops ``drake-bench run`` once it has parsed its options into RunConfigs, before anything runs."""


def _parse_run(command: str, monkeypatch: pytest.MonkeyPatch) -> list[RunConfig]:
    """The RunConfigs ``drake-bench run`` builds from ``command``: its own parser and checks, nothing run."""
    import drake_bench.runner

    argv = shlex.split(command)
    assert argv[:2] == ["drake-bench", "run"], command
    seen: list[RunConfig] = []

    def parsed(configs: list[RunConfig], **_: Any) -> None:
        seen.extend(configs)
        raise _Parsed

    monkeypatch.setattr(drake_bench.runner, "run_methods", parsed)
    r = CliRunner().invoke(app, argv[1:])
    assert isinstance(r.exception, _Parsed), (command, r.output)
    return seen


def _assert_boards_configuration(config: RunConfig, board: BoardDefinition, method: str) -> None:
    """``config`` is the one ``build`` runs for ``method`` on ``board`` (``run_configs``), every field: the command
    a user is shown and the run ``build`` makes cannot drift apart. Only the unseen tasks of a board without fast
    adaptation may differ (``run`` fills in its default list, which nothing then reads)."""
    from drake_bench.leaderboard.boards import BoardEntry
    from drake_bench.leaderboard.build import PlannedEntry

    entry = BoardEntry(method=method)
    [wanted] = run_configs(board, [PlannedEntry(entry, "", Path(config.out), Path(), "missing")])
    skip = set() if board.fast_adaptation else {"fast_adaptation_tasks"}
    assert config.model_dump(exclude=skip) == wanted.model_dump(exclude=skip)
    assert (config.method, config.compute_matched, config.seeds) == (method, board.compute_matched, board.seeds)


# ------------------------------------------------------------------------------------------- 1: build --dry-run
def test_build_dry_run_prints_the_boards_command_for_any_method_on_a_complete_board(tiny_board, monkeypatch):
    board_json, root = tiny_board
    board = load_board(board_json)
    assert {p.state for p in plan(board, root)} == {"done"}
    code, out = _cli(
        "leaderboard",
        "build",
        str(board_json),
        "--root",
        str(root),
        "--dry-run",
        "--methods",
        f"counter,{UNREGISTERED}",
    )
    assert code == 0, out
    assert "nothing to run" not in out
    assert "counter is complete" in out and f"{UNREGISTERED} is not an entry of board tiny" in out
    [made] = _commands(out, "made by:")
    [mine] = _commands(out, "to run:")
    [config] = _parse_run(made, monkeypatch)
    _assert_boards_configuration(config, board, "counter")
    assert config.out == str(board.entry_out(board.entries[1], root))
    # the plugin's command is the board's, with its name: nothing else differs
    assert shlex.split(mine) == [UNREGISTERED if a == "counter" else a for a in shlex.split(made)]
    # `build` without --dry-run runs only the board's entries, and says so with the same command
    code, out = _cli("leaderboard", "build", str(board_json), "--root", str(root), "--methods", UNREGISTERED)
    assert code == 1 and "has no entry" in out and mine in out.replace("\n", "")


def test_build_dry_run_gives_a_plugin_the_canonical_boards_configuration(tmp_path, monkeypatch):
    """A canonical board's command for a method not installed here carries every flag of the board (allocation,
    adaptation tasks, --compute-matched): with a registered name in its place, it parses to the board's run."""
    code, out = _cli(
        "leaderboard",
        "build",
        "drake-synth-static",
        "--root",
        str(tmp_path / "lb"),
        "--dry-run",
        "--methods",
        UNREGISTERED,
    )
    assert code == 0, out
    board = load_board("drake-synth-static")
    [command] = _commands(out, "to run:")
    assert "--compute-matched" in shlex.split(command) and _commands(out, "would run:") == []
    [config] = _parse_run(shlex.join("sft" if a == UNREGISTERED else a for a in shlex.split(command)), monkeypatch)
    _assert_boards_configuration(config, board, "sft")


# ------------------------------------------------------------------------------ 2: a root that holds no results
def test_commands_say_when_the_root_holds_no_board_results(tiny_board, tmp_path):
    board_json, root = tiny_board
    missing, empty = tmp_path / "elsewhere" / "leaderboard", tmp_path / "empty"
    empty.mkdir()

    def says_where(out: str, where: Path) -> bool:
        flat = re.sub(r"\s+", " ", out)
        return str(where) in flat and "clone" in flat and "--root /path/to/drake_bench/leaderboard" in flat

    code, out = _cli("leaderboard", "list", "--root", str(missing))
    assert code == 0 and "warning:" in out and says_where(out, missing), out
    code, out = _cli(
        "leaderboard", "html", "--out", str(tmp_path / "site"), "--boards", str(board_json), "--root", str(missing)
    )
    assert code == 1 and says_where(out, missing) and not (tmp_path / "site").exists(), out
    code, out = _cli("leaderboard", "render", str(board_json), "--root", str(missing))
    assert code == 1 and says_where(out, missing) and not missing.exists(), out
    # a root that exists but holds none of the boards' results: said, and the (empty) pages written
    code, out = _cli(
        "leaderboard", "html", "--out", str(tmp_path / "site"), "--boards", str(board_json), "--root", str(empty)
    )
    assert code == 0 and "warning:" in out and says_where(out, empty) and (tmp_path / "site" / "tiny.html").is_file()
    code, out = _cli("leaderboard", "render", str(board_json), "--root", str(empty))
    assert code == 0 and "warning:" in out and says_where(out, empty)
    # the built board's root: no warning
    code, out = _cli(
        "leaderboard", "html", "--out", str(tmp_path / "site2"), "--boards", str(board_json), "--root", str(root)
    )
    assert code == 0 and "warning:" not in out, out
    # validate: a path that is not there, or a folder without a result file, is no "ok"
    code, out = _cli("leaderboard", "validate", str(missing / "tiny"), "--board", str(board_json))
    assert code == 1 and "does not exist" in out and "clone" in out and "ok:" not in out, out
    code, out = _cli("leaderboard", "validate", str(empty), "--board", str(board_json))
    assert code == 1 and "no result file" in out and "ok:" not in out, out


# ------------------------------------------------------------------------------------ 3: the Reproduce commands
def test_reproduce_commands_are_the_submissions_own_else_the_boards(tiny_board, tmp_path, monkeypatch):
    """On a compute-matched board, a submitted row shows its submission's command; a result of a method that is
    no entry, and an entry's, show the board's command, which parses to the board's configuration."""
    board_json, root = _copy_board(tiny_board, tmp_path)
    tiny = load_board(board_json)
    folder = root / "tiny"
    theirs = [p for p in board_files(folder) if "majority-answer" in p.parts]
    own = (
        "drake-bench run --benchmark toy.json --scenario static --seeds 0,1,2 --rounds 2 --local-steps 1 "
        "--methods majority-answer --out theirs"
    )
    sub = submit(
        tiny,
        theirs,
        folder / "submissions" / "majority-answer-1.0",
        package="drake_bench",
        source_url="https://example.org/drake_bench",
        command=own,
    )
    submitted = sorted((sub / "results").rglob("result.json"))
    # the same board, compute-matched, with the counter its only entry: majority-answer is someone else's method
    matched = BoardDefinition.model_validate(
        {**json.loads(board_json.read_text()), "compute_matched": True, "entries": [{"method": "counter"}]}
    )
    rows, _ = rows_for(matched, board_files(folder), tmp_path / "page", root)
    files = board_files(folder)
    assert len(rows) == len(files) == 3  # counter, majority-answer in runs/, majority-answer submitted; in file order
    by_file = dict(zip(files, (r.command for r in rows)))
    assert by_file[submitted[0]] == own
    for method in ("counter", "majority-answer"):
        [path] = [p for p in board_files(folder / "runs") if method in p.parts]
        assert "--compute-matched" in shlex.split(by_file[path])
        [config] = _parse_run(by_file[path], monkeypatch)
        _assert_boards_configuration(config, matched, method)
        assert config.out == str(matched.entry_out(matched.entries[0], root))


# --------------------------------------------------------------------------- 4: a refusal summarised by rule
def _edit_one_score(path: Path) -> None:
    """Change one raw score at the last round, as a tamperer would, leaving the summary as it was."""
    data = load_result_data(path)
    last = data["fl"]["rounds"]
    row = next(r for r in data["raw"]["scores"] if r["eval_round"] == last and r["role"] == "self")
    row["score"] = round(1.0 - row["score"], 6)
    dump_result_data(data, path)


def test_validate_says_a_refusal_by_rule_and_every_line_with_verbose(tiny_board, tmp_path):
    board_json, root = tiny_board
    board = load_board(board_json)
    files = [p for p in board_files(root / "tiny") if "majority-answer" in p.parts]
    sub = submit(
        board,
        files,
        tmp_path / "sub",
        package="drake_bench",
        source_url="https://example.org/drake_bench",
        command="drake-bench leaderboard build tiny.json --methods majority-answer",
    )
    meta = json.loads((sub / SUBMISSION_FILE).read_text())
    [rel] = meta["files"]
    _edit_one_score(sub / rel)  # and submission.json's hash left as it was: rule `submission` too

    code, out = _cli("leaderboard", "validate", str(sub), "--board", str(board_json))
    refused = [line for line in out.splitlines() if line.startswith("refused")]
    assert code == 1 and {"[recompute]", "[submission]"} <= {line.split()[1] for line in refused}, out
    assert len(refused) == len({line.split()[1] for line in refused})  # one line per rule
    [recompute] = [line for line in refused if line.startswith("refused [recompute]")]
    n = int(re.search(r"\[recompute\] (\d+) derived values differ", recompute).group(1))
    assert n > 1 and "(first: " in recompute and rel.split("/")[-1] in recompute
    assert "--verbose lists every refusal" in out

    code, out = _cli("leaderboard", "validate", str(sub), "--board", str(board_json), "--verbose")
    assert code == 1 and len([line for line in out.splitlines() if line.startswith("refused [recompute]")]) == n
