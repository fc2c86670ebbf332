"""The layering rules of pyproject's [tool.importlinter], enforced on every test run.

The package's folders are layers (cli, commands, leaderboard, workflows, evaluator, backends, results, plugins,
models, evaluation, streams, benchmarks, core): a module imports only from the layers below its own.
The core reaches the reference methods only through the entry-point registry, the evaluator
never imports the model zoo (methods report their models), and no module imports form a cycle.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_linter_contracts_are_kept():
    exe = shutil.which("lint-imports")
    assert exe, "lint-imports not found: install the test extra (pip install -e '.[test]')"
    out = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "0 broken" in out.stdout and "6 kept" in out.stdout


def test_module_map_page_is_current():
    """docs/module-map.md lists every module with its docstring's first paragraph; a new or moved module updates it."""
    out = subprocess.run(["python", str(ROOT / "scripts" / "module_map.py"), "--check"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_a_layer_violation_breaks_the_contract(tmp_path):
    """The layers contract can fail: a core module that imports the evaluator is reported as broken."""
    import shutil as sh

    copy = tmp_path / "repo"
    sh.copytree(ROOT / "drake_bench", copy / "drake_bench", ignore=sh.ignore_patterns("weights", "__pycache__"))
    sh.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    sh.copytree(ROOT / "tests", copy / "tests", ignore=sh.ignore_patterns("__pycache__", "fixtures", "data"))
    bad = copy / "drake_bench" / "core" / "console.py"
    bad.write_text(
        bad.read_text() + "\n\ndef _reach_up():\n    from drake_bench.evaluator import standard  # noqa: F401\n"
    )
    exe = shutil.which("lint-imports")
    out = subprocess.run(
        [exe, "--no-cache"],
        cwd=copy,
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "PYTHONPATH": str(copy)},
    )
    assert out.returncode != 0 and "drake_bench.core is not allowed to import drake_bench.evaluator" in out.stdout, (
        out.stdout[-3000:]
    )


def test_old_import_paths_keep_working_for_one_release():
    """Plugins written for 0.1 import drake_bench.protocol, .sample, .stream, .results and .evaluator: the moved
    modules are the same module objects under the old name (so isinstance and monkeypatching agree), with a warning."""
    import importlib
    import sys
    import warnings

    import drake_bench.benchmarks.sample
    import drake_bench.plugins.protocol
    import drake_bench.streams.stream

    for old, new in (
        ("drake_bench.protocol", drake_bench.plugins.protocol),
        ("drake_bench.sample", drake_bench.benchmarks.sample),
        ("drake_bench.stream", drake_bench.streams.stream),
    ):
        sys.modules.pop(old, None)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            module = importlib.import_module(old)
        assert module is new
        assert any(issubclass(w.category, DeprecationWarning) and new.__name__ in str(w.message) for w in caught)
    from drake_bench.evaluator import Evaluator
    from drake_bench.evaluator.standard import Evaluator as moved_evaluator
    from drake_bench.results import read_result
    from drake_bench.results.result_file import read_result as moved_read

    assert Evaluator is moved_evaluator and read_result is moved_read
    import drake_bench.results as results_package

    try:
        results_package.no_such_name
    except AttributeError as err:
        assert "no_such_name" in str(err)
    else:
        raise AssertionError("an unknown name resolved")
