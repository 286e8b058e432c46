"""Packed sequences as files training loaders read: Parquet, Megatron-LM, llm.c.

Every output file holds one ``SequenceBlock`` (the sequences of one file of a
split, in shuffled order) and is named ``SPLIT/part-SSSSS-of-NNNNN`` plus the
format's suffix, so the order of the sequences is the order of the file names,
then of the rows.

- ``parquet``: one row per sequence: ``input_ids`` (fixed-size list of uint16,
  or uint32 when the vocabulary needs it), ``doc_starts`` (list<int32>: where
  each piece of a document starts; the first is 0, and may continue a document
  of the previous sequence), ``doc_ids`` (list<string>, one per piece) and,
  when sequences can hold padding, ``loss_mask`` (fixed-size list of uint8, 1
  for real tokens). Row groups hold about ``ROW_GROUP_TOKENS`` tokens. The
  footer's key-value metadata holds the tokenizer (``tokenizer_sha256``,
  ``vocab_size``) and the file's ``real_tokens``.
- ``megatron``: Megatron-LM's ``MMIDIDX`` indexed dataset, a ``.bin`` of the
  tokens and an ``.idx`` of entry lengths, byte pointers and document indices,
  laid out as ``megatron/core/datasets/indexed_dataset.py`` reads it. One entry
  per piece of a document, each its own document; the token dtype is the one
  Megatron's preprocessing picks for the vocabulary (uint16 below 65500 IDs,
  else int32).
- ``llmc``: llm.c / modded-nanogpt token files: a header of 256 int32 (magic
  20240520, version 1, token count, zeros), then the tokens as uint16, as
  ``dev/data/data_common.py`` in llm.c writes them.

Megatron and llm.c files are streams of tokens without a loss mask, so they
hold the real tokens of the sequences in order and no padding.

Pure (numpy, Arrow, no Beam): ``write_sequences`` writes these bytes as files.
"""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from transforms.pack.packing_algorithm import SequenceBlock

__all__ = [
    "FORMATS", "SUFFIXES", "REAL_TOKENS_KEY", "ROW_GROUP_TOKENS", "MEGATRON_HEADER", "LLMC_MAGIC",
    "LLMC_VERSION", "LLMC_HEADER_INTS", "check_format", "encode_block", "file_name", "megatron_dtype",
]

FORMATS = ("parquet", "megatron", "llmc")
SUFFIXES = {"parquet": (".parquet",), "megatron": (".bin", ".idx"), "llmc": (".bin",)}
REAL_TOKENS_KEY = b"real_tokens"
# About how many tokens one Parquet row group holds: the writer's buffers are
# per row group, and readers stream files by row group.
ROW_GROUP_TOKENS = 1 << 20

MEGATRON_HEADER = b"MMIDIDX\x00\x00"
MEGATRON_VERSION = 1
# Megatron's DType codes (indexed_dataset.DType).
MEGATRON_DTYPES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64,
                   7: np.float32, 8: np.uint16}

LLMC_MAGIC = 20240520
LLMC_VERSION = 1
LLMC_HEADER_INTS = 256
LLMC_MAX_TOKENS = 2**31 - 1  # the header's int32 token count


def file_name(split: str, file: int, files: int, suffix: str) -> str:
    return f"{split}/part-{file:05d}-of-{files:05d}{suffix}"


def megatron_dtype(vocab_size: int):
    """The token dtype Megatron's preprocessing uses for a vocabulary (``DType.optimal_dtype``)."""
    return np.uint16 if vocab_size < 65500 else np.int32


def check_format(format: str, vocab_size: int) -> None:
    """Raises ValueError when the format cannot hold this vocabulary's IDs."""
    if format not in FORMATS:
        raise ValueError(f"unknown format {format!r} (choose from {', '.join(FORMATS)})")
    if format == "llmc" and vocab_size > 1 << 16:
        raise ValueError(f"llmc files hold uint16 tokens; a vocabulary of {vocab_size} does not fit")


def real_tokens(block: SequenceBlock) -> np.ndarray:
    """The block's real tokens, sequence after sequence."""
    mask = np.arange(block.input_ids.shape[1]) < block.real[:, None]
    return block.input_ids[mask]


def piece_lengths(block: SequenceBlock) -> np.ndarray:
    """The number of tokens of every piece of a document in the block, in order."""
    rows = np.repeat(np.arange(block.rows), np.diff(block.doc_offsets))
    ends = np.append(block.doc_starts[1:], 0).astype(np.int64)
    last = np.zeros(len(rows), bool)
    last[block.doc_offsets[1:] - 1] = True
    ends[last] = block.real[rows[last]]
    return ends - block.doc_starts


def parquet_bytes(block: SequenceBlock, metadata: dict[bytes, bytes], loss_mask: bool) -> bytes:
    rows, length = block.input_ids.shape
    columns = {"input_ids": pa.FixedSizeListArray.from_arrays(pa.array(block.input_ids.reshape(-1)), length)}
    offsets = pa.array(block.doc_offsets.astype(np.int32))
    columns["doc_starts"] = pa.ListArray.from_arrays(offsets, pa.array(block.doc_starts.astype(np.int32)))
    columns["doc_ids"] = pa.ListArray.from_arrays(offsets, block.doc_ids)
    if loss_mask:
        mask = (np.arange(length) < block.real[:, None]).view(np.uint8)  # bool is one byte: no copy
        columns["loss_mask"] = pa.FixedSizeListArray.from_arrays(pa.array(mask.reshape(-1)), length)
    table = pa.table(columns).replace_schema_metadata(
        {**metadata, REAL_TOKENS_KEY: str(int(block.real.sum())).encode()}
    )
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd", use_dictionary=["doc_ids"],
                   row_group_size=max(1, ROW_GROUP_TOKENS // length))
    return sink.getvalue().to_pybytes()


def megatron_bytes(block: SequenceBlock, vocab_size: int) -> tuple[bytes, bytes]:
    """(.bin, .idx) of the block: one entry, and one document, per piece."""
    dtype = np.dtype(megatron_dtype(vocab_size))
    lengths = piece_lengths(block)
    pointers = np.concatenate([[0], np.cumsum(lengths[:-1])]).astype(np.int64) * dtype.itemsize
    code = next(c for c, t in MEGATRON_DTYPES.items() if np.dtype(t) == dtype)
    index = b"".join([
        MEGATRON_HEADER,
        struct.pack("<Q", MEGATRON_VERSION),
        struct.pack("<B", code),
        struct.pack("<Q", len(lengths)),
        struct.pack("<Q", len(lengths) + 1),
        lengths.astype(np.int32).tobytes(),
        pointers.tobytes(),
        np.arange(len(lengths) + 1, dtype=np.int64).tobytes(),
    ])
    return real_tokens(block).astype(dtype).tobytes(), index


def llmc_bytes(block: SequenceBlock) -> bytes:
    tokens = real_tokens(block).astype(np.uint16)
    if len(tokens) > LLMC_MAX_TOKENS:
        raise ValueError(f"an llmc file holds at most {LLMC_MAX_TOKENS} tokens")
    header = np.zeros(LLMC_HEADER_INTS, np.int32)
    header[:3] = (LLMC_MAGIC, LLMC_VERSION, len(tokens))
    return header.tobytes() + tokens.tobytes()


def encode_block(block: SequenceBlock, format: str, vocab_size: int, metadata: dict[bytes, bytes],
                 loss_mask: bool) -> list[tuple[str, bytes]]:
    """The files of one block: [(name relative to the output directory, bytes)]."""
    if format == "parquet":
        payloads = [parquet_bytes(block, metadata, loss_mask)]
    elif format == "megatron":
        payloads = list(megatron_bytes(block, vocab_size))
    else:
        payloads = [llmc_bytes(block)]
    return [(file_name(block.split, block.file, block.files, suffix), data)
            for suffix, data in zip(SUFFIXES[format], payloads)]
