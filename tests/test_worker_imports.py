"""A method's worker process imports the same drake_bench as the evaluator that started it.

The README's first command is run from the repository root, where the source folder ``drake_bench/`` lies in the
current directory. Python 3.11's fork server starts as ``python -c`` with the current folder first on its path, so
the workers imported that folder instead of the installed package (and failed: ``drake_bench.methods`` only exists
installed). These tests put a folder named drake_bench in the current directory of a fresh process and start a
real worker there; the CI step in ``.ci/run`` runs the README's command itself, non-editable, from the root.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from drake_bench.backends.worker_process import MethodProcess, import_path, package_origin
from drake_bench.errors import PluginError

ROOT = Path(__file__).resolve().parents[1]


def test_a_worker_started_where_a_drake_bench_folder_shadows_the_package_imports_the_evaluators(tmp_path):
    clone = tmp_path / "clone"
    (clone / "drake_bench").mkdir(parents=True)
    # a package that imports but is not the evaluator's, like a clone's source folder beside an installed wheel
    (clone / "drake_bench" / "__init__.py").write_text('"""Not the installed drake_bench."""\n')
    script = tmp_path / "start_worker.py"  # a script elsewhere: its own folder, not the current one, leads sys.path
    script.write_text(
        textwrap.dedent("""
        import drake_bench
        from drake_bench.backends.worker_process import MethodProcess, package_origin

        worker = MethodProcess("majority-answer", {})
        try:
            print("meta", worker.meta.name)
            print("state", worker.init_server().metadata)
        finally:
            worker.close()
        print("origin", package_origin())
    """)
    )
    out = subprocess.run([sys.executable, str(script)], cwd=clone, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    assert "meta majority-answer" in out.stdout and "state {'counts': {}}" in out.stdout
    assert f"origin {package_origin()}" in out.stdout  # the parent imported this test's package, and so did the worker


def test_a_worker_that_imports_another_drake_bench_stops_with_both_folders_named(monkeypatch):
    """The worker compares its own package's folder with the evaluator's before it imports the method."""
    monkeypatch.setattr("drake_bench.backends.worker_process.package_origin", lambda: "/elsewhere/drake_bench")
    with pytest.raises(PluginError) as err:
        MethodProcess("majority-answer", {})
    text = str(err.value)
    assert "/elsewhere/drake_bench" in text
    assert str(Path(__import__("drake_bench").__file__).resolve().parent) in text
    assert "shadows the installed package" in text


def test_the_import_path_handed_on_is_absolute_and_in_order(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "path", ["", str(tmp_path), *sys.path[1:]])
    path = import_path()
    assert all(Path(entry).is_absolute() for entry in path if entry)
    assert path[1] == str(tmp_path) and path[2:] == [str(p) for p in sys.path[2:]]
