"""``python -m drake_bench.schemas``: rewrite both shipped JSON Schemas from their pydantic models.

The manifest schema comes from :class:`~drake_bench.benchmarks.spec.BenchmarkSpec`, the result schema from
:mod:`drake_bench.results.result_file`; tests check that the shipped files equal what this writes, so a field's
help text edited in the model is a schema change someone reviews."""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    from drake_bench.benchmarks.manifest import SCHEMA_FILE as MANIFEST_SCHEMA
    from drake_bench.benchmarks.spec import BenchmarkSpec
    from drake_bench.results.result_file import SCHEMA_FILE as RESULT_SCHEMA
    from drake_bench.results.result_file import schema_text

    (HERE / MANIFEST_SCHEMA).write_text(
        json.dumps(BenchmarkSpec.model_json_schema(), indent=1) + "\n", encoding="utf-8"
    )
    (HERE / RESULT_SCHEMA).write_text(schema_text(), encoding="utf-8")
    print(f"wrote {HERE / MANIFEST_SCHEMA} and {HERE / RESULT_SCHEMA}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
