"""Per-client data streams and the evaluator's view of a federated benchmark.

Two views over the same built data, in the Avalanche spirit of streams that hide the future:

* :class:`ClientStream` is what a method (or a researcher's own training loop) gets from
  :func:`load_client_stream`: round by round, batches drawn from the client's episodic
  memory. It cannot reach future items, test splits, unseen tasks or task identities; asking
  raises :class:`~drake_bench.errors.LeakageError`.
* :class:`FederatedData` is the evaluator's view: every client's schedule, the tasks seen so
  far, test items for Self / Others / unseen tasks.

Nothing is copied per client: each task split is one memory-mapped Arrow table shared by all
clients, and streams hold only (task, row) indices. Everything is a pure function of
(manifest, scenario, seed): same seed, same batches, bit for bit, and any round can be
regenerated on its own (which is what makes resuming a killed run exact).
"""

from __future__ import annotations

import gc
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from drake_bench.benchmarks.manifest import load_benchmark
from drake_bench.benchmarks.sample import MethodSample, Sample
from drake_bench.benchmarks.spec import BenchmarkSpec
from drake_bench.benchmarks.store import SCORED_SPLITS, BuiltBenchmark, built_root, shard_path
from drake_bench.errors import DataNotBuiltError, LeakageError, ScenarioError
from drake_bench.streams.scenarios import Scenario, parse_scenario
from drake_bench.streams.schedule import IngestionSchedule

# RNG salts: the last entry of each np.random.default_rng([...]) seed, so that streams drawn from
# the same seed stay independent. The values are frozen: changing one changes every published
# stream, so results would no longer reproduce. (Scenario layouts salt theirs in scenarios.py.)
SALT_TASK_ORDER = 0xA  # per-client permutation of a task's train rows (their arrival order)
SALT_ROUND_BATCHES = 0xB  # per-client, per-round draw of each batch from episodic memory
SALT_UNSEEN_TRAIN = 0x7A  # order (and subsample) of an unseen task's train items for fast adaptation
SALT_TEST_SUBSAMPLE = 0x7E  # seeded subsample of a task's test rows (Self / Others limits)


def _key(text: str) -> int:
    """Stable small integer from a string, for seeding per-task generators (hash() is salted)."""
    return zlib.crc32(text.encode())


# --------------------------------------------------------------------------- data resolution
def open_built(
    spec: BenchmarkSpec,
    data_dir: str | Path | None = None,
    revision: str | None = None,
    tasks: Sequence[str] | None = None,
    repo_id: str | None = None,
) -> BuiltBenchmark:
    """Locate the built data of ``spec``: an explicit folder, a Hub revision, the local build, or an embedded build."""
    if data_dir is not None:
        store = BuiltBenchmark.open(Path(data_dir), spec.name)
    elif revision is not None:
        from drake_bench.benchmarks.hub import fetch_benchmark

        store = BuiltBenchmark.open(
            fetch_benchmark(spec, revision=revision, tasks=list(tasks) if tasks else None, repo_id=repo_id), spec.name
        )
    else:
        root = built_root(spec.name)
        if spec.embedded:
            from drake_bench.benchmarks.synth import ensure_built

            root = ensure_built(spec)  # builds when missing or stale (other manifest, scale or generator version)
        hint = (
            f"Build it with `drake-bench build {spec.name} --source-dir DIR`"
            + (f" or download it with `drake-bench download {spec.name} --revision REV`" if spec.hub_repo else "")
            + ", or pass data_dir=... to a built copy."
        )
        store = BuiltBenchmark.open(root, spec.name, hint=hint)
    recorded = store.info.get("manifest_hash")
    if recorded and spec.content_hash and recorded != spec.content_hash:
        raise DataNotBuiltError(
            f"data at {store.root} was built from manifest {recorded}, but benchmark {spec.name!r} "
            f"is now {spec.content_hash}; rebuild or download the matching revision"
        )
    return store


# --------------------------------------------------------------------------- method view
@dataclass(frozen=True)
class StreamConfig:
    rounds: int
    local_steps: int
    batch_size: int


_FORBIDDEN = {
    "test": "test splits",
    "test_samples": "test splits",
    "tests": "test splits",
    "unseen": "unseen tasks",
    "unseen_tasks": "unseen tasks",
    "tasks": "task identities",
    "task_ids": "task identities",
    "task_id": "task identities",
    "future": "future samples",
    "schedule": "future samples (the ingestion schedule)",
    "store": "the raw data store",
    "dataset": "the raw data store",
    "data": "the raw data store",
}


class ClientTrainView:
    """Everything one client's training stream needs, and nothing more.

    It holds the client's own train rows only (copied out of the shared tables, so other clients'
    rows of a Dirichlet-split task are not in memory either), the layout of its tasks over rounds,
    and no handle on the built benchmark: from a stream there is no object path to a test split,
    another client or the evaluator's :class:`FederatedData`.
    """

    __slots__ = ("client", "seed", "scenario_tag", "benchmark", "rounds", "_segments", "_tables", "_tasks")

    def __init__(self, fed: "FederatedData", client: int):
        self.client, self.seed, self.scenario_tag = client, fed.seed, fed.scenario.tag()
        self.benchmark, self.rounds = fed.spec.name, fed.config.rounds
        self._tasks = fed.client_tasks(client)
        per_task = [fed._task_rows(client, i, t) for i, t in enumerate(self._tasks)]
        self._segments = fed.scenario.segments(fed, client, per_task)
        self._tables: list[tuple[dict[int, int], Any, Path]] = []
        for i, task in enumerate(self._tasks):
            rows = np.unique(per_task[i][:, 1]) if len(per_task[i]) else np.zeros(0, dtype=np.int64)
            self._tables.append(
                (
                    {int(r): k for k, r in enumerate(rows)},
                    _copy_rows(fed.store.table(task, "train"), rows),
                    shard_path(fed.store.root, task, "train"),
                )
            )

    def schedule(self, local_steps: int) -> IngestionSchedule:
        return IngestionSchedule.from_segments(self._segments, self.rounds, local_steps)

    def round_refs(self, round_idx: int, local_steps: int, batch_size: int) -> list[list[tuple[int, int]]]:
        """The (task position, row) references of every batch of a round, drawn as
        :meth:`FederatedData.round_samples` draws them (nothing decoded yet)."""
        sched = self.schedule(local_steps)
        rng = np.random.default_rng([self.seed, self.client, round_idx, SALT_ROUND_BATCHES])
        return [
            [(int(t), int(r)) for t, r in sched.arrivals[positions]]
            for positions in sched.batch_indices(round_idx, batch_size, rng)
        ]

    def decode(self, refs: list[tuple[int, int]]) -> list[Sample]:
        """The samples of one batch's references, in order."""
        return _fetch_rows(refs, lambda t, rows: _decode_subset(self._tables[t], rows))

    def round_samples(self, round_idx: int, local_steps: int, batch_size: int) -> Iterator[list[Sample]]:
        """The same draw as :meth:`FederatedData.round_samples`, from this client's own rows."""
        for refs in self.round_refs(round_idx, local_steps, batch_size):
            yield self.decode(refs)


def _copy_rows(dataset: Any, rows: np.ndarray) -> Any:
    """An in-memory ``datasets.Dataset`` of only ``rows`` (a copy: it keeps no reference to the shared table)."""
    import pyarrow as pa
    from datasets import Dataset
    from datasets.table import InMemoryTable

    taken = dataset.data.table.take(pa.array(rows, type=pa.int64()))
    return Dataset(
        InMemoryTable(pa.Table.from_batches(taken.to_batches(), schema=taken.schema)), info=dataset.info.copy()
    )


def _decode_subset(table: tuple[dict[int, int], Any, Path], rows: list[int]) -> list[Sample]:
    from drake_bench.benchmarks.store import decode_rows

    index, data, path = table
    return decode_rows(data, [index[r] for r in rows], path)


def _fetch_rows(refs: list[tuple[Any, int]], read) -> list[Sample]:  # noqa: ANN001
    """Decode (task, row) references grouping by task, returned in the references' order."""
    by_task: dict[Any, list[int]] = {}
    for task, row in refs:
        by_task.setdefault(task, []).append(row)
    fetched = {t: dict(zip(rows, read(t, rows))) for t, rows in by_task.items()}
    return [fetched[t][r] for t, r in refs]


class RoundBatches(Sequence[list[MethodSample]]):
    """The batches of one round: a read-only sequence of ``len()`` = local steps batches, each decoded when read.

    ``batches[k]`` is local step ``k``'s batch (negative indices count from the end; out of range raises
    IndexError), ``batches[i:j]`` a list of batches, and iterating gives the same batches in order, bit for bit:
    which rows make up each batch is drawn once per round (seeded by seed, client and round), so reading one
    step alone, out of order or twice gives the same items. A batch is a list of at most ``batch_size``
    :class:`~drake_bench.benchmarks.sample.MethodSample` (fewer when memory holds fewer items; empty before the client's
    first item arrives)."""

    __slots__ = ("_view", "round_idx", "_steps", "_batch_size", "_refs")

    def __init__(self, view: ClientTrainView, round_idx: int, local_steps: int, batch_size: int):
        self._view, self.round_idx, self._steps, self._batch_size = view, round_idx, local_steps, batch_size
        self._refs: list[list[tuple[int, int]]] | None = None

    def _round_refs(self) -> list[list[tuple[int, int]]]:
        if self._refs is None:
            self._refs = self._view.round_refs(self.round_idx, self._steps, self._batch_size)
        return self._refs

    def _batch(self, step: int) -> list[MethodSample]:
        return [s.for_method() for s in self._view.decode(self._round_refs()[step])]

    def __len__(self) -> int:
        return self._steps

    def __getitem__(self, index: int | slice) -> Any:  # list[MethodSample], or a list of them for a slice
        if isinstance(index, slice):
            return [self._batch(k) for k in range(*index.indices(self._steps))]
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
            raise TypeError(f"RoundBatches indices must be ints or slices, got {type(index).__name__}")
        k = int(index) + self._steps if index < 0 else int(index)
        if not 0 <= k < self._steps:
            raise IndexError(
                f"batch {int(index)} outside a round of {self._steps} local steps "
                f"(client {self._view.client}, round {self.round_idx})"
            )
        return self._batch(k)

    def __iter__(self) -> Iterator[list[MethodSample]]:
        for k in range(self._steps):
            yield self._batch(k)

    def __repr__(self) -> str:
        return f"RoundBatches(client={self._view.client}, round={self.round_idx}, steps={len(self)})"


class ClientStream:
    """One client's training stream, for a researcher's own training code (rounds of memory-replay batches).

    It holds a :class:`ClientTrainView`: this client's train rows and their layout over rounds. Test
    splits, unseen tasks, other clients and task identities are not in it; asking for them raises
    :class:`~drake_bench.errors.LeakageError` with an explanation.
    """

    __slots__ = ("_view", "client", "scenario", "seed", "num_rounds", "local_steps", "batch_size")

    def __init__(self, view: ClientTrainView, cfg: StreamConfig):
        object.__setattr__(self, "_view", view)
        self.client, self.scenario, self.seed = view.client, view.scenario_tag, view.seed
        self.num_rounds, self.local_steps, self.batch_size = cfg.rounds, cfg.local_steps, cfg.batch_size

    def __getattr__(self, name: str) -> Any:
        if name in _FORBIDDEN:
            raise LeakageError(
                f"ClientStream.{name}: {_FORBIDDEN[name]} are hidden from methods and training code "
                "(only the evaluator's FederatedData can reach them)"
            )
        raise AttributeError(f"ClientStream has no attribute {name!r}")

    def round(self, round_idx: int, local_steps: int | None = None, batch_size: int | None = None) -> RoundBatches:
        """Batches of round ``round_idx`` (0-based). Independent of earlier rounds: resumable anywhere.

        Any round can be asked for, in any order: the stream is the schedule of your own training code, and round
        ``r`` holds only what the scenario has made available by round ``r``. Round by round is the evaluator's
        rule for plugins, which are handed one round at a time."""
        if isinstance(round_idx, bool) or not isinstance(round_idx, (int, np.integer)):
            raise TypeError(f"round_idx must be an int, got {round_idx!r}")
        if not 0 <= round_idx < self.num_rounds:
            raise IndexError(f"round {round_idx} outside 0..{self.num_rounds - 1} for client {self.client}")
        return RoundBatches(self._view, int(round_idx), local_steps or self.local_steps, batch_size or self.batch_size)

    def rounds(
        self, local_steps: int | None = None, batch_size: int | None = None, start: int = 0
    ) -> Iterator[tuple[int, RoundBatches]]:
        """Yield ``(round_idx, batches)`` for every round from ``start``."""
        for r in range(start, self.num_rounds):
            yield r, self.round(r, local_steps, batch_size)

    def __repr__(self) -> str:
        return (
            f"ClientStream(benchmark={self._view.benchmark!r}, client={self.client}, scenario={self.scenario!r}, "
            f"seed={self.seed}, rounds={self.num_rounds}, local_steps={self.local_steps}, batch_size={self.batch_size})"
        )

    def __reduce__(self):  # noqa: ANN204 - a stream is rebuilt from its arguments, never pickled with its data
        raise TypeError("a ClientStream cannot be pickled; call load_client_stream(...) again in the other process")


# --------------------------------------------------------------------------- evaluator view
def check_scored_split(spec: BenchmarkSpec, split: str) -> None:
    """Refuse a scored split the benchmark version does not hold, naming the version and what to do."""
    if split not in SCORED_SPLITS:
        raise ScenarioError(f"scored split must be one of {SCORED_SPLITS}, got {split!r}")
    if split == "validation" and spec.subsampling.validation_ratio <= 0:
        raise ScenarioError(
            f"{spec.name} {spec.version} has no validation split (its manifest's subsampling.validation_ratio is 0); "
            "select hyperparameters on a version that holds one (docs/data.md#the-validation-split), never on its "
            "test split"
        )


class FederatedData:
    """The evaluator's full view of a benchmark under one scenario and seed.

    ``scored_split`` is the split Self, Others and unseen-task adaptation are scored on: ``"test"`` for every run a
    board takes, ``"validation"`` for a tuning run (:mod:`drake_bench.tuning`). Training streams never read either."""

    def __init__(
        self,
        spec: BenchmarkSpec,
        scenario: Scenario,
        seed: int,
        store: BuiltBenchmark,
        rounds: int | None = None,
        local_steps: int | None = None,
        batch_size: int | None = None,
        scored_split: str = "test",
    ) -> None:
        check_scored_split(spec, scored_split)
        self.spec, self.scenario, self.seed, self.store = spec, scenario, seed, store
        self.scored_split = scored_split
        self.config = StreamConfig(
            rounds or spec.fl.rounds, local_steps or spec.fl.local_steps, batch_size or spec.fl.batch_size
        )
        self._schedules: dict[tuple[int, int], IngestionSchedule] = {}
        self.scenario.check(self)  # a misfitting scenario fails here, before any stream is built
        self.scenario_state = self.scenario.prepare(self)  # e.g. Dirichlet's partition, shared by all clients

    # -- structure ------------------------------------------------------------
    @property
    def clients(self) -> list[int]:
        return self.spec.client_ids

    @property
    def unseen_tasks(self) -> list[str]:
        return list(self.spec.unseen_tasks)

    def client_tasks(self, client: int) -> list[str]:
        """The tasks a client's stream draws from, in introduction order."""
        self.spec.client(client)
        return self.scenario.client_tasks(self, client)

    # -- schedules -------------------------------------------------------------
    def schedule(self, client: int, local_steps: int | None = None) -> IngestionSchedule:
        """The client's arrival order and memory sizes, built once per (client, local_steps) since every round reads it."""
        steps = local_steps or self.config.local_steps
        key = (client, steps)
        if key not in self._schedules:
            self._schedules[key] = self._build_schedule(client, steps)
        return self._schedules[key]

    def _task_rows(self, client: int, task_pos: int, task_id: str) -> np.ndarray:
        """The client's rows of one task as (task_pos, row) pairs, in a seeded per-client arrival order."""
        rows = self.scenario.train_rows(self, client, task_id)
        rows = np.random.default_rng([self.seed, client, _key(task_id), SALT_TASK_ORDER]).permutation(rows)
        return np.stack([np.full(len(rows), task_pos), rows], axis=1).astype(np.int64)

    def _build_schedule(self, client: int, local_steps: int) -> IngestionSchedule:
        per_task = [self._task_rows(client, i, t) for i, t in enumerate(self.client_tasks(client))]
        segments = self.scenario.segments(self, client, per_task)
        return IngestionSchedule.from_segments(segments, self.config.rounds, local_steps)

    def seen_tasks(self, client: int, after_round: int) -> list[str]:
        """Tasks of ``client`` with at least one item ingested by the end of round ``after_round`` (0-based)."""
        tasks = self.client_tasks(client)
        seen = self.schedule(client).seen_tasks(after_round)
        return [t for i, t in enumerate(tasks) if i in seen]

    # -- training data -----------------------------------------------------------
    def client_stream(self, client: int) -> ClientStream:
        """One client's training stream over its own :class:`ClientTrainView` (no handle on this object)."""
        client = _client_id(self.spec, client)
        self.schedule(client)  # fail early on a scenario that does not fit
        return ClientStream(ClientTrainView(self, client), self.config)

    def round_samples(
        self, client: int, round_idx: int, local_steps: int | None = None, batch_size: int | None = None
    ) -> Iterator[list[Sample]]:
        """The batches of one client and round as full samples (the evaluator's side of a stream)."""
        sched = self.schedule(client, local_steps or self.config.local_steps)
        tasks = self.client_tasks(client)
        rng = np.random.default_rng([self.seed, client, round_idx, SALT_ROUND_BATCHES])
        for positions in sched.batch_indices(round_idx, batch_size or self.config.batch_size, rng):
            refs = [(tasks[int(t)], int(r)) for t, r in sched.arrivals[positions]]
            yield _fetch_rows(refs, lambda t, rows: self.store.samples(t, "train", rows))

    def round_batches(
        self, client: int, round_idx: int, local_steps: int | None = None, uid_key: bytes | None = None
    ) -> list[list[MethodSample]]:
        """What a method receives for one client and round: decoded here, ids keyed with the run's secret."""
        return [[s.for_method(uid_key) for s in batch] for batch in self.round_samples(client, round_idx, local_steps)]

    def train_samples(self, task_id: str, limit: int | None = None) -> list[Sample]:
        """A task's train items (used by the evaluator for fast adaptation on unseen tasks)."""
        n = self.store.size(task_id, "train")
        rows = np.random.default_rng([self.seed, _key(task_id), SALT_UNSEEN_TRAIN]).permutation(n)[: limit or n]
        return self.store.samples(task_id, "train", sorted(rows.tolist()))

    # -- test data ----------------------------------------------------------------
    def test_rows(self, task_id: str, owner: int | None = None, limit: int | None = None) -> np.ndarray:
        """Rows of a task's scored split (``owner``'s share when the scenario splits tasks, as Dirichlet does),
        optionally a seeded subsample."""
        rows = self.scenario.test_rows(self, task_id, owner)
        if limit is not None and len(rows) > limit:
            rng = np.random.default_rng([self.seed, _key(task_id), owner or 0, SALT_TEST_SUBSAMPLE])
            rows = np.sort(rng.choice(rows, size=limit, replace=False))
        return rows

    def test_samples(self, task_id: str, owner: int | None = None, limit: int | None = None) -> list[Sample]:
        """The decoded items of :meth:`test_rows`."""
        return self.store.samples(task_id, self.scored_split, self.test_rows(task_id, owner, limit).tolist())


# --------------------------------------------------------------------------- public entry points
def _check_schedule(seed: Any, **counts: Any) -> None:
    """Refuse a bad seed or schedule override by name, before any data is built or fetched."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ScenarioError(f"seed must be a non-negative integer, got {seed!r}")
    for name, value in counts.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1):
            raise ScenarioError(f"{name} must be a positive integer or None (the manifest's), got {value!r}")


def load_federated_data(
    benchmark: str | BenchmarkSpec,
    scenario: str | Scenario | dict | None = None,
    seed: int = 0,
    data_dir: str | Path | None = None,
    revision: str | None = None,
    repo_id: str | None = None,
    clients: Sequence[int] | None = None,
    rounds: int | None = None,
    local_steps: int | None = None,
    batch_size: int | None = None,
    scored_split: str = "test",
) -> FederatedData:
    """The evaluator's view (all clients). ``clients`` limits what a Hub download fetches; ``scored_split``: see
    :class:`FederatedData`."""
    spec = load_benchmark(benchmark)
    sc = parse_scenario(scenario if scenario is not None else spec.scenarios.default)
    _check_schedule(seed=seed, rounds=rounds, local_steps=local_steps, batch_size=batch_size)
    check_scored_split(spec, scored_split)  # before open_built, which may build or download the benchmark
    needed = None
    if revision is not None and clients is not None:
        needed = sc.needed_tasks(spec, clients)
    store = open_built(spec, data_dir=data_dir, revision=revision, tasks=needed, repo_id=repo_id)
    return FederatedData(
        spec, sc, seed, store, rounds=rounds, local_steps=local_steps, batch_size=batch_size, scored_split=scored_split
    )


def load_client_stream(
    benchmark: str | BenchmarkSpec,
    client: int,
    scenario: str | Scenario | dict | None = None,
    seed: int = 0,
    data_dir: str | Path | None = None,
    revision: str | None = None,
    repo_id: str | None = None,
    rounds: int | None = None,
    local_steps: int | None = None,
    batch_size: int | None = None,
) -> ClientStream:
    """One client's training stream: ``for r, batches in stream.rounds(): for batch in batches: ...``.

    ``scenario``: "static", "dynamic" (default from the manifest), "async", "async:3-7-3-7",
    "dirichlet:0.5", or a Scenario object. ``revision`` fetches a pinned Hub revision (only
    this client's tasks) from the manifest's ``hub_repo`` or ``repo_id``. Defaults for rounds / local steps / batch size come from the manifest.
    """
    spec = load_benchmark(benchmark)
    client = _client_id(spec, client)
    fed = load_federated_data(
        spec,
        scenario,
        seed,
        data_dir=data_dir,
        revision=revision,
        repo_id=repo_id,
        clients=[client],
        rounds=rounds,
        local_steps=local_steps,
        batch_size=batch_size,
    )
    stream = fed.client_stream(client)
    del fed  # the stream keeps only its own view; nothing else of the benchmark stays reachable
    gc.collect()
    return stream


def _client_id(spec: BenchmarkSpec, client: Any) -> int:
    """A client id is an int of the benchmark (True or 3.0 are refused, not read as 1 or 3)."""
    if isinstance(client, bool) or not isinstance(client, (int, np.integer)):
        raise ScenarioError(f"client must be an int client id of {spec.name!r} ({spec.client_ids}), got {client!r}")
    spec.client(int(client))
    return int(client)
