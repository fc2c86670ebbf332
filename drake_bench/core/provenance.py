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


DIRECT_URL_MAX_BYTES = 1 << 20
"""The most bytes of a ``direct_url.json`` read (1 MiB): PEP 610's record is a URL and a commit or a hash, a few
hundred bytes. A larger one is no record pip wrote."""


def direct_url_revision(distribution: str) -> str | None:
    """What pip recorded of where ``distribution`` came from (PEP 610), where it names a revision or a hash.

    The record lies in the distribution's metadata folder, a plugin's as well as drake_bench's, where anything may
    have put anything: one that is not such a record (not UTF-8, not JSON, nested or sized past one, a revision that
    is no short line of text) records no revision, with a warning naming the file; the run goes on."""
    # imported here: the build hook loads this module by path, outside the package, and never calls this function
    from drake_bench.core.json_files import parse_json, read_json
    from drake_bench.errors import JSONFileError

    try:
        dist = metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        return None
    folder = getattr(dist, "_path", None)  # the .dist-info folder of a distribution on disk (PathDistribution)
    where = str(Path(str(folder or distribution)) / "direct_url.json")
    try:
        if isinstance(folder, Path):
            info = read_json(folder / "direct_url.json", what="PEP 610 record", max_bytes=DIRECT_URL_MAX_BYTES)
        else:  # a distribution elsewhere (a zip): its text, as importlib.metadata gives it
            text = dist.read_text("direct_url.json")
            if not text:
                return None
            if len(text) > DIRECT_URL_MAX_BYTES:
                return _no_record(
                    f"{where} is larger than {DIRECT_URL_MAX_BYTES} characters, more than a PEP 610 record is",
                    distribution,
                )
            info = parse_json(text, where=where, what="PEP 610 record")
    except JSONFileError as exc:
        if exc.missing:
            return None
        return _no_record(str(exc), distribution)
    except (UnicodeDecodeError, OSError) as exc:
        return _no_record(f"{where} cannot be read as text ({type(exc).__name__}: {exc})", distribution)
    if not isinstance(info, dict):
        return _no_record(f"{where} is not a JSON object", distribution)
    vcs = info.get("vcs_info") or {}
    archive = info.get("archive_info") or {}
    if not isinstance(vcs, dict) or not isinstance(archive, dict):
        return _no_record(f"{where} holds a vcs_info or archive_info that is not a JSON object", distribution)
    if vcs.get("commit_id"):
        revision = f"{vcs.get('vcs', 'vcs')}:{vcs['commit_id']}"
    elif archive.get("hash"):
        revision = f"archive:{archive['hash']}"
    else:
        return None
    if not _short_line(revision):
        return _no_record(f"{where} records a revision that is no short line of text", distribution)
    return revision


def _short_line(revision: str) -> bool:
    """Whether ``revision`` can be what a build or pip recorded: one printable line of at most 300 characters."""
    return len(revision) <= 300 and revision.isprintable()


def _no_record(problem: str, distribution: str) -> None:
    import warnings

    warnings.warn(f"{problem}; no source revision of {distribution} is recorded", RuntimeWarning, stacklevel=3)
    return None


BUILT_FROM_MAX_BYTES = 4096
"""The most bytes of ``_built_from.txt`` read: the build hook writes one ``git:<commit>[+modified]`` line."""


def built_revision(folder: Path, distribution: str = "drake_bench") -> str | None:
    """The revision a wheel's build recorded in ``folder`` (:data:`BUILT_FROM`), None where no build wrote one.

    The file lies in an installed package, where anything may have put anything: one that is not a short line of
    UTF-8 text records no revision, with a warning naming the file; the run goes on."""
    path = folder / BUILT_FROM
    try:
        with open(path, "rb") as f:
            raw = f.read(BUILT_FROM_MAX_BYTES + 1)
    except OSError:
        return None
    try:
        text = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        return _no_record(f"{path} is not UTF-8 text", distribution)
    if len(raw) > BUILT_FROM_MAX_BYTES or not _short_line(text):
        return _no_record(f"{path} records a revision that is no short line of text", distribution)
    return text or None


@functools.cache
def source_revision(distribution: str, folder: str) -> str | None:
    """The revision of ``distribution`` whose code is in ``folder`` (see the module docstring); cached per process,
    so a run records the source as it was when the run first asked, the code it imported."""
    return git_revision(Path(folder)) or built_revision(Path(folder), distribution) or direct_url_revision(distribution)


def drake_bench_source() -> str | None:
    """The source revision of the drake_bench this process imported."""
    return source_revision("drake_bench", str(Path(__file__).resolve().parents[1]))


def describe(version: str, source: str | None) -> str:
    """``drake_bench <version> (<source>)``, the source left out where none is recorded: how a board page and a
    refusal name the drake_bench that made a result file."""
    return f"drake_bench {version}" + (f" ({source})" if source else "")
