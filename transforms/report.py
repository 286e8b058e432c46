"""Measuring how well tokenizers fit a corpus: ``MeasureTokenizers``.

Documents are measured in batches by every tokenizer at once (each document is
read once, decoded once and classified once; see ``transforms.report_figures``
for the definitions), the batches' additive totals are merged by one
CombineFn, and the merged result's sample (the documents with the smallest
hash of file and record, so it does not depend on sharding) is segmented three
ways (``transforms.report_sample``) in parts that the workers share: every part
is one tokenizer's segmentation of some of the sample's documents, and the
parts' tables add up. The step that turns the result into JSON sums them,
picks the sample's documents for the visualizer and encodes the texts a page
checks its own encoder against.

Workers read the tokenizer files themselves (any Beam filesystem) and check
each one's SHA-256 against the one the driver read, so a file replaced while
the job runs cannot mix two tokenizers into one report. A worker process loads
them once for all its steps (``apache_beam.utils.shared``).
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import apache_beam as beam
import numpy as np
from apache_beam.utils import shared

from bpe import preloaded
from bpe.engines import EngineProof, ProofMismatch
from bpe.scripts import SCRIPTS
from bpe.tokenizer import Tokenizer
from transforms import metrics
from transforms.report_figures import Figures, measure_batch
from transforms.report_tokens import MeasuredTokenizer
from transforms.report_sample import SEGMENTATION_FIELDS, Segmenter, visualizer_documents

# The sample is segmented in parts of about this many bytes per tokenizer (parts spread over
# the workers; each call's arrays take several times its bytes).
SAMPLE_PART_BYTES = 1 << 17

__all__ = ["MeasureTokenizers", "figures_to_json"]


class _Loaded(list):
    """The measured tokenizers of one worker process (a list that ``Shared`` can hold)."""


class _Tokenizers:
    """Which tokenizers a job measures, and how a worker loads them once.

    Args:
      paths: the tokenizer files or directories.
      proofs: each tokenizer's ``EngineProof``, made by the driver; it names the
        engine and the SHA-256 of the file the driver read.
    """

    def __init__(self, paths: Sequence[str], proofs: Sequence[EngineProof]):
        self.paths, self.proofs = list(paths), list(proofs)
        self.sha256 = [proof.tokenizer_sha256 for proof in self.proofs]
        self._shared = shared.Shared()

    def load(self) -> list[MeasuredTokenizer]:
        return self._shared.acquire(self._read, tag="|".join(self.sha256))

    def _read(self) -> _Loaded:
        loaded = _Loaded()
        for path, proof in zip(self.paths, self.proofs):
            tokenizer = preloaded.take(path, None, proof) or Tokenizer.load(path)
            try:
                engine = tokenizer.use_proof(proof)
            except ProofMismatch:
                raise RuntimeError(
                    f"tokenizer {path} changed while the job ran: SHA-256 {tokenizer.sha256}, "
                    f"the job started with {proof.tokenizer_sha256}"
                ) from None
            loaded.append(MeasuredTokenizer(tokenizer, engine))
        return loaded


class _MeasureBatchFn(beam.DoFn):
    """A batch of Documents -> one Figures of their totals (and sample candidates)."""

    def __init__(self, tokenizers: _Tokenizers, source_field: str | None, sample_size: int):
        self._spec = tokenizers
        self._source_field, self._sample_size = source_field, sample_size
        self._documents = metrics.counter("report", "documents")
        self._bytes = metrics.counter("report", "bytes")

    def setup(self):
        self._tokenizers = self._spec.load()

    def _source(self, doc) -> str:
        if self._source_field is None:
            return doc.file
        return doc.doc_id if doc.doc_id is not None else f"(no {self._source_field})"

    def process(self, documents):
        sources = [self._source(doc) for doc in documents]
        figures = measure_batch(
            [(source, doc.data) for source, doc in zip(sources, documents)],
            self._tokenizers,
            sample_size=self._sample_size,
        )
        figures.offer([(source, doc.file, doc.record, doc.data) for source, doc in zip(sources, documents)])
        self._documents.inc(len(documents))
        self._bytes.inc(sum(len(doc.data) for doc in documents))
        yield figures


class _MergeFiguresFn(beam.CombineFn):
    """Adds Figures up (every field is a sum, the sample a bounded smallest-keys set)."""

    def __init__(self, vocab_sizes: Sequence[int], sample_size: int):
        self._vocab_sizes, self._sample_size = list(vocab_sizes), sample_size

    def create_accumulator(self):
        return Figures.empty(self._vocab_sizes, self._sample_size)

    def add_input(self, accumulator, figures):
        return accumulator.merge(figures)

    def merge_accumulators(self, accumulators):
        accumulators = iter(accumulators)
        merged = next(accumulators)
        for accumulator in accumulators:
            merged.merge(accumulator)
        return merged

    def extract_output(self, accumulator):
        return accumulator


class _SegmentFn(beam.DoFn):
    """(tokenizer index, documents) -> (tokenizer index, their segmentation table)."""

    def __init__(self, tokenizers: _Tokenizers):
        self._spec = tokenizers

    def setup(self):
        self._tokenizers = self._spec.load()
        self._segmenters: dict[int, Segmenter] = {}

    def process(self, part: tuple[int, list[bytes]]):
        t, documents = part
        if t not in self._segmenters:
            self._segmenters[t] = Segmenter(self._tokenizers[t])
        yield t, self._segmenters[t].count(documents)


class _FinishFn(beam.DoFn):
    """Once: the merged Figures (none for no documents) and the tables of the sample's parts ->
    the JSON-able measures, with the sample's segmentation, the visualizer's documents and the
    IDs of the check texts."""

    def __init__(self, tokenizers: _Tokenizers, check_texts: Sequence[str], vocab_sizes: Sequence[int]):
        self._spec, self._check_texts, self._vocab_sizes = tokenizers, list(check_texts), list(vocab_sizes)

    def setup(self):
        self._tokenizers = self._spec.load()

    def process(self, _, merged: Sequence[Figures], segmented: Sequence[tuple[int, np.ndarray]]):
        figures = merged[0] if merged else Figures.empty(self._vocab_sizes)
        measures = figures_to_json(figures)
        measures["segmentation"] = segmentation_tables(len(self._tokenizers), segmented).tolist()
        measures["visualizer"] = visualizer_documents(figures.sample, self._tokenizers)
        measures["checks"] = [
            [{"text": text, "ids": tokenizer.encode_text(text)}
             for text in check_texts(self._check_texts, measures["visualizer"], t, tokenizer.tokenizer)]
            for t, tokenizer in enumerate(self._tokenizers)
        ]
        yield measures


def sample_parts(figures: Figures, tokenizers: int) -> list[tuple[int, list[bytes]]]:
    """The sample's documents (their prefixes) in parts of about SAMPLE_PART_BYTES, once per
    tokenizer: (tokenizer index, documents), each document in one part per tokenizer."""
    parts, part, size = [], [], 0
    for *_, prefix, _ in figures.sample:
        if part and size + len(prefix) > SAMPLE_PART_BYTES:
            parts.append(part)
            part, size = [], 0
        part.append(prefix)
        size += len(prefix)
    if part:
        parts.append(part)
    return [(t, documents) for t in range(tokenizers) for documents in parts]


def segmentation_tables(tokenizers: int, segmented: Sequence[tuple[int, np.ndarray]]) -> np.ndarray:
    """int64 [tokenizer, class, SEGMENTATION_FIELDS]: the sum of each tokenizer's part tables."""
    tables = np.zeros((tokenizers, len(SCRIPTS), len(SEGMENTATION_FIELDS)), dtype=np.int64)
    for t, table in segmented:
        tables[t] += table
    return tables


def check_texts(texts: Sequence[str], visualizer: Sequence[dict], index: int, tokenizer: Tokenizer) -> list[str]:
    """The texts, then the text of every visualizer document's tokens by tokenizer ``index`` that is valid UTF-8."""
    out = list(texts)
    for doc in visualizer:
        try:
            out.append(tokenizer.decode_bytes(doc["tokens"][index]).decode("utf-8"))
        except UnicodeDecodeError:
            pass  # a live box takes typed text, which is always valid
    return out


def figures_to_json(figures: Figures) -> dict:
    """Figures as plain JSON values (the sample is summarised by its size)."""
    return {
        "classes": list(SCRIPTS),
        "quantities": ["tokens", "bytes", "characters", "fallback_tokens"],
        "segmentation_fields": list(SEGMENTATION_FIELDS),
        "sources": {
            source: {
                "documents": figures.documents[source],
                "counts": figures.counts[source].tolist(),
                "words": figures.words[source].tolist(),
            }
            for source in sorted(figures.counts)
        },
        "token_counts": [counts.tolist() for counts in figures.token_counts],
        "sample_documents": len(figures.sample),
    }


@dataclasses.dataclass
class MeasureTokenizers(beam.PTransform):
    """Documents -> a PCollection of one dict: the measures of every tokenizer on them.

    The dict holds, per source, per tokenizer and per class of
    ``bpe.scripts.SCRIPTS``, the tokens, bytes, characters and byte-level
    fallback tokens, the words per class, each tokenizer's count of every ID,
    and on the sample the pieces, bytes and token counts of BPE, greedy longest
    match and the fewest tokens per class, plus the visualizer's documents and,
    under ``checks``, per tokenizer the text and IDs of each check text and of
    each visualizer document (where its tokens are valid UTF-8).
    Counters: ``report.documents``, ``report.bytes``.

    Args:
      tokenizer_paths: the tokenizers (tokenizer.json or a directory holding
        it; local, ``gs://``, ``s3://``), in report order. Loaded here, for
        their vocabulary sizes and proofs, unless both are given; workers load
        them again and check each proof's SHA-256.
      proofs: each tokenizer's ``Tokenizer.prove()``, when the driver made them.
      source_field: the documents' source is their ``doc_id`` (the reader was
        given this field as the id field); None: their input file.
      sample_documents: how many documents the sample holds (the first
        ``report_figures.SAMPLE_BYTES`` of each).
      batch_bytes: about how many document bytes are measured per call: the
        measures hold several arrays per byte, and batches that stay in the
        processor's caches are measured fastest.
      vocab_sizes: each tokenizer's ``vocab_size``, when the driver has loaded them.
      check_texts: texts whose IDs by every tokenizer the measures carry.
    """

    tokenizer_paths: Sequence[str]
    proofs: Sequence[EngineProof] = ()
    source_field: str | None = None
    sample_documents: int = 200
    batch_bytes: int = 1 << 18
    vocab_sizes: Sequence[int] = ()
    check_texts: Sequence[str] = ()

    def __post_init__(self):
        super().__init__()
        if not self.tokenizer_paths:
            raise ValueError("MeasureTokenizers needs at least one tokenizer")
        proofs, vocab_sizes = list(self.proofs), list(self.vocab_sizes)
        if not (proofs and vocab_sizes):
            tokenizers = [Tokenizer.load(path) for path in self.tokenizer_paths]
            proofs = proofs or [tokenizer.prove() for tokenizer in tokenizers]
            vocab_sizes = vocab_sizes or [tokenizer.vocab_size for tokenizer in tokenizers]
        self._tokenizers = _Tokenizers(self.tokenizer_paths, proofs)
        self._vocab_sizes = vocab_sizes

    def expand(self, documents):
        tokenizers = self._tokenizers
        merged = (
            documents
            | "Batch" >> beam.BatchElements(
                min_batch_size=self.batch_bytes, max_batch_size=self.batch_bytes,
                element_size_fn=lambda doc: len(doc.data) + 1, record_metrics=False,
            )
            | "Measure" >> beam.ParDo(_MeasureBatchFn(tokenizers, self.source_field, self.sample_documents))
            | "Merge" >> beam.CombineGlobally(_MergeFiguresFn(self._vocab_sizes, self.sample_documents))
            .without_defaults()
        )
        segmented = (
            merged
            | "SplitSample" >> beam.FlatMap(sample_parts, len(self.tokenizer_paths))
            | "Spread" >> beam.Reshuffle()
            | "Segment" >> beam.ParDo(_SegmentFn(tokenizers))
        )
        # One Finish, also without documents (when nothing is merged).
        return (
            documents.pipeline
            | "Once" >> beam.Impulse()
            | "Finish" >> beam.ParDo(
                _FinishFn(tokenizers, self.check_texts, self._vocab_sizes),
                beam.pvalue.AsList(merged), beam.pvalue.AsList(segmented),
            )
        )
