"""Readers of what the commands write: the tokenizer's merges, the word counts, the
statistics, token shards, packed sequences and the report."""

from __future__ import annotations

import json
import os
import pathlib

import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["merges", "read_packed_parquet", "read_report", "read_rows", "stats", "word_counts"]


def _json(output, name: str):
    with open(os.path.join(output, name), encoding="utf-8") as f:
        return json.load(f)


def merges(output) -> list:
    """The merges of the tokenizer.json that ``beam-bpe train`` wrote."""
    return _json(output, "tokenizer.json")["model"]["merges"]


def stats(output) -> dict:
    """train_stats.json."""
    return _json(output, "train_stats.json")


def read_report(output) -> dict:
    """report.json."""
    return _json(output, "report.json")


def word_counts(output) -> dict[bytes, int]:
    """word_counts.parquet as {word: count}, its schema and its uniqueness checked."""
    table = pq.read_table(os.path.join(output, "word_counts.parquet"))
    assert table.schema.field("word").type == pa.binary()
    assert table.schema.field("count").type == pa.int64()
    rows = dict(zip(table.column("word").to_pylist(), table.column("count").to_pylist()))
    assert len(rows) == table.num_rows, "a word appears twice in the table"
    return rows


def read_rows(out: pathlib.Path) -> list[tuple[str, list[int]]]:
    """(id, tokens) of the token shards in ``out``, in file then row order."""
    table = pq.read_table(sorted(out.glob("part-*.parquet")))
    return list(zip(table.column("id").to_pylist(), table.column("tokens").to_pylist()))


def read_packed_parquet(directory, split):
    """[(input_ids, real, doc_starts, doc_ids)] of a split's Parquet files, in file then row order."""
    files = sorted(pathlib.Path(directory, split).glob("part-*.parquet"))
    if not files:
        return []
    table = pq.read_table(files)
    ids = table.column("input_ids").to_pylist()
    masks = table.column("loss_mask").to_pylist() if "loss_mask" in table.column_names else [[1] * len(i) for i in ids]
    return [(i, sum(m), s, d) for i, m, s, d in
            zip(ids, masks, table.column("doc_starts").to_pylist(), table.column("doc_ids").to_pylist())]
