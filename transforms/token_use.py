"""How often a tokenizer produces each of its tokens on a corpus: ``CountTokenUse``.

    use = documents | CountTokenUse(path, proof, vocab_size)   # one TokenUse, none without documents

Documents are encoded in batches as ordinary text (no special tokens) by the
engine the driver proved for the tokenizer; each batch's IDs are counted per ID
(numpy), and one CombineFn adds the batches' tables up. ``beam-bpe prune``
counts with it; the report counts the same way inside its measures
(``transforms.report``). Workers load the tokenizer themselves and check its
SHA-256 against the proof's (``transforms.tokenizer_loading.load_proven``).
"""

from __future__ import annotations

import dataclasses
import functools

import apache_beam as beam
import numpy as np

from bpe.engines import EngineProof
from transforms import metrics
from transforms.batches import AddUp, document_size, fixed_batches
from transforms.tokenizer_loading import load_proven

__all__ = ["CountTokenUse", "TokenUse"]


@dataclasses.dataclass
class TokenUse:
    """Additive totals of a corpus's encoding.

    Attributes:
      counts: int64 [vocab_size], how often each ID was produced.
      documents: how many documents were encoded.
      bytes: how many bytes they held.
    """

    counts: np.ndarray
    documents: int = 0
    bytes: int = 0

    @classmethod
    def empty(cls, vocab_size: int) -> "TokenUse":
        return cls(np.zeros(vocab_size, dtype=np.int64))

    @property
    def tokens(self) -> int:
        return int(self.counts.sum())

    def merge(self, other: "TokenUse") -> "TokenUse":
        """Adds ``other`` into this one; returns this one."""
        self.counts += other.counts
        self.documents += other.documents
        self.bytes += other.bytes
        return self


class _CountBatchFn(beam.DoFn):
    """A batch of Documents -> the TokenUse of their encoding."""

    def __init__(self, tokenizer_path: str, proof: EngineProof, preset: str | None, vocab_size: int):
        self._path, self._proof, self._preset, self._vocab_size = tokenizer_path, proof, preset, vocab_size
        self._counters = metrics.Counters("token_use", "documents", "tokens")

    def setup(self):
        _, self._engine = load_proven(self._path, self._preset, self._proof)

    def process(self, documents):
        ids = [np.frombuffer(self._engine.encode_array(doc.data), dtype=np.uint32) for doc in documents]
        counts = np.bincount(np.concatenate(ids), minlength=self._vocab_size).astype(np.int64)
        self._counters.documents.inc(len(documents))
        self._counters.tokens.inc(int(counts.sum()))
        yield TokenUse(counts, len(documents), sum(len(doc.data) for doc in documents))


@dataclasses.dataclass
class CountTokenUse(beam.PTransform):
    """Documents -> one TokenUse: every ID's count in their encoding (none without documents).

    Counters: ``token_use.documents``, ``token_use.tokens``.

    Args:
      tokenizer_path: the tokenizer (tokenizer.json, a directory holding it, a
        rank file; local, ``gs://``, ``s3://``), read by each worker.
      proof: its ``Tokenizer.prove()``, made by the driver.
      vocab_size: its ``vocab_size``.
      preset: a rank file's preset (``bpe.presets``), else None.
      batch_bytes: about how many document bytes are encoded per call.
    """

    tokenizer_path: str
    proof: EngineProof
    vocab_size: int
    preset: str | None = None
    batch_bytes: int = 1 << 18

    def __post_init__(self):
        super().__init__()

    def expand(self, documents):
        return (
            documents
            | "Batch" >> fixed_batches(self.batch_bytes, document_size)
            | "Count" >> beam.ParDo(_CountBatchFn(self.tokenizer_path, self.proof, self.preset, self.vocab_size))
            | "Add" >> beam.CombineGlobally(AddUp(functools.partial(TokenUse.empty, self.vocab_size)))
            .without_defaults()
        )
