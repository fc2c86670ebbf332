"""Streams: ingestion counts, scenario schedules, determinism, leakage guard, clear errors."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from drake_bench import DataNotBuiltError, LeakageError, ScenarioError, UnknownNameError
from drake_bench.streams.schedule import ingestion_counts, split_rounds
from drake_bench.streams.stream import load_client_stream, load_federated_data


def test_ingestion_counts_spread_every_item_once():
    c = ingestion_counts(10, 4)
    assert c.tolist() == [3, 3, 2, 2] and c.sum() == 10
    assert ingestion_counts(3, 5).tolist() == [1, 1, 1, 0, 0]
    assert split_rounds(8, 4) == [2, 2, 2, 2] and split_rounds(5, 2) == [3, 2]


@pytest.mark.parametrize("scenario", ["static", "dynamic", "async", "async:1-3-1-3", "dirichlet:0.5"])
def test_every_train_item_ingested_exactly_once(toy_built, scenario):
    spec, root = toy_built
    fed = load_federated_data(spec, scenario, seed=0, data_dir=root)
    for c in fed.clients:
        sched = fed.schedule(c)
        tasks = fed.client_tasks(c)
        pairs = [(tasks[t], r) for t, r in sched.arrivals.tolist()]
        assert len(pairs) == len(set(pairs))
        assert sched.memory_size[-1] == len(pairs)
        if scenario != "dirichlet:0.5":
            expected = sum(fed.store.size(t, "train") for t in spec.client(c).tasks)
            assert len(pairs) == expected
        assert np.all(np.diff(sched.memory_size) >= 0)


def test_dirichlet_partition_covers_each_task_once(toy_built):
    spec, root = toy_built
    fed = load_federated_data(spec, "dirichlet:0.1", seed=3, data_dir=root)
    per_task = Counter()
    for c in fed.clients:
        tasks = fed.client_tasks(c)
        for t, r in fed.schedule(c).arrivals.tolist():
            per_task[(tasks[t], r)] += 1
    assert all(v == 1 for v in per_task.values())
    for t in spec.scenarios.dirichlet.tasks:
        assert sum(1 for (task, _r) in per_task if task == t) == fed.store.size(t, "train")
        test_rows = np.concatenate([fed.test_rows(t, owner=c) for c in fed.clients])
        assert sorted(test_rows.tolist()) == list(range(fed.store.size(t, "test")))
    # smaller alpha -> more skewed client shares
    skew = lambda a: (
        np.std([len(fed2.schedule(c).arrivals) for c in fed2.clients])
        if (fed2 := load_federated_data(spec, f"dirichlet:{a}", seed=3, data_dir=root))
        else 0
    )  # noqa: E731
    assert skew(0.1) > skew(100.0)


def test_dynamic_introduces_tasks_in_order(toy_built):
    spec, root = toy_built
    fed = load_federated_data(spec, "dynamic", seed=0, data_dir=root)
    c = 2
    tasks = spec.client(c).tasks
    # 8 rounds, 4 tasks: task k arrives during rounds 2k, 2k+1 and is fully ingested by the end of round 2k+1
    for k in range(4):
        assert fed.seen_tasks(c, 2 * k) == tasks[: k + 1]
    sched = fed.schedule(c)
    for k in range(4):
        end = sched.ingested_by_end_of(2 * k + 1)
        assert end == sum(fed.store.size(t, "train") for t in tasks[: k + 1])


def test_static_mixes_tasks_from_the_first_round(toy_built):
    spec, root = toy_built
    fed = load_federated_data(spec, "static", seed=0, data_dir=root)
    first = fed.schedule(1).arrivals[: fed.schedule(1).ingested_by_end_of(0)]
    assert len(set(first[:, 0].tolist())) >= 3


def test_async_patterns_give_rounds_per_task(toy_built):
    spec, root = toy_built
    fed = load_federated_data(spec, "async:1-3-1-3", seed=0, data_dir=root)
    tasks = spec.client(1).tasks
    assert fed.seen_tasks(1, 0) == tasks[:1]
    assert fed.seen_tasks(1, 3) == tasks[:2]
    assert fed.seen_tasks(1, 4) == tasks[:3]
    drawn = load_federated_data(spec, "async", seed=5, data_dir=root)
    for c in drawn.clients:
        assert list(drawn.scenario.client_pattern(spec, c, seed=5)) in spec.scenarios.asynchronous.patterns
    with pytest.raises(ScenarioError, match="summing to the rounds"):
        load_federated_data(spec, "async:1-1-1-1", seed=0, data_dir=root)


def _batches(stream):
    return [[s.uid for s in batch] for _r, rb in stream.rounds() for batch in rb]


def test_same_seed_same_batches_other_seed_differs(toy_built):
    spec, root = toy_built
    a = _batches(load_client_stream(spec, 1, "dynamic", seed=0, data_dir=root))
    b = _batches(load_client_stream(spec, 1, "dynamic", seed=0, data_dir=root))
    c = _batches(load_client_stream(spec, 1, "dynamic", seed=1, data_dir=root))
    assert a == b and a != c
    assert len(a) == spec.fl.rounds * spec.fl.local_steps
    # any round regenerates on its own (resume)
    s = load_client_stream(spec, 1, "dynamic", seed=0, data_dir=root)
    assert [[x.uid for x in batch] for batch in s.round(5)] == a[5 * spec.fl.local_steps : 6 * spec.fl.local_steps]


def test_batches_come_only_from_memory(toy_built):
    spec, root = toy_built
    fed = load_federated_data(spec, "dynamic", seed=0, data_dir=root)
    stream = fed.client_stream(1)
    tasks = spec.client(1).tasks
    for r, rb in stream.rounds():
        allowed = set(fed.seen_tasks(1, r))
        for batch in rb:
            for s in batch:
                task = next(t for t in tasks if s.question.startswith(f"q {t} "))
                assert task in allowed


def test_leakage_guard(toy_built):
    spec, root = toy_built
    stream = load_client_stream(spec, 1, "dynamic", seed=0, data_dir=root)
    for name in ("test", "unseen_tasks", "tasks", "future", "schedule", "store"):
        with pytest.raises(LeakageError):
            getattr(stream, name)
    sample = next(iter(stream.round(0)))[0]
    for name in ("task_id", "source", "id"):
        with pytest.raises(LeakageError, match="hidden from methods"):
            getattr(sample, name)
    assert "c1-t0" not in sample.uid


def test_clear_errors(toy_built, tmp_path):
    spec, root = toy_built
    with pytest.raises(UnknownNameError, match="unknown client 99"):
        load_client_stream(spec, 99, data_dir=root)
    with pytest.raises(UnknownNameError, match="unknown scenario"):
        load_client_stream(spec, 1, "sometimes", data_dir=root)
    with pytest.raises(ScenarioError, match="dirichlet"):
        load_client_stream(spec, 1, "dirichlet:-1", data_dir=root)
    with pytest.raises(DataNotBuiltError, match="no built data"):
        load_client_stream(spec, 1, data_dir=tmp_path / "nothing")
    with pytest.raises(UnknownNameError, match="unknown benchmark"):
        load_client_stream("no-such-benchmark", 1)
    # bad seeds and schedule overrides are named, and refused before data is even looked for
    with pytest.raises(ScenarioError, match="seed must be a non-negative integer, got -1"):
        load_client_stream(spec, 1, seed=-1, data_dir=tmp_path / "nothing")
    with pytest.raises(ScenarioError, match="seed must be a non-negative integer, got '0'"):
        load_client_stream(spec, 1, seed="0", data_dir=tmp_path / "nothing")
    with pytest.raises(ScenarioError, match="local_steps must be a positive integer"):
        load_client_stream(spec, 1, local_steps=0, data_dir=tmp_path / "nothing")


def test_test_views_and_others_subsample(toy_built):
    spec, root = toy_built
    fed = load_federated_data(spec, "dynamic", seed=0, data_dir=root)
    t = spec.client(2).tasks[0]
    full = fed.test_samples(t)
    assert len(full) == fed.store.size(t, "test") and all(s.task_id == t for s in full)
    sub = fed.test_samples(t, limit=spec.fl.others_subsample)
    assert len(sub) == spec.fl.others_subsample and {s.id for s in sub} <= {s.id for s in full}
    assert [s.id for s in sub] == [s.id for s in fed.test_samples(t, limit=spec.fl.others_subsample)]
    assert fed.unseen_tasks == ["unseen-0"]
