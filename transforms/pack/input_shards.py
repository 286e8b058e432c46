"""Reading token shards for packing: their footers, and their row groups as bounded batches.

A unit of work is one row group of one shard (``Unit``). The driver checks
the shards from their footers alone (``describe_shards``); a worker reads a
unit as a stream of batches of about ``BATCH_TOKENS`` tokens
(``read_batches``), so a row group of any size fits a worker.

Shards of other tools are taken as they are when their ``id`` column is
text and their ``tokens`` column a list of integers of any width. Their
token IDs are checked before the job, from the footers' statistics (or, in a
file written without them, from the column itself): no ID is negative, each
is below the footer's ``vocab_size`` when it declares one, and each fits
uint32, so packing never wraps an ID into a narrower type. Without a declared
``vocab_size`` the vocabulary is taken as the largest ID + 1. A null inside a
token list is refused too; Parquet counts nulls together with empty lists, so
only row groups that hold either are read for it. A worker checks again what
it reads (``BadTokenShard``), so a footer whose statistics are wrong never
changes an ID; the driver reports that as one line too (``bad_token_shard``).
"""

from __future__ import annotations

import re
from typing import Iterator, NamedTuple, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from transforms.shards import EOS_KEY, SHA256_KEY, VOCAB_SIZE_KEY

__all__ = [
    "BATCH_TOKENS", "MAX_TOKEN_ID", "Unit", "ShardsInfo", "BadTokenShard", "bad_token_shard", "open_shard",
    "describe_shards", "row_group_tokens", "read_batches", "as_token_type",
]

# About how many tokens a worker reads from a shard at a time.
BATCH_TOKENS = 1 << 20
# The largest token ID packing writes (the widest token type of its outputs is uint32).
MAX_TOKEN_ID = (1 << 32) - 1

class Unit(NamedTuple):
    """One row group of one input shard; units are ordered by (file, row_group)."""

    file: int
    path: str
    row_group: int

    @property
    def key(self) -> tuple[int, int]:
        return self.file, self.row_group


def open_shard(path: str) -> pq.ParquetFile:
    # Local files go to Arrow's own reader, memory-mapped: read through a file handle instead,
    # each row group left a few MiB more in the worker's heap for the first few dozen row
    # groups, so a worker's peak grew with the input. Other filesystems go through Beam's.
    if "://" not in path or path.startswith("file://"):
        return pq.ParquetFile(path.removeprefix("file://"), memory_map=True)
    return pq.ParquetFile(FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED))


class ShardsInfo(NamedTuple):
    """What the input shards' footers say about them together.

    ``vocab_size`` is the one the footers declare, else the largest token ID
    + 1 (``vocab_declared`` tells which; 1 for shards without a token).
    """

    tokenizer_sha256: str
    vocab_size: int
    eos_token_id: int | None
    documents: int
    tokens: int
    vocab_declared: bool = True


class BadTokenShard(ValueError):
    """A token shard whose data its footer did not show wrong, found by a worker (a null
    inside a token list, an ID outside the token type).

    Its message is marked, so the driver finds it in the text of a failed job
    whatever the runner wraps it in (``bad_token_shard``).
    """

    def __init__(self, problem: str):
        # A runner may raise it again with more words after it: marked once.
        super().__init__(problem if _BAD_SHARD in problem else f"{_BAD_SHARD}{problem}{_BAD_SHARD_END}")


_BAD_SHARD, _BAD_SHARD_END = "bad token shard: ", " (end)"


def bad_token_shard(error: BaseException | str) -> str | None:
    """The problem a ``BadTokenShard`` raised in the job names, from the error the job
    ended with (or a message that quotes it); None for others."""
    found = re.search(re.escape(_BAD_SHARD) + r"(.*?)" + re.escape(_BAD_SHARD_END), str(error))
    return found.group(1) if found else None


def describe_shards(paths: Sequence[str]) -> ShardsInfo:
    """Reads the footers of token shards; they must come from one tokenizer.

    Raises:
      ValueError: no shards, a file that is not a token shard, or shards of
        different tokenizers.
    """
    if not paths:
        raise ValueError("no token shards given")
    seen, documents, tokens, largest = None, 0, 0, -1
    for path in paths:
        try:
            parquet = open_shard(path)
        except Exception as e:  # Arrow and the filesystems raise several types
            raise ValueError(f"{path} is not a readable Parquet file ({e})") from None
        metadata = parquet.schema_arrow.metadata or {}
        names = parquet.schema_arrow.names
        if "tokens" not in names or "id" not in names or SHA256_KEY not in metadata:
            raise ValueError(f"{path} is not a token shard (needs columns id, tokens and {SHA256_KEY.decode()})")
        _check_column_types(path, parquet.schema_arrow)
        id_column = _leaf_column(parquet, "id")
        for rg in range(parquet.metadata.num_row_groups):
            stats = parquet.metadata.row_group(rg).column(id_column).statistics
            if stats is not None and stats.has_null_count and stats.null_count:
                raise ValueError(f"{path} has rows without an id; every document needs one (the split hashes it)")
        eos = metadata.get(EOS_KEY)
        info = (metadata[SHA256_KEY].decode(), _declared_vocab_size(path, metadata), int(eos) if eos else None)
        if seen is not None and info[:2] != seen[:2]:
            raise ValueError(
                f"{path} was encoded with tokenizer {info[0]} (vocab {info[1]}), {paths[0]} with "
                f"{seen[0]} (vocab {seen[1]}): shards of different tokenizers cannot be packed together"
            )
        seen = info if seen is None or info[2] == seen[2] else (*seen[:2], None)
        documents += parquet.metadata.num_rows
        tokens += sum(row_group_tokens(parquet, rg) for rg in range(parquet.metadata.num_row_groups))
        largest = max(largest, _check_token_ids(path, parquet, info[1]))
    sha256, declared, eos = seen
    return ShardsInfo(sha256, declared or largest + 1 or 1, eos, documents, tokens, vocab_declared=bool(declared))


def _check_column_types(path: str, schema: pa.Schema) -> None:
    """Ids are text; tokens are lists of integers (of any width: other tools write int64)."""
    id_type, tokens_type = schema.field("id").type, schema.field("tokens").type
    if not (pa.types.is_string(id_type) or pa.types.is_large_string(id_type)):
        raise ValueError(f"{path}: column id has type {id_type}; a token shard's ids are strings")
    if not (pa.types.is_list(tokens_type) or pa.types.is_large_list(tokens_type)) or not pa.types.is_integer(
            tokens_type.value_type):
        raise ValueError(f"{path}: column tokens has type {tokens_type}; a token shard's tokens are lists of integers")


def _declared_vocab_size(path: str, metadata: dict) -> int:
    """The footer's vocab_size; 0 when it declares none."""
    if VOCAB_SIZE_KEY not in metadata:
        return 0
    text = metadata[VOCAB_SIZE_KEY].decode(errors="replace")
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"{path}: the footer's vocab_size {text!r} is not a positive whole number")
    return int(text)


def _check_token_ids(path: str, parquet: pq.ParquetFile, vocab_size: int) -> int:
    """The largest token ID of a shard (-1 without tokens), checked: none null or
    negative, each below ``vocab_size`` when declared (non-zero), each at most ``MAX_TOKEN_ID``."""
    low, high, first_row = None, -1, 0
    for rg in range(parquet.metadata.num_row_groups):
        bounds = _token_bounds(path, parquet, rg, first_row)
        first_row += parquet.metadata.row_group(rg).num_rows
        if bounds is not None:
            low, high = bounds[0] if low is None else min(low, bounds[0]), max(high, bounds[1])
    if low is not None and low < 0:
        raise ValueError(f"{path} holds the negative token ID {low}; token IDs are 0 or more")
    if vocab_size and high >= vocab_size:
        raise ValueError(f"{path} holds token ID {high}, not below the vocab_size {vocab_size} its footer declares")
    if high > MAX_TOKEN_ID:
        raise ValueError(f"{path} holds token ID {high}, which does not fit uint32, the widest token type of pack")
    return high


def _token_bounds(path: str, parquet: pq.ParquetFile, row_group: int, first_row: int) -> tuple[int, int] | None:
    """(smallest, largest) token ID of a row group, from the footer's statistics; None without tokens.

    Parquet counts null tokens together with empty token lists, so a row group
    whose statistics count either (when its token type allows nulls), or that
    has no statistics, is read.
    """
    stats = parquet.metadata.row_group(row_group).column(_leaf_column(parquet, "tokens")).statistics
    may_hold_nulls = parquet.schema_arrow.field("tokens").type.value_field.nullable and (
        stats is None or not stats.has_null_count or stats.null_count)
    if stats is not None and stats.has_min_max and not may_hold_nulls:
        return int(stats.min), int(stats.max)
    lists = parquet.read_row_group(row_group, columns=["tokens"]).column(0).combine_chunks()
    values = pc.list_flatten(lists)
    if values.null_count:
        first = pc.index(values.is_null(), True).as_py()
        row = first_row + pc.list_parent_indices(lists)[first].as_py()
        raise ValueError(f"{path} holds a null inside the token list of row {row}; a token shard holds token IDs only")
    bounds = pc.min_max(values)
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    return None if low is None else (int(low), int(high))


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
        values = column.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
        if values.null_count:
            _null_token(unit, batch, values, offsets)
        yield batch.column("id").to_pylist(), np.diff(offsets).astype(np.int64), values.to_numpy()


def _null_token(unit: Unit, batch, values: pa.Array, offsets: np.ndarray):
    """Raises BadTokenShard naming the first document of the batch with a null token."""
    position = int(np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))[0])
    row = int(np.searchsorted(offsets - offsets[0], position, side="right")) - 1
    raise BadTokenShard(
        f"{unit.path}: document {batch.column('id')[row].as_py()!r} (row group {unit.row_group}) holds a null "
        "inside its token list; a token shard holds token IDs only"
    )


def as_token_type(tokens: np.ndarray, dtype, path: str) -> np.ndarray:
    """The tokens in ``dtype``; raises BadTokenShard where one would not fit (wrap) in it.

    ``describe_shards`` checks every ID from the footers before the job; this
    keeps a footer whose statistics are wrong from changing an ID silently.
    """
    if len(tokens) and not np.can_cast(tokens.dtype, dtype):
        info = np.iinfo(dtype)
        if tokens.min() < info.min or tokens.max() > info.max:
            raise BadTokenShard(f"{path} holds token IDs outside {info.min}..{info.max} that its footer does not show")
    return tokens.astype(dtype, copy=False)
