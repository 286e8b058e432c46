"""Measuring how well tokenizers fit a corpus: ``MeasureTokenizers``.

Documents are measured in batches by every tokenizer at once (each document is
read once, decoded once and classified once; see ``transforms.report_figures``
for the definitions), the batches' additive totals are merged by one
CombineFn, and the merged result's sample (the documents with the smallest
hash of file and record, so it does not depend on sharding) is spread over the
workers again to be segmented three ways, and picked for the visualizer
(``transforms.report_sample``).

Workers read the tokenizer files themselves (any Beam filesystem) and check
each one's SHA-256 against the one the driver read, so a file replaced while
the job runs cannot mix two tokenizers into one report. A worker process loads
them once for all its steps (``apache_beam.utils.shared``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Sequence

import apache_beam as beam
import numpy as np
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.utils import shared

from bpe.scripts import SCRIPTS
from bpe.tokenizer import FILE_NAME, Tokenizer
from transforms import metrics
from transforms.report_figures import Figures, MeasuredTokenizer, measure_batch
from transforms.report_sample import SEGMENTATION_FIELDS, Segmenter, visualizer_documents

__all__ = ["MeasureTokenizers", "figures_to_json"]


def read_file(path: str) -> bytes:
    """A tokenizer.json's bytes from any Beam filesystem (a directory means the file inside it)."""
    file_path = path if path.endswith(".json") else FileSystems.join(path, FILE_NAME)
    with FileSystems.open(file_path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        return f.read()


class _Loaded(list):
    """The measured tokenizers of one worker process (a list that ``Shared`` can hold)."""


class _Tokenizers:
    """Which tokenizers a job measures, and how a worker loads them once.

    Args:
      paths: the tokenizer files or directories.
      sha256: the SHA-256 of each file as the driver read it.
      proven: per tokenizer, whether the driver proved tiktoken's core gives its IDs.
    """

    def __init__(self, paths: Sequence[str], sha256: Sequence[str], proven: Sequence[bool]):
        self.paths, self.sha256, self.proven = list(paths), list(sha256), list(proven)
        self._shared = shared.Shared()

    def load(self) -> list[MeasuredTokenizer]:
        return self._shared.acquire(self._read, tag="|".join(self.sha256))

    def _read(self) -> _Loaded:
        loaded = _Loaded()
        for path, sha256, proven in zip(self.paths, self.sha256, self.proven):
            tokenizer = Tokenizer.from_json(read_file(path), source=path)
            if tokenizer.sha256 != sha256:
                raise RuntimeError(
                    f"tokenizer {path} changed while the job ran: SHA-256 {tokenizer.sha256}, the job started with {sha256}"
                )
            loaded.append(MeasuredTokenizer(tokenizer, proven=proven))
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
    """A sample document -> int64 [tokenizer, class, SEGMENTATION_FIELDS]: its pieces counted three ways."""

    def __init__(self, tokenizers: _Tokenizers):
        self._spec = tokenizers

    def setup(self):
        self._segmenters = [Segmenter(tokenizer) for tokenizer in self._spec.load()]

    def process(self, document: bytes):
        yield np.stack([segmenter.count([document]) for segmenter in self._segmenters])


class _SumFn(beam.CombineFn):
    """Adds arrays of one shape (zeros of that shape for no input)."""

    def __init__(self, shape: tuple[int, ...]):
        self._shape = shape

    def create_accumulator(self):
        return np.zeros(self._shape, dtype=np.int64)

    def add_input(self, total, array):
        total += array
        return total

    def merge_accumulators(self, totals):
        return sum(totals, np.zeros(self._shape, dtype=np.int64))

    def extract_output(self, total):
        return total


class _FinishFn(beam.DoFn):
    """The merged Figures and the sample's segmentation -> the JSON-able measures, with the visualizer's documents."""

    def __init__(self, tokenizers: _Tokenizers):
        self._spec = tokenizers

    def setup(self):
        self._tokenizers = self._spec.load()

    def process(self, figures: Figures, segmentation: np.ndarray):
        measures = figures_to_json(figures)
        measures["segmentation"] = segmentation.tolist()
        measures["visualizer"] = visualizer_documents(figures.sample, self._tokenizers)
        yield measures


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
    match and the fewest tokens per class, plus the visualizer's documents.
    Counters: ``report.documents``, ``report.bytes``.

    Args:
      tokenizer_paths: the tokenizers (tokenizer.json or a directory holding
        it; any Beam filesystem), in report order. Read here once for their
        SHA-256 and size; workers read them again and check the SHA-256.
      tiktoken_proven: per tokenizer, whether the driver proved tiktoken's core
        gives its IDs (workers then use it without repeating the proof).
      source_field: the documents' source is their ``doc_id`` (the reader was
        given this field as the id field); None: their input file.
      sample_documents: how many documents the sample holds (the first
        ``report_figures.SAMPLE_BYTES`` of each).
      batch_size: documents measured per call.
    """

    tokenizer_paths: Sequence[str]
    tiktoken_proven: Sequence[bool] = ()
    source_field: str | None = None
    sample_documents: int = 200
    batch_size: int = 256

    def __post_init__(self):
        super().__init__()
        if not self.tokenizer_paths:
            raise ValueError("MeasureTokenizers needs at least one tokenizer")
        files = [read_file(path) for path in self.tokenizer_paths]
        proven = list(self.tiktoken_proven) or [False] * len(files)
        self._tokenizers = _Tokenizers(self.tokenizer_paths, [hashlib.sha256(f).hexdigest() for f in files], proven)
        self._vocab_sizes = [_vocab_size(f) for f in files]

    def expand(self, documents):
        tokenizers = self._tokenizers
        merged = (
            documents
            | "Batch" >> beam.BatchElements(
                min_batch_size=self.batch_size, max_batch_size=self.batch_size, record_metrics=False
            )
            | "Measure" >> beam.ParDo(_MeasureBatchFn(tokenizers, self.source_field, self.sample_documents))
            | "Merge" >> beam.CombineGlobally(_MergeFiguresFn(self._vocab_sizes, self.sample_documents))
        )
        shape = (len(self._vocab_sizes), len(SCRIPTS), len(SEGMENTATION_FIELDS))
        segmentation = (
            merged
            | "SampleDocuments" >> beam.FlatMap(lambda figures: [prefix for *_, prefix, _ in figures.sample])
            | "SpreadSample" >> beam.Reshuffle()
            | "Segment" >> beam.ParDo(_SegmentFn(tokenizers))
            | "SumSegmentation" >> beam.CombineGlobally(_SumFn(shape))
        )
        return merged | "Finish" >> beam.ParDo(_FinishFn(tokenizers), beam.pvalue.AsSingleton(segmentation))


def _vocab_size(tokenizer_file: bytes) -> int:
    """The vocabulary size a tokenizer.json declares (its vocab and its added tokens)."""
    spec = json.loads(tokenizer_file)
    return len(spec["model"]["vocab"]) + len(spec.get("added_tokens") or [])
