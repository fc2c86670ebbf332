"""How a result file lays out its raw tables: column-wise, one row per line.

A board entry's raw tables hold thousands of records (every client x task x evaluation round x seed). Written as
one JSON object per record with two-space indentation, each record's field names were repeated and spread over
eleven lines: the raw tables were four fifths of an 850 KB file, and a board of 24 entries was 20 MB of a checkout.
Result file schema 2.0 stores each table as ``{"columns": [...], "rows": [[...], ...]}``, the column names once
and each record as one compact line: a quarter of the size, still plain JSON that ``jq`` and a text diff can read,
and still validated field by field by the shipped JSON Schema (each row's ``prefixItems`` are the record's field
schemas, so ``raw.scores[3].score`` outside [0, 1] is refused as before).

Only the file changes: in memory (:class:`drake_bench.results.result_file.RunResult`, ``model_dump``) a table is still a list
of records, so metrics, rules and every reader of ``result.raw`` are untouched. Schema 1.0 files (one object per
record) still read; ``drake-bench results upgrade`` rewrites them losslessly.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Mapping, Sequence

from pydantic import BaseModel

from drake_bench.evaluation.metrics import RawTables

__all__ = [
    "TABLE_COLUMNS",
    "decode_raw",
    "dumps",
    "encode_raw",
    "error_path",
    "file_schema",
]


def _columns(record: type[BaseModel]) -> tuple[str, ...]:
    return tuple(record.model_fields)


def _record_types() -> dict[str, type[BaseModel]]:
    out: dict[str, type[BaseModel]] = {}
    for name, field in RawTables.model_fields.items():
        (record,) = field.annotation.__args__  # list[Record]
        out[name] = record
    return out


TABLE_COLUMNS: dict[str, tuple[str, ...]] = {name: _columns(rec) for name, rec in _record_types().items()}
"""Raw table -> its columns, in the record model's field order (the order the file stores them in)."""


class TableEncodingError(ValueError):
    """A raw table that cannot be laid out column-wise (a record missing a field the others have)."""


def encode_raw(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Record-wise tables (``model_dump(mode="json")``'s form) -> column-wise ones.

    Columns are the record model's fields; a record with a key the model does not have (a hand-edited file) adds
    that key as a further column, so the schema's fixed column list refuses the table by name instead of the key
    being dropped here unseen."""
    out: dict[str, Any] = {}
    for table, rows in raw.items():
        if not isinstance(rows, list) or table not in TABLE_COLUMNS:
            out[table] = copy.deepcopy(rows)  # not a table this version knows: leave it for the schema to refuse
            continue
        columns = list(TABLE_COLUMNS[table])
        for r in rows:
            columns += [k for k in r if k not in columns]
        encoded = []
        for i, r in enumerate(rows):
            missing = [c for c in columns if c not in r]
            if missing:
                raise TableEncodingError(f"raw.{table}[{i}] lacks {', '.join(missing)}, which other records have")
            encoded.append([r[c] for c in columns])
        out[table] = {"columns": columns, "rows": encoded}
    return out


def decode_raw(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Column-wise tables -> record-wise ones. Call after the file passed :func:`file_schema` (a table's columns
    are then the model's and every row has one value per column)."""
    out: dict[str, Any] = {}
    for table, body in raw.items():
        if isinstance(body, dict) and "columns" in body and "rows" in body:
            columns = body["columns"]
            out[table] = [dict(zip(columns, row)) for row in body["rows"]]
        else:
            out[table] = body
    return out


def file_schema(record_schema: dict[str, Any]) -> dict[str, Any]:
    """The schema of a 2.0 file, from the schema of the in-memory form (``RunResult.model_json_schema``).

    Each raw table becomes ``{"columns": <const list>, "rows": [[...]]}`` whose rows' ``prefixItems`` are the
    record's own field schemas, so every value is checked as strictly as in a record."""
    schema = copy.deepcopy(record_schema)
    defs = schema["$defs"]
    tables = defs["RawTables"]["properties"]
    for table, columns in TABLE_COLUMNS.items():
        prop = tables[table]
        record = defs[prop["items"]["$ref"].rsplit("/", 1)[-1]]
        fields = record["properties"]
        tables[table] = {
            **{k: v for k, v in prop.items() if k in ("title", "description")},
            "type": "object",
            "additionalProperties": False,
            "required": ["columns", "rows"],
            "properties": {
                "columns": {"const": list(columns), "description": f"The {record['title']} fields, in row order."},
                "rows": {
                    "type": "array",
                    "description": record.get("description", ""),
                    "items": {
                        "type": "array",
                        "prefixItems": [fields[c] for c in columns],
                        "items": False,
                        "minItems": len(columns),
                    },
                },
            },
        }
    return schema


def error_path(path: Sequence[Any]) -> list[Any]:
    """A schema error's path in the file -> the record-wise path a reader knows: ``raw.scores.rows[3][7]`` is
    ``raw.scores[3].score``."""
    parts = list(path)
    if len(parts) >= 4 and parts[0] == "raw" and parts[2] == "rows" and parts[1] in TABLE_COLUMNS:
        table, index = parts[1], parts[3]
        rest: list[Any] = []
        if len(parts) >= 5 and isinstance(parts[4], int):
            columns = TABLE_COLUMNS[table]
            rest = [columns[parts[4]] if parts[4] < len(columns) else f"<column {parts[4]}>"] + parts[5:]
        return ["raw", table, index, *rest]
    return parts


def dumps(data: Any) -> str:
    """JSON text with two-space indentation, except that a list holding no objects sits on one line, so does an
    object of plain values that fits :data:`ONE_LINE`, and a list of lists (a table's rows) has one row per line;
    ends with a newline."""
    lines: list[str] = []
    _write(data, 0, lines, "")
    return "".join(lines) + "\n"


def _compact(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, allow_nan=False)


ONE_LINE = 200
"""The longest line an object of plain values is written on whole; a longer one gets a line per field."""


def _flat(obj: list[Any]) -> bool:
    return not any(isinstance(x, (dict, list)) for x in obj)


def _write(obj: Any, level: int, out: list[str], prefix: str) -> None:
    pad, inner = "  " * level, "  " * (level + 1)
    if isinstance(obj, dict) and obj and _flat(list(obj.values())) and len(prefix) + len(_compact(obj)) <= ONE_LINE:
        out.append(prefix + _compact(obj))  # a record of plain values (a client's summary row) reads as one line
    elif isinstance(obj, dict) and obj:
        out.append(prefix + "{\n")
        items = list(obj.items())
        for i, (key, value) in enumerate(items):
            _write(value, level + 1, out, inner + _compact(key) + ": ")
            out.append(",\n" if i < len(items) - 1 else "\n")
        out.append(pad + "}")
    elif isinstance(obj, list) and obj and not _flat(obj):
        rows = all(isinstance(x, list) for x in obj)
        out.append(prefix + "[\n")
        for i, value in enumerate(obj):
            if rows:
                out.append(inner + _compact(value))
            else:
                _write(value, level + 1, out, inner)
            out.append(",\n" if i < len(obj) - 1 else "\n")
        out.append(pad + "]")
    else:
        out.append(prefix + _compact(obj))
