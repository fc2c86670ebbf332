"""Help a user can read: every run and method config field described, tables printed whole when piped."""

from __future__ import annotations

import subprocess
import sys

from typer.testing import CliRunner

from drake_bench.cli import app
from drake_bench.evaluator.run_config import RunConfig


def test_every_run_config_field_has_a_description():
    missing = [name for name, info in RunConfig.model_fields.items() if not (info.description or "").strip()]
    assert missing == []


def test_run_help_shows_the_run_config_descriptions():
    out = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "200"}).output
    assert "Give the method the local steps that spend SFT's training FLOPs" in out
    assert "--set" in out and "describe METHOD" in out


def test_describe_lists_a_method_config_with_types_defaults_and_help():
    result = CliRunner().invoke(app, ["describe", "majority-answer"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "majority-answer 1.0" in out and "own_weight" in out and "0.5" in out
    assert "Weight of the client's own counts" in out and "AdaptationInit" in out
    run = CliRunner().invoke(app, ["describe", "run"])
    assert run.exit_code == 0 and "others_subsample" in run.output
    bad = CliRunner().invoke(app, ["describe", "no-such-method"])
    assert bad.exit_code == 1 and "unknown method 'no-such-method'" in bad.output


def test_list_prints_whole_names_when_stdout_is_a_narrow_pipe():
    out = subprocess.run(
        [sys.executable, "-m", "drake_bench.cli", "list"],
        capture_output=True,
        text=True,
        env={"COLUMNS": "40", "PATH": "/usr/bin:/bin", "DRAKE_BENCH_NO_PROGRESS": "1"},
        check=True,
    ).stdout
    for name in ("hflb-synth", "fedllm-synth", "drake-synth@1.3.0", "majority-answer", "fedit-pqlora"):
        assert f" {name} " in out, name
    assert "…" not in out.split("methods")[0]
