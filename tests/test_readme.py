"""The README stays a short page for users, and what it shows cannot drift from the code and the boards.

Its python examples run in tests/test_docs.py (with every docs page's); the checks here are the
README's own: its length, the set-up commands, the inline plugin (exactly the shipped example),
the entry-point snippet, the tables (exactly the committed boards) and its links.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_LINES = 220


def blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", README.read_text(), flags=re.S | re.M)


def table_rows(text: str) -> set[str]:
    """Body rows of the score tables (header "| Method | Self A_last ..."), whitespace-normalised."""
    rows, in_table = set(), False
    for line in text.splitlines():
        if line.startswith("| Method | Self A_last"):
            in_table = True
        elif in_table and line.startswith("|") and not line.startswith("|:"):
            rows.add(re.sub(r"\s+", " ", line.strip()))
        elif not line.startswith("|"):
            in_table = False
    return rows


def test_readme_is_short():
    n = len(README.read_text().splitlines())
    assert n <= MAX_LINES, f"README.md has {n} lines; it is for users (at most {MAX_LINES}): move details to docs/"


def test_set_up_commands_are_the_documented_ones():
    bash = "\n".join(blocks("bash"))
    assert "pip install torch==2.13.0 && pip install . && drake-bench run" in bash
    assert 'pip install torch==2.13.0 && pip install -e ".[test]" && pytest -n 2' in bash


def test_inline_plugin_is_the_shipped_example():
    """The README's plugin is drake_bench/plugins/examples/majority.py without its module docstring, character for character."""
    source = (ROOT / "drake_bench" / "plugins" / "examples" / "majority.py").read_text()
    body = ast.parse(source).body
    assert isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)  # the module docstring
    expected = "\n".join(source.splitlines()[body[1].lineno - 1 :]).strip()
    inline = [b for b in blocks("python") if "class MajorityAnswer" in b]
    assert len(inline) == 1, "the README shows the example plugin exactly once"
    assert inline[0].strip() == expected, (
        "README's plugin differs from drake_bench/plugins/examples/majority.py: copy it again"
    )


def test_entry_point_snippet_is_registered():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    registered = pyproject["project"]["entry-points"]["drake_bench.methods"]
    snippets = [tomllib.loads(b) for b in blocks("toml")]
    shown = [s["project"]["entry-points"]["drake_bench.methods"] for s in snippets]
    assert shown, "the README shows how to register a method through an entry point"
    for table in shown:
        for name, target in table.items():
            assert registered.get(name) == target, f"{name} = {target!r} is not drake_bench's own registration"
    from drake_bench.plugins.examples.majority import MajorityAnswer

    assert MajorityAnswer.meta.name in shown[0]


def test_tables_are_the_committed_boards():
    rows = table_rows(README.read_text())
    main = table_rows((ROOT / "leaderboard/main-job/drake-synth/dynamic/summary.md").read_text())
    # the 3-seed table is read from the canonical board (which holds more entries than the README shows)
    canonical = table_rows((ROOT / "leaderboard/drake-synth-dynamic/summary.md").read_text())
    shown = {r for r in canonical if r.split(" | ")[0].lstrip("| ") in ("sft 1.0", "fedit 1.0", "zero-shot 1.0")}
    assert main and len(shown) == 3, "the canonical drake-synth-dynamic board holds SFT, FedIT and zero-shot"
    assert main <= rows, f"the main job's table must be leaderboard/main-job's: {sorted(main - rows)}"
    assert shown <= rows, f"the 3-seed table must be the canonical board's rows: {sorted(shown - rows)}"
    assert rows == main | shown, f"rows that are on no committed board: {sorted(rows - main - shown)}"


def test_relative_links_resolve():
    links = re.findall(r"\]\(([^)\s]+)\)", README.read_text())
    local = [link for link in links if not re.match(r"[a-z]+:", link)]
    assert local, "the README links its documentation"
    missing = [link for link in local if not (ROOT / link.split("#")[0]).exists()]
    assert not missing, missing
