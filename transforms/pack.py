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
N-th smallest. A unit is read as a stream of bounded batches
(``transforms.pack_input``).
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, NamedTuple, Sequence, Tuple

import apache_beam as beam
import numpy as np
import pyarrow as pa

from transforms import metrics
from transforms.coders import SizedPickleCoder
from transforms.pack_input import Unit, open_shard, read_batches, row_group_tokens
from transforms.packing import (
    Layout, Offsets, Pieces, SequenceBlock, UnitCounts, assemble, count_unit, cut_stream, pack_window, plan_splits,
    split_by_file, window_of,
)
from transforms.sequence_order import SPLITS, ValidationRule, id_hashes, smallest_keys, split_masks


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
# Pieces keyed by (split, output file): what the pieces' GroupByKey receives.
PiecesByFile = Tuple[Tuple[str, int], Pieces]


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
        for row_group in range(open_shard(path).metadata.num_row_groups):
            yield Unit(file, path, row_group)


def _local_smallest(unit: Unit, n: int) -> list[tuple[int, str]]:
    ids = open_shard(unit.path).read_row_group(unit.row_group, columns=["id"]).column("id").to_pylist()
    return smallest_keys(ids, id_hashes(ids), n)


class _CountFn(beam.DoFn):
    def process(self, unit: Unit, rule):
        if rule is None:  # every document is a training one: the footer has the counts
            parquet = open_shard(unit.path)
            documents = parquet.metadata.row_group(unit.row_group).num_rows
            tokens = row_group_tokens(parquet, unit.row_group)
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
