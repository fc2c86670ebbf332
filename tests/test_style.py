"""One style for the whole tree: ruff's formatter and linter (pyflakes, pycodestyle, isort), configured in
pyproject.toml's [tool.ruff], pass on every file CI checks out."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _ruff() -> str:
    exe = shutil.which("ruff")
    assert exe, "ruff not found: install the test extra (pip install -e '.[test]')"
    return exe


def test_the_tree_is_formatted():
    out = subprocess.run([_ruff(), "format", "--check", "."], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, "run `ruff format .`:\n" + out.stdout[-3000:] + out.stderr[-1000:]


def test_the_tree_passes_the_linter():
    out = subprocess.run([_ruff(), "check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, "run `ruff check --fix .`:\n" + out.stdout[-3000:] + out.stderr[-1000:]


def test_the_linter_can_fail(tmp_path):
    """The configuration is read and catches an unused import and an unsorted import block."""
    bad = tmp_path / "bad.py"
    bad.write_text("import sys\nimport json\n\nprint(json)\n")
    out = subprocess.run(
        [_ruff(), "check", "--no-cache", "--config", str(ROOT / "pyproject.toml"), str(bad)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 1 and "F401" in out.stdout and "I001" in out.stdout, out.stdout
