"""Packed sequences as files training loaders read: Parquet, llm.c, MDS; and which formats exist.

Every output file of a sequence format holds one ``SequenceBlock`` (the
sequences of one file of a split, in shuffled order) and is named
``SPLIT/part-SSSSS-of-NNNNN`` plus the format's suffix, so the order of the
sequences is the order of the file names, then of the rows.

- ``parquet``: one row per sequence: ``input_ids`` (fixed-size list of uint16,
  or uint32 when the vocabulary needs it), ``doc_starts`` (list<int32>: where
  each piece of a document starts; the first is 0, and may continue a document
  of the previous sequence), ``doc_ids`` (list<string>, one per piece) and,
  when sequences can hold padding, ``loss_mask`` (fixed-size list of uint8, 1
  for real tokens). Row groups hold about ``ROW_GROUP_TOKENS`` tokens. The
  footer's key-value metadata holds the tokenizer (``tokenizer_sha256``,
  ``vocab_size``) and the file's ``real_tokens``.
- ``llmc``: llm.c / modded-nanogpt token files: a header of 256 int32 (magic,
  version, token count, zeros), then the tokens, as ``dev/data/data_common.py``
  in llm.c writes them: magic 20240520, version 1 and uint16 tokens for
  vocabularies of at most 65,536 IDs (GPT-2's header), else magic 20240801,
  version 7 and uint32 tokens (Llama 3's). A file holds fewer than 2^31 tokens
  (the header's count is an int32): ``FILE_TOKEN_LIMITS``.
- ``mds``: MosaicML Streaming shards and each split's ``index.json``
  (``mds_format``).

llm.c files are streams of tokens without a loss mask, so they hold the real
tokens of the sequences in order and no padding.

``megatron`` is not a sequence format: Megatron-LM packs at training time and
reads whole documents, one Megatron dataset per split
(``megatron_documents``, ``megatron_index``).

Pure (numpy, Arrow, no Beam): ``write_sequences`` writes these bytes as files.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from transforms.pack import mds_format
from transforms.pack.megatron_index import MAX_ENTRY_TOKENS
from transforms.pack.packing_algorithm import SequenceBlock

__all__ = [
    "FORMATS", "SEQUENCE_FORMATS", "SUFFIXES", "FILE_TOKEN_LIMITS", "REAL_TOKENS_KEY", "ROW_GROUP_TOKENS",
    "LLMC_HEADERS", "LLMC_HEADER_INTS", "check_format", "encode_block", "file_name", "llmc_header",
]

FORMATS = ("parquet", "megatron", "llmc", "mds")
SEQUENCE_FORMATS = ("parquet", "llmc", "mds")  # formats of packed sequences (megatron: whole documents)
SUFFIXES = {"parquet": (".parquet",), "llmc": (".bin",), "mds": (".mds",)}
REAL_TOKENS_KEY = b"real_tokens"
# About how many tokens one Parquet row group holds: the writer's buffers are
# per row group, and readers stream files by row group.
ROW_GROUP_TOKENS = 1 << 20

# llm.c's headers (dev/data/data_common.py, HEADERS_INFO): (magic, version, token dtype).
LLMC_HEADERS = {"gpt-2": (20240520, 1, np.uint16), "llama-3": (20240801, 7, np.uint32)}
LLMC_HEADER_INTS = 256
# The most tokens one output file may hold, where its format counts them: llm.c's
# header holds an int32 count; an MDS shard's offsets are uint32 bytes (at most
# 5 bytes a token with the loss mask, and the doc ids besides).
FILE_TOKEN_LIMITS = {"llmc": 2**31 - 1, "mds": 1 << 28}


def file_name(split: str, file: int, files: int, suffix: str) -> str:
    return f"{split}/part-{file:05d}-of-{files:05d}{suffix}"


def llmc_header(vocab_size: int) -> tuple[int, int, type]:
    """(magic, version, token dtype) of llm.c files for a vocabulary: uint16 tokens when
    every ID fits, else uint32."""
    return LLMC_HEADERS["gpt-2" if vocab_size <= 1 << 16 else "llama-3"]


def check_format(format: str, vocab_size: int, sequence_length: int | None = None) -> None:
    """Raises ValueError when the format cannot hold this vocabulary's IDs, or one
    sequence of ``sequence_length`` tokens (an MDS shard is at most 4 GiB)."""
    if format not in FORMATS:
        raise ValueError(f"unknown format {format!r} (choose from {', '.join(FORMATS)})")
    if format == "megatron" and vocab_size > MAX_ENTRY_TOKENS + 1:
        raise ValueError(f"megatron files hold int32 tokens; a vocabulary of {vocab_size} does not fit")
    if format == "mds" and sequence_length:
        per_token = (2 if vocab_size <= 1 << 16 else 4) + 1  # the token and its loss mask
        most = (mds_format.MAX_SHARD_BYTES - (1 << 20)) // per_token  # room for the header and the doc ids
        if sequence_length > most:
            raise ValueError(f"a sequence of {sequence_length} tokens does not fit an MDS shard (at most "
                             f"{mds_format.MAX_SHARD_BYTES} bytes: uint32 offsets); choose at most {most} tokens")


def real_tokens(block: SequenceBlock) -> np.ndarray:
    """The block's real tokens, sequence after sequence."""
    mask = np.arange(block.input_ids.shape[1]) < block.real[:, None]
    return block.input_ids[mask]


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


def llmc_bytes(block: SequenceBlock, vocab_size: int) -> bytes:
    magic, version, dtype = llmc_header(vocab_size)
    tokens = real_tokens(block).astype(dtype)
    if len(tokens) > FILE_TOKEN_LIMITS["llmc"]:
        raise ValueError(f"an llmc file holds at most {FILE_TOKEN_LIMITS['llmc']} tokens")
    header = np.zeros(LLMC_HEADER_INTS, np.int32)
    header[:3] = (magic, version, len(tokens))
    return header.tobytes() + tokens.tobytes()


def encode_block(block: SequenceBlock, format: str, vocab_size: int, metadata: dict[bytes, bytes],
                 loss_mask: bool) -> list[tuple[str, bytes]]:
    """The file of one block: [(name relative to the output directory, bytes)]."""
    if format == "parquet":
        data = parquet_bytes(block, metadata, loss_mask)
    elif format == "llmc":
        data = llmc_bytes(block, vocab_size)
    elif format == "mds":
        data = mds_format.shard_bytes(block, loss_mask)
    else:
        raise ValueError(f"{format} is not a format of packed sequences")
    return [(file_name(block.split, block.file, block.files, SUFFIXES[format][0]), data)]
