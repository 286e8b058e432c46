"""Counting pre-token pieces over a corpus: the map-reduce half of training.

``CountPreTokenTables`` pre-tokenizes documents and returns the exact
corpus-wide count of every piece, as tables of {piece bytes: count}. The shape:

    documents -> BatchDocuments (about ``batch_bytes`` of text per batch)
              -> CountInBatch (one in-process dict per batch, counted by
                 ``bpe.piece_counter``'s fastest exact engine; the shuffle then
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

Sources (``SourceRule``, for weighted and parity-aware training): each
document counts for one source, named by its file or by a record field. The
tables are then keyed by (source, piece), a piece's rows of every source in the
same partition, so pruning by ``min_word_count`` sees the piece's weighted
total over all sources.

Output is produced only from ``process`` (never ``finish_bundle``), so runners
that drop finish_bundle output cannot lose counts.
"""

from __future__ import annotations

import dataclasses
import os
import zlib
from typing import Iterable, Mapping

import apache_beam as beam

from bpe.training.piece_counter import PieceCounter, choose_engine
from bpe.training.sources import MILLI
from bpe.pretokenize import compile_pattern
from transforms import metrics

__all__ = ["REST", "CountPreTokenTables", "SourceRule", "count_pieces"]

REST = ""  # the source of documents that no rule names


@dataclasses.dataclass(frozen=True)
class SourceRule:
    """Which source each document counts for, and each source's weight.

    Args:
      by_field: the source is a record field's value, read as the document's
        ``doc_id`` (``ReadDocuments(id_field=FIELD)``); a record without it
        counts for ``REST``.
      files: file path (as matched) -> source, when not ``by_field``; a file
        not listed counts for ``REST``.
      weights: source -> weight in thousandths; 1000 for a source not listed.
    """

    by_field: bool = False
    files: Mapping[str, str] = dataclasses.field(default_factory=dict)
    weights: Mapping[str, int] = dataclasses.field(default_factory=dict)

    def source_of(self, document) -> str:
        if self.by_field:
            return document.doc_id or REST
        return self.files.get(document.file, REST)

    def weight_of(self, source: str) -> int:
        return self.weights.get(source, MILLI)

    def keep(self, counts: dict[tuple[str, bytes], int], min_word_count: int) -> dict[tuple[str, bytes], int]:
        """The rows of the pieces whose weighted count over all sources reaches ``min_word_count``."""
        totals: dict[bytes, int] = {}
        for (source, piece), count in counts.items():
            totals[piece] = totals.get(piece, 0) + count * self.weight_of(source)
        least = min_word_count * MILLI
        return {key: count for key, count in counts.items() if totals[key[1]] >= least}


def count_pieces(documents: Iterable[bytes | str], pattern: str = "gpt2") -> dict[bytes, int]:
    """The plain single-process count of pieces, for tests and small inputs.

    Args:
      documents: document texts (bytes, possibly invalid UTF-8, or str).
      pattern: a preset name or regex.

    Returns:
      piece bytes -> number of occurrences.
    """
    return PieceCounter(pattern).count(documents)


def _document_data(element) -> bytes | str:
    # Documents from ReadDocuments carry .data; plain bytes/str are accepted too
    # so the transform is usable on any PCollection of texts.
    return element.data if hasattr(element, "data") else element


def _document_size(element) -> int:
    return len(_document_data(element))


def _str_size(text: str) -> int:
    # A str document's bytes are its UTF-8, lone surrogates as their 3-byte forms.
    return len(text.encode("utf-8", "surrogatepass"))


class _CountBatchFn(beam.DoFn):
    """Counts the pieces of one batch of documents (``bpe.piece_counter``); emits partitions.

    Emits (partition, {piece bytes: count}) with at most ``num_partitions``
    elements per table. A batch makes more than one table when its pieces pass
    ``max_batch_pieces``, so memory stays bounded whatever the batch holds, or
    when some of its documents are left to the regex engine.
    """

    def __init__(self, pattern: str, max_batch_pieces: int, num_partitions: int, engine: str = "auto",
                 sources: SourceRule | None = None, step: str = "count"):
        self._pattern = pattern
        self._sources = sources
        self._engine = engine
        self._max_batch_pieces = max_batch_pieces
        self._num_partitions = num_partitions
        self._counters = metrics.Counters(step, "documents", "bytes", "pieces", "regex_documents", "early_flushes")

    def setup(self):
        # Beam runs a worker process per core: gigatoken's counting threads (one
        # per core by default) would make every worker compete for every core.
        # Set before gigatoken first counts; a value the user gives stands.
        os.environ.setdefault("RAYON_NUM_THREADS", "1")
        self._counter = PieceCounter(self._pattern, self._engine)

    def process(self, batch):
        # BatchElements gives a list; any other iterable is taken whole first.
        batch = batch if isinstance(batch, list) else list(batch)
        try:
            documents = [element.data for element in batch]  # Documents: their bytes
            size = sum(map(len, documents))
        except AttributeError:
            documents = [_document_data(element) for element in batch]
            size = sum(len(data) if isinstance(data, bytes) else _str_size(data) for data in documents)
        regex_before = self._counter.regex_documents
        pieces = tables = 0
        for table in self._tables(batch, documents):
            tables += 1
            pieces += sum(table.values())
            yield from self._partitions(table)
        counters = self._counters
        counters.documents.inc(len(documents))
        counters.bytes.inc(size)
        counters.pieces.inc(pieces)
        counters.regex_documents.inc(self._counter.regex_documents - regex_before)
        if tables > 1:
            counters.early_flushes.inc(tables - 1)

    def _tables(self, batch: list, documents: list):
        """The batch's count tables: {piece: count}, or with sources {(source, piece): count}."""
        if self._sources is None:
            yield from self._counter.tables(documents, self._max_batch_pieces)
            return
        by_source: dict[str, list] = {}
        for element, data in zip(batch, documents):
            by_source.setdefault(self._sources.source_of(element), []).append(data)
        for source in sorted(by_source):
            for table in self._counter.tables(by_source[source], self._max_batch_pieces):
                yield {(source, piece): count for piece, count in table.items()}

    def _partitions(self, table: dict):
        n = self._num_partitions
        parts: list[dict] = [{} for _ in range(n)]
        crc32 = zlib.crc32
        for key, count in table.items():
            # A piece's rows of every source share its partition.
            parts[crc32(key if type(key) is bytes else key[1]) % n][key] = count
        for index, part in enumerate(parts):
            if part:
                yield index, part


class _MergeCountsFn(beam.CombineFn):
    """Sums {piece: count} tables; the accumulator is one dict."""

    def create_accumulator(self):
        return {}

    def add_input(self, accumulator, counts):
        if not accumulator:
            accumulator.update(counts)  # a copy in C: the input itself is never changed
            return accumulator
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

    def __init__(self, min_word_count: int, sources: SourceRule | None = None, step: str = "count"):
        self._min_word_count = min_word_count
        self._sources = sources
        self._counters = metrics.Counters(step, "unique_pieces", "pruned_pieces")

    def process(self, partition_counts):
        _, counts = partition_counts
        self._counters.unique_pieces.inc(len(counts))
        if self._min_word_count > 1:
            if self._sources is not None:
                kept = self._sources.keep(counts, self._min_word_count)
            else:
                kept = {piece: count for piece, count in counts.items() if count >= self._min_word_count}
            self._counters.pruned_pieces.inc(len(counts) - len(kept))
            counts = kept
        if counts:
            yield counts


@dataclasses.dataclass
class CountPreTokenTables(beam.PTransform):
    """Counts pre-token pieces: PCollection[Document] -> PCollection[{bytes: int}]
    (with ``sources``: PCollection[{(source, bytes): int}]).

    Each output element is one hash partition of the final table: distinct
    pieces (their exact UTF-8 bytes; invalid UTF-8 in the input is kept byte for
    byte) with their total counts over the whole input. Together the partitions
    equal ``count_pieces`` of the same documents, whatever the sharding, batching
    or runner. Writers take whole partitions (e.g. as Arrow tables), which costs
    far less than one element per piece (``beam.FlatMap(dict.items)`` gives
    (piece, count) rows).

    Counters (``transforms.metrics``, step ``count``): ``documents``, ``bytes``,
    ``pieces`` (occurrences), ``regex_documents`` (documents counted by the regex
    engine: all of them with ``engine="regex"``, else the ones the fast engine
    declines), ``unique_pieces`` (before pruning), ``pruned_pieces`` (dropped by
    ``min_word_count``), ``early_flushes`` (tables beyond the first of a batch).

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
      engine: how pieces are counted (``bpe.piece_counter``): ``auto`` (the
        fastest engine proven for the pattern), ``gigatoken`` or ``regex``.
      sources: None, or which source each document counts for (``SourceRule``):
        the tables are then keyed by (source, piece), and ``min_word_count``
        applies to a piece's weighted count over all sources.
      step: the counters' step name: a second count over the same documents
        (superword training's stage-two pieces) keeps its counters apart.
    """

    pattern: str = "gpt2"
    batch_bytes: int = 64 << 20
    max_batch_pieces: int = 2_000_000
    min_word_count: int = 1
    num_partitions: int = 64
    engine: str = "auto"
    sources: SourceRule | None = None
    step: str = "count"

    def __post_init__(self):
        compile_pattern(self.pattern)  # a bad regex fails here, not on a worker
        choose_engine(self.pattern, self.engine)  # and so does an engine that cannot run it
        for name in ("batch_bytes", "max_batch_pieces", "min_word_count", "num_partitions"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)}")

    def expand(self, documents):
        # The type hints choose the coders: bytes keys, or (source, piece) keys.
        table = dict[bytes, int] if self.sources is None else dict[tuple[str, bytes], int]
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
                _CountBatchFn(self.pattern, self.max_batch_pieces, self.num_partitions, self.engine, self.sources,
                              self.step)
            ).with_output_types(tuple[int, table])
            | "SumCounts" >> beam.CombinePerKey(_MergeCountsFn())
            | "Prune" >> beam.ParDo(_PruneFn(self.min_word_count, self.sources, self.step)).with_output_types(table)
        )
