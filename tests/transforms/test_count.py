"""CountPreTokenTables: the pipeline's counts equal a plain single-process count."""

import collections
import os
import pathlib
import subprocess
import sys
import sysconfig

import apache_beam as beam
import pytest
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to
from hypothesis import given, settings
from hypothesis import strategies as st

from transforms import metrics
from transforms.count import REST, CountPreTokenTables, SourceRule, _CountBatchFn, _MergeCountsFn, count_pieces
from transforms.read import Document, ReadDocuments
from tests.support.toy_tokenizers import plain_count

STDLIB = pathlib.Path(sysconfig.get_path("stdlib"))
# A few real files from this machine: prose-heavy docstrings, code, non-ASCII.
STDLIB_FILES = [str(STDLIB / name) for name in ("textwrap.py", "difflib.py", "calendar.py")]

# Both invalid UTF-8 and a valid piece that also occurs in valid documents, so
# counts decoded with different error handlers must merge byte-exactly.
MIXED_DOCUMENTS = [
    b"hello world\n",
    b"hello \xff\xfe world \xc3\n",  # invalid UTF-8: kept as raw bytes
    b"caf\xc3\xa9 na\xc3\xafve hello",
    "hello \udcff str with a lone surrogate",  # str input: surrogatepass
    b"",
    b"   \n\n\t",
]


def count_rows(*args, **kwargs) -> beam.PTransform:
    """The count as (piece, count) rows: every table's items (a piece is in one table only)."""
    return CountPreTokenTables(*args, **kwargs) | "Rows" >> beam.FlatMap(dict.items)


def docs(datas):
    return [Document("mem", i + 1, data) for i, data in enumerate(datas)]


def test_stdlib_files_equal_plain_count():
    lines = []
    for path in STDLIB_FILES:
        with open(path, "rb") as f:
            lines.extend(f.readlines())
    expected = plain_count(lines)
    with TestPipeline() as p:
        read = p | "Read" >> ReadDocuments(STDLIB_FILES, format="text")
        counts = read.documents | "Count" >> count_rows("gpt2", batch_bytes=20_000)
        assert_that(counts, equal_to(list(expected.items())))


@pytest.mark.parametrize("engine", ["auto", "regex"])
@pytest.mark.parametrize(
    "batch_bytes, max_batch_pieces",
    [(1 << 20, 500_000), (1, 500_000), (30, 3), (1 << 20, 1)],
    ids=["one-batch", "one-doc-batches", "small", "flush-every-piece"],
)
def test_mixed_invalid_utf8_and_batching(batch_bytes, max_batch_pieces, engine):
    expected = plain_count(MIXED_DOCUMENTS)
    assert expected[b" \xff\xfe"] == 1 and expected[b"hello"] == 3 and expected[b" \xed\xb3\xbf"] == 1
    with TestPipeline() as p:
        counts = (
            p
            | beam.Create(docs(MIXED_DOCUMENTS))
            | count_rows("gpt2", batch_bytes=batch_bytes, max_batch_pieces=max_batch_pieces, num_partitions=3,
                         engine=engine)
        )
        assert_that(counts, equal_to(list(expected.items())))


def test_custom_regex_keeps_text_between_matches():
    # \d+ matches only digits: the text between matches is counted too.
    documents = [b"ab12cd345", b"12 x"]
    expected = plain_count(documents, r"\d+")
    assert expected == {b"ab": 1, b"12": 2, b"cd": 1, b"345": 1, b" x": 1}
    with TestPipeline() as p:
        counts = p | beam.Create(docs(documents)) | count_rows(r"\d+")
        assert_that(counts, equal_to(list(expected.items())))


def test_min_word_count_prunes_and_metrics_add_up():
    documents = [b"a a a b b c", b"a b d"]
    expected = plain_count(documents)
    kept = {piece: n for piece, n in expected.items() if n >= 2}
    p = TestPipeline()
    counts = p | beam.Create(docs(documents)) | count_rows(min_word_count=2)
    assert_that(counts, equal_to(list(kept.items())))
    result = p.run()
    result.wait_until_finish()
    counters = {
        (c.key.metric.namespace, c.key.metric.name): c.committed
        for c in result.metrics().query(MetricsFilter().with_namespace(metrics.NAMESPACE))["counters"]
    }
    assert counters[metrics.key("count", "documents")] == 2
    assert counters[metrics.key("count", "bytes")] == sum(map(len, documents))
    assert counters[metrics.key("count", "pieces")] == sum(expected.values())
    assert counters[metrics.key("count", "unique_pieces")] == len(expected)
    assert counters[metrics.key("count", "pruned_pieces")] == len(expected) - len(kept)


def test_invalid_pattern_fails_at_construction():
    with pytest.raises(ValueError, match="invalid pre-tokenizer regex"):
        CountPreTokenTables("(unclosed")
    with pytest.raises(ValueError, match="batch_bytes"):
        CountPreTokenTables(batch_bytes=0)


@settings(max_examples=60, deadline=None)
@given(
    documents=st.lists(st.one_of(st.binary(max_size=40), st.text(max_size=40)), max_size=12),
    max_batch_pieces=st.integers(1, 20),
    num_partitions=st.integers(1, 5),
    engine=st.sampled_from(["auto", "regex"]),
)
def test_batch_counting_and_merging_is_exact(documents, max_batch_pieces, num_partitions, engine):
    # The DoFn and CombineFn without a pipeline: any flush points, any
    # partitioning, merged in any grouping, give the plain count.
    fn = _CountBatchFn("gpt2", max_batch_pieces, num_partitions, engine)
    fn.setup()
    flushed_sizes = []  # unique pieces held at each flush: never above the cap
    partitions = fn._partitions
    fn._partitions = lambda table: (flushed_sizes.append(len(table)), partitions(table))[1]
    merge = _MergeCountsFn()
    by_partition = collections.defaultdict(list)
    for partition, table in fn.process(documents):
        assert 0 <= partition < num_partitions
        by_partition[partition].append(table)
    merged = {}
    for tables in by_partition.values():
        accumulators = [merge.add_input(merge.create_accumulator(), t) for t in tables]
        part = merge.extract_output(merge.merge_accumulators(accumulators))
        assert not part.keys() & merged.keys(), "a piece landed in two partitions"
        merged.update(part)
    assert merged == count_pieces(documents) == plain_count(documents)
    assert all(0 < size <= max_batch_pieces for size in flushed_sizes)


@pytest.mark.parametrize("engine", ["auto", "regex"])
def test_batch_given_as_a_generator_loses_nothing(engine):
    # Plain texts (no .data) handed over one at a time: the first is counted too.
    documents = ["only one document", b"and a second", "x"]
    fn = _CountBatchFn("gpt2", max_batch_pieces=500_000, num_partitions=2, engine=engine)
    fn.setup()
    merged = collections.Counter()
    for _, table in fn.process(doc for doc in documents):
        merged.update(table)
    assert dict(merged) == plain_count(documents)


@pytest.mark.parametrize("given, threads", [(None, "1"), ("2", "2")])
def test_a_count_worker_gives_gigatoken_one_thread_unless_told_otherwise(given, threads):
    pytest.importorskip("gigatoken")
    code = (
        "from transforms.count import _CountBatchFn\n"
        "fn = _CountBatchFn('gpt2', 1000, 4)\n"
        "fn.setup()\n"
        "from gigatoken.gigatoken_rs import pretokenized_counts\n"
        "pretokenized_counts(b'some text, more text', None)\n"  # reports its threads on stderr
    )
    env = {k: v for k, v in os.environ.items() if k != "RAYON_NUM_THREADS"}
    if given is not None:
        env["RAYON_NUM_THREADS"] = given
    root = str(pathlib.Path(__file__).resolve().parents[2])
    proc = subprocess.run([sys.executable, "-c", code], env={**env, "PYTHONPATH": root}, cwd=root,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"Using {threads} threads for pretokenization" in proc.stderr


SOURCED = [
    Document("/data/en/a.jsonl", 1, b"hello world hello", "en"),
    Document("/data/en/a.jsonl", 2, b"hello there", "en"),
    Document("/data/de/b.jsonl", 1, b"hallo welt hello", "de"),
    Document("/data/x.jsonl", 1, b"hello hello hello", None),
]


@pytest.mark.parametrize("rule", [
    SourceRule(by_field=True),
    SourceRule(files={"/data/en/a.jsonl": "en", "/data/de/b.jsonl": "de"}),
])
@pytest.mark.parametrize("num_partitions", [1, 3])
def test_counts_by_source_are_the_plain_count_of_each_source(rule, num_partitions):
    expected = {}
    for source, docs in {"en": SOURCED[:2], "de": SOURCED[2:3], REST: SOURCED[3:]}.items():
        for piece, count in count_pieces([d.data for d in docs]).items():
            expected[(source, piece)] = count
    with TestPipeline() as p:
        rows = (
            p | beam.Create(SOURCED)
            | CountPreTokenTables(batch_bytes=20, num_partitions=num_partitions, sources=rule)
            | beam.FlatMap(dict.items)
        )
        assert_that(rows, equal_to(sorted(expected.items())))


def test_min_word_count_by_source_keeps_the_weighted_total_over_all_sources():
    # " hello": en 1 at weight 0.5 + de 1 + rest 2 = 3.5, kept; "hello": en 2 at 0.5 + rest 1 = 2, kept;
    # " world": en 1 at 0.5, dropped; " there" likewise; "hallo" and " welt": de 1, dropped.
    rule = SourceRule(by_field=True, weights={"en": 500})
    with TestPipeline() as p:
        rows = (
            p | beam.Create(SOURCED)
            | CountPreTokenTables(min_word_count=2, sources=rule)
            | beam.FlatMap(dict.items)
        )
        assert_that(rows, equal_to(sorted([
            (("en", b" hello"), 1), (("de", b" hello"), 1), ((REST, b" hello"), 2),
            (("en", b"hello"), 2), ((REST, b"hello"), 1),
        ])))
