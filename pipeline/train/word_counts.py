"""The word-count table: what the count job writes and training reads.

``word_counts.parquet`` has two columns, ``word`` (binary: a pre-token piece's
exact bytes) and ``count`` (int64: its occurrences in the corpus), its rows
sorted by word bytes (the count job's writer sorts them), so that identical
runs write identical files. Training can
start from any table of that shape (``--word-counts``), so reading checks it
as user input: string words are taken as UTF-8, a word listed twice is summed,
and a table that cannot be used is one ``UserError`` line.

A table counted by source (``--source-weight``, ``--source-field``) has a third
column, ``source`` (string: the file pattern or the field's value; "" for the
rest), and one row per (source, word) with its unweighted count; it is read
back as a table by source, {source: {word: count}}.
"""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.command_machinery import outputs
from pipeline.command_machinery.errors import UserError

WORD_COUNTS_FILE = "word_counts.parquet"
WORD_COUNTS_SCHEMA = pa.schema([("word", pa.binary()), ("count", pa.int64())])
SOURCE_COUNTS_SCHEMA = pa.schema([("word", pa.binary()), ("count", pa.int64()), ("source", pa.string())])


def word_count_table(counts: dict) -> pa.Table:
    """One partition of the counts as an Arrow table: ``WORD_COUNTS_SCHEMA`` for
    {word: count}, ``SOURCE_COUNTS_SCHEMA`` for {(source, word): count}."""
    if counts and type(next(iter(counts))) is tuple:
        return pa.Table.from_arrays(
            [pa.array([word for _, word in counts], pa.binary()), pa.array(list(counts.values()), pa.int64()),
             pa.array([source for source, _ in counts], pa.string())],
            schema=SOURCE_COUNTS_SCHEMA,
        )
    return pa.Table.from_arrays(
        [pa.array(list(counts.keys()), pa.binary()), pa.array(list(counts.values()), pa.int64())],
        schema=WORD_COUNTS_SCHEMA,
    )


def read_word_counts(path: str) -> dict:
    """Reads a word-count table (word binary/string, count integer) into a dict;
    a table with a ``source`` column into a table by source, {source: {word: count}}.

    Raises:
      UserError: the file is missing, not Parquet, or not a usable table.
    """
    table = _read_table(path)
    problem = _table_problem(table)
    if problem:
        raise UserError(f"word-count table {path} is not usable: {problem}")
    if "source" in table.column_names:
        rows: dict[str, tuple[list, list]] = {}
        for source, word, count in zip(*(table.column(name).to_pylist() for name in ("source", "word", "count"))):
            words, counts = rows.setdefault(source, ([], []))
            words.append(word)
            counts.append(count)
        return {source: _counts(path, *rows[source]) for source in sorted(rows)}
    return _counts(path, table.column("word").to_pylist(), table.column("count").to_pylist())


def _counts(path: str, words: list, counts: list) -> dict[bytes, int]:
    """{word: count} of one table's rows; a word listed twice is summed."""
    if any(c < 0 for c in counts):
        raise UserError(f"word-count table {path} is not usable: it has negative counts")
    words = [w.encode("utf-8") if isinstance(w, str) else w for w in words]
    table_dict = dict(zip(words, counts))
    if len(table_dict) != len(words):
        # A table written by someone else may list a word twice: add them up.
        summed: Counter[bytes] = Counter()
        for word, count in zip(words, counts):
            summed[word] += count
        table_dict = dict(summed)
    return table_dict


def num_rows(path: str) -> int:
    """The table's row count, from its footer."""
    with outputs.open_read(path) as f:
        return pq.read_metadata(_seekable(f, path)).num_rows


def _read_table(path: str) -> pa.Table:
    try:
        with outputs.open_read(path) as f:
            return pq.read_table(_seekable(f, path))
    except FileNotFoundError:
        raise UserError(f"word-count table {path} does not exist") from None
    except Exception as e:  # noqa: BLE001 - OSError, ArrowInvalid: not a readable Parquet file
        if not outputs.exists(outputs.local_path(path)):
            raise UserError(f"word-count table {path} does not exist") from None
        raise UserError(f"cannot read word-count table {path}: {str(e).splitlines()[0]}") from None


def _seekable(f, path: str):
    """A local file as it is; a remote one read into memory (Parquet needs random access)."""
    return f if outputs.is_local(outputs.local_path(path)) else pa.BufferReader(f.read())


def _table_problem(table: pa.Table) -> str | None:
    """Why the table is not a word-count table, or None."""
    if "word" not in table.column_names or "count" not in table.column_names:
        return f"it needs columns 'word' and 'count', it has {', '.join(table.column_names) or 'none'}"
    word_type, count_type = table.schema.field("word").type, table.schema.field("count").type
    if not (pa.types.is_binary(word_type) or pa.types.is_large_binary(word_type)
            or pa.types.is_string(word_type) or pa.types.is_large_string(word_type)):
        return f"column 'word' has type {word_type}, expected binary"
    if not pa.types.is_integer(count_type):
        return f"column 'count' has type {count_type}, expected int64"
    if table.column("word").null_count or table.column("count").null_count:
        return "it has null words or counts"
    if "source" in table.column_names:
        source_type = table.schema.field("source").type
        if not (pa.types.is_string(source_type) or pa.types.is_large_string(source_type)):
            return f"column 'source' has type {source_type}, expected string"
        if table.column("source").null_count:
            return "it has null sources"
    return None
