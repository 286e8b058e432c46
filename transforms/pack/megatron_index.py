"""Megatron-LM's indexed dataset (``MMIDIDX``): the token dtype, and the ``.idx`` written as a stream.

A dataset is a pair of files with one entry per document:

- ``NAME.bin``: the tokens of every entry, back to back, in the dataset's dtype.
- ``NAME.idx``: ``MMIDIDX\\x00\\x00``, version 1 (<Q), the dtype's code (<B),
  the entry count (<Q), the document count plus one (<Q), then the entries'
  lengths (int32), their byte pointers into the ``.bin`` (int64: a running sum
  of the lengths times the dtype's size, so a ``.bin`` may hold more than 2^31
  tokens) and the document indices (int64: 0, 1, ..., entries: one entry per
  document).

This is the layout ``megatron/core/datasets/indexed_dataset.py`` writes
(``_IndexWriter``) and reads (``_IndexReader``), with the dtype
``preprocess_data.py`` picks from the vocabulary (``DType.optimal_dtype``).

``write_index`` takes the lengths as chunks and writes each section as it
goes, so an index of any size is written in the memory of one chunk. Pure
(numpy), no Beam.
"""

from __future__ import annotations

import struct
from typing import BinaryIO, Callable, Iterable

import numpy as np

__all__ = ["HEADER", "VERSION", "DTYPE_CODES", "MAX_ENTRY_TOKENS", "megatron_dtype", "write_index", "index_entries"]

HEADER = b"MMIDIDX\x00\x00"
VERSION = 1
# Megatron's DType codes (indexed_dataset.DType).
DTYPE_CODES = {np.dtype(np.uint8): 1, np.dtype(np.int8): 2, np.dtype(np.int16): 3, np.dtype(np.int32): 4,
               np.dtype(np.int64): 5, np.dtype(np.float64): 6, np.dtype(np.float32): 7, np.dtype(np.uint16): 8}
MAX_ENTRY_TOKENS = 2**31 - 1  # an entry's length is an int32
# The document indices are written this many at a time.
_CHUNK = 1 << 20


def megatron_dtype(vocab_size: int) -> np.dtype:
    """The token dtype Megatron's preprocessing uses for a vocabulary (``DType.optimal_dtype``)."""
    return np.dtype(np.uint16 if vocab_size < 65500 else np.int32)


def write_index(out: BinaryIO, dtype, entries: int, length_chunks: Callable[[], Iterable[np.ndarray]]) -> None:
    """Writes the ``.idx`` of ``entries`` entries, one per document, to ``out``.

    ``length_chunks()`` gives the entries' lengths in order, as arrays; it is
    called twice (the lengths, then their pointers), so it reads them again
    rather than holding them.

    Raises:
      ValueError: the chunks do not hold ``entries`` lengths, or one is negative
        or longer than an int32.
    """
    dtype = np.dtype(dtype)
    out.write(HEADER + struct.pack("<Q", VERSION) + struct.pack("<B", DTYPE_CODES[dtype])
              + struct.pack("<Q", entries) + struct.pack("<Q", entries + 1))
    seen = 0
    for chunk in length_chunks():
        chunk = np.asarray(chunk, np.int64)
        if len(chunk) and (chunk.min() < 0 or chunk.max() > MAX_ENTRY_TOKENS):
            raise ValueError(f"an entry's length must be in [0, {MAX_ENTRY_TOKENS}]")
        out.write(chunk.astype(np.int32).tobytes())
        seen += len(chunk)
    if seen != entries:
        raise ValueError(f"the index was declared with {entries} entries, the lengths hold {seen}")
    pointer = 0  # in bytes: a Python int, it cannot overflow
    for chunk in length_chunks():
        sizes = np.asarray(chunk, np.int64) * dtype.itemsize
        out.write((pointer + np.cumsum(sizes) - sizes).astype(np.int64).tobytes())
        pointer += int(sizes.sum())
    for first in range(0, entries + 1, _CHUNK):
        out.write(np.arange(first, min(first + _CHUNK, entries + 1), dtype=np.int64).tobytes())


def index_entries(head: bytes) -> tuple[np.dtype, int]:
    """(token dtype, entry count) from the first 34 bytes of a ``.idx``."""
    if head[: len(HEADER)] != HEADER:
        raise ValueError("not a Megatron index")
    code = head[len(HEADER) + 8]
    dtype = next(d for d, c in DTYPE_CODES.items() if c == code)
    return dtype, struct.unpack("<Q", head[len(HEADER) + 9: len(HEADER) + 17])[0]
