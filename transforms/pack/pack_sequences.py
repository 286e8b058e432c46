"""``PackSequences``: token shards -> shuffled fixed-length sequences, by split.

The work is done per unit (one row group of one token shard), per window of
documents (whole-document packing) and per output file, so no worker holds
more than about one of those; the algorithm is ``transforms.pack.packing_algorithm``.

    units ──Spill──> UnitDocuments ──> Offsets (side input: each unit's stream position)
      │  (tokens set aside: transforms.pack.spill)
      ├── split documents ──Cut──> pieces by output file ───────────────┐
      └── whole documents ──Window──> GroupByKey ──BestFit──> bins ──Place──┤
                                                                   GroupByKey
                                                                       └──Assemble──> SequenceBlock
                                                   (tokens read back from the spill)

The input shards are read once, by Spill, which sets every unit's tokens of
each split aside as one raw stream in the scratch directory and passes on only
their documents' lengths and ids. From these, every worker knows the global
position of its documents without any global order in memory; pieces name
their tokens by stream and offset, and Assemble, writing an output file,
reads its sequences' tokens from the streams. A first pass over the ids finds
the ids that name several documents (grouped by id) and gives every unit the
number of documents before it with each of those ids, so each document has a
key unique within the job (``sequence_order.Occurrences``); with
``validation_documents`` the N-th smallest key is found from them. A unit is read
as a stream of bounded batches (``transforms.pack.input_shards``).

A mixture of named sources (``mixture``) puts ``MixSources``
(``transforms.pack.mix_sources``) between Spill and Offsets: it turns each
spilled unit into the units of the stream, one per repeat that holds some of
its documents, each reading its tokens where the unit's spill put them.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Iterable, NamedTuple, Sequence, Tuple

import apache_beam as beam
import numpy as np
import pyarrow as pa

from transforms import metrics
from transforms.coders import SizedPickleCoder
from transforms.pack.input_shards import Unit, open_shard
from transforms.pack.mix_sources import MixSources
from transforms.pack.mixture_plan import FILES_PER_SOURCE, MixtureSpec
from transforms.pack.spill import SpillReadingFn, spill_path, spill_unit
from transforms.pack.worker_memory import bound_worker_memory
from transforms.pack.packing_algorithm import (
    Layout, Offsets, Pieces, SequenceBlock, UnitDocuments, assemble, cut_stream, pack_window, plan_splits,
    split_by_file, window_of,
)
from transforms.pack.sequence_order import SPLITS, Occurrences, ValidationRule, id_hashes, smallest_keys

__all__ = ["PackSequences", "PackedSequences", "ShardUnits", "SourceUnits", "shard_units", "source_units"]


class PiecesCoder(SizedPickleCoder):
    value_type = Pieces

    def estimate_size(self, pieces: Pieces) -> int:
        return 48 * len(pieces)


class SequenceBlockCoder(SizedPickleCoder):
    value_type = SequenceBlock

    def estimate_size(self, block: SequenceBlock) -> int:
        return block.input_ids.nbytes + block.doc_ids.nbytes


beam.coders.registry.register_coder(Pieces, PiecesCoder)
beam.coders.registry.register_coder(SequenceBlock, SequenceBlockCoder)
# Pieces keyed by (split, output file): what the pieces' GroupByKey receives.
PiecesByFile = Tuple[Tuple[str, int], Pieces]


def shard_units(paths: Sequence[str]) -> list[Unit]:
    """The units of these shards, in stream order: the paths sorted (each once), then row groups."""
    return source_units([paths])


def source_units(sources: Sequence[Sequence[str]]) -> list[Unit]:
    """The units of a mixture's sources (each a list of shard paths, in the order of
    ``MixtureSpec.names``), in stream order: source after source, each one's paths
    sorted, then row groups; file k of source s is numbered s * FILES_PER_SOURCE + k."""
    paths = [path for source in sources for path in set(source)]
    if len(set(paths)) != len(paths):
        raise ValueError("a shard belongs to two sources")
    if max((len(set(source)) for source in sources), default=0) > FILES_PER_SOURCE:
        raise ValueError(f"a source of more than {FILES_PER_SOURCE} shards")
    return [Unit(s * FILES_PER_SOURCE + k, path, row_group) for s, source in enumerate(sources)
            for k, path in enumerate(sorted(set(source)))
            for row_group in range(open_shard(path).metadata.num_row_groups)]


@dataclasses.dataclass
class ShardUnits(beam.PTransform):
    """A PCollection of token shard paths -> their units (``shard_units``), spread over workers."""

    def __post_init__(self):
        super().__init__()

    def expand(self, paths):
        return paths | "OneSource" >> beam.Map(lambda path: (0, path)) | "Units" >> SourceUnits(1)


def _units_of_sources(tagged: list[tuple[int, str]], sources: int) -> list[Unit]:
    return source_units([[path for s, path in tagged if s == source] for source in range(sources)])


@dataclasses.dataclass
class SourceUnits(beam.PTransform):
    """A PCollection of (source index, token shard path) -> the units of a mixture's
    sources (``source_units``), spread over workers.

    Args:
      sources: the number of sources (in the order of ``MixtureSpec.names``).
    """

    sources: int

    def __post_init__(self):
        super().__init__()

    def expand(self, tagged):
        return (
            tagged
            | "AllShards" >> beam.combiners.ToList()
            | "Units" >> beam.FlatMap(_units_of_sources, self.sources)
            | "SpreadUnits" >> beam.Reshuffle()
        )


# ---------------------------------------------------------------- the DoFns


def _unit_ids(unit: Unit) -> list[str]:
    return open_shard(unit.path).read_row_group(unit.row_group, columns=["id"]).column("id").to_pylist()


def _id_counts(unit: Unit) -> Iterable[tuple[str, tuple[tuple[int, int], int]]]:
    """(id, (unit key, documents of the unit with that id)) for each id of a unit."""
    for doc_id, count in collections.Counter(_unit_ids(unit)).items():
        yield doc_id, (unit.key, count)


def _earlier_counts(keyed) -> Iterable[tuple[tuple[int, int], tuple[str, int]]]:
    """For an id that names several documents: (unit key, (id, its documents in earlier units)) per unit."""
    doc_id, counts = keyed
    counts = sorted(counts)
    if sum(count for _, count in counts) > 1:
        earlier = 0
        for key, count in counts:
            yield key, (doc_id, earlier)
            earlier += count


def _repeated(keyed) -> int:
    """How many documents share their id with an earlier one."""
    return sum(count for _, count in keyed[1]) - 1


def _with_earlier(keyed) -> tuple[Unit, dict[str, int]]:
    _, joined = keyed
    (unit,) = joined["unit"]
    return unit, dict(joined["earlier"])


def _local_smallest(unit_earlier: tuple[Unit, dict[str, int]], n: int) -> list[tuple[int, str, int]]:
    unit, earlier = unit_earlier
    ids = _unit_ids(unit)
    occurrences = Occurrences(earlier)(ids)
    return smallest_keys(ids, id_hashes(ids, occurrences), n, occurrences)


class _SpillFn(beam.DoFn):
    def __init__(self, directory: str, dtype, with_keys: bool = False):
        self._directory, self._dtype, self._with_keys = directory, dtype, with_keys

    def setup(self):
        bound_worker_memory()

    def process(self, unit_earlier: tuple[Unit, dict[str, int]], rule) -> Iterable[UnitDocuments]:
        unit, earlier = unit_earlier
        yield spill_unit(unit, rule, self._directory, self._dtype, earlier, self._with_keys)


class _CutFn(beam.DoFn):
    """Split documents: a unit's pieces, keyed by their output file."""

    def __init__(self):
        self._pieces = metrics.counter("pack", "pieces")

    def process(self, documents: UnitDocuments, offsets: Offsets, plans):
        source = offsets.source(documents.key)
        for split in SPLITS:
            if not len(documents.lengths[split]):
                continue
            pieces = cut_stream(documents.lengths[split], documents.ids[split], offsets.starts[documents.key][split],
                                plans[split], source, documents.spill_offsets(split))
            self._pieces.inc(len(pieces))
            for file, part in split_by_file(pieces, plans[split]).items():
                yield (split, file), part


class _WindowFn(beam.DoFn):
    """Whole documents: a unit's documents, keyed by their packing window."""

    def __init__(self, layout: Layout):
        self._layout = layout

    def process(self, documents: UnitDocuments, offsets: Offsets):
        source = offsets.source(documents.key)
        for split in SPLITS:
            lengths = documents.lengths[split]
            within = np.cumsum(lengths) - lengths  # where each document starts in the unit's stream
            spilled_at = documents.spill_offsets(split)
            windows = window_of(offsets.starts[documents.key][split] + within, self._layout)
            for window in np.unique(windows):
                mask = windows == window
                yield (split, int(window)), (source, lengths[mask], within[mask], spilled_at[mask],
                                             documents.ids[split].filter(mask))


class _BestFitFn(beam.DoFn):
    def __init__(self, layout: Layout):
        self._layout = layout

    def process(self, keyed):
        key, batches = keyed
        batches = sorted(batches, key=lambda batch: (batch[0], int(batch[2][0])))  # stream order
        lengths = np.concatenate([b[1] for b in batches])
        sources = np.concatenate([np.full(len(b[1]), b[0], np.int64) for b in batches])
        offsets = np.concatenate([b[3] for b in batches])
        ids = pa.concat_arrays([b[4] for b in batches])
        kept = lengths > 0
        yield key, pack_window(lengths[kept], ids.filter(kept), self._layout.length, sources[kept], offsets[kept])


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


class _AssembleFn(SpillReadingFn):
    """The sequences of one output file, their tokens read from the spilled streams."""

    def __init__(self, directory: str, pad_id: int, dtype):
        super().__init__(dtype)
        self._directory, self._pad_id, self._dtype = directory, pad_id, dtype
        self._counters = metrics.Counters("pack", "sequences", "real_tokens")

    def process(self, keyed, plans, offsets: Offsets):
        (split, file), parts = keyed
        keys = offsets.keys

        def read(source: int, offset: int, out: np.ndarray) -> None:
            # A mixture's unit (repeat, file, row group) reads the stream spilled for (file, row group).
            self._reader.read_into(spill_path(self._directory, split, keys[source][-2:]), offset, out)

        block = assemble(Pieces.concat(list(parts)), plans[split], file, self._pad_id, self._dtype, read)
        self._counters.sequences.inc(block.rows)
        self._counters.real_tokens.inc(int(block.real.sum()))
        yield block


# ---------------------------------------------------------------- the transform


class PackedSequences(NamedTuple):
    """What PackSequences gives: the blocks of sequences of every output file,
    one element, {split: SplitPlan}, describing each split, one element, the
    number of documents whose id is shared with an earlier document; what the
    sequences are made from: the ``UnitDocuments`` of every unit (their tokens in
    the scratch directory) and one element, their ``Offsets``; and for a mixture
    one element, {source: SourcePlan} (``transforms.pack.mixture_plan``).
    Without sequences (``PackSequences.sequences`` False) blocks and plans are None."""

    blocks: beam.PCollection | None
    plans: beam.PCollection | None
    repeated_ids: beam.PCollection
    documents: beam.PCollection
    offsets: beam.PCollection
    mixture: beam.PCollection | None = None


@dataclasses.dataclass
class PackSequences(beam.PTransform):
    """Packs the documents of token shards into fixed-length sequences.

    Apply to a PCollection of the shards' units (``shard_units`` of the paths,
    or ``ShardUnits`` of a PCollection of paths)::

        units = p | "Units" >> beam.Create(shard_units(paths))
        packed = units | "Pack" >> PackSequences(scratch_dir, 2048, ...)

    Args:
      scratch_dir: a directory every worker reaches (any Beam filesystem), for
        the spilled token streams (``transforms.pack.spill``); the caller
        removes it after the job.
      seq_len: tokens per sequence.
      targets: one more token per sequence, for shifted targets (x = s[:-1], y = s[1:]).
      split_documents: cut the stream every sequence (default); else whole
        documents, best-fit, each sequence padded.
      drop_remainder: drop the stream's last, incomplete sequence instead of padding it.
      pad_id: the token ID of padding.
      seed: the seed of the shuffle of sequences.
      validation_fraction: the fraction of documents, by hash of their key (id and
        occurrence, ``sequence_order``), for validation.
      validation_documents: instead, the number of documents for validation
        (those with the smallest keys).
      vocab_size: the tokenizer's vocabulary size (picks uint16 or uint32 tokens).
      tokens_per_file: about how many tokens go into one output file.
      window_tokens: whole-document packing works on windows of about this many tokens.
      sequences: pack the documents into sequences; False stops once the documents
        are read, split and set aside, for writers of whole documents
        (``transforms.pack.megatron_documents``).
      mixture: named sources with token budgets (``transforms.pack.mixture_plan``);
        the units must then come from ``source_units`` of its sources, in its order.
    """

    scratch_dir: str
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
    sequences: bool = True
    mixture: MixtureSpec | None = None

    def __post_init__(self):
        super().__init__()
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
        """The validation rule: a value, or for a number of documents a side input computed
        from the documents' keys (``units``: (unit, earlier counts of its repeated ids))."""
        if self.validation_documents:
            n = self.validation_documents
            return beam.pvalue.AsSingleton(
                units
                | "LocalSmallestIds" >> beam.FlatMap(_local_smallest, n)
                | "SmallestIds" >> beam.combiners.Top.Smallest(n)
                | "Rule" >> beam.Map(lambda keys: ValidationRule(last=keys[-1]) if keys else None)
            )
        return ValidationRule.fraction(self.validation_fraction) if self.validation_fraction else None

    def expand(self, units):
        layout, single = self.layout, beam.pvalue.AsSingleton
        by_id = units | "IdCounts" >> beam.FlatMap(_id_counts) | "GroupIds" >> beam.GroupByKey()
        repeated_ids = (
            by_id
            | "Repeated" >> beam.Map(_repeated)
            | "RepeatedIds" >> beam.CombineGlobally(sum)
        )
        earlier = by_id | "EarlierCounts" >> beam.FlatMap(_earlier_counts)
        units = (
            {"unit": units | "KeyUnits" >> beam.Map(lambda unit: (unit.key, unit)), "earlier": earlier}
            | "JoinEarlier" >> beam.CoGroupByKey()
            | "WithEarlier" >> beam.Map(_with_earlier)
        )
        documents = units | "Spill" >> beam.ParDo(_SpillFn(self.scratch_dir, self.dtype, self.mixture is not None),
                                                  self._rule(units))
        mixture = None
        if self.mixture is not None:
            documents, mixture = documents | "Mix" >> MixSources(self.mixture)
        offsets = (
            documents
            | "Count" >> beam.Map(lambda d: (d.key, d.counts()))
            | "AllCounts" >> beam.combiners.ToList()
            | "Offsets" >> beam.Map(Offsets.from_counts)
        )
        if not self.sequences:
            return PackedSequences(None, None, repeated_ids, documents, offsets, mixture)
        if layout.split_documents:
            plans = offsets | "PlanSplits" >> beam.Map(plan_splits, layout)
            pieces = documents | "Cut" >> beam.ParDo(_CutFn(), single(offsets), single(plans)).with_output_types(
                PiecesByFile)
        else:
            bins = (
                documents
                | "Window" >> beam.ParDo(_WindowFn(layout), single(offsets))
                | "GroupWindows" >> beam.GroupByKey()
                | "BestFit" >> beam.ParDo(_BestFitFn(layout))
            )
            bin_offsets = (
                bins
                | "BinCounts" >> beam.Map(lambda keyed: (keyed[0], keyed[1][1]))
                | "AllBinCounts" >> beam.combiners.ToList()
                | "BinOffsets" >> beam.Map(_bin_offsets)
            )
            plans = offsets | "PlanSplits" >> beam.Map(
                lambda offsets, bins: plan_splits(offsets, layout, bins[1]), single(bin_offsets))
            pieces = bins | "Place" >> beam.FlatMap(_place, single(bin_offsets), single(plans)).with_output_types(
                PiecesByFile)
        blocks = (
            pieces
            | "GroupByFile" >> beam.GroupByKey()
            | "Assemble" >> beam.ParDo(_AssembleFn(self.scratch_dir, self.pad_id, self.dtype), single(plans),
                                       single(offsets)).with_output_types(SequenceBlock)
        )
        return PackedSequences(blocks, plans, repeated_ids, documents, offsets, mixture)
