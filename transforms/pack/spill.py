"""The token streams packing sets aside: each unit's tokens of a split, as one raw file.

The first pass over the input (``spill_unit``) reads every unit once and
writes the tokens of its documents of each split, back to back in the
sequences' dtype, to ``SPLIT-FFFFF-RRRRR.tokens`` (file index, row group) in a
scratch directory; what it returns (``UnitDocuments``) holds no token. The
writer of an output file then reads just its sequences' tokens from there
(``SpillReader``), by offset, straight into the sequences' array: tokens cross
from worker to worker once, through the filesystem, and every other step moves
only counts, ids and offsets.

A stream is written to a temporary name beside its own and renamed, and its
bytes depend only on the unit, so a retried or duplicated bundle writes the
same file again. The scratch directory must be one every worker reaches (the
staging directory of the output); the driver removes it with the staging.
"""

from __future__ import annotations

import functools
import os
import uuid
from typing import Iterable, Iterator

import apache_beam as beam
import numpy as np
import pyarrow as pa
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from transforms.pack.input_shards import Unit, as_token_type, read_batches
from transforms.pack.packing_algorithm import UnitDocuments
from transforms.pack.sequence_order import SPLITS, Occurrences, ValidationRule, id_hashes, split_masks
from transforms.pack.worker_memory import bound_worker_memory

__all__ = ["SpillReader", "SpillReadingFn", "spill_path", "spill_unit"]


@functools.lru_cache(maxsize=1 << 14)
def spill_path(directory: str, split: str, key: tuple[int, int]) -> str:
    """The stream of a unit's split. Remembered: a writer of an output file asks for it once
    per read, thousands of times, and Beam's path join costs about 20 µs a call."""
    file, row_group = key
    return FileSystems.join(directory, f"{split}-{file:05d}-{row_group:05d}.tokens")


def _is_local(path: str) -> bool:
    return "://" not in path or path.startswith("file://")


class _StreamWriter:
    """Writes one stream to a temporary name; ``commit`` renames it into place."""

    def __init__(self, path: str):
        self.path = path
        directory, base = path.rsplit("/", 1)
        self._tmp = f"{directory}/.{base}.{uuid.uuid4().hex}.tmp"
        if _is_local(path):
            os.makedirs(directory.removeprefix("file://"), exist_ok=True)
            self._file = open(self._tmp.removeprefix("file://"), "wb")
        else:
            self._file = FileSystems.create(self._tmp, compression_type=CompressionTypes.UNCOMPRESSED)

    def write(self, tokens: np.ndarray) -> None:
        self._file.write(memoryview(np.ascontiguousarray(tokens)).cast("B"))

    def commit(self) -> None:
        self._file.close()
        if FileSystems.exists(self.path):  # a retried bundle: the same bytes under the same name
            FileSystems.delete([self.path])
        FileSystems.rename([self._tmp], [self.path])


def spill_unit(unit: Unit, rule: ValidationRule | None, directory: str, dtype,
               earlier: dict[str, int] | None = None, with_keys: bool = False) -> UnitDocuments:
    """Reads one unit, writes its tokens of each split as a stream, and returns
    its documents (token counts and ids) by split. ``earlier``: for each id that
    names several documents of the job, how many of them come before this unit.
    ``with_keys``: the documents' keys too (``UnitDocuments.hashes``, ``occurrences``)."""
    occurrences = Occurrences(earlier)
    writers: dict[str, _StreamWriter] = {}
    lengths = {split: [] for split in SPLITS}
    ids = {split: [] for split in SPLITS}
    keys = {split: ([], []) for split in SPLITS}
    for batch_ids, batch_lengths, tokens in read_batches(unit):
        id_array = pa.array(batch_ids, pa.string())
        batch_occurrences = occurrences(batch_ids)
        hashes = id_hashes(batch_ids, batch_occurrences) if with_keys else None
        masks = split_masks(batch_ids, rule, batch_occurrences, hashes)
        for split, mask in masks.items():
            if mask.any():
                every = mask.all()
                lengths[split].append(batch_lengths if every else batch_lengths[mask])
                ids[split].append(id_array if every else id_array.filter(mask))
                if with_keys:
                    keys[split][0].append(hashes[mask])
                    keys[split][1].append(batch_occurrences[mask])
        tokens = as_token_type(tokens, dtype, unit.path)
        bounds = np.concatenate([[0], np.cumsum(batch_lengths)])
        for split, first, last in _runs(masks["validation"]):
            if split not in writers:
                writers[split] = _StreamWriter(spill_path(directory, split, unit.key))
            writers[split].write(tokens[bounds[first]: bounds[last]])
    for writer in writers.values():
        writer.commit()
    return UnitDocuments(
        unit.key,
        {s: _joined(lengths[s], np.int64) for s in SPLITS},
        {s: pa.concat_arrays(ids[s]) if ids[s] else pa.array([], pa.string()) for s in SPLITS},
        hashes={s: _joined(keys[s][0], np.uint64) for s in SPLITS} if with_keys else None,
        occurrences={s: _joined(keys[s][1], np.int64) for s in SPLITS} if with_keys else None,
    )


def _joined(arrays: list[np.ndarray], dtype) -> np.ndarray:
    return np.concatenate(arrays) if arrays else np.zeros(0, dtype)


def _runs(validation: np.ndarray):
    """(split, first, last document + 1) of each run of consecutive documents of one split."""
    changes = np.flatnonzero(validation[1:] != validation[:-1]) + 1
    starts, ends = np.concatenate([[0], changes]), np.concatenate([changes, [len(validation)]])
    for first, last in zip(starts.tolist(), ends.tolist()):
        if last > first:
            yield SPLITS[int(validation[first])], first, last


class SpillReader:
    """Reads tokens of spilled streams into arrays, keeping each stream's file open."""

    def __init__(self, dtype):
        self._dtype = np.dtype(dtype)
        self._itemsize = self._dtype.itemsize
        self._files: dict[str, object] = {}

    def read_into(self, path: str, offset: int, out: np.ndarray) -> None:
        f = self._files.get(path)
        if f is None:
            f = self._files[path] = (open(path.removeprefix("file://"), "rb") if _is_local(path) else
                                     FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED))
        f.seek(offset * self._itemsize)
        buffer = memoryview(out).cast("B")
        if hasattr(f, "readinto"):
            got = f.readinto(buffer)
        else:
            data = f.read(len(buffer))
            got = len(data)
            buffer[:got] = data
        if got != len(buffer):
            raise RuntimeError(f"{path}: {got} bytes at token {offset}, expected {len(buffer)} (a spilled stream "
                               "is shorter than its unit's documents)")

    def chunks(self, reads: Iterable[tuple[str, int, int]], chunk_tokens: int) -> Iterator[np.ndarray]:
        """The tokens of (stream path, offset, size) reads, back to back, as arrays of
        ``chunk_tokens`` tokens (the last may be shorter; a long read is split), so a
        writer holds one chunk whatever it writes. Each array is valid until the next
        is asked for: one buffer is reused."""
        buffer = np.empty(chunk_tokens, self._dtype)
        filled = 0
        for path, offset, size in reads:
            while size:
                take = min(size, chunk_tokens - filled)
                self.read_into(path, offset, buffer[filled: filled + take])
                filled, offset, size = filled + take, offset + take, size - take
                if filled == chunk_tokens:
                    yield buffer
                    filled = 0
        if filled:
            yield buffer[:filled]

    def close(self) -> None:
        for f in self._files.values():
            f.close()
        self._files.clear()


class SpillReadingFn(beam.DoFn):
    """A DoFn whose bundles read spilled streams: ``self._reader``, a ``SpillReader`` of
    the spill's dtype for each bundle (its files closed at the bundle's end), in a
    process whose allocators are set for packing (``worker_memory``)."""

    def __init__(self, spill_dtype):
        super().__init__()
        self._spill_dtype = np.dtype(spill_dtype)

    def setup(self):
        bound_worker_memory()

    def start_bundle(self):
        self._reader = SpillReader(self._spill_dtype)

    def finish_bundle(self):
        self._reader.close()
