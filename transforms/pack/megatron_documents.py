"""``WriteMegatronDocuments``: whole documents, shuffled, as one Megatron-LM dataset per split.

Megatron packs documents into sequences itself, at training time; what it
reads is one entry per document (``preprocess_data.py``). So every document of
a split becomes one entry of ``SPLIT.bin``/``SPLIT.idx`` (``megatron_index``),
its tokens as encoded (EOS included), none cut, none dropped, in a seeded
shuffled order.

    PackSequences(sequences=False) ──documents──> Place ──GroupByKey──> WritePart ──GroupByKey──> Join
                                   (tokens spilled)   (split, part)   parts/*.bin    split        SPLIT.bin/.idx

- Document k of a split (its place in the split's stream: shards by name,
  row groups, rows) goes to position ``Permutation(k)`` of the shuffle, so
  every worker places its own documents, and the order depends only on the
  documents, their order and the seed: not on the workers or the shards.
- Positions are cut into parts of ``per_part`` documents (about
  ``tokens_per_part`` tokens); the writer of a part reads its documents'
  tokens from the spilled streams and writes the part's tokens and lengths to
  ``parts/`` in the output directory, ``CHUNK_TOKENS`` tokens at a time
  (``SpillReader.chunks``): a worker holds one part's lengths and one chunk of
  its tokens, so its memory is the same for any size of part or input.
- One step per split joins the parts, in order, into ``SPLIT.bin`` (copied in
  pieces of the chunk's size) and writes ``SPLIT.idx`` with running pointers, a
  chunk at a time.

A split without documents has no files. Every file is written whole under a
temporary name and renamed (``write_sequences.whole_file``), and its bytes
depend only on the data and the options, so a retried bundle writes the same
bytes again.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable

import apache_beam as beam
import numpy as np
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from transforms import metrics
from transforms.pack.megatron_index import megatron_dtype, write_index
from transforms.pack.packing_algorithm import UnitCounts, UnitDocuments
from transforms.pack.sequence_order import SPLITS, Permutation
from transforms.pack.spill import SpillReadingFn, spill_path
from transforms.pack.write_sequences import whole_file

__all__ = ["CHUNK_TOKENS", "PARTS_DIR", "DocumentPlan", "WriteMegatronDocuments", "plan_documents", "split_files"]

PARTS_DIR = "parts"  # in the output directory: the parts before they are joined; the caller removes it
# A part's tokens are read from the spill and written this many at a time (a whole part of
# 8 M tokens at once made a worker's peak 16 MiB higher), and the join copies parts in pieces
# of 2 MiB, so a worker's memory does not grow with a part's or the input's size.
CHUNK_TOKENS = 1 << 20
_COPY_BYTES = 1 << 21


def split_files(split: str) -> tuple[str, str]:
    """The names of a split's dataset, relative to the output directory."""
    return f"{split}.bin", f"{split}.idx"


@dataclasses.dataclass(frozen=True)
class DocumentPlan:
    """One split's dataset: its documents (one entry each), their shuffle and its parts.

    It answers what ``SplitPlan`` answers for sequences (``pipeline.pack``'s
    plan file): an entry per document, nothing dropped, no padding, one file
    pair.
    """

    split: str
    documents: int
    tokens: int
    per_part: int
    seed: int
    starts: dict  # unit key -> index of its first document of this split

    dropped_tokens = 0  # class attributes, not fields: the same for every plan
    padding_tokens = 0

    @property
    def sequences(self) -> int:
        """Entries: one per document."""
        return self.documents

    @property
    def files(self) -> int:
        """Datasets (a .bin/.idx pair): one, or none for a split without documents."""
        return int(self.documents > 0)

    @property
    def parts(self) -> int:
        return -(-self.documents // self.per_part)

    def place(self, documents: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(part, position in the shuffle) of each document index."""
        positions = Permutation(self.documents, self.seed, f"documents/{self.split}")(documents)
        return positions // self.per_part, positions

    def part_positions(self, part: int) -> np.ndarray:
        return np.arange(part * self.per_part, min((part + 1) * self.per_part, self.documents))


def plan_documents(counts: Iterable[tuple[tuple, UnitCounts]], seed: int,
                   tokens_per_part: int) -> dict[str, DocumentPlan]:
    """The plan of every split, from each unit's counts (units ordered by their keys)."""
    counts = sorted(counts, key=lambda kv: kv[0])
    plans = {}
    for split in SPLITS:
        starts, documents, tokens = {}, 0, 0
        for key, unit in counts:
            starts[key] = documents
            documents += unit.documents[split]
            tokens += unit.tokens[split]
        mean = tokens / documents if documents else 1.0
        per_part = max(1, min(documents, int(tokens_per_part / max(mean, 1.0))))
        plans[split] = DocumentPlan(split, documents, tokens, per_part, seed, starts)
    return plans


# Documents of one unit in one part: (positions, lengths, unit key, offsets in the unit's stream).
_Placed = tuple


def _place(documents: UnitDocuments, plans: dict[str, DocumentPlan]) -> Iterable[tuple[tuple[str, int], _Placed]]:
    for split in SPLITS:
        lengths = np.asarray(documents.lengths[split], np.int64)
        if not len(lengths):
            continue
        plan = plans[split]
        parts, positions = plan.place(plan.starts[documents.key] + np.arange(len(lengths)))
        within = np.asarray(documents.spill_offsets(split), np.int64)  # a mixture's repeats share a stream
        order = np.argsort(parts, kind="stable")
        for group in np.split(order, np.flatnonzero(np.diff(parts[order])) + 1):
            yield (split, int(parts[group[0]])), (positions[group], lengths[group], documents.key, within[group])


def _part_names(split: str, part: int) -> tuple[str, str]:
    base = f"{PARTS_DIR}/{split}-{part:05d}"
    return f"{base}.bin", f"{base}.lengths"


class _WritePartFn(SpillReadingFn):
    """The tokens and lengths of one part's documents, in shuffled order."""

    def __init__(self, output_dir: str, scratch_dir: str, spill_dtype, dtype):
        super().__init__(spill_dtype)
        self._output_dir, self._scratch_dir, self._dtype = output_dir, scratch_dir, np.dtype(dtype)
        self._counters = metrics.Counters("pack", "documents", "real_tokens")

    def _narrowed(self, split: str, tokens: np.ndarray) -> np.ndarray:
        """The tokens in Megatron's dtype; a token that does not fit it is an error, never wrapped."""
        if self._dtype.itemsize < 8 and len(tokens) and int(tokens.max()) > np.iinfo(self._dtype).max:
            raise RuntimeError(f"{split}: a token ID above {np.iinfo(self._dtype).max} does not fit Megatron's "
                               f"{self._dtype.name} tokens")
        return tokens.astype(self._dtype, copy=False)

    def process(self, keyed, plans):
        (split, part), placed = keyed
        placed = list(placed)
        positions = np.concatenate([p[0] for p in placed])
        order = np.argsort(positions, kind="stable")
        if not np.array_equal(positions[order], plans[split].part_positions(part)):
            raise RuntimeError(f"{split} part {part}: its documents are not the positions of its plan")
        lengths = np.concatenate([p[1] for p in placed])[order]
        keys = [key for p in placed for key in [p[2]] * len(p[0])]
        within = np.concatenate([p[3] for p in placed])[order]
        # A mixture's unit key is (repeat, file, row group): streams are named by the last two.
        reads = ((spill_path(self._scratch_dir, split, keys[order[i]][-2:]), int(within[i]), size)
                 for i, size in enumerate(lengths.tolist()) if size)
        bin_name, lengths_name = _part_names(split, part)
        with whole_file(FileSystems.join(self._output_dir, *bin_name.split("/"))) as f:
            for tokens in self._reader.chunks(reads, CHUNK_TOKENS):
                f.write(memoryview(self._narrowed(split, tokens)).cast("B"))
        with whole_file(FileSystems.join(self._output_dir, *lengths_name.split("/"))) as f:
            f.write(lengths.astype(np.int32).tobytes())
        self._counters.documents.inc(len(lengths))
        tokens = int(lengths.sum())
        self._counters.real_tokens.inc(tokens)
        yield split, (part, len(lengths), tokens)


def _read(path: str, chunk: int = _COPY_BYTES) -> Iterable[bytes]:
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        while data := f.read(chunk):
            yield data


class _JoinPartsFn(beam.DoFn):
    """A split's parts, in order, into ``SPLIT.bin``, and its ``SPLIT.idx``."""

    def __init__(self, output_dir: str, dtype):
        self._output_dir, self._dtype = output_dir, np.dtype(dtype)

    def process(self, keyed, plans):
        split, parts = keyed
        parts = sorted(parts)
        plan = plans[split]
        if [p[0] for p in parts] != list(range(plan.parts)) or sum(p[1] for p in parts) != plan.documents:
            raise RuntimeError(f"{split}: {len(parts)} parts written, the plan has {plan.parts}")
        names = [_part_names(split, part) for part, _, _ in parts]
        paths = [[FileSystems.join(self._output_dir, *name.split("/")) for name in pair] for pair in names]
        bin_name, idx_name = split_files(split)
        with whole_file(FileSystems.join(self._output_dir, bin_name)) as out:
            for bin_path, _ in paths:
                for data in _read(bin_path):
                    out.write(data)

        def length_chunks():
            for _, lengths_path in paths:
                yield np.frombuffer(b"".join(_read(lengths_path)), np.int32)

        with whole_file(FileSystems.join(self._output_dir, idx_name)) as out:
            write_index(out, self._dtype, plan.documents, length_chunks)
        yield bin_name
        yield idx_name


@dataclasses.dataclass
class WriteMegatronDocuments(beam.PTransform):
    """Writes the documents of ``PackSequences(sequences=False)`` as one shuffled
    Megatron-LM dataset per split, ``SPLIT.bin`` and ``SPLIT.idx`` in output_dir.

    Apply to ``PackedSequences.documents``; returns (the written names, one
    element {split: DocumentPlan}).

    Args:
      output_dir: the directory (any Beam filesystem) of the datasets; parts go to
        ``output_dir/parts/`` (``PARTS_DIR``), which the caller removes after the job.
      scratch_dir: where PackSequences spilled the documents' tokens.
      vocab_size: the tokenizer's vocabulary size (picks the tokens' dtypes).
      seed: the seed of the shuffle of documents.
      tokens_per_part: about how many tokens one worker writes at a time.
    """

    output_dir: str
    scratch_dir: str
    vocab_size: int = 1 << 16
    seed: int = 0
    tokens_per_part: int = 1 << 23

    def __post_init__(self):
        super().__init__()
        if self.tokens_per_part < 1:
            raise ValueError("tokens_per_part must be positive")

    def expand(self, documents):
        single = beam.pvalue.AsSingleton
        spill_dtype = np.uint16 if self.vocab_size <= 1 << 16 else np.uint32
        dtype = megatron_dtype(self.vocab_size)
        seed, per_part = self.seed, self.tokens_per_part
        plans = (
            documents
            | "DocumentCounts" >> beam.Map(lambda d: (d.key, d.counts()))
            | "AllDocumentCounts" >> beam.combiners.ToList()
            | "PlanDocuments" >> beam.Map(plan_documents, seed, per_part)
        )
        names = (
            documents
            | "PlaceDocuments" >> beam.FlatMap(_place, single(plans))
            | "GroupByPart" >> beam.GroupByKey()
            | "WritePart" >> beam.ParDo(_WritePartFn(self.output_dir, self.scratch_dir, spill_dtype, dtype),
                                        single(plans))
            | "GroupBySplit" >> beam.GroupByKey()
            | "JoinParts" >> beam.ParDo(_JoinPartsFn(self.output_dir, dtype), single(plans))
        )
        return names, plans
