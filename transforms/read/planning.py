"""Split planning: cutting files into pieces that workers read independently.

An uncompressed text or JSON Lines file bigger than ``split_bytes`` becomes
line-aligned byte ranges of about that size, found by one sequential pass
that also counts lines, so each range knows the number of its first line and
record numbers match an unsplit read exactly. An uncompressed Parquet file
becomes runs of consecutive row groups of about that size. Compressed files
cannot be read from the middle and are read whole, streaming.
"""

from collections.abc import Iterator
from typing import NamedTuple

import apache_beam as beam
import pyarrow.parquet as pq

from transforms import metrics
from transforms.read.compression import READ_ERRORS, detect_compression, open_file
from transforms.read.documents import DeadLetter, describe
from transforms.read.matching import MatchedFile
from transforms.read.records import detect_format, id_column_problem, text_column_problem

__all__ = ["ByteRange", "RowGroups", "ReadTask", "line_starts", "line_ranges", "row_group_runs", "PlanReadsFn"]

_READ_BLOCK = 1 << 20


class ByteRange(NamedTuple):
    """The lines of a text or JSON Lines file that start in bytes [start, stop).

    ``start`` is a line start; ``stop`` is the next range's start, or None for
    the end of the file. Offsets count decompressed bytes; a compressed file
    is always one range, ``ByteRange(0, None)``.
    """

    start: int
    stop: int | None

    def describe(self) -> str:
        if self == WHOLE_FILE:
            return "file"
        return f"bytes {self.start}..{'end' if self.stop is None else self.stop}"


class RowGroups(NamedTuple):
    """Row groups [first, stop) of a Parquet file; stop None: to the last one."""

    first: int
    stop: int | None


WHOLE_FILE = ByteRange(0, None)
ALL_ROW_GROUPS = RowGroups(0, None)


class ReadTask(NamedTuple):
    """A piece of one file for one worker to read.

    Attributes:
      file: the path or URL.
      format: "text", "jsonl" or "parquet".
      compression: "", "gzip", "bzip2", "zstd" or "xz".
      part: which lines or row groups.
      first_record: the 1-based record number of the piece's first record.
    """

    file: str
    format: str
    compression: str
    part: ByteRange | RowGroups
    first_record: int = 1


def line_starts(stream, split_bytes: int) -> tuple[list[tuple[int, int]], int]:
    """Finds line-aligned split points about ``split_bytes`` apart.

    Returns:
      ([(byte offset of a line start, its 1-based line number), ...], file size).
      The first is (0, 1); every offset is below the file size (a newline as
      the last byte starts no line).
    """
    starts = [(0, 1)]
    target = split_bytes  # the next range starts at the first line start >= target
    newlines = 0  # newlines before `offset`
    offset = 0
    while chunk := stream.read(_READ_BLOCK):
        while True:
            # A line starting at >= target means a newline at index >= target - 1.
            lo = max(target - 1 - offset, 0)
            if lo >= len(chunk):
                break
            i = chunk.find(b"\n", lo)
            if i < 0:
                break
            line_start = offset + i + 1
            starts.append((line_start, newlines + chunk.count(b"\n", 0, i + 1) + 1))
            target = line_start + split_bytes
        newlines += chunk.count(b"\n")
        offset += len(chunk)
    return [s for s in starts if s[0] == 0 or s[0] < offset], offset


def line_ranges(stream, split_bytes: int) -> list[tuple[ByteRange, int]]:
    """The ranges of ``line_starts``, each with the line number of its first line."""
    starts, _ = line_starts(stream, split_bytes)
    stops = [start for start, _ in starts[1:]] + [None]
    return [(ByteRange(start, stop), line) for (start, line), stop in zip(starts, stops)]


def row_group_runs(groups: list[tuple[int, int]], split_bytes: int) -> list[tuple[RowGroups, int]]:
    """Groups consecutive row groups into runs of about ``split_bytes``.

    Args:
      groups: (size in bytes, rows) of each row group, in file order.

    Returns:
      Each run with the 1-based number of its first row; [] for no row groups.
    """
    runs = []
    first, first_row, size, rows = 0, 1, 0, 0
    for group, (group_size, group_rows) in enumerate(groups):
        if group > first and size + group_size > split_bytes:
            runs.append((RowGroups(first, group), first_row))
            first, first_row, size, rows = group, first_row + rows, 0, 0
        size += group_size
        rows += group_rows
    if groups:
        runs.append((RowGroups(first, len(groups)), first_row))
    return runs


class PlanReadsFn(beam.DoFn):
    """Splits a file into read tasks; a DeadLetter in the same output if it cannot be
    planned. A DeadLetter it is given (from ``MatchFilesFn``) passes through."""

    def __init__(self, format: str, text_field: str, id_field: str | None, split_bytes: int):
        self._format = format
        self._text_field = text_field
        self._id_field = id_field
        self._split_bytes = split_bytes

    def setup(self):
        self._files = metrics.counter("read", "files")

    def process(self, file: MatchedFile | DeadLetter) -> Iterator[ReadTask | DeadLetter]:
        if isinstance(file, DeadLetter):
            yield file
            return
        self._files.inc()
        fmt = detect_format(file.path) if self._format == "auto" else self._format
        compression = detect_compression(file.path)
        task = ReadTask(file.path, fmt, compression, ALL_ROW_GROUPS if fmt == "parquet" else WHOLE_FILE)
        try:
            if compression:
                pieces = [(task.part, 1)]  # read whole, streaming
            elif fmt == "parquet":
                pieces = self._plan_parquet(file.path)
            elif file.size > self._split_bytes:
                with open_file(file.path, "") as stream:
                    pieces = line_ranges(stream, self._split_bytes)
            else:
                pieces = [(task.part, 1)]
        except READ_ERRORS as e:
            yield DeadLetter(file.path, -1, f"cannot read file: {describe(e)}")
            return
        if isinstance(pieces, str):
            yield DeadLetter(file.path, -1, pieces)
            return
        for part, first_record in pieces:
            yield task._replace(part=part, first_record=first_record)

    def _plan_parquet(self, path: str) -> list[tuple[RowGroups, int]] | str:
        """The row-group runs of a Parquet file, or why it cannot give documents."""
        with open_file(path, "") as stream:
            metadata = pq.ParquetFile(stream).metadata
        schema = metadata.schema.to_arrow_schema()
        problem = text_column_problem(schema, self._text_field) or id_column_problem(schema, self._id_field)
        if problem:
            return problem
        groups = [(metadata.row_group(g).total_byte_size, metadata.row_group(g).num_rows)
                  for g in range(metadata.num_row_groups)]
        return row_group_runs(groups, self._split_bytes)
