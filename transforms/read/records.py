"""Parsing records: JSON Lines objects, Parquet text and id columns, and id values.

Pure functions, no Beam. Each returns what the record gives or, for a bad
record, the reason that becomes its dead letter.

Text comes back as the exact bytes of the input. For JSON Lines that needs
care, because ``json`` works on str:

* raw bytes that are not valid UTF-8 are decoded with ``surrogateescape``
  (to U+DC80..U+DCFF) and encoded back to the same bytes;
* a JSON escape of a lone surrogate (``"\\ud83d"``, common in text cut by
  JavaScript tools) has no UTF-8 form and is kept as its 3-byte surrogate
  encoding (``ED A0 BD``), like every other lone surrogate. The escapes
  ``"\\udc80"``..``"\\udcff"`` give the same code points as raw invalid bytes,
  so in a line holding raw invalid bytes each escape of U+DC00..U+DCFF is
  marked before parsing (with a U+DC00 in front, which raw bytes never give)
  and the two are told apart when encoding.
"""

import json
import posixpath
import re

import pyarrow as pa

from transforms.read.compression import detect_compression

__all__ = [
    "FORMATS", "detect_format", "strip_bom", "parse_json_line", "text_column_problem",
    "id_column_problem", "id_problem", "is_unicode", "text_values", "id_values",
]

FORMATS = ("auto", "text", "jsonl", "parquet")

_FORMAT_BY_EXTENSION = {
    ".jsonl": "jsonl",
    ".json": "jsonl",
    ".ndjson": "jsonl",
    ".parquet": "parquet",
}

_BOM = b"\xef\xbb\xbf"
# json.loads(text, strict=False) builds a decoder per call; one made once does
# the same. strict=False accepts raw control characters (tabs, NULs) in strings.
_DECODER = json.JSONDecoder(strict=False)
_MARK = "\udc00"  # before a code point from a JSON escape, in lines with raw invalid bytes
_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|.)", re.DOTALL)


def detect_format(path: str) -> str:
    """Returns "jsonl", "parquet" or "text" from the extension after compression."""
    base = path
    if detect_compression(base):
        base = posixpath.splitext(base)[0]
    ext = posixpath.splitext(base)[1].lower()
    return _FORMAT_BY_EXTENSION.get(ext, "text")


# --- JSON Lines ------------------------------------------------------------------


def strip_bom(line: bytes) -> bytes:
    """The first line of a JSON Lines file without its UTF-8 byte order mark."""
    return line[len(_BOM):] if line.startswith(_BOM) else line


def parse_json_line(
    line: bytes, text_field: str, id_field: str | None
) -> tuple[bytes, str | None] | str:
    """Returns (data, doc_id) for a good JSON Lines record, else the reason.

    The line must not be blank (blank lines are not records).
    """
    try:
        text = line.decode("utf-8")
        raw_bytes = False
    except UnicodeDecodeError:
        text = _mark_low_surrogate_escapes(line.decode("utf-8", "surrogateescape"))
        raw_bytes = True
    try:
        value = _loads(text)
    except ValueError as e:  # JSONDecodeError
        return f"malformed JSON: {e}"
    except RecursionError:
        return "malformed JSON: nested too deeply"
    if not isinstance(value, dict):
        return f"JSON value is {_json_kind(value)}, expected an object"
    if text_field not in value:
        return f"missing field {text_field!r}"
    data = value[text_field]
    if not isinstance(data, str):
        return f"field {text_field!r} is {_json_kind(data)}, expected a string"
    doc_id, problem = _json_id(value.get(id_field) if id_field else None, raw_bytes)
    if problem:
        return f"id field {id_field!r} {problem}"
    return _to_bytes(data, raw_bytes), doc_id


def _loads(text: str):
    """``json.loads(text, strict=False)``: the same checks, the same errors."""
    if text.startswith("\ufeff"):
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    return _DECODER.decode(text)


def _json_id(value, raw_bytes: bool) -> tuple[str | None, str | None]:
    """(the id as a string, None), or (None, what is wrong with the value as an id).

    A string is kept, an integer becomes its decimal digits, null is no id.
    A string that is not valid Unicode (a lone surrogate escape, raw bytes that
    are not UTF-8) is no id (``id_problem``).
    """
    if value is None:
        return None, None
    if isinstance(value, str):
        data = _to_bytes(value, raw_bytes)
        try:
            return data.decode("utf-8"), None
        except UnicodeDecodeError as e:
            return None, id_problem(data, e)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value), None
    if isinstance(value, float):
        return None, "is a number with a fraction or exponent, expected a string or an integer"
    return None, f"is {_json_kind(value)}, expected a string or an integer"


def id_problem(data: bytes, error: UnicodeDecodeError) -> str:
    """Why an id of these bytes, not valid UTF-8, is refused (``error``: decoding them).

    Ids are stored as UTF-8 text (the shards' ``id`` column is a Parquet string).
    Any spelling of such an id in valid UTF-8 (``\\xNN`` escapes, U+FFFD) is the
    spelling of some other, valid id too, so the record is a dead letter instead.
    """
    start = error.start
    if data[start:start + 1] == b"\xed" and b"\xa0" <= data[start + 1:start + 2] <= b"\xbf":
        what = f"a lone surrogate, {data[start:start + 3].hex(' ')}"  # encoded as 3 bytes, surrogatepass
    else:
        what = f"bytes that are not UTF-8, {data[start:error.end].hex(' ')}"
    return (f"is not valid Unicode ({what} at byte {start}): ids are stored as UTF-8 text, and any other "
            "spelling of it could be another record's id")


def is_unicode(text: str) -> bool:
    """Whether a str is valid Unicode, so storable as an id: no lone surrogates (a JSON
    escape, or bytes of a file name or a command line that are not UTF-8, give them)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _mark_low_surrogate_escapes(text: str) -> str:
    """Puts ``\\udc00`` before every JSON escape of U+DC00..U+DCFF that is not
    the second half of a surrogate pair."""
    out = []
    done = 0
    high_end = -1  # where an escape of a high surrogate ended
    for m in _ESCAPE.finditer(text):
        code = int(m.group(1), 16) if m.group(1) else None
        if code is not None and 0xDC00 <= code <= 0xDCFF and m.start() != high_end:
            out.append(text[done:m.start()])
            out.append("\\udc00")
            done = m.start()
        high_end = m.end() if code is not None and 0xD800 <= code <= 0xDBFF else -1
    out.append(text[done:])
    return "".join(out)


def _to_bytes(text: str, raw_bytes: bool) -> bytes:
    """A JSON string value back as the bytes it came from (see the module docstring)."""
    if not raw_bytes:
        return text.encode("utf-8", "surrogatepass")
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        pass
    out = bytearray()
    escaped = False
    for ch in text:
        code = ord(ch)
        if not escaped and ch == _MARK:
            escaped = True
            continue
        if not escaped and 0xDC80 <= code <= 0xDCFF:
            out.append(code - 0xDC00)  # a raw invalid byte
        else:
            out += ch.encode("utf-8", "surrogatepass")
        escaped = False
    return bytes(out)


def _json_kind(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


# --- Parquet -----------------------------------------------------------------------


def text_column_problem(schema: pa.Schema, text_field: str) -> str | None:
    """Why a Parquet schema cannot give documents, or None if it can."""
    if text_field not in schema.names:
        return f"no column {text_field!r} (columns: {', '.join(schema.names)})"
    column_type = schema.field(text_field).type
    if not _is_text_type(column_type):
        return f"column {text_field!r} has type {column_type}, expected string or binary"
    return None


def id_column_problem(schema: pa.Schema, id_field: str | None) -> str | None:
    """Why a Parquet schema's id column cannot give ids, or None if it can (or is absent)."""
    if not id_field or id_field not in schema.names:
        return None
    column_type = schema.field(id_field).type
    if pa.types.is_dictionary(column_type):
        column_type = column_type.value_type
    if _is_text_type(column_type) or pa.types.is_integer(column_type):
        return None
    return f"id column {id_field!r} has type {column_type}, expected string, binary or integer"


def _is_text_type(t: pa.DataType) -> bool:
    return (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_fixed_size_binary(t)
        or getattr(pa.types, "is_string_view", lambda _: False)(t)
        or getattr(pa.types, "is_binary_view", lambda _: False)(t)
    )


def text_values(column: pa.ChunkedArray) -> list[bytes | None]:
    """A string or binary column's values as exact bytes (None for nulls)."""
    # Casting string -> binary reinterprets the buffers without validating, so
    # invalid UTF-8 stored in a string column comes out byte-exact.
    t = column.type
    if pa.types.is_string(t):
        column = column.cast(pa.binary())
    elif pa.types.is_large_string(t):
        column = column.cast(pa.large_binary())
    elif not (pa.types.is_binary(t) or pa.types.is_large_binary(t)
              or pa.types.is_fixed_size_binary(t)):
        column = column.cast(pa.binary())  # string/binary views
    return column.to_pylist()


def id_values(column: pa.ChunkedArray) -> tuple[list[str | None], dict[int, str]]:
    """An id column's values as strings (None for nulls), and the reasons of the values
    that are no id, by position (None there); see ``id_column_problem``.

    Integers become their decimal digits; string and binary values are kept. A
    value that is not valid UTF-8 is no id (``id_problem``).
    """
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    if pa.types.is_integer(column.type):
        return [None if v is None else str(v) for v in column.to_pylist()], {}
    ids: list[str | None] = []
    problems: dict[int, str] = {}
    for position, value in enumerate(text_values(column)):
        try:
            ids.append(None if value is None else value.decode("utf-8"))
        except UnicodeDecodeError as e:
            ids.append(None)
            problems[position] = id_problem(value, e)
    return ids, problems
