"""MosaicML Streaming's MDS format for packed sequences: shards and their ``index.json``.

A split's directory holds MDS shards (one per output file of the split,
``part-SSSSS-of-NNNNN.mds``) and ``index.json``, which lists them in order, as
``streaming.base.format.mds.MDSWriter`` writes them (format version 2, no
compression, no hashes):

- a shard: the sample count (uint32), the byte offset of every sample and of
  the end (uint32, from the start of the file), the shard's configuration
  (JSON, keys sorted), then the samples;
- a sample: the byte size of each variable-size column (uint32), then every
  column's bytes, columns in name order.

The columns of a sequence are those of the Parquet output: ``input_ids``
(``ndarray:uint16:L`` or ``uint32``: fixed size), ``loss_mask``
(``ndarray:uint8:L``, when sequences can hold padding), ``doc_starts`` and
``doc_ids`` (``json``: lists). ``streaming.StreamingDataset(local=SPLIT_DIR)``
reads them back as NumPy arrays and lists.

Pure (numpy, json), no Beam.
"""

from __future__ import annotations

import json

import numpy as np

from transforms.pack.packing_algorithm import SequenceBlock

__all__ = ["INDEX_FILE", "MAX_SHARD_BYTES", "columns", "shard_bytes", "shard_entry", "index_json"]

INDEX_FILE = "index.json"
MAX_SHARD_BYTES = 2**32 - 1  # the samples' offsets are uint32
_VERSION = 2


def columns(length: int, dtype, loss_mask: bool) -> dict[str, str]:
    """{column name: MDS encoding} of sequences of ``length`` tokens of ``dtype``."""
    encodings = {"input_ids": f"ndarray:{np.dtype(dtype).name}:{length}", "doc_starts": "json", "doc_ids": "json"}
    if loss_mask:
        encodings["loss_mask"] = f"ndarray:uint8:{length}"
    return encodings


def _config(encodings: dict[str, str], length: int, dtype) -> dict:
    names = sorted(encodings)
    sizes = {"input_ids": length * np.dtype(dtype).itemsize, "loss_mask": length}
    return {"version": _VERSION, "format": "mds", "compression": None, "hashes": [], "size_limit": None,
            "column_names": names, "column_encodings": [encodings[n] for n in names],
            "column_sizes": [sizes.get(n) for n in names]}


def shard_bytes(block: SequenceBlock, loss_mask: bool) -> bytes:
    """The MDS shard of one block's sequences."""
    rows, length = block.input_ids.shape
    encodings = columns(length, block.input_ids.dtype, loss_mask)
    config = json.dumps(_config(encodings, length, block.input_ids.dtype), sort_keys=True).encode()
    starts, ids = block.doc_starts.tolist(), block.doc_ids.to_pylist()
    mask = (np.arange(length) < block.real[:, None]).view(np.uint8)
    samples = []
    for r in range(rows):
        a, b = int(block.doc_offsets[r]), int(block.doc_offsets[r + 1])
        values = {"input_ids": block.input_ids[r].tobytes(), "loss_mask": mask[r].tobytes(),
                  "doc_starts": json.dumps(starts[a:b]).encode(), "doc_ids": json.dumps(ids[a:b]).encode()}
        variable = [values[n] for n in sorted(encodings) if encodings[n] == "json"]
        samples.append(np.array([len(v) for v in variable], np.uint32).tobytes()
                       + b"".join(values[n] for n in sorted(encodings)))
    head = 4 + 4 * (rows + 1) + len(config)
    offsets = head + np.concatenate([[0], np.cumsum([len(s) for s in samples])]).astype(np.int64)
    if offsets[-1] > MAX_SHARD_BYTES:
        raise ValueError(f"an MDS shard holds at most {MAX_SHARD_BYTES} bytes; choose a smaller --tokens-per-file")
    return np.uint32(rows).tobytes() + offsets.astype(np.uint32).tobytes() + config + b"".join(samples)


def shard_entry(basename: str, data: bytes) -> dict:
    """The entry of a shard in ``index.json``, from its bytes."""
    rows, first_sample = (int(v) for v in np.frombuffer(data[:8], np.uint32))
    config = json.loads(data[4 + 4 * (rows + 1): first_sample])
    return {**config, "samples": rows, "raw_data": {"basename": basename, "bytes": len(data), "hashes": {}},
            "zip_data": None}


def index_json(entries: list[dict]) -> bytes:
    """``index.json`` of a split: its shards' entries, in order."""
    return json.dumps({"version": _VERSION, "shards": entries}, sort_keys=True).encode()
