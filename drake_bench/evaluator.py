"""The standard evaluator: drives a method through a benchmark's rounds and owns every number.

Methods train and predict; the evaluator decides what they see (streams with the leakage
guard), when they are evaluated (every ``eval_every_rounds``), on what (Self: the client's own
tasks seen so far; Others: other clients' seen tasks, seeded subsample per spec A16; unseen
tasks through fast adaptation), and how items are scored (drake_bench.evaluation.scoring). It
measures message bytes, wall time and peak memory itself, checkpoints after every round and
resumes a killed run to identical results. A plugin that raises or returns something malformed
fails with a :class:`PluginError` naming the method, client and round; what finished stays on disk.
"""

from __future__ import annotations

import random
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field, field_validator

from . import checkpoint
from .errors import DrakeBenchError, PluginError
from .evaluation.metrics import AdaptationRecord, CostRecord, RawTables, ScoreRecord
from .evaluation.scoring import score_batch
from .results import (
    BenchmarkRef,
    EvaluationSettings,
    FLSettings,
    MethodRef,
    ModelAllocationRef,
    RunResult,
    ScenarioRef,
    capture_environment,
    new_result,
    write_result,
)
from .manifest import load_benchmark
from .protocol import AdaptationInit, ClientContext, FederationContext, Message, Method, PostFederation, State, mixed_seed
from .registry import create_method
from .sample import Sample
from .scenarios import parse_scenario
from .stream import FederatedData, load_federated_data

class RunConfig(BaseModel):
    """Everything that defines a run; stored verbatim in the result file."""

    model_config = ConfigDict(extra="forbid")

    benchmark: str = "drake-synth"
    scenario: str | None = Field(default=None, description="None: the manifest's default scenario.")
    method: str = "sft"
    method_config: dict[str, Any] = Field(default_factory=dict)
    seeds: list[int] = Field(default_factory=lambda: [0], min_length=1)
    allocation: str | None = Field(default=None, description="Model allocation name from the manifest.")
    rounds: int | None = Field(default=None, ge=1)
    local_steps: int | None = Field(default=None, ge=1)
    batch_size: int | None = Field(default=None, ge=1)
    eval_every_rounds: int | None = Field(default=None, ge=1)
    others_subsample: int | None = Field(default=None, ge=1, description="Cap on Others items per task; None: manifest.")
    self_subsample: int | None = Field(default=None, ge=1, description="Cap on Self items per task; None: manifest.")
    compute_matched: bool = Field(default=False, description="Scale local steps by 1/relative compute (spec A10).")
    fast_adaptation: bool = True
    fast_adaptation_iters: int | None = Field(default=None, ge=1)
    fast_adaptation_eval_every: int | None = Field(default=None, ge=1)
    fast_adaptation_tasks: list[str] | None = Field(default=None, description="Subset of unseen tasks; None: all.")
    fast_adaptation_test_items: int | None = Field(default=32, ge=1)
    device: str = "cpu"
    data_dir: str | None = None
    revision: str | None = None
    out: str = "runs"
    resume: bool = True

    @field_validator("seeds")
    @classmethod
    def _distinct_seeds(cls, seeds: list[int]) -> list[int]:
        if len(set(seeds)) != len(seeds):  # a repeated seed would rerun and double-count itself in mean +- std
            raise ValueError(f"seeds must be distinct, got {seeds}")
        return seeds


class RunCallbacks:
    """Hooks for progress display; the CLI draws rich bars with them."""

    def on_round(self, seed: int, round_idx: int, total: int) -> None: ...

    def on_client(self, seed: int, round_idx: int, client: int) -> None: ...

    def on_eval(self, seed: int, round_idx: int) -> None: ...

    def on_adaptation(self, seed: int, task: str, arch: str) -> None: ...


def _peak_memory_bytes() -> int:
    if torch.cuda.is_available():
        return int(torch.cuda.max_memory_allocated())
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


class Evaluator:
    """Runs one method on one benchmark/scenario for each seed and returns the raw tables."""

    def __init__(self, config: RunConfig, callbacks: RunCallbacks | None = None):
        self.config = config
        self.cb = callbacks or RunCallbacks()
        self.spec = load_benchmark(config.benchmark)
        self.scenario = parse_scenario(config.scenario if config.scenario is not None else self.spec.scenarios.default)
        self.allocation = self._allocation()

    # -- set-up ----------------------------------------------------------------
    def _allocation(self) -> dict[int, str]:
        if self.spec.model_allocations:
            return self.spec.allocation(self.config.allocation)
        return {c: "none" for c in self.spec.client_ids}

    def _architectures(self) -> dict[int, str]:
        try:
            from .models.zoo import architecture_key
        except ImportError:  # pragma: no cover - models extra missing
            return dict(self.allocation)
        out = {}
        for c, name in self.allocation.items():
            try:
                out[c] = architecture_key(name)
            except Exception:  # not a zoo name (e.g. a model-free plugin): the name is the architecture
                out[c] = name
        return out

    def method_local_steps(self, method: Method) -> int:
        steps = self.config.local_steps or self.spec.fl.local_steps
        if self.config.compute_matched:
            rel = float(getattr(method, "relative_compute", 1.0))
            steps = max(1, round(steps / rel))
        return steps

    def run_dir(self, seed: int) -> Path:
        name = self.config.method
        return Path(self.config.out) / "checkpoints" / self.spec.name / self.scenario.tag() / name / f"seed-{seed}"

    def _public_data(self) -> Callable[[int], list[Sample]]:
        modality = self.spec.modality

        def get(n: int) -> list[Sample]:
            from .synth.public import public_mix, public_text_mix

            return (public_mix if modality == "multimodal" else public_text_mix)(n, seed=0)

        return get

    # -- guarded plugin calls ------------------------------------------------------
    def _fail(self, method: Method, what: str, client: int | None, round_idx: int | None, exc: BaseException) -> PluginError:
        where = []
        if client is not None:
            where.append(f"client {client}")
        if round_idx is not None:
            where.append(f"round {round_idx + 1}")
        loc = (" on " + ", ".join(where)) if where else ""
        return PluginError(f"method {method.name!r} failed in {what}{loc}: {type(exc).__name__}: {exc}")

    def _check_message(self, method: Method, what: str, msg: Any, client: int | None, round_idx: int | None) -> Message:
        if not isinstance(msg, Message):
            raise self._fail(method, what, client, round_idx, TypeError(f"returned {type(msg).__name__}, expected Message"))
        try:
            msg.validate()
        except ValueError as exc:
            raise self._fail(method, what, client, round_idx, exc) from None
        return msg

    # -- evaluation ----------------------------------------------------------------
    def _predict_scores(self, method: Method, ctx: ClientContext, state: State, samples: list[Sample]) -> float:
        queries = [s.as_query() for s in samples]
        try:
            preds = method.predict(ctx, state, queries)
        except DrakeBenchError:
            raise
        except Exception as exc:
            raise self._fail(method, "predict", ctx.client_id, ctx.round_idx, exc) from exc
        if not isinstance(preds, list) or len(preds) != len(samples) or not all(isinstance(p, str) for p in preds):
            raise self._fail(method, "predict", ctx.client_id, ctx.round_idx,
                             TypeError(f"must return a list of {len(samples)} strings"))
        return float(np.mean(score_batch(preds, samples))) if samples else 0.0

    def evaluate_round(self, method: Method, fed: FederatedData, states: dict[int, State], seed: int, round_idx: int) -> list[ScoreRecord]:
        cfg = self.config
        others_limit = cfg.others_subsample if cfg.others_subsample is not None else self.spec.fl.others_subsample
        self_limit = cfg.self_subsample if cfg.self_subsample is not None else self.spec.fl.self_subsample
        seen = {c: fed.seen_tasks(c, round_idx) for c in fed.clients}
        cache: dict[tuple[str, int, int | None], list[Sample]] = {}

        def items(task: str, owner: int, limit: int | None) -> list[Sample]:
            key = (task, owner, limit)
            if key not in cache:
                cache[key] = fed.test_samples(task, owner=owner, limit=limit)
            return cache[key]

        records = []
        for c in fed.clients:
            ctx = self.ctx(c, round_idx, seed)
            for j in fed.clients:
                role = "self" if j == c else "others"
                limit = self_limit if role == "self" else others_limit
                for task in seen[j]:
                    samples = items(task, j, limit)
                    if not samples:
                        continue
                    score = self._predict_scores(method, ctx, states[c], samples)
                    records.append(ScoreRecord(seed=seed, eval_round=round_idx + 1, client=c, task=task, owner=j,
                                               role=role, n=len(samples), score=score))
        return records

    def ctx(self, client: int, round_idx: int, seed: int) -> ClientContext:
        return ClientContext(
            client_id=client,
            model_name=self.allocation[client],
            architecture=self._arch[client],
            round_idx=round_idx,
            seed=mixed_seed(seed, client, round_idx),
            device=self.config.device,
        )

    # -- fast adaptation on unseen tasks (spec 5.2, A12) ----------------------------
    def fast_adaptation(self, method: Method, fed: FederatedData, states: dict[int, State], server: State, seed: int) -> list[AdaptationRecord]:
        cfg = self.config
        if not isinstance(method, AdaptationInit) or not fed.unseen_tasks:
            return []
        iters = cfg.fast_adaptation_iters or self.spec.fl.fast_adaptation_iters
        every = cfg.fast_adaptation_eval_every or self.spec.fl.fast_adaptation_eval_every
        tasks = cfg.fast_adaptation_tasks or fed.unseen_tasks
        batch_size = cfg.batch_size or self.spec.fl.batch_size
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
                    "method": lambda: method.adaptation_state(arch, {c: states[c] for c in members}, server),
                    "fresh": lambda: method.init_client(self.ctx(rep, 0, seed)),
                }
                for init_name, make in inits.items():
                    try:
                        state = make()
                    except Exception as exc:
                        raise self._fail(method, f"fast adaptation init ({init_name})", rep, None, exc) from exc
                    rng = np.random.default_rng([seed, rep, len(task), 0xFA])
                    done = 0
                    while True:
                        ctx = self.ctx(rep, 10_000 + done, seed)
                        score = self._predict_scores(method, ctx, state, test)
                        records.append(AdaptationRecord(seed=seed, task=task, arch=arch, init=init_name, iteration=done, score=score))
                        if done >= iters:
                            break
                        steps = min(every, iters - done)
                        batches = [[train[i].for_method() for i in rng.choice(len(train), size=min(batch_size, len(train)), replace=False)]
                                   for _ in range(steps)]
                        _seed_everything(ctx.seed)
                        try:
                            _msg, state = method.client_update(ctx, state, None, batches)
                        except Exception as exc:
                            raise self._fail(method, "fast adaptation client_update", rep, None, exc) from exc
                        done += steps
        return records

    def fingerprint(self, method: Method, seed: int, steps: int, eval_every: int, fed: FederatedData) -> str:
        """Hash of everything that shapes a seed's trajectory: a checkpoint resumes only the same run."""
        import hashlib
        import json

        cfg = self.config
        key = {
            "manifest": self.spec.content_hash, "data": fed.store.data_hash, "scenario": self.scenario.model_dump(mode="json"),
            "method": [method.name, method.version, method.config.model_dump(mode="json")], "allocation": self.allocation,
            "seed": seed, "rounds": fed.config.rounds, "local_steps": steps, "batch_size": fed.config.batch_size,
            "eval_every": eval_every, "others": cfg.others_subsample, "self": cfg.self_subsample,
            "evaluation": evaluation_settings().model_dump(mode="json"),
            "checkpoints": checkpoint_identities(self.allocation),
        }
        return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]

    # -- one seed ---------------------------------------------------------------------
    def federation_context(self, fed: FederatedData, seed: int, steps: int) -> FederationContext:
        """What a method's ``setup`` sees for this run and seed (also used to re-open a finished run's states)."""
        return FederationContext(
            benchmark=self.spec.name, modality=self.spec.modality, clients=fed.clients, allocation=dict(self.allocation),
            architectures=dict(self._arch), rounds=fed.config.rounds, local_steps=steps, batch_size=fed.config.batch_size,
            seed=seed, device=self.config.device, public_data=self._public_data(), workdir=self.run_dir(seed) / "work",
        )

    def run_seed(self, seed: int) -> tuple[RawTables, dict[str, Any]]:
        cfg = self.config
        fed = load_federated_data(
            self.spec, self.scenario, seed, data_dir=cfg.data_dir, revision=cfg.revision,
            rounds=cfg.rounds, local_steps=cfg.local_steps, batch_size=cfg.batch_size,
        )
        self._arch = self._architectures()
        self.data_hash = fed.store.data_hash
        method = create_method(cfg.method, cfg.method_config)
        steps = self.method_local_steps(method)
        rounds = fed.config.rounds
        eval_every = cfg.eval_every_rounds or self.spec.fl.eval_every_rounds
        run_dir = self.run_dir(seed)
        federation = self.federation_context(fed, seed, steps)
        _seed_everything(mixed_seed(seed, 0xC0FFEE))
        t0 = time.perf_counter()
        try:
            method.setup(federation)
        except DrakeBenchError:
            raise
        except Exception as exc:
            raise self._fail(method, "setup", None, None, exc) from exc
        setup_seconds = time.perf_counter() - t0

        fingerprint = self.fingerprint(method, seed, steps, eval_every, fed)
        prog = checkpoint.load(run_dir) if cfg.resume else None
        if prog is not None and prog.extra.get("fingerprint") != fingerprint:
            raise DrakeBenchError(
                f"checkpoint in {run_dir} was written by a different run configuration (benchmark, scenario, method "
                "config, allocation, rounds, steps or evaluation settings differ); resume only continues the same "
                "run: use another --out, or --no-resume to start over"
            )
        if prog is None:
            states = {}
            for c in fed.clients:
                _seed_everything(mixed_seed(seed, c, 0xA11))
                try:
                    st = method.init_client(self.ctx(c, 0, seed))
                except Exception as exc:
                    raise self._fail(method, "init_client", c, None, exc) from exc
                states[c] = st
            server = method.init_server()
            messages: dict[int, Message | None] = {c: None for c in fed.clients}
            scores: list[ScoreRecord] = []
            costs: list[CostRecord] = []
            start = 0
            extra = {"setup_seconds": setup_seconds, "fingerprint": fingerprint}
        else:
            states, server, messages = prog.clients, prog.server or State(), prog.messages
            scores = [ScoreRecord(**r) for r in prog.records.get("scores", [])]
            costs = [CostRecord(**r) for r in prog.records.get("costs", [])]
            start = prog.completed_rounds
            extra = prog.extra

        for r in range(start, rounds):
            self.cb.on_round(seed, r, rounds)
            uploads: dict[int, Message] = {}
            round_costs = {}
            for c in fed.clients:
                self.cb.on_client(seed, r, c)
                ctx = self.ctx(c, r, seed)
                batches = fed.client_stream(c).round(r, local_steps=steps)
                _seed_everything(ctx.seed)
                t0 = time.perf_counter()
                try:
                    out = method.client_update(ctx, states[c], messages[c], batches)
                except DrakeBenchError:
                    raise
                except Exception as exc:
                    raise self._fail(method, "client_update", c, r, exc) from exc
                dt = time.perf_counter() - t0
                if not (isinstance(out, tuple) and len(out) == 2):
                    raise self._fail(method, "client_update", c, r, TypeError("must return (upload Message, new State)"))
                upload = self._check_message(method, "client_update (upload)", out[0], c, r)
                new_state = self._check_message(method, "client_update (state)", out[1], c, r)
                states[c] = new_state if isinstance(new_state, State) else State(new_state.tensors, new_state.metadata)
                uploads[c] = upload
                round_costs[c] = (upload.num_bytes(), dt)
            _seed_everything(mixed_seed(seed, r, 0x5E))
            try:
                out = method.aggregate(r, server, uploads)
            except DrakeBenchError:
                raise
            except Exception as exc:
                raise self._fail(method, "aggregate", None, r, exc) from exc
            if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], dict)):
                raise self._fail(method, "aggregate", None, r, TypeError("must return (dict client -> Message, server State)"))
            new_messages, server = out
            missing = [c for c in fed.clients if c not in new_messages]
            if missing:
                raise self._fail(method, "aggregate", None, r, ValueError(f"no message for clients {missing}"))
            for c in fed.clients:
                messages[c] = self._check_message(method, "aggregate (message)", new_messages[c], c, r)
            server = self._check_message(method, "aggregate (server state)", server, None, r)
            server = server if isinstance(server, State) else State(server.tensors, server.metadata)
            peak = _peak_memory_bytes()
            for c in fed.clients:
                up, dt = round_costs[c]
                costs.append(CostRecord(seed=seed, round=r + 1, client=c, uplink_bytes=up,
                                        downlink_bytes=messages[c].num_bytes(), train_seconds=dt, peak_memory_bytes=peak))
            if (r + 1) % eval_every == 0 or r + 1 == rounds:
                self.cb.on_eval(seed, r)
                scores.extend(self.evaluate_round(method, fed, states, seed, r))
            checkpoint.save(run_dir, checkpoint.RunProgress(
                completed_rounds=r + 1, clients=states, server=server, messages=messages,
                records={"scores": [s.model_dump() for s in scores], "costs": [c.model_dump() for c in costs]},
                extra=extra,
            ))

        if isinstance(method, PostFederation) and not extra.get("post_federation_done"):
            try:
                after = method.post_federation(federation, states, server)
            except DrakeBenchError:
                raise
            except Exception as exc:
                raise self._fail(method, "post_federation", None, None, exc) from exc
            if not isinstance(after, dict) or sorted(after) != sorted(fed.clients):
                got = sorted(after) if isinstance(after, dict) else type(after).__name__
                raise self._fail(method, "post_federation", None, None,
                                 TypeError(f"must return a dict with a State for every client {sorted(fed.clients)}, got {got}"))
            states = {}
            for c in fed.clients:
                st = self._check_message(method, "post_federation", after[c], c, None)
                states[c] = st if isinstance(st, State) else State(st.tensors, st.metadata)
            extra["post_federation_done"] = True
            # the deployed models are the post-federation ones: they replace the final evaluation point
            scores = [s for s in scores if s.eval_round != rounds] + self.evaluate_round(method, fed, states, seed, rounds - 1)
        adaptation = self.fast_adaptation(method, fed, states, server, seed) if cfg.fast_adaptation else []
        info = {"local_steps": steps, "rounds": rounds, "eval_every_rounds": eval_every, "method_version": method.version,
                "method_config": method.config.model_dump(mode="json"), **extra}
        return RawTables(scores=scores, adaptation=adaptation, costs=costs), info


# --------------------------------------------------------------------------- whole run
def model_identity(name: str) -> dict[str, Any]:
    """What fixes a base model's weights: a tiny zoo model's pretraining recipe, else its source.

    Part of the checkpoint fingerprint (a run never resumes onto re-pretrained bases) and of the
    result file (two results are comparable only on the same bases).
    """
    from .errors import UnknownNameError
    from .models.zoo import model_info

    try:
        entry = model_info(name)
    except UnknownNameError:  # a method that brings its own models (allocation names are free-form)
        return {"source": name}
    if entry.tiny:
        from .models.pretrain import DEFAULT_RECIPE

        return {"source": "drake_bench tiny zoo", "recipe": DEFAULT_RECIPE.as_dict()}
    return {"source": entry.source}


def checkpoint_identities(allocation: dict[int, str]) -> dict[str, dict[str, Any]]:
    """:func:`model_identity` of every distinct model in an allocation."""
    return {m: model_identity(m) for m in sorted(set(allocation.values()))}


def evaluation_settings() -> EvaluationSettings:
    from .models import engine, prompting

    return EvaluationSettings(
        decoding={"do_sample": False, "num_beams": 1, "max_new_tokens": engine.OPEN_MAX_NEW_TOKENS,
                  "free_text_max_new_tokens": engine.FREE_TEXT_MAX_NEW_TOKENS,
                  "choice_scoring": "option text log-likelihood (cloze)"},
        batch_size=engine.EVAL_BATCH_SIZE,
        prompt_template_version=prompting.TEMPLATE_VERSION,
        padding_side="left",
    )


def run(config: RunConfig, callbacks: RunCallbacks | None = None) -> RunResult:
    """Run every seed (resuming from checkpoints), write the result file, and return it.

    If a seed fails, the seeds finished so far are written as a ``partial`` result before the
    error propagates, so nothing that finished is lost.
    """
    ev = Evaluator(config, callbacks)
    raws: list[RawTables] = []
    info: dict[str, Any] = {}
    done: list[int] = []
    data_hash = None

    def result(status: str, notes: list[str]) -> RunResult:
        merged = RawTables(
            scores=[r for t in raws for r in t.scores],
            adaptation=[r for t in raws for r in t.adaptation],
            costs=[r for t in raws for r in t.costs],
        )
        alloc_name = config.allocation or ev.spec.default_allocation or "none"
        return new_result(
            benchmark=BenchmarkRef(name=ev.spec.name, version=ev.spec.version, manifest_hash=ev.spec.content_hash or "",
                                   data_hash=data_hash),
            scenario=ScenarioRef(tag=ev.scenario.tag(), config=ev.scenario.model_dump(mode="json")),
            method=MethodRef(name=config.method, version=str(info.get("method_version", "unknown")),
                             config=info.get("method_config", config.method_config)),
            model_allocation=ModelAllocationRef(
                name=alloc_name, clients={str(k): v for k, v in ev.allocation.items()},
                checkpoints=checkpoint_identities(ev.allocation)),
            seeds=done or list(config.seeds),
            fl=FLSettings(
                rounds=info.get("rounds", config.rounds or ev.spec.fl.rounds),
                local_steps=info.get("local_steps", config.local_steps or ev.spec.fl.local_steps),
                batch_size=config.batch_size or ev.spec.fl.batch_size,
                eval_every_rounds=info.get("eval_every_rounds"),
                eval_rounds=sorted({s.eval_round for s in merged.scores}),
                others_subsample=config.others_subsample if config.others_subsample is not None else ev.spec.fl.others_subsample,
                num_clients=len(ev.spec.clients),
                extra={"compute_matched": config.compute_matched, "run_config": config.model_dump(mode="json")},
            ),
            evaluation=evaluation_settings(),
            environment=capture_environment(config.device),
            raw=merged,
            status=status,  # type: ignore[arg-type]
            notes=notes,
        )

    for seed in config.seeds:
        try:
            raw, info = ev.run_seed(seed)
        except BaseException as exc:
            if done:
                partial = result("partial", [f"seed {seed} failed: {exc}"])
                write_result(partial, partial.path(config.out))
            raise
        raws.append(raw)
        done.append(seed)
        data_hash = ev.data_hash
    final = result("complete", [])
    write_result(final, final.path(config.out))
    return final
