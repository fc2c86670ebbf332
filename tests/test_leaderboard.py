"""The leaderboard as a product: board definitions, build (resumable), rules, submissions, the HTML page.

Everything end-to-end runs on one tiny test-only board (the toy benchmark, the example plugin and the minimal
counter, 3 seeds x 2 rounds x 1 step), built once per test session and shared by the xdist workers through a file
lock: a second build of a built board runs nothing, which is itself what ``build`` promises.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from minimal_method import Counter
from typer.testing import CliRunner

from drake_bench import DrakeBenchError
from drake_bench.cli import app
from drake_bench.evaluation.compute import PROBE_VERSION, ComputeProbe
from drake_bench.leaderboard.boards import canonical_boards, load_board
from drake_bench.leaderboard.build import entry_seconds_left, plan, seconds_left
from drake_bench.leaderboard.html import ranks
from drake_bench.leaderboard.render import board_files
from drake_bench.leaderboard.rules import RULES, validate
from drake_bench.leaderboard.submission import SUBMISSION_FILE, SubmissionError, submit, validate_submission
from drake_bench.plugins.registry import register_method
from drake_bench.results.result_file import read_result

register_method(Counter)

ROOT = Path(__file__).resolve().parents[1]


def _cli(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(app, list(args))
    return r.exit_code, r.output + (r.stderr if r.stderr_bytes is not None else "")


def _copy_board(tiny_board, tmp_path) -> tuple[Path, Path]:
    board_json, root = tiny_board
    shutil.copytree(root, tmp_path / "lb")
    return board_json, tmp_path / "lb"


def test_canonical_boards_pin_the_shipped_benchmark_and_weights():
    from drake_bench.leaderboard.html import paper_results
    from drake_bench.models.shipped import read_manifest
    from drake_bench.plugins.registry import available_methods

    boards = canonical_boards()
    assert set(boards) == {
        "drake-synth-dynamic",
        "drake-synth-static",
        "drake-synth-cross-family",
        "hflb-synth-dynamic",
        "fedllm-synth-dynamic",
    }
    shipped = {m: e["weights_sha256"] for m, e in read_manifest()["models"].items()}
    for b in boards.values():
        assert b.spec.version == b.benchmark_version and b.expected_manifest_hash == b.spec.content_hash, b.name
        assert len(b.seeds) >= 3
        allocated = set(b.spec.allocation(b.allocation).values())
        assert set(b.weights) == allocated and all(shipped[m] == s for m, s in b.weights.items()), b.name
        assert {e.method for e in b.entries} <= set(available_methods())
        assert paper_results(b.paper.key)["methods"], b.name
    code, out = _cli("leaderboard", "build", "drake-synth-static", "--root", "/nonexistent", "--dry-run")
    # the board's own version, pinned: a bare name would run the newest drake-synth, which the board refuses
    board = boards["drake-synth-static"]
    assert code == 0 and (
        f"would run: drake-bench run --benchmark drake-synth@{board.benchmark_version} --scenario static"
    ) in out.replace("\n", " ")


def test_build_runs_only_what_is_missing_then_renders(tiny_board, tmp_path):
    board_json, root = _copy_board(tiny_board, tmp_path)
    board = load_board(board_json)
    assert [(p.state, p.seeds_done) for p in plan(board, root)] == [("done", len(board.seeds))] * 2
    finished = plan(board, root)
    assert all(len(p.seed_seconds) == len(board.seeds) and min(p.seed_seconds) > 0 for p in finished)
    assert seconds_left(board, finished) == 0.0
    assert (root / "tiny" / "board.html").is_file() and "counter 1.0" in (root / "tiny" / "summary.md").read_text()
    code, out = _cli("leaderboard", "build", str(board_json), "--root", str(root), "--dry-run")
    assert code == 0 and "nothing to run" in out and "hours run / left" in out
    (root / "tiny" / "runs" / "toy" / "static" / "counter" / "1.0" / "result.json").unlink()
    assert [p.seeds_done for p in plan(board, root)] == [len(board.seeds), 0]  # its checkpoints hold no finished seed
    # what is left is priced at the seconds the other entry's seeds recorded (the gone entry has none of its own)
    after = plan(board, root)
    assert after[1].seed_seconds == [] and seconds_left(board, after) == pytest.approx(
        len(board.seeds) * sum(after[0].seed_seconds) / len(after[0].seed_seconds)
    )
    code, out = _cli("leaderboard", "list", "--root", str(root))
    assert code == 0 and "seeds done" in out and "hours left (est.)" in out
    code, out = _cli("leaderboard", "build", str(board_json), "--root", str(root), "--dry-run")
    assert code == 0 and "--methods counter --out" in out.replace("\n", "") and "majority-answer --out" not in out
    code, out = _cli("leaderboard", "render", str(board_json), "--root", str(root))
    assert code == 0 and "counter" not in (root / "tiny" / "summary.md").read_text()
    assert (root / "tiny" / "accuracy_over_rounds.png").is_file()
    # a board whose files all moved away: the old plot goes too, and the page says how to build it
    shutil.rmtree(root / "tiny" / "runs")
    code, out = _cli("leaderboard", "render", str(board_json), "--root", str(root))
    assert code == 0 and not (root / "tiny" / "accuracy_over_rounds.png").exists()
    assert "drake-bench leaderboard build tiny" in (root / "tiny" / "summary.md").read_text()


def test_the_built_board_passes_every_rule(tiny_board):
    board_json, root = tiny_board
    code, out = _cli("leaderboard", "validate", str(root / "tiny"), "--board", str(board_json))
    assert code == 0, out
    assert "ok: 2 result file(s) pass every rule" in out


def _rewrite(path: Path, edit) -> None:  # noqa: ANN001
    """Edit a result file as a tamperer would: change it, recompute its summary, keep it schema-valid."""
    from drake_bench.results.result_file import RunResult, dump_result_data, load_result_data, summarize

    data = load_result_data(path)
    edit(data)
    keep = data.pop("_keep_summary", False)
    res = RunResult.model_validate(data)
    if not keep:
        data["summary"] = summarize(res.raw, seeds=res.seeds).model_dump(mode="json")
    dump_result_data(data, path)


def _rehash(folder: Path) -> None:
    """A tamperer who also updates submission.json's hashes (so the board rules, not the hash, must catch it)."""
    import hashlib

    meta = json.loads((folder / SUBMISSION_FILE).read_text())
    meta["files"] = {rel: hashlib.sha256((folder / rel).read_bytes()).hexdigest() for rel in meta["files"]}
    (folder / SUBMISSION_FILE).write_text(json.dumps(meta))


def test_a_submission_of_the_example_plugin_passes_and_tampered_ones_are_refused(tiny_board, tmp_path):
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
    assert meta["method"] == "majority-answer" and meta["version"] == "1.0" and len(meta["files"]) == 1
    assert validate_submission(sub, board)[1] == []
    rel = next(iter(meta["files"]))

    def tampered(name: str, edit, rehash: bool = True) -> list:  # noqa: ANN001
        folder = tmp_path / name
        shutil.copytree(sub, folder)
        _rewrite(folder / rel, edit)
        if rehash:
            _rehash(folder)
        return validate_submission(folder, board)[1]

    def score(d):  # noqa: ANN001
        d["summary"]["aggregate"]["self_last"]["mean"] += 0.05
        d["_keep_summary"] = True

    def data_hash(d):  # noqa: ANN001  (other data: its file bytes and its content both differ)
        d["benchmark"]["data_hash"] = "sha256:" + "0" * 64
        d["benchmark"]["content_hash"] = "sha256:" + "1" * 64

    def two_seeds(d):  # noqa: ANN001
        d["seeds"] = [0, 1]
        for table in ("scores", "adaptation", "costs", "server_costs", "diagnostics", "post_federation_costs"):
            d["raw"][table] = [r for r in d["raw"][table] if r["seed"] != 2]
        d["fl"]["extra"]["data_access"].pop("2")

    def judged(d):  # noqa: ANN001  (free text rated by an LLM judge: not rerunnable offline, not a board's scale)
        d["evaluation"]["judge"] = "some-judge 1.0"

    def per_client(d):  # noqa: ANN001  (asked once per client: other padding than the board's runs)
        d["evaluation"]["extra"]["predict_calls"] = "one per client"

    for name, edit, rule in (
        ("score", score, "recompute"),
        ("hash", data_hash, "benchmark"),
        ("seeds", two_seeds, "seeds"),
        ("judge", judged, "settings"),
        ("per-client", per_client, "settings"),
    ):
        refusals = tampered(name, edit)
        assert rule in {r.rule for r in refusals}, (name, [str(r) for r in refusals])
        assert all(r.file.endswith("result.json") for r in refusals if r.rule == rule)
    # an edit without updating submission.json is caught by the file hash alone
    assert "submission" in {r.rule for r in tampered("nohash", score, rehash=False)}
    # the results name the package that registered their method: a submission pointing elsewhere is refused
    assert read_result(sub / rel).method.package.startswith("drake_bench ")
    other = tmp_path / "other-package"
    shutil.copytree(sub, other)
    meta_other = json.loads((other / SUBMISSION_FILE).read_text())
    meta_other["package"] = "someone-else"
    (other / SUBMISSION_FILE).write_text(json.dumps(meta_other))
    refusals = validate_submission(other, board)[1]
    assert [r.rule for r in refusals] == ["submission"] and "someone-else" in refusals[0].message
    with pytest.raises(SubmissionError, match="someone-else"):
        submit(
            board,
            files,
            tmp_path / "sub2",
            package="someone-else",
            source_url="https://example.org/x",
            command="drake-bench leaderboard build tiny.json --methods majority-answer",
        )
    meta_same = dict(meta_other, package="Drake-Bench")  # PEP 503: the same distribution
    (other / SUBMISSION_FILE).write_text(json.dumps(meta_same))
    assert validate_submission(other, board)[1] == []
    # the CLI says the same, naming the rule and the file
    code, out = _cli("leaderboard", "validate", str(tmp_path / "seeds"), "--board", str(board_json))
    assert code == 1 and "[seeds]" in out and "result.json" in out


def test_rules_refuse_results_made_outside_the_board(tiny_board, tmp_path):
    board_json, root = _copy_board(tiny_board, tmp_path)
    board = load_board(board_json)
    path = next(p for p in board_files(root / "tiny") if "counter" in p.parts)

    def old_and_inline(d):  # noqa: ANN001
        d["fl"]["extra"].pop("data_access")
        d["fl"]["extra"]["run_config"]["isolation"] = "inline"

    _rewrite(path, old_and_inline)
    _, refusals = validate([path], board.model_copy(update={"communication_budget_bytes": 1.0}))
    rules = {r.rule for r in refusals}
    assert {"test-split", "isolation", "budget"} <= rules, [str(r) for r in refusals]
    assert rules <= set(RULES) and all(r.file == str(path) for r in refusals)


def test_the_same_data_built_by_other_library_versions_is_recognised_by_its_content_hash(tiny_board, tmp_path):
    """Another data hash with the board's content hash is the board's data written by other pyarrow / Pillow
    versions: accepted. Another content hash, or none to show the content, is refused by rule `benchmark`; so is
    a file citing the board's data hash with another content hash."""
    board_json, root = _copy_board(tiny_board, tmp_path)
    board = load_board(board_json)
    path = next(p for p in board_files(root / "tiny") if "counter" in p.parts)
    from importlib import metadata

    recorded = json.loads(path.read_text())
    assert recorded["benchmark"]["content_hash"] == board.content_hash is not None
    # the libraries that wrote the bytes are recorded: what a reader needs to see why two data hashes differ
    assert (recorded["environment"]["pyarrow"], recorded["environment"]["pillow"]) == (
        metadata.version("pyarrow"),
        metadata.version("pillow"),
    )

    def cite(data_hash: str | None = None, content_hash: str | None = None, drop: bool = False):  # noqa: ANN202
        def edit(d):  # noqa: ANN001
            if data_hash:
                d["benchmark"]["data_hash"] = data_hash
            if content_hash:
                d["benchmark"]["content_hash"] = content_hash
            if drop:
                d["benchmark"].pop("content_hash")

        return edit

    def benchmark_refusals() -> list[str]:  # the file beside the board's others: also one data across files
        return [r.message for r in validate(board_files(root / "tiny"), board)[1] if r.rule == "benchmark"]

    other_bytes, other_content = "sha256:" + "a" * 64, "sha256:" + "b" * 64
    _rewrite(path, cite(data_hash=other_bytes))
    assert benchmark_refusals() == []
    _rewrite(path, cite(content_hash=other_content))
    assert any("content_hash" in m and "other data" in m for m in benchmark_refusals())
    _rewrite(path, cite(drop=True))
    assert any("no content hash shows" in m for m in benchmark_refusals())
    _rewrite(path, cite(data_hash=board.data_hash, content_hash=other_content))
    assert any("contradicts itself" in m for m in benchmark_refusals())
    unpinned = board.model_copy(update={"content_hash": None})  # a board that pins only the bytes
    _rewrite(path, cite(data_hash=other_bytes, content_hash=board.content_hash))
    assert any(r.rule == "benchmark" for r in validate([path], unpinned)[1])


def test_a_build_is_told_which_canonical_boards_take_its_runs():
    """What `drake-bench build` prints after a build: per canonical board on that benchmark version, whether runs
    on the build count and by which hash, before any hours are spent on runs a board would refuse."""
    from drake_bench.leaderboard.rules import build_standing

    board = canonical_boards()["drake-synth-static"]
    name, version = board.benchmark_name, board.benchmark_version
    drake_boards = {b.name for b in canonical_boards().values() if b.benchmark_name == name}
    same = build_standing(name, version, board.data_hash, board.content_hash)
    assert {line.split(":")[0].removeprefix("board ") for line in same} == drake_boards
    assert all(line.endswith("count (its data hash)") for line in same)
    rewritten = build_standing(name, version, "sha256:" + "a" * 64, board.content_hash)
    assert all("count (its content hash" in line for line in rewritten) and len(rewritten) == len(drake_boards)
    other = build_standing(name, version, "sha256:" + "a" * 64, "sha256:" + "b" * 64)
    assert all("would be refused" in line and "other data" in line for line in other)
    assert build_standing(name, "0.0.1", board.data_hash, board.content_hash) == []  # no board on that version


def test_a_compute_matched_board_wants_the_probe_and_its_matched_steps(tiny_board, tmp_path):
    """A run without the evaluator's compute probe, or one whose steps are not the probe's matched steps, is
    refused by rule `compute-matched`; with the probe recorded and its steps run, the rule is quiet."""
    board_json, root = _copy_board(tiny_board, tmp_path)
    board = load_board(board_json).model_copy(update={"compute_matched": True})
    path = next(p for p in board_files(root / "tiny") if "counter" in p.parts)
    _, refusals = validate([path], board)
    assert "compute-matched" in {r.rule for r in refusals}

    steps = json.loads(path.read_text())["fl"]["local_steps"]

    def probed(matched, version=PROBE_VERSION):  # noqa: ANN001, ANN202
        def edit(d):  # noqa: ANN001
            d["fl"]["extra"]["compute"] = {
                "version": version,
                "local_steps": board.local_steps,
                "matched_local_steps": matched,
            }

        return edit

    _rewrite(path, probed(steps + 1))
    _, refusals = validate([path], board)
    assert "compute-matched" in {r.rule for r in refusals}
    _rewrite(path, probed(steps, version=1))  # priced by an older probe: reprobe it first
    _, refusals = validate([path], board)
    assert any(r.rule == "compute-matched" and "reprobe" in r.message for r in refusals)
    _rewrite(path, probed(steps))
    _, refusals = validate([path], board)
    assert "compute-matched" not in {r.rule for r in refusals}, [str(r) for r in refusals]


def test_a_version_2_probe_is_current_only_for_a_run_without_a_post_federation_stage(tiny_board, tmp_path):
    """Probe version 3 prices a post-federation stage and measures what version 2 did for any other method, so a
    version-2 record stays valid for a run without that stage and is stale (to reprobe) for one that ran it."""
    board_json, root = _copy_board(tiny_board, tmp_path)
    board = load_board(board_json).model_copy(update={"compute_matched": True})
    path = next(p for p in board_files(root / "tiny") if "counter" in p.parts)
    steps = json.loads(path.read_text())["fl"]["local_steps"]
    v2 = _probe(board.local_steps, 10, version=2).summary()
    _rewrite(path, lambda d: d["fl"]["extra"].update(compute=v2))
    _, refusals = validate([path], board)
    assert "compute-matched" not in {r.rule for r in refusals} and steps == v2["matched_local_steps"]
    assert {p.entry.method: p.state for p in plan(board, root)}["counter"] == "done"

    def ran_post_federation(d):  # noqa: ANN001
        table = d["raw"]["post_federation_costs"]
        if isinstance(table, dict):  # schema 2.0: column-wise
            table["rows"] = [[s, 0.5] for s in d["seeds"]]
        else:
            d["raw"]["post_federation_costs"] = [{"seed": s, "post_federation_seconds": 0.5} for s in d["seeds"]]

    _rewrite(path, ran_post_federation)
    _, refusals = validate([path], board)
    assert any(r.rule == "compute-matched" and "version 2" in r.message for r in refusals)
    assert {p.entry.method: p.state for p in plan(board, root)}["counter"] == "stale"


def _probe(steps: int, method_cost: int, version: int = PROBE_VERSION) -> ComputeProbe:
    """A compute probe of ``steps`` local steps whose method costs ``method_cost`` a round against SFT's 10."""
    return ComputeProbe(
        version=version,
        method="counter",
        local_steps=steps,
        rounds=2,
        clients_per_model={"m": 1},
        probe_clients={"m": 0},
        setup_flops=0,
        first_round_flops={"m": method_cost},
        round_flops={"m": method_cost},
        reference_setup_flops=0,
        reference_first_round_flops={"m": 10},
        reference_round_flops={"m": 10},
        declared_relative_compute=1.0,
    )


class _ProbingEvaluator:
    """Stands in for the evaluator in ``reprobe``: its probe prices the method at ``COST`` a round."""

    COST = 10
    opened: list[str] = []

    def __init__(self, config):  # noqa: ANN001
        self.config = config

    def start_method(self, seed):  # noqa: ANN001, ANN202
        _ProbingEvaluator.opened.append(self.config.method)
        return type("M", (), {"close": lambda self: None})()

    def describe_models(self, method):  # noqa: ANN001
        pass

    def measure_compute(self, method):  # noqa: ANN001, ANN202
        return _probe(self.config.local_steps, self.COST)


def test_an_entry_priced_by_an_older_probe_is_carried_over_only_if_its_steps_stay(tiny_board, tmp_path, monkeypatch):
    """When the compute probe's procedure changes, plan marks an entry priced by the older one stale (build will not
    use or replace it); `reprobe` probes it again and, when the current probe matches the same steps, records that
    probe and a note in the file, which is then done and passes the rule; when the steps change it leaves the file
    untouched and exits 1 naming it, to be rebuilt."""
    import drake_bench.evaluator.standard
    from drake_bench.results.result_file import read_result

    board_json, root = _copy_board(tiny_board, tmp_path)
    board = load_board(board_json).model_copy(update={"compute_matched": True})
    matched_json = tmp_path / "matched.json"
    matched_json.write_text(json.dumps({**json.loads(board_json.read_text()), "compute_matched": True}))
    path = next(p for p in board_files(root / "tiny") if "counter" in p.parts)
    steps = read_result(path).fl.local_steps
    old = _probe(board.local_steps, 10, version=1).summary()
    _rewrite(path, lambda d: d["fl"]["extra"].update(compute=old))
    states = {p.entry.method: p for p in plan(board, root)}
    assert states["counter"].state == "stale" and "reprobe" in states["counter"].why
    assert states["majority-answer"].state == "done"  # not probed at all: rule compute-matched refuses it instead

    monkeypatch.setattr(drake_bench.evaluator.standard, "Evaluator", _ProbingEvaluator)
    _ProbingEvaluator.opened.clear()
    monkeypatch.setattr(_ProbingEvaluator, "COST", 5)  # half SFT's cost: twice the steps now
    before = path.read_bytes()
    code, out = _cli("leaderboard", "reprobe", str(matched_json), "--root", str(root))
    assert code == 1 and "rebuild" in out and path.read_bytes() == before
    assert _ProbingEvaluator.opened == ["counter"]

    monkeypatch.setattr(_ProbingEvaluator, "COST", 10)
    code, out = _cli("leaderboard", "reprobe", str(matched_json), "--root", str(root))
    assert code == 0 and "kept" in out, out
    res = read_result(path)
    assert res.fl.extra["compute"]["version"] == PROBE_VERSION and res.fl.local_steps == steps
    assert any("carried over from version" in n for n in res.notes)
    assert {p.entry.method: p.state for p in plan(board, root)}["counter"] == "done"
    _, refusals = validate([path], board)
    assert "compute-matched" not in {r.rule for r in refusals}, [str(r) for r in refusals]
    code, out = _cli("leaderboard", "reprobe", str(matched_json), "--root", str(root))
    assert code == 0 and "already has the current compute probe" in out


def test_a_run_of_other_numerics_is_refused_and_build_will_not_replace_it(tiny_board, tmp_path):
    """A file made before `numerics` existed counts as native: the portable board refuses it (rule `numerics`), its
    plan marks it stale, and build stops with the file named instead of rerunning over a committed result."""
    from drake_bench.leaderboard.build import build

    board_json, root = _copy_board(tiny_board, tmp_path)
    board = load_board(board_json)
    assert board.numerics == "portable"
    path = next(p for p in board_files(root / "tiny") if "counter" in p.parts)
    _, refusals = validate([path], board)
    assert "numerics" not in {r.rule for r in refusals}
    _rewrite(path, lambda d: d["fl"]["extra"]["run_config"].pop("numerics"))
    _, refusals = validate([path], board)
    assert "numerics" in {r.rule for r in refusals}
    assert {p.entry.method: p.state for p in plan(board, root)} == {"majority-answer": "done", "counter": "stale"}
    with pytest.raises(DrakeBenchError, match=r"counter.*result.json: made under numerics 'native'"):
        build(board, root)
    assert _cli("leaderboard", "validate", str(path), "--board", str(board_json))[0] == 1


def test_an_entry_scored_by_other_rules_is_refused_and_a_board_runs_its_own_scorer_version(tiny_board, tmp_path):
    """A board takes one scoring rules' version (rule `scorer`): a file scored by another is refused, naming the file
    and both versions, and its plan marks it stale; a file that records none reads as 1.0, the default of a board,
    so the committed boards keep validating; build and the board's command run the board's version, not the run
    default (2.0)."""
    from drake_bench.leaderboard.build import board_command, build, run_configs

    board_json, root = _copy_board(tiny_board, tmp_path)
    board = load_board(board_json)
    assert board.scorer_version == "1.0"  # the default: a board definition that names none
    path = next(p for p in board_files(root / "tiny") if "counter" in p.parts)
    assert read_result(path).evaluation.scorer_version == "1.0"  # built by `leaderboard build` under the board's
    assert read_result(path).fl.extra["run_config"]["scorer_version"] == "1.0"
    assert "--scorer-version 1.0" in " ".join(board_command(board, board.entries, root / "tiny" / "runs"))
    assert {c.scorer_version for c in run_configs(board, plan(board, root))} == {"1.0"}

    _rewrite(path, lambda d: d["evaluation"].pop("scorer_version"))  # as a file written before the field existed
    assert read_result(path).evaluation.scorer_version == "1.0"
    _, refusals = validate([path], board)
    assert "scorer" not in {r.rule for r in refusals}, [str(r) for r in refusals]

    _rewrite(path, lambda d: d["evaluation"].update(scorer_version="2.0"))
    _, refusals = validate([path], board)
    scorer = [str(r) for r in refusals if r.rule == "scorer"]
    assert len(scorer) == 1 and str(path) in scorer[0] and "'2.0'" in scorer[0] and "the board's are '1.0'" in scorer[0]
    assert {p.entry.method: p.state for p in plan(board, root)} == {"majority-answer": "done", "counter": "stale"}
    with pytest.raises(DrakeBenchError, match=r"counter.*result.json: scored by rules '2.0'"):
        build(board, root)
    code, out = _cli("leaderboard", "validate", str(path), "--board", str(board_json))
    assert code == 1 and "[scorer]" in out

    on_2 = board.model_copy(update={"scorer_version": "2.0"})  # a board rebuilt on 2.0 refuses the 1.0 entries
    _, refusals = validate(board_files(root / "tiny"), on_2)
    assert {r.file for r in refusals if r.rule == "scorer"} == {str(p) for p in board_files(root / "tiny")} - {
        str(path)
    }
    assert "--scorer-version 2.0" in " ".join(board_command(on_2, on_2.entries, root / "tiny" / "runs"))


def test_ranks_mark_ties_where_intervals_overlap():
    assert ranks([(50.0, 1.0), (49.5, 1.0), (40.0, 1.0), (None, 0.0)]) == [(1, True), (1, True), (3, False), (4, False)]


def test_html_page_in_a_real_browser(tiny_board, tmp_path):
    """The page renders every method, sorts by a column, opens a drill-down (headless Chromium via Selenium)."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install -e '.[test]')")
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    browser = next(
        (p for p in ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome") if Path(p).exists()),
        None,
    )
    driver_bin = shutil.which("chromedriver") or (
        "/usr/bin/chromedriver" if Path("/usr/bin/chromedriver").exists() else None
    )
    if browser is None or driver_bin is None:
        pytest.skip(
            "no Chromium and chromedriver installed (Debian: apt-get install chromium chromium-driver; .ci/run does)"
        )
    board_json, root = tiny_board
    code, out = _cli(
        "leaderboard", "html", "--out", str(tmp_path / "site"), "--boards", str(board_json), "--root", str(root)
    )
    assert code == 0, out
    page = tmp_path / "site" / "tiny.html"
    text = page.read_text()
    assert "<script src" not in text and "<link" not in text and "data:image/png;base64," in text  # self-contained
    opts = Options()
    opts.binary_location = browser
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,1200",
    ):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(driver_bin), options=opts)
    try:
        driver.get(page.as_uri())
        labels = lambda: [
            r.get_attribute("data-method") for r in driver.find_elements(By.CSS_SELECTOR, "#board tr.entry")
        ]  # noqa: E731
        assert sorted(labels()) == ["counter 1.0", "majority-answer 1.0"]
        header = driver.find_element(By.CSS_SELECTOR, "#board th[data-col='method']")
        header.click()
        first = labels()
        header.click()
        assert labels() == list(reversed(first)) and sorted(first) in (first, list(reversed(first)))
        detail = driver.find_element(
            By.ID, driver.find_elements(By.CSS_SELECTOR, "button.drill")[0].get_attribute("data-detail")
        )
        assert not detail.is_displayed()
        driver.find_elements(By.CSS_SELECTOR, "button.drill")[0].click()
        assert detail.is_displayed() and "Per client" in detail.text and "Reproduce" in detail.text
        assert "Computed with: numerics portable" in detail.text  # where the row's digits rebuild
        assert detail.find_elements(By.CSS_SELECTOR, "table.clients tr")  # the per-client drill-down has rows
        driver.save_screenshot(str(tmp_path / "board.png"))
    finally:
        driver.quit()
    assert (tmp_path / "board.png").stat().st_size > 0


def test_the_time_left_is_priced_entry_by_entry() -> None:
    """An entry with finished seeds is priced at its own mean; one with none at the board's mean."""
    from drake_bench.leaderboard.build import PlannedEntry

    board = SimpleNamespace(seeds=[0, 1, 2])

    def entry(seconds: list[float]) -> PlannedEntry:
        return PlannedEntry(
            entry=None,
            version="1.0",
            out=Path("."),
            result=Path("r.json"),  # type: ignore[arg-type]
            state="resume",
            seeds_done=len(seconds),
            seed_seconds=seconds,
        )

    assert seconds_left(board, [entry([]), entry([])]) is None  # nothing recorded yet: no estimate
    slow, fast, fresh = entry([600.0, 900.0]), entry([60.0, 60.0, 60.0]), entry([])
    # slow: 1 seed at its own 750 s; fast: done; fresh: 3 seeds at the mean of all five recorded (336 s)
    assert entry_seconds_left(board, [slow, fast, fresh]) == pytest.approx([750, 0, 3 * (600 + 900 + 180) / 5])
    assert seconds_left(board, [slow, fast, fresh]) == pytest.approx(750 + 3 * (600 + 900 + 180) / 5)
