"""``PackSequences``: token shards -> shuffled fixed-length sequences, by split.

The work is done per unit (one row group of one token shard), per window of
documents (whole-document packing) and per output file, so no worker holds
more than about one of those; the algorithm is ``transforms.packing``.

    units ──Count──> UnitCounts ──> Offsets (side input: each unit's stream position)
      │                                   │
      ├── split documents ──Cut──> pieces by output file ─┐
      └── whole documents ──Window──> GroupByKey ──BestFit──> bins ──Place──┤
                                                                   GroupByKey
                                                                       └──Assemble──> SequenceBlock

Every worker knows the global position of its tokens without any global
order in memory: without a validation split the footers give each unit's
counts; with one, units are read twice (to count by split, then to cut).
With ``validation_documents`` a first pass over the ids finds the hash of the
N-th smallest. A unit is read as a stream of batches of about
``BATCH_TOKENS`` tokens, so a row group of any size fits a worker.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, Iterator, NamedTuple, Sequence, Tuple

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from transforms import metrics
from transforms.coders import SizedPickleCoder
from transforms.packing import (
    Layout, Offsets, Pieces, SequenceBlock, UnitCounts, assemble, count_unit, cut_stream, pack_window, plan_splits,
    split_by_file, window_of,
)
from transforms.sequence_order import SPLITS, ValidationRule, id_hashes, smallest_keys, split_masks
from transforms.shards import EOS_KEY, SHA256_KEY, VOCAB_SIZE_KEY


class Unit(NamedTuple):
    """One row group of one input shard; units are ordered by (file, row_group)."""

    file: int
    path: str
    row_group: int

    @property
    def key(self) -> tuple[int, int]:
        return self.file, self.row_group


class PiecesCoder(SizedPickleCoder):
    value_type = Pieces

    def estimate_size(self, pieces: Pieces) -> int:
        return pieces.tokens.nbytes + 24 * len(pieces)


class SequenceBlockCoder(SizedPickleCoder):
    value_type = SequenceBlock

    def estimate_size(self, block: SequenceBlock) -> int:
        return block.input_ids.nbytes + block.doc_ids.nbytes


beam.coders.registry.register_coder(Pieces, PiecesCoder)
beam.coders.registry.register_coder(SequenceBlock, SequenceBlockCoder)
# About how many tokens a worker reads from a shard at a time.
BATCH_TOKENS = 1 << 20
# Pieces keyed by (split, output file): what the pieces' GroupByKey receives.
PiecesByFile = Tuple[Tuple[str, int], Pieces]


# ---------------------------------------------------------------- reading shards


def _open(path: str):
    # Local files go to Arrow's own reader; other filesystems through Beam's.
    if "://" not in path or path.startswith("file://"):
        return pq.ParquetFile(path.removeprefix("file://"))
    return pq.ParquetFile(FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED))


class ShardsInfo(NamedTuple):
    """What the input shards' footers say about them together."""

    tokenizer_sha256: str
    vocab_size: int
    eos_token_id: int | None
    documents: int
    tokens: int


def describe_shards(paths: Sequence[str]) -> ShardsInfo:
    """Reads the footers of token shards; they must come from one tokenizer.

    Raises:
      ValueError: no shards, a file that is not a token shard, or shards of
        different tokenizers.
    """
    if not paths:
        raise ValueError("no token shards given")
    seen, documents, tokens = None, 0, 0
    for path in paths:
        try:
            parquet = _open(path)
        except Exception as e:  # Arrow and the filesystems raise several types
            raise ValueError(f"{path} is not a readable Parquet file ({e})") from None
        metadata = parquet.schema_arrow.metadata or {}
        names = parquet.schema_arrow.names
        if "tokens" not in names or "id" not in names or SHA256_KEY not in metadata:
            raise ValueError(f"{path} is not a token shard (needs columns id, tokens and {SHA256_KEY.decode()})")
        id_column = _leaf_column(parquet, "id")
        for rg in range(parquet.metadata.num_row_groups):
            stats = parquet.metadata.row_group(rg).column(id_column).statistics
            if stats is not None and stats.has_null_count and stats.null_count:
                raise ValueError(f"{path} has rows without an id; every document needs one (the split hashes it)")
        eos = metadata.get(EOS_KEY)
        info = (metadata[SHA256_KEY].decode(), int(metadata.get(VOCAB_SIZE_KEY, 0)), int(eos) if eos else None)
        if seen is not None and info[:2] != seen[:2]:
            raise ValueError(
                f"{path} was encoded with tokenizer {info[0]} (vocab {info[1]}), {paths[0]} with "
                f"{seen[0]} (vocab {seen[1]}): shards of different tokenizers cannot be packed together"
            )
        seen = info if seen is None or info[2] == seen[2] else (*seen[:2], None)
        documents += parquet.metadata.num_rows
        tokens += sum(_row_group_tokens(parquet, rg) for rg in range(parquet.metadata.num_row_groups))
    return ShardsInfo(*seen, documents, tokens)


def _leaf_column(parquet: pq.ParquetFile, name: str) -> int:
    """The index of the Parquet leaf column under the top-level column ``name``."""
    schema = parquet.metadata.schema
    return next(i for i in range(len(schema)) if schema.column(i).path.split(".")[0] == name)


def _footer_tokens(parquet: pq.ParquetFile, row_group: int) -> int | None:
    """The tokens of a row group by its footer's statistics; None without them."""
    column = _leaf_column(parquet, "tokens")
    stats = parquet.metadata.row_group(row_group).column(column).statistics
    if stats is not None and stats.has_null_count:
        return stats.num_values  # the leaf's non-null values are the tokens
    return None


def _row_group_tokens(parquet: pq.ParquetFile, row_group: int) -> int:
    tokens = _footer_tokens(parquet, row_group)
    if tokens is not None:
        return tokens
    lengths = parquet.read_row_group(row_group, columns=["tokens"]).column(0).combine_chunks()
    return int(np.sum(pc.list_value_length(lengths).to_numpy(zero_copy_only=False)))


def read_batches(unit: Unit, batch_tokens: int | None = None) -> Iterator[tuple[list[str], np.ndarray, np.ndarray]]:
    """(ids, token counts, all tokens back to back) of one unit's documents, in
    batches of about ``batch_tokens`` tokens (by the footer's average per row),
    read as a stream: a worker holds one batch, whatever the row group's size."""
    batch_tokens = batch_tokens or BATCH_TOKENS
    parquet = _open(unit.path)
    rows = parquet.metadata.row_group(unit.row_group).num_rows
    tokens = _footer_tokens(parquet, unit.row_group)
    batch_rows = max(1, rows * batch_tokens // tokens) if tokens else max(1, rows)
    for batch in parquet.iter_batches(batch_size=batch_rows, row_groups=[unit.row_group], columns=["id", "tokens"],
                                      use_threads=False):
        column = batch.column("tokens")
        offsets = column.offsets.to_numpy()
        values = column.values.to_numpy()[offsets[0]: offsets[-1]]
        yield batch.column("id").to_pylist(), np.diff(offsets).astype(np.int64), values


def _split_documents(unit: Unit, rule: ValidationRule | None):
    """For each batch of the unit and each split: (split, where the batch's first
    token of that split is within the unit's tokens of the split, token counts,
    tokens, ids) of the batch's documents in the split."""
    done = dict.fromkeys(SPLITS, 0)
    for ids, lengths, tokens in read_batches(unit):
        for split, mask in split_masks(ids, rule).items():
            if mask.all():
                part = split, done[split], lengths, tokens, pa.array(ids, pa.string())
            elif mask.any():
                part = split, done[split], lengths[mask], tokens[np.repeat(mask, lengths)], pa.array(ids, pa.string()).filter(mask)
            else:
                continue
            done[split] += int(part[2].sum())
            yield part


# ---------------------------------------------------------------- the DoFns


class _UnitsFn(beam.DoFn):
    def process(self, file_and_path: tuple[int, str]) -> Iterable[Unit]:
        file, path = file_and_path
        for row_group in range(_open(path).metadata.num_row_groups):
            yield Unit(file, path, row_group)


def _local_smallest(unit: Unit, n: int) -> list[tuple[int, str]]:
    ids = _open(unit.path).read_row_group(unit.row_group, columns=["id"]).column("id").to_pylist()
    return smallest_keys(ids, id_hashes(ids), n)


class _CountFn(beam.DoFn):
    def process(self, unit: Unit, rule):
        if rule is None:  # every document is a training one: the footer has the counts
            parquet = _open(unit.path)
            documents = parquet.metadata.row_group(unit.row_group).num_rows
            tokens = _row_group_tokens(parquet, unit.row_group)
            yield unit.key, UnitCounts({"train": documents, "validation": 0}, {"train": tokens, "validation": 0})
            return
        documents, tokens = dict.fromkeys(SPLITS, 0), dict.fromkeys(SPLITS, 0)
        for ids, lengths, _ in read_batches(unit):
            counts = count_unit(ids, lengths, rule)
            for split in SPLITS:
                documents[split] += counts.documents[split]
                tokens[split] += counts.tokens[split]
        yield unit.key, UnitCounts(documents, tokens)


class _CutFn(beam.DoFn):
    """Split documents: a unit's pieces, keyed by their output file."""

    def __init__(self):
        self._pieces = metrics.counter("pack", "pieces")

    def process(self, unit: Unit, rule, offsets: Offsets, plans):
        for split, done, lengths, tokens, ids in _split_documents(unit, rule):
            pieces = cut_stream(lengths, tokens, ids, offsets.starts[unit.key][split] + done, plans[split])
            self._pieces.inc(len(pieces))
            for file, part in split_by_file(pieces, plans[split]).items():
                yield (split, file), part


class _WindowFn(beam.DoFn):
    """Whole documents: a unit's documents, keyed by their packing window."""

    def __init__(self, layout: Layout):
        self._layout = layout

    def process(self, unit: Unit, rule, offsets: Offsets):
        for split, done, lengths, tokens, ids in _split_documents(unit, rule):
            starts = offsets.starts[unit.key][split] + done + np.cumsum(lengths) - lengths
            windows = window_of(starts, self._layout)
            for window in np.unique(windows):
                mask = windows == window
                first = int(np.argmax(mask))
                yield (split, int(window)), (int(starts[first]), lengths[mask],
                                             tokens[np.repeat(mask, lengths)], ids.filter(mask))


class _BestFitFn(beam.DoFn):
    def __init__(self, layout: Layout, dtype):
        self._layout, self._dtype = layout, dtype

    def process(self, keyed):
        key, batches = keyed
        batches = sorted(batches, key=lambda batch: batch[0])  # stream order
        lengths = np.concatenate([b[1] for b in batches])
        tokens = np.concatenate([b[2] for b in batches]).astype(self._dtype, copy=False)
        ids = pa.concat_arrays([b[3] for b in batches])
        yield key, pack_window(lengths[lengths > 0], tokens, ids.filter(lengths > 0), self._layout.length)


def _bin_offsets(counts: list[tuple[tuple[str, int], int]]) -> tuple[dict, dict[str, int]]:
    """({(split, window): global index of its first bin}, {split: bins})."""
    firsts, totals = {}, dict.fromkeys(SPLITS, 0)
    for (split, window), bins in sorted(counts):
        firsts[split, window] = totals[split]
        totals[split] += bins
    return firsts, totals


def _place(keyed, bins, plans):
    (split, window), (pieces, _) = keyed
    pieces = dataclasses.replace(pieces, sequence=pieces.sequence + bins[0][split, window])
    for file, part in split_by_file(pieces, plans[split]).items():
        yield (split, file), part


class _AssembleFn(beam.DoFn):
    def __init__(self, pad_id: int, dtype):
        self._pad_id, self._dtype = pad_id, dtype
        self._sequences = metrics.counter("pack", "sequences")
        self._tokens = metrics.counter("pack", "real_tokens")

    def process(self, keyed, plans):
        (split, file), parts = keyed
        block = assemble(Pieces.concat(list(parts), self._dtype), plans[split], file, self._pad_id, self._dtype)
        self._sequences.inc(block.rows)
        self._tokens.inc(int(block.real.sum()))
        yield block


# ---------------------------------------------------------------- the transform


class PackedSequences(NamedTuple):
    """What PackSequences gives: the blocks of sequences of every output file,
    and one element, {split: SplitPlan}, describing each split."""

    blocks: beam.PCollection
    plans: beam.PCollection


@dataclasses.dataclass
class PackSequences(beam.PTransform):
    """Packs the documents of token shards into fixed-length sequences.

    Apply to a pipeline: ``packed = p | "Pack" >> PackSequences(paths, 2048, ...)``.

    Args:
      shards: token shard paths (any Beam filesystem); their documents are
        concatenated in this order (sort them for a stable order).
      seq_len: tokens per sequence.
      targets: one more token per sequence, for shifted targets (x = s[:-1], y = s[1:]).
      split_documents: cut the stream every sequence (default); else whole
        documents, best-fit, each sequence padded.
      drop_remainder: drop the stream's last, incomplete sequence instead of padding it.
      pad_id: the token ID of padding.
      seed: the seed of the shuffle of sequences.
      validation_fraction: the fraction of documents, by hash of their id, for validation.
      validation_documents: instead, the number of documents for validation
        (those with the smallest hashes).
      vocab_size: the tokenizer's vocabulary size (picks uint16 or uint32 tokens).
      tokens_per_file: about how many tokens go into one output file.
      window_tokens: whole-document packing works on windows of about this many tokens.
    """

    shards: Sequence[str]
    seq_len: int
    targets: bool = False
    split_documents: bool = True
    drop_remainder: bool = False
    pad_id: int = 0
    seed: int = 0
    validation_fraction: float = 0.0
    validation_documents: int = 0
    vocab_size: int = 1 << 16
    tokens_per_file: int = 1 << 23
    window_tokens: int = 1 << 22

    def __post_init__(self):
        super().__init__()
        self.shards = list(self.shards)
        if self.seq_len < 1:
            raise ValueError(f"seq_len must be positive, not {self.seq_len}")
        if not 0 <= self.validation_fraction < 1 or self.validation_documents < 0:
            raise ValueError("validation_fraction must be in [0, 1) and validation_documents >= 0")
        if self.validation_fraction and self.validation_documents:
            raise ValueError("give validation_fraction or validation_documents, not both")
        if not 0 <= self.pad_id < (1 << 16 if self.vocab_size <= 1 << 16 else 1 << 32):
            raise ValueError(f"pad_id {self.pad_id} does not fit the token type")
        self.layout = Layout(
            self.seq_len + self.targets, self.split_documents, self.drop_remainder,
            per_file=max(1, self.tokens_per_file // (self.seq_len + self.targets)),
            window_tokens=self.window_tokens, seed=self.seed,
        )

    @property
    def dtype(self):
        return np.uint16 if self.vocab_size <= 1 << 16 else np.uint32

    def _rule(self, units):
        if self.validation_documents:
            n = self.validation_documents
            return (
                units
                | "LocalSmallestIds" >> beam.FlatMap(_local_smallest, n)
                | "SmallestIds" >> beam.combiners.Top.Smallest(n)
                | "Rule" >> beam.Map(lambda keys: ValidationRule(last=keys[-1]) if keys else None)
            )
        rule = ValidationRule.fraction(self.validation_fraction) if self.validation_fraction else None
        return units.pipeline | "Rule" >> beam.Create([rule])

    def expand(self, pbegin):
        layout, single = self.layout, beam.pvalue.AsSingleton
        units = (
            pbegin
            | "Shards" >> beam.Create(list(enumerate(self.shards)))
            | "Units" >> beam.ParDo(_UnitsFn())
            | "SpreadUnits" >> beam.Reshuffle()
        )
        rule = single(self._rule(units))
        offsets = single(
            units
            | "Count" >> beam.ParDo(_CountFn(), rule)
            | "AllCounts" >> beam.combiners.ToList()
            | "Offsets" >> beam.Map(Offsets.from_counts)
        )
        if layout.split_documents:
            plans = (
                units.pipeline
                | "Plan" >> beam.Create([None])
                | "PlanSplits" >> beam.Map(lambda _, offsets: plan_splits(offsets, layout), offsets)
            )
            pieces = units | "Cut" >> beam.ParDo(_CutFn(), rule, offsets, single(plans)).with_output_types(
                PiecesByFile)
        else:
            bins = (
                units
                | "Window" >> beam.ParDo(_WindowFn(layout), rule, offsets)
                | "GroupWindows" >> beam.GroupByKey()
                | "BestFit" >> beam.ParDo(_BestFitFn(layout, self.dtype))
            )
            bin_offsets = single(
                bins
                | "BinCounts" >> beam.Map(lambda keyed: (keyed[0], keyed[1][1]))
                | "AllBinCounts" >> beam.combiners.ToList()
                | "BinOffsets" >> beam.Map(_bin_offsets)
            )
            plans = (
                units.pipeline
                | "Plan" >> beam.Create([None])
                | "PlanSplits" >> beam.Map(
                    lambda _, offsets, bins: plan_splits(offsets, layout, bins[1]), offsets, bin_offsets)
            )
            pieces = bins | "Place" >> beam.FlatMap(_place, bin_offsets, single(plans)).with_output_types(PiecesByFile)
        blocks = (
            pieces
            | "GroupByFile" >> beam.GroupByKey()
            | "Assemble" >> beam.ParDo(_AssembleFn(self.pad_id, self.dtype), single(plans)).with_output_types(
                SequenceBlock)
        )
        return PackedSequences(blocks, plans)
