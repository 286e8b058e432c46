"""The reader's two element types: a document, and a dead letter for what could not be read."""

from typing import NamedTuple

import apache_beam as beam

from transforms.coders import SizedPickleCoder

__all__ = ["DEAD_LETTERS", "DeadLetter", "Document", "DocumentCoder", "dead_letter", "describe"]


class Document(NamedTuple):
    """One input document.

    Attributes:
      file: the path or URL as matched (``file://`` URLs are matched as paths).
      record: 1-based record number in the file: the line number for text and
        jsonl, the row number for parquet.
      data: the document's exact bytes. Invalid UTF-8 is kept; for the text
        format the line's newline is kept.
      doc_id: the id field's value as a string (see ``ReadDocuments`` for the
        conversions), or None when no id was asked for or the record has none.
      piece: the record number the read piece it comes from starts at
        (``transforms.read.planning``): the documents of one piece share it, so
        later steps can keep them together in input order.
    """

    file: str
    record: int
    data: bytes
    doc_id: str | None = None
    piece: int = 1


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


DEAD_LETTERS = "dead_letters"  # the tag of every reading step's dead-letter output


def dead_letter(file: str, record: int, reason: str) -> beam.pvalue.TaggedOutput:
    """A dead letter as a DoFn's tagged output."""
    return beam.pvalue.TaggedOutput(DEAD_LETTERS, DeadLetter(file, record, reason))


def describe(error: BaseException) -> str:
    """An exception as a dead letter's reason: its type and message."""
    return f"{type(error).__name__}: {error}"
