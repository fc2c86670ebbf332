"""The plugin contract: the protocol check at registration, guarded calls, and the shipped example method."""

from __future__ import annotations

import pytest
import torch
from minimal_method import Counter

from drake_bench import Message, Method, MethodMeta, PluginError, RunConfig, State, run
from drake_bench.plugins.examples.majority import MajorityAnswer
from drake_bench.plugins.protocol import protocol_problems
from drake_bench.plugins.registry import create_method, register_method
from drake_bench.results.result_file import check_result


def _cfg(toy, out, method, **kw):
    manifest, root = toy
    base = dict(
        benchmark=manifest,
        method=method,
        data_dir=root,
        out=str(out),
        seeds=[0],
        fast_adaptation_iters=2,
        fast_adaptation_eval_every=1,
    )
    base.update(kw)
    return RunConfig(**base)


# -- the protocol check -----------------------------------------------------------------------
def test_the_shipped_methods_and_the_example_satisfy_the_protocol():
    for name in ("sft", "fedit", "zero-shot", "majority-answer", "fedrpca", "fedprox", "task-arithmetic", "ties"):
        method = create_method(name)
        assert isinstance(method, Method) and protocol_problems(method) == []


def test_registration_refuses_a_class_that_is_not_a_method_and_says_what_it_lacks():
    class NoMeta:
        class Config:  # not pydantic
            pass

        def setup(self, federation): ...

    with pytest.raises(PluginError) as err:
        register_method(NoMeta, name="no-meta")
    text = str(err.value)
    assert "`meta` must be a drake_bench.MethodMeta" in text
    assert "`Config` must be a pydantic BaseModel" in text
    for call in ("init_client", "init_server", "client_update", "aggregate", "predict"):
        assert f"missing call `{call}`" in text
    assert "missing call `setup`" not in text


def test_half_of_an_optional_protocol_is_refused():
    class HalfReport(Counter):
        meta = MethodMeta(name="half-report", version="1.0")

        def model_identity(self, name):
            raise NotImplementedError

    assert any("ReportsModels" in p for p in protocol_problems(HalfReport))


def test_a_config_typo_is_refused_even_if_the_plugin_config_ignores_extras():
    with pytest.raises(PluginError, match=r"unknown field\(s\) \['own_wieght'\]"):
        create_method("majority-answer", {"own_wieght": 0.3})


def test_method_meta_is_typed():
    with pytest.raises(ValueError):
        MethodMeta(name="Has Spaces", version="1.0")
    with pytest.raises(ValueError):
        MethodMeta(name="ok", version="1.0", relative_compute=0)


# -- guarded calls: every call, failing, names method, seed, client, round -------------------------
class Failing(Counter):
    """Counter that raises in one chosen protocol call (config ``call``), at client 2 where a client is involved."""

    meta = MethodMeta(name="failing", version="1.0")

    class Config(Counter.Config):
        call: str = "none"

    def _maybe(self, call, client=None):
        if self.config.call == call and client in (None, 2):
            raise ValueError(f"planted fault in {call}")

    def setup(self, federation):
        self._maybe("setup")
        super().setup(federation)

    def init_client(self, ctx):
        self._maybe("init_client", ctx.client_id)
        return super().init_client(ctx)

    def init_server(self):
        self._maybe("init_server")
        return super().init_server()

    def client_update(self, ctx, state, message, batches):
        if ctx.round_idx < 10_000:
            self._maybe("client_update", ctx.client_id)
        else:  # fast adaptation runs on each architecture's first client
            self._maybe("adaptation client_update")
        return super().client_update(ctx, state, message, batches)

    def aggregate(self, round_idx, server_state, uploads):
        self._maybe("aggregate")
        return super().aggregate(round_idx, server_state, uploads)

    def predict(self, ctx, state, queries):
        self._maybe("predict", ctx.client_id)
        return super().predict(ctx, state, queries)

    def post_federation(self, federation, client_states, server_state):
        self._maybe("post_federation")
        return client_states

    def adaptation_state(self, architecture, client_states, server_state):
        self._maybe("adaptation_state")
        return super().adaptation_state(architecture, client_states, server_state)


register_method(Failing)


@pytest.mark.parametrize(
    "call, where",
    [
        ("setup", r"failed in setup \(seed 7\)"),
        ("init_client", r"failed in init_client \(seed 7, client 2\)"),
        ("init_server", r"failed in init_server \(seed 7\)"),
        ("client_update", r"failed in client_update \(seed 7, client 2, round 1\)"),
        ("aggregate", r"failed in aggregate \(seed 7, round 1\)"),
        ("predict", r"failed in predict \(seed 7, client 2, round 2\)"),
        ("post_federation", r"failed in post_federation \(seed 7\)"),
        ("adaptation_state", r"failed in fast adaptation init \(adaptation_state\) \(seed 7, client 1\)"),
        ("adaptation client_update", r"failed in fast adaptation client_update \(seed 7, client 1\)"),
    ],
)
def test_every_plugin_call_failing_names_method_seed_client_and_round(toy, tmp_path, call, where):
    cfg = _cfg(
        toy,
        tmp_path,
        "failing",
        seeds=[7],
        eval_every_rounds=2,
        method_config={"call": call},
        fast_adaptation_tasks=None,
    )
    with pytest.raises(PluginError, match=rf"method 'failing' {where}: ValueError: planted fault in {call}"):
        run(cfg)


class WrongShapes(Counter):
    meta = MethodMeta(name="wrong-shapes", version="1.0")

    class Config(Counter.Config):
        wrong: str = "none"

    def init_client(self, ctx):
        return {"counts": torch.zeros(2)} if self.config.wrong == "init_client" else super().init_client(ctx)

    def init_server(self):
        return State(metadata={"x": object()}) if self.config.wrong == "init_server" else super().init_server()

    def client_update(self, ctx, state, message, batches):
        upload, new = super().client_update(ctx, state, message, batches)
        if self.config.wrong == "int-keys":  # valid JSON, but JSON gives back "3", so a resume would differ
            new = State(new.tensors, {**new.metadata, "seen": {3: 1}})
        if self.config.wrong == "mixed-keys":  # also valid JSON; sorting its keys for the byte count raised TypeError
            upload = Message(upload.tensors, {"a": 1, 2: 3})
        return upload, new

    def predict(self, ctx, state, queries):
        out = super().predict(ctx, state, queries)
        return out[:-1] if self.config.wrong == "predict" else out


register_method(WrongShapes)


@pytest.mark.parametrize(
    "wrong, message",
    [
        ("init_client", r"init_client \(seed 0, client 1\): returned dict, expected a Message"),
        ("init_server", r"init_server \(seed 0\): metadata is not JSON-serialisable"),
        ("predict", r"predict \(seed 0, client 1, round \d+\): must return a list of \d+ strings, got \d+ items"),
        (
            "int-keys",
            r"client_update \(seed 0, client 1, round 1\): the new state: metadata\['seen'\] has the key 3 \(int\)",
        ),
        ("mixed-keys", r"client_update \(seed 0, client 1, round 1\): the upload: metadata has the key 2 \(int\)"),
    ],
)
def test_malformed_returns_are_located_plugin_errors(toy, tmp_path, wrong, message):
    with pytest.raises(PluginError, match=message):
        run(_cfg(toy, tmp_path, "wrong-shapes", fast_adaptation=False, method_config={"wrong": wrong}))


# -- the example method, end to end -----------------------------------------------------------------
def test_the_example_method_runs_shares_and_resumes_exactly(toy, tmp_path):
    clean = run(_cfg(toy, tmp_path / "a", "majority-answer"))
    assert clean.status == "complete" and check_result(clean) == []
    costs = clean.raw.costs
    assert all(c.uplink_bytes > 0 and c.downlink_bytes > 0 for c in costs)  # counts travel, and are measured
    again = run(_cfg(toy, tmp_path / "b", "majority-answer"))
    assert [s.score for s in again.raw.scores] == [s.score for s in clean.raw.scores]
    alone = run(_cfg(toy, tmp_path / "c", "majority-answer", method_config={"own_weight": 1.0}))
    assert alone.method.config == {"own_weight": 1.0}  # the config reaches the method and the result file


@pytest.mark.parametrize("own_weight, expected", [(1.0, "yes"), (0.0, "no"), (0.5, "no")])
def test_the_example_blends_own_and_federated_counts(own_weight, expected):
    from drake_bench.benchmarks.sample import AnswerType, MethodSample
    from drake_bench.plugins.protocol import ClientContext

    m = MajorityAnswer(MajorityAnswer.Config(own_weight=own_weight))
    state = State(metadata={"own": {"yes": 3, "no": 1}, "federation": {"no": 10}})
    query = MethodSample(
        uid="q", images=[], question="?", choices=["yes", "no"], answer="", answer_type=AnswerType.YES_NO
    )
    ctx = ClientContext(client_id=1, model_name="none", architecture="none", round_idx=0, seed=0)
    assert m.predict(ctx, state, [query]) == [expected]


def test_the_example_pools_answers_on_the_server():
    from drake_bench.plugins.protocol import Message

    m = MajorityAnswer()
    messages, server = m.aggregate(
        0,
        m.init_server(),
        {1: Message(metadata={"counts": {"yes": 3}}), 2: Message(metadata={"counts": {"yes": 1, "no": 5}})},
    )
    assert server.metadata["counts"] == {"yes": 4, "no": 5}
    assert all(msg.metadata["counts"] == {"yes": 4, "no": 5} for msg in messages.values())
