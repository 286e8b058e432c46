"""Packing documents into fixed-length sequences: the algorithm, without Beam.

``pack_sequences`` runs these functions on workers; each works on at most one
unit of input (a Parquet row group of a token shard), one window of documents
or one output file, never on the whole corpus.

The documents of each split (train, validation) are concatenated in input
order: shard files sorted by name, row groups in file order, rows in row-group
order. A document goes to the validation split when a hash of its key (its id and how
many documents before it have the same id) is small (``sequence_order.ValidationRule``),
so the split depends on the ids and their order alone. Everything else is
defined by global positions in a split's stream of tokens, which a first pass
(``UnitDocuments`` per unit, summed up by ``Offsets``) gives to every unit. So the
result does not depend on how the same documents are cut into shards or row
groups, nor on the number of workers or the runner.

Sequences have ``length`` tokens (``seq_len``, plus one for shifted targets):

- split documents (default): the split's stream is cut every ``length``
  tokens; sequence k holds stream positions [k * length, (k + 1) * length).
  The tail shorter than ``length`` is padded or dropped.
- whole documents: documents are cut into pieces of at most ``length`` tokens
  and packed best-fit-decreasing into sequences, within windows of the stream
  (a document belongs to the window its first token falls in); every sequence
  is padded to ``length``. A document is cut only when it is longer than a
  sequence. Sequences are numbered window after window, in the order best-fit
  opens them.

A piece is the run of one document's tokens inside one sequence. It names
its tokens by where they are (``Pieces.source``, ``Pieces.offset``: each
unit's tokens of a split form one stream, which the first pass sets aside), so
only the writer of a sequence's file reads them (``assemble``). Sequence k of
a split goes to position ``sequence_order.Permutation(k)`` of the split's shuffled order, and
position p to output file ``p // per_file``, row ``p % per_file``.
"""

from __future__ import annotations

import bisect
import dataclasses
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa

from transforms.pack.sequence_order import SPLITS, Permutation

__all__ = [
    "UnitCounts", "UnitDocuments", "Offsets", "Layout", "SplitPlan", "Pieces", "SequenceBlock", "plan_splits",
    "split_by_file", "cut_stream", "window_of", "best_fit", "pack_window", "assemble", "read_runs"
]

# Fills its array with the tokens of stream ``source`` from ``offset`` (see ``assemble``).
ReadTokens = Callable[[int, int, np.ndarray], None]


# ---------------------------------------------------------------- global positions


@dataclasses.dataclass(frozen=True)
class UnitCounts:
    """Documents and tokens of one input unit, per split."""

    documents: dict[str, int]
    tokens: dict[str, int]


@dataclasses.dataclass
class UnitDocuments:
    """The documents of one input unit, per split, without their tokens: their
    token counts and ids, in stream order. The tokens of a unit's documents of
    a split are one stream, in the same order.

    A unit of a mixture (``transforms.pack.mixture_plan``) is keyed (repeat,
    file, row group) and holds some of the documents of the stream spilled
    for (file, row group): ``spilled_at`` says where each starts in it. The
    spilled streams of a key are always named by its last two parts.

    Attributes:
      key: the unit's place in the stream order: (file, row group), or (repeat, file, row group).
      lengths, ids: each document's tokens and id, per split.
      spilled_at: where each document's tokens start in the spilled stream (None: back to back from 0).
      hashes, occurrences: each document's key (``sequence_order.id_hashes`` and its
        occurrence), when asked for (mixtures draw by them).
    """

    key: tuple
    lengths: dict[str, np.ndarray]
    ids: dict[str, pa.Array]
    spilled_at: dict[str, np.ndarray] | None = None
    hashes: dict[str, np.ndarray] | None = None
    occurrences: dict[str, np.ndarray] | None = None

    def spill_offsets(self, split: str) -> np.ndarray:
        """Where each document of a split starts in the unit's spilled stream."""
        if self.spilled_at is not None:
            return self.spilled_at[split]
        lengths = self.lengths[split]
        return np.cumsum(lengths) - lengths

    def counts(self) -> UnitCounts:
        return UnitCounts({s: len(self.lengths[s]) for s in SPLITS}, {s: int(self.lengths[s].sum()) for s in SPLITS})


@dataclasses.dataclass(frozen=True)
class Offsets:
    """Where each unit's tokens start in each split's stream, and the totals.

    Units are numbered in stream order (``keys``): a unit's number names its
    token stream of a split (``Pieces.source``).
    """

    starts: dict  # unit key -> {split: global position of the unit's first token}
    documents: dict[str, int]
    tokens: dict[str, int]
    keys: tuple = ()  # the unit keys in stream order
    numbers: dict = dataclasses.field(default_factory=dict)  # unit key -> its place in ``keys``

    @classmethod
    def from_counts(cls, counts: Iterable[tuple[tuple, UnitCounts]]) -> "Offsets":
        """Units are ordered by their keys (file index, row group)."""
        starts, documents, tokens = {}, dict.fromkeys(SPLITS, 0), dict.fromkeys(SPLITS, 0)
        for key, unit in sorted(counts, key=lambda kv: kv[0]):
            starts[key] = dict(tokens)
            for split in SPLITS:
                documents[split] += unit.documents[split]
                tokens[split] += unit.tokens[split]
        keys = tuple(starts)
        return cls(starts, documents, tokens, keys, {key: number for number, key in enumerate(keys)})

    def source(self, key) -> int:
        return self.numbers[key]


# ---------------------------------------------------------------- the layout of the output


@dataclasses.dataclass(frozen=True)
class Layout:
    """The shape of the output, fixed by the user's options.

    Attributes:
      length: tokens per sequence (seq_len, plus one with targets).
      split_documents: cut the stream every ``length`` tokens (else best-fit whole documents).
      drop_remainder: drop the stream's tail that does not fill a sequence (split documents only).
      per_file: sequences per output file.
      window_tokens: best-fit packs the documents of windows of about this many tokens.
      seed: the shuffle's seed.
    """

    length: int
    split_documents: bool = True
    drop_remainder: bool = False
    per_file: int = 4096
    window_tokens: int = 1 << 22
    seed: int = 0

    def __post_init__(self):
        if self.length < 1 or self.per_file < 1 or self.window_tokens < 1:
            raise ValueError("length, per_file and window_tokens must be positive")
        if self.drop_remainder and not self.split_documents:
            raise ValueError("drop_remainder needs split_documents: whole documents pad every sequence")

    @property
    def has_padding(self) -> bool:
        """Whether sequences may end in padding (so the output carries a loss mask)."""
        return not (self.split_documents and self.drop_remainder)

    def stream_sequences(self, tokens: int) -> tuple[int, int]:
        """(sequences, dropped tokens) of a split stream of this many tokens, split documents."""
        full, tail = divmod(tokens, self.length)
        if tail and not self.drop_remainder:
            return full + 1, 0
        return full, tail


@dataclasses.dataclass(frozen=True)
class SplitPlan:
    """One split's output: its sequences, their shuffle and the files they go to."""

    split: str
    documents: int
    tokens: int  # real tokens in the split's documents
    sequences: int
    dropped_tokens: int
    layout: Layout

    @property
    def files(self) -> int:
        return -(-self.sequences // self.layout.per_file)

    def file_rows(self, file: int) -> int:
        return min(self.layout.per_file, self.sequences - file * self.layout.per_file)

    @property
    def padding_tokens(self) -> int:
        return self.sequences * self.layout.length - (self.tokens - self.dropped_tokens)

    def place(self, sequences: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(file, row) of each sequence index after the shuffle."""
        positions = Permutation(self.sequences, self.layout.seed, self.split)(sequences)
        return np.divmod(positions, self.layout.per_file)


def plan_splits(offsets: Offsets, layout: Layout, bins: dict[str, int] | None = None) -> dict[str, SplitPlan]:
    """The plan of every split; ``bins`` are the sequence counts of whole-document packing."""
    plans = {}
    for split in SPLITS:
        if layout.split_documents:
            sequences, dropped = layout.stream_sequences(offsets.tokens[split])
        else:
            sequences, dropped = (bins or {}).get(split, 0), 0
        plans[split] = SplitPlan(split, offsets.documents[split], offsets.tokens[split], sequences, dropped, layout)
    return plans


# ---------------------------------------------------------------- pieces


@dataclasses.dataclass
class Pieces:
    """Runs of one document's tokens inside one sequence (columnar), by reference:
    a piece names where its tokens are (``source``, ``offset``), not the tokens,
    so pieces move between workers at a few dozen bytes each whatever their length.

    Attributes:
      sequence: the sequence of each piece (a global index, or a row of an output file).
      position: where in its sequence the piece starts.
      length: the piece's tokens.
      source: which token stream holds them (the ordinal of an input unit, ``Offsets.keys``).
      offset: where in that stream they start.
      doc_ids: the id of each piece's document.
    """

    sequence: np.ndarray
    position: np.ndarray
    length: np.ndarray
    source: np.ndarray
    offset: np.ndarray
    doc_ids: pa.Array

    def __len__(self) -> int:
        return len(self.sequence)

    def take(self, indices: np.ndarray) -> "Pieces":
        """The pieces at these indices, in this order."""
        return Pieces(self.sequence[indices], self.position[indices], self.length[indices], self.source[indices],
                      self.offset[indices], self.doc_ids.take(pa.array(indices, pa.int64())))

    @classmethod
    def concat(cls, parts: Sequence["Pieces"]) -> "Pieces":
        parts = [p for p in parts if len(p)]
        if not parts:
            empty = np.zeros(0, np.int64)
            return cls(empty, empty, empty, empty, empty, pa.array([], pa.string()))
        columns = [np.concatenate([getattr(p, name) for p in parts]).astype(np.int64, copy=False)
                   for name in ("sequence", "position", "length", "source", "offset")]
        return cls(*columns, pa.concat_arrays([p.doc_ids.cast(pa.string()) for p in parts]))


def split_by_file(pieces: Pieces, plan: SplitPlan) -> dict[int, Pieces]:
    """Places pieces whose ``sequence`` is a global index: {file: pieces, sequence = row}."""
    files, rows = plan.place(pieces.sequence)
    placed = dataclasses.replace(pieces, sequence=rows)
    order = np.argsort(files, kind="stable")
    cuts = np.flatnonzero(np.diff(files[order])) + 1
    return {int(files[group[0]]): placed.take(group) for group in np.split(order, cuts) if len(group)}


# ---------------------------------------------------------------- split documents: cut the stream


def cut_stream(lengths: np.ndarray, doc_ids: pa.Array, start: int, plan: SplitPlan, source: int = 0,
               spilled_at: np.ndarray | None = None) -> Pieces:
    """The pieces of consecutive documents whose first token is at stream position
    ``start`` and at offset 0 of stream ``source`` (or, given ``spilled_at``, each
    document at its own offset there): cut every ``length`` positions, dropping
    sequences past the plan's."""
    length = plan.layout.length
    lengths = np.asarray(lengths, dtype=np.int64)
    ends = start + np.cumsum(lengths, dtype=np.int64)
    starts = ends - lengths
    first = starts // length
    count = np.where(lengths > 0, (ends - 1) // length - first + 1, 0)
    doc = np.repeat(np.arange(len(lengths)), count)
    sequence = np.repeat(first, count) + np.arange(len(doc)) - np.repeat(np.cumsum(count) - count, count)
    keep = sequence < plan.sequences  # a prefix: only the dropped tail is cut off
    doc, sequence = doc[keep], sequence[keep]
    piece_start = np.maximum(starts[doc], sequence * length)
    piece_end = np.minimum(ends[doc], (sequence + 1) * length)
    offset = piece_start - start if spilled_at is None else piece_start - starts[doc] + np.asarray(spilled_at)[doc]
    return Pieces(sequence, piece_start - sequence * length, piece_end - piece_start,
                  np.full(len(doc), source, np.int64), offset, doc_ids.take(pa.array(doc, pa.int64())))


# ---------------------------------------------------------------- whole documents: best fit


def window_of(starts: np.ndarray, layout: Layout) -> np.ndarray:
    """The packing window of documents whose first token is at these stream positions."""
    return starts // layout.window_tokens


def best_fit(lengths: Sequence[int], capacity: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Best-fit decreasing: items (each at most ``capacity``) into the fewest bins it finds.

    Items go longest first (ties: in input order), each into the bin with the
    least room left that still fits it (ties: the oldest bin), or a new bin.
    Returns (bin of each item, its position in the bin, number of bins).
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    bins = np.zeros(len(lengths), np.int64)
    positions = np.zeros(len(lengths), np.int64)
    room: list[tuple[int, int]] = []  # (room left, bin), sorted
    used: list[int] = []
    for i in np.lexsort((np.arange(len(lengths)), -lengths)).tolist():
        size = int(lengths[i])
        j = bisect.bisect_left(room, (size, -1))
        if j == len(room):
            b = len(used)
            used.append(0)
        else:
            b = room.pop(j)[1]
        bins[i], positions[i] = b, used[b]
        used[b] += size
        if used[b] < capacity:
            bisect.insort(room, (capacity - used[b], b))
    return bins, positions, len(used)


def pack_window(lengths: np.ndarray, doc_ids: pa.Array, capacity: int, sources: np.ndarray,
                offsets: np.ndarray) -> tuple[Pieces, int]:
    """Whole-document packing of one window's documents (in stream order); document
    i's tokens are at ``offsets[i]`` of stream ``sources[i]``.

    Documents longer than ``capacity`` are cut into pieces of ``capacity``
    tokens and a shorter last piece; all pieces are packed best-fit. Returns the
    pieces (``sequence`` = bin within the window, in order) and the bin count.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    count = -(-lengths // capacity)
    doc = np.repeat(np.arange(len(lengths)), count)
    index = np.arange(len(doc)) - np.repeat(np.cumsum(count) - count, count)
    piece_length = np.minimum(capacity, lengths[doc] - index * capacity)
    bins, positions, n_bins = best_fit(piece_length, capacity)
    order = np.lexsort((positions, bins))
    doc = doc[order]
    pieces = Pieces(bins[order], positions[order], piece_length[order], np.asarray(sources, np.int64)[doc],
                    np.asarray(offsets, np.int64)[doc] + index[order] * capacity,
                    doc_ids.take(pa.array(doc, pa.int64())))
    return pieces, n_bins


# ---------------------------------------------------------------- one output file


@dataclasses.dataclass
class SequenceBlock:
    """The sequences of one output file, in order.

    Attributes:
      split, file, files: which file of which split, of how many.
      input_ids: (rows, length) token IDs, padding included.
      real: real (non-padding) tokens at the start of each row.
      doc_offsets: row r's documents are doc_starts/doc_ids[doc_offsets[r]:doc_offsets[r + 1]].
      doc_starts: where each piece starts in its row (the first is always 0).
      doc_ids: the id of each piece's document.
    """

    split: str
    file: int
    files: int
    input_ids: np.ndarray
    real: np.ndarray
    doc_offsets: np.ndarray
    doc_starts: np.ndarray
    doc_ids: pa.Array

    @property
    def rows(self) -> int:
        return self.input_ids.shape[0]


def assemble(pieces: Pieces, plan: SplitPlan, file: int, pad_id: int, dtype, read: ReadTokens) -> SequenceBlock:
    """Lays the pieces of one output file (``sequence`` = row) into its sequences;
    ``read(source, offset, out)`` fills ``out`` with the tokens of stream ``source``
    from ``offset``.

    Raises:
      RuntimeError: the pieces do not fill every row from its start, without
        gaps or overlaps (a broken plan; never silently written).
    """
    rows, length = plan.file_rows(file), plan.layout.length
    order = np.lexsort((pieces.position, pieces.sequence))
    row, position, sizes = pieces.sequence[order], pieces.position[order], pieces.length[order]
    real = np.bincount(row, weights=sizes, minlength=rows).astype(np.int64)
    per_row = np.bincount(row, minlength=rows)
    expected = np.cumsum(sizes) - sizes - np.repeat(np.cumsum(real) - real, per_row)
    if len(real) != rows or (real == 0).any() or (real > length).any() or (position != expected).any():
        raise RuntimeError(f"{plan.split} file {file}: the pieces do not tile {rows} sequences of {length} tokens")
    input_ids = np.empty((rows, length), dtype=dtype)
    flat = input_ids.reshape(-1)
    for source, offset, target, size in read_runs(pieces, length):
        read(source, offset, flat[target: target + size])
    for r in np.flatnonzero(real < length).tolist():  # the pieces tile each row's start: the rest is padding
        input_ids[r, real[r]:] = pad_id
    return SequenceBlock(
        plan.split, file, plan.files, input_ids, real,
        np.concatenate([[0], np.cumsum(per_row)]).astype(np.int64),
        position.astype(np.int32), pieces.doc_ids.take(pa.array(order, pa.int64())),
    )


def read_runs(pieces: Pieces, length: int) -> Iterator[tuple[int, int, int, int]]:
    """(source, offset, position in the file's flat tokens, size) of the reads that
    fill the pieces: in stream order, pieces that follow each other both in their
    stream and in the file merged into one read."""
    target = pieces.sequence * length + pieces.position
    order = np.lexsort((pieces.offset, pieces.source))
    source, offset, target, size = pieces.source[order], pieces.offset[order], target[order], pieces.length[order]
    follows = (offset[1:] == offset[:-1] + size[:-1]) & (target[1:] == target[:-1] + size[:-1])
    joined = (source[1:] == source[:-1]) & follows
    firsts = np.flatnonzero(np.concatenate([[True], ~joined])) if len(order) else np.zeros(0, np.int64)
    sizes = np.add.reduceat(size, firsts) if len(firsts) else firsts
    yield from zip(source[firsts].tolist(), offset[firsts].tolist(), target[firsts].tolist(), sizes.tolist())
