"""A result's raw tables as Parquet files beside its JSON (result file schema 3.0).

The raw tables (every client x task x evaluation round x seed, the costs, the methods' diagnostics) are nine tenths
of a result and the part nobody reads as text. Stored as JSON, the 249 committed result files were 166 MB of every
checkout; as Parquet (typed columns, zstd) the same tables are about a twentieth, readable by ``pandas.read_parquet``,
``datasets.load_dataset("parquet", ...)`` and any Arrow tool, while the summary and the provenance stay JSON that
``jq`` and a text diff read (the layout of the Open LLM Leaderboard's results and details).

Beside ``result.json`` each non-empty table is ``result.<table>.<sha256[:16]>.parquet``, and the JSON's ``raw``
records each table's row count and full sha256. The name is derived, never read from the JSON, so a result file
cannot point a reader elsewhere; the digest in the name makes a rewrite atomic (the new tables are written under new
names, then the JSON replaces the old one, then the old tables go), so an interrupted write leaves the previous
result readable; and the sha256 in the JSON means the JSON's own hash (what a submission or a verification record
pins) covers the tables too.

Columns are the record model's fields in order, typed from their annotations: ``int`` -> int64, ``float`` ->
float64, ``str`` and ``Literal`` -> string, ``bool`` -> bool, each nullable where the field is optional; a field
holding a mapping (a cost's per-tensor element counts, a diagnostic's named values) is its compact JSON text, so
its int/float distinction survives. Reading refuses, in one line naming the file, a table that is missing, larger
than :data:`MAX_TABLE_BYTES` on disk or :data:`MAX_TABLE_DECODED_BYTES` decoded, not the one the JSON was written
with, not Parquet, or not of the columns this version writes.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import tempfile
import types
import typing
from pathlib import Path
from typing import Any, Mapping

import pyarrow as pa
import pyarrow.parquet as pq

from drake_bench.errors import DrakeBenchError
from drake_bench.evaluation.metrics import RawTables

__all__ = [
    "MAX_TABLE_BYTES",
    "MAX_TABLE_DECODED_BYTES",
    "TABLE_NAMES",
    "RawTableError",
    "arrow_schema",
    "encode_tables",
    "read_tables",
    "remove_stale_tables",
    "table_files",
    "table_path",
    "write_tables",
]

MAX_TABLE_BYTES = 64 * 1024 * 1024
"""The largest raw-table file read: the largest committed table is about a tenth of a megabyte, a 52-client
board over many rounds a few megabytes."""
MAX_TABLE_DECODED_BYTES = 1024 * 1024 * 1024
"""The most a table may say it decodes to (Parquet's uncompressed size), so a small crafted file cannot make the
reader allocate without bound."""
COMPRESSION = "zstd"
COMPRESSION_LEVEL = 19
"""zstd's strongest ordinary level: the committed tables are a fifth smaller than at its default, and a board entry's
tables still encode in milliseconds. Column statistics are not written either (a tenth more): a reader loads a
result's table whole, and nothing here filters row groups by them."""


class RawTableError(DrakeBenchError, ValueError):
    """A raw-table file that cannot be written or read as the result file says (message names the file)."""


def _record_types() -> dict[str, type]:
    out: dict[str, type] = {}
    for name, field in RawTables.model_fields.items():
        (record,) = typing.get_args(field.annotation)  # list[Record]
        out[name] = record
    return out


RECORD_TYPES = _record_types()
TABLE_NAMES: tuple[str, ...] = tuple(RECORD_TYPES)
"""The raw tables, in :class:`RawTables`' field order."""


def _arrow_type(annotation: Any) -> tuple[pa.DataType, bool]:
    """A record field's annotation -> (its Arrow type, whether the column holds JSON text)."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType) and len(args) == 1:
        return _arrow_type(args[0])
    if origin is typing.Literal:
        return pa.string(), False
    scalar = {int: pa.int64(), float: pa.float64(), str: pa.string(), bool: pa.bool_()}
    if annotation in scalar:
        return scalar[annotation], False
    return pa.string(), True  # a mapping or a union of kinds: its JSON text


def _schemas() -> tuple[dict[str, pa.Schema], dict[str, tuple[str, ...]]]:
    schemas: dict[str, pa.Schema] = {}
    json_columns: dict[str, tuple[str, ...]] = {}
    for table, record in RECORD_TYPES.items():
        fields, as_json = [], []
        for name, info in record.model_fields.items():
            kind, is_json = _arrow_type(info.annotation)
            fields.append(pa.field(name, kind, nullable=True))
            if is_json:
                as_json.append(name)
        schemas[table] = pa.schema(fields)
        json_columns[table] = tuple(as_json)
    return schemas, json_columns


_SCHEMAS, _JSON_COLUMNS = _schemas()


def arrow_schema(table: str) -> pa.Schema:
    """The Arrow schema of raw table ``table`` as this version writes it."""
    return _SCHEMAS[table]


def table_path(json_path: str | Path, table: str, sha256: str) -> Path:
    """Where the result file ``json_path`` keeps raw table ``table`` whose bytes hash to ``sha256``."""
    json_path = Path(json_path)
    return json_path.with_name(f"{json_path.stem}.{table}.{sha256[:16]}.parquet")


def _sidecar_pattern(json_path: Path) -> re.Pattern[str]:
    tables = "|".join(map(re.escape, TABLE_NAMES))
    return re.compile(rf"{re.escape(json_path.stem)}\.({tables})\.[0-9a-f]{{16}}\.parquet")


def table_files(json_path: str | Path, index: Mapping[str, Any]) -> list[Path]:
    """The raw-table files the result file ``json_path`` with raw index ``index`` reads (for copying a result)."""
    return [
        table_path(json_path, table, entry["sha256"])
        for table, entry in index.items()
        if isinstance(entry, Mapping) and entry.get("rows") and isinstance(entry.get("sha256"), str)
    ]


# --------------------------------------------------------------------------- write


def _encode(table: str, rows: list[Mapping[str, Any]]) -> bytes:
    schema = _SCHEMAS[table]
    json_cols = _JSON_COLUMNS[table]
    columns: dict[str, list[Any]] = {}
    for name in schema.names:
        values = [r.get(name) for r in rows]
        if name in json_cols:
            values = [None if v is None else json.dumps(v, sort_keys=False, allow_nan=False) for v in values]
        columns[name] = values
    unknown = sorted({k for r in rows for k in r} - set(schema.names))
    if unknown:
        raise RawTableError(f"raw.{table} has fields no {table} record has: {', '.join(unknown)}")
    try:
        arrow = pa.table(columns, schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError) as exc:
        raise RawTableError(f"raw.{table} does not fit its columns' types: {exc}") from None
    buffer = io.BytesIO()
    pq.write_table(arrow, buffer, compression=COMPRESSION, compression_level=COMPRESSION_LEVEL, write_statistics=False)
    return buffer.getvalue()


def encode_tables(raw: Mapping[str, list[Mapping[str, Any]]]) -> tuple[dict[str, dict[str, Any]], dict[str, bytes]]:
    """Record-wise raw tables (``model_dump(mode="json")``'s form) -> (the JSON's ``raw`` index, each non-empty
    table's Parquet bytes). A table with no rows has no file."""
    unknown = sorted(set(raw) - set(TABLE_NAMES))
    if unknown:
        raise RawTableError(f"raw has tables this version does not know: {', '.join(unknown)}")
    index: dict[str, dict[str, Any]] = {}
    blobs: dict[str, bytes] = {}
    for table in TABLE_NAMES:
        rows = list(raw.get(table) or [])
        if not rows:
            index[table] = {"rows": 0, "sha256": None}
            continue
        blob = _encode(table, rows)
        digest = hashlib.sha256(blob).hexdigest()
        index[table] = {"rows": len(rows), "sha256": digest}
        blobs[table] = blob
    return index, blobs


def _write_atomically(path: Path, blob: bytes) -> None:
    if path.is_file() and path.stat().st_size == len(blob) and path.read_bytes() == blob:
        return  # content-addressed: a rewrite of the same table leaves its file as it is
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_tables(json_path: str | Path, index: Mapping[str, Mapping[str, Any]], blobs: Mapping[str, bytes]) -> None:
    """Write the tables :func:`encode_tables` made beside ``json_path`` (before the JSON is replaced)."""
    json_path = Path(json_path)
    json_path.parent.mkdir(parents=True, exist_ok=True)
    for table, blob in blobs.items():
        _write_atomically(table_path(json_path, table, index[table]["sha256"]), blob)


def remove_stale_tables(json_path: str | Path, index: Mapping[str, Any]) -> None:
    """Remove the table files of earlier versions of ``json_path`` (after the JSON naming ``index`` replaced it)."""
    json_path = Path(json_path)
    keep = {p.name for p in table_files(json_path, index)}
    pattern = _sidecar_pattern(json_path)
    for p in json_path.parent.iterdir():
        if pattern.fullmatch(p.name) and p.name not in keep:
            p.unlink(missing_ok=True)


# --------------------------------------------------------------------------- read


def _read_one(json_path: Path, table: str, rows: int, sha256: str) -> list[dict[str, Any]]:
    path = table_path(json_path, table, sha256)
    where = f"{json_path}: raw.{table} ({path.name})"
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise RawTableError(
            f"{where} is not there: a result file of schema 3.0 keeps its raw tables beside it; copy them with it"
        ) from None
    if size > MAX_TABLE_BYTES:
        raise RawTableError(f"{where} is larger than {MAX_TABLE_BYTES // 2**20} MiB, more than any raw table is")
    blob = path.read_bytes()
    if hashlib.sha256(blob).hexdigest() != sha256:
        raise RawTableError(f"{where} is not the table the result file was written with (its sha256 differs)")
    try:
        parquet = pq.ParquetFile(io.BytesIO(blob))
        meta = parquet.metadata
        decoded = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
        if decoded > MAX_TABLE_DECODED_BYTES:
            raise RawTableError(f"{where} says it decodes to {decoded} bytes, more than any raw table does")
        if not parquet.schema_arrow.equals(_SCHEMAS[table]):
            raise RawTableError(
                f"{where} has columns {parquet.schema_arrow.names} of types other than this version's "
                f"({', '.join(f'{f.name}: {f.type}' for f in _SCHEMAS[table])})"
            )
        if meta.num_rows != rows:
            raise RawTableError(f"{where} holds {meta.num_rows} rows; the result file says {rows}")
        records = parquet.read().to_pylist()
    except (pa.ArrowException, OSError, ValueError) as exc:
        if isinstance(exc, RawTableError):
            raise
        raise RawTableError(f"{where} is not a Parquet table this version reads: {exc}") from None
    for column in _JSON_COLUMNS[table]:
        for i, record in enumerate(records):
            text = record[column]
            if text is not None:
                try:
                    record[column] = json.loads(text)
                except (ValueError, RecursionError):
                    raise RawTableError(f"{where}: row {i}'s {column} is not JSON text") from None
    return records


def read_tables(json_path: str | Path, index: Mapping[str, Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The raw tables of the result file ``json_path`` from its (schema-checked) ``raw`` index, record-wise."""
    json_path = Path(json_path)
    out: dict[str, list[dict[str, Any]]] = {}
    for table in TABLE_NAMES:
        entry = index.get(table) or {"rows": 0, "sha256": None}
        rows, sha256 = entry.get("rows", 0), entry.get("sha256")
        if rows == 0:
            out[table] = []
            continue
        if not isinstance(sha256, str):
            raise RawTableError(f"{json_path}: raw.{table} has {rows} rows but no sha256")
        out[table] = _read_one(json_path, table, rows, sha256)
    return out


def index_schema() -> dict[str, Any]:
    """The JSON Schema of a 3.0 file's ``raw``: one ``{"rows": n, "sha256": hex | null}`` per table."""
    entry = {
        "type": "object",
        "additionalProperties": False,
        "required": ["rows", "sha256"],
        "properties": {
            "rows": {"type": "integer", "minimum": 0, "description": "The table's number of records."},
            "sha256": {
                "anyOf": [{"type": "string", "pattern": "^[0-9a-f]{64}$"}, {"type": "null"}],
                "description": "sha256 of the table's Parquet file, result.<table>.<sha256[:16]>.parquet beside "
                "the result file; null for a table with no rows (no file).",
            },
        },
    }
    return {
        "type": "object",
        "title": "RawTables",
        "description": "Where the raw tables are: each in a Parquet file beside this one (see drake_bench.results."
        "tables); the summary above is recomputed from them by `drake-bench check`.",
        "additionalProperties": False,
        "required": list(TABLE_NAMES),
        "properties": {table: entry for table in TABLE_NAMES},
    }
