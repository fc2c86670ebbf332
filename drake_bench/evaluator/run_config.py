"""Everything that defines one evaluator run, typed, with help on every field.

A :class:`RunConfig` is stored verbatim in the result file (``fl.extra.run_config``), so a result
says exactly how to run it again. ``drake-bench run --help`` and ``drake-bench describe run`` print
these descriptions; ``None`` always means "the benchmark manifest's value".
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from drake_bench.core.numerics import Numerics


class Selection(BaseModel):
    """Where a run's hyperparameters were selected: a tuning record (:mod:`drake_bench.tuning`) and what it chose."""

    model_config = ConfigDict(extra="forbid")

    split: Literal["validation", "test"] = Field(
        description="The split the tuning runs were scored on; boards refuse 'test' (selection on test items)."
    )
    record_sha256: str | None = Field(
        default=None, description="sha256 of the tuning record file the values come from."
    )
    criterion: str | None = Field(
        default=None, description="The summary metric the record maximised (e.g. self_a_last)."
    )
    settings: dict[str, Any] = Field(
        default_factory=dict, description="The selected method_config values (each must equal the run's own)."
    )


class RunConfig(BaseModel):
    """One method on one benchmark and scenario, over one or more seeds."""

    model_config = ConfigDict(extra="forbid")

    benchmark: str = Field(
        default="drake-synth", description="Benchmark name (see `drake-bench list`) or a manifest path."
    )
    scenario: str | None = Field(
        default=None,
        description="static | dynamic | async | async:3-7-3-7 | dirichlet:0.5; None: the manifest's default scenario.",
    )
    method: str = Field(default="sft", description="Registered method name (see `drake-bench list`).")
    method_config: dict[str, Any] = Field(
        default_factory=dict, description="Fields of the method's Config (`drake-bench describe METHOD` lists them)."
    )
    seeds: list[int] = Field(
        default_factory=lambda: [0],
        min_length=1,
        description="Seeds, each a separate federation; results report mean and std over them.",
    )
    allocation: str | None = Field(
        default=None,
        description="Model allocation name from the manifest, or one written out as CLIENTS=MODEL items "
        "('1-4=tiny-llava-llama-s,5-10=tiny-llava-llama-m', 'all=tiny-llava-llama-l'); None: its default.",
    )
    rounds: int | None = Field(default=None, ge=1, description="Federated rounds; None: the manifest's.")
    local_steps: int | None = Field(
        default=None, ge=1, description="Local training steps per client and round; None: the manifest's."
    )
    batch_size: int | None = Field(default=None, ge=1, description="Training items per step; None: the manifest's.")
    eval_every_rounds: int | None = Field(
        default=None, ge=1, description="Evaluate after every N rounds (and the last); None: the manifest's."
    )
    others_subsample: int | None = Field(
        default=None,
        ge=0,
        description="Cap on Others items per task (a seeded subsample: every model is evaluated on every other "
        "client's tasks, which dominates evaluation cost); 0: Others not scored (for a board about "
        "Self alone where Others would cost clients x clients x tasks generations, e.g. Dirichlet "
        "splits of many clients; its Others columns stay empty); None: the manifest's.",
    )
    self_subsample: int | None = Field(
        default=None, ge=1, description="Cap on Self items per task; None: the manifest's."
    )
    compute_matched: bool = Field(
        default=False,
        description="Give the method the local steps that spend SFT's training FLOPs at the benchmark's steps, as the "
        "evaluator's compute probe measures them (one-off setup such as weight alignment included), so "
        "methods are compared at equal compute; implies measure_compute.",
    )
    measure_compute: bool = Field(
        default=False,
        description="Run the compute probe (the method and SFT each train one client of every model for one round, "
        "FLOPs counted by the evaluator) and record the measured relative compute in the result file.",
    )
    fast_adaptation: bool = Field(default=True, description="Evaluate fast adaptation on the benchmark's unseen tasks.")
    fast_adaptation_iters: int | None = Field(
        default=None, ge=1, description="Training steps of fast adaptation; None: the manifest's."
    )
    fast_adaptation_eval_every: int | None = Field(
        default=None, ge=1, description="Evaluate the adapting model every N steps; None: the manifest's."
    )
    fast_adaptation_tasks: list[str] | None = Field(
        default=None, description="Subset of unseen tasks to adapt to; None: all."
    )
    fast_adaptation_test_items: int | None = Field(
        default=32, ge=1, description="Test items per unseen task at each evaluation point."
    )
    device: str = Field(default="cpu", description="torch device given to the method (cpu, cuda, cuda:1, ...).")
    data_dir: str | None = Field(
        default=None, description="A built benchmark folder; None: the local build (embedded ones build themselves)."
    )
    revision: str | None = Field(default=None, description="A Hub revision to fetch the benchmark's splits from.")
    isolation: Literal["process", "inline"] = Field(
        default="process",
        description="'process': the method runs in its own worker process and sees only what it may (boards require "
        "it); 'inline': in the evaluator's process (for debugging a plugin; no isolation; the same numbers, except "
        "where numerics='portable' comes too late for a process that has already run kernels, which the "
        "run then warns of and notes).",
    )
    call_timeout: float | None = Field(
        default=None,
        gt=0,
        description="Seconds a single plugin call may take before the run stops with an error naming it (process "
        "isolation only); None: no limit.",
    )
    numerics: Numerics = Field(
        default="portable",
        description="CPU floating-point code paths. 'portable' holds torch, MKL and oneDNN to AVX2, so a seed gives the "
        "same numbers on every x86-64 host with AVX2. Trained scores drift between AVX2 and AVX-512 paths: "
        "the main job's SFT Self A_last is 35.21 on one and 37.08 on the other. 'native' lets each library "
        "use the host's best instruction set (the only behaviour before this setting existed). The result "
        "file records the capability used (environment.cpu_capability). See drake_bench/core/numerics.py.",
    )
    participation: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description="Partial participation: the fraction of clients drawn to train in each round (at least one; a "
        "seeded draw from the seed and the round, the same under every backend); None: every client "
        "trains every round. Every client is still evaluated at every evaluation point. Not with "
        "clients_per_round.",
    )
    clients_per_round: int | None = Field(
        default=None,
        ge=1,
        description="Partial participation: the number of clients drawn to train in each round (seeded as "
        "participation); None: every client. Not with participation.",
    )
    client_batching: bool = Field(
        default=False,
        description="Train the clients of one architecture together, in one pass per local step (a grouped LoRA: "
        "each item through its own client's adapter, each client its own loss, clipping and optimiser), "
        "where the method offers it (TrainsClientsTogether: SFT, FedIT and FedIT's server variants); the "
        "same numbers within float tolerance. It pays where one client leaves the device idle (a GPU); "
        "docs/performance.md measures it. Default backend only; per-client seconds are the group's "
        "seconds shared equally.",
    )
    predict_per_client: bool = Field(
        default=False,
        description="Ask each client's model once per evaluation point, all its queries (Self and Others, every task "
        "seen so far) in one predict call, instead of once per (owner, task) group. On fedllm-synth it "
        "made evaluation 2.6x (trained adapters) to 4.6x (random ones) faster, with no answer moved in "
        "1,000 (docs/performance.md), but a call's batch sets the padding each item is decoded with, so "
        "an answer can differ where two tokens are near-tied: recorded as evaluation.extra.predict_calls "
        "and in the run's fingerprint, and not what the canonical boards ran (they refuse it). For "
        "methods that answer each query on its own.",
    )
    backend: Literal["default", "flower"] = Field(
        default="default",
        description="'default': the evaluator drives every client itself, one after another; 'flower': the same "
        "rounds as a Flower ServerApp with one ClientApp per client, run by Flower's simulation engine "
        "(Ray; install the 'flower' extra). Same numbers either way (docs/scale-out.md).",
    )
    client_cpus: float = Field(
        default=1.0,
        gt=0,
        description="Flower backend: CPU cores Ray reserves for each ClientApp while it runs (a reservation: the "
        "method's torch threads are the caller's, as in the default backend, so the numbers agree).",
    )
    client_gpus: float = Field(
        default=0.0,
        ge=0,
        description="Flower backend: GPUs (a fraction shares one, e.g. 0.25: four ClientApps per GPU) Ray "
        "reserves for each ClientApp; give device='cuda' as well.",
    )
    flower_workers: int | None = Field(
        default=None,
        ge=1,
        description="Flower backend: ClientApps that may run at once (Ray is given flower_workers x client_cpus "
        "CPUs); None: as many as the machine's cores allow.",
    )
    round_timeout: float | None = Field(
        default=None,
        gt=0,
        description="Flower backend: seconds the ServerApp waits for one round's replies; a client whose node has "
        "not answered by then is recorded missing for that round (raw.absences, reason 'no reply'). "
        "None: wait until every node answers or Flower reports it lost.",
    )
    superlink: str | None = Field(
        default=None,
        description="Flower backend: run on a deployed federation (a SuperLink and its SuperNodes) instead of the "
        "simulation runtime; the name of its SuperLink connection in the Flower configuration "
        "($FLWR_HOME/config.toml), submitted with `flwr run`. None: the simulation runtime.",
    )
    judge: str | None = Field(
        default=None,
        description="Rate free-text answers 1-10 against the reference with an LLM judge (the Fed-Aya protocol: the "
        "Aya paper's prompt, a rating r scores r/10) instead of Rouge-L: a causal LM by zoo name, Hub id "
        "or local path (greedy decoding, in the evaluator's process), or 'module:attribute' naming a "
        "judge of your own (drake_bench.evaluation.judge.Judge). The judge's identity is recorded as "
        "the result's evaluation.judge. None: Rouge-L, reproducible offline.",
    )
    scorer_version: Literal["1.0", "2.0"] = Field(
        default="2.0",
        description="The scoring rules' version (drake_bench/evaluation/scoring.py); they differ in open answers only. "
        "'2.0': token F1 of the response's first max(2n, n+3) normalised tokens against the n-token "
        "answer, so listing every candidate answer does not pay. '1.0': token recall, which a response "
        "listing every training answer games (it scored above every real method); the rule the "
        "committed boards were scored with, kept so that they reproduce. Recorded as the result's "
        "evaluation.scorer_version.",
    )
    scored_split: Literal["test", "validation"] = Field(
        default="test",
        description="The split Self, Others and unseen-task adaptation are scored on. 'validation' is for selecting "
        "hyperparameters (`drake-bench tune` runs it; the benchmark version must hold a validation split); "
        "boards take 'test' runs only, and a method never sees either split.",
    )
    selection: Selection | None = Field(
        default=None,
        description="How the method's hyperparameters in method_config were selected: the tuning record they come "
        "from and the split it scored (`drake-bench run --tuning-record FILE` fills it in). None: not "
        "stated (the method's defaults, or values given by hand). Boards refuse a selection on test.",
    )
    out: str = Field(default="runs", description="Output folder: checkpoints, result files, plots.")
    resume: bool = Field(
        default=True, description="Continue from the checkpoints in `out` (only the same run configuration)."
    )

    @field_validator("seeds")
    @classmethod
    def _distinct_seeds(cls, seeds: list[int]) -> list[int]:
        if len(set(seeds)) != len(seeds):  # a repeated seed would rerun and double-count itself in mean +- std
            raise ValueError(f"seeds must be distinct, got {seeds}")
        return seeds

    @model_validator(mode="after")
    def _one_participation_rule(self) -> "RunConfig":
        if self.participation is not None and self.clients_per_round is not None:
            raise ValueError("give participation (a fraction) or clients_per_round (a count), not both")
        if self.client_batching and self.backend != "default":
            raise ValueError(
                "client_batching groups clients in the default backend's process; under Flower each "
                "node stands for one client (run without client_batching)"
            )
        if self.selection is not None:
            differs = {k: v for k, v in self.selection.settings.items() if self.method_config.get(k, ...) != v}
            if differs:
                raise ValueError(f"method_config does not hold the selected values {differs} its selection records")
        if self.backend != "flower":
            flower_only = [f for f in ("superlink", "round_timeout", "flower_workers") if getattr(self, f) is not None]
            if flower_only:
                raise ValueError(
                    f"{', '.join(flower_only)} only apply to backend='flower' (backend is {self.backend!r})"
                )
        return self
