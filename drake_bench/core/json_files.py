"""Reading a JSON file someone else wrote: a result file, ``submission.json``, a board definition, a manifest given by
path, a checkpoint's ``progress.json``.

Such a file comes from a submitter, a user or a disk, so it may be anything. Python's :func:`json.loads` meets some
of that with exceptions no caller expects from a file: ``UnicodeDecodeError`` for bytes that are not UTF-8,
``RecursionError`` for ``[[[[...]]]]`` a few thousand deep (its decoder recurses), ``ValueError: Exceeds the limit
(4300 digits)`` for a 100,000-digit integer; and it reads what JSON does not have (``NaN``, ``Infinity``, ``1e999``
as infinity) or what is no Unicode text (``"\\ud800"``, a lone surrogate, which later fails every UTF-8 write of it).
:func:`read_json` refuses each of these, and a file larger than its kind can be, with one
:class:`~drake_bench.errors.JSONFileError` naming the file and why, and returns exactly what :func:`json.loads`
returns for every other file: the same values, of the same types.

The limits, and why:

* size: :data:`DEFAULT_MAX_BYTES` (64 MiB) for result files, the largest files drake_bench reads: the biggest
  committed one is 4.2 MB (``leaderboard/fedllm-synth-dynamic``, 2.0 layout; the same board in the 1.0 layout,
  one object per record, is about four times that), so 64 MiB is room to spare, while decoding one stays under a
  gigabyte of memory (the decoded objects take about 4x the file's bytes). :data:`SMALL_FILE_MAX_BYTES` (1 MiB) for
  ``submission.json`` and board definitions (a few KB each), :data:`MANIFEST_MAX_BYTES` (16 MiB) for manifests (the
  largest shipped one is 140 KB); a checkpoint's ``progress.json``, drake_bench's own file, is allowed 1 GiB
  (:data:`drake_bench.evaluator.checkpoint.PROGRESS_MAX_BYTES`). The file is read up to one byte past its limit, never further.
* depth: :data:`MAX_DEPTH` (64) nested arrays and objects. The deepest file drake_bench reads is a manifest at 7
  (result files 6, board definitions 4); 64 leaves room for nested method settings and stays far below Python's
  recursion limit (1000), so that no recursive reader of the decoded data (pydantic, jsonschema, a result's diff)
  can hit it. Checked on the decoded data with an explicit stack; deeper input than the decoder itself can take is
  caught as the ``RecursionError`` it raises.
* integers: :data:`MAX_INT_DIGITS` (4300) digits, Python's own default limit (``sys.get_int_max_str_digits()``),
  checked by the decoder before ``int()`` runs, so it holds whatever that setting is (0, no limit, makes ``int()`` of
  a long digit string take quadratic time). Floats must be finite: ``NaN``, ``Infinity`` and ``-Infinity`` are no
  JSON, and a literal beyond a double's range (``1e400``) would read as infinity.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from drake_bench.errors import JSONFileError

__all__ = [
    "DEFAULT_MAX_BYTES",
    "MANIFEST_MAX_BYTES",
    "MAX_DEPTH",
    "MAX_INT_DIGITS",
    "SMALL_FILE_MAX_BYTES",
    "parse_json",
    "read_json",
]

MiB = 1 << 20
DEFAULT_MAX_BYTES = 64 * MiB
"""The most bytes a result file (the largest JSON file drake_bench reads) may have; see the module's docstring."""
SMALL_FILE_MAX_BYTES = 1 * MiB
"""The most bytes of a ``submission.json`` or a board definition (a few KB each)."""
MANIFEST_MAX_BYTES = 16 * MiB
"""The most bytes of a benchmark manifest given by path (the largest shipped one is 140 KB)."""
MAX_DEPTH = 64
"""The most arrays and objects nested in one another (the deepest file drake_bench reads has 7)."""
MAX_INT_DIGITS = 4300
"""The most digits of an integer (Python's default ``sys.get_int_max_str_digits()``)."""

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SURROGATE = re.compile("[\ud800-\udfff]")


class _Refused(Exception):
    """Raised by the decoder's hooks; becomes a :class:`JSONFileError` naming the file."""


def _int(text: str) -> int:
    digits = len(text) - text.startswith("-")
    if digits > MAX_INT_DIGITS:
        raise _Refused(f"holds an integer of {digits} digits, more than the {MAX_INT_DIGITS} Python reads")
    try:
        return int(text)
    except ValueError as exc:  # a lower sys.set_int_max_str_digits() than ours
        raise _Refused(f"holds an integer Python cannot read ({exc})") from None


def _float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        shown = text if len(text) <= 40 else text[:20] + "..." + text[-10:]
        raise _Refused(f"holds the number {shown}, beyond the range of a double (it would read as infinity)")
    return value


def _constant(name: str) -> Any:
    raise _Refused(f"is not valid JSON: it holds {name}, which JSON has no number for")


def _depth_and_surrogates(data: Any, max_depth: int, strings: bool) -> str | None:
    """Why ``data`` is refused (nested deeper than ``max_depth``; with ``strings``, a string or key holding a lone
    surrogate), or None. Iterative: data nested as deep as the decoder allows must not recurse here either."""
    stack = [(data, 1)] if type(data) in (list, dict) else []
    if strings and type(data) is str and _SURROGATE.search(data):
        return "holds a string with an unpaired surrogate escape (\\ud800-\\udfff), which is no Unicode text"
    while stack:
        node, depth = stack.pop()
        if depth > max_depth:
            return f"nests arrays and objects more than {max_depth} levels deep"
        if type(node) is dict:
            if strings and any(_SURROGATE.search(k) for k in node):
                return "holds a key with an unpaired surrogate escape (\\ud800-\\udfff), which is no Unicode text"
            children = node.values()
        else:
            children = node
        for v in children:
            t = type(v)
            if t is list or t is dict:
                stack.append((v, depth + 1))
            elif strings and t is str and _SURROGATE.search(v):
                return "holds a string with an unpaired surrogate escape (\\ud800-\\udfff), which is no Unicode text"
    return None


def json_bytes(obj: Any) -> bytes:
    """``obj`` as the files drake_bench publishes and pins are written: indented, keys sorted, a final newline, so
    the same value is always the same bytes (and the same sha256)."""
    return (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode()


def parse_json(data: bytes | str, *, where: str, what: str, max_depth: int = MAX_DEPTH, allow_nan: bool = False) -> Any:
    """The JSON value of ``data`` (a file's bytes, or its text), refused as :func:`read_json` refuses a file, with
    ``where`` (the file's name) leading the message. ``allow_nan`` reads ``NaN`` and ``Infinity`` (for a file that
    drake_bench itself wrote with Python's default ``json.dumps``, which writes them)."""

    def refuse(reason: str) -> JSONFileError:
        return JSONFileError(f"{where} {reason}", path=where)

    if isinstance(data, (bytes, bytearray)):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise refuse(
                f"is not UTF-8 text (byte {exc.start}: {exc.reason}); a {what} is JSON, which is UTF-8"
            ) from None
    else:
        text = data
    hooks: dict[str, Any] = {"parse_int": _int, "parse_float": _float}
    if not allow_nan:
        hooks["parse_constant"] = _constant
    try:
        value = json.loads(text, **hooks)
    except _Refused as exc:
        raise refuse(str(exc)) from None
    except json.JSONDecodeError as exc:
        raise refuse(f"is not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}") from None
    except RecursionError:
        raise refuse(
            f"nests arrays and objects more than {max_depth} levels deep (deeper than Python's JSON decoder goes)"
        ) from None
    why = _depth_and_surrogates(value, max_depth, strings=_SURROGATE_ESCAPE.search(text) is not None)
    if why:
        raise refuse(why)
    return value


def read_json(
    path: str | Path,
    *,
    what: str,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_depth: int = MAX_DEPTH,
    allow_nan: bool = False,
) -> Any:
    """The JSON value of the file ``path``, a ``what`` (``"result file"``, ``"board definition"``: said in messages).

    Refuses, with one :class:`~drake_bench.errors.JSONFileError` naming the file: a file that does not exist
    (``missing`` set) or cannot be read, one larger than ``max_bytes`` (read no further than that), not UTF-8, not
    JSON, nested deeper than ``max_depth``, or holding an integer of more than :data:`MAX_INT_DIGITS` digits, ``NaN``
    / ``Infinity`` (unless ``allow_nan``), a number beyond a double's range, or a lone surrogate. Every other file
    reads exactly as :func:`json.loads` reads it. The limits and why they are what they are: the module's docstring.
    """
    path = Path(path)
    try:
        with open(path, "rb") as f:
            raw = f.read(max_bytes + 1)
    except FileNotFoundError:
        raise JSONFileError(f"{what} {path} does not exist", path=str(path), missing=True) from None
    except IsADirectoryError:
        raise JSONFileError(f"{what} {path} is a folder, not a file", path=str(path)) from None
    except OSError as exc:
        raise JSONFileError(f"cannot read {what} {path}: {exc.strerror or exc}", path=str(path)) from None
    if len(raw) > max_bytes:
        raise JSONFileError(
            f"{path} is larger than {_size(max_bytes)}, more than any {what} is; not read further", path=str(path)
        )
    return parse_json(raw, where=str(path), what=what, max_depth=max_depth, allow_nan=allow_nan)


def _size(n: int) -> str:
    return f"{n // MiB} MiB" if n >= MiB and n % MiB == 0 else f"{n} bytes"
