"""Write the real benchmarks' manifests (splits/<name>.json) from drake_bench.benchmarks.definitions.

Usage: python scripts/make_real_manifests.py [--check]
--check exits 1 when a shipped manifest differs from its regenerated form (for CI).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from drake_bench.benchmarks.definitions import REAL_BENCHMARKS
from drake_bench.benchmarks.manifest import manifest_dict, parse_manifest

SPLITS = Path(__file__).resolve().parent.parent / "splits"


def render(name: str) -> str:
    """The exact text shipped as splits/<name>.json."""
    data = manifest_dict(REAL_BENCHMARKS[name]())
    parse_manifest(data, where=f"splits/{name}.json")  # schema + cross-field + hash checks before writing
    return json.dumps(data, indent=1) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--check", action="store_true", help="compare instead of writing")
    args = ap.parse_args(argv)
    stale = []
    for name in REAL_BENCHMARKS:
        text, path = render(name), SPLITS / f"{name}.json"
        if args.check:
            if not path.is_file() or path.read_text() != text:
                stale.append(str(path))
        else:
            path.write_text(text)
            print(f"wrote {path}")
    if stale:
        print("stale manifests (run scripts/make_real_manifests.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
