"""An import-linter contract for a package installed into the root package from another directory.

``methods/`` installs as ``drake_bench.methods`` (setuptools ``package-dir``), but Grimp only scans
the directory the root package lives in, so ``drake_bench.methods`` is not in its graph and the
built-in ``forbidden`` contract refuses to name it (and an import of it would not show up anyway).
This contract reads the import statements of every module in the graph itself (function-level
ones and ``importlib.import_module("...")`` with a literal name included), resolves relative
imports, and reports a source module that imports a forbidden name, directly or through other
modules of the graph. Loaded by ``contract_types`` in pyproject.toml; lint-imports puts the
working directory on ``sys.path``, so run it from the repository root.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

from grimp import ImportGraph
from importlinter.application import output
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck


def _module_file(root_dir: Path, root: str, module: str) -> Path | None:
    parts = module.split(".")[1:] if module != root else []
    base = root_dir.joinpath(*parts)
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def _imported_names(path: Path, module: str) -> list[tuple[int, str]]:
    """(line, absolute dotted name) of every import in ``path``; ``from a import b`` yields ``a`` and ``a.b``."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            out.append((node.lineno, base))
            out += [(node.lineno, f"{base}.{a.name}") for a in node.names if a.name != "*"]
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            out.append((node.lineno, node.args[0].value))
    return out


class ForbiddenMappedContract(Contract):
    """Source modules must not import any of ``forbidden_modules``, even ones outside the scanned tree."""

    type_name = "forbidden_mapped"

    source_modules = fields.ListField(subfield=fields.ModuleField())
    forbidden_modules = fields.ListField(subfield=fields.StringField())

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        forbidden = [str(m) for m in self.forbidden_modules]  # type: ignore[attr-defined]
        roots = {m.split(".")[0] for m in graph.modules}
        root_dirs = {r: Path(importlib.util.find_spec(r).submodule_search_locations[0]) for r in roots}  # type: ignore[index,union-attr]

        def hits(module: str) -> list[str]:
            root = module.split(".")[0]
            path = _module_file(root_dirs[root], root, module)
            if path is None:
                return []
            found = {
                line: name
                for line, name in reversed(_imported_names(path, module))
                if any(name == f or name.startswith(f + ".") for f in forbidden)
            }  # the first name per line
            return [f"{module}:{line} imports {name}" for line, name in sorted(found.items())]

        direct = {m: h for m in sorted(graph.modules) if (h := hits(m))}
        sources: set[str] = set()
        for src in self.source_modules:  # type: ignore[attr-defined]
            sources |= {src.name} | graph.find_descendants(src.name)
        broken = [line for m, lines in direct.items() if m in sources for line in lines]
        outside = {
            m: lines for m, lines in direct.items() if m not in sources
        }  # reported only when a source reaches them
        for src in sorted(sources):
            for culprit, lines in outside.items():
                chain = graph.find_shortest_chain(importer=src, imported=culprit)
                if chain:
                    broken.append(f"{src} reaches it through {' -> '.join(chain)}, where {lines[0]}")
        return ContractCheck(kept=not broken, metadata={"broken": broken})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for line in check.metadata["broken"]:
            output.print_error(f"-   {line}", bold=False)
        output.new_line()
