"""The settings a run uses, resolved once: the run configuration's value where it gives one, else the manifest's.

A :class:`~drake_bench.evaluator.run_config.RunConfig` leaves most federation settings at ``None``, meaning "the
benchmark's own" (its manifest's ``fl`` and ``scenarios`` blocks). Every part of a run (the rounds, the compute probe,
fast adaptation, the result file, the Flower backend) must read the same number, so the rule is applied here, once,
when the evaluator starts, instead of at each place a setting is read (as ``lm-eval``'s ``simple_evaluate`` resolves
its settings before ``evaluate`` runs them).

Two things are deliberately *not* resolved here: the local steps a compute-matched run trains (the compute probe
measures them, :mod:`drake_bench.evaluation.compute`), and what a checkpoint's fingerprint hashes (the configuration
as given, so that checkpoints written before a setting had a manifest default keep resuming).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from drake_bench.evaluation.cells import evaluation_limits
from drake_bench.streams.scenarios import Scenario, benchmark_scenario

if TYPE_CHECKING:
    from drake_bench.benchmarks.spec import BenchmarkSpec
    from drake_bench.evaluator.run_config import RunConfig

T = TypeVar("T")


def given_or(value: T | None, default: T) -> T:
    """``value`` where the configuration gives one (``0`` included: no Others items is a setting), else ``default``."""
    return value if value is not None else default


@dataclass(frozen=True)
class RunSettings:
    """One run's federation and evaluation settings, every one of them a number (or a scenario), none left ``None``
    except the evaluation caps, where ``None`` means every item of the split."""

    scenario: Scenario
    allocation_name: str  # the manifest allocation's name, the one written out as CLIENTS=MODEL items, or "none"
    rounds: int
    local_steps: int  # as configured; a compute-matched run trains the probe's matched steps instead
    batch_size: int
    eval_every_rounds: int
    self_subsample: int | None  # cap on Self items per task (None: all)
    others_subsample: int | None  # cap on Others items per task (None: all; 0: no Others)
    fast_adaptation_iters: int
    fast_adaptation_eval_every: int


def resolve_settings(config: RunConfig, spec: BenchmarkSpec) -> RunSettings:
    """``config``'s settings on benchmark ``spec``, each its own value where given, else the manifest's."""
    fl = spec.fl
    self_subsample, others_subsample = evaluation_limits(spec, config.self_subsample, config.others_subsample)
    return RunSettings(
        scenario=benchmark_scenario(spec, config.scenario),
        allocation_name=config.allocation or spec.default_allocation or "none",
        rounds=given_or(config.rounds, fl.rounds),
        local_steps=given_or(config.local_steps, fl.local_steps),
        batch_size=given_or(config.batch_size, fl.batch_size),
        eval_every_rounds=given_or(config.eval_every_rounds, fl.eval_every_rounds),
        self_subsample=self_subsample,  # the rule standalone evaluation (evaluate_client) applies too
        others_subsample=others_subsample,
        fast_adaptation_iters=given_or(config.fast_adaptation_iters, fl.fast_adaptation_iters),
        fast_adaptation_eval_every=given_or(config.fast_adaptation_eval_every, fl.fast_adaptation_eval_every),
    )
