"""drake_bench.core.provenance and what a result file records of the code that made it."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from drake_bench import __version__
from drake_bench.core.provenance import BUILT_FROM, built_revision, direct_url_revision, git_revision, source_revision
from drake_bench.plugins.registry import method_package

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


@needs_git
def test_a_checkout_is_named_by_its_commit_and_edited_code_is_marked(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "leaderboard").mkdir()
    (repo / "pkg" / "code.py").write_text("x = 1\n")
    (repo / "leaderboard" / "result.json").write_text("{}\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    commit = _git(repo, "rev-parse", "HEAD")
    assert git_revision(repo / "pkg") == f"git:{commit}"
    (repo / "leaderboard" / "result.json").write_text('{"a": 1}\n')  # a board build writing its results: not code
    (repo / "notes.md").write_text("untracked\n")
    assert git_revision(repo / "pkg") == f"git:{commit}"
    (repo / "pkg" / "code.py").write_text("x = 2\n")  # tracked code edited: the commit no longer names it
    assert git_revision(repo / "pkg") == f"git:{commit}+modified"
    assert git_revision(tmp_path) is None  # not a work tree
    venv = repo / ".venv" / "site-packages" / "plugin"  # installed inside the clone, ignored: not the commit's code
    venv.mkdir(parents=True)
    (venv / "__init__.py").write_text("y = 1\n")
    (repo / ".gitignore").write_text(".venv/\n")
    assert git_revision(venv) is None


def test_an_install_from_a_url_is_named_by_what_pip_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def dist(name: str, direct_url: dict | None) -> None:
        info = tmp_path / f"{name}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        if direct_url is not None:
            (info / "direct_url.json").write_text(json.dumps(direct_url))

    dist("from_git", {"url": "https://example.org/p.git", "vcs_info": {"vcs": "git", "commit_id": "abc123"}})
    dist("from_archive", {"url": "https://example.org/p.tar.gz", "archive_info": {"hash": "sha256=ff00"}})
    dist("from_dir", {"url": "file:///src/p", "dir_info": {"editable": True}})
    dist("from_index", None)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert direct_url_revision("from_git") == "git:abc123"
    assert direct_url_revision("from_archive") == "archive:sha256=ff00"
    assert direct_url_revision("from_dir") is None  # a folder names no revision
    assert direct_url_revision("from_index") is None  # a release: its version names it
    assert direct_url_revision("not-installed-anywhere") is None


def test_a_built_package_is_named_by_the_commit_its_build_recorded(tmp_path: Path) -> None:
    package = tmp_path / "site" / "drake_bench"  # an installed wheel: no work tree around it
    package.mkdir(parents=True)
    assert built_revision(package) is None
    (package / BUILT_FROM).write_text("git:abc123\n")
    assert built_revision(package) == "git:abc123"
    assert source_revision("not-installed-anywhere", str(package)) == "git:abc123"


def test_a_method_is_attributed_to_the_package_that_registers_it() -> None:
    package = method_package("sft")  # a reference entry: registered by drake_bench's own entry points
    assert package is not None and package.startswith(f"drake_bench {__version__}")
    root = Path(__file__).resolve().parents[1]
    if shutil.which("git") and (root / ".git").exists() and (root / "methods").is_dir():
        assert "(git:" in package  # run from this checkout: the commit is recorded
    assert method_package("no-such-method") is None


def test_the_evaluator_records_the_source_in_the_result(toy, tmp_path: Path) -> None:
    import test_evaluator  # noqa: F401  (registers the in-process "counter" method)

    from drake_bench.core.provenance import drake_bench_source
    from drake_bench.evaluator.standard import RunConfig, run

    res = run(
        RunConfig(
            benchmark=toy[0], method="counter", data_dir=toy[1], out=str(tmp_path), seeds=[0], fast_adaptation=False
        )
    )
    assert res.environment.drake_bench_source == drake_bench_source()
    assert res.method.package is None  # registered in-process by a script: no package to name
