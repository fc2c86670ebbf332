"""A plain (non-editable) install works: loaders/, methods/ and splits/ land inside drake_bench."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
    )
    return next(out.glob("drake_bench-*.whl"))


def test_wheel_maps_top_level_folders_into_the_namespace(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in [
        "drake_bench/loaders/__init__.py",
        "drake_bench/methods/sft.py",
        "drake_bench/methods/fedit.py",
        "drake_bench/splits/drake.json",
        "drake_bench/splits/hflb.json",
        "drake_bench/splits/fed-llm-large.json",
        "drake_bench/splits/drake-synth.json",
        "drake_bench/schemas/manifest.schema.json",
        "drake_bench/schemas/result.schema.json",
        "drake_bench/benchmarks/synth/learnability.json",
    ]:
        assert required in names, required
    # every Python package in the source tree is shipped (a forgotten `packages` entry fails here)
    for init in (
        list((ROOT / "drake_bench").rglob("__init__.py"))
        + list((ROOT / "methods").rglob("__init__.py"))
        + list((ROOT / "loaders").rglob("__init__.py"))
    ):
        rel = init.relative_to(ROOT).as_posix()
        rel = re.sub(r"^(methods|loaders)/", r"drake_bench/\1/", rel)
        assert rel in names, f"{rel} missing from the wheel: add its package to pyproject's packages list"


def test_a_wheel_built_from_a_checkout_records_the_commit(wheel):
    """pip records only the folder of `pip install .`; the build writes the checkout's revision into the package."""
    from drake_bench.core.provenance import BUILT_FROM, git_revision

    expected = git_revision(ROOT / "drake_bench")
    names = set(zipfile.ZipFile(wheel).namelist())
    if expected is None:  # built from a tree that is not a git checkout: nothing to record
        assert f"drake_bench/{BUILT_FROM}" not in names
        return
    assert zipfile.ZipFile(wheel).read(f"drake_bench/{BUILT_FROM}").decode().strip() == expected
    assert "drake_bench/_build_hooks.py" in names  # an sdist of the wheel's package builds the same way


def test_installed_wheel_imports_outside_the_source_tree(wheel, tmp_path):
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
    )
    code = (
        "import drake_bench, drake_bench.loaders, drake_bench.methods.sft;"
        "from drake_bench import load_benchmark;"
        "s = load_benchmark('drake'); assert len(s.clients) == 10, s;"
        "assert drake_bench.__file__.startswith(%r), drake_bench.__file__;"
        "from drake_bench.core.provenance import drake_bench_source;"
        "print('source', drake_bench_source());"
        "print('ok')" % str(target)
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr[-2000:]
    from drake_bench.core.provenance import BUILT_FROM

    built = zipfile.ZipFile(wheel)
    if (
        f"drake_bench/{BUILT_FROM}" in built.namelist()
    ):  # the installed package names the commit its wheel was built from
        recorded = built.read(f"drake_bench/{BUILT_FROM}").decode().strip()
        assert f"source {recorded}" in out.stdout, out.stdout


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1].strip()
    readme = (ROOT / "README.md").read_text()
    assert ci in readme, f"the last line of .ci/run ({ci!r}) must be the README's test command"


def test_ci_runs_the_readme_first_command_non_editable_from_the_repository_root():
    """The newcomer's path is tested as a newcomer takes it: the README's first command, verbatim, in a fresh venv,
    from the repository root (``.ci/run`` starts with ``cd`` there); only a short schedule is added to it."""
    readme = (ROOT / "README.md").read_text()
    first = re.search(r"```bash\n(pip install[^\n]*drake-bench run[^\n]*)\n```", readme)
    assert first, "the README's first set-up command (the main job) was not found"
    command = first.group(1).strip()
    assert "pip install -e" not in command and "pip install . " in command
    ci = (ROOT / ".ci" / "run").read_text()
    assert 'cd "$(dirname "$0")/.."' in ci
    step = next((line for line in ci.splitlines() if line.startswith(command)), None)
    assert step is not None, f".ci/run must run the README's first command verbatim ({command!r})"
    added = step[len(command) :].split(")")[0].split()
    assert added[:4] == ["--rounds", "4", "--local-steps", "1"], added  # a short schedule, nothing else changed
    assert "python -m venv .ci-newcomer" in ci and ". .ci-newcomer/bin/activate" in ci


def test_the_readme_quotes_the_main_job_time_the_benchmark_script_measured():
    """The README's seconds are regenerated by scripts/bench_main_job.py (docs/performance/main_job.json), with the
    machine they were measured on."""
    import json

    data = json.loads((ROOT / "docs" / "performance" / "main_job.json").read_text())
    seconds = round(data["default"]["wall_seconds"])
    readme = (ROOT / "README.md").read_text()
    assert f"({seconds} s on an {data['machine']['cpu_model']}" in readme
