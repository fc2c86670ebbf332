"""PFL scenarios: which items a client trains on and how they are laid out over the federated rounds.

* ``static``: all of a client's tasks mixed into one i.i.d. stream (PFL-Static).
* ``dynamic``: tasks introduced in manifest order, an equal share of rounds each (PFL-Dynamic).
* ``async``: per-client round patterns such as (3, 7, 3, 7): rounds given to task 1..4.
* ``dirichlet``: the manifest's merged tasks split over clients with Dir(alpha) proportions (static).

Strings parse too: ``"static"``, ``"dynamic"``, ``"async"``, ``"async:3-7-3-7"``, ``"dirichlet:0.5"``.

Each scenario is a small frozen object that carries its own behaviour (in the spirit of Flower
Datasets' ``Partitioner``): :class:`~drake_bench.streams.stream.FederatedData` asks it which tasks a client
has, which rows of them, and how they spread over rounds, and never switches on the scenario kind.
A new scenario is one new class here plus an entry in :data:`Scenario`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Annotated, Literal, Union

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from drake_bench.benchmarks.spec import BenchmarkSpec
from drake_bench.errors import ScenarioError, UnknownNameError
from drake_bench.streams.partition import DirichletPartitioner
from drake_bench.streams.schedule import Segment, split_rounds

if TYPE_CHECKING:
    from drake_bench.streams.stream import FederatedData

# RNG salts: the last entry of each np.random.default_rng([...]) seed, so that streams drawn from
# the same (seed, client) stay independent. The values are frozen: changing one changes every
# published stream, so results would no longer reproduce.
SALT_MIXED_POOL = 0x5  # per-client shuffle of the mixed pool of all its tasks (Static, Dirichlet)
SALT_ASYNC_PATTERN = 0xA5  # a client's uniform draw among the manifest's async patterns


class BaseScenario(BaseModel, ABC):
    """What every scenario answers. The defaults fit scenarios where each client keeps its manifest tasks whole.

    Methods receive the evaluator's :class:`FederatedData` (spec, seed, store, rounds) rather than
    copies of it, because a scenario object is shared and frozen: the same ``Static()`` serves any
    benchmark and seed. Per-benchmark state (Dirichlet's partition) lives in the object
    :meth:`prepare` returns, which ``FederatedData`` keeps as ``scenario_state``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    def tag(self) -> str:
        """Short string form, used in file names and result files."""
        return self.kind  # type: ignore[attr-defined]

    def prepare(self, fed: FederatedData) -> object | None:
        """State shared by all clients of ``fed`` and computed once (None: this scenario needs none)."""
        return None

    def check(self, fed: FederatedData) -> None:
        """Raise :class:`ScenarioError` when the scenario cannot lay out ``fed``'s clients; called before any stream."""

    def needed_tasks(self, spec: BenchmarkSpec, clients: Sequence[int]) -> list[str]:
        """Tasks whose data ``clients`` need, so that a Hub download fetches no more than that."""
        return [t for c in clients for t in spec.client(c).tasks]

    def client_tasks(self, fed: FederatedData, client: int) -> list[str]:
        """The tasks a client's stream draws from, in introduction order."""
        return list(fed.spec.client(client).tasks)

    def train_rows(self, fed: FederatedData, client: int, task_id: str) -> np.ndarray:
        """Train rows of ``task_id`` that ``client`` receives (sorted; the stream shuffles them)."""
        return np.arange(fed.store.size(task_id, "train"))

    def test_rows(self, fed: FederatedData, task_id: str, owner: int | None) -> np.ndarray:
        """Rows of ``task_id``'s scored split (``fed.scored_split``: test, or validation in a tuning run) that measure
        ``owner``'s share of it (all rows when ``owner`` is None)."""
        return np.arange(fed.store.size(task_id, fed.scored_split))

    @abstractmethod
    def segments(self, fed: FederatedData, client: int, per_task: list[np.ndarray]) -> list[Segment]:
        """Lay out ``per_task[i]`` (the shuffled (task_index, row) items of the client's i-th task) over the rounds."""


def _mixed_pool(fed: FederatedData, client: int, per_task: list[np.ndarray]) -> list[Segment]:
    """One segment over every round holding all tasks' items shuffled together (i.i.d. stream)."""
    pool = np.concatenate(per_task) if per_task else np.zeros((0, 2), dtype=np.int64)
    pool = pool[np.random.default_rng([fed.seed, client, SALT_MIXED_POOL]).permutation(len(pool))]
    return [Segment(0, fed.config.rounds, pool)]


def _in_order(per_task: list[np.ndarray], rounds_per_task: Sequence[int]) -> list[Segment]:
    """Task i's items arrive over the ``rounds_per_task[i]`` rounds that follow task i-1's."""
    segments, start = [], 0
    for items, n_rounds in zip(per_task, rounds_per_task):
        segments.append(Segment(start, start + n_rounds, items))
        start += n_rounds
    return segments


class Static(BaseScenario):
    """PFL-Static: every task is available from round 0, so local data looks i.i.d. over time."""

    kind: Literal["static"] = "static"

    def segments(self, fed: FederatedData, client: int, per_task: list[np.ndarray]) -> list[Segment]:
        return _mixed_pool(fed, client, per_task)


class Dynamic(BaseScenario):
    """PFL-Dynamic: tasks arrive one after another in manifest order, with an equal share of rounds each."""

    kind: Literal["dynamic"] = "dynamic"

    def check(self, fed: FederatedData) -> None:
        rounds = fed.config.rounds
        for c in fed.clients:
            if len(fed.spec.client(c).tasks) > rounds:
                raise ScenarioError(f"client {c} has more tasks than rounds ({rounds})")

    def segments(self, fed: FederatedData, client: int, per_task: list[np.ndarray]) -> list[Segment]:
        return _in_order(per_task, split_rounds(fed.config.rounds, len(per_task)))


class Asynchronous(BaseScenario):
    """Per-client task-round patterns: clients move between tasks at different times.

    ``patterns``: explicit client id -> pattern. When absent, each client draws one of the
    manifest's patterns uniformly at random with the stream seed (paper A.32: "each client
    randomly draws one of three task-round patterns").
    """

    kind: Literal["async"] = "async"
    patterns: dict[int, tuple[int, ...]] | None = None
    pattern: tuple[int, ...] | None = Field(default=None, description="One pattern for every client.")

    def tag(self) -> str:
        if self.pattern:
            return "async-" + "-".join(map(str, self.pattern))
        return "async"

    def client_pattern(self, spec: BenchmarkSpec, client: int, seed: int) -> tuple[int, ...]:
        """Rounds given to each of ``client``'s tasks: explicit per client, else the shared pattern, else a seeded draw."""
        if self.patterns and client in self.patterns:
            return tuple(self.patterns[client])
        if self.pattern:
            return tuple(self.pattern)
        defaults = spec.scenarios.asynchronous
        if defaults is None:
            raise ScenarioError(f"benchmark {spec.name!r} defines no async patterns; pass async:3-7-3-7")
        rng = np.random.default_rng([seed, client, SALT_ASYNC_PATTERN])
        return tuple(defaults.patterns[int(rng.integers(len(defaults.patterns)))])

    def check(self, fed: FederatedData) -> None:
        spec, rounds = fed.spec, fed.config.rounds
        if len({len(spec.client(c).tasks) for c in fed.clients}) != 1 and self.pattern is not None:
            raise ScenarioError("a single async pattern needs every client to have the same number of tasks")
        for c in fed.clients:
            p = self.client_pattern(spec, c, fed.seed)
            n_tasks = len(spec.client(c).tasks)
            if sum(p) != rounds or len(p) != n_tasks:
                raise ScenarioError(
                    f"async pattern {list(p)} for client {c} must have one entry per task "
                    f"({n_tasks}) summing to the rounds ({rounds})"
                )

    def segments(self, fed: FederatedData, client: int, per_task: list[np.ndarray]) -> list[Segment]:
        return _in_order(per_task, self.client_pattern(fed.spec, client, fed.seed))


class DirichletSplit:
    """Dirichlet shares of one benchmark's merged tasks, drawn once and shared by all clients.

    Proportions are redrawn until every client holds at least one batch of train items (so no
    client has an empty stream), and the same proportions cut the test sets, so a client's Self
    score is measured on its own share of each task.
    """

    def __init__(self, fed: FederatedData, alpha: float):
        self._fed, self.alpha = fed, alpha

    @cached_property
    def tasks(self) -> list[str]:
        return Dirichlet.task_set(self._fed.spec)

    @cached_property
    def _partitioner(self) -> tuple[DirichletPartitioner, np.ndarray]:
        fed = self._fed
        part = DirichletPartitioner(
            len(fed.clients), self.alpha, seed=fed.seed, min_partition_size=fed.config.batch_size
        )
        return part, part.proportions([fed.store.size(t, "train") for t in self.tasks])

    def _cut(self, split: str) -> list[list[np.ndarray]]:
        part, p = self._partitioner
        return part.cut([self._fed.store.size(t, split) for t in self.tasks], p, split)

    @cached_property
    def train(self) -> list[list[np.ndarray]]:
        """``train[client position][task position]``: the train rows that client receives."""
        return self._cut("train")

    @cached_property
    def test(self) -> list[list[np.ndarray]]:
        """``test[client position][task position]``: the test rows of that client's share."""
        return self._cut("test")

    @cached_property
    def validation(self) -> list[list[np.ndarray]]:
        """``validation[client position][task position]``: the validation rows of that client's share."""
        return self._cut("validation")

    def rows(self, split: str, client: int, task_id: str) -> np.ndarray:
        table = getattr(self, split)  # train, test or validation: only the split asked for is cut
        return table[self._fed.clients.index(client)][self.tasks.index(task_id)]


class Dirichlet(BaseScenario):
    """The manifest's merged task set split over clients with Dir(alpha) proportions, laid out as Static.

    Smaller ``alpha`` gives more skewed shares (paper A.25, Table 35).
    """

    kind: Literal["dirichlet"] = "dirichlet"
    alpha: float = Field(gt=0)

    def tag(self) -> str:
        return f"dirichlet-{self.alpha:g}"

    @staticmethod
    def task_set(spec: BenchmarkSpec) -> list[str]:
        """The tasks the Dirichlet split merges; a benchmark without one cannot run this scenario."""
        if spec.scenarios.dirichlet is None:
            raise ScenarioError(f"benchmark {spec.name!r} defines no Dirichlet task set (scenarios.dirichlet)")
        return list(spec.scenarios.dirichlet.tasks)

    def prepare(self, fed: FederatedData) -> DirichletSplit:
        return DirichletSplit(fed, self.alpha)

    def check(self, fed: FederatedData) -> None:
        self.task_set(fed.spec)

    def needed_tasks(self, spec: BenchmarkSpec, clients: Sequence[int]) -> list[str]:
        return self.task_set(spec)  # every client may hold a share of every merged task

    @staticmethod
    def _split(fed: FederatedData) -> DirichletSplit:
        return fed.scenario_state  # type: ignore[return-value]  # set by prepare()

    def client_tasks(self, fed: FederatedData, client: int) -> list[str]:
        split = self._split(fed)
        return [t for t, rows in zip(split.tasks, split.train[fed.clients.index(client)]) if len(rows)]

    def train_rows(self, fed: FederatedData, client: int, task_id: str) -> np.ndarray:
        return self._split(fed).rows("train", client, task_id)

    def test_rows(self, fed: FederatedData, task_id: str, owner: int | None) -> np.ndarray:
        if owner is None:
            return super().test_rows(fed, task_id, owner)
        return self._split(fed).rows(fed.scored_split, owner, task_id)

    def segments(self, fed: FederatedData, client: int, per_task: list[np.ndarray]) -> list[Segment]:
        return _mixed_pool(fed, client, per_task)


Scenario = Annotated[Union[Static, Dynamic, Asynchronous, Dirichlet], Field(discriminator="kind")]
_ADAPTER: TypeAdapter[Scenario] = TypeAdapter(Scenario)
KINDS = ["static", "dynamic", "async", "dirichlet"]


def benchmark_scenario(spec: BenchmarkSpec, value: "str | dict | Scenario | None" = None) -> Scenario:
    """The scenario ``value`` names, or where it is None the benchmark's default (its manifest's
    ``scenarios.default``): how a run's ``scenario`` setting reads."""
    return parse_scenario(value if value is not None else spec.scenarios.default)


def parse_scenario(value: "str | dict | Scenario") -> Scenario:
    """Accept a scenario object, a dict, or a short string; raise a clear error otherwise."""
    if isinstance(value, BaseScenario):
        return value  # type: ignore[return-value]
    if isinstance(value, dict):
        try:
            return _ADAPTER.validate_python(value)
        except ValidationError as exc:
            raise ScenarioError(f"invalid scenario {value!r}: {exc.errors()[0]['msg']}") from None
    if not isinstance(value, str):
        raise ScenarioError(f"a scenario is a string or a Scenario, got {type(value).__name__}")
    kind, _, arg = value.partition(":")
    kind = kind.strip().lower()
    if kind == "static" and not arg:
        return Static()
    if kind == "dynamic" and not arg:
        return Dynamic()
    if kind in ("async", "asynchronous"):
        if not arg:
            return Asynchronous()
        try:
            return Asynchronous(pattern=tuple(int(x) for x in arg.replace(",", "-").split("-")))
        except ValueError:
            raise ScenarioError(f"async pattern must look like 'async:3-7-3-7', got {value!r}") from None
    if kind == "dirichlet":
        try:
            return Dirichlet(alpha=float(arg))
        except (ValueError, ValidationError):
            raise ScenarioError(f"dirichlet needs a positive alpha, e.g. 'dirichlet:0.5', got {value!r}") from None
    raise UnknownNameError("scenario", value, ["static", "dynamic", "async", "async:3-7-3-7", "dirichlet:0.5"])
