"""Record conventions: id values, and JSON escapes of lone surrogates beside raw invalid bytes."""

import json

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.read_assertions import check_read
from transforms.read import Document
from transforms.read import records
from transforms.read.records import parse_json_line


def test_json_ids_are_strings_integers_or_absent_and_nothing_else(corpus):
    values = ['"a1"', "7", "-3", str(10**30), "null", '"caf\xc3\xa9"', "1.5", "1.0", "2e3", "true", "false",
              "{}", '{"k": 1}', "[]", "[1]"]
    lines = [b'{"text": "t%d", "id": %s}\n' % (i, v.encode("latin-1")) for i, v in enumerate(values, 1)]
    lines.append(b'{"text": "no id field"}\n')
    path = corpus.write_raw("ids.jsonl", b"".join(lines))
    ids = ["a1", "7", "-3", str(10**30), None, "caf\u00e9"]
    documents = [Document(path, i, b"t%d" % i, doc_id) for i, doc_id in enumerate(ids, 1)]
    documents.append(Document(path, len(lines), b"no id field", None))
    kinds = ["a number with a fraction or exponent"] * 3 + ["a boolean"] * 2 + ["an object"] * 2 + ["an array"] * 2
    dead = [(path, i, f"id field 'id' is {kind}, expected a string or an integer")
            for i, kind in enumerate(kinds, len(ids) + 1)]
    check_read([path], documents, dead, id_field="id")


NOT_UNICODE = ("is not valid Unicode ({}): ids are stored as UTF-8 text, "
               "and any other spelling of it could be another record's id")


def test_a_json_id_that_is_not_unicode_is_a_dead_letter_and_no_valid_id_changes(corpus):
    """A lone surrogate escape or raw invalid bytes in an id have no UTF-8 spelling that is
    not also a valid id's (``"\\xed\\xa0\\x80"`` written out, say): the record is a dead
    letter; every valid id, backslashes, escapes and surrogate pairs included, is kept as it is."""
    lines = [
        b'{"text": "x", "id": "raw \xff"}\n',
        b'{"text": "y", "id": "half \\ud83d"}\n',
        b'{"text": "z", "id": "\\ud800"}\n',
        b'{"text": "w", "id": "\\\\xed\\\\xa0\\\\x80"}\n',  # the characters \xed\xa0\x80: a valid id
        b'{"text": "v", "id": "pair \\ud83d\\ude00 \\\\ud800 back\\\\slash"}\n',
        b'{"text": "u \xfe", "id": "low \\udc80"}\n',  # raw bytes in the line, an escaped low surrogate
    ]
    path = corpus.write_raw("ids.jsonl", b"".join(lines))
    documents = [Document(path, 4, b"w", "\\xed\\xa0\\x80"),
                 Document(path, 5, b"v", "pair \U0001f600 \\ud800 back\\slash")]
    dead = [(path, 1, "id field 'id' " + NOT_UNICODE.format("bytes that are not UTF-8, ff at byte 4")),
            (path, 2, "id field 'id' " + NOT_UNICODE.format("a lone surrogate, ed a0 bd at byte 5")),
            (path, 3, "id field 'id' " + NOT_UNICODE.format("a lone surrogate, ed a0 80 at byte 0")),
            (path, 6, "id field 'id' " + NOT_UNICODE.format("a lone surrogate, ed b2 80 at byte 4"))]
    check_read([path], documents, dead, id_field="id")


def test_parquet_id_columns(corpus):
    integers = corpus.parquet("int.parquet", {"text": ["a", "b", "c"], "id": pa.array([1, None, -2**63], pa.int64())})
    unsigned = corpus.parquet("uint.parquet", {"text": ["a"], "id": pa.array([2**64 - 1], pa.uint64())})
    categories = corpus.parquet("dict.parquet", {"text": ["a", "b"], "id": pa.array(["x", "y"]).dictionary_encode()})
    binary = corpus.parquet("bin.parquet", {"text": ["a", "b", "c"], "id": pa.array([b"k\xff", b"k\\xff", b"\xed\xa0\x80"], pa.binary())})
    floats = corpus.parquet("float.parquet", {"text": ["a"], "id": [1.5]})
    booleans = corpus.parquet("bool.parquet", {"text": ["a"], "id": [True]})
    structs = corpus.parquet("struct.parquet", {"text": ["a"], "id": [{"k": 1}]})
    no_id = corpus.parquet("no_id.parquet", {"text": ["a"]})
    documents = [Document(integers, 1, b"a", "1"), Document(integers, 2, b"b", None),
                 Document(integers, 3, b"c", str(-2**63)), Document(unsigned, 1, b"a", str(2**64 - 1)),
                 Document(categories, 1, b"a", "x"), Document(categories, 2, b"b", "y"),
                 Document(binary, 2, b"b", "k\\xff"), Document(no_id, 1, b"a", None)]
    dead = [(binary, 1, "id column 'id' " + NOT_UNICODE.format("bytes that are not UTF-8, ff at byte 1")),
            (binary, 3, "id column 'id' " + NOT_UNICODE.format("a lone surrogate, ed a0 80 at byte 0")),
            (floats, -1, "id column 'id' has type double, expected string, binary or integer"),
            (booleans, -1, "id column 'id' has type bool"),
            (structs, -1, "id column 'id' has type struct")]
    check_read([corpus.path("*.parquet")], documents, dead, id_field="id")
    # Compressed Parquet is checked when read, with the same result.
    gz = corpus.parquet("float.parquet.gz", {"text": ["a"], "id": [1.5]})
    check_read([gz], [], [(gz, -1, "id column 'id' has type double")], id_field="id")


def test_escaped_low_surrogates_keep_their_3_byte_form_beside_raw_invalid_bytes(corpus):
    lines = [
        b'{"text": "\\udc80 and \\udcff and \\uDCFF"}\n',  # valid UTF-8 line
        b'{"text": "raw \xff\x80 esc \\udcff \\udc80 low \\udc00"}\n',  # raw bytes and escapes
        b'{"text": "pair \\ud83d\\ude00 \\udbff\\udc80 high \\ud83d \xfe"}\n',  # pairs stay pairs
        b'{"text": "\\\\udc80 is text \xff"}\n',  # an escaped backslash, then plain text
    ]
    path = corpus.write_raw("surrogates.jsonl", b"".join(lines))
    check_read([path], [
        Document(path, 1, b"\xed\xb2\x80 and \xed\xb3\xbf and \xed\xb3\xbf", None),
        Document(path, 2, b"raw \xff\x80 esc \xed\xb3\xbf \xed\xb2\x80 low \xed\xb0\x80", None),
        Document(path, 3, b"pair \xf0\x9f\x98\x80 \xf4\x8f\xb2\x80 high \xed\xa0\xbd \xfe", None),
        Document(path, 4, b"\\udc80 is text \xff", None),
    ])


# A JSON string body as parts: raw bytes (any but '"' and '\'), \uXXXX escapes of
# any code unit, and short escapes.
raw_parts = st.binary(min_size=1, max_size=4).filter(lambda b: b'"' not in b and b"\\" not in b)
escape_parts = st.integers(0, 0xFFFF)
short_escapes = st.sampled_from(['\\"', "\\\\", "\\/", "\\n", "\\t"])
parts = st.lists(st.one_of(raw_parts, escape_parts, short_escapes), max_size=12)


def expected_bytes(body_parts) -> bytes:
    """The bytes a string body stands for: raw bytes as they are, escapes as code
    units (a high one directly followed by a low one is a pair), lone ones surrogatepass."""
    out = bytearray()
    i = 0
    while i < len(body_parts):
        part = body_parts[i]
        if isinstance(part, bytes):
            out += part
        elif isinstance(part, str):
            out += json.loads(f'"{part}"').encode()
        else:
            following = body_parts[i + 1] if i + 1 < len(body_parts) else None
            if 0xD800 <= part <= 0xDBFF and isinstance(following, int) and 0xDC00 <= following <= 0xDFFF:
                out += chr(0x10000 + ((part - 0xD800) << 10) + (following - 0xDC00)).encode()
                i += 1
            else:
                out += chr(part).encode("utf-8", "surrogatepass")
        i += 1
    return bytes(out)


def as_json(part) -> bytes:
    if isinstance(part, bytes):
        return part
    if isinstance(part, str):
        return part.encode()
    return b"\\u%04x" % part


@settings(max_examples=400, deadline=None)
@given(parts)
def test_json_strings_come_back_as_the_bytes_they_stand_for(body_parts):
    line = b'{"text": "' + b"".join(map(as_json, body_parts)) + b'", "id": "i"}\n'
    assert parse_json_line(line, "text", "id") == (expected_bytes(body_parts), "i")


def _outcome(load, text):
    try:
        return "value", repr(load(text))  # repr: NaN equals itself
    except ValueError as e:
        return "error", str(e)
    except RecursionError:
        return "recursion", None


json_like = st.lists(
    st.one_of(
        st.sampled_from(['{', '}', '[', ']', '"', ':', ',', '\\', '\\u', 'd83d', 'dc80', ' ', '\t', '\x00', '\ufeff',
                         'null', 'true', 'NaN', 'Infinity', '-', '1', '.5', 'e9', '"text"', '"a\\nb"']),
        st.text(max_size=4),
    ),
    max_size=30,
).map("".join)


@settings(max_examples=1000, deadline=None)
@given(json_like)
def test_the_line_parser_decodes_as_json_loads_does(text):
    # The decoder records.py keeps must give what json.loads(text, strict=False)
    # gives: the same value, or a ValueError with the same message.
    assert _outcome(records._loads, text) == _outcome(lambda t: json.loads(t, strict=False), text)
    bom = "\ufeff" + text
    assert _outcome(records._loads, bom) == _outcome(lambda t: json.loads(t, strict=False), bom)
