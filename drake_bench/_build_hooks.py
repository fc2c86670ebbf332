"""Build hook: a wheel built from a git checkout records the commit it was built from.

``pip install .`` from a clone builds a wheel and installs it; pip's own record of that install (PEP 610's
``direct_url.json``) names only the folder, not a revision, so without this the installed package could not say which
code it is and its result files would record no source. setuptools runs this ``build_py`` (``[tool.setuptools]
cmdclass`` in pyproject.toml), which writes :data:`BUILT_FROM` beside the package's modules in the build output, never
into the source tree. An editable install skips it: there the checkout itself answers at run time.

setuptools loads this file by path, before drake_bench's dependencies exist in an isolated build, so it imports
nothing of drake_bench's but ``core/provenance.py``, itself standard library only, loaded the same way.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


def _source_revision_module():
    spec = importlib.util.spec_from_file_location("_drake_bench_build_source_revision", HERE / "core" / "provenance.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildPy(build_py):
    """setuptools' ``build_py``, then the checkout's revision written into the built package."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        module = _source_revision_module()
        revision = module.git_revision(HERE)
        if revision is None:  # not a git checkout (an sdist, an exported tree): nothing to record
            return
        out = Path(self.build_lib) / "drake_bench" / module.BUILT_FROM
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(revision + "\n")
