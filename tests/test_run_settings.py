"""A run's settings are resolved once: the configuration's value where it gives one, else the manifest's."""

from __future__ import annotations

from drake_bench.benchmarks.manifest import load_benchmark
from drake_bench.evaluator.run_config import RunConfig
from drake_bench.evaluator.settings import resolve_settings
from drake_bench.streams.scenarios import Dynamic, Static, benchmark_scenario

SPEC = load_benchmark("drake-synth")


def test_a_config_that_gives_nothing_runs_on_the_manifests_settings():
    settings = resolve_settings(RunConfig(method="sft", benchmark="drake-synth"), SPEC)
    fl = SPEC.fl
    assert (settings.rounds, settings.local_steps, settings.batch_size, settings.eval_every_rounds) == (
        fl.rounds,
        fl.local_steps,
        fl.batch_size,
        fl.eval_every_rounds,
    )
    assert (settings.self_subsample, settings.others_subsample) == (fl.self_subsample, fl.others_subsample)
    assert (settings.fast_adaptation_iters, settings.fast_adaptation_eval_every) == (
        fl.fast_adaptation_iters,
        fl.fast_adaptation_eval_every,
    )
    assert settings.scenario == benchmark_scenario(SPEC) and settings.allocation_name == (
        SPEC.default_allocation or "none"
    )


def test_what_a_config_gives_wins_zero_others_items_included():
    config = RunConfig(
        method="sft",
        benchmark="drake-synth",
        scenario="static",
        rounds=3,
        local_steps=2,
        batch_size=5,
        eval_every_rounds=3,
        others_subsample=0,
        self_subsample=7,
        fast_adaptation_iters=9,
        fast_adaptation_eval_every=3,
    )
    settings = resolve_settings(config, SPEC)
    assert isinstance(settings.scenario, Static)
    assert (settings.rounds, settings.local_steps, settings.batch_size, settings.eval_every_rounds) == (3, 2, 5, 3)
    assert (settings.others_subsample, settings.self_subsample) == (0, 7)  # 0 is a setting (no Others), not "unset"
    assert (settings.fast_adaptation_iters, settings.fast_adaptation_eval_every) == (9, 3)


def test_the_benchmarks_default_scenario_is_read_from_its_manifest():
    assert SPEC.scenarios.default == "dynamic" and isinstance(benchmark_scenario(SPEC), Dynamic)
    assert isinstance(benchmark_scenario(SPEC, "static"), Static)
