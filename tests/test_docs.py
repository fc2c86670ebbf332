"""The documentation site builds, and the code examples of the README and docs/ run as written.

* ``mkdocs build --strict`` (``mkdocs.yml``: link and anchor validation as warnings, so a broken
  link fails the build), and every page under docs/ is in the nav.
* Every ```python block of README.md and docs/**/*.md runs, page by page: the page's blocks in
  order, in one fresh subprocess (so a later block may use an earlier one's names, as a reader
  would), with the shared DRAKE_BENCH_HOME. A block that must not run (real data, minutes of
  compute, a sketch) is marked with ``<!-- no-test ... -->`` on the line before it; those stay few.
* ``--8<-- "path"`` lines (pymdownx.snippets, which the site uses to include repository files) are
  replaced by the file, so the included code runs too.
* Repository paths the docs cite in code spans exist.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted(DOCS.rglob("*.md"))]
FENCE = re.compile(r"^```python[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
SNIPPET = re.compile(r'^--8<-- "([^"]+)"[ \t]*$', re.M)
NO_TEST = "<!-- no-test"
MAX_NOT_RUN = 4  # blocks marked no-test, over all pages: keep them few
PAGE_TIMEOUT_S = 150  # per page; they take seconds each once drake-synth is built

RUNNER = r"""
import json, sys
for filename, code in json.load(open(sys.argv[1])):
    exec(compile(code, filename, "exec"), globals())
"""


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def python_blocks(page: Path) -> list[tuple[int, str, bool]]:
    """``(line of the fence, code, runs)`` for every ```python block of ``page``."""
    text = page.read_text()
    blocks = []
    for m in FENCE.finditer(text):
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
        code = SNIPPET.sub(lambda s: (ROOT / s.group(1)).read_text(), m.group(1))
        blocks.append((text.count("\n", 0, m.start()) + 1, code, not before.startswith(NO_TEST)))
    return blocks


RUNNABLE = {rel(p): [(line, code) for line, code, runs in python_blocks(p) if runs] for p in PAGES}
RUNNABLE = {page: blocks for page, blocks in RUNNABLE.items() if blocks}


def run_pages(tmp_path_factory) -> dict[str, tuple[int, str, float]]:
    """Every page's examples, two pages at a time: page -> (exit code, output, seconds)."""
    from drake_bench.benchmarks.synth import ensure_built

    ensure_built("drake-synth")  # once, before the pages start (they would otherwise race to build it)
    env = {
        **os.environ,
        "DRAKE_BENCH_NO_PROGRESS": "1",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "PYTHONWARNINGS": "ignore",
    }
    env.pop("DRAKE_BENCH_ZOO", None)  # examples load the shipped zoo, as a user's do (conftest pretrains for tests)
    # pages that run the evaluator take longest: start them first, so the two slots stay busy
    pending = sorted(RUNNABLE, key=lambda page: -sum("RunConfig(" in code for _, code in RUNNABLE[page]))
    running, done = {}, {}
    while pending or running:
        while pending and len(running) < 2:
            page = pending.pop(0)
            work = tmp_path_factory.mktemp(re.sub(r"\W", "_", page))
            script = work / "blocks.json"
            # pad each block to its line in the page, so a traceback points at the page's own line
            script.write_text(json.dumps([[page, "\n" * line + code] for line, code in RUNNABLE[page]]))
            proc = subprocess.Popen(
                [sys.executable, "-c", RUNNER, str(script)],
                cwd=work,
                env=env,
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
            running[page] = (proc, time.monotonic())
        for page, (proc, started) in list(running.items()):
            elapsed = time.monotonic() - started
            if proc.poll() is None and elapsed < PAGE_TIMEOUT_S:
                continue
            if proc.poll() is None:
                proc.kill()
            out = proc.communicate()[0]
            done[page] = (proc.returncode if elapsed < PAGE_TIMEOUT_S else -9, out, elapsed)
            del running[page]
        time.sleep(0.1)
    return done


@pytest.mark.slow
def test_examples_run(tmp_path_factory):
    """One test for all pages (so pytest-xdist never runs them twice); a failure lists every failing page."""
    results = run_pages(tmp_path_factory)
    failed = {page: r for page, r in results.items() if r[0] != 0}
    report = "\n\n".join(
        f"{page} (exit {code}, {seconds:.0f} s):\n{out[-3000:]}" for page, (code, out, seconds) in failed.items()
    )
    assert not failed, f"python examples failed; mark a block that must not run with `{NO_TEST} -->`:\n{report}"


def test_examples_are_found_and_few_are_skipped():
    assert "README.md" in RUNNABLE and "docs/writing-a-method.md" in RUNNABLE
    skipped = [f"{rel(p)}:{line}" for p in PAGES for line, _, runs in python_blocks(p) if not runs]
    assert len(skipped) <= MAX_NOT_RUN, f"too many examples marked {NO_TEST}: {skipped}"
    for page in PAGES:  # a marker must sit right before a fenced block, or it silently marks nothing
        lines = page.read_text().splitlines()
        for i, line in enumerate(lines):
            if line.strip().startswith(NO_TEST):
                assert i + 1 < len(lines) and lines[i + 1].startswith("```"), (
                    f"{rel(page)}:{i + 1}: marker not before a block"
                )


def test_writing_a_method_includes_the_example_plugin():
    text = (DOCS / "writing-a-method.md").read_text()
    assert '--8<-- "drake_bench/plugins/examples/majority.py"' in text


def _nav_pages(node) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [p for item in node for p in _nav_pages(item)]
    if isinstance(node, dict):
        return [p for v in node.values() for p in _nav_pages(v)]
    return []


def test_every_docs_page_is_in_the_nav():
    yaml = pytest.importorskip("yaml", reason="PyYAML comes with mkdocs (pip install -e '.[test]')")
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert config["docs_dir"] == "docs" and config["strict"] is True
    assert all(config["validation"][k] == "warn" for k in ("omitted_files", "unrecognized_links", "anchors"))
    nav = _nav_pages(config["nav"])
    pages = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    assert sorted(set(nav)) == pages, (
        f"not in the nav: {sorted(set(pages) - set(nav))}; in the nav but missing: {sorted(set(nav) - set(pages))}"
    )


def test_site_builds_strict(tmp_path):
    pytest.importorskip("mkdocs", reason="mkdocs is not installed (pip install -e '.[test]')")
    pytest.importorskip("material", reason="mkdocs-material is not installed (pip install -e '.[test]')")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-f",
            str(ROOT / "mkdocs.yml"),
            "-d",
            str(tmp_path / "site"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    page = (tmp_path / "site" / "writing-a-method" / "index.html").read_text()
    assert "class MajorityAnswer" in re.sub(r"<[^>]+>", "", page)  # the snippet include worked


CITED = re.compile(r"`((?:docs|leaderboard|scripts|drake_bench|methods|splits|tests|loaders)/[^`\s]*)`")


def test_cited_repository_paths_exist():
    missing = []
    for page in PAGES:
        for path in CITED.findall(page.read_text()):
            if any(c in path for c in "*{}<>"):  # a pattern, not a path
                continue
            if not (ROOT / path.split("#")[0].rstrip("/")).exists():
                missing.append(f"{rel(page)}: {path}")
    assert not missing, missing
