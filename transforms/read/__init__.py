"""Reading sharded corpora into documents, routing bad input to dead letters.

``ReadDocuments`` is the PTransform; its helpers are kept apart by concern:
``matching`` (patterns -> files), ``planning`` (files -> pieces),
``compression`` (opening and decompressing), ``records`` (parsing records
and ids), ``reading`` (pieces -> documents), ``documents`` (the element types).
"""

import dataclasses
from collections.abc import Sequence
from typing import NamedTuple

import apache_beam as beam

from transforms import metrics
from transforms.read.compression import detect_compression
from transforms.read.documents import DEAD_LETTERS, DeadLetter, Document, DocumentCoder
from transforms.read.matching import MatchFilesFn, as_list, match_inputs
from transforms.read.planning import PlanReadsFn
from transforms.read.reading import ReadFn
from transforms.read.records import FORMATS, detect_format

__all__ = [
    "Document", "DocumentCoder", "DeadLetter", "ReadDocuments", "ReadResult", "match_inputs",
    "FORMATS", "detect_format", "detect_compression",
]


class ReadResult(NamedTuple):
    """What ``ReadDocuments`` gives: its documents and its dead letters."""

    documents: beam.PCollection
    dead_letters: beam.PCollection


@dataclasses.dataclass
class ReadDocuments(beam.PTransform):
    """Reads documents from text, JSON Lines and Parquet files.

    Files may be local, ``file://``, ``gs://`` or ``s3://``, and gzip, bzip2,
    zstd or xz compressed (by extension), several streams per file included.
    Apply to a pipeline (``p | "Read" >> ReadDocuments([...])``); the result
    is a ``ReadResult``: ``.documents`` (``Document``) and ``.dead_letters``
    (``DeadLetter``). The job never fails on bad input and never drops
    anything silently:

    * every line of a text file is a document (its newline kept);
    * every non-blank line of a JSON Lines file is a document or a dead letter
      naming the file, the line and the reason. Blank (whitespace-only) lines
      are not records: they are skipped and counted (``read.blank_lines``);
    * every Parquet row is a document or a dead letter (null text);
    * a pattern that matches nothing, a matched file that cannot be stat'ed or
      is not a regular file (a broken symbolic link, a FIFO), and a file that
      cannot be read at all (permission denied, corrupt, no text column) is
      one dead letter with record -1;
    * a file that fails part-way (a truncated or damaged compressed stream,
      trailing garbage after the last one) keeps the documents read before
      the failure, plus one dead letter with record -1 whose reason says
      after which record reading stopped.

    Ids (``id_field``): a string is kept; an integer becomes its decimal
    digits; a missing or null id means no id (encoders then use
    ``<file>:<record>``). Any other JSON value (a fractional number, a
    boolean, an object, an array) makes the record a dead letter naming the
    field and its type. A Parquet id column of integers gives decimal
    strings, string and binary columns their values; a column of any other
    type makes the whole file one dead letter (record -1). An id that is not
    valid Unicode (a JSON escape of a lone surrogate, bytes that are not UTF-8)
    makes the record a dead letter: ids are stored as UTF-8 text, and any valid
    spelling of it could be another record's id (``records.id_problem``).

    Text is kept byte-exact: invalid UTF-8 in a text line, in a JSON string
    or in a Parquet column comes back as the same bytes. A JSON escape of a
    lone surrogate (``"\\ud83d"``, and ``"\\udc80"``..``"\\udcff"`` alike),
    which has no UTF-8 form, becomes its 3-byte surrogate encoding
    (``ED A0 BD``), distinct from any raw invalid byte.

    Steps: MatchFiles (all patterns in one step: a file matched by several
    patterns is read once) -> PlanReads -> SpreadReads (Reshuffle) ->
    ReadFiles. What MatchFiles and PlanReads cannot use travels on with the
    read tasks as a DeadLetter, and ReadFiles emits it with the dead letters
    of its own reads: all of them leave from the one step. (Two steps' dead
    letters joined by a Flatten would make Flink's batch planner put a
    blocking exchange after the planning step, which then runs alone before
    the rest of the job is even deployed: 0.2-0.3 s of every job.)
    Counters (``transforms.metrics``):
    ``read.files``, ``read.documents``, ``read.bytes``, ``read.dead_letters``,
    ``read.blank_lines``, ``read.files_done`` (the reads that end a file).

    Args:
      patterns: globs, paths or URLs (see ``transforms.read.matching``; a
        directory means the files directly in it). A pattern matching nothing
        at run time gives a dead letter; drivers call ``match_inputs`` first to
        fail before the job starts.
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
        self.patterns = as_list(self.patterns)
        if not self.patterns:
            raise ValueError("ReadDocuments needs at least one input pattern")
        if self.format not in FORMATS:
            raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {self.format!r}")
        if self.split_bytes <= 0:
            raise ValueError(f"split_bytes must be positive, not {self.split_bytes}")

    def expand(self, pbegin):
        tasks = (
            pbegin
            | "Patterns" >> beam.Create([list(self.patterns)])
            | "MatchFiles" >> beam.ParDo(MatchFilesFn())
            | "PlanReads" >> beam.ParDo(PlanReadsFn(self.format, self.text_field, self.id_field, self.split_bytes))
        )
        read = (
            tasks
            | "SpreadReads" >> beam.Reshuffle()
            | "ReadFiles" >> beam.ParDo(ReadFn(self.text_field, self.id_field))
            .with_output_types(Document)
            .with_outputs(DEAD_LETTERS, main="documents")
        )
        dead_letters = read.dead_letters | "CountDeadLetters" >> beam.Map(_counted)
        return ReadResult(read.documents, dead_letters)


def _counted(dead: DeadLetter) -> DeadLetter:
    metrics.counter("read", "dead_letters").inc()
    return dead
