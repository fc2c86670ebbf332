"""A method never shares a process with the answers; runs cannot clobber each other; no orphans.

Each test here reproduces a defect a hostile but fair user found, and checks it is gone.
"""

from __future__ import annotations

import copy
import gc
import hashlib
import json
import os
import pickle
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from minimal_method import Counter

from drake_bench import MethodMeta, PluginError, RunConfig, run
from drake_bench.benchmarks.manifest import load_benchmark
from drake_bench.core.lock import LOCK_FILE, RunLockedError
from drake_bench.errors import LeakageError, ScenarioError
from drake_bench.plugins.protocol import Message, State
from drake_bench.plugins.registry import register_method

TESTS = Path(__file__).parent


def _cfg(toy, out, method, **kw):
    manifest, root = toy
    base = dict(benchmark=manifest, method=method, data_dir=root, out=str(out), seeds=[0], fast_adaptation=False)
    base.update(kw)
    return RunConfig(**base)


class Cheater(Counter):
    """Tries every way in that was found to work: the evaluator's objects in memory, and uid inversion."""

    meta = MethodMeta(name="cheater", version="1.0")

    class Config(Counter.Config):
        manifest: str = ""  # the public manifest: task names are public

    def setup(self, federation):
        super().setup(federation)
        spec = load_benchmark(self.config.manifest)
        self.rainbow = {}  # sha1("<task>/<row>")[:16] -> (task, row): what the public names allow
        for task in spec.tasks:
            for row in range(200):
                item_id = f"{task.id}/{row:04d}"
                self.rainbow[hashlib.sha1(item_id.encode()).hexdigest()[:16]] = item_id

    def _loot(self):
        """What of the evaluator's is in this process; a find is kept (a real cheater would): a scan of a whole
        test process's heap per call is the slow part of the inline run, not the cheat."""
        from drake_bench.benchmarks.sample import Sample
        from drake_bench.benchmarks.store import BuiltBenchmark
        from drake_bench.streams.stream import FederatedData

        if not getattr(self, "_found", None):
            # by type, not isinstance: pydantic's isinstance check probes attributes, and some modules' __getattr__
            # (torch.backends.cuda's on a CPU build) raise on a probe
            wanted = (FederatedData, BuiltBenchmark, Sample)
            self._found = [o for o in gc.get_objects() if issubclass(type(o), wanted)]
        return self._found

    def client_update(self, ctx, state, message, batches):
        assert not hasattr(batches, "_fed")
        upload, new = super().client_update(ctx, state, message, batches)
        loot = self._loot()
        inverted = sum(s.uid in self.rainbow for b in batches for s in b)
        new.metadata = {"loot": len(loot), "inverted": int(inverted)}
        return upload, new

    def predict(self, ctx, state, queries):
        answers = getattr(self, "_answers", None) or {}
        for obj in [] if answers else self._loot():  # the evaluator's test items, if they were in this process
            if hasattr(obj, "test_samples"):
                for task in obj.spec.tasks:
                    for s in obj.test_samples(task.id):
                        answers[s.question] = s.answer
        self._answers = answers
        inverted = [q.uid in self.rainbow for q in queries]
        if any(inverted) or answers:
            return [answers.get(q.question, "yes") for q in queries]
        return ["yes" for _ in queries]  # chance: the toy answers alternate yes / no


register_method(Cheater)


def _checkpoint_meta(out: Path) -> dict:
    from safetensors import safe_open

    files = sorted(out.glob("checkpoints/**/client-1.safetensors"))
    with safe_open(str(files[-1]), framework="pt") as f:
        return json.loads(f.metadata()["json"])


def test_a_cheating_plugin_sees_no_answers_in_its_process_and_scores_chance(toy, tmp_path):
    # two rounds: every call scans the method process's whole heap (gc.get_objects), so calls are what cost
    res = run(_cfg(toy, tmp_path / "iso", "cheater", rounds=2, scenario="static", method_config={"manifest": toy[0]}))
    meta = _checkpoint_meta(tmp_path / "iso")
    assert meta == {"loot": 0, "inverted": 0}  # no FederatedData, store or Sample in its process; uids keyed
    self_scores = [s.score for s in res.raw.scores if s.role == "self"]
    assert sum(self_scores) / len(self_scores) < 0.65  # always "yes" on alternating answers, not stolen answers


def test_the_same_cheater_inline_does_find_the_answers(toy, tmp_path):
    """The check above can fail: in the evaluator's process the cheat works (inline is for debugging only)."""
    res = run(
        _cfg(
            toy,
            tmp_path / "inline",
            "cheater",
            rounds=2,
            scenario="static",
            isolation="inline",
            method_config={"manifest": toy[0]},
        )
    )
    assert _checkpoint_meta(tmp_path / "inline")["loot"] > 0
    assert all(s.score == 1.0 for s in res.raw.scores if s.role == "self")


def test_sample_ids_shown_to_a_method_are_keyed_per_run(toy_built):
    spec, root = toy_built
    from drake_bench.streams.stream import load_federated_data

    fed = load_federated_data(spec, "static", 0, data_dir=root)
    item = fed.test_samples(spec.tasks[0].id)[0]
    plain = hashlib.sha1(item.id.encode()).hexdigest()[:16]
    a, b = item.as_query(os.urandom(16)).uid, item.as_query(os.urandom(16)).uid
    assert plain not in (a, b) and a != b


def test_a_researchers_stream_holds_no_test_split_and_no_other_client(toy_built):
    spec, root = toy_built
    from drake_bench import load_client_stream
    from drake_bench.benchmarks.store import BuiltBenchmark
    from drake_bench.streams.stream import FederatedData

    stream = load_client_stream(spec, 1, "static", seed=0, data_dir=root)
    with pytest.raises((LeakageError, AttributeError)):
        stream._fed  # noqa: B018
    with pytest.raises(AttributeError):
        object.__getattribute__(stream, "_fed")
    # nothing reachable from the stream is the evaluator's data view or the store (another test's objects may live on
    # in this process, so the check follows the stream's own references rather than every object alive)
    seen, todo, found = set(), [stream], []
    while todo:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, type):
            continue
        seen.add(id(obj))
        if isinstance(obj, (FederatedData, BuiltBenchmark)):
            found.append(obj)
        todo.extend(gc.get_referents(obj))
    assert not found and len(seen) > 10
    view = object.__getattribute__(stream, "_view")
    mine = set(spec.client(1).tasks)
    assert len(view._tables) == len(mine)
    rows = sum(len(t[1]) for t in view._tables)
    assert rows == sum(BuiltBenchmarkSizes(root, t) for t in mine)  # its train rows, nothing else
    for clone in (pickle.dumps, copy.copy):
        with pytest.raises(TypeError, match="cannot be pickled"):
            clone(stream)
    batch = next(iter(stream.round(0)))
    assert batch and all(s.answer for s in batch)


def BuiltBenchmarkSizes(root, task) -> int:  # noqa: N802 - reads build_info, not the store
    info = json.loads((Path(root) / "build_info.json").read_text())
    return int(info["sizes"][task]["train"])


@pytest.mark.parametrize("client", [True, 3.0, "1"])
def test_client_ids_are_strict(toy_built, client):
    spec, root = toy_built
    from drake_bench import load_client_stream

    with pytest.raises(ScenarioError, match="client must be an int client id"):
        load_client_stream(spec, client, data_dir=root)


class ExtraIds(Counter):
    meta = MethodMeta(name="extra-ids", version="1.0")

    def aggregate(self, round_idx, server_state, uploads):
        messages, server = super().aggregate(round_idx, server_state, uploads)
        messages[99] = Message()
        return messages, server


class NanMeta(Counter):
    meta = MethodMeta(name="nan-meta", version="1.0")

    class Config(Counter.Config):
        what: str = "metadata"

    def client_update(self, ctx, state, message, batches):
        upload, new = super().client_update(ctx, state, message, batches)
        if self.config.what == "metadata":
            return Message(metadata={"loss": float("nan")}), new
        return Message(tensors={"z": torch.full((2,), complex(float("nan"), 0))}), new


class Hangs(Counter):
    meta = MethodMeta(name="hangs", version="1.0")

    def client_update(self, ctx, state, message, batches):
        if ctx.client_id == 2:
            time.sleep(60)
        return super().client_update(ctx, state, message, batches)


for _cls in (Counter, ExtraIds, NanMeta, Hangs):
    register_method(_cls)


def test_extra_client_ids_from_aggregate_are_refused(toy, tmp_path):
    with pytest.raises(
        PluginError,
        match=r"aggregate \(seed 0, round 1\): messages for clients that are not in "
        r"this federation: \[99\]",
    ):
        run(_cfg(toy, tmp_path, "extra-ids"))


@pytest.mark.parametrize("what, message", [("metadata", "NaN or Infinity"), ("tensor", "tensor 'z' contains NaN")])
def test_nan_in_metadata_and_complex_nan_tensors_are_refused(toy, tmp_path, what, message):
    with pytest.raises(PluginError, match=rf"client_update \(seed 0, client 1, round 1\): the upload: .*{message}"):
        run(_cfg(toy, tmp_path, "nan-meta", method_config={"what": what}))


def test_a_hung_call_ends_with_a_located_error_under_call_timeout(toy, tmp_path):
    started = time.perf_counter()
    with pytest.raises(
        PluginError,
        match=r"'hangs' failed in client_update \(seed 0, client 2, round 1\): no answer "
        r"within 3 s \(--call-timeout\)",
    ):
        run(_cfg(toy, tmp_path, "hangs", call_timeout=3))
    assert time.perf_counter() - started < 40


# -- one run per output folder ------------------------------------------------------------------
def test_a_second_run_into_a_locked_folder_is_refused_naming_the_holder(toy, tmp_path):
    out = tmp_path / "busy"
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (out / LOCK_FILE).write_text(
            json.dumps(
                {
                    "pid": holder.pid,
                    "command": "drake-bench run --out busy",
                    "host": os.uname().nodename,
                    "started": "now",
                    "token": "t",
                }
            )
        )
        with pytest.raises(
            RunLockedError, match=rf"in use by another run: pid {holder.pid}.*drake-bench run --out busy"
        ):
            run(_cfg(toy, out, "counter"))
        assert not list(out.glob("**/result.json"))
    finally:
        holder.kill()
        holder.wait()


def test_a_stale_lock_is_taken_over_with_a_warning(toy, tmp_path):
    out = tmp_path / "stale"
    out.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (out / LOCK_FILE).write_text(json.dumps({"pid": dead.pid, "command": "killed run", "host": os.uname().nodename}))
    with pytest.warns(RuntimeWarning, match="taking over the lock"):
        res = run(_cfg(toy, out, "counter"))
    assert res.status == "complete" and not (out / LOCK_FILE).exists()


def test_two_concurrent_runs_into_one_folder_one_is_refused(toy, tmp_path):
    manifest, root = toy
    out = tmp_path / "race"
    code = textwrap.dedent(f"""
        import sys; sys.path.insert(0, {str(TESTS)!r})
        from minimal_method import Counter
        from drake_bench.plugins.registry import register_method
        from drake_bench import RunConfig, run
        register_method(Counter)
        run(RunConfig(benchmark={manifest!r}, method="counter", data_dir={root!r}, out={str(out)!r}, fast_adaptation=False))
    """)
    env = {**os.environ, "COUNTER_SLEEP": "0.3"}
    first = subprocess.Popen(
        [sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        for _ in range(200):
            if (out / LOCK_FILE).exists():
                break
            time.sleep(0.05)
        second = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        assert second.returncode != 0 and "in use by another run" in second.stderr
    finally:
        first.kill()
        first.wait()


# -- no orphans -------------------------------------------------------------------------------
def test_kill_9_of_the_run_leaves_no_process_behind(toy, tmp_path):
    psutil = pytest.importorskip("psutil")
    manifest, root = toy
    code = textwrap.dedent(f"""
        import sys; sys.path.insert(0, {str(TESTS)!r})
        from minimal_method import Counter
        from drake_bench.plugins.registry import register_method
        from drake_bench import RunConfig, run_methods
        from rich.console import Console
        register_method(Counter)
        run_methods([RunConfig(benchmark={manifest!r}, method="counter", data_dir={root!r}, out={str(tmp_path / "k")!r},
                               fast_adaptation=False)], console=Console(stderr=True))
    """)
    log = tmp_path / "parent.log"
    with open(log, "w") as sink:
        parent = subprocess.Popen(
            [sys.executable, "-c", code],
            env={**os.environ, "COUNTER_SLEEP": "0.5"},
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    proc = psutil.Process(parent.pid)
    try:
        deadline = time.time() + 180  # generous: a loaded CI machine starts processes slowly
        while time.time() < deadline and parent.poll() is None:
            # until the method's own worker has trained a round (run_methods worker -> method worker)
            if list((tmp_path / "k").glob("checkpoints/**/round-0001")):
                break
            time.sleep(0.1)
        assert parent.poll() is None, log.read_text()[-3000:]
        family = proc.children(recursive=True)
        assert len(family) >= 3, family  # the run's worker, the fork server, the method's worker
        parent.kill()
        parent.wait()
        gone, alive = psutil.wait_procs(family, timeout=10)
        assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE], alive
    finally:
        for p in proc.children(recursive=True) if proc.is_running() else []:
            p.kill()


def test_what_crosses_the_boundary_arrives_unchanged():
    """Every image and tensor of a batch round-trips exactly (images are encoded through short-lived
    tensors: a reused object id once mapped two different images to one)."""
    import numpy as np
    from PIL import Image

    from drake_bench.backends.worker_process import dumps, loads
    from drake_bench.benchmarks.sample import AnswerType, MethodSample

    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)) for _ in range(50)]
    batch = [
        [
            MethodSample(
                uid=f"u{i}",
                images=images[i : i + 3],
                question="q",
                choices=["a", "b"],
                answer="a",
                answer_type=AnswerType.MULTIPLE_CHOICE,
            )
            for i in range(0, 45, 3)
        ]
    ]
    shared = torch.arange(4.0)
    value = (
        batch,
        Message(tensors={"w": shared}),
        State(tensors={"w": shared}, metadata={"k": {"1": [1, 2]}}),
        {3: "x", "y": (1, 2)},
    )
    back = loads(dumps(value))
    for s, t in zip(batch[0], back[0][0]):
        assert [np.asarray(i).tolist() for i in s.images] == [np.asarray(i).tolist() for i in t.images]
        assert s.model_dump(exclude={"images"}) == t.model_dump(exclude={"images"})
    assert torch.equal(back[1].tensors["w"], shared) and torch.equal(back[2].tensors["w"], shared)
    assert isinstance(back[2], State) and back[2].metadata == {"k": {"1": [1, 2]}} and back[3] == {3: "x", "y": (1, 2)}


def test_a_users_script_without_a_main_guard_runs(toy, tmp_path):
    """The README's examples pasted into a file and run with `python file.py`: multiprocessing would run the file
    again inside the method's worker (and the forkserver) to rebuild __main__; the workers must not need it.
    The method, found by its entry point, is imported in its worker only: its module-level code never runs in
    the process that holds the answers."""
    manifest, root = toy
    script = tmp_path / "my_experiment.py"
    script.write_text(
        textwrap.dedent(f"""
        import sys
        from drake_bench import RunConfig, run

        result = run(RunConfig(benchmark={manifest!r}, data_dir={root!r}, method="majority-answer",
                               out={str(tmp_path / "out")!r}, rounds=2, scenario="static", fast_adaptation=False))
        print("ran", len(result.raw.scores), "scores")
        print("plugin imported here:", "drake_bench.plugins.examples.majority" in sys.modules)
    """)
    )
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "DRAKE_BENCH_NO_PROGRESS": "1"},
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert done.stdout.count("ran ") == 1  # the script ran once: not again inside a worker
    assert "plugin imported here: False" in done.stdout
