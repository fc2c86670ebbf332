"""Regenerate splits/{drake,hflb,fedllm}-synth.json from drake_bench.benchmarks.synth.definitions.

Run after changing a generator or a definition: ``python scripts/make_synth_manifests.py``.
tests/test_synth_manifests.py fails while the shipped files differ from the regenerated ones.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from drake_bench.benchmarks.manifest import manifest_dict
from drake_bench.benchmarks.synth.definitions import SPEC_BUILDERS

SPLITS = Path(__file__).resolve().parents[1] / "splits"


def render_manifest(name: str) -> str:
    return json.dumps(manifest_dict(SPEC_BUILDERS[name]()), indent=1) + "\n"


def main() -> int:
    for name in SPEC_BUILDERS:
        path = SPLITS / f"{name}.json"
        path.write_text(render_manifest(name))
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
