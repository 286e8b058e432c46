"""The runs of ordinary text a tokenizer pre-tokenizes: ``OrdinaryRuns``, for counting its pieces.

A Hugging Face tokenizer may normalize text (NFC) and match added tokens in any
text before its pre-tokenizer splits the rest (``bpe.Tokenizer.ordinary_runs``).
Counting the pieces it encodes (``train --extend``) then counts the pattern's
pieces of each such run, not of the raw document: this step turns each document
into its runs, as bytes, for ``transforms.count.CountPreTokenTables``.
"""

from __future__ import annotations

import dataclasses

import apache_beam as beam

from bpe.pretokenize import to_text
from transforms.tokenizer_loading import load_tokenizer

__all__ = ["OrdinaryRuns", "ordinary_runs"]


def ordinary_runs(tokenizer, data: bytes | str) -> list[bytes]:
    """The runs of ``data`` that ``tokenizer`` pre-tokenizes, as bytes: each run's bytes are
    the ones its pieces stand for (invalid UTF-8 kept byte for byte, as the encoder does)."""
    text, errors = to_text(data)
    return [run.encode("utf-8", errors) for run in tokenizer.ordinary_runs(text)]


class _RunsFn(beam.DoFn):
    def __init__(self, tokenizer_path: str):
        self._path = tokenizer_path

    def setup(self):
        self._tokenizer = load_tokenizer(self._path)

    def process(self, document):
        data = document.data if hasattr(document, "data") else document
        yield from ordinary_runs(self._tokenizer, data)


@dataclasses.dataclass
class OrdinaryRuns(beam.PTransform):
    """Documents (``Document`` or bytes/str) -> the bytes of each run of ordinary text in them.

    Args:
      tokenizer_path: a Hugging Face tokenizer.json (or its directory), on any Beam filesystem.
    """

    tokenizer_path: str

    def __post_init__(self):
        super().__init__()

    def expand(self, documents):
        return documents | "Runs" >> beam.ParDo(_RunsFn(self.tokenizer_path)).with_output_types(bytes)
