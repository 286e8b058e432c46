"""Reading one planned piece of a file into documents and dead letters.

Only reading is guarded: a read that fails part-way (a truncated or damaged
compressed stream, an I/O error) ends the piece with one dead letter, record
-1, whose reason says after which record reading stopped, and keeps the
documents read before it. The records after that point are unknowable, so
that single dead letter stands for all of them.

Parquet pieces are read one row group at a time, each in record batches of a
bounded number of rows, so memory does not grow with the row group's size.
"""

import io
from collections.abc import Iterator

import apache_beam as beam
import pyarrow.parquet as pq

from transforms import metrics
from transforms.read.compression import READ_ERRORS, open_file
from transforms.read.documents import DeadLetter, Document, dead_letter, describe
from transforms.read.planning import ByteRange, ReadTask, RowGroups
from transforms.read.records import (
    id_column_problem,
    id_values,
    parse_json_line,
    strip_bom,
    text_column_problem,
    text_values,
)

__all__ = ["ReadFn"]

_FLUSH_BYTES = 1 << 20  # document bytes between two updates of the read counters
# Parquet rows read at a time: a row group is read in record batches of this
# many rows, so a big row group never has to fit in memory whole.
_PARQUET_BATCH_ROWS = 1024


class ReadFn(beam.DoFn):
    """Reads one task into documents and dead letters (tagged ``dead_letters``). A
    DeadLetter in place of a task (a file that could not be matched or planned) goes
    to the dead letters as it is.

    Counters: ``read.documents`` and ``read.bytes``; ``read.blank_lines``;
    ``read.files_done``, the pieces read that end a file (a file read in one
    piece is done with it; a split file's last piece may be read before the
    others).
    """

    def __init__(self, text_field: str, id_field: str | None):
        self._text_field = text_field
        self._id_field = id_field

    def setup(self):
        self._counters = metrics.Counters("read", "documents", "bytes", "blank_lines", "files_done")

    def process(self, task: ReadTask | DeadLetter):
        if isinstance(task, DeadLetter):
            yield dead_letter(*task)
            return
        if task.format == "parquet":
            outputs = self._read_parquet(task)
        elif task.format == "text":
            outputs = self._read_text(task)
        else:
            outputs = self._read_json_lines(task)
        # Counted locally and added every _FLUSH_BYTES: a counter update per
        # document would cost more than reading it, and a progress line
        # (pipeline.command_machinery.progress) sees a long piece advance.
        documents = size = 0
        try:
            for output in outputs:
                if isinstance(output, Document):
                    documents += 1
                    size += len(output.data)
                    if size >= _FLUSH_BYTES:
                        self._counters.documents.inc(documents)
                        self._counters.bytes.inc(size)
                        documents = size = 0
                yield output
        finally:
            self._counters.documents.inc(documents)
            self._counters.bytes.inc(size)
        if task.part.stop is None:  # the piece that ends its file
            self._counters.files_done.inc()

    def _read_text(self, task: ReadTask):
        # One document per line, nothing to parse: the loop is kept to the bare
        # minimum, as it runs once per line.
        file, record, piece = task.file, task.first_record - 1, task.first_record
        try:
            for record, line in enumerate(_lines(file, task.compression, task.part), task.first_record):
                yield Document(file, record, line, None, piece)
        except READ_ERRORS as e:
            yield _stopped(task, record, e)

    def _read_json_lines(self, task: ReadTask):
        lines = _lines(task.file, task.compression, task.part)
        record = task.first_record - 1
        while True:
            try:
                line = next(lines)
            except StopIteration:
                return
            except READ_ERRORS as e:
                yield _stopped(task, record, e)
                return
            record += 1
            if record == 1:
                line = strip_bom(line)
            if not line or line.isspace():  # blank: not a record
                self._counters.blank_lines.inc()
                continue
            parsed = parse_json_line(line, self._text_field, self._id_field)
            if isinstance(parsed, str):
                yield dead_letter(task.file, record, parsed)
            else:
                yield Document(task.file, record, *parsed, task.first_record)

    def _read_parquet(self, task: ReadTask):
        row = task.first_record  # the next row to read, for the failure message
        try:
            with open_file(task.file, task.compression) as stream:
                if task.compression:
                    # Parquet needs random access; a compressed one is read whole.
                    stream = io.BytesIO(stream.read())
                parquet = pq.ParquetFile(stream)
                schema = parquet.schema_arrow
                problem = text_column_problem(schema, self._text_field) or id_column_problem(schema, self._id_field)
                if problem:
                    yield dead_letter(task.file, -1, problem)
                    return
                for texts, ids, bad_ids in _record_batches(parquet, task.part, self._text_field, self._id_field):
                    for offset, (text, doc_id) in enumerate(zip(texts, ids)):
                        if text is None:
                            yield dead_letter(task.file, row + offset, f"field {self._text_field!r} is null")
                        elif offset in bad_ids:
                            yield dead_letter(task.file, row + offset, f"id column {self._id_field!r} {bad_ids[offset]}")
                        else:
                            yield Document(task.file, row + offset, text, doc_id, task.first_record)
                    row += len(texts)
        except READ_ERRORS as e:
            yield dead_letter(task.file, -1, f"reading parquet stopped before row {row}: {describe(e)}")


def _record_batches(parquet: pq.ParquetFile, part: RowGroups, text_field: str, id_field: str | None):
    """(texts, ids, reasons of the values that are no id by position) of each record batch
    of ``part``'s row groups, in order; ids are None when the file has no id column."""
    with_id = bool(id_field) and id_field in parquet.schema_arrow.names
    columns = [text_field] + ([id_field] if with_id and id_field != text_field else [])
    stop = parquet.metadata.num_row_groups if part.stop is None else part.stop
    for group in range(part.first, stop):
        # One row group at a time: a batch never spans two, so a damaged row
        # group loses none of the rows before it.
        for batch in parquet.iter_batches(batch_size=_PARQUET_BATCH_ROWS, row_groups=[group], columns=columns):
            texts = text_values(batch.column(text_field))
            ids, bad_ids = id_values(batch.column(id_field)) if with_id else ([None] * len(texts), {})
            yield texts, ids, bad_ids


def _stopped(task: ReadTask, record: int, error: BaseException) -> beam.pvalue.TaggedOutput:
    """The dead letter of a text or JSON Lines piece whose reading failed after ``record``."""
    return dead_letter(
        task.file, -1, f"reading {task.part.describe()} stopped after record {record}: {describe(error)}"
    )


def _lines(file: str, compression: str, part: ByteRange) -> Iterator[bytes]:
    """The lines of a byte range, newlines kept."""
    with open_file(file, compression) as stream:
        if part.start:
            stream.seek(part.start)
        if part.stop is None:
            yield from stream
            return
        remaining = part.stop - part.start
        for line in stream:
            if len(line) >= remaining:
                # The planner put `stop` at a line start; the cut only
                # matters if the file changed since planning.
                yield line[:remaining]
                return
            remaining -= len(line)
            yield line
