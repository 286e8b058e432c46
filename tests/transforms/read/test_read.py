"""ReadDocuments on real files through the DirectRunner, and WriteDeadLetters."""

import bz2
import gzip
import io
import json
import os

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet
import pytest
import zstandard
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.testing import test_pipeline
from apache_beam.testing.util import BeamAssertException, assert_that, equal_to
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.corpora import compress
from tests.support.read_assertions import check_read, dead_letters_like, text_documents
from transforms import metrics
from transforms.dead_letters import WriteDeadLetters
from transforms.read import reading
from transforms.read import (
    DeadLetter,
    Document,
    ReadDocuments,
    detect_compression,
    detect_format,
    match_inputs,
)
from transforms.read.planning import line_starts

COMPRESSIONS = ("", ".gz", ".bz2", ".zst", ".xz")

# Awkward but valid text documents: invalid UTF-8, NUL, CR, a BOM, a lone "\n".
TEXT_LINES = [
    b"hello world\n",
    b"caf\xc3\xa9 \xff\xfe invalid utf-8\n",
    b"nul\x00inside\n",
    b"\n",
    b"crlf line\r\n",
    b"\xef\xbb\xbfbom kept\n",
    b"last line without newline",
]


def test_every_format_and_compression(corpus):
    # One pipeline over 15 files keeps the suite fast; each file's documents are
    # distinguishable by file name.
    expected = []
    jsonl = b"".join(json.dumps({"text": f"doc {i} \u00e9\U0001f600"}).encode() + b"\n" for i in range(3))
    for ext in COMPRESSIONS:
        path = corpus.write(f"t.txt{ext}", b"".join(TEXT_LINES))
        expected += text_documents(path, TEXT_LINES)
        path = corpus.write(f"j.jsonl{ext}", jsonl)
        expected += [Document(path, i + 1, f"doc {i} \u00e9\U0001f600".encode(), None) for i in range(3)]
        path = corpus.parquet(f"p.parquet{ext}", {"text": ["a", "b\u00e9", ""]})
        expected += [Document(path, 1, b"a", None), Document(path, 2, "b\u00e9".encode(), None), Document(path, 3, b"", None)]
    check_read([corpus.path("*")], expected)


def test_explicit_format_overrides_extension(corpus):
    path = corpus.write("data.log.gz", b'{"text": "x"}\n')
    check_read([path], [Document(path, 1, b"x", None)], format="jsonl")
    check_read([path], [Document(path, 1, b'{"text": "x"}\n', None)], format="auto")


def test_detection_from_extension():
    assert detect_format("gs://b/x.JSONL.ZST") == "jsonl"
    assert detect_format("a/b.ndjson") == "jsonl"
    assert detect_format("a/b.json.gz") == "jsonl"
    assert detect_format("a/b.parquet") == "parquet"
    assert detect_format("a/b.txt.bz2") == "text"
    assert detect_format("a/README") == "text"
    assert detect_compression("a/b.jsonl.zst") == "zstd"
    assert detect_compression("a/b.gz") == "gzip"
    assert detect_compression("a/b.jsonl") == ""


def test_jsonl_keeps_invalid_utf8_and_nul_byte_exact(corpus):
    # Raw invalid bytes and a raw NUL inside a JSON string come back unchanged;
    # a JSON escape of a lone surrogate keeps its (invalid) 3-byte form.
    lines = [
        b'{"text": "caf\xc3\xa9 \xff\xfe\xc3 end"}\n',
        b'{"text": "nul\x00raw and \\u0000 escaped"}\n',
        b'{"text": "tab\there", "other": [1, 2]}\r\n',
        b'{"text": "half emoji \\ud83d!"}\n',
        b'{"text": ""}',
    ]
    path = corpus.write("docs.jsonl", b"".join(lines))
    check_read(
        [path],
        [
            Document(path, 1, b"caf\xc3\xa9 \xff\xfe\xc3 end", None),
            Document(path, 2, b"nul\x00raw and \x00 escaped", None),
            Document(path, 3, b"tab\there", None),
            Document(path, 4, b"half emoji \xed\xa0\xbd!", None),
            Document(path, 5, b"", None),
        ],
    )


def test_jsonl_bad_records_become_dead_letters(corpus):
    path = corpus.write(
        "bad.jsonl",
        b"\xef\xbb\xbf"  # a BOM before line 1 is tolerated
        b'{"text": "good", "id": "a1"}\n'  # 1
        b"{not json\n"  # 2
        b"   \n"  # 3: blank, skipped
        b'["text", "an array"]\n'  # 4
        b'"just a string"\n'  # 5
        b'{"body": "no text field"}\n'  # 6
        b'{"text": 42, "id": "n"}\n'  # 7
        b'{"text": null}\n'  # 8
        b"\n"  # 9: blank, skipped
        b'{"text": "also good", "id": 7}\n'  # 10
        b'{"text": "no id"}\n'  # 11
        b'{"text": "truncated',  # 12
    )
    check_read(
        [path],
        [Document(path, 1, b"good", "a1"), Document(path, 10, b"also good", "7"), Document(path, 11, b"no id", None)],
        [
            (path, 2, "malformed JSON"),
            (path, 4, "is an array, expected an object"),
            (path, 5, "is a string, expected an object"),
            (path, 6, "missing field 'text'"),
            (path, 7, "field 'text' is a number, expected a string"),
            (path, 8, "field 'text' is null, expected a string"),
            (path, 12, "malformed JSON"),
        ],
        id_field="id",
    )


def test_custom_text_field(corpus):
    path = corpus.write("c.jsonl", b'{"body": "b", "text": "t", "key": "k"}\n')
    check_read([path], [Document(path, 1, b"b", "k")], text_field="body", id_field="key")


def test_empty_files_give_nothing(corpus):
    for name in ("e.txt", "e.jsonl", "e.txt.gz", "e.txt.bz2", "e.txt.zst", "e.txt.xz"):
        corpus.write(name, b"")
    corpus.write_raw("zero_bytes.txt.gz", b"")
    corpus.write_raw("zero_bytes.txt.zst", b"")
    corpus.parquet("e.parquet", pa.table({"text": pa.array([], pa.string())}))
    check_read([corpus.path("*")], [])


def test_truncated_compressed_files_keep_what_was_read(corpus):
    lines = [b"line %06d %s\n" % (i, os.urandom(8).hex().encode()) for i in range(30000)]
    paths = []
    for ext in (".gz", ".bz2", ".zst", ".xz"):
        # bzip2 level 1 uses 100 kB blocks, so a cut leaves whole blocks before it.
        whole = bz2.compress(b"".join(lines), 1) if ext == ".bz2" else compress(b"".join(lines), ext)
        paths.append(corpus.write_raw(f"cut.txt{ext}", whole[: len(whole) * 2 // 3]))

    def kept_prefix_and_one_dead_letter(outputs):
        for path in paths:
            docs = sorted((o for o in outputs if isinstance(o, Document) and o.file == path), key=lambda d: d.record)
            dead = [o for o in outputs if isinstance(o, DeadLetter) and o.file == path]
            if not docs or len(docs) >= len(lines):
                raise BeamAssertException(f"{path}: expected part of the file, got {len(docs)} documents")
            if [(d.record, d.data) for d in docs] != list(enumerate(lines[: len(docs)], start=1)):
                raise BeamAssertException(f"{path}: documents are not the file's first lines")
            if len(dead) != 1 or dead[0].record != -1 or f"after record {len(docs)}:" not in dead[0].reason:
                raise BeamAssertException(f"{path}: expected one dead letter after record {len(docs)}, got {dead}")
            if "EOFError" not in dead[0].reason:
                raise BeamAssertException(f"{path}: reason should name the error: {dead[0].reason}")

    with test_pipeline.TestPipeline() as p:
        result = p | "Read" >> ReadDocuments([corpus.path("cut.*")])
        both = (result.documents, result.dead_letters) | "Both" >> beam.Flatten()
        assert_that(both, kept_prefix_and_one_dead_letter)


def test_corrupt_compressed_files_are_dead_letters(corpus):
    gz = corpus.write_raw("bad.txt.gz", b"\x1f\x8b\x08\x00garbage that is not deflate" * 5)
    zst = corpus.write_raw("bad.txt.zst", b"this is not zstd at all\n" * 5)
    bz = corpus.write_raw("bad.txt.bz2", b"BZh9 not really bzip2" * 5)
    # Valid frame followed by garbage: the first frame's documents are kept.
    tail = corpus.write_raw("tail.txt.zst", zstandard.ZstdCompressor().compress(b"ok\n") + b"junk")
    parquet = corpus.write_raw("bad.parquet", b"PAR1 not really parquet PAR1")
    check_read(
        [corpus.path("*")],
        [Document(tail, 1, b"ok\n", None)],
        [
            (gz, -1, "after record 0: "),
            (zst, -1, "ZstdError"),
            (bz, -1, "after record 0: OSError"),
            (tail, -1, "after record 1: ZstdError"),
            (parquet, -1, "cannot read file: ArrowInvalid"),
        ],
    )


def test_concatenated_gzip_members_and_zstd_frames(corpus):
    gz = corpus.write_raw("multi.txt.gz", gzip.compress(b"a\nb") + gzip.compress(b"c\n"))
    zst = corpus.write_raw("multi.txt.zst", compress(b"a\n", ".zst") + compress(b"b\n", ".zst"))
    check_read(
        [gz, zst],
        text_documents(gz, [b"a\n", b"bc\n"]) + text_documents(zst, [b"a\n", b"b\n"]),
    )


def test_unreadable_files_are_dead_letters(corpus):
    # Files that match but cannot be stat'ed or are not regular files: see
    # test_read_inputs.py. A directory given as input means its files (also there).
    good = corpus.write("good.txt", b"fine\n")
    if os.geteuid() == 0:
        pytest.skip("root reads files without read permission")
    locked = corpus.write("locked.txt", b"secret\n")
    os.chmod(locked, 0)
    check_read([good, locked], [Document(good, 1, b"fine\n", None)], [(locked, -1, "PermissionError")])


def test_match_inputs(corpus):
    a = corpus.write("a.txt", b"a\n")
    b = corpus.write("sub/b.jsonl", b"{}\n")
    assert match_inputs([corpus.path("*.txt"), a, "file://" + b]) == [a, b]
    assert match_inputs(a) == [a]
    with pytest.raises(FileNotFoundError, match="no file matches .*nothing-here"):
        match_inputs([a, corpus.path("nothing-here*.txt")])


def test_pattern_matching_nothing_at_run_time_is_a_dead_letter(corpus):
    a = corpus.write("a.txt", b"a\n")
    missing = corpus.path("missing*.txt")
    # The same file through two patterns is read once; the same pattern twice is one dead letter.
    check_read([a, corpus.path("*.txt"), missing, missing], [Document(a, 1, b"a\n", None)],
               [(missing, -1, "no file matches")])


def test_split_text_reads_exactly_like_unsplit(corpus):
    lines = [b"x" * (i % 97) + b"\xff\n" for i in range(400)]
    lines[50] = b"L" * 5000 + b"\n"  # longer than several ranges
    lines[51] = b"\n"
    text = corpus.write("big.txt", b"".join(lines) + b"no newline at end")
    jsonl = corpus.write("big.jsonl", b"".join(b'{"text": "%d"}\n' % i if i % 7 else b"\n" for i in range(1, 500)))
    expected = text_documents(text, lines + [b"no newline at end"])
    expected += [Document(jsonl, i, b"%d" % i, None) for i in range(1, 500) if i % 7]
    check_read([text, jsonl], expected, split_bytes=1024)
    check_read([text, jsonl], expected)


def test_documents_name_the_piece_they_were_read_in(corpus):
    """A document's piece is the first record of the piece it was read in: one per
    piece, each the smallest record of its documents, pieces in line order."""
    text = corpus.write("pieces.txt", b"".join(b"line %d\n" % i for i in range(300)))
    with test_pipeline.TestPipeline() as p:
        documents = (p | ReadDocuments([text], split_bytes=256)).documents
        pieces = documents | beam.Map(lambda doc: (doc.piece, doc.record)) | beam.GroupByKey()

        def check(groups):
            groups = sorted((piece, sorted(records)) for piece, records in groups)
            assert len(groups) > 5
            assert all(piece == records[0] for piece, records in groups)
            assert [r for _, records in groups for r in records] == list(range(1, 301))

        assert_that(pieces, check)


def test_split_plan_counts_every_range_and_line():
    # The plan is also checked without Beam, including a newline as last byte.
    data = b"".join(b"%d\n" % i for i in range(1000))
    starts, size = line_starts(io.BytesIO(data), 100)
    assert size == len(data)
    assert len(starts) > 10
    for start, first_line in starts:
        assert start == 0 or data[start - 1 : start] == b"\n"
        assert first_line == data.count(b"\n", 0, start) + 1
    assert all(start < len(data) for start, _ in starts)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300).map(lambda b: b.replace(b"a", b"\n")), st.integers(1, 64))
def test_split_plan_reassembles_the_file(data, split_bytes):
    starts, size = line_starts(io.BytesIO(data), split_bytes)
    assert size == len(data)
    bounds = [s for s, _ in starts] + [len(data)]
    pieces = [data[a:b] for a, b in zip(bounds, bounds[1:])]
    assert b"".join(pieces) == data
    records = []
    for (start, first_line), piece in zip(starts, pieces):
        assert piece or not data  # no empty ranges, except for an empty file
        records += [(first_line + i, line) for i, line in enumerate(split_lines(piece))]
    assert records == list(enumerate(split_lines(data), start=1))


def split_lines(data: bytes) -> list[bytes]:
    return io.BytesIO(data).readlines()


def test_parquet_row_groups_nulls_ids_and_binary(corpus):
    texts = [f"row {i}" if i % 4 else None for i in range(1, 11)]
    ids = [f"id{i}" for i in range(1, 11)]
    groups = corpus.parquet("groups.parquet", {"text": texts, "id": ids}, row_group_size=3)
    binary = corpus.parquet("binary.parquet", {"text": pa.array([b"\xff\x00raw", b""], pa.binary()), "n": [1, 2]})
    large = corpus.parquet("large.parquet", {"text": pa.array(["big"], pa.large_string())})
    no_text = corpus.parquet("no_text.parquet", {"body": ["x"]})
    numbers = corpus.parquet("numbers.parquet", {"text": [1, 2]})
    expected = [Document(groups, i, t.encode(), f"id{i}") for i, t in enumerate(texts, 1) if t]
    expected += [Document(binary, 1, b"\xff\x00raw", None), Document(binary, 2, b"", None), Document(large, 1, b"big", None)]
    dead = [(groups, i, "field 'text' is null") for i in (4, 8)]
    dead += [(no_text, -1, "no column 'text' (columns: body)"), (numbers, -1, "has type int64, expected string or binary")]
    # Tiny split_bytes: every row group becomes its own piece.
    check_read([corpus.path("*.parquet")], expected, dead, id_field="id", split_bytes=1)
    check_read([groups], [d for d in expected if d.file == groups], dead[:2], id_field="id")


def test_parquet_row_groups_are_read_in_record_batches(corpus, monkeypatch):
    monkeypatch.setattr(reading, "_PARQUET_BATCH_ROWS", 2)
    texts = [None if i in (2, 5, 6) else f"row {i}" for i in range(1, 12)]
    path = corpus.parquet("batches.parquet", {"text": texts, "id": list(range(1, 12))}, row_group_size=5)
    expected = [Document(path, i, t.encode(), str(i)) for i, t in enumerate(texts, 1) if t]
    dead = [(path, i, "field 'text' is null") for i in (2, 5, 6)]
    check_read([path], expected, dead, id_field="id")
    check_read([path], expected, dead, id_field="id", split_bytes=1)


def test_a_parquet_file_damaged_part_way_keeps_the_rows_before(corpus):
    # Row group 2 of 3 has its first page header overwritten: rows 1-5 read,
    # then one dead letter for the rest.
    sink = io.BytesIO()
    pyarrow.parquet.write_table(pa.table({"text": [f"row {i}" for i in range(1, 16)]}), sink,
                                row_group_size=5, compression="none")
    data = bytearray(sink.getvalue())
    chunk = pyarrow.parquet.ParquetFile(io.BytesIO(bytes(data))).metadata.row_group(1).column(0)
    start = chunk.dictionary_page_offset or chunk.data_page_offset
    data[start:start + 8] = b"\xff" * 8
    path = corpus.write_raw("damaged.parquet", bytes(data))
    expected = [Document(path, i, b"row %d" % i, None) for i in range(1, 6)]
    check_read([path], expected, [(path, -1, "reading parquet stopped before row 6: OSError")])


def test_parquet_string_column_with_invalid_utf8_stays_exact(corpus):
    # Writers do not always validate; build such a column without validation.
    raw = pa.array([b"ok", b"bad \xff\xfe"], pa.binary())
    strings = pa.Array.from_buffers(pa.string(), len(raw), raw.buffers())
    path = corpus.parquet("invalid.parquet", pa.table({"text": strings}))
    check_read([path], [Document(path, 1, b"ok", None), Document(path, 2, b"bad \xff\xfe", None)])


def test_counters_add_up(corpus):
    corpus.write("a.txt", b"ab\ncd\n")
    corpus.write("b.jsonl.gz", b'{"text": "xyz"}\n\nnot json\n')
    corpus.parquet("c.parquet", {"text": ["p", None]})
    p = test_pipeline.TestPipeline()
    result = p | "Read" >> ReadDocuments([corpus.path("*")])
    assert_that(result.documents, equal_to([
        Document(corpus.path("a.txt"), 1, b"ab\n", None),
        Document(corpus.path("a.txt"), 2, b"cd\n", None),
        Document(corpus.path("b.jsonl.gz"), 1, b"xyz", None),
        Document(corpus.path("c.parquet"), 1, b"p", None),
    ]))
    run = p.run()
    run.wait_until_finish()
    counters = {}
    for counter in run.metrics().query(MetricsFilter().with_namespace(metrics.NAMESPACE))["counters"]:
        counters[counter.key.metric.name] = counters.get(counter.key.metric.name, 0) + counter.committed
    expected = {"files": 3, "documents": 4, "bytes": 10, "dead_letters": 2, "blank_lines": 1, "files_done": 2}
    assert counters == {metrics.name("read", what): n for what, n in expected.items()}


def test_bad_arguments_fail_at_construction():
    with pytest.raises(ValueError, match="format must be one of"):
        ReadDocuments(["x"], format="csv")
    with pytest.raises(ValueError, match="split_bytes"):
        ReadDocuments(["x"], split_bytes=0)
    with pytest.raises(ValueError, match="at least one"):
        ReadDocuments([])
    assert ReadDocuments("one/pattern.txt").patterns == ["one/pattern.txt"]


def test_write_dead_letters_round_trip(tmp_path):
    letters = [
        DeadLetter("gs://b/a.jsonl", 3, "malformed JSON: x"),
        DeadLetter("/data/\udcff.txt", -1, "EOFError: \u00e9"),
    ]
    out = str(tmp_path / "out")
    with test_pipeline.TestPipeline() as p:
        _ = p | "Letters" >> beam.Create(letters) | "Write" >> WriteDeadLetters(out)
    files = sorted((tmp_path / "out" / "dead_letters").glob("dead_letters-*.jsonl"))
    assert files
    rows = [json.loads(line) for f in files for line in f.read_text(encoding="utf-8").splitlines()]
    assert sorted(rows, key=lambda r: r["record"]) == [
        {"file": "/data/\udcff.txt", "record": -1, "reason": "EOFError: \u00e9"},
        {"file": "gs://b/a.jsonl", "record": 3, "reason": "malformed JSON: x"},
    ]


def test_write_dead_letters_writes_a_shard_when_there_are_none(tmp_path):
    out = str(tmp_path / "out")
    with test_pipeline.TestPipeline() as p:
        _ = p | "Letters" >> beam.Create([]).with_output_types(DeadLetter) | "Write" >> WriteDeadLetters(out)
    files = list((tmp_path / "out" / "dead_letters").glob("dead_letters-*.jsonl"))
    assert files and all(f.read_bytes() == b"" for f in files)


def test_reads_from_s3(s3_bucket):
    client, options = s3_bucket
    client.put_object(Bucket="corpus", Key="in/a.txt.gz", Body=gzip.compress(b"one\ntwo \xff\n"))
    client.put_object(Bucket="corpus", Key="in/b.jsonl", Body=b'{"text": "three"}\n{"text": 4}\n')
    sink = pa.BufferOutputStream()
    pa.parquet.write_table(pa.table({"text": ["five", "six"]}), sink, row_group_size=1)
    client.put_object(Bucket="corpus", Key="in/c.parquet", Body=sink.getvalue().to_pybytes())
    big = b"".join(b"line %d\n" % i for i in range(300))
    client.put_object(Bucket="corpus", Key="in/d.txt", Body=big)
    with test_pipeline.TestPipeline(options=beam.options.pipeline_options.PipelineOptions(options)) as p:
        # The pipeline gave FileSystems its S3 options, so drivers' check works too.
        assert len(match_inputs(["s3://corpus/in/*"])) == 4
        result = p | "Read" >> ReadDocuments(["s3://corpus/in/*"], split_bytes=500)
        expected = text_documents("s3://corpus/in/a.txt.gz", [b"one\n", b"two \xff\n"])
        expected += [Document("s3://corpus/in/b.jsonl", 1, b"three", None)]
        expected += [Document("s3://corpus/in/c.parquet", 1, b"five", None), Document("s3://corpus/in/c.parquet", 2, b"six", None)]
        expected += text_documents("s3://corpus/in/d.txt", io.BytesIO(big).readlines())
        unpieced = result.documents | beam.Map(lambda doc: doc._replace(piece=1))  # pieces: split_bytes
        assert_that(unpieced, equal_to(expected), label="Documents")
        assert_that(
            result.dead_letters,
            dead_letters_like([("s3://corpus/in/b.jsonl", 2, "field 'text' is a number")]),
            label="DeadLetters",
        )
