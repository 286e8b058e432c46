"""Reading token shards for packing: their footers, and their row groups as bounded batches.

A unit of work is one row group of one shard (``Unit``). The driver checks
the shards from their footers alone (``describe_shards``); a worker reads a
unit as a stream of batches of about ``BATCH_TOKENS`` tokens
(``read_batches``), so a row group of any size fits a worker.
"""

from __future__ import annotations

from typing import Iterator, NamedTuple, Sequence

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from transforms.shards import EOS_KEY, SHA256_KEY, VOCAB_SIZE_KEY

__all__ = ["BATCH_TOKENS", "Unit", "ShardsInfo", "open_shard", "describe_shards", "row_group_tokens", "read_batches"]

# About how many tokens a worker reads from a shard at a time.
BATCH_TOKENS = 1 << 20

class Unit(NamedTuple):
    """One row group of one input shard; units are ordered by (file, row_group)."""

    file: int
    path: str
    row_group: int

    @property
    def key(self) -> tuple[int, int]:
        return self.file, self.row_group


def open_shard(path: str) -> pq.ParquetFile:
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
            parquet = open_shard(path)
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
        tokens += sum(row_group_tokens(parquet, rg) for rg in range(parquet.metadata.num_row_groups))
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


def row_group_tokens(parquet: pq.ParquetFile, row_group: int) -> int:
    """The tokens of a row group: from the footer, else by reading the token lists."""
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
    parquet = open_shard(unit.path)
    rows = parquet.metadata.row_group(unit.row_group).num_rows
    tokens = _footer_tokens(parquet, unit.row_group)
    batch_rows = max(1, rows * batch_tokens // tokens) if tokens else max(1, rows)
    for batch in parquet.iter_batches(batch_size=batch_rows, row_groups=[unit.row_group], columns=["id", "tokens"],
                                      use_threads=False):
        column = batch.column("tokens")
        offsets = column.offsets.to_numpy()
        values = column.values.to_numpy()[offsets[0]: offsets[-1]]
        yield batch.column("id").to_pylist(), np.diff(offsets).astype(np.int64), values
