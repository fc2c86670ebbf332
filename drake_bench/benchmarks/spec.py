"""Typed definition of a benchmark: tasks, clients, FL configuration, model allocations.

These models are the single source of the manifest format: ``splits/*.json`` are
instances of :class:`BenchmarkSpec`, and ``drake_bench/schemas/manifest.schema.json``
is generated from it (``tests/test_manifest.py`` keeps the two equal). Every field that the
papers do not state carries its provenance, so users see what was inferred.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_serializer, model_validator

from drake_bench.benchmarks.sample import AnswerType
from drake_bench.core.strict_model import StrictModel
from drake_bench.errors import DrakeBenchError, UnknownNameError

Provenance = Literal["P", "I", "R"]
"""[P] the paper states it, [I] inferred, [R] drake_bench's recommended choice where the paper is silent."""


class SourceSpec(StrictModel):
    """Where a task's raw items come from and which loader (``drake_bench.loaders``) reads them."""

    dataset: str
    variant: str | None = None
    loader: str = Field(description="Name of the source loader in drake_bench.loaders.")
    hub_repo: str | None = Field(default=None, description="Hub dataset repo id of the source, when there is one.")
    revision: str | None = None
    subset: str | None = Field(default=None, description="Sub-folder / config of the source holding this task.")
    rule: dict[str, Any] = Field(
        default_factory=dict, description="Partition rule parameters (filters, keywords, levels)."
    )
    license: str = "unknown"
    redistributable: bool = Field(
        default=True, description="False: published as an index, rebuilt from the user's copy."
    )
    citation: str | None = None


TestScorer = Literal["item", "gsm8k", "humaneval"]
"""How a task's external test items are scored (:mod:`drake_bench.evaluation.external`): ``item`` by the item's
own answer type (MMLU's options are multiple choice), ``gsm8k`` by the final number, ``humaneval`` by running the
benchmark's unit tests on the completion (pass@1)."""


class TestSourceSpec(SourceSpec):
    """A task's test items read from another source than its training items: a published evaluation set.

    FederatedScope-LLM trains on CodeAlpaca, GSM8K train and Dolly but reports HumanEval, GSM8K test and MMLU; a
    task with a test source keeps every training item for training and takes its test split from here whole.
    """

    __test__ = False  # a class named Test* is not a pytest test class where a test module imports it

    scorer: TestScorer = Field(
        default="item",
        description="item: each item's own answer-type rule; gsm8k: the final number of the response against the "
        "number after '####' in the reference; humaneval: the completion runs against the problem's unit tests "
        "(pass@1, needs code execution allowed).",
    )


class TaskSizes(StrictModel):
    train: int | None = None
    test: int | None = None
    validation: int | None = None

    @model_serializer(mode="wrap")
    def _omit_no_validation(self, handler: Any) -> Any:
        """Sizes without a validation split serialise as before the field existed (earlier manifests' hashes)."""
        data = handler(self)
        if isinstance(data, dict) and data.get("validation", ...) is None:
            del data["validation"]
        return data


class TaskSpec(StrictModel):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_.\-]*$")
    name: str
    group: str
    split: str = Field(description="Sub-group within the group (e.g. 'dual-image relation').")
    source: SourceSpec
    images: Literal["none", "single", "multi"]
    num_images: tuple[int, int] = Field(default=(0, 0), description="Min and max images per item.")
    answer_type: AnswerType
    metric: Literal["accuracy", "token_accuracy", "rouge_l"] = "accuracy"
    sizes: TaskSizes = Field(default_factory=TaskSizes)
    description: str = ""
    provenance: dict[str, Provenance] = Field(default_factory=dict, description="Provenance of individual fields.")
    test_source: TestSourceSpec | None = Field(
        default=None,
        description="Where the test split comes from when it is not a held-out part of the training source (an "
        "external evaluation set); None: train and test are disjoint seeded draws from `source`.",
    )

    @model_serializer(mode="wrap")
    def _omit_unset_test_source(self, handler: Any) -> Any:
        """A task without a test source serialises as it did before the field existed, so every manifest's content
        hash and every built task's recipe (:func:`drake_bench.benchmarks.build.task_recipe`) stay as they were."""
        data = handler(self)
        if isinstance(data, dict) and data.get("test_source", ...) is None:
            del data["test_source"]
        return data

    def as_test_source(self) -> "TaskSpec":
        """This task as its test source's loader reads it: the same id (item ids stay ``<task>/<key>``), with
        ``test_source`` in the place of ``source``. Loaders read ``task.source`` only, so every loader serves both."""
        if self.test_source is None:
            raise DrakeBenchError(f"task {self.id!r} has no test_source")
        return self.model_copy(update={"source": self.test_source, "test_source": None})


class ClientSpec(StrictModel):
    id: int = Field(ge=1)
    group: str
    tasks: list[str] = Field(min_length=1, description="Task ids in the order a Dynamic stream introduces them.")


class FLConfig(StrictModel):
    rounds: int = Field(ge=1)
    local_steps: int = Field(ge=1)
    batch_size: int = Field(ge=1)
    eval_every_rounds: int = Field(ge=1)
    participation: float = Field(default=1.0, gt=0, le=1)
    others_subsample: int | None = Field(
        default=None,
        description="Seeded per-task cap on Others test items (scoring every other client's full test set grows with the square of the client count); None: the full test split.",
    )
    self_subsample: int | None = Field(
        default=None, description="Seeded per-task cap on Self test items; None: the full test split."
    )
    fast_adaptation_iters: int = 200
    fast_adaptation_eval_every: int = 20


class AsyncDefaults(StrictModel):
    patterns: list[list[int]]


class DirichletDefaults(StrictModel):
    tasks: list[str]
    alphas: list[float]


class ScenarioDefaults(StrictModel):
    default: Literal["static", "dynamic", "async", "dirichlet"] = "dynamic"
    asynchronous: AsyncDefaults | None = None
    dirichlet: DirichletDefaults | None = None


class ModelAllocation(StrictModel):
    description: str
    source: str = Field(description="Where the allocation comes from (e.g. 'Table 14, Tab. 2 row').")
    clients: dict[str, str] = Field(description="Client id (as string) -> model zoo name.")


class SubsamplingRule(StrictModel):
    """How a task's pool becomes its splits (``drake_bench.benchmarks.build.subsample``): a seeded order of the pool, then
    ``test`` items (or the ``1 - train_ratio`` share of a small pool) held out, and ``validation_ratio`` of the rest
    carved off the end of the training draw, so the test split stays what it was without a validation split."""

    large_threshold: int = 11000
    train: int = 10000
    test: int = 1000
    train_ratio: float = 0.8
    seed: int = 0
    validation_ratio: float = Field(
        default=0.0,
        ge=0.0,
        lt=1.0,
        description="Share of each task's training draw held out as its validation split: the split a method's "
        "hyperparameters are selected on (`drake-bench tune`), never in a training stream and never scored on a "
        "board. 0: no validation split (every benchmark version before the split existed).",
    )

    @model_serializer(mode="wrap")
    def _omit_no_validation(self, handler: Any) -> Any:
        """A rule without a validation split serialises as it did before the field existed, so the manifests of
        earlier versions keep their content hashes and their tasks' build recipes."""
        data = handler(self)
        if isinstance(data, dict) and data.get("validation_ratio", ...) == 0.0:
            del data["validation_ratio"]
        return data


class StorageRule(StrictModel):
    """How built shards encode what they hold. Shard hashes are over file bytes, so the encoding is part of a
    benchmark's data version: a manifest without this block keeps the encoding every benchmark had before it
    existed (PNG images, datasets' Parquet defaults), byte for byte."""

    images: Literal["png", "webp-lossless"] = Field(
        default="png",
        description="Encoding of images a loader hands over as decoded pictures (bytes from a source file are "
        "stored as they are). webp-lossless decodes to the same pixels at about half PNG's size.",
    )
    parquet_compression: Literal["datasets-default", "zstd"] = Field(
        default="datasets-default",
        description="datasets-default: datasets' writer (snappy text, uncompressed image bytes); zstd: every "
        "column zstd-compressed, written by pyarrow with the same features metadata.",
    )


class Choice(StrictModel):
    """A decision the source papers leave open, recorded so results can cite it."""

    key: str
    tag: Provenance
    decision: str
    reason: str = ""


class BenchmarkSpec(StrictModel):
    schema_version: Literal["1.0"] = "1.0"
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9\-]*$")
    version: str
    title: str
    description: str
    modality: Literal["multimodal", "text"]
    embedded: bool = Field(default=False, description="True for procedurally generated mirrors built on the fly.")
    mirrors: str | None = Field(default=None, description="For embedded benchmarks: the real benchmark mirrored.")
    hub_repo: str | None = Field(default=None, description="Hub dataset repo where built splits are published.")
    tasks: list[TaskSpec]
    clients: list[ClientSpec]
    unseen_tasks: list[str] = Field(default_factory=list)
    fl: FLConfig
    scenarios: ScenarioDefaults
    model_allocations: dict[str, ModelAllocation] = Field(default_factory=dict)
    default_allocation: str | None = None
    subsampling: SubsamplingRule = Field(default_factory=SubsamplingRule)
    storage: StorageRule = Field(default_factory=StorageRule, description="Encoding of the built shards.")
    choices: list[Choice] = Field(default_factory=list)
    citation: str = ""
    content_hash: str | None = Field(default=None, description="sha256 of the canonical manifest without this field.")

    @model_validator(mode="after")
    def _consistent(self) -> "BenchmarkSpec":
        ids = [t.id for t in self.tasks]
        dup = {i for i in ids if ids.count(i) > 1}
        if dup:
            raise ValueError(f"duplicate task ids: {sorted(dup)}")
        known = set(ids)
        for c in self.clients:
            missing = [t for t in c.tasks if t not in known]
            if missing:
                raise ValueError(f"client {c.id} names unknown tasks {missing}")
        bad = [t for t in self.unseen_tasks if t not in known]
        if bad:
            raise ValueError(f"unseen_tasks names unknown tasks {bad}")
        client_tasks = {t for c in self.clients for t in c.tasks}
        overlap = client_tasks & set(self.unseen_tasks)
        if overlap:
            raise ValueError(f"unseen tasks must be disjoint from client tasks: {sorted(overlap)}")
        cids = [c.id for c in self.clients]
        if len(set(cids)) != len(cids):
            raise ValueError("duplicate client ids")
        for name, alloc in self.model_allocations.items():
            extra = set(alloc.clients) - {str(c) for c in cids}
            if extra:
                raise ValueError(f"model allocation {name!r} names unknown clients {sorted(extra)}")
        if self.default_allocation and self.default_allocation not in self.model_allocations:
            raise ValueError(f"default_allocation {self.default_allocation!r} is not in model_allocations")
        if self.scenarios.asynchronous:
            for p in self.scenarios.asynchronous.patterns:
                if sum(p) != self.fl.rounds:
                    raise ValueError(f"async pattern {p} does not sum to fl.rounds={self.fl.rounds}")
        if self.scenarios.dirichlet:
            bad = [t for t in self.scenarios.dirichlet.tasks if t not in known]
            if bad:
                raise ValueError(f"scenarios.dirichlet.tasks names unknown tasks {bad}")
        return self

    # -- lookups with clear errors ------------------------------------------------
    def task(self, task_id: str) -> TaskSpec:
        for t in self.tasks:
            if t.id == task_id:
                return t
        raise UnknownNameError("task", task_id, [t.id for t in self.tasks], where=f"benchmark {self.name!r}")

    def client(self, client_id: int) -> ClientSpec:
        for c in self.clients:
            if c.id == client_id:
                return c
        raise UnknownNameError("client", client_id, [str(c.id) for c in self.clients], where=f"benchmark {self.name!r}")

    @property
    def client_ids(self) -> list[int]:
        return [c.id for c in self.clients]

    def allocation(self, name: str | None = None) -> dict[int, str]:
        """Client id -> model name: the manifest's allocation ``name`` (None: its default), or an allocation written
        inline (``RANGE=MODEL,...``, see :func:`inline_allocation`) for runs on an allocation the manifest lacks."""
        key = name or self.default_allocation
        if key is not None and key not in self.model_allocations and "=" in key:
            return inline_allocation(key, self.client_ids)
        if key is None:
            raise UnknownNameError(
                "model allocation", name, list(self.model_allocations), where=f"benchmark {self.name!r}"
            )
        if key not in self.model_allocations:
            raise UnknownNameError(
                "model allocation", key, list(self.model_allocations), where=f"benchmark {self.name!r}"
            )
        return {int(k): v for k, v in self.model_allocations[key].clients.items()}


def inline_allocation(text: str, client_ids: list[int]) -> dict[int, str]:
    """An allocation written out instead of named: comma-separated ``CLIENTS=MODEL`` items.

    ``CLIENTS`` is a client id (``4``), a range (``1-3``), several joined by ``+`` (``1+4+7``), or ``all`` (every
    client no other item names). ``1-4=tiny-llava-llama-s,5-7=tiny-llava-llama-m,8-10=tiny-llava-llama-l`` and
    ``all=tiny-llava-llama-l`` are examples. Every client must get exactly one model. The result file records the
    text as the allocation's name and the client -> model map it gives, as for a manifest allocation; the manifest
    (and its hash) stays as it is, so such runs share their benchmark's built data and boards.
    """
    known = set(client_ids)
    out: dict[int, str] = {}
    fallback: str | None = None
    for item in (part.strip() for part in text.split(",")):
        lhs, sep, model = item.partition("=")
        lhs, model = lhs.strip(), model.strip()
        if not sep or not lhs or not model:
            raise DrakeBenchError(f"allocation item {item!r} is not CLIENTS=MODEL (in {text!r})")
        if lhs == "all":
            if fallback is not None:
                raise DrakeBenchError(f"allocation {text!r} names 'all' twice")
            fallback = model
            continue
        for part in lhs.split("+"):
            first, dash, last = part.partition("-")
            try:
                ids = range(int(first), int(last) + 1) if dash else [int(first)]
            except ValueError:
                raise DrakeBenchError(f"allocation item {item!r}: {part!r} is not a client id or range") from None
            for c in ids:
                if c not in known:
                    raise DrakeBenchError(
                        f"allocation {text!r} names client {c}, which the benchmark does not have "
                        f"(its clients: {sorted(known)})"
                    )
                if c in out:
                    raise DrakeBenchError(f"allocation {text!r} gives client {c} two models")
                out[c] = model
    for c in client_ids:
        if c not in out:
            if fallback is None:
                raise DrakeBenchError(f"allocation {text!r} gives no model to clients {sorted(known - set(out))}")
            out[c] = fallback
    return {c: out[c] for c in sorted(out)}
