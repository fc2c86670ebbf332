"""Scenario classes on their own: parsing, layout over rounds, client tasks, test rows, and misfit errors."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from drake_bench import ScenarioError, UnknownNameError
from drake_bench.benchmarks.store import BuiltBenchmark
from drake_bench.streams.scenarios import (
    KINDS,
    Asynchronous,
    BaseScenario,
    Dirichlet,
    DirichletSplit,
    Dynamic,
    Static,
    parse_scenario,
)
from drake_bench.streams.stream import FederatedData


def _fed(toy_built, scenario, seed: int = 0, spec=None, **overrides) -> FederatedData:
    toy, root = toy_built
    spec = spec or toy
    return FederatedData(spec, parse_scenario(scenario), seed, BuiltBenchmark.open(root, spec.name), **overrides)


def _items(task_pos: int, n: int) -> np.ndarray:
    return np.stack([np.full(n, task_pos), np.arange(n)], axis=1).astype(np.int64)


def _without(spec, field: str):
    """The spec with one scenario default removed (a benchmark that does not define it)."""
    return spec.model_copy(update={"scenarios": spec.scenarios.model_copy(update={field: None})})


# ---------------------------------------------------------------------------- parsing
def test_parse_strings_dicts_and_tags():
    cases = {
        "static": (Static(), "static"),
        "Dynamic": (Dynamic(), "dynamic"),
        "async": (Asynchronous(), "async"),
        "asynchronous:3-7-3-7": (Asynchronous(pattern=(3, 7, 3, 7)), "async-3-7-3-7"),
        "async:1,3,1,3": (Asynchronous(pattern=(1, 3, 1, 3)), "async-1-3-1-3"),
        "dirichlet:0.5": (Dirichlet(alpha=0.5), "dirichlet-0.5"),
    }
    for text, (expected, tag) in cases.items():
        got = parse_scenario(text)
        assert got == expected and type(got) is type(expected) and got.tag() == tag
    assert parse_scenario({"kind": "dirichlet", "alpha": 1}) == Dirichlet(alpha=1.0)
    sc = Static()
    assert parse_scenario(sc) is sc
    assert sorted(KINDS) == sorted(c.model_fields["kind"].default for c in (Static, Dynamic, Asynchronous, Dirichlet))


@pytest.mark.parametrize(
    "value, error, match",
    [
        ("sometimes", UnknownNameError, "unknown scenario"),
        ("static:1", UnknownNameError, "unknown scenario"),
        ("async:3-x", ScenarioError, "async:3-7-3-7"),
        ("dirichlet", ScenarioError, "positive alpha"),
        ("dirichlet:0", ScenarioError, "positive alpha"),
        ({"kind": "dirichlet", "alpha": -1}, ScenarioError, "invalid scenario"),
        ({"kind": "static", "colour": 1}, ScenarioError, "invalid scenario"),
        (3, ScenarioError, "got int"),
    ],
)
def test_parse_refuses_with_clear_messages(value, error, match):
    with pytest.raises(error, match=match):
        parse_scenario(value)


def test_scenarios_are_frozen_and_the_base_is_abstract():
    with pytest.raises(ValidationError):
        Dirichlet(alpha=0.5).alpha = 2.0  # type: ignore[misc]
    with pytest.raises(TypeError, match="abstract"):
        BaseScenario()  # type: ignore[abstract]


# ---------------------------------------------------------------------------- Static
def test_static_mixes_all_tasks_over_every_round(toy_built):
    fed = _fed(toy_built, "static", seed=4)
    sc = fed.scenario
    assert sc.client_tasks(fed, 2) == fed.spec.client(2).tasks
    assert sc.train_rows(fed, 2, "c2-t1").tolist() == list(range(fed.store.size("c2-t1", "train")))
    assert sc.test_rows(fed, "c2-t1", owner=3).tolist() == list(range(fed.store.size("c2-t1", "test")))
    per_task = [_items(i, 6) for i in range(3)]
    (seg,) = sc.segments(fed, 2, per_task)
    assert (seg.first_round, seg.last_round) == (0, fed.config.rounds)
    assert sorted(map(tuple, seg.items.tolist())) == sorted(map(tuple, np.concatenate(per_task).tolist()))
    assert set(seg.items[:6, 0].tolist()) != {0}  # shuffled across tasks, not task by task
    again = sc.segments(fed, 2, per_task)[0].items
    other_client = sc.segments(fed, 3, per_task)[0].items
    assert np.array_equal(seg.items, again) and not np.array_equal(seg.items, other_client)
    assert sc.segments(fed, 2, [])[0].items.shape == (0, 2)


# ---------------------------------------------------------------------------- Dynamic
def test_dynamic_gives_tasks_consecutive_equal_shares(toy_built):
    fed = _fed(toy_built, "dynamic", rounds=7)
    per_task = [_items(i, 5) for i in range(3)]
    segs = fed.scenario.segments(fed, 1, per_task)
    assert [(s.first_round, s.last_round) for s in segs] == [(0, 3), (3, 5), (5, 7)]
    assert all(np.array_equal(s.items, items) for s, items in zip(segs, per_task))  # order kept within a task


def test_dynamic_refuses_more_tasks_than_rounds(toy_built):
    with pytest.raises(ScenarioError, match=r"client 1 has more tasks than rounds \(3\)"):
        _fed(toy_built, "dynamic", rounds=3)


# ---------------------------------------------------------------------------- Asynchronous
def test_async_pattern_precedence_and_seeded_draw(toy_built):
    spec, _ = toy_built
    explicit = Asynchronous(patterns={1: (4, 2, 1, 1)}, pattern=(2, 2, 2, 2))
    assert explicit.client_pattern(spec, 1, seed=0) == (4, 2, 1, 1)
    assert explicit.client_pattern(spec, 2, seed=0) == (2, 2, 2, 2)
    drawn = Asynchronous()
    allowed = {tuple(p) for p in spec.scenarios.asynchronous.patterns}
    draws = {(seed, c): drawn.client_pattern(spec, c, seed) for seed in range(6) for c in spec.client_ids}
    assert set(draws.values()) <= allowed and len(set(draws.values())) > 1  # seeded, yet not all alike
    assert all(drawn.client_pattern(spec, c, seed) == p for (seed, c), p in draws.items())
    with pytest.raises(ScenarioError, match="defines no async patterns; pass async:3-7-3-7"):
        drawn.client_pattern(_without(spec, "asynchronous"), 1, seed=0)


def test_async_layout_follows_the_pattern(toy_built):
    fed = _fed(toy_built, "async:1-3-1-3")
    segs = fed.scenario.segments(fed, 2, [_items(i, 4) for i in range(4)])
    assert [(s.first_round, s.last_round) for s in segs] == [(0, 1), (1, 4), (4, 5), (5, 8)]
    assert [int(s.items[0, 0]) for s in segs] == [0, 1, 2, 3]


@pytest.mark.parametrize(
    "scenario, match",
    [
        ("async:1-1-1-1", r"async pattern \[1, 1, 1, 1\] for client 1 .* summing to the rounds \(8\)"),
        ("async:4-4", r"must have one entry per task \(4\)"),
    ],
)
def test_async_refuses_patterns_that_do_not_fit(toy_built, scenario, match):
    with pytest.raises(ScenarioError, match=match):
        _fed(toy_built, scenario)


# ---------------------------------------------------------------------------- Dirichlet
def test_dirichlet_split_is_shared_and_computed_once(toy_built, monkeypatch):
    from drake_bench.streams import scenarios

    calls = []
    original = scenarios.DirichletPartitioner.proportions

    def counting(self, sizes):
        calls.append(sizes)
        return original(self, sizes)

    monkeypatch.setattr(scenarios.DirichletPartitioner, "proportions", counting)
    fed = _fed(toy_built, "dirichlet:0.3", seed=2)
    assert isinstance(fed.scenario_state, DirichletSplit) and calls == []  # drawn lazily
    for c in fed.clients:
        fed.schedule(c)
        for t in fed.client_tasks(c):
            fed.test_rows(t, owner=c)
    assert len(calls) == 1


def test_dirichlet_shares_partition_train_and_test(toy_built):
    fed = _fed(toy_built, "dirichlet:0.5", seed=1)
    sc, merged = fed.scenario, list(fed.spec.scenarios.dirichlet.tasks)
    assert sc.needed_tasks(fed.spec, [1]) == merged  # a single client may hold a share of any merged task
    for c in fed.clients:
        tasks = sc.client_tasks(fed, c)
        assert tasks and set(tasks) <= set(merged)
        assert sum(len(sc.train_rows(fed, c, t)) for t in tasks) >= fed.config.batch_size
    for t in merged:
        for split, rows_of in (
            ("train", lambda c: sc.train_rows(fed, c, t)),
            ("test", lambda c: sc.test_rows(fed, t, c)),
        ):
            rows = np.concatenate([rows_of(c) for c in fed.clients])
            assert sorted(rows.tolist()) == list(range(fed.store.size(t, split))), (t, split)
        assert sc.test_rows(fed, t, None).tolist() == list(range(fed.store.size(t, "test")))
    (seg,) = sc.segments(fed, 1, [_items(0, 3), _items(1, 3)])
    assert (seg.first_round, seg.last_round) == (0, fed.config.rounds) and len(seg.items) == 6


def test_dirichlet_needs_a_merged_task_set(toy_built):
    spec, _ = toy_built
    bare = _without(spec, "dirichlet")
    with pytest.raises(ScenarioError, match="defines no Dirichlet task set"):
        _fed(toy_built, "dirichlet:0.5", spec=bare)
    with pytest.raises(ScenarioError, match="defines no Dirichlet task set"):
        Dirichlet(alpha=0.5).needed_tasks(bare, [1])


def test_own_task_scenarios_need_only_their_clients_tasks(toy_built):
    spec, _ = toy_built
    for sc in (Static(), Dynamic(), Asynchronous()):
        assert sc.needed_tasks(spec, [1, 3]) == spec.client(1).tasks + spec.client(3).tasks
