"""The validation split: carved from training, in no stream, scored only by tuning runs, refused by boards."""

from __future__ import annotations

import json

import pytest
from conftest import toy_spec

from drake_bench.benchmarks.manifest import load_benchmark, manifest_dict, parse_manifest
from drake_bench.benchmarks.spec import SubsamplingRule
from drake_bench.errors import ScenarioError
from drake_bench.results.result_file import copy_result


def _with_validation(ratio: float):
    spec = toy_spec()
    rule = spec.subsampling.model_copy(update={"validation_ratio": ratio})
    data = manifest_dict(spec.model_copy(update={"subsampling": rule, "content_hash": None}))
    return parse_manifest(data, where="toy-validation")


@pytest.fixture(scope="module")
def built_pair(toy_loader, tmp_path_factory):
    """The toy benchmark built without and with a validation split (a quarter of each training draw)."""
    from drake_bench.benchmarks.build import build_benchmark

    plain, split = toy_spec(), _with_validation(0.25)
    roots = []
    for spec, name in ((plain, "plain"), (split, "split")):
        root = tmp_path_factory.mktemp(name) / "built"
        build_benchmark(spec, source_dir=None, out=root, show_progress=False)
        roots.append(root)
    return (plain, roots[0]), (split, roots[1])


def _ids(store, task, split):
    return [s.id for s in store.samples(task, split, range(store.size(task, split)))]


def test_validation_items_come_from_the_training_draw_and_the_test_items_stay(built_pair):
    from drake_bench.streams.stream import open_built

    (plain, plain_root), (split, split_root) = built_pair
    a, b = open_built(plain, data_dir=plain_root), open_built(split, data_dir=split_root)
    for task in [t.id for t in split.tasks]:
        train, val, test = _ids(b, task, "train"), _ids(b, task, "validation"), _ids(b, task, "test")
        assert _ids(a, task, "test") == test  # the test draw does not depend on the validation share
        assert sorted(_ids(a, task, "train")) == sorted(train + val)  # validation is carved off training
        assert val and not set(val) & set(train) and not set(val) & set(test)
        n = len(train) + len(val)
        assert len(val) == max(1, round(n * 0.25))
        assert b.info["sizes"][task]["validation"] == len(val)
    assert "validation" not in a.info["sizes"][plain.tasks[0].id]


def test_no_training_stream_hands_out_a_validation_item(built_pair):
    from drake_bench.streams.stream import load_federated_data, open_built

    _, (split, root) = built_pair
    store = open_built(split, data_dir=root)
    held = {i for t in split.tasks for i in _ids(store, t.id, "validation")}
    for scenario in ("dynamic", "static", "dirichlet:0.1"):
        fed = load_federated_data(split, scenario, seed=0, data_dir=root)
        seen = {s.id for c in fed.clients for r in range(fed.config.rounds) for b in fed.round_samples(c, r) for s in b}
        assert seen and not seen & held, scenario


@pytest.mark.parametrize("scenario", ["dynamic", "dirichlet:0.1"])
def test_a_tuning_run_scores_the_validation_split_and_a_board_run_the_test_split(built_pair, scenario):
    from drake_bench.streams.stream import load_federated_data, open_built

    _, (split, root) = built_pair
    store = open_built(split, data_dir=root)
    tuned = load_federated_data(split, scenario, seed=0, data_dir=root, scored_split="validation")
    tested = load_federated_data(split, scenario, seed=0, data_dir=root)
    task = split.clients[0].tasks[0]
    owners = [None] if scenario == "dynamic" else tuned.clients
    val_ids = {s.id for o in owners for s in tuned.test_samples(task, owner=o)}
    test_ids = {s.id for o in owners for s in tested.test_samples(task, owner=o)}
    assert val_ids == set(_ids(store, task, "validation"))  # every owner's share together: the whole split
    assert test_ids == set(_ids(store, task, "test"))


def test_a_version_without_a_validation_split_refuses_a_tuning_run(built_pair):
    from drake_bench.streams.stream import load_federated_data

    (plain, root), _ = built_pair
    with pytest.raises(ScenarioError, match=r"toy 0\.0\.1 has no validation split.*never on its test split"):
        load_federated_data(plain, "dynamic", seed=0, data_dir=root, scored_split="validation")


def test_validation_sizes():
    from drake_bench.benchmarks.build import validation_size

    assert validation_size(200, SubsamplingRule(validation_ratio=0.1)) == 20
    assert validation_size(10000, SubsamplingRule(validation_ratio=0.1)) == 1000
    assert validation_size(3, SubsamplingRule(validation_ratio=0.1)) == 1  # a tuning run always has an item
    assert validation_size(200, SubsamplingRule()) == 0
    assert validation_size(1, SubsamplingRule(validation_ratio=0.5)) == 0  # never the whole training draw


def test_a_rule_without_validation_serialises_as_before_so_old_manifests_keep_their_hashes():
    assert "validation_ratio" not in SubsamplingRule().model_dump(mode="json")
    old = load_benchmark("drake-synth@1.8.0")
    assert old.subsampling.validation_ratio == 0 and manifest_dict(old)["content_hash"] == old.content_hash


def test_every_embedded_benchmark_holds_a_validation_split_and_says_so_in_its_card():
    from drake_bench.benchmarks.card import render_card, task_config

    for name in ("drake-synth", "hflb-synth", "fedllm-synth"):
        spec = load_benchmark(name)
        assert spec.subsampling.validation_ratio == 0.1
        assert all(t.sizes.validation == max(1, round((t.sizes.train + t.sizes.validation) * 0.1)) for t in spec.tasks)
    spec = load_benchmark("drake-synth")
    sizes = {t.id: {"train": 180, "validation": 20, "test": 50} for t in spec.tasks}
    card = render_card(spec, {"sizes": sizes, "data_hash": "sha256:x", "files": {}}, [])
    assert "| train | validation | test |" in card and "| 180 | 20 | 50 |" in card
    assert "select hyperparameters on" in card
    assert [f["split"] for f in task_config("t", ("train", "validation", "test"))["data_files"]] == [
        "train",
        "validation",
        "test",
    ]


# --------------------------------------------------------------------------- tuning


@pytest.fixture(scope="module")
def toy_with_validation(built_pair, tmp_path_factory):
    _, (split, root) = built_pair
    path = tmp_path_factory.mktemp("manifest") / "toy-validation.json"
    path.write_text(json.dumps(manifest_dict(split)))
    return str(path), str(root)


def _config(manifest, root, out, **kw):
    from drake_bench import RunConfig

    return RunConfig(
        benchmark=manifest,
        method="majority-answer",
        data_dir=root,
        out=str(out),
        seeds=[0, 1],
        scenario="static",
        rounds=2,
        local_steps=1,
        fast_adaptation=False,
        isolation="inline",
        **kw,
    )


def test_tune_scores_every_grid_point_on_validation_and_selects_the_best(toy_with_validation, tmp_path):
    from drake_bench.results.result_file import read_result
    from drake_bench.tuning import RECORD_FILE, read_record, tune

    manifest, root = toy_with_validation
    record = tune(_config(manifest, root, tmp_path), {"own_weight": [0.0, 1.0]}, out=tmp_path)
    assert [p.settings for p in record.points] == [{"own_weight": 0.0}, {"own_weight": 1.0}]
    for point in record.points:
        res = read_result(tmp_path / point.result)
        assert res.fl.extra["run_config"]["scored_split"] == "validation"
        assert point.score == pytest.approx(res.summary.aggregate.self_last.mean)
        assert point.per_seed == [s.self_last for s in res.summary.per_seed]
    best = max(record.points, key=lambda p: p.score)
    assert record.selected == best.settings and record.split == "validation"
    on_disk, _ = read_record(tmp_path / RECORD_FILE)
    assert on_disk == record


def test_a_tuning_run_resumes_and_a_selected_run_records_where_its_values_came_from(toy_with_validation, tmp_path):
    from drake_bench.tuning import RECORD_FILE, TuningError, apply_record, tune

    manifest, root = toy_with_validation
    calls = []

    def interrupted(cfg):  # the second point's run dies: the record on disk keeps the first
        from drake_bench.evaluator.standard import run

        calls.append(cfg.method_config)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return run(cfg)

    with pytest.raises(KeyboardInterrupt):
        tune(_config(manifest, root, tmp_path), {"own_weight": [0.0, 1.0]}, out=tmp_path, run=interrupted)
    calls.clear()
    first = tune(_config(manifest, root, tmp_path), {"own_weight": [0.0, 1.0]}, out=tmp_path, run=interrupted)
    assert calls == [{"own_weight": 1.0}] and len(first.points) == 2  # only the unfinished point ran
    with pytest.raises(TuningError, match="records another tuning run"):
        tune(_config(manifest, root, tmp_path), {"own_weight": [0.0, 0.5]}, out=tmp_path)
    cfg = apply_record(_config(manifest, root, tmp_path / "final"), tmp_path / RECORD_FILE)
    assert cfg.method_config == first.selected and cfg.selection.split == "validation"
    assert cfg.selection.criterion == "self_last" and len(cfg.selection.record_sha256) == 64


def test_grids_and_records_are_refused_by_name(toy_with_validation, tmp_path):
    from drake_bench.tuning import TuningError, apply_record, parse_grid, tune

    assert parse_grid(["lr=1e-3,3e-3", "name=a,b"]) == {"lr": [0.001, 0.003], "name": ["a", "b"]}
    for bad, match in (
        (["lr"], "KEY=V1,V2"),
        (["lr=1,1"], "listed twice"),
        (["a=1", "a=2"], "names 'a' twice"),
        ([], "at least one"),
    ):
        with pytest.raises(TuningError, match=match):
            parse_grid(bad)
    manifest, root = toy_with_validation
    with pytest.raises(TuningError, match="both as a fixed setting and in the grid"):
        tune(_config(manifest, root, tmp_path, method_config={"own_weight": 0.5}), {"own_weight": [0.0]})
    with pytest.raises(TuningError, match="criterion 'accuracy'"):
        tune(_config(manifest, root, tmp_path), {"own_weight": [0.0]}, criterion="accuracy")
    (tmp_path / "bad.json").write_text('{"format": "something else"}')
    with pytest.raises(TuningError, match="bad.json: not a tuning record"):
        apply_record(_config(manifest, root, tmp_path), tmp_path / "bad.json")


def test_tuning_needs_a_version_with_a_validation_split(toy, tmp_path):
    from drake_bench.tuning import tune

    manifest, root = toy
    with pytest.raises(ScenarioError, match="has no validation split"):
        tune(_config(manifest, root, tmp_path), {"own_weight": [0.0, 1.0]})


def test_boards_refuse_a_tuning_run_and_a_selection_on_test(tiny_board, tmp_path):

    from drake_bench.leaderboard.boards import load_board
    from drake_bench.leaderboard.rules import validate

    board_json, root = tiny_board
    board = load_board(str(board_json))
    original = next(p for p in root.rglob("result.json") if "checkpoints" not in p.parts)

    def refusals(edit):
        path = tmp_path / "result.json"
        copy_result(original, path)
        data = json.loads(path.read_text())
        edit(data["fl"]["extra"]["run_config"])
        path.write_text(json.dumps(data))
        return [r.message for r in validate([path], board)[1] if r.rule == "selection"]

    assert refusals(lambda rc: None) == []
    assert refusals(lambda rc: rc.update(selection={"split": "validation", "settings": {}})) == []
    tuning_run = refusals(lambda rc: rc.update(scored_split="validation"))
    assert len(tuning_run) == 1 and "a tuning run" in tuning_run[0]
    on_test = refusals(lambda rc: rc.update(selection={"split": "test", "settings": {}}))
    assert len(on_test) == 1 and "selected on test items" in on_test[0]


def test_the_tune_command_prints_every_point_and_writes_the_record(toy_with_validation, tmp_path):
    from typer.testing import CliRunner

    from drake_bench.cli import app
    from drake_bench.tuning import read_record

    manifest, root = toy_with_validation
    args = [
        "tune",
        "majority-answer",
        "--grid",
        "own_weight=0,1",
        "--benchmark",
        manifest,
        "--data-dir",
        root,
        "--scenario",
        "static",
        "--rounds",
        "1",
        "--local-steps",
        "1",
        "--seeds",
        "0",
        "--out",
        str(tmp_path),
    ]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    record, _ = read_record(tmp_path / "tuning.json")
    assert "validation split" in res.output and res.output.count("<- selected") == 1
    assert f"{{'own_weight': {record.selected['own_weight']}}}" in res.output.split("<- selected")[0].splitlines()[-1]
    bad = CliRunner().invoke(app, ["tune", "majority-answer", "--grid", "own_weight", "--benchmark", manifest])
    assert bad.exit_code == 1 and "--grid expects KEY=V1,V2" in bad.output

    from drake_bench.results.result_file import read_result

    run = [
        "run",
        "--benchmark",
        manifest,
        "--data-dir",
        root,
        "--scenario",
        "static",
        "--rounds",
        "1",
        "--local-steps",
        "1",
        "--seeds",
        "0",
        "--no-fast-adaptation",
        "--out",
        str(tmp_path / "final"),
        "--tuning-record",
        str(tmp_path / "tuning.json"),
    ]
    res = CliRunner().invoke(app, run + ["--methods", "majority-answer"])
    assert res.exit_code == 0, res.output
    result = read_result(next((tmp_path / "final").rglob("result.json")))
    rc = result.fl.extra["run_config"]
    assert rc["scored_split"] == "test" and rc["selection"]["split"] == "validation"
    assert rc["method_config"] == record.selected == rc["selection"]["settings"]
    other = CliRunner().invoke(app, run + ["--methods", "zero-shot"])
    assert other.exit_code != 0 and "tuned 'majority-answer', which is not among --methods" in other.output


def test_every_committed_tuning_record_selects_its_best_point_from_its_own_result_files():
    from pathlib import Path

    from drake_bench.results.result_file import read_result
    from drake_bench.tuning import grid_points, read_record, select

    records = sorted((Path(__file__).resolve().parents[1] / "leaderboard").rglob("tuning.json"))
    assert records, "the LoRA learning rate's tuning record is committed"
    for path in records:
        record, _ = read_record(path)
        assert [p.settings for p in record.points] == grid_points(record.grid) and record.split == "validation"
        for point in record.points:
            res = read_result(path.parent / point.result)
            assert res.fl.extra["run_config"]["scored_split"] == "validation"
            assert res.fl.extra["run_config"]["method_config"] == point.settings
            assert point.score == getattr(res.summary.aggregate, record.criterion).mean
        assert record.selected == select(record.points)
