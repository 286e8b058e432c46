"""Token shards: Parquet files of (id, tokens) rows that describe their tokenizer.

Files are ``part-SSSSS-of-NNNNN.parquet`` with columns ``id`` (string) and
``tokens`` (list<uint16> when every ID fits, i.e. vocab_size <= 65536, else
list<uint32>), zstd-compressed. The Parquet key-value metadata carries
``tokenizer_sha256`` (of the tokenizer.json bytes) and ``vocab_size``, so a
reader can tell which tokenizer a shard needs without any side file,
``eos_token_id`` / ``bos_token_id`` when every row ends / starts with one, and
``input_bytes``, the size of the input documents its rows came from.

A row is a ``TokenRow`` (id, tokens, input bytes, and where it was read):
what ``EncodeDocuments`` gives and ``transforms.write_shards.WriteTokenShards``
writes, in input order and the same on every run.
"""

from __future__ import annotations

from array import array
from typing import NamedTuple, Sequence

import apache_beam as beam
import pyarrow as pa

from transforms.coders import SizedPickleCoder

__all__ = [
    "TokenRow", "TokenRowCoder", "SHARD_PREFIX", "SHARD_TEMPLATE", "SHARD_SUFFIX", "SHARD_GLOB",
    "SHA256_KEY", "VOCAB_SIZE_KEY", "EOS_KEY", "BOS_KEY", "INPUT_BYTES_KEY", "ROW_GROUP_TOKENS", "token_type",
    "token_typecode", "shard_schema", "shard_schema_problem", "shard_tokenizer_sha256", "shard_eos_id",
    "shard_bos_id", "rows_to_table",
]

SHARD_PREFIX = "part"
SHARD_TEMPLATE = "-SSSSS-of-NNNNN"
SHARD_SUFFIX = ".parquet"
SHARD_GLOB = "part-*-of-*.parquet"
SHA256_KEY = b"tokenizer_sha256"
VOCAB_SIZE_KEY = b"vocab_size"
# Present when every row ends with an appended EOS token: its ID, so that
# decoders can give back exactly the original document bytes.
EOS_KEY = b"eos_token_id"
# Present when every row starts with a prepended BOS token: its ID, likewise.
BOS_KEY = b"bos_token_id"
# In each shard's footer (Parquet key-value metadata, not the Arrow schema):
# the total size in bytes of the input documents whose rows the shard holds.
INPUT_BYTES_KEY = b"input_bytes"

# Rows are gathered into Arrow tables of about this many tokens before writing:
# each table becomes one Parquet row group, big enough for fast scans, small
# enough to keep a worker's memory flat.
ROW_GROUP_TOKENS = 1 << 20


def token_type(vocab_size: int) -> pa.DataType:
    """The narrowest unsigned type that holds every ID below vocab_size."""
    return pa.uint16() if vocab_size <= 1 << 16 else pa.uint32()


def token_typecode(vocab_size: int) -> str:
    """The ``array`` typecode of ``token_type``: rows in it go into a shard without a copy."""
    return "H" if vocab_size <= 1 << 16 else "I"


class TokenRow(NamedTuple):
    """One encoded document: a row of a token shard.

    Attributes:
      id: the record's id field, or ``<file>:<record number>``.
      tokens: the token IDs (BOS and EOS included when added), an ``array`` of
        the shard column's width (``token_typecode``).
      input_bytes: the size of the input document in bytes.
      file: the input file it was read from ("" when unknown).
      piece: the first record of the read piece it was read in
        (``transforms.read.planning``): rows of one piece stay together, in order.
      record: its record number in the file.
    """

    id: str
    tokens: Sequence[int]
    input_bytes: int = 0
    file: str = ""
    piece: int = 0
    record: int = 0


class TokenRowCoder(SizedPickleCoder):
    """Token rows; size: two bytes a token (as in the shards) and the id."""

    value_type = TokenRow

    def estimate_size(self, row: TokenRow) -> int:
        return 2 * len(row.tokens) + len(row.id)


beam.coders.registry.register_coder(TokenRow, TokenRowCoder)


def shard_schema(tokenizer_sha256: str, vocab_size: int, eos_token_id: int | None = None,
                 bos_token_id: int | None = None) -> pa.Schema:
    """The schema of a token shard, with the tokenizer (and the EOS / BOS every row
    carries) in its key-value metadata."""
    metadata = {SHA256_KEY: tokenizer_sha256.encode("ascii"), VOCAB_SIZE_KEY: str(vocab_size).encode("ascii")}
    if eos_token_id is not None:
        metadata[EOS_KEY] = str(eos_token_id).encode("ascii")
    if bos_token_id is not None:
        metadata[BOS_KEY] = str(bos_token_id).encode("ascii")
    return pa.schema([("id", pa.string()), ("tokens", pa.list_(token_type(vocab_size)))], metadata=metadata)


def shard_schema_problem(schema: pa.Schema) -> str | None:
    """Why a Parquet schema is not a token shard's (``id`` string, ``tokens`` list of
    unsigned integers), or None."""
    names = schema.names
    if "id" not in names or "tokens" not in names:
        return f"it needs columns id and tokens (it has {', '.join(names)})"
    tokens = schema.field("tokens").type
    if not (pa.types.is_list(tokens) or pa.types.is_large_list(tokens)) or not pa.types.is_unsigned_integer(
        tokens.value_type
    ):
        return f"column tokens has type {tokens}, expected a list of uint16 or uint32"
    return None


def shard_tokenizer_sha256(schema: pa.Schema) -> str:
    """The SHA-256 of the tokenizer a shard was written with ("" when it says none)."""
    return (schema.metadata or {}).get(SHA256_KEY, b"").decode()


def shard_eos_id(schema: pa.Schema) -> int | None:
    """The EOS ID appended to every row of a shard, or None."""
    metadata = schema.metadata or {}
    return int(metadata[EOS_KEY]) if EOS_KEY in metadata else None


def shard_bos_id(schema: pa.Schema) -> int | None:
    """The BOS ID prepended to every row of a shard, or None."""
    metadata = schema.metadata or {}
    return int(metadata[BOS_KEY]) if BOS_KEY in metadata else None


def rows_to_table(rows: Sequence[TokenRow], schema: pa.Schema) -> pa.Table:
    """Builds an Arrow table from (id, tokens, input_bytes) rows; IDs out of the
    column type's range raise. The rows' input bytes, summed, go into the table's
    schema metadata under ``input_bytes``, which the writer sums into each shard's
    footer.

    The tokens column is assembled from flat C arrays (values and offsets) that
    become the Arrow buffers as they are, instead of ``pa.array`` on a list of
    lists, which inspects every int as a Python object. Tokens that are an
    ``array`` of the column's width (``token_typecode``, as ``EncodeDocuments``
    gives them) are copied in one go, and a single row's are not copied at all,
    so a huge document's IDs exist once; other values are checked and narrowed
    by Arrow.
    """
    value_type = schema.field("tokens").type.value_type
    typecode = "H" if value_type == pa.uint16() else "I"  # token_typecode of the column
    offsets = array("i", [0])
    input_bytes = 0
    for row in rows:
        input_bytes += row[2]
        offsets.append(offsets[-1] + len(row[1]))
    if len(rows) == 1 and _is_array(rows[0][1], typecode):
        values = rows[0][1]
    else:
        try:
            values = _flat(rows, typecode)
        except (OverflowError, TypeError) as e:
            raise ValueError(f"token IDs do not fit {value_type}: {e}") from None
    flat = pa.Array.from_buffers(
        pa.uint16() if values.typecode == "H" else pa.uint32(), len(values), [None, pa.py_buffer(values)]
    )
    if flat.type != value_type:
        try:
            flat = flat.cast(value_type)
        except pa.ArrowInvalid as e:
            raise ValueError(f"token IDs do not fit {value_type}: {e}") from None
    token_lists = pa.ListArray.from_arrays(
        pa.Array.from_buffers(pa.int32(), len(offsets), [None, pa.py_buffer(offsets)]), flat
    )
    ids = pa.array([row[0] for row in rows], type=pa.string())
    metadata = {**schema.metadata, INPUT_BYTES_KEY: str(input_bytes).encode("ascii")}
    return pa.Table.from_arrays([ids, token_lists], schema=schema.with_metadata(metadata))


def _is_array(tokens, typecode: str) -> bool:
    return isinstance(tokens, array) and tokens.typecode == typecode


def _flat(rows: Sequence[TokenRow], typecode: str) -> array:
    """The rows' tokens end to end: in ``typecode`` when every row's are, else in
    ``array("I")`` (4 bytes on every platform Arrow runs on), for Arrow to narrow."""
    if not all(_is_array(row[1], typecode) for row in rows):
        typecode = "I"
    values = array(typecode)
    for row in rows:
        tokens = row[1]
        values += tokens if _is_array(tokens, typecode) else array(typecode, tokens)
    return values
