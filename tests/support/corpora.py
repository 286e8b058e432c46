"""Input files written for the commands under test: text corpora (compressed as their
names say) and token shards in the layout ``beam-bpe encode`` writes, for ``pack``."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import pathlib

import pyarrow as pa
import pyarrow.parquet as pq
import zstandard

from tests.support.real_text import multilingual, stdlib_lines

__all__ = ["Corpus", "compress", "write_line_shards", "write_stdlib_corpus", "write_token_shards"]


def compress(data: bytes, name: str) -> bytes:
    """``data`` compressed as the file name's extension says (.gz .bz2 .zst .xz)."""
    if name.endswith(".gz"):
        return gzip.compress(data)
    if name.endswith(".bz2"):
        return bz2.compress(data)
    if name.endswith(".zst"):
        return zstandard.ZstdCompressor().compress(data)
    if name.endswith(".xz"):
        return lzma.compress(data)
    return data


class Corpus:
    """Writes corpus files under one directory; every method returns the path."""

    def __init__(self, root: pathlib.Path):
        self.root = root

    def path(self, name: str) -> str:
        return str(self.root / name)

    def write(self, name: str, data: bytes) -> str:
        """Writes ``data``, compressed according to the name's extension."""
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(compress(data, name))
        return str(path)

    def write_raw(self, name: str, data: bytes) -> str:
        """Writes ``data`` as is, whatever the extension says (corrupt files)."""
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return str(path)

    def parquet(self, name: str, table: pa.Table | dict, row_group_size: int | None = None) -> str:
        """Writes a Parquet file (compressed afterwards if the name says .gz etc.)."""
        if isinstance(table, dict):
            table = pa.table(table)
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, row_group_size=row_group_size)
        return self.write(name, sink.getvalue().to_pybytes())


def write_stdlib_corpus(root: pathlib.Path) -> dict[str, str]:
    """The same documents (stdlib lines) as 1 text file, 8 text shards and 8 jsonl.gz shards.

    Returns the --input glob of each layout.
    """
    lines = stdlib_lines()
    (root / "one").mkdir(parents=True)
    (root / "one" / "corpus.txt").write_bytes(b"".join(lines))
    (root / "shards").mkdir()
    (root / "jsonl").mkdir()
    for shard in range(8):
        part = lines[shard::8]  # interleaved: every shard gets a mix of files
        (root / "shards" / f"part-{shard}.txt").write_bytes(b"".join(part))
        records = "".join(json.dumps({"text": line.decode("utf-8")}) + "\n" for line in part)
        (root / "jsonl" / f"part-{shard}.jsonl.gz").write_bytes(gzip.compress(records.encode("utf-8")))
    return {
        "one": str(root / "one" / "corpus.txt"),
        "shards": str(root / "shards" / "part-*.txt"),
        "jsonl": str(root / "jsonl" / "*.jsonl.gz"),
    }


def write_line_shards(root: pathlib.Path, count: int) -> list[bytes]:
    """``count`` lines of real multilingual text (repeated as needed) as 4 interleaved
    text shards ``in-N.txt`` under ``root``; returns the lines, each a document."""
    lines = [line for doc in multilingual(3) for line in doc.encode("utf-8").splitlines(keepends=True)]
    lines = (lines * (count // len(lines) + 1))[:count]
    for shard in range(4):
        (root / f"in-{shard}.txt").write_bytes(b"".join(lines[shard::4]))
    return lines


def write_token_shards(docs, directory, shards=1, rows_per_group=None, sha256="0" * 64, vocab_size=1000,
                       eos_token_id=None):
    """Writes (id, tokens) documents as ``shards`` token shards, in order (shard 0
    holds the first documents); returns the shard paths, sorted."""
    from transforms.shards import TokenRow, rows_to_table, shard_schema

    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    schema = shard_schema(sha256, vocab_size, eos_token_id)
    bounds = [len(docs) * s // shards for s in range(shards + 1)]
    paths = []
    for s in range(shards):
        path = directory / f"part-{s:05d}-of-{shards:05d}.parquet"
        table = rows_to_table([TokenRow(i, t) for i, t in docs[bounds[s]: bounds[s + 1]]], schema)
        pq.write_table(table, path, row_group_size=rows_per_group or max(1, table.num_rows))
        paths.append(str(path))
    return paths
