"""Helpers the test modules share: corpora, runner flags, small tokenizers, readers of outputs.

Test modules import from here, never from each other.
"""

import bz2
import collections
import gzip
import json
import lzma
import os
import pathlib
import sysconfig

import pyarrow as pa
import pyarrow.parquet as pq
import zstandard
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing import test_pipeline
from apache_beam.testing.util import BeamAssertException, assert_that, equal_to

import bpe
from bpe.pretokenize import PreTokenizer
from pipeline import cli
from transforms.read import Document, ReadDocuments


def compress(data: bytes, name: str) -> bytes:
    """``data`` compressed as the file name's extension says (.gz .bz2 .zst .xz)."""
    if name.endswith(".gz"):
        return gzip.compress(data)
    if name.endswith(".bz2"):
        return bz2.compress(data)
    if name.endswith(".zst"):
        return zstandard.ZstdCompressor().compress(data)
    if name.endswith(".xz"):
        return lzma.compress(data)
    return data


def dead_letters_like(expected):
    """An assert_that matcher for dead letters.

    Args:
      expected: (file, record, reason_substring) triples; each actual dead
        letter must match one, by file and record exactly and by a reason that
        contains the substring.
    """
    expected = sorted(expected)

    def match(actual):
        actual = sorted(actual)
        problems = []
        if len(actual) != len(expected):
            problems.append(f"expected {len(expected)} dead letters, got {len(actual)}")
        for want, got in zip(expected, actual):
            if (got.file, got.record) != want[:2] or want[2] not in got.reason:
                problems.append(f"expected {want}, got {tuple(got)}")
        if problems:
            raise BeamAssertException("; ".join(problems) + f"\nall: {actual}")

    return match


STDLIB = pathlib.Path(sysconfig.get_path("stdlib"))
# Real text from this machine: code, prose docstrings, a little non-ASCII.
STDLIB_FILES = ("textwrap.py", "difflib.py", "calendar.py", "string.py")
VOCAB = 400
# Fast, single-process runner for tests where the runner is not the point.
IN_MEMORY = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]


def stdlib_lines() -> list[bytes]:
    lines = []
    for name in STDLIB_FILES:
        with open(STDLIB / name, "rb") as f:
            lines.extend(f.readlines())
    return lines


def write_stdlib_corpus(root: pathlib.Path) -> dict[str, str]:
    """The same documents (stdlib lines) as 1 text file, 8 text shards and 8 jsonl.gz shards.

    Returns the --input glob of each layout.
    """
    lines = stdlib_lines()
    (root / "one").mkdir(parents=True)
    (root / "one" / "corpus.txt").write_bytes(b"".join(lines))
    (root / "shards").mkdir()
    (root / "jsonl").mkdir()
    for shard in range(8):
        part = lines[shard::8]  # interleaved: every shard gets a mix of files
        (root / "shards" / f"part-{shard}.txt").write_bytes(b"".join(part))
        records = "".join(json.dumps({"text": line.decode("utf-8")}) + "\n" for line in part)
        (root / "jsonl" / f"part-{shard}.jsonl.gz").write_bytes(gzip.compress(records.encode("utf-8")))
    return {
        "one": str(root / "one" / "corpus.txt"),
        "shards": str(root / "shards" / "part-*.txt"),
        "jsonl": str(root / "jsonl" / "*.jsonl.gz"),
    }


def train(*argv: str) -> int:
    return cli.main(["train", "--no-progress", *argv])


def merges(output) -> list:
    with open(os.path.join(output, "tokenizer.json"), encoding="utf-8") as f:
        return json.load(f)["model"]["merges"]


def word_counts(output) -> dict[bytes, int]:
    table = pq.read_table(os.path.join(output, "word_counts.parquet"))
    assert table.schema.field("word").type == pa.binary()
    assert table.schema.field("count").type == pa.int64()
    rows = dict(zip(table.column("word").to_pylist(), table.column("count").to_pylist()))
    assert len(rows) == table.num_rows, "a word appears twice in the table"
    return rows


def stats(output) -> dict:
    with open(os.path.join(output, "train_stats.json"), encoding="utf-8") as f:
        return json.load(f)


def plain_count(documents, pattern: str = "gpt2") -> collections.Counter:
    """The obviously-correct count of pre-token pieces: a Counter over PreTokenizer pieces."""
    counter = collections.Counter()
    pre = PreTokenizer(pattern)
    for doc in documents:
        counter.update(pre.pieces(doc))
    return counter


def train_small(docs, vocab_size=600, special_tokens=("<|endoftext|>",)):
    counts = collections.Counter()
    pre = PreTokenizer("gpt2")
    for doc in docs:
        counts.update(pre.split(doc))
    return bpe.train(counts, vocab_size=vocab_size, special_tokens=special_tokens)


def read_rows(out: pathlib.Path) -> list[tuple[str, list[int]]]:
    table = pq.read_table(sorted(out.glob("part-*.parquet")))
    return list(zip(table.column("id").to_pylist(), table.column("tokens").to_pylist()))


def check_read(patterns, documents, dead_letters=(), options=(), **kwargs):
    """Runs ReadDocuments(patterns, **kwargs) and asserts its two outputs.

    Args:
      documents: the exact Documents expected, in any order.
      dead_letters: (file, record, reason_substring) triples, as for
        ``dead_letters_like``.
      options: pipeline flags (e.g. the S3 fixture's).
    """
    with test_pipeline.TestPipeline(options=PipelineOptions(list(options))) as p:
        result = p | "Read" >> ReadDocuments(patterns, **kwargs)
        assert_that(result.documents, equal_to(documents), label="Documents")
        assert_that(result.dead_letters, dead_letters_like(dead_letters), label="DeadLetters")


def text_documents(path, lines, first=1):
    """The Documents of a text file's lines, numbered from ``first``."""
    return [Document(path, first + i, line, None) for i, line in enumerate(lines)]
