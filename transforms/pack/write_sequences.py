"""Writing packed sequences as files (``sequence_formats``), and reading back their counts.

Files are written whole by one worker, to a temporary name beside the final
one, then renamed. The names and contents depend only on the data and the
options, so a retried or duplicated bundle rewrites the same bytes under the
same name: there is nothing to deduplicate, and a reader never sees a partial
file.
"""

from __future__ import annotations

import dataclasses
import struct
import uuid

import apache_beam as beam
import numpy as np
import pyarrow.parquet as pq
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from transforms import metrics
from transforms.pack.sequence_formats import (
    LLMC_HEADER_INTS, LLMC_MAGIC, LLMC_VERSION, MEGATRON_HEADER, REAL_TOKENS_KEY, check_format, encode_block,
)

__all__ = ["WriteFiles", "WriteSequences", "written_counts"]


# ---------------------------------------------------------------- writing


class _WriteFilesFn(beam.DoFn):
    def __init__(self, output_dir: str):
        self._output_dir = output_dir
        self._counters = metrics.Counters("pack", "files", "bytes_written")

    def process(self, named: tuple[str, bytes]):
        name, data = named
        path = FileSystems.join(self._output_dir, *name.split("/"))
        directory, base = path.rsplit("/", 1)
        tmp = FileSystems.join(directory, f".{base}.{uuid.uuid4().hex}.tmp")
        with FileSystems.create(tmp, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            f.write(data)
        if FileSystems.exists(path):  # a retried bundle: the same bytes under the same name
            FileSystems.delete([path])
        FileSystems.rename([tmp], [path])
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


@dataclasses.dataclass
class WriteSequences(beam.PTransform):
    """Writes SequenceBlocks as files of one format under output_dir.

    Args:
      output_dir: the directory (any Beam filesystem) receiving ``train/`` and ``validation/``.
      format: "parquet", "megatron" or "llmc".
      vocab_size: the tokenizer's vocabulary size (picks the token dtypes).
      metadata: Parquet key-value metadata for every file (the tokenizer, the options).
      loss_mask: give Parquet files a ``loss_mask`` column.

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

    def expand(self, blocks):
        format, vocab_size, metadata, mask = self.format, self.vocab_size, dict(self.metadata), self.loss_mask
        return (
            blocks
            | "Encode" >> beam.FlatMap(lambda block: encode_block(block, format, vocab_size, metadata, mask))
            | "Write" >> WriteFiles(self.output_dir)
        )


# ---------------------------------------------------------------- reading back what was written


def written_counts(path: str, format: str) -> tuple[int | None, int]:
    """(sequences or None when the format does not record them, real tokens) of one
    written file (for megatron: the ``.idx``), from its footer or header."""
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        if format == "parquet":
            metadata = pq.ParquetFile(f).metadata
            return metadata.num_rows, int(metadata.metadata[REAL_TOKENS_KEY])
        if format == "megatron":
            head = f.read(len(MEGATRON_HEADER) + 8 + 1 + 16)
            if head[: len(MEGATRON_HEADER)] != MEGATRON_HEADER:
                raise ValueError(f"{path} is not a Megatron index")
            entries = struct.unpack("<Q", head[18:26])[0]
            return None, int(np.frombuffer(f.read(4 * entries), np.int32).sum())
        header = np.frombuffer(f.read(4 * LLMC_HEADER_INTS), np.int32)
        if header[0] != LLMC_MAGIC or header[1] != LLMC_VERSION:
            raise ValueError(f"{path} is not an llm.c token file")
        return None, int(header[2])
