"""Reading sharded corpora into documents, routing bad input to dead letters.

``ReadDocuments`` turns globs of text, JSON Lines or Parquet files (optionally
gzip, bzip2, zstd or xz compressed; local, ``file://``, ``gs://``, ``s3://``) into
``Document`` records holding each document's exact bytes, plus ``DeadLetter``
records for everything that could not be read. The job never fails on bad
input and never drops anything silently (ARCHITECTURE.md, "Errors and bad
input"):

* every line of a text file is a document (its newline kept);
* every non-blank line of a JSON Lines file is a document or a dead letter
  naming the file, the line and the reason. Blank (whitespace-only) lines are
  not records: they are skipped, and counted in the ``blank_lines`` counter;
* every Parquet row is a document or a dead letter (null text);
* a file that cannot be read at all (missing text column, permission denied,
  corrupt) is one dead letter with record -1;
* a file that fails part-way (a truncated .gz, a corrupt zstd frame) keeps the
  documents read before the failure, plus one dead letter with record -1 whose
  reason says after which record reading stopped. The records after that point
  are unknowable, so that single dead letter stands for all of them.

Pipeline shape: match patterns -> deduplicate files (a file matched by two
patterns is read once) -> plan reads (split big uncompressed text into line-
aligned byte ranges, Parquet into row groups) -> Reshuffle -> read.
"""

import dataclasses
import gzip
import bz2
import io
import json
import lzma
import posixpath
import zlib
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
import zstandard
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from transforms.coders import SizedPickleCoder

__all__ = [
    "Document", "DeadLetter", "ReadDocuments", "match_inputs", "FORMATS",
    "detect_format", "detect_compression",
]

FORMATS = ("auto", "text", "jsonl", "parquet")

_METRICS_NAMESPACE = "ReadDocuments"

# Extension -> our compression name. Beam's own decompressing reader is not
# used: it silently ends a truncated gzip or zstd stream as if it were complete,
# which would lose the tail of a file without a trace.
_COMPRESSION_BY_EXTENSION = {
    ".gz": "gzip",
    ".gzip": "gzip",
    ".bz2": "bzip2",
    ".zst": "zstd",
    ".zstd": "zstd",
    ".xz": "xz",
}
_FORMAT_BY_EXTENSION = {
    ".jsonl": "jsonl",
    ".json": "jsonl",
    ".ndjson": "jsonl",
    ".parquet": "parquet",
}

# Errors that mean "this file (or the rest of it) cannot be read". Anything
# else is a bug and should fail loudly rather than become a dead letter.
_READ_ERRORS = (
    OSError,  # includes PermissionError, IsADirectoryError, BadGzipFile, BeamIOError
    EOFError,  # truncated gzip / bzip2 / xz / zstd
    zlib.error,
    lzma.LZMAError,
    zstandard.ZstdError,
    pa.ArrowException,
)

_READ_BLOCK = 1 << 20
_BOM = b"\xef\xbb\xbf"


class Document(NamedTuple):
    """One input document.

    Attributes:
      file: the path or URL as matched (``file://`` URLs are matched as paths).
      record: 1-based record number in the file: the line number for text and
        jsonl, the row number for parquet.
      data: the document's exact bytes. Invalid UTF-8 is kept; for the text
        format the line's newline is kept.
      doc_id: the id field's value (jsonl/parquet) when asked for and present,
        else None.
    """

    file: str
    record: int
    data: bytes
    doc_id: str | None = None


class DocumentCoder(SizedPickleCoder):
    """Documents; size: their bytes and file name, plus a little."""

    value_type = Document

    def estimate_size(self, doc: Document) -> int:
        return len(doc.data) + len(doc.file) + 16


beam.coders.registry.register_coder(Document, DocumentCoder)


class DeadLetter(NamedTuple):
    """An input record or file that could not be read.

    Attributes:
      file: the path or URL as matched (or the pattern, if it matched nothing).
      record: 1-based record number, or -1 for a whole file (or its unread rest).
      reason: what went wrong, naming the field or the error.
    """

    file: str
    record: int
    reason: str


def _local_path(pattern: str) -> str:
    # Beam's FileSystems has no "file" scheme; local paths are plain paths.
    if pattern.startswith("file://"):
        return pattern[len("file://") :]
    return pattern


def _as_list(patterns: str | Sequence[str]) -> list[str]:
    # A lone string would otherwise be iterated character by character.
    return [patterns] if isinstance(patterns, str) else list(patterns)


def match_inputs(patterns: Sequence[str]) -> list[str]:
    """Expands globs into the list of files they match, without duplicates.

    Used by drivers before the job starts, so a missing input fails at once.

    Args:
      patterns: globs, paths or URLs (``file://``, ``gs://``, ``s3://``).

    Returns:
      The matched paths, sorted within each pattern, each path once.

    Raises:
      FileNotFoundError: ``no file matches PATTERN`` for the first pattern that
        matches nothing.
    """
    seen = {}
    for pattern in _as_list(patterns):
        metadata = FileSystems.match([_local_path(pattern)])[0].metadata_list
        if not metadata:
            raise FileNotFoundError(f"no file matches {pattern}")
        for path in sorted(m.path for m in metadata):
            seen.setdefault(path, None)
    return list(seen)


def detect_compression(path: str) -> str:
    """Returns "gzip", "bzip2", "zstd", "xz" or "" (none) from the extension."""
    ext = posixpath.splitext(path)[1].lower()
    return _COMPRESSION_BY_EXTENSION.get(ext, "")


def detect_format(path: str) -> str:
    """Returns "jsonl", "parquet" or "text" from the extension after compression."""
    base = path
    if detect_compression(base):
        base = posixpath.splitext(base)[0]
    ext = posixpath.splitext(base)[1].lower()
    return _FORMAT_BY_EXTENSION.get(ext, "text")


class _ReadTask(NamedTuple):
    """A piece of one file for one worker to read, or a file-level failure."""

    file: str
    size: int  # bytes, as matched (compressed size for compressed files)
    format: str  # text | jsonl | parquet
    compression: str  # "" | gzip | bzip2 | zstd | xz
    # text/jsonl: byte offset of the first line; parquet: first row group.
    start: int = 0
    # text/jsonl: byte offset just past the last line; parquet: row group
    # after the last. -1 means to the end of the file.
    stop: int = -1
    first_record: int = 1
    error: str | None = None  # set: the reader emits this as a dead letter


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


class _ZstdReader(io.RawIOBase):
    """Streaming zstd decompression that notices truncation.

    ``zstandard``'s own stream_reader ends a truncated frame silently; here a
    stream that stops inside a frame raises EOFError, like gzip and bz2 do.
    Concatenated frames are read one after another.
    """

    def __init__(self, fileobj):
        super().__init__()
        self._file = fileobj
        # Same generous window limit as Beam's reader, so files written with
        # --long still decompress.
        self._dctx = zstandard.ZstdDecompressor(max_window_size=1 << 31)
        self._frame = None  # the decompressor of the frame being read, if any
        self._pending = memoryview(b"")
        self._pos = 0
        self._error = None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while self._pos >= len(self._pending):
            if not self._decompress_more():
                return 0
        n = min(len(buffer), len(self._pending) - self._pos)
        buffer[:n] = self._pending[self._pos : self._pos + n]
        self._pos += n
        return n

    def _decompress_more(self) -> bool:
        if self._error is not None:
            raise self._error
        chunk = self._file.read(1 << 16)
        if not chunk:
            if self._frame is not None:
                raise EOFError("zstd stream ended before the end of a frame")
            return False
        out = bytearray()
        while chunk:
            if self._frame is None:
                self._frame = self._dctx.decompressobj()
            try:
                out += self._frame.decompress(chunk)
            except zstandard.ZstdError as e:
                if not out:
                    raise
                # Hand out what decompressed cleanly first (e.g. the frames
                # before trailing garbage); fail on the next read.
                self._error = e
                break
            if self._frame.eof:
                chunk = self._frame.unused_data
                self._frame = None
            else:
                chunk = b""
        self._pending = memoryview(bytes(out))
        self._pos = 0
        return True


class _open_file:
    """Opens a file through Beam's FileSystems, decompressing by our rules."""

    def __init__(self, path: str, compression: str):
        self._path = path
        self._compression = compression
        self._raw = None

    def __enter__(self):
        self._raw = FileSystems.open(
            self._path, compression_type=CompressionTypes.UNCOMPRESSED
        )
        try:
            if self._compression == "gzip":
                self._stream = gzip.GzipFile(fileobj=self._raw, mode="rb")
            elif self._compression == "bzip2":
                self._stream = bz2.BZ2File(self._raw, mode="rb")
            elif self._compression == "xz":
                self._stream = lzma.LZMAFile(self._raw, mode="rb")
            elif self._compression == "zstd":
                self._stream = io.BufferedReader(_ZstdReader(self._raw), _READ_BLOCK)
            else:
                self._stream = self._raw
        except BaseException:
            self._raw.close()
            raise
        return self._stream

    def __exit__(self, *exc_info):
        # Wrappers given a file object do not close it, so close both.
        try:
            if self._stream is not self._raw:
                self._stream.close()
        finally:
            self._raw.close()


def _plan_line_ranges(
    stream, split_bytes: int
) -> tuple[list[tuple[int, int]], int]:
    """Finds line-aligned split points about ``split_bytes`` apart.

    One sequential pass counting newlines, so each range knows the line number
    of its first line and record numbers match an unsplit read exactly.

    Returns:
      ([(byte offset of a line start, its 1-based line number), ...], file size).
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
    # A newline as the file's last byte starts no line.
    return [s for s in starts if s[0] == 0 or s[0] < offset], offset


def _parquet_column_problem(schema: pa.Schema, text_field: str) -> str | None:
    """Why a Parquet schema cannot give documents, or None if it can."""
    if text_field not in schema.names:
        return f"no column {text_field!r} (columns: {', '.join(schema.names)})"
    column_type = schema.field(text_field).type
    if not _is_text_type(column_type):
        return f"column {text_field!r} has type {column_type}, expected string or binary"
    return None


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


def _as_bytes_column(column: pa.ChunkedArray) -> list[bytes | None]:
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


def _id_string(value) -> str | None:
    """An id value as text, or None when it is absent or not an id-like value."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if not isinstance(value, str):
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        # Raw invalid bytes (surrogate-escaped) or lone surrogates: ids end up
        # in Parquet string columns, which need valid UTF-8.
        value = value.encode("utf-8", "surrogatepass").decode("utf-8", "backslashreplace")
    return value


def _encode_lossless(text: str) -> bytes:
    """Encodes a JSON string value back to the bytes it came from.

    Raw invalid UTF-8 bytes in the line were decoded with surrogateescape and go
    back byte-exact. A lone surrogate written as a JSON escape (``"\\ud83d"``,
    common in text cut by JavaScript tools) has no UTF-8 form; it is kept as its
    3-byte surrogate encoding rather than losing the document.
    """
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        out = bytearray()
        for ch in text:
            code = ord(ch)
            if 0xDC80 <= code <= 0xDCFF:
                out.append(code - 0xDC00)
            else:
                out += ch.encode("utf-8", "surrogatepass")
        return bytes(out)


def _parse_json_line(
    line: bytes, text_field: str, id_field: str | None
) -> tuple[bytes, str | None] | str:
    """Returns (data, doc_id) for a good JSON Lines record, else the reason."""
    try:
        # surrogateescape keeps invalid UTF-8 inside strings byte-exact;
        # strict=False accepts raw control characters (tabs, NULs) in strings.
        value = json.loads(line.decode("utf-8", "surrogateescape"), strict=False)
    except ValueError as e:  # JSONDecodeError, and RecursionError is not
        return f"malformed JSON: {e}"
    except RecursionError:
        return "malformed JSON: nested too deeply"
    if not isinstance(value, dict):
        return f"JSON value is {_json_kind(value)}, expected an object"
    if text_field not in value:
        return f"missing field {text_field!r}"
    text = value[text_field]
    if not isinstance(text, str):
        return f"field {text_field!r} is {_json_kind(text)}, expected a string"
    doc_id = _id_string(value.get(id_field)) if id_field else None
    return _encode_lossless(text), doc_id


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


class _MatchFilesFn(beam.DoFn):
    """Expands one pattern into one task per matched file."""

    def __init__(self, format: str):
        self._format = format

    def process(self, pattern: str) -> Iterator[tuple[str, _ReadTask]]:
        try:
            metadata = FileSystems.match([_local_path(pattern)])[0].metadata_list
        except (OSError, ValueError) as e:
            yield pattern, _ReadTask(pattern, 0, "", "", error=f"cannot match: {_describe(e)}")
            return
        if not metadata:
            yield pattern, _ReadTask(pattern, 0, "", "", error=f"no file matches {pattern}")
            return
        for m in metadata:
            fmt = detect_format(m.path) if self._format == "auto" else self._format
            # Keyed by path so that a file matched by several patterns is read once.
            yield m.path, _ReadTask(m.path, m.size_in_bytes, fmt, detect_compression(m.path))


class _PlanReadsFn(beam.DoFn):
    """Splits a file into pieces that workers can read independently."""

    def __init__(self, text_field: str, split_bytes: int):
        self._text_field = text_field
        self._split_bytes = split_bytes
        self._files = beam.metrics.Metrics.counter(_METRICS_NAMESPACE, "files")

    def process(self, task: _ReadTask) -> Iterator[_ReadTask]:
        if task.error:
            yield task
            return
        self._files.inc()
        try:
            if task.format == "parquet" and not task.compression:
                yield from self._plan_parquet(task)
            elif task.format != "parquet" and not task.compression and task.size > self._split_bytes:
                yield from self._plan_lines(task)
            else:
                # Small files, and compressed files (not seekable), are read whole.
                yield task
        except _READ_ERRORS as e:
            yield task._replace(error=f"cannot read file: {_describe(e)}")

    def _plan_lines(self, task: _ReadTask) -> Iterator[_ReadTask]:
        with _open_file(task.file, "") as stream:
            starts, _ = _plan_line_ranges(stream, self._split_bytes)
        for k, (start, first_record) in enumerate(starts):
            stop = starts[k + 1][0] if k + 1 < len(starts) else -1
            yield task._replace(start=start, stop=stop, first_record=first_record)

    def _plan_parquet(self, task: _ReadTask) -> Iterator[_ReadTask]:
        with _open_file(task.file, "") as stream:
            metadata = pq.ParquetFile(stream).metadata
            problem = _parquet_column_problem(metadata.schema.to_arrow_schema(), self._text_field)
        if problem:
            yield task._replace(error=problem)
            return
        # Consecutive row groups up to split_bytes (compressed) form one piece.
        first_row, group_start, group_bytes = 1, 0, 0
        rows_in_piece = 0
        for rg in range(metadata.num_row_groups):
            if rg > group_start and group_bytes + metadata.row_group(rg).total_byte_size > self._split_bytes:
                yield task._replace(start=group_start, stop=rg, first_record=first_row)
                first_row += rows_in_piece
                group_start, group_bytes, rows_in_piece = rg, 0, 0
            group_bytes += metadata.row_group(rg).total_byte_size
            rows_in_piece += metadata.row_group(rg).num_rows
        if metadata.num_row_groups:
            yield task._replace(start=group_start, stop=metadata.num_row_groups, first_record=first_row)


class _ReadFn(beam.DoFn):
    """Reads one task into documents and dead letters."""

    def __init__(self, text_field: str, id_field: str | None):
        self._text_field = text_field
        self._id_field = id_field
        self._counters = {
            name: beam.metrics.Metrics.counter(_METRICS_NAMESPACE, name)
            for name in ("documents", "bytes", "dead_letters", "blank_lines")
        }

    def process(self, task: _ReadTask):
        if task.error:
            outputs = iter([_dead_letter(task.file, -1, task.error)])
        elif task.format == "parquet":
            outputs = self._read_parquet(task)
        else:
            outputs = self._read_lines(task)
        # Counted locally and added once per task: a counter update per
        # document would cost more than reading it.
        documents = size = dead_letters = 0
        try:
            for output in outputs:
                if isinstance(output, Document):
                    documents += 1
                    size += len(output.data)
                else:
                    dead_letters += 1
                yield output
        finally:
            self._counters["documents"].inc(documents)
            self._counters["bytes"].inc(size)
            self._counters["dead_letters"].inc(dead_letters)

    def _read_lines(self, task: _ReadTask):
        lines = _lines(task)
        record = task.first_record - 1
        while True:
            # Only reading is guarded: a failure here ends this file (or range)
            # with one dead letter, keeping the documents already read.
            try:
                line = next(lines)
            except StopIteration:
                return
            except _READ_ERRORS as e:
                where = "file" if task.start == 0 and task.stop == -1 else f"bytes {task.start}..{task.stop}"
                yield _dead_letter(
                    task.file, -1,
                    f"reading {where} stopped after record {record}: {_describe(e)}",
                )
                return
            record += 1
            if task.format == "text":
                yield Document(task.file, record, line, None)
                continue
            if record == 1 and line.startswith(_BOM):
                line = line[len(_BOM):]
            if not line.strip():
                self._counters["blank_lines"].inc()
                continue
            parsed = _parse_json_line(line, self._text_field, self._id_field)
            if isinstance(parsed, str):
                yield _dead_letter(task.file, record, parsed)
            else:
                yield Document(task.file, record, *parsed)

    def _read_parquet(self, task: _ReadTask):
        columns = [self._text_field]
        row = task.first_record  # the next row to read, for the failure message
        try:
            with _open_file(task.file, task.compression) as stream:
                if task.compression:
                    # Parquet needs random access; a compressed one is read whole.
                    stream = io.BytesIO(stream.read())
                parquet = pq.ParquetFile(stream)
                schema = parquet.schema_arrow
                problem = _parquet_column_problem(schema, self._text_field)
                if problem:
                    yield _dead_letter(task.file, -1, problem)
                    return
                with_id = bool(self._id_field) and self._id_field in schema.names
                if with_id and self._id_field != self._text_field:
                    columns.append(self._id_field)
                stop = parquet.metadata.num_row_groups if task.stop == -1 else task.stop
                for rg in range(task.start, stop):
                    table = parquet.read_row_group(rg, columns=columns)
                    texts = _as_bytes_column(table.column(self._text_field))
                    ids = table.column(self._id_field).to_pylist() if with_id else [None] * len(texts)
                    for offset, (text, doc_id) in enumerate(zip(texts, ids)):
                        if text is None:
                            yield _dead_letter(task.file, row + offset, f"field {self._text_field!r} is null")
                        else:
                            yield Document(task.file, row + offset, text, _id_string(doc_id))
                    row += len(texts)
        except _READ_ERRORS as e:
            yield _dead_letter(task.file, -1, f"reading parquet stopped before row {row}: {_describe(e)}")


def _dead_letter(file: str, record: int, reason: str) -> beam.pvalue.TaggedOutput:
    return beam.pvalue.TaggedOutput("dead_letters", DeadLetter(file, record, reason))


def _lines(task: _ReadTask) -> Iterator[bytes]:
    """The lines of a task's byte range (whole file when compressed), newlines kept."""
    with _open_file(task.file, task.compression) as stream:
        if task.start:
            stream.seek(task.start)
        remaining = None if task.stop == -1 else task.stop - task.start
        for line in stream:
            if remaining is not None:
                if len(line) >= remaining:
                    # The planner put `stop` at a line start; the cut only
                    # matters if the file changed since planning.
                    yield line[:remaining]
                    return
                remaining -= len(line)
            yield line


@dataclasses.dataclass
class ReadDocuments(beam.PTransform):
    """Reads documents from text, JSON Lines and Parquet files.

    Apply to a pipeline (``p | "Read" >> ReadDocuments([...])``). The result has
    two PCollections: ``.documents`` (``Document``) and ``.dead_letters``
    (``DeadLetter``). Counters in namespace "ReadDocuments": ``files``,
    ``documents``, ``bytes``, ``dead_letters``, ``blank_lines`` (jsonl).

    Args:
      patterns: globs, paths or URLs (``file://``, ``gs://``, ``s3://``). A
        pattern matching nothing at run time gives a dead letter; drivers should
        call ``match_inputs`` first to fail before the job starts.
      format: "auto", "text", "jsonl" or "parquet". "auto" looks at the
        extension after stripping .gz/.bz2/.zst/.xz: .jsonl/.json/.ndjson is
        jsonl, .parquet is parquet, anything else text.
      text_field: jsonl key or Parquet column holding the document text.
      id_field: jsonl key or Parquet column holding the document id, or None.
      split_bytes: uncompressed text/jsonl files bigger than this are split into
        line-aligned ranges of about this size; Parquet row groups are grouped
        into pieces of about this size. Compressed files are read whole,
        streaming.
    """

    patterns: Sequence[str]
    format: str = "auto"
    text_field: str = "text"
    id_field: str | None = None
    split_bytes: int = 64 << 20

    def __post_init__(self):
        self.patterns = _as_list(self.patterns)
        if not self.patterns:
            raise ValueError("ReadDocuments needs at least one input pattern")
        if self.format not in FORMATS:
            raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {self.format!r}")
        if self.split_bytes <= 0:
            raise ValueError(f"split_bytes must be positive, not {self.split_bytes}")

    def expand(self, pbegin):
        return (
            pbegin
            | "Patterns" >> beam.Create(self.patterns)
            | "MatchFiles" >> beam.ParDo(_MatchFilesFn(self.format))
            | "GroupByFile" >> beam.GroupByKey()
            | "OncePerFile" >> beam.Map(lambda kv: next(iter(kv[1])))
            | "PlanReads" >> beam.ParDo(_PlanReadsFn(self.text_field, self.split_bytes))
            | "SpreadReads" >> beam.Reshuffle()
            | "ReadFiles" >> beam.ParDo(_ReadFn(self.text_field, self.id_field))
            .with_output_types(Document)
            .with_outputs("dead_letters", main="documents")
        )
