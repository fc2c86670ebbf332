"""The standard evaluator: drives a method through a benchmark's rounds and owns every number.

Methods train and predict; the evaluator decides what they see (streams with the leakage guard),
when they are evaluated (every ``eval_every_rounds`` and after the last round), on what (Self: the
client's own tasks seen so far; Others: other clients' seen tasks, a seeded subsample; unseen
tasks through fast adaptation), and how items are scored (:mod:`drake_bench.evaluation.scoring`).
It measures message bytes, wall time and peak memory itself, checkpoints after every round and
resumes a killed run to identical results.

One seed's run is a sequence of small steps, as a Flower ``Strategy`` splits a round into
configure and aggregate calls: :meth:`Evaluator.init_or_resume`, then per round
:meth:`~Evaluator.train_round`, :meth:`~Evaluator.aggregate_round`, :meth:`~Evaluator.evaluate`
and a checkpoint, then :meth:`~Evaluator.post_federation` and :meth:`~Evaluator.fast_adaptation`.
Every call into the plugin goes through a :class:`~drake_bench.plugins.handle.MethodHandle`: a
:class:`~drake_bench.plugins.guard.GuardedMethod` in this process, or a worker process's
:class:`~drake_bench.backends.worker_process.MethodProcess`.

The evaluator knows nothing about models: a method reports its models' identities and its
inference settings (:class:`~drake_bench.plugins.protocol.ReportsModels`), and the result file records them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import secrets
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from drake_bench.backends.client_calls import ClientCalls, PredictJob, TrainJob, TrainReply
from drake_bench.backends.confine import SANDBOX_KEY, Confinement, dataset_caches
from drake_bench.backends.worker_process import MethodProcess, warm_forkserver
from drake_bench.benchmarks.manifest import load_benchmark
from drake_bench.benchmarks.sample import Sample
from drake_bench.benchmarks.store import data_home, shard_path
from drake_bench.benchmarks.synth.public import sampler as public_sampler
from drake_bench.core import numerics
from drake_bench.core.lock import RunLock
from drake_bench.core.provenance import drake_bench_source
from drake_bench.errors import DrakeBenchError
from drake_bench.evaluation.cells import EvalCell, cell_records, plan_cells
from drake_bench.evaluation.compute import ComputeProbe, probe_compute
from drake_bench.evaluation.external import code_executing_tasks, require_code_execution
from drake_bench.evaluation.judge import Judge, judged_scores, load_judge, require_judged_tasks
from drake_bench.evaluation.metrics import (
    AbsenceRecord,
    AdaptationRecord,
    CostRecord,
    DiagnosticRecord,
    PostFederationCostRecord,
    RawTables,
    ScoreRecord,
    ServerCostRecord,
)
from drake_bench.evaluation.scoring import score_batch
from drake_bench.evaluator import checkpoint
from drake_bench.evaluator.access import DATA_ACCESS_KEY, AccessLedger
from drake_bench.evaluator.run_config import RunConfig
from drake_bench.evaluator.settings import resolve_settings
from drake_bench.plugins.guard import GuardedMethod
from drake_bench.plugins.handle import MethodHandle
from drake_bench.plugins.protocol import ClientContext, FederationContext, Message, State, mixed_seed
from drake_bench.plugins.registry import create_method, method_package
from drake_bench.results.result_file import (
    PREDICT_CALLS_KEY,
    RESULT_FILE,
    BenchmarkRef,
    EvaluationSettings,
    FLSettings,
    MethodRef,
    ModelAllocationRef,
    RunResult,
    ScenarioRef,
    capture_environment,
    new_result,
    read_result,
    write_result,
)
from drake_bench.streams.stream import FederatedData, load_federated_data

__all__ = [
    "ClientCalls",
    "Evaluator",
    "LocalClients",
    "PredictJob",
    "RunCallbacks",
    "RunConfig",
    "SeedRun",
    "TrainJob",
    "TrainReply",
    "run",
    "run_on_flower",
    "sample_participants",
]

# Salts mixed into the run seed before each kind of call, so each draws from its own random stream.
SALT_SETUP = 0xC0FFEE
SALT_INIT_CLIENT = 0xA11
SALT_AGGREGATE = 0x5E
SALT_ADAPTATION_BATCHES = 0xFA
SALT_PARTICIPATION = 0x9A27
ADAPTATION_ROUND_OFFSET = 10_000  # fast-adaptation contexts use rounds from here, apart from the federation's


class RunCallbacks:
    """Hooks for progress display; the CLI draws bars (or plain lines) with them."""

    def on_round(self, seed: int, round_idx: int, total: int) -> None: ...

    def on_client(self, seed: int, round_idx: int, client: int) -> None: ...

    def on_eval(self, seed: int, round_idx: int) -> None: ...

    def on_adaptation(self, seed: int, task: str, arch: str) -> None: ...

    def on_kept_seed(self, seed: int) -> None:
        """``seed`` was taken from the result file an earlier invocation wrote (it does not run again)."""


PHASE_SECONDS_KEY = "phase_seconds"
"""``fl.extra`` key of the wall seconds each seed spent per phase (setup: data, method start, set-up and states or the
checkpoint; training; aggregation; evaluation; checkpoint; post_federation; fast_adaptation). Timed by the evaluator
around its own steps in this invocation: a resumed seed counts only what ran after the resume. An execution field
(``results.EXECUTION_FIELDS``): two runs of one configuration differ in it."""

VERIFIED_KEY = "verified_files"
"""Checkpoint key of the shard hashes a seed verified in the rounds it has run (so a resumed seed keeps them)."""

SEED_FINGERPRINTS_KEY = "seed_fingerprints"
"""``fl.extra`` key of each finished seed's fingerprint (:meth:`Evaluator.fingerprint`). The result file is written
after every seed, so a run stopped between seeds, or moved to a machine without its checkpoints (a board built over
several sessions), resumes from the file: a seed whose fingerprint matches is taken from it, not run again. An
execution field: client batching is in the key, and the numbers are not (tests/test_grouped.py)."""


@dataclass
class SeedRun:
    """Everything one seed's federation carries from round to round (what a checkpoint holds)."""

    seed: int
    fed: FederatedData
    method: MethodHandle
    federation: FederationContext
    local_steps: int
    eval_every: int
    run_dir: Path
    states: dict[int, State] = field(default_factory=dict)
    server: State = field(default_factory=State)
    messages: dict[int, Message | None] = field(default_factory=dict)
    scores: list[ScoreRecord] = field(default_factory=list)
    costs: list[CostRecord] = field(default_factory=list)
    server_costs: list[ServerCostRecord] = field(default_factory=list)
    diagnostics: list[DiagnosticRecord] = field(default_factory=list)
    post_federation_costs: list[PostFederationCostRecord] = field(default_factory=list)
    absences: list[AbsenceRecord] = field(default_factory=list)
    scores_before_post_federation: list[ScoreRecord] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    start_round: int = 0
    client_peaks: dict[int, int] = field(default_factory=dict)  # peak memory a client's own process reported (Flower)
    setup_seed: int = 0  # what setup was seeded with: a Flower node sets its own copy of the method up alike
    access: AccessLedger = field(default_factory=AccessLedger)  # what the method was handed, by split
    verified: dict[str, str] = field(default_factory=dict)  # shards verified before a resume (kept in the checkpoint)
    phase_seconds: dict[str, float] = field(default_factory=dict)  # wall seconds per phase of this process's work

    @contextlib.contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        """Adds the block's wall seconds to ``phase_seconds[phase]``."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.phase_seconds[phase] = self.phase_seconds.get(phase, 0.0) + time.perf_counter() - t0

    @property
    def rounds(self) -> int:
        return self.fed.config.rounds

    @property
    def clients(self) -> list[int]:
        return self.fed.clients

    @property
    def uid_key(self) -> bytes:
        return bytes.fromhex(self.extra["uid_key"])


def sample_participants(
    clients: list[int], seed: int, round_idx: int, fraction: float | None = None, count: int | None = None
) -> list[int]:
    """The clients that train in round ``round_idx`` (0-based), sorted: all of them without a rule, else a draw
    without replacement seeded by (seed, round) alone, so every backend, a resumed run and a rerun draw the same
    clients. ``fraction`` gives ceil(fraction x clients) of them (at least one), ``count`` exactly that many."""
    n = len(clients)
    if fraction is None and count is None:
        return list(clients)
    if count is not None and count > n:
        raise DrakeBenchError(f"clients_per_round is {count}, but the federation has only {n} clients")
    k = count if count is not None else max(1, math.ceil(float(fraction) * n - 1e-9))  # type: ignore[arg-type]
    rng = np.random.default_rng([seed, round_idx, SALT_PARTICIPATION])
    return sorted(int(c) for c in rng.choice(np.asarray(clients), size=k, replace=False))


class LocalClients(ClientCalls):
    """The default backend: every call through the evaluator's method handle (its worker process, or inline).

    ``client_batching``: where the method offers ``client_update_group`` (TrainsClientsTogether), each round's
    clients of one architecture train in one call, in client order; a group's seconds are shared equally by its
    clients (the call cannot say which client took which part)."""

    def __init__(self, callbacks: RunCallbacks, client_batching: bool = False):
        self.cb = callbacks
        self.client_batching = client_batching

    def train(self, run: SeedRun, round_idx: int, jobs: list[TrainJob]) -> dict[int, TrainReply | str]:
        if self.client_batching and run.method.trains_clients_together:
            return self._train_groups(run, round_idx, jobs)
        out: dict[int, TrainReply | str] = {}
        for job in jobs:
            self.cb.on_client(run.seed, round_idx, job.client)
            t0 = time.perf_counter()
            upload, state = run.method.client_update(
                job.ctx, job.state, job.message, job.batches, rng_seed=job.ctx.seed
            )
            seconds = time.perf_counter() - t0
            out[job.client] = TrainReply(upload, state, seconds, diagnostics=run.method.client_diagnostics(job.ctx))
        return out

    def _train_groups(self, run: SeedRun, round_idx: int, jobs: list[TrainJob]) -> dict[int, TrainReply | str]:
        groups: dict[str, list[TrainJob]] = {}
        for job in jobs:
            groups.setdefault(job.ctx.architecture, []).append(job)
        out: dict[int, TrainReply | str] = {}
        for group in groups.values():
            for job in group:
                self.cb.on_client(run.seed, round_idx, job.client)
            t0 = time.perf_counter()
            replies = run.method.client_update_group(
                [j.ctx for j in group],
                [j.state for j in group],
                [j.message for j in group],
                [j.batches for j in group],
                rng_seed=group[0].ctx.seed,
            )
            seconds = (time.perf_counter() - t0) / len(group)
            for job, (upload, state) in zip(group, replies):
                out[job.client] = TrainReply(upload, state, seconds, diagnostics=run.method.client_diagnostics(job.ctx))
        return out

    def predict(self, run: SeedRun, jobs: list[PredictJob]) -> list[list[list[str]]]:
        return [[run.method.predict(job.ctx, job.state, queries) for queries in job.groups] for job in jobs]


class Evaluator:
    """Runs one method on one benchmark and scenario for each seed and returns the raw tables."""

    def __init__(self, config: RunConfig, callbacks: RunCallbacks | None = None, clients: ClientCalls | None = None):
        self.config = config
        self.cb = callbacks or RunCallbacks()
        self.clients = clients or LocalClients(self.cb, client_batching=config.client_batching)
        self.spec = load_benchmark(config.benchmark)
        executes = code_executing_tasks(self.spec)
        if executes:  # refused before any training, not at the first evaluation point
            require_code_execution(f"benchmark {self.spec.name}'s tasks {', '.join(executes)}")
        if config.isolation == "process":  # its imports overlap with reading the data; the model libraries only
            # where the benchmark allocates models (decided without importing the plugin: its code never runs here)
            warm_forkserver(models=bool(self.spec.model_allocations))
        self.settings = resolve_settings(config, self.spec)  # every "the config's, else the manifest's", once
        self.scenario = self.settings.scenario
        self.allocation = self._allocation()
        self._arch: dict[int, str] = {}
        self.checkpoints: dict[str, dict[str, Any]] = {}
        self.evaluation: EvaluationSettings | None = None
        self._judge: Judge | None = None
        self.data_hash: str | None = None
        self.content_hash: str | None = None
        self.verified_files: dict[str, str] = {}
        self.compute: ComputeProbe | None = None
        self.cpu_capability: str | None = None  # the instruction set the method's process computes with (numerics.py)
        self.sandbox: str = "none (not started)"  # what the method's worker could not see (confine.py)
        self.data_root: Path | None = None  # the built benchmark read, hidden from the method's worker
        self.method_version: str | None = None
        # the code this run imports, as it is now (a later edit of the checkout does not change what runs)
        self.method_package = method_package(config.method)
        drake_bench_source()

    # -- set-up ----------------------------------------------------------------
    def judge(self) -> Judge:
        """The run's judge (``RunConfig.judge``), loaded once."""
        if self._judge is None:
            assert self.config.judge is not None
            require_judged_tasks(self.spec, self.config.judge)
            self._judge = load_judge(self.config.judge, device=self.config.device)
        return self._judge

    def score(self, predictions: list[str], samples: list[Sample]) -> list[float]:
        """Each answer's score: the judge's rating for free text when the run has a judge, else (and for every other
        item) the scoring rules of the run's version (``RunConfig.scorer_version``)."""
        if self.config.judge is None:
            return score_batch(predictions, samples, self.config.scorer_version)
        return judged_scores(self.judge(), predictions, samples, self.config.scorer_version)

    def _allocation(self) -> dict[int, str]:
        if self.spec.model_allocations:
            return self.spec.allocation(self.config.allocation)
        return {c: "none" for c in self.spec.client_ids}

    def describe_models(self, method: MethodHandle) -> None:
        """Ask the method what its models are (architectures, weight identities, inference settings)."""
        identities = {m: method.model_identity(m) for m in sorted(set(self.allocation.values()))}
        self._arch = {c: identities[m].architecture for c, m in self.allocation.items()}
        self.checkpoints = {m: dict(ident.weights) for m, ident in identities.items()}
        self.method_version = method.meta.version
        settings = method.evaluation_settings()
        try:
            self.evaluation = EvaluationSettings(**settings)
        except Exception as exc:
            raise method.error("evaluation_settings", f"not valid EvaluationSettings: {exc}") from None
        if self.evaluation.judge is not None:  # only a judge that rates here may be named in the result
            raise method.error(
                "evaluation_settings",
                f"names a judge ({self.evaluation.judge!r}): the judge is the "
                "evaluator's, chosen with RunConfig.judge (--judge)",
            )
        claimed = settings.get("scorer_version")
        if claimed is not None and claimed != self.config.scorer_version:  # the file records the rules applied here
            raise method.error(
                "evaluation_settings",
                f"names scorer version {claimed!r}, but this run scores by "
                f"{self.config.scorer_version!r}: the scoring rules are the "
                "evaluator's, chosen with RunConfig.scorer_version "
                "(--scorer-version)",
            )
        self.evaluation = self.evaluation.model_copy(update={"scorer_version": self.config.scorer_version})
        if self.config.judge is not None:
            self.evaluation = self.evaluation.model_copy(update={"judge": self.judge().identity})
        if self.config.predict_per_client:  # other padding, so possibly other answers: a different evaluation
            self.evaluation = self.evaluation.model_copy(
                update={"extra": {**self.evaluation.extra, PREDICT_CALLS_KEY: "one per client"}}
            )

    def method_local_steps(self, method: MethodHandle, run_fed: FederatedData | None = None) -> int:
        """The run's local steps, or with ``compute_matched`` the steps the compute probe matched to SFT's FLOPs."""
        cfg = self.config
        if cfg.compute_matched or cfg.measure_compute:
            self.measure_compute(method, run_fed)
        if cfg.compute_matched:
            assert self.compute is not None
            if self.compute.over_budget:  # matched in name only: say so where the run is watched, not just in the file
                warnings.warn(self.compute.over_budget_note(), RuntimeWarning, stacklevel=2)
            return self.compute.matched_local_steps
        return self.settings.local_steps

    def measure_compute(self, method: MethodHandle, run_fed: FederatedData | None = None) -> ComputeProbe:
        """The compute probe of this run (once per run, on the first seed's data; cached with the checkpoints).
        ``run_fed``: the data a seed already opened, reused when it is the first seed's."""
        if self.compute is None:
            seed = self.config.seeds[0]
            fed = run_fed if run_fed is not None and run_fed.seed == seed else self.federated_data(seed)
            self.compute = probe_compute(
                self,
                fed,
                seed,
                method.config_dump,
                float(method.meta.relative_compute),
                cache_dir=self.run_dir(seed).parent,
            )
        return self.compute

    def federated_data(self, seed: int) -> FederatedData:
        """One seed's federation data under this run's settings."""
        cfg = self.config
        return load_federated_data(
            self.spec,
            self.scenario,
            seed,
            data_dir=cfg.data_dir,
            revision=cfg.revision,
            rounds=self.settings.rounds,
            local_steps=self.settings.local_steps,
            batch_size=self.settings.batch_size,
            scored_split=cfg.scored_split,
        )

    def run_dir(self, seed: int) -> Path:
        return (
            Path(self.config.out)
            / "checkpoints"
            / self.spec.name
            / self.scenario.tag()
            / self.config.method
            / f"seed-{seed}"
        )

    def ctx(self, client: int, round_idx: int, seed: int) -> ClientContext:
        return ClientContext(
            client_id=client,
            model_name=self.allocation[client],
            architecture=self._arch[client],
            round_idx=round_idx,
            seed=mixed_seed(seed, client, round_idx),
            device=self.config.device,
        )

    def federation_context(self, fed: FederatedData, seed: int, steps: int) -> FederationContext:
        """What a method's ``setup`` sees for this run and seed (also used to re-open a finished run's states)."""
        return FederationContext(
            benchmark=self.spec.name,
            modality=self.spec.modality,
            clients=fed.clients,
            allocation=dict(self.allocation),
            architectures=dict(self._arch),
            rounds=fed.config.rounds,
            local_steps=steps,
            batch_size=fed.config.batch_size,
            seed=seed,
            device=self.config.device,
            public_data=public_sampler(self.spec.modality),
            workdir=self.run_dir(seed) / "work",
        )

    def fingerprint(self, method: MethodHandle, seed: int, steps: int, eval_every: int, fed: FederatedData) -> str:
        """Hash of everything that shapes a seed's trajectory: a checkpoint resumes only the same run."""
        cfg = self.config
        assert self.evaluation is not None
        key = {
            "manifest": self.spec.content_hash,
            "data": fed.store.data_hash,
            "scenario": self.scenario.model_dump(mode="json"),
            "method": [method.meta.name, method.meta.version, method.config_dump],
            "allocation": self.allocation,
            "seed": seed,
            "rounds": fed.config.rounds,
            "local_steps": steps,
            "batch_size": fed.config.batch_size,
            "eval_every": eval_every,
            "others": cfg.others_subsample,
            "self": cfg.self_subsample,
            "evaluation": self.evaluation.model_dump(mode="json"),
            "checkpoints": self.checkpoints,
        }
        if cfg.participation is not None or cfg.clients_per_round is not None:  # absent before it existed: old
            key["participation"] = [cfg.participation, cfg.clients_per_round]  # checkpoints keep their fingerprint
        if cfg.numerics != "native":  # native is what every run did before the setting existed: their checkpoints
            key["numerics"] = cfg.numerics  # and result files keep their fingerprint
        if cfg.scored_split != "test":  # a tuning run scores another split: its checkpoints never resume a test run's
            key["scored_split"] = cfg.scored_split
        if cfg.client_batching and method.trains_clients_together:  # same numbers within float tolerance, not
            key["client_batching"] = True  # bit for bit: a checkpoint resumes only under the batching it ran with
        return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]

    # -- one seed, step by step -------------------------------------------------------
    def init_or_resume(self, seed: int) -> SeedRun:
        """Open the data, create and set up the method, then either resume the checkpoint or initialise every state."""
        fed = self.federated_data(seed)
        self.data_root = fed.store.root
        self.data_hash = fed.store.data_hash
        self.content_hash = fed.store.content_hash
        method = self.start_method(seed)
        try:
            return self._init_or_resume(seed, fed, method)
        except BaseException:
            method.close()
            raise

    def start_method(self, seed: int) -> MethodHandle:
        """The method, in its own worker process (``isolation='process'``) or in this one (``'inline'``)."""
        return self.open_method(self.config.method, self.config.method_config, seed)

    def open_method(self, name: str, method_config: dict[str, Any], seed: int) -> MethodHandle:
        """Any registered method under this run's isolation (the compute probe opens SFT beside the method)."""
        cfg = self.config
        if cfg.isolation == "process":
            proc = MethodProcess(
                name,
                method_config,
                seed=seed,
                call_timeout=cfg.call_timeout,
                numerics=cfg.numerics,
                confinement=self.confinement(seed),
            )
            self.cpu_capability, self.sandbox = proc.cpu_capability, proc.sandbox
            return proc
        self.sandbox = "none (inline)"
        # inline, the method computes in this process, under the numerics it started with (`drake-bench run`'s
        # workers apply the run's setting first thing; a caller's own process is left as it is): the record says
        self.cpu_capability = numerics.cpu_capability()
        if (note := numerics.shortfall(cfg.numerics, self.cpu_capability)) is not None:
            warnings.warn(note, RuntimeWarning, stacklevel=2)
        return GuardedMethod(create_method(name, method_config), seed)

    def confinement(self, seed: int) -> Confinement:
        """What the method's worker must not see: every folder that holds test answers, the run's checkpoints (and
        its uid secret) or results; the seed's work folder stays (drake_bench/backends/confine.py)."""
        home = data_home()
        hidden = [home / "built", home / "hub", Path(self.config.out), *dataset_caches()]
        hidden += [Path(p) for p in (self.data_root, self.config.data_dir) if p is not None]
        return Confinement(hidden=tuple(str(p) for p in hidden), kept=(str(self.run_dir(seed) / "work"),))

    @staticmethod
    def setup_seed(seed: int) -> int:
        return mixed_seed(seed, SALT_SETUP)

    @staticmethod
    def init_client_seed(seed: int, client: int) -> int:
        return mixed_seed(seed, client, SALT_INIT_CLIENT)

    def seed_fingerprint(self, seed: int) -> str:
        """The fingerprint ``seed`` would run under now, without running it (the method is started and its models
        described, not set up): what a seed kept in an earlier result file must match to be reused."""
        fed = self.federated_data(seed)
        self.data_root = fed.store.root
        self.data_hash = fed.store.data_hash
        self.content_hash = fed.store.content_hash
        method = self.start_method(seed)
        try:
            self.describe_models(method)
            steps = self.method_local_steps(method, fed)
            return self.fingerprint(method, seed, steps, self.eval_every, fed)
        finally:
            method.close()

    @property
    def eval_every(self) -> int:
        return self.settings.eval_every_rounds

    def _init_or_resume(self, seed: int, fed: FederatedData, method: MethodHandle) -> SeedRun:
        cfg = self.config
        self.describe_models(method)
        steps = self.method_local_steps(method, fed)
        eval_every = self.eval_every
        run = SeedRun(
            seed=seed,
            fed=fed,
            method=method,
            federation=self.federation_context(fed, seed, steps),
            local_steps=steps,
            eval_every=eval_every,
            run_dir=self.run_dir(seed),
        )
        t0 = time.perf_counter()
        run.setup_seed = self.setup_seed(seed)
        method.setup(run.federation, rng_seed=run.setup_seed)
        setup_seconds = time.perf_counter() - t0

        fingerprint = self.fingerprint(method, seed, steps, eval_every, fed)
        prog = checkpoint.load(run.run_dir) if cfg.resume else None
        if prog is not None and prog.extra.get("fingerprint") != fingerprint:
            raise DrakeBenchError(
                f"checkpoint in {run.run_dir} was written by a different run configuration (benchmark, scenario, method "
                "config, allocation, rounds, steps or evaluation settings differ); resume only continues the same "
                "run: use another --out, or --no-resume to start over"
            )
        if prog is not None:
            run.states, run.server, run.messages = prog.clients, prog.server or State(), prog.messages
            run.scores = [ScoreRecord(**r) for r in prog.records.get("scores", [])]
            run.costs = [CostRecord(**r) for r in prog.records.get("costs", [])]
            run.server_costs = [ServerCostRecord(**r) for r in prog.records.get("server_costs", [])]
            run.diagnostics = [DiagnosticRecord(**r) for r in prog.records.get("diagnostics", [])]
            run.absences = [AbsenceRecord(**r) for r in prog.records.get("absences", [])]
            run.start_round, run.extra = prog.completed_rounds, prog.extra
            run.access = AccessLedger.from_state(run.extra.pop(DATA_ACCESS_KEY, None))
            # the shards the finished rounds read, verified then: a run resumed with nothing left to read still
            # records what its numbers came from
            run.verified = run.extra.pop(VERIFIED_KEY, None) or self._verify_federation_data(fed)
            # the seconds spent up to the checkpoint, so a resumed seed's phases count the whole seed (what ran
            # after the last checkpoint and before the interruption is lost, as its work is)
            run.phase_seconds.update(run.extra.pop(PHASE_SECONDS_KEY, None) or {})
            run.extra.setdefault("uid_key", secrets.token_hex(16))
            return run
        for c in fed.clients:
            run.states[c] = method.init_client(self.ctx(c, 0, seed), rng_seed=self.init_client_seed(seed, c))
        run.server = method.init_server()
        run.messages = {c: None for c in fed.clients}
        # sample and query ids shown to the method are keyed with this run's secret, so they cannot be
        # inverted into task names and rows (kept with the checkpoint, so a resumed run shows the same ids)
        run.extra = {"setup_seconds": setup_seconds, "fingerprint": fingerprint, "uid_key": secrets.token_hex(16)}
        return run

    def _verify_federation_data(self, fed: FederatedData) -> dict[str, str]:
        """Verify every shard this seed's federation reads (its clients' tasks and the unseen tasks, both splits),
        for a checkpoint that did not keep the hashes its rounds verified (written before they were kept)."""
        tasks = sorted({t for c in fed.clients for t in fed.client_tasks(c)} | set(fed.unseen_tasks))
        root = fed.store.root
        for task in tasks:
            for split in ("train", "test"):
                fed.store.verify_file(shard_path(root, task, split).relative_to(root).as_posix())
        return dict(fed.store.verified_files)

    def participants(self, run: SeedRun, r: int) -> list[int]:
        """The clients drawn to train in round ``r`` (every client unless the run samples them)."""
        return sample_participants(run.clients, run.seed, r, self.config.participation, self.config.clients_per_round)

    def train_round(self, run: SeedRun, r: int) -> dict[int, tuple[Message, float]]:
        """The ``client_update`` of round ``r`` of every client drawn for it: its upload and the seconds it took.

        Clients not drawn, and clients whose backend could not reach them, are recorded in ``run.absences`` and
        keep their state and pending message."""
        chosen = self.participants(run, r)
        jobs = [
            TrainJob(
                c,
                ctx,
                run.states[c],
                run.messages[c],
                run.fed.round_batches(c, r, local_steps=run.local_steps, uid_key=run.uid_key),
            )
            for c in chosen
            for ctx in [self.ctx(c, r, run.seed)]
        ]
        for job in jobs:
            run.access.gave_with_answers(job.batches)
        replies = self.clients.train(run, r, jobs) if jobs else {}
        uploads: dict[int, tuple[Message, float]] = {}
        for c in run.clients:
            reply = replies.get(c, "not sampled" if c not in chosen else "no reply")
            if isinstance(reply, TrainReply):
                run.states[c] = reply.state
                uploads[c] = (reply.upload, reply.seconds)
                run.diagnostics += [
                    DiagnosticRecord(seed=run.seed, round=r + 1, key=f"client/{c}/{row['key']}", values=row["values"])
                    for row in reply.diagnostics
                ]
                if reply.peak_memory_bytes:
                    run.client_peaks[c] = max(run.client_peaks.get(c, 0), reply.peak_memory_bytes)
            elif c in chosen:
                run.absences.append(
                    AbsenceRecord(seed=run.seed, round=r + 1, client=c, reason="no reply", detail=reply)
                )
            else:
                run.absences.append(AbsenceRecord(seed=run.seed, round=r + 1, client=c, reason="not sampled"))
        if not uploads:
            lost = "; ".join(f"client {a.client}: {a.detail}" for a in run.absences if a.round == r + 1)
            raise DrakeBenchError(
                f"seed {run.seed} round {r + 1}: no client answered ({lost}); the checkpoint after "
                f"round {r} in {run.run_dir} resumes the run"
            )
        return uploads

    def aggregate_round(self, run: SeedRun, r: int, uploads: dict[int, tuple[Message, float]]) -> None:
        """The server's ``aggregate`` of round ``r`` over the uploads it received (timed here, around the call), the
        method's diagnostics of it (optional), then the round's cost records (bytes both ways, time, memory) of the
        clients that took part."""
        t0 = time.perf_counter()
        messages, run.server = run.method.aggregate(
            r, run.server, {c: up for c, (up, _) in uploads.items()}, rng_seed=mixed_seed(run.seed, r, SALT_AGGREGATE)
        )
        run.server_costs.append(
            ServerCostRecord(seed=run.seed, round=r + 1, aggregate_seconds=time.perf_counter() - t0)
        )
        run.diagnostics += [
            DiagnosticRecord(seed=run.seed, round=r + 1, **row) for row in run.method.round_diagnostics(r)
        ]
        run.messages.update(messages)
        peak = run.method.peak_memory_bytes()
        for c in run.clients:
            if c not in uploads:
                continue
            up, dt = uploads[c]
            run.costs.append(
                CostRecord(
                    seed=run.seed,
                    round=r + 1,
                    client=c,
                    uplink_bytes=up.num_bytes(),
                    downlink_bytes=messages[c].num_bytes(),
                    train_seconds=dt,
                    peak_memory_bytes=max(peak, run.client_peaks.get(c, 0)),
                    uplink_elements=up.elements_by_dtype(),
                    downlink_elements=messages[c].elements_by_dtype(),
                )
            )

    def is_eval_round(self, run: SeedRun, r: int) -> bool:
        return (r + 1) % run.eval_every == 0 or r + 1 == run.rounds

    def _predict_score(self, run: SeedRun, ctx: ClientContext, state: State, samples: list[Sample]) -> float:
        queries = [s.as_query(run.uid_key) for s in samples]
        run.access.asked(queries)
        preds = run.method.predict(ctx, state, queries)
        return float(np.mean(self.score(preds, samples))) if samples else 0.0

    def evaluate(self, run: SeedRun, states: dict[int, State], round_idx: int) -> list[ScoreRecord]:
        """Self and Others scores of every client's model after round ``round_idx``, on the tasks seen so far.

        The queries (answers removed) go out through the client calls, one job per client; the answers stay here and
        every score is computed here."""
        cfg, fed = self.config, run.fed
        # which items for which (client, owner, task, role): one plan, shared with evaluate_client (evaluation.cells)
        self_limit, others_limit = self.settings.self_subsample, self.settings.others_subsample
        plan = plan_cells(fed, round_idx, self_limit, others_limit)  # client by client, in fed.clients order
        planned: dict[int, list[EvalCell]] = {c: [] for c in fed.clients}
        for cell in plan:
            planned[cell.client].append(cell)
        jobs: list[PredictJob] = []
        for c in fed.clients:  # one job per client, one query group per cell: the answers come back in plan order
            job = PredictJob(c, self.ctx(c, round_idx, run.seed), states[c], [])
            for cell in planned[c]:
                queries = [s.as_query(run.uid_key) for s in cell.samples]
                run.access.asked(queries)
                job.groups.append(queries)
            if cfg.predict_per_client and job.groups:  # one call: the cells' queries in order, cut back below
                job.groups = [[q for group in job.groups for q in group]]
            jobs.append(job)
        answers = self.clients.predict(run, jobs)
        for job, preds in zip(jobs, answers):  # (the guard checks each call; this, what came back)
            for queries, p in zip(job.groups, preds, strict=True):
                if len(p) != len(queries):  # one short answer list must not shift every later cell's scores
                    raise DrakeBenchError(
                        f"{self.config.method}: predict returned {len(p)} answers for "
                        f"{len(queries)} queries (client {job.client})"
                    )
        # every answer of the evaluation point scored in one call (a judge rates them in one batch), then cut back
        # into the (client, owner, task) cells in order
        flat_preds = [a for preds in answers for p in preds for a in p]
        flat_samples = [s for cell in plan for s in cell.samples]
        return cell_records(plan, self.score(flat_preds, flat_samples), seed=run.seed, eval_round=round_idx + 1)

    def save_checkpoint(self, run: SeedRun, completed_rounds: int) -> None:
        checkpoint.save(
            run.run_dir,
            checkpoint.RunProgress(
                completed_rounds=completed_rounds,
                clients=run.states,
                server=run.server,
                messages=run.messages,
                records={
                    "scores": [s.model_dump() for s in run.scores],
                    "costs": [c.model_dump() for c in run.costs],
                    "server_costs": [c.model_dump() for c in run.server_costs],
                    "diagnostics": [d.model_dump() for d in run.diagnostics],
                    "absences": [a.model_dump() for a in run.absences],
                },
                extra={
                    **run.extra,
                    DATA_ACCESS_KEY: run.access.state(),
                    VERIFIED_KEY: {**run.verified, **run.fed.store.verified_files},
                    PHASE_SECONDS_KEY: dict(run.phase_seconds),
                },
            ),
        )

    def post_federation(self, run: SeedRun) -> None:
        """The optional stage after the last round, timed around the call (as ``aggregate``); its models replace the
        final evaluation point. The replaced rows are kept apart (``raw.scores_before_post_federation``): what a
        stage such as a final global model or a post-training gains or costs over the clients' own last models is
        then read from one result file, not from a second run."""
        if not run.method.has_post_federation or run.extra.get("post_federation_done"):
            return
        t0 = time.perf_counter()
        run.states = run.method.post_federation(run.federation, run.states, run.server)
        run.post_federation_costs.append(
            PostFederationCostRecord(seed=run.seed, post_federation_seconds=time.perf_counter() - t0)
        )
        run.extra["post_federation_done"] = True
        last = run.rounds
        run.scores_before_post_federation = [s for s in run.scores if s.eval_round == last]
        run.scores = [s for s in run.scores if s.eval_round != last] + self.evaluate(run, run.states, last - 1)

    def fast_adaptation(self, run: SeedRun) -> list[AdaptationRecord]:
        """Adapt to each unseen task from the method's start and from a fresh start, once per architecture."""
        cfg, fed, method, seed = self.config, run.fed, run.method, run.seed
        if not cfg.fast_adaptation or not method.has_adaptation or not fed.unseen_tasks:
            return []
        iters, every = self.settings.fast_adaptation_iters, self.settings.fast_adaptation_eval_every
        tasks = cfg.fast_adaptation_tasks or fed.unseen_tasks
        batch_size = self.settings.batch_size
        records: list[AdaptationRecord] = []
        by_arch: dict[str, list[int]] = {}
        for c in fed.clients:
            by_arch.setdefault(self._arch[c], []).append(c)
        for arch, members in sorted(by_arch.items()):
            rep = members[0]
            for task in tasks:
                fed.spec.task(task)
                self.cb.on_adaptation(seed, task, arch)
                train = fed.train_samples(task)
                test = fed.test_samples(task, limit=cfg.fast_adaptation_test_items)
                inits = {
                    "method": lambda: method.adaptation_state(
                        arch, {c: run.states[c] for c in members}, run.server, rep
                    ),
                    "fresh": lambda: method.init_client(self.ctx(rep, 0, seed)),
                }
                for init_name, make in inits.items():
                    state = make()
                    rng = np.random.default_rng([seed, rep, len(task), SALT_ADAPTATION_BATCHES])
                    done = 0
                    while True:
                        ctx = self.ctx(rep, ADAPTATION_ROUND_OFFSET + done, seed)
                        score = self._predict_score(run, ctx, state, test)
                        records.append(
                            AdaptationRecord(
                                seed=seed, task=task, arch=arch, init=init_name, iteration=done, score=score
                            )
                        )
                        if done >= iters:
                            break
                        steps = min(every, iters - done)
                        batches = [
                            [
                                train[i].for_method(run.uid_key)
                                for i in rng.choice(len(train), size=min(batch_size, len(train)), replace=False)
                            ]
                            for _ in range(steps)
                        ]
                        run.access.gave_with_answers(batches)
                        _msg, state = method.client_update(
                            ctx, state, None, batches, call="fast adaptation client_update", rng_seed=ctx.seed
                        )
                        done += steps
        return records

    def run_seed(self, seed: int) -> tuple[RawTables, dict[str, Any]]:
        """One seed from start (or its checkpoint) to the raw tables."""
        t0 = time.perf_counter()
        run = self.init_or_resume(seed)
        run.phase_seconds["setup"] = run.phase_seconds.get("setup", 0.0) + time.perf_counter() - t0
        try:
            return self._run_rounds(run)
        finally:
            run.method.close()

    def _run_rounds(self, run: SeedRun) -> tuple[RawTables, dict[str, Any]]:
        try:
            return self._rounds(run)
        finally:
            self.verified_files.update({**run.verified, **run.fed.store.verified_files})

    def _rounds(self, run: SeedRun) -> tuple[RawTables, dict[str, Any]]:
        seed = run.seed
        for r in range(run.start_round, run.rounds):
            self.cb.on_round(seed, r, run.rounds)
            with run.timed("training"):
                uploads = self.train_round(run, r)
            with run.timed("aggregation"):
                self.aggregate_round(run, r, uploads)
            if self.is_eval_round(run, r):
                self.cb.on_eval(seed, r)
                with run.timed("evaluation"):
                    run.scores.extend(self.evaluate(run, run.states, r))
            with run.timed("checkpoint"):
                self.save_checkpoint(run, r + 1)
        with run.timed("post_federation"):
            self.post_federation(run)
        with run.timed("fast_adaptation"):
            adaptation = self.fast_adaptation(run)
        info = {
            "local_steps": run.local_steps,
            "rounds": run.rounds,
            "eval_every_rounds": run.eval_every,
            "phase_seconds": dict(run.phase_seconds),
            "method_version": run.method.meta.version,
            "method_config": run.method.config_dump,
            **{k: v for k, v in run.extra.items() if k != "uid_key"},
            DATA_ACCESS_KEY: run.access.record(),
        }
        return RawTables(
            scores=run.scores,
            adaptation=adaptation,
            costs=run.costs,
            server_costs=run.server_costs,
            diagnostics=run.diagnostics,
            post_federation_costs=run.post_federation_costs,
            absences=run.absences,
            scores_before_post_federation=run.scores_before_post_federation,
        ), info


# --------------------------------------------------------------------------- whole run
class EarlierSeeds:
    """The seeds an earlier invocation finished and wrote into this run's result file (complete or partial).

    A seed is taken from the file only when its recorded fingerprint equals the one it would run under now
    (same benchmark data, scenario, method version and config, models, steps, evaluation settings); a seed of
    the same method version under another configuration is refused, as a checkpoint is. Files written before
    fingerprints were recorded are ignored (those seeds resume from their checkpoints, or run again)."""

    def __init__(self, config: RunConfig, ev: Evaluator):
        self.ev = ev
        folder = Path(config.out) / ev.spec.name / ev.scenario.tag() / config.method
        self.files: list[tuple[Path, RunResult]] = []
        for path in sorted(folder.glob(f"*/{RESULT_FILE}")):
            try:
                self.files.append((path, read_result(path)))
            except DrakeBenchError as exc:
                raise DrakeBenchError(
                    f"cannot resume from {path}: {exc}. Move it away, or start over with `--no-resume`"
                ) from None

    def take(self, seed: int) -> tuple[RawTables, dict[str, Any]] | None:
        """``seed``'s raw tables and run information from the file, or None when it must run."""
        holding = [
            (path, res) for path, res in self.files if str(seed) in (res.fl.extra.get(SEED_FINGERPRINTS_KEY) or {})
        ]
        if not holding:
            return None
        fingerprint = self.ev.seed_fingerprint(seed)
        for path, res in holding:
            kept = res.fl.extra[SEED_FINGERPRINTS_KEY][str(seed)]
            if kept == fingerprint:
                return self._seed(res, seed, fingerprint)
            if res.method.version == self.ev.method_version:
                raise DrakeBenchError(
                    f"{path} holds seed {seed} from a different run configuration (benchmark, scenario, method config, "
                    "allocation, rounds, steps or evaluation settings differ); resume only continues the same run: "
                    "use another --out, or --no-resume to start over"
                )
        return None

    def _seed(self, res: RunResult, seed: int, fingerprint: str) -> tuple[RawTables, dict[str, Any]]:
        raw = res.raw.for_seed(seed)
        self.ev.verified_files.update(res.benchmark.verified_files)
        extra = res.fl.extra
        info = {
            "method_version": res.method.version,
            "method_config": res.method.config,
            "rounds": res.fl.rounds,
            "local_steps": res.fl.local_steps,
            "eval_every_rounds": res.fl.eval_every_rounds,
            "fingerprint": fingerprint,
            DATA_ACCESS_KEY: extra[DATA_ACCESS_KEY][str(seed)],
            "phase_seconds": (extra.get(PHASE_SECONDS_KEY) or {}).get(str(seed), {}),
        }
        self.ev.cb.on_kept_seed(seed)
        return raw, info


def run(config: RunConfig, callbacks: RunCallbacks | None = None) -> RunResult:
    """Run every seed of one method (resuming from checkpoints), write the result file, and return it.

    If a seed fails, the seeds finished so far are written as a ``partial`` result before the
    error propagates, so nothing that finished is lost. Several methods side by side, with the
    benchmark built and models prepared first: :func:`drake_bench.runner.run_methods`.
    """
    if config.backend == "flower":
        return run_on_flower([config], callbacks)[0]
    with RunLock(config.out):
        return run_holding_lock(config, callbacks)


def run_on_flower(configs: Sequence[RunConfig], callbacks: RunCallbacks | None = None) -> list[RunResult]:
    """Runs of one benchmark with ``backend='flower'``: in one Flower simulation, one after another (Ray starts once
    for all of them), or each submitted to the deployed federation ``superlink`` names. See drake_bench.backends.flower."""
    from drake_bench.backends import flower  # the optional extra: a clear error when Flower is not installed

    deployed = [c for c in configs if c.superlink is not None]
    if deployed:  # a deployed federation's ServerApp takes the lock where it runs
        if len(deployed) != len(configs):
            raise DrakeBenchError("runs given together either all name a superlink or none does")
        return [flower.deploy(c) for c in configs]
    if len({c.out for c in configs}) != 1 or len({c.benchmark for c in configs}) != 1:
        raise DrakeBenchError("runs in one Flower simulation share one benchmark and one output folder")
    with RunLock(configs[0].out):
        clients = list(load_benchmark(configs[0].benchmark).client_ids)
        return flower.simulate(list(configs), lambda config, calls: run_holding_lock(config, callbacks, calls), clients)


def run_holding_lock(
    config: RunConfig, callbacks: RunCallbacks | None, clients: ClientCalls | None = None
) -> RunResult:
    """The whole run, for a caller that already holds the output folder's :class:`RunLock` (:func:`run` takes it; a
    deployed Flower ServerApp takes it where it runs); ``clients`` is where client calls run (default: here)."""
    ev = Evaluator(config, callbacks, clients)
    raws: list[RawTables] = []
    info: dict[str, Any] = {}
    done: list[int] = []
    data_hash = content_hash = None
    access: dict[
        str, Any
    ] = {}  # seed -> the evaluator's record of what the method was handed (drake_bench.evaluator.access)
    phases: dict[
        str, dict[str, float]
    ] = {}  # seed -> wall seconds per phase (this invocation's share of a resumed run)
    fingerprints: dict[str, str] = {}  # seed -> the configuration hash it ran under (resume from the result file)

    def result(status: str, notes: list[str]) -> RunResult:
        merged = RawTables.concat(raws)
        alloc_name = ev.settings.allocation_name
        assert ev.evaluation is not None
        return new_result(
            benchmark=BenchmarkRef(
                name=ev.spec.name,
                version=ev.spec.version,
                manifest_hash=ev.spec.content_hash or "",
                data_hash=data_hash,
                content_hash=content_hash,
                verified_files=dict(sorted(ev.verified_files.items())),
            ),
            scenario=ScenarioRef(tag=ev.scenario.tag(), config=ev.scenario.model_dump(mode="json")),
            method=MethodRef(
                name=config.method,
                version=str(info.get("method_version", "unknown")),
                config=info.get("method_config", config.method_config),
                package=ev.method_package,
            ),
            model_allocation=ModelAllocationRef(
                name=alloc_name, clients={str(k): v for k, v in ev.allocation.items()}, checkpoints=ev.checkpoints
            ),
            seeds=done or list(config.seeds),
            fl=FLSettings(
                rounds=info.get("rounds", ev.settings.rounds),
                local_steps=info.get("local_steps", ev.settings.local_steps),
                batch_size=ev.settings.batch_size,
                eval_every_rounds=info.get("eval_every_rounds"),
                eval_rounds=sorted({s.eval_round for s in merged.scores}),
                others_subsample=ev.settings.others_subsample,
                num_clients=len(ev.spec.clients),
                extra={
                    "compute_matched": config.compute_matched,
                    "run_config": config.model_dump(mode="json"),
                    DATA_ACCESS_KEY: dict(access),
                    PHASE_SECONDS_KEY: dict(phases),
                    SEED_FINGERPRINTS_KEY: dict(fingerprints),
                    SANDBOX_KEY: ev.sandbox,
                    **({"compute": ev.compute.summary()} if ev.compute is not None else {}),
                },
            ),
            evaluation=ev.evaluation,
            environment=capture_environment(config.device, ev.cpu_capability),
            raw=merged,
            status=status,  # type: ignore[arg-type]
            notes=notes + [n for n in [numerics.shortfall(config.numerics, ev.cpu_capability)] if n],
        )

    def write(res: RunResult) -> None:
        path = res.path(config.out)
        if config.resume:
            refuse_dropping_seeds(path, config.seeds)
        write_result(res, path)

    def write_partial(note: str) -> None:
        write(result("partial", [note]))

    earlier = EarlierSeeds(config, ev) if config.resume else None
    for seed in config.seeds:
        kept = earlier.take(seed) if earlier is not None else None
        if kept is not None:  # finished by an earlier invocation under this very configuration
            raw, seed_info = kept
            info = info or seed_info
        else:
            try:
                raw, info = ev.run_seed(seed)
            except BaseException as exc:
                if done:
                    write_partial(f"seed {seed} failed: {exc}")
                raise
            seed_info = info
        raws.append(raw)
        done.append(seed)
        access[str(seed)] = seed_info[DATA_ACCESS_KEY]
        phases[str(seed)] = seed_info["phase_seconds"]
        fingerprints[str(seed)] = seed_info["fingerprint"]
        data_hash, content_hash = ev.data_hash, ev.content_hash
        if len(done) < len(config.seeds):  # on disk before the next seed starts: a kill loses at most one seed
            write_partial(f"seeds {done} finished, {[s for s in config.seeds if s not in done]} not yet run")
    final = result("complete", [])
    write(final)
    return final


def refuse_dropping_seeds(path: Path, seeds: Sequence[int]) -> None:
    """Refuse to replace a result file that holds seeds this run does not: a later run with other ``--seeds`` into
    the same folder replaced a finished result silently. Nothing is lost by the refusal: the seeds this run finished
    keep their checkpoints, so the command the error gives resumes them and takes the file's seeds from the file."""
    if not path.exists():
        return
    try:
        held = read_result(path).seeds
    except DrakeBenchError:
        return  # unreadable: resuming from it was refused already, with its own error
    dropped = sorted(set(held) - set(seeds))
    if dropped:
        union = ",".join(str(s) for s in sorted(set(held) | set(seeds)))
        raise DrakeBenchError(
            f"{path} holds seeds {held} of this method; this run (seeds {list(seeds)}) would replace it and lose seeds "
            f"{dropped}. Run --seeds {union} to add to it (finished seeds are not run again), use another --out, or "
            "--no-resume to replace it"
        )
