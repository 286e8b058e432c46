"""``WriteParquetTables``: Arrow tables into Parquet files through a Beam file sink.

Beam's own ``WriteToParquetBatched`` always lets Parquet dictionary-encode
every column. Our columns are the worst case for that: unique strings (the
word-count pieces; token shards, written by ``transforms.write_shards``, turn
dictionaries off for the same reason). The writer builds the dictionary, finds it too big and falls
back to plain encoding, having spent most of its time for nothing, and the
files come out bigger than plain ones. So dictionaries are off. Everything
else is Beam's ``FileBasedSink`` (run by ``transforms.sink_write``): each
bundle writes a temporary file that is renamed into place when the job
commits, so retried bundles never leave duplicates.
"""

from __future__ import annotations

import dataclasses

import apache_beam as beam
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from apache_beam.io.filebasedsink import FileBasedSink
from apache_beam.io.filesystem import CompressionTypes

from transforms.coders import TableCoder  # noqa: F401  (registers the coder of pa.Table)
from transforms.sink_write import WriteWithSink

__all__ = ["WriteParquetTables"]

# Rows per row group of a file written sorted (``sort_by``).
SORTED_ROW_GROUP = 1 << 16


class _OpenFile:
    """What the sink keeps per open file: the Parquet writer and the file under it
    (the writer does not close a file it was given), and with ``sort_by`` the tables
    held until the file is closed."""

    def __init__(self, writer: pq.ParquetWriter, file):
        self.writer = writer
        self.file = file
        self.held: list[pa.Table] = []


class _ParquetTableSink(FileBasedSink):
    """A file sink whose records are Arrow tables, each one or more row groups."""

    def __init__(self, file_path_prefix: str, schema: pa.Schema, codec: str, file_name_suffix: str,
                 num_shards: int, shard_name_template: str | None, sort_by: tuple[str, ...] = ()):
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
        self._sort_by = [(column, "ascending") for column in sort_by]

    def open(self, temp_path) -> _OpenFile:
        file = super().open(temp_path)
        writer = pq.ParquetWriter(file, self._schema, compression=self._codec, use_dictionary=False)
        return _OpenFile(writer, file)

    def write_record(self, handle: _OpenFile, table: pa.Table) -> None:
        if self._sort_by:
            handle.held.append(table)
        else:
            handle.writer.write_table(table)

    def _write_sorted(self, handle: _OpenFile) -> None:
        """The held tables' rows, sorted, in row groups of ``SORTED_ROW_GROUP`` rows: the row
        groups then depend on the rows alone, not on the tables' order. One copy of the rows
        at a time (the held tables go once joined) and their order as indices, then one row
        group's rows at a time: the least memory a sort of them all can take."""
        table = pa.concat_tables(handle.held).combine_chunks()
        handle.held = []
        order = pc.sort_indices(table, sort_keys=self._sort_by)
        for start in range(0, len(order), SORTED_ROW_GROUP):
            handle.writer.write_table(table.take(order[start:start + SORTED_ROW_GROUP]))

    def close(self, handle: _OpenFile) -> None:
        if handle.held:
            self._write_sorted(handle)
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
      sort_by: columns to sort each file's rows by (ascending, binary columns byte
        by byte): the file's tables are held and written as one sorted table when it
        closes, so its bytes depend on its rows alone, not on the order the tables
        arrived in. Every file's rows are then in memory at once.

    Returns the PCollection of the final file names.
    """

    file_path_prefix: str
    schema: pa.Schema
    codec: str = "none"
    file_name_suffix: str = ""
    num_shards: int = 0
    shard_name_template: str | None = None
    sort_by: tuple[str, ...] = ()

    def __post_init__(self):
        super().__init__()

    def expand(self, tables):
        return tables | "WriteFiles" >> WriteWithSink(
            _ParquetTableSink(self.file_path_prefix, self.schema, self.codec, self.file_name_suffix,
                              self.num_shards, self.shard_name_template, self.sort_by)
        )
