#!/usr/bin/env python
"""Rewrite the "Every module" table of docs/module-map.md from each module's first docstring line.

Usage: python scripts/module_map.py [--check]   (--check: exit 1 if the page is not current)
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "module-map.md"
MARK = "## Every module"
SKIP = {"drake_bench/protocol.py", "drake_bench/sample.py", "drake_bench/stream.py"}  # the 0.1 compatibility aliases


def _summary(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    first = " ".join(doc.strip().split("\n\n")[0].split())  # the first paragraph, on one line
    return first.replace("|", "\\|")


def table() -> str:
    rows = ["| module | what it is for |", "|:---|:---|"]
    for path in sorted((ROOT / "drake_bench").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in SKIP or "/weights/" in rel:
            continue
        rows.append(f"| `{rel}` | {_summary(path)} |")
    return "\n".join(rows) + "\n"


def render() -> str:
    text = PAGE.read_text(encoding="utf-8")
    head, _, rest = text.partition(MARK)
    intro = rest.split("\n\n")[1]  # the paragraph that says how the table is made
    return f"{head}{MARK}\n\n{intro}\n\n{table()}"


def main(argv: list[str]) -> int:
    new = render()
    if "--check" in argv:
        if PAGE.read_text(encoding="utf-8") != new:
            print(f"{PAGE} is not current: run python scripts/module_map.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(new, encoding="utf-8")
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
