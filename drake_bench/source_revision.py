"""Which source a package ran from: the revision a result file records beside the package's version.

A version string does not identify code that is run from a checkout (this repository's version stays put while
its code moves, and a plugin under development is rarely bumped), so a result file also records the source
revision where one can be known, read the way pip itself records it:

* a git work tree (a clone, an editable install): ``git:<commit>``, with ``+modified`` when tracked code differs
  from the commit (files under ``leaderboard/``, ``docs/`` and ``tests/`` and markdown are not code and do not
  count: a board build writes its result files into the same checkout);
* a wheel built from a git checkout (``pip install .`` in a clone): the ``git:<commit>`` it was built from, which the
  build wrote into the package as ``_built_from.txt`` (``drake_bench/_build_hooks.py``);
* an install from a VCS URL or an archive: its PEP 610 ``direct_url.json`` (``git:<commit>``, ``archive:<hash>``);
* a release installed from an index: None, its version already names it.
"""

from __future__ import annotations

import functools
import json
import subprocess
from importlib import metadata
from pathlib import Path

BUILT_FROM = "_built_from.txt"
NOT_CODE = (":(exclude)leaderboard", ":(exclude)docs", ":(exclude)tests", ":(exclude)*.md")


def _git(folder: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):  # no git on this machine
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def git_revision(folder: Path) -> str | None:
    """``git:<commit>`` (``+modified`` when tracked code differs from it) where ``folder``'s files are tracked in a
    git work tree. An untracked folder inside a work tree (a virtual environment's site-packages in a clone) is not
    that commit's code, so it has no revision here."""
    top = _git(folder, "rev-parse", "--show-toplevel")
    commit = _git(folder, "rev-parse", "HEAD") if top else None
    if not top or not commit or not _git(folder, "ls-files", "--", "."):
        return None
    changed = _git(Path(top), "status", "--porcelain", "--untracked-files=no", "--", ".", *NOT_CODE)
    return f"git:{commit}" + ("+modified" if changed else "")


def direct_url_revision(distribution: str) -> str | None:
    """What pip recorded of where ``distribution`` came from (PEP 610), where it names a revision or a hash."""
    try:
        text = metadata.distribution(distribution).read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None
    if not text:
        return None
    try:
        info = json.loads(text)
    except ValueError:
        return None
    vcs = info.get("vcs_info") or {}
    if vcs.get("commit_id"):
        return f"{vcs.get('vcs', 'vcs')}:{vcs['commit_id']}"
    archive = info.get("archive_info") or {}
    if archive.get("hash"):
        return f"archive:{archive['hash']}"
    return None


def built_revision(folder: Path) -> str | None:
    """The revision a wheel's build recorded in ``folder`` (:data:`BUILT_FROM`), None where no build wrote one."""
    try:
        text = (folder / BUILT_FROM).read_text().strip()
    except OSError:
        return None
    return text or None


@functools.cache
def source_revision(distribution: str, folder: str) -> str | None:
    """The revision of ``distribution`` whose code is in ``folder`` (see the module docstring); cached per process,
    so a run records the source as it was when the run first asked, the code it imported."""
    return git_revision(Path(folder)) or built_revision(Path(folder)) or direct_url_revision(distribution)


def drake_bench_source() -> str | None:
    """The source revision of the drake_bench this process imported."""
    return source_revision("drake_bench", str(Path(__file__).resolve().parent))


def describe(version: str, source: str | None) -> str:
    """``drake_bench <version> (<source>)``, the source left out where none is recorded: how a board page and a
    refusal name the drake_bench that made a result file."""
    return f"drake_bench {version}" + (f" ({source})" if source else "")
