"""Shared fixtures: small corpora written to real files, and pipeline assertions."""

import bz2
import gzip
import lzma
import pathlib

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard
from apache_beam.testing.util import BeamAssertException


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


class Corpus:
    """Writes corpus files under one directory; every method returns the path."""

    def __init__(self, root: pathlib.Path):
        self.root = root

    def path(self, name: str) -> str:
        return str(self.root / name)

    def write(self, name: str, data: bytes) -> str:
        """Writes ``data``, compressed according to the name's extension."""
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(compress(data, name))
        return str(path)

    def write_raw(self, name: str, data: bytes) -> str:
        """Writes ``data`` as is, whatever the extension says (corrupt files)."""
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return str(path)

    def parquet(self, name: str, table: pa.Table | dict, row_group_size: int | None = None) -> str:
        """Writes a Parquet file (compressed afterwards if the name says .gz etc.)."""
        if isinstance(table, dict):
            table = pa.table(table)
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, row_group_size=row_group_size)
        return self.write(name, sink.getvalue().to_pybytes())


@pytest.fixture
def corpus(tmp_path) -> Corpus:
    """A Corpus writing into a fresh directory."""
    return Corpus(tmp_path / "corpus")


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
