"""Counting pre-token pieces over a corpus: the map-reduce half of training.

``CountPreTokenTables`` pre-tokenizes documents and returns the exact
corpus-wide count of every piece, as tables of {piece bytes: count}. The shape:

    documents -> BatchDocuments (about ``batch_bytes`` of text per batch)
              -> CountInBatch (one in-process dict per batch; the shuffle then
                 carries unique pieces, not every occurrence)
              -> SumCounts (CombinePerKey, keyed by a stable hash partition)
              -> Prune (exact totals per partition, pruned by ``min_word_count``)

Why partitions of count tables instead of ``CombinePerKey(sum)`` keyed by the
piece itself: every element crossing a Beam step has a fixed cost in Python,
and a batch of text has many thousands of unique pieces, so one small dict per
partition crosses the shuffle far more cheaply than one element per piece.
Merging dicts is the same sum, done by ``dict`` instead of by the runner. A
piece always lands in the same partition (crc32 of its bytes, identical in
every process), so each partition's merged table holds the exact totals of its
pieces.

Output is produced only from ``process`` (never ``finish_bundle``), so runners
that drop finish_bundle output cannot lose counts.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import zlib
from typing import Iterable

import apache_beam as beam

from bpe.pretokenize import PreTokenizer, compile_pattern, to_text
from transforms import metrics

__all__ = ["CountPreTokenTables", "count_pieces"]


def count_pieces(documents: Iterable[bytes | str], pattern: str = "gpt2") -> dict[bytes, int]:
    """The plain single-process count of pieces, for tests and small inputs.

    Args:
      documents: document texts (bytes, possibly invalid UTF-8, or str).
      pattern: a preset name or regex.

    Returns:
      piece bytes -> number of occurrences.
    """
    counts: collections.Counter[bytes] = collections.Counter()
    pre = PreTokenizer(pattern)
    for doc in documents:
        counts.update(pre.pieces(doc))
    return dict(counts)


def _document_data(element) -> bytes | str:
    # Documents from ReadDocuments carry .data; plain bytes/str are accepted too
    # so the transform is usable on any PCollection of texts.
    return element.data if hasattr(element, "data") else element


def _document_size(element) -> int:
    return len(_document_data(element))


class _CountBatchFn(beam.DoFn):
    """Counts the pieces of one batch of documents in a dict; emits partitions.

    Emits (partition, {piece bytes: count}) with at most ``num_partitions``
    elements per flush. The dict is flushed early when it reaches
    ``max_batch_pieces`` unique pieces, so memory stays bounded whatever the
    batch holds.
    """

    def __init__(self, pattern: str, max_batch_pieces: int, num_partitions: int):
        self._pattern = pattern
        self._max_batch_pieces = max_batch_pieces
        self._num_partitions = num_partitions
        self._documents = metrics.counter("count", "documents")
        self._bytes = metrics.counter("count", "bytes")
        self._pieces = metrics.counter("count", "pieces")
        self._flushes = metrics.counter("count", "early_flushes")

    def setup(self):
        self._pre_tokenizer = PreTokenizer(self._pattern)

    def _split(self, text: str) -> Iterable[str]:
        # A text short enough has fewer pieces than the cap: split it in one C call.
        # A longer one is walked piece by piece, so its list of pieces never exists.
        if len(text) <= self._max_batch_pieces:
            return self._pre_tokenizer.split(text)
        return self._pre_tokenizer.iter_split(text)

    def process(self, batch):
        # One counter per decoding error handler: the same str piece stands for
        # different bytes when decoded with surrogateescape (raw invalid bytes)
        # than with surrogatepass (str input holding lone surrogates), so keys
        # are only turned into bytes with the handler they were decoded with.
        by_handler: dict[str, collections.Counter[str]] = {}
        unique = 0
        documents = size = pieces = 0
        cap = self._max_batch_pieces
        for element in batch:
            data = _document_data(element)
            text, errors = to_text(data)
            documents += 1
            size += len(data) if isinstance(data, bytes) else len(text.encode("utf-8", errors))
            # Count at most (cap - unique) pieces at a time, so the dict never
            # holds more than `cap` keys, even inside one huge document. Most
            # documents fit whole: their list of pieces is counted as it is.
            found = self._split(text)
            rest = None
            if not isinstance(found, list) or len(found) > cap - unique:
                rest = iter(found)
                found = list(itertools.islice(rest, max(1, cap - unique)))
            while found:
                counter = by_handler.get(errors)
                if counter is None:
                    counter = by_handler[errors] = collections.Counter()
                before = len(counter)
                counter.update(found)
                unique += len(counter) - before
                pieces += len(found)
                if unique >= cap:
                    yield from self._partitions(by_handler)
                    self._flushes.inc()
                    by_handler = {}
                    unique = 0
                found = list(itertools.islice(rest, max(1, cap - unique))) if rest is not None else None
        self._documents.inc(documents)
        self._bytes.inc(size)
        self._pieces.inc(pieces)
        if by_handler:
            yield from self._partitions(by_handler)

    def _partitions(self, by_handler):
        n = self._num_partitions
        parts: list[dict[bytes, int]] = [{} for _ in range(n)]
        crc32 = zlib.crc32
        for errors, counter in by_handler.items():
            pieces = [text.encode("utf-8", errors) for text in counter]
            places = zip(pieces, map(crc32, pieces), counter.values())
            if len(by_handler) == 1:
                # Within one handler distinct str pieces are distinct bytes: no sums needed.
                for piece, crc, count in places:
                    parts[crc % n][piece] = count
            else:
                for piece, crc, count in places:
                    part = parts[crc % n]
                    part[piece] = part.get(piece, 0) + count
        for index, part in enumerate(parts):
            if part:
                yield index, part


class _MergeCountsFn(beam.CombineFn):
    """Sums {piece: count} tables; the accumulator is one dict."""

    def create_accumulator(self):
        return {}

    def add_input(self, accumulator, counts):
        get = accumulator.get
        for piece, count in counts.items():
            accumulator[piece] = get(piece, 0) + count
        return accumulator

    def merge_accumulators(self, accumulators):
        accumulators = iter(accumulators)
        merged = next(accumulators)
        for accumulator in accumulators:
            # Fold the smaller table into the bigger one: fewer dict updates.
            if len(accumulator) > len(merged):
                merged, accumulator = accumulator, merged
            self.add_input(merged, accumulator)
        return merged

    def extract_output(self, accumulator):
        return accumulator


class _PruneFn(beam.DoFn):
    """Drops the pieces of one partition's exact totals that occur too rarely."""

    def __init__(self, min_word_count: int):
        self._min_word_count = min_word_count
        self._unique = metrics.counter("count", "unique_pieces")
        self._pruned = metrics.counter("count", "pruned_pieces")

    def process(self, partition_counts):
        _, counts = partition_counts
        self._unique.inc(len(counts))
        if self._min_word_count > 1:
            kept = {piece: count for piece, count in counts.items() if count >= self._min_word_count}
            self._pruned.inc(len(counts) - len(kept))
            counts = kept
        if counts:
            yield counts


@dataclasses.dataclass
class CountPreTokenTables(beam.PTransform):
    """Counts pre-token pieces: PCollection[Document] -> PCollection[{bytes: int}].

    Each output element is one hash partition of the final table: distinct
    pieces (their exact UTF-8 bytes; invalid UTF-8 in the input is kept byte for
    byte) with their total counts over the whole input. Together the partitions
    equal ``count_pieces`` of the same documents, whatever the sharding, batching
    or runner. Writers take whole partitions (e.g. as Arrow tables), which costs
    far less than one element per piece (``beam.FlatMap(dict.items)`` gives
    (piece, count) rows).

    Counters (``transforms.metrics``, step ``count``): ``documents``, ``bytes``,
    ``pieces`` (occurrences), ``unique_pieces`` (before pruning),
    ``pruned_pieces`` (dropped by ``min_word_count``), ``early_flushes``.

    Args:
      pattern: the pre-tokenizer: a preset name (gpt2, cl100k, o200k) or a regex.
      batch_bytes: documents are counted together in batches of about this many
        bytes; bigger batches mean fewer, more aggregated rows in the shuffle.
      max_batch_pieces: cap on the unique pieces held in one batch's dict; when
        reached the dict is emitted and cleared early, bounding worker memory.
      min_word_count: pieces occurring fewer times than this in the whole
        corpus are dropped from the output (1 keeps everything).
      num_partitions: how many hash partitions the shuffle uses; the reduce
        side runs on up to this many workers in parallel.
    """

    pattern: str = "gpt2"
    batch_bytes: int = 4 << 20
    max_batch_pieces: int = 500_000
    min_word_count: int = 1
    num_partitions: int = 64

    def __post_init__(self):
        compile_pattern(self.pattern)  # a bad regex fails here, not on a worker
        for name in ("batch_bytes", "max_batch_pieces", "min_word_count", "num_partitions"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)}")

    def expand(self, documents):
        return (
            documents
            # Fixed-size batches (min == max): no adaptive resizing, so a batch
            # is always about batch_bytes of text.
            | "BatchDocuments" >> beam.BatchElements(
                min_batch_size=self.batch_bytes,
                max_batch_size=self.batch_bytes,
                element_size_fn=_document_size,
            )
            | "CountInBatch" >> beam.ParDo(
                _CountBatchFn(self.pattern, self.max_batch_pieces, self.num_partitions)
            ).with_output_types(tuple[int, dict[bytes, int]])
            | "SumCounts" >> beam.CombinePerKey(_MergeCountsFn())
            | "Prune" >> beam.ParDo(_PruneFn(self.min_word_count)).with_output_types(dict[bytes, int])
        )
