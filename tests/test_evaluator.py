"""The standard evaluator with a model-free plugin: protocol paths, bytes, resume, plugin faults."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from minimal_method import Counter

from drake_bench import DrakeBenchError, PluginError
from drake_bench.evaluation.table import summary_markdown
from drake_bench.evaluator.standard import RunConfig, run
from drake_bench.plugins.protocol import MethodMeta, State
from drake_bench.plugins.registry import available_methods, create_method, register_method
from drake_bench.results.result_file import check_result, dump_result_data, load_result_data, read_result

register_method(Counter)


def _cfg(toy, out, **kw):
    manifest, root = toy
    base = dict(
        benchmark=manifest,
        method="counter",
        data_dir=root,
        out=str(out),
        seeds=[0],
        fast_adaptation_iters=4,
        fast_adaptation_eval_every=2,
    )
    base.update(kw)
    return RunConfig(**base)


def test_run_produces_a_consistent_result_file(toy, tmp_path):
    res = run(_cfg(toy, tmp_path, seeds=[0, 1]))
    path = res.path(tmp_path)
    assert path.is_file()
    again = read_result(path)
    assert check_result(again) == []
    assert again.status == "complete" and again.seeds == [0, 1]
    assert {r.eval_round for r in again.raw.scores} == {2, 4, 6, 8}
    roles = {r.role for r in again.raw.scores}
    assert roles == {"self", "others"}
    # Others of client c never include its own tasks; Self only its own
    for r in again.raw.scores:
        assert (r.owner == r.client) == (r.role == "self")
    # Dynamic: at the first evaluation only the first task of each client is seen
    first = [r for r in again.raw.scores if r.eval_round == 2 and r.role == "self" and r.seed == 0]
    assert sorted(r.task for r in first) == ["c1-t0", "c2-t0", "c3-t0"]
    assert again.summary.per_seed[0].seed == 0
    # fast adaptation: both inits, iterations 0, 2, 4
    its = sorted({(a.init, a.iteration) for a in again.raw.adaptation})
    assert its == [("fresh", 0), ("fresh", 2), ("fresh", 4), ("method", 0), ("method", 2), ("method", 4)]


def test_others_subsample_zero_scores_self_alone_and_the_file_still_checks(toy, tmp_path):
    """Others switched off (a many-client Dirichlet board would score clients x clients x tasks items): no Others
    rows, empty Others columns, the same Self as a run that scores Others, and a result file that passes its check."""
    res = run(_cfg(toy, tmp_path / "self-only", others_subsample=0, fast_adaptation=False))
    full = run(_cfg(toy, tmp_path / "full", fast_adaptation=False))
    assert {r.role for r in res.raw.scores} == {"self"} and res.fl.others_subsample == 0
    assert res.summary.aggregate.others_last.mean is None and res.summary.aggregate.self_last.mean is not None
    assert [r for r in res.raw.scores] == [r for r in full.raw.scores if r.role == "self"]
    assert check_result(res) == [] and check_result(full) == []
    broken = res.model_copy(update={"fl": res.fl.model_copy(update={"others_subsample": 1})})
    assert any("missing Others rows" in p for p in check_result(broken))  # the 0 is what excuses them


def test_bytes_are_measured_by_the_evaluator(toy, tmp_path):
    res = run(_cfg(toy, tmp_path, fast_adaptation=False))
    # Counter uploads one float32 vector of 2 counts (8 bytes) plus metadata "{}" (2 bytes); downloads the same
    assert {c.uplink_bytes for c in res.raw.costs} == {10}
    assert {c.downlink_bytes for c in res.raw.costs} == {10}
    assert len(res.raw.costs) == 8 * 3


def test_same_seed_same_numbers(toy, tmp_path):
    a = run(_cfg(toy, tmp_path / "a", fast_adaptation=False))
    b = run(_cfg(toy, tmp_path / "b", fast_adaptation=False))
    assert [r.score for r in a.raw.scores] == [r.score for r in b.raw.scores]


def test_rerunning_a_finished_run_keeps_the_shards_it_verified(toy, tmp_path):
    """A rerun into the same folder resumes every seed at its end and reads no shard; its result file still lists
    the shards the numbers came from, with their hashes (they are kept with the checkpoint)."""
    first = run(_cfg(toy, tmp_path, fast_adaptation=False, scenario="static", rounds=2))
    again = run(_cfg(toy, tmp_path, fast_adaptation=False, scenario="static", rounds=2))
    assert first.benchmark.verified_files and again.benchmark.verified_files == first.benchmark.verified_files
    # a checkpoint written before the hashes were kept: the resumed seed verifies what its federation reads
    from drake_bench.evaluator import checkpoint
    from drake_bench.evaluator.standard import VERIFIED_KEY

    folder = next(p.parent for p in tmp_path.rglob("progress.json"))
    progress = checkpoint.load(folder)
    progress.extra.pop(VERIFIED_KEY)
    checkpoint.save(folder, progress)
    legacy = run(_cfg(toy, tmp_path, fast_adaptation=False, scenario="static", rounds=2))
    assert set(legacy.benchmark.verified_files) >= set(first.benchmark.verified_files)
    assert all(legacy.benchmark.verified_files[k] == v for k, v in first.benchmark.verified_files.items())


def test_failure_names_method_client_round_and_resume_is_exact(toy, tmp_path, monkeypatch):
    clean = run(_cfg(toy, tmp_path / "clean", fast_adaptation=False))
    out = tmp_path / "crash"
    # a code-level fault patched into the class: only an inline method sees the patch (a worker imports it afresh)
    monkeypatch.setattr(Counter, "FAIL_ON", (2, 4))
    with pytest.raises(
        PluginError, match=r"method 'counter' failed in client_update \(seed 0, client 2, round 5\): RuntimeError: boom"
    ):
        run(_cfg(toy, out, fast_adaptation=False, isolation="inline"))
    monkeypatch.setattr(Counter, "FAIL_ON", None)  # the plugin is fixed; same configuration resumes
    progress = json.loads(next(out.rglob("progress.json")).read_text())
    assert progress["completed_rounds"] == 4  # everything finished before the fault is on disk
    before = progress["extra"]["phase_seconds"]  # and the seconds its phases took
    assert before["training"] > 0 and before["setup"] > 0
    resumed = run(_cfg(toy, out, fast_adaptation=False))  # and resumes in its own process to the same numbers
    assert [r.model_dump() for r in resumed.raw.scores] == [r.model_dump() for r in clean.raw.scores]
    # the resumed seed's phases count the rounds before the interruption too
    after = resumed.fl.extra["phase_seconds"]["0"]
    assert all(after[phase] > seconds for phase, seconds in before.items() if phase in ("setup", "training"))


class Broken(Counter):
    meta = MethodMeta(name="broken", version="1.0")

    def aggregate(self, round_idx, server_state, uploads):
        return {}, server_state


class Forgetful(Counter):
    meta = MethodMeta(name="forgetful", version="1.0")

    def post_federation(self, federation, client_states, server_state):
        return {c: s for c, s in client_states.items() if c != 2}


class Poisoned(Counter):
    meta = MethodMeta(name="poisoned", version="1.0")

    def post_federation(self, federation, client_states, server_state):
        return {c: State(tensors={"counts": torch.full((2,), float("nan"))}) for c in client_states}


for _cls in (Broken, Forgetful, Poisoned):
    register_method(_cls)


def test_nan_and_malformed_outputs_are_plugin_errors(toy, tmp_path):
    with pytest.raises(PluginError, match=r"client_update \(seed 0, client 3, round 2\): the upload: .*NaN"):
        run(_cfg(toy, tmp_path / "nan", fast_adaptation=False, method_config={"nan_on": [3, 1]}))
    with pytest.raises(
        PluginError, match=r"'broken' failed in aggregate \(seed 0, round 1\): .*no message for clients"
    ):
        run(_cfg(toy, tmp_path / "broken", method="broken", fast_adaptation=False))


class Distilled(Counter):
    """A post-federation stage (TAP's distillation, in spirit): every client ends up answering ``answer``."""

    meta = MethodMeta(name="distilled", version="1.0")
    answer = "yes"
    calls: list[tuple[int, list[int]]] = []

    def post_federation(self, federation, client_states, server_state):
        type(self).calls.append((server_state.metadata["rounds"], sorted(client_states)))
        counts = torch.tensor([1.0, 0.0]) if self.answer == "yes" else torch.tensor([0.0, 1.0])
        return {c: State(tensors={"counts": counts.clone()}) for c in client_states}


class DistilledNo(Distilled):
    meta = MethodMeta(name="distilled-no", version="1.0")
    answer = "no"


register_method(Distilled)
register_method(DistilledNo)


def test_post_federation_stage_replaces_only_the_final_evaluation(toy, tmp_path):
    plain = run(_cfg(toy, tmp_path / "plain", fast_adaptation=False))
    Distilled.calls.clear()  # recorded in this process: the two runs below are inline
    yes = run(_cfg(toy, tmp_path / "yes", method="distilled", fast_adaptation=False, isolation="inline"))
    no = run(_cfg(toy, tmp_path / "no", method="distilled-no", fast_adaptation=False, isolation="inline"))
    # called once per run, after the last round (the server has aggregated 8 rounds), with every client
    assert Distilled.calls == [(8, [1, 2, 3]), (8, [1, 2, 3])]
    key = lambda r: (r.eval_round, r.client, r.task)  # noqa: E731
    before = {key(r): r.score for r in plain.raw.scores if r.eval_round < 8}
    for res in (yes, no):
        assert {key(r): r.score for r in res.raw.scores if r.eval_round < 8} == before
    # the final point scores the post-federation states: always-yes and always-no are complementary on
    # every (client, task) of a yes/no benchmark, whatever the items are
    final_yes = {key(r): r.score for r in yes.raw.scores if r.eval_round == 8}
    final_no = {key(r): r.score for r in no.raw.scores if r.eval_round == 8}
    assert final_yes.keys() == final_no.keys() and len(final_yes) > 0
    assert all(abs(final_yes[k] + final_no[k] - 1.0) < 1e-9 for k in final_yes)
    assert final_yes != {key(r): r.score for r in plain.raw.scores if r.eval_round == 8}


def test_the_point_a_post_federation_stage_replaced_is_kept_beside_it(toy, tmp_path):
    plain = run(_cfg(toy, tmp_path / "plain", fast_adaptation=False))
    yes = run(_cfg(toy, tmp_path / "yes", method="distilled", fast_adaptation=False))
    key = lambda r: (r.eval_round, r.client, r.task, r.owner, r.role)  # noqa: E731
    # before the stage, a Distilled client holds what a Counter client holds: the kept rows are plain's final point
    kept = {key(r): r.score for r in yes.raw.scores_before_post_federation}
    assert kept == {key(r): r.score for r in plain.raw.scores if r.eval_round == 8} and kept
    assert plain.raw.scores_before_post_federation == []  # no stage, nothing replaced
    a, p = yes.summary.aggregate, plain.summary.aggregate
    assert a.self_last_before_post_federation.mean == p.self_last.mean != a.self_last.mean
    assert a.others_last_before_post_federation.mean == p.others_last.mean
    assert p.self_last_before_post_federation.mean is None and p.others_last_before_post_federation.n == 0
    # the file holds them, its schema accepts them, and the rules check them
    on_disk = read_result(next((tmp_path / "yes").rglob("result.json")))
    assert on_disk.raw.scores_before_post_federation == yes.raw.scores_before_post_federation
    assert check_result(on_disk) == []
    moved = on_disk.model_copy(deep=True)
    rows = moved.raw.scores_before_post_federation
    rows[0] = rows[0].model_copy(update={"eval_round": 7})
    assert any("scores_before_post_federation seed 0: rows for rounds [7]" in q for q in check_result(moved))
    lacking = on_disk.model_copy(deep=True)
    del lacking.raw.scores_before_post_federation[-1]
    assert any("cells differ from the final point's" in q for q in check_result(lacking))
    stageless = on_disk.model_copy(deep=True)
    stageless.raw.post_federation_costs.clear()
    assert any("without a post_federation stage" in q for q in check_result(stageless))
    # the board's markdown shows before and after for the staged method only
    text = summary_markdown([plain, yes])
    assert "before and after each method's post-federation stage" in text
    assert "| distilled 1.0 |" in text.split("post-federation stage")[-1]
    assert "counter 1.0" not in text.split("post-federation stage (its A_last")[-1]
    assert "post-federation stage (its A_last" not in summary_markdown([plain])


def test_a_malformed_post_federation_result_is_a_plugin_error(toy, tmp_path):
    with pytest.raises(
        PluginError, match=r"'forgetful' failed in post_federation \(seed 0\): .*every client \[1, 2, 3\], got \[1, 3\]"
    ):
        run(_cfg(toy, tmp_path / "f", method="forgetful", fast_adaptation=False))
    with pytest.raises(PluginError, match=r"'poisoned' failed in post_federation \(seed 0, client 1\): .*NaN"):
        run(_cfg(toy, tmp_path / "p", method="poisoned", fast_adaptation=False))
    # the eight rounds before the faulty stage stay on disk
    assert json.loads(next((tmp_path / "p").rglob("progress.json")).read_text())["completed_rounds"] == 8


def test_registry_refuses_clashes_and_unknown_names():
    class Other(Counter):
        pass

    with pytest.raises(PluginError, match="name clash"):
        register_method(Other, name="counter")
    with pytest.raises(PluginError, match="name clash"):
        register_method(Other, name="sft")
    assert {"sft", "fedit", "counter"} <= set(available_methods())
    with pytest.raises(Exception, match="unknown method"):
        create_method("nope")
    with pytest.raises(PluginError, match="invalid config"):
        create_method("counter", {"no_such_option": 1})


PLUGIN = """
from minimal_method import Counter as _C

from drake_bench import MethodMeta

class ThirdParty(_C):
    meta = MethodMeta(name="{ep_name}", version="0.0.1")
"""


def _install_plugin(tmp_path: Path, pkg: str, ep_name: str) -> Path:
    src = tmp_path / f"src-{pkg}"
    (src / pkg).mkdir(parents=True)
    (src / pkg / "__init__.py").write_text(PLUGIN.replace("{ep_name}", ep_name))
    (src / "pyproject.toml").write_text(
        textwrap.dedent(f"""
        [build-system]
        requires = ["setuptools>=68"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "{pkg}"
        version = "0.0.1"
        [project.entry-points."drake_bench.methods"]
        {ep_name} = "{pkg}:ThirdParty"
        [tool.setuptools]
        packages = ["{pkg}"]
    """)
    )
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            str(src),
        ],
        check=True,
        capture_output=True,
    )
    return target


def test_third_party_plugin_installed_in_a_temporary_environment_runs(toy, tmp_path):
    target = _install_plugin(tmp_path, "drake_plugin_demo", "third-party")
    tests_dir = Path(__file__).parent
    code = textwrap.dedent(f"""
        from drake_bench.plugins.registry import available_methods
        from drake_bench.evaluator.standard import RunConfig, run
        assert "third-party" in available_methods(), available_methods()
        res = run(RunConfig(benchmark={toy[0]!r}, method="third-party", data_dir={toy[1]!r}, out={str(tmp_path / "out")!r},
                            fast_adaptation=False))
        print(res.method.name, res.method.version, res.status)
        print("package:", res.method.package)
    """)
    env = {
        "PYTHONPATH": f"{target}:{tests_dir}",
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "DRAKE_BENCH_NO_PROGRESS": "1",
    }
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "third-party 0.0.1 complete" in out.stdout
    assert "package: drake_plugin_demo 0.0.1" in out.stdout  # the result names the package that registered it
    # a second package claiming an existing name is refused with both packages named, where that name is asked
    # for; every other method still runs (one clashing pair used to stop every run)
    target2 = _install_plugin(tmp_path / "b", "drake_plugin_clash", "sft")
    code2 = textwrap.dedent("""
        from drake_bench.plugins.registry import available_methods, create_method, method_class
        assert "sft" in available_methods() and create_method("fedit").meta.name == "fedit"
        method_class("sft")
    """)
    env["PYTHONPATH"] = f"{target2}:{tests_dir}"
    out = subprocess.run([sys.executable, "-c", code2], capture_output=True, text=True, env=env)
    assert out.returncode != 0 and "name clash: 'sft'" in out.stderr, out.stderr[-2000:]
    assert "drake_plugin_clash:ThirdParty" in out.stderr and "drake_bench.methods.sft:SFT" in out.stderr


def test_resume_refuses_a_checkpoint_of_another_configuration(toy, tmp_path):
    out = tmp_path / "run"
    with pytest.raises(PluginError):
        run(_cfg(toy, out, fast_adaptation=False, method_config={"fail_on": [1, 3]}))
    # same out dir, different local steps: resuming would mix two runs
    with pytest.raises(DrakeBenchError, match="different run configuration"):
        run(_cfg(toy, out, fast_adaptation=False, local_steps=3))
    # --no-resume starts over
    assert run(_cfg(toy, out, fast_adaptation=False, local_steps=3, resume=False)).status == "complete"


def test_a_run_killed_mid_flight_resumes_to_identical_results(toy, tmp_path):
    """SIGKILL (no cleanup, no exception handler) at an arbitrary moment, then resume."""
    import os
    import signal
    import time

    clean = run(_cfg(toy, tmp_path / "clean", fast_adaptation=False))
    out = tmp_path / "killed"
    tests_dir = Path(__file__).parent
    code = textwrap.dedent(f"""
        import sys; sys.path.insert(0, {str(tests_dir)!r})
        from minimal_method import Counter
        from drake_bench.plugins.registry import register_method
        from drake_bench.evaluator.standard import RunConfig, run
        register_method(Counter)
        run(RunConfig(benchmark={toy[0]!r}, method="counter", data_dir={toy[1]!r}, out={str(out)!r}, fast_adaptation=False))
    """)
    env = {**os.environ, "COUNTER_SLEEP": "0.05"}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env)
    # A fixed-depth glob: rglob would walk round directories the run is deleting.
    progress = "checkpoints/*/*/*/seed-0/progress.json"
    deadline = time.time() + 120
    while time.time() < deadline:
        found = list(out.glob(progress))
        if found and json.loads(found[0].read_text())["completed_rounds"] >= 3:
            break
        time.sleep(0.02)
    time.sleep(0.07)  # land somewhere inside a later round
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = json.loads(next(out.glob(progress)).read_text())["completed_rounds"]
    assert 3 <= done < 8, done
    resumed = run(_cfg(toy, out, fast_adaptation=False))
    assert [r.model_dump() for r in resumed.raw.scores] == [r.model_dump() for r in clean.raw.scores]
    assert [(c.round, c.client, c.uplink_bytes) for c in resumed.raw.costs] == [
        (c.round, c.client, c.uplink_bytes) for c in clean.raw.costs
    ]


def test_model_identity_follows_the_pretraining_recipe_and_template(monkeypatch):
    """A checkpoint never resumes onto re-pretrained bases or a changed prompt template (the zoo methods' report)."""
    from drake_bench.methods.sft import SFT
    from drake_bench.models import pretrain, prompting

    sft = SFT()
    tiny = sft.model_identity("tiny-llava-llama-s")
    assert tiny.weights["recipe"]["version"] == pretrain.RECIPE_VERSION
    assert tiny.architecture != sft.model_identity("tiny-llava-qwen2-s").architecture
    assert sft.model_identity("llava-1.5-7b").weights == {"source": "llava-hf/llava-1.5-7b-hf"}
    assert sft.model_identity("my-own-model").model_dump() == {
        "architecture": "my-own-model",
        "weights": {"source": "my-own-model"},
    }
    monkeypatch.setattr(pretrain, "DEFAULT_RECIPE", pretrain.Recipe(steps_multimodal=1))
    assert sft.model_identity("tiny-llava-llama-s") != tiny
    monkeypatch.setattr(prompting, "TEMPLATE_VERSION", "other")
    assert sft.evaluation_settings()["prompt_template_version"] == "other"


def test_a_model_free_method_reports_no_models_and_the_result_says_so(toy, tmp_path):
    res = run(_cfg(toy, tmp_path / "free", fast_adaptation=False))
    assert res.model_allocation.checkpoints == {"none": {"source": "none"}}
    assert res.evaluation.extra == {"reported_by_method": False}


def test_drake_bench_run_cli_runs_a_third_party_plugin_end_to_end(toy, tmp_path):
    """The CLI path (worker process, summary table, result file, plot) with schedule overrides."""
    target = _install_plugin(tmp_path, "drake_plugin_cli", "third-party")
    tests_dir = Path(__file__).parent
    out = tmp_path / "out"
    env = {
        "PYTHONPATH": f"{target}:{tests_dir}",
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "DRAKE_BENCH_NO_PROGRESS": "1",
        "COLUMNS": "200",
    }
    cmd = [
        sys.executable,
        "-m",
        "drake_bench.cli",
        "run",
        "--benchmark",
        toy[0],
        "--data-dir",
        toy[1],
        "--methods",
        "third-party",
        "--rounds",
        "8",
        "--eval-every",
        "4",
        "--no-fast-adaptation",
        "--jobs",
        "1",
        "--out",
        str(out),
        "--set",
        "share=false",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "third-party" in proc.stdout and "Self" in proc.stdout
    assert "third-party: seed 0 round 8/8" in proc.stderr  # not a terminal: progress comes as plain lines
    res = read_result(next(out.rglob("result.json")))
    assert check_result(res) == [] and res.method.name == "third-party"
    assert {r.eval_round for r in res.raw.scores} == {4, 8}
    assert res.fl.eval_every_rounds == 4
    assert res.method.config["share"] is False  # --set reached the plugin's config and the result file
    scen = out / "toy" / res.scenario.tag
    assert (scen / "accuracy_over_rounds.png").stat().st_size > 0 and "third-party" in (scen / "summary.md").read_text()


def test_report_joins_result_files_and_refuses_a_different_benchmark(toy, tmp_path):
    from typer.testing import CliRunner

    from drake_bench.cli import app

    res = run(_cfg(toy, tmp_path / "a", fast_adaptation=False))
    path = res.path(tmp_path / "a")
    r = CliRunner().invoke(app, ["report", str(path), "--out", str(tmp_path / "board")])
    assert r.exit_code == 0, r.output
    assert "counter" in (tmp_path / "board" / "summary.md").read_text()
    assert (tmp_path / "board" / "accuracy_over_rounds.png").stat().st_size > 0
    other = load_result_data(path)
    other["benchmark"]["data_hash"] = "sha256:" + "0" * 64  # other data: its bytes and its content differ
    other["benchmark"]["content_hash"] = "sha256:" + "1" * 64
    changed = dump_result_data(other, tmp_path / "changed.json")
    r = CliRunner().invoke(app, ["report", str(path), str(changed)])
    out = r.output + (r.stderr if r.stderr_bytes is not None else "")
    assert r.exit_code != 0 and "not comparable" in out and "data_hash" in out and "content_hash" in out


def test_benchmarks_compare_by_identity_and_by_the_shards_both_verified():
    from drake_bench.results.result_file import BenchmarkRef, benchmark_differences

    a = BenchmarkRef(name="b", version="1", manifest_hash="m", data_hash="d", verified_files={"x": "1", "y": "2"})
    # a resumed run checks fewer shards: the same data
    assert benchmark_differences(a, a.model_copy(update={"verified_files": {"x": "1"}})) == []
    assert benchmark_differences(a, a.model_copy(update={"verified_files": {}})) == []
    assert benchmark_differences(a, a.model_copy(update={"verified_files": {"y": "3"}})) == [
        "1 shard(s) with another sha256, e.g. y"
    ]
    assert benchmark_differences(a, a.model_copy(update={"version": "2"})) == ["version '2' (not '1')"]
    # the same data written by other pyarrow / Pillow: other file bytes, the same content hash
    c = a.model_copy(update={"content_hash": "sha256:c"})
    rewritten = c.model_copy(update={"data_hash": "e", "verified_files": {"x": "9", "y": "8"}})
    assert benchmark_differences(c, rewritten) == []
    assert benchmark_differences(c, rewritten.model_copy(update={"content_hash": "sha256:o"})) == [
        "data_hash 'e' (not 'd')",
        "content_hash 'sha256:o' (not 'sha256:c')",
    ]
    assert benchmark_differences(a, rewritten) == ["data_hash 'e' (not 'd')"]  # one cites no content: bytes decide


def test_run_set_option_builds_each_methods_config():
    import typer

    from drake_bench.commands.run import method_settings

    got = method_settings(
        ["learning_rate=1e-3", "fedit.rank=4", "share=false", "counter.fail_on=[1, 2]"], ["sft", "fedit", "counter"]
    )
    assert got["sft"] == {"learning_rate": 0.001} and got["fedit"] == {"learning_rate": 0.001, "rank": 4}
    assert got["counter"] == {"share": False, "fail_on": [1, 2]}  # counter has no learning_rate: not given one
    with pytest.raises(typer.BadParameter, match="no selected method has a config field 'learning_rat'"):
        method_settings(["learning_rat=1e-3"], ["sft", "fedit"])  # a typo is an error, never ignored
    with pytest.raises(typer.BadParameter, match="method 'fedmosaic' is not among --methods"):
        method_settings(["fedmosaic.tau=1"], ["sft"])
    with pytest.raises(typer.BadParameter, match="KEY=VALUE"):
        method_settings(["learning_rate"], ["sft"])
    with pytest.raises(PluginError, match="method 'sft': invalid config"):  # the method's own validation
        create_method("sft", method_settings(["learning_rate=-1"], ["sft"])["sft"])


def test_run_rejects_a_bad_scenario_or_allocation_before_building_anything(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from drake_bench.cli import app

    monkeypatch.setenv("DRAKE_BENCH_HOME", str(tmp_path / "home"))
    for option, bad, message in (
        ("--scenario", "weird", "unknown scenario 'weird'"),
        ("--scenario", "dirichlet:x", "dirichlet needs a positive alpha"),
        ("--allocation", "nope", "unknown model allocation 'nope'"),
    ):
        r = CliRunner().invoke(app, ["run", "--benchmark", "drake-synth", option, bad, "--out", str(tmp_path / "out")])
        text = r.output + (r.stderr if r.stderr_bytes is not None else "")
        assert r.exit_code != 0 and message in text, text
        assert "method 'sft'" not in text  # the option is at fault, not the first method to hit it
    assert not (tmp_path / "home").exists() and not (tmp_path / "out").exists()  # nothing built, fetched or written


@pytest.mark.parametrize(
    "options, message",
    [
        (["--seeds", "0,0"], "--seeds: Value error, seeds must be distinct"),
        (["--rounds", "0"], "--rounds: Input should be greater than or equal to 1"),
        (["--local-steps", "-1"], "--local-steps: Input should be greater than or equal to 1"),
        (["--others-subsample", "-1"], "--others-subsample: Input should be greater than or equal to 0"),
        (["--methods", "sft,fedit,sft"], "--methods lists sft more than once"),
        (["--numerics", "fast"], "--numerics: Input should be 'portable' or 'native'"),
        (["--scorer-version", "3.0"], "--scorer-version: Input should be '1.0' or '2.0'"),
    ],
)
def test_run_rejects_bad_schedule_values_by_option_name(tmp_path, monkeypatch, options, message):
    from typer.testing import CliRunner

    from drake_bench.cli import app

    monkeypatch.setenv("DRAKE_BENCH_HOME", str(tmp_path / "home"))
    r = CliRunner().invoke(
        app, ["run", *options, "--out", str(tmp_path / "out")], env={"COLUMNS": "300"}
    )  # no wrapping
    text = r.output + (r.stderr if r.stderr_bytes is not None else "")
    assert r.exit_code != 0 and message in text, text
    assert not (tmp_path / "home").exists() and not (tmp_path / "out").exists()


def test_finished_seeds_resume_from_the_result_file_alone(toy, tmp_path, monkeypatch):
    """A run moved without its checkpoints (a board built over several sessions) keeps the seeds its result file
    holds: the partial file is on disk as soon as a seed ends, and the resumed run equals one uninterrupted run."""
    import shutil

    from drake_bench.evaluator.standard import Evaluator
    from drake_bench.results.result_file import comparable

    clean = run(_cfg(toy, tmp_path / "clean", seeds=[0, 1]))
    out = tmp_path / "moved"
    path = clean.path(out)
    real_run_seed = Evaluator.run_seed
    ran: list[int] = []

    def interrupted_at_seed_1(self, seed):
        ran.append(seed)
        if seed == 1:  # the file already holds seed 0 when seed 1 starts
            assert (read_result(path).status, read_result(path).seeds) == ("partial", [0])
            raise KeyboardInterrupt  # as a killed session: nothing after this point runs
        return real_run_seed(self, seed)

    monkeypatch.setattr(Evaluator, "run_seed", interrupted_at_seed_1)
    with pytest.raises(KeyboardInterrupt):
        run(_cfg(toy, out, seeds=[0, 1]))
    assert ran == [0, 1]
    shutil.rmtree(out / "checkpoints")  # what a fresh clone of a committed board has: result files, no checkpoints
    ran.clear()
    monkeypatch.setattr(Evaluator, "run_seed", lambda self, seed: (ran.append(seed), real_run_seed(self, seed))[1])
    resumed = run(_cfg(toy, out, seeds=[0, 1]))
    assert ran == [1]  # seed 0 was taken from the file
    assert resumed.status == "complete" and resumed.seeds == [0, 1] and check_result(resumed) == []
    assert comparable(resumed) == comparable(clean)
    ran.clear()
    assert comparable(run(_cfg(toy, out, seeds=[0, 1]))) == comparable(clean) and ran == []  # a finished run: no work


def test_a_result_file_of_another_configuration_is_refused_not_mixed(toy, tmp_path):
    out = tmp_path / "run"
    run(_cfg(toy, out, fast_adaptation=False))
    with pytest.raises(DrakeBenchError, match=r"result.json holds seed 0 from a different run configuration"):
        run(_cfg(toy, out, fast_adaptation=False, local_steps=3))
    assert run(_cfg(toy, out, fast_adaptation=False, local_steps=3, resume=False)).fl.local_steps == 3
