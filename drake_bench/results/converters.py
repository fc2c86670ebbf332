"""Result files of older layouts, read as the current one: one named converter per schema version.

A result file's ``schema_version`` names its layout on disk, never what a result is: in memory every version is the
same :class:`drake_bench.results.result_file.RunResult`. Each converter below takes the parsed JSON of one older
layout, already checked against that layout's own JSON Schema, and returns it in the in-memory form (raw tables
as lists of records), so a reader needs no branch of its own for an old file, and ``drake-bench results upgrade``
rewrites any old file in the current layout through the same converter (MTEB keeps its old result formats the same
way, one ``_convert_from_before_*`` function each).

Layouts:

* **1.0** kept each raw record as its own JSON object.
* **2.0** kept each raw table column-wise inside the JSON (:mod:`drake_bench.results.encoding`).
* **3.0** (current) keeps the raw tables as Parquet files beside the JSON (:mod:`drake_bench.results.tables`); it
  is read by the result file's reader itself, not converted.
"""

from __future__ import annotations

from typing import Any, Callable

from drake_bench.results import encoding

__all__ = ["CONVERTERS", "convert_from_1_0", "convert_from_2_0"]


def convert_from_1_0(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 1.0 stored one JSON object per raw record, which is the in-memory form already."""
    return data


def convert_from_2_0(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 2.0 stored each raw table as ``{"columns": [...], "rows": [[...], ...]}`` inside the JSON."""
    data["raw"] = encoding.decode_raw(data["raw"])
    return data


CONVERTERS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "1.0": convert_from_1_0,
    "2.0": convert_from_2_0,
}
"""Older schema version -> the converter of its (schema-checked) JSON to the in-memory form."""
