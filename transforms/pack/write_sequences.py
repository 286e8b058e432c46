"""Writing packed sequences as files (``sequence_formats``), and reading back the counts of any output file.

Files are written whole by one worker, to a temporary name beside the final
one, then renamed. The names and contents depend only on the data and the
options, so a retried or duplicated bundle rewrites the same bytes under the
same name: there is nothing to deduplicate, and a reader never sees a partial
file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import uuid

import apache_beam as beam
import numpy as np
import pyarrow.parquet as pq
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from transforms import metrics
from transforms.pack import mds_format
from transforms.pack.megatron_index import index_entries
from transforms.pack.sequence_formats import (
    LLMC_HEADER_INTS, LLMC_HEADERS, REAL_TOKENS_KEY, SEQUENCE_FORMATS, check_format, encode_block,
)

__all__ = ["WriteFiles", "WriteSequences", "whole_file", "written_counts"]


# ---------------------------------------------------------------- writing


@contextlib.contextmanager
def whole_file(path: str):
    """A writable file that appears under ``path`` whole, once the block ends without
    an error: written to a temporary name beside it, then renamed over any file of
    that name (a retried bundle's: the same bytes)."""
    directory, base = path.rsplit("/", 1)
    tmp = FileSystems.join(directory, f".{base}.{uuid.uuid4().hex}.tmp")
    with FileSystems.create(tmp, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        yield f
    if FileSystems.exists(path):
        FileSystems.delete([path])
    FileSystems.rename([tmp], [path])


class _WriteFilesFn(beam.DoFn):
    def __init__(self, output_dir: str):
        self._output_dir = output_dir
        self._counters = metrics.Counters("pack", "files", "bytes_written")

    def process(self, named: tuple[str, bytes]):
        name, data = named
        with whole_file(FileSystems.join(self._output_dir, *name.split("/"))) as f:
            f.write(data)
        self._counters.files.inc()
        self._counters.bytes_written.inc(len(data))
        yield name


@dataclasses.dataclass
class WriteFiles(beam.PTransform):
    """Writes (name, bytes) elements as files under output_dir, each whole
    (see the module docstring); returns the PCollection of the names.

    Args:
      output_dir: the directory (any Beam filesystem); names may hold ``/``.
    """

    output_dir: str

    def __post_init__(self):
        super().__init__()

    def expand(self, named):
        return named | "WriteFiles" >> beam.ParDo(_WriteFilesFn(self.output_dir))


def _mds_entry(named: tuple[str, bytes]) -> tuple[str, tuple[str, dict]]:
    """(split, (shard name, its index.json entry)) of a written MDS shard."""
    name, data = named
    split, basename = name.split("/")
    return split, (basename, mds_format.shard_entry(basename, data))


def _mds_index(keyed) -> tuple[str, bytes]:
    split, entries = keyed
    return f"{split}/{mds_format.INDEX_FILE}", mds_format.index_json([entry for _, entry in sorted(entries)])


@dataclasses.dataclass
class WriteSequences(beam.PTransform):
    """Writes SequenceBlocks as files of one format under output_dir (for ``mds``,
    each split's ``index.json`` too).

    Args:
      output_dir: the directory (any Beam filesystem) receiving ``train/`` and ``validation/``.
      format: "parquet", "llmc" or "mds" (``SEQUENCE_FORMATS``).
      vocab_size: the tokenizer's vocabulary size (picks the token dtypes).
      metadata: Parquet key-value metadata for every file (the tokenizer, the options).
      loss_mask: give Parquet and MDS files a ``loss_mask`` column.

    Returns the PCollection of the written file names, relative to output_dir.
    """

    output_dir: str
    format: str = "parquet"
    vocab_size: int = 1 << 16
    metadata: dict = dataclasses.field(default_factory=dict)
    loss_mask: bool = True

    def __post_init__(self):
        super().__init__()
        check_format(self.format, self.vocab_size)
        if self.format not in SEQUENCE_FORMATS:
            raise ValueError(f"{self.format} is not a format of packed sequences ({', '.join(SEQUENCE_FORMATS)})")

    def expand(self, blocks):
        format, vocab_size, metadata, mask = self.format, self.vocab_size, dict(self.metadata), self.loss_mask
        encoded = blocks | "Encode" >> beam.FlatMap(lambda block: encode_block(block, format, vocab_size, metadata,
                                                                               mask))
        names = encoded | "Write" >> WriteFiles(self.output_dir)
        if format != "mds":
            return names
        indexes = (
            encoded
            | "IndexEntries" >> beam.Map(_mds_entry)
            | "GroupBySplit" >> beam.GroupByKey()
            | "Index" >> beam.Map(_mds_index)
            | "WriteIndex" >> WriteFiles(self.output_dir)
        )
        return (names, indexes) | "AllNames" >> beam.Flatten()


# ---------------------------------------------------------------- reading back what was written


def written_counts(path: str, format: str) -> tuple[int, int | None]:
    """(sequences, or entries for megatron; real tokens) of one written file (for
    megatron: a ``.idx``), from its footer or header; for llm.c files, which do not
    record their sequences, (None, tokens)."""
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        if format == "parquet":
            metadata = pq.ParquetFile(f).metadata
            return metadata.num_rows, int(metadata.metadata[REAL_TOKENS_KEY])
        if format == "megatron":
            try:
                _, entries = index_entries(f.read(34))
            except ValueError:
                raise ValueError(f"{path} is not a Megatron index") from None
            return entries, int(np.frombuffer(f.read(4 * entries), np.int32).sum(dtype=np.int64))
        if format == "mds":
            return _mds_counts(f.read())
        header = np.frombuffer(f.read(4 * LLMC_HEADER_INTS), np.int32)
        if (int(header[0]), int(header[1])) not in {(m, v) for m, v, _ in LLMC_HEADERS.values()}:
            raise ValueError(f"{path} is not an llm.c token file")
        return None, int(header[2])


def _mds_counts(data: bytes) -> tuple[int, int]:
    """(samples, real tokens) of an MDS shard of ours: the tokens its loss masks count
    (all of them without a loss mask)."""
    entry = mds_format.shard_entry("", data)
    rows, names = entry["samples"], entry["column_names"]
    sizes = dict(zip(names, entry["column_sizes"]))
    if "loss_mask" not in sizes:
        length = int(entry["column_encodings"][names.index("input_ids")].rsplit(":", 1)[1])
        return rows, rows * length
    if names[-1] != "loss_mask":
        raise ValueError("an MDS shard whose loss_mask is not its last column")
    # Columns are in name order, so each sample ends with its loss mask.
    ends = np.frombuffer(data, np.uint32, rows, 8).astype(np.int64)
    flat, length = np.frombuffer(data, np.uint8), sizes["loss_mask"]
    return rows, sum(int(np.count_nonzero(flat[end - length: end])) for end in ends.tolist())
