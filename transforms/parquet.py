"""``WriteParquetTables``: Arrow tables into Parquet files through a Beam file sink.

Beam's own ``WriteToParquetBatched`` always lets Parquet dictionary-encode
every column. Our columns are the worst case for that: token IDs (tens of
thousands of distinct values per row group) and unique strings (document ids,
word-count pieces). The writer builds the dictionary, finds it too big and falls
back to plain encoding, having spent most of its time for nothing, and the
files come out bigger than plain ones. So dictionaries are off. Everything
else is Beam's ``FileBasedSink`` (run by ``transforms.sink_write``): each
bundle writes a temporary file that is renamed into place when the job
commits, so retried bundles never leave duplicates.

A file can also sum what its tables say about themselves: for every key in
``footer_sums``, the integer each table carries under that key in its schema
metadata is added up over the tables the file receives, and the total goes
into the file's footer (Parquet key-value metadata). Token shards record the
input bytes of their rows that way, so totals need no second pass or side file.
"""

from __future__ import annotations

import dataclasses

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filebasedsink import FileBasedSink
from apache_beam.io.filesystem import CompressionTypes

from transforms.coders import TableCoder  # noqa: F401  (registers the coder of pa.Table)
from transforms.sink_write import WriteWithSink

__all__ = ["WriteParquetTables"]


class _OpenFile:
    """What the sink keeps per open file: the Parquet writer, the file under it
    (the writer does not close a file it was given) and the footer totals."""

    def __init__(self, writer: pq.ParquetWriter, file, sum_keys: tuple[bytes, ...]):
        self.writer = writer
        self.file = file
        self.sums = dict.fromkeys(sum_keys, 0)


class _ParquetTableSink(FileBasedSink):
    """A file sink whose records are Arrow tables, each one or more row groups."""

    def __init__(self, file_path_prefix: str, schema: pa.Schema, codec: str, file_name_suffix: str,
                 num_shards: int, shard_name_template: str | None, footer_sums: tuple[str, ...]):
        super().__init__(
            file_path_prefix,
            coder=None,
            file_name_suffix=file_name_suffix,
            num_shards=num_shards,
            shard_name_template=shard_name_template,
            mime_type="application/x-parquet",
            # Parquet compresses each page itself (codec), not the whole file.
            compression_type=CompressionTypes.UNCOMPRESSED,
        )
        self._schema = schema
        self._codec = codec
        self._sum_keys = tuple(key.encode() for key in footer_sums)

    def open(self, temp_path) -> _OpenFile:
        file = super().open(temp_path)
        writer = pq.ParquetWriter(file, self._schema, compression=self._codec, use_dictionary=False)
        return _OpenFile(writer, file, self._sum_keys)

    def write_record(self, handle: _OpenFile, table: pa.Table) -> None:
        metadata = table.schema.metadata or {}
        for key in handle.sums:
            handle.sums[key] += int(metadata.get(key, 0))
        handle.writer.write_table(table)

    def close(self, handle: _OpenFile) -> None:
        if handle.sums:
            handle.writer.add_key_value_metadata({k.decode(): str(v) for k, v in handle.sums.items()})
        handle.writer.close()
        handle.file.close()


@dataclasses.dataclass
class WriteParquetTables(beam.PTransform):
    """Writes a PCollection of Arrow tables (all of ``schema``) as Parquet files.

    Args:
      file_path_prefix: where the files go, e.g. ``out/part``; any Beam filesystem.
      schema: the tables' schema, key-value metadata included.
      codec: the Parquet compression codec ("none", "zstd", "snappy", ...).
      file_name_suffix: appended to every file name, e.g. ".parquet".
      num_shards: how many files; 0 lets the runner decide.
      shard_name_template: Beam's shard naming ("-SSSSS-of-NNNNN"; "" for exactly
        one file named by the prefix and suffix).
      footer_sums: schema-metadata keys of the tables whose integer values are
        summed per file into its footer (see the module docstring).

    Returns the PCollection of the final file names.
    """

    file_path_prefix: str
    schema: pa.Schema
    codec: str = "none"
    file_name_suffix: str = ""
    num_shards: int = 0
    shard_name_template: str | None = None
    footer_sums: tuple[str, ...] = ()

    def __post_init__(self):
        super().__init__()

    def expand(self, tables):
        return tables | "WriteFiles" >> WriteWithSink(
            _ParquetTableSink(self.file_path_prefix, self.schema, self.codec, self.file_name_suffix,
                              self.num_shards, self.shard_name_template, tuple(self.footer_sums))
        )
