"""The layering rules of pyproject's [tool.importlinter], enforced on every test run.

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
    assert "0 broken" in out.stdout and "5 kept" in out.stdout
