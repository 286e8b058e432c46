"""``WriteTokenShards``: token rows -> token shards in input order, the same on every run.

    rows ──WriteRuns──> runs (temporary files, one or more per read piece)
                          │ all of them (side input)
    Impulse ──Plan──> shard plans (``transforms.shard_layout``) ──Reshuffle──> MakeShard
                          (rename a run's file, or copy row groups) ──> Finish ──> shard paths

Why runs: the rows of one read piece reach one worker together, in record
order, whatever the runner does with bundles (reading, encoding and writing
are one fused stage after the reads are spread); so a file per piece, cut at
fixed token counts, holds the same rows on every run. A run also ends where a
row does not continue it (another piece, an earlier record), so on a runner
that split a piece over bundles the runs would follow the bundles but still
sort into input order: the shards' layout could vary there, the rows' order
(and so ``beam-bpe pack``'s output) would not. The layout is then
decided from the runs alone, and most shards are a run's file renamed: no
shuffle of the rows and no second pass over most of them.

Only the files of committed bundles are listed in the side input, so a retried
bundle leaves no duplicate; making a shard is idempotent (a rename already
done, or a copy written under a temporary name and renamed), so a retried
``MakeShard`` is harmless. ``Finish`` removes the temporary directory with
whatever failed attempts left in it.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Iterable

import apache_beam as beam
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.windowed_value import WindowedValue

from transforms import metrics
from transforms.shard_layout import RowGroup, Run, ShardPlan, plan_shards
from transforms.shards import (
    INPUT_BYTES_KEY, ROW_GROUP_TOKENS, SHARD_PREFIX, SHARD_SUFFIX, TokenRow, rows_to_table, shard_schema,
)
from transforms.sink_write import make_dir, temp_dir_beside

__all__ = ["WriteTokenShards", "RUN_TOKENS", "SMALL_SHARD_TOKENS", "shard_name"]

# A read piece's rows are cut into runs of at most about this many tokens
# (128 MiB of uint16 IDs): the largest shard the data alone makes.
RUN_TOKENS = 1 << 26
# With the number of shards left to the data, runs smaller than this are
# combined with their neighbours: one shard per tiny input file would make
# thousands of files that every later step opens.
SMALL_SHARD_TOKENS = 1 << 22


def shard_name(output_dir: str, index: int, count: int) -> str:
    """The path of shard ``index`` of ``count``: ``part-SSSSS-of-NNNNN.parquet``."""
    return FileSystems.join(output_dir, f"{SHARD_PREFIX}-{index:05d}-of-{count:05d}{SHARD_SUFFIX}")


class _ParquetFile:
    """One Parquet file being written through Beam's filesystems, with its footer's input bytes."""

    def __init__(self, path: str, schema: pa.Schema):
        self._file = FileSystems.create(path)
        self._writer = pq.ParquetWriter(self._file, schema, compression="zstd", use_dictionary=False)
        self.input_bytes = 0

    def write(self, table: pa.Table) -> None:
        """Writes ``table`` as one row group."""
        self.input_bytes += int((table.schema.metadata or {}).get(INPUT_BYTES_KEY, 0))
        self._writer.write_table(table, row_group_size=max(table.num_rows, 1))

    def close(self) -> None:
        self._writer.add_key_value_metadata({INPUT_BYTES_KEY.decode(): str(self.input_bytes)})
        self._writer.close()
        self._file.close()


class _WriteRunsFn(beam.DoFn):
    """Writes rows into run files (``transforms.shard_layout``); emits each run."""

    def __init__(self, temp_dir: str, schema: pa.Schema, row_group_tokens: int, run_tokens: int):
        self._temp_dir = temp_dir
        self._schema = schema
        self._row_group_tokens = row_group_tokens
        self._run_tokens = run_tokens
        self._counters = metrics.Counters("shards", "rows", "tokens")

    def setup(self):
        make_dir(self._temp_dir)

    def start_bundle(self):
        self._run: _OpenRun | None = None

    def process(self, row: TokenRow):
        run = self._run
        if run is not None and run.continued_by(row) and run.tokens < self._run_tokens:
            run.add(row)
            return
        if run is not None:
            yield self._close(run)
        path = FileSystems.join(self._temp_dir, uuid.uuid4().hex + SHARD_SUFFIX)
        self._run = _OpenRun(row.file, row.piece, row.record, path, self._schema, self._row_group_tokens)
        self._run.add(row)

    def finish_bundle(self):
        if self._run is not None:
            yield WindowedValue(self._close(self._run), GlobalWindow().max_timestamp(), [GlobalWindow()])
            self._run = None

    def _close(self, run: _OpenRun) -> Run:
        closed = run.close()
        self._counters.rows.inc(run.rows)
        self._counters.tokens.inc(closed.tokens)
        return closed


class _OpenRun:
    """A run being written: rows gathered into row groups of about ``row_group_tokens`` tokens."""

    def __init__(self, file: str, piece: int, first_record: int, path: str, schema: pa.Schema,
                 row_group_tokens: int):
        self.file, self.piece, self.first_record, self.path = file, piece, first_record, path
        self._last_record = first_record - 1
        self._schema = schema
        self._row_group_tokens = row_group_tokens
        self._out = _ParquetFile(path, schema)
        self._pending: list[TokenRow] = []
        self._pending_tokens = 0
        self._row_groups: list[RowGroup] = []
        self.tokens = 0
        self.rows = 0

    def continued_by(self, row: TokenRow) -> bool:
        """Whether ``row`` comes next in this run's piece (the same piece, a later record)."""
        return (row.file, row.piece) == (self.file, self.piece) and (row.record > self._last_record or not row.file)

    def add(self, row: TokenRow) -> None:
        self._last_record = row.record
        self._pending.append(row)
        self._pending_tokens += len(row.tokens)
        self.tokens += len(row.tokens)
        self.rows += 1
        if self._pending_tokens >= self._row_group_tokens:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            table = rows_to_table(self._pending, self._schema)
            self._out.write(table)
            self._row_groups.append(RowGroup(self._pending_tokens, sum(row[2] for row in self._pending)))
            self._pending, self._pending_tokens = [], 0

    def close(self) -> Run:
        self._flush()
        self._out.close()
        return Run(self.file, self.piece, self.first_record, self.path, tuple(self._row_groups))


def _plan(unused_impulse, runs: list[Run], num_shards: int, small_tokens: int) -> Iterable[ShardPlan]:
    yield from plan_shards(runs, num_shards, small_tokens)


class _MakeShardFn(beam.DoFn):
    """Makes one shard from its plan: renames a whole run's file, or copies row groups into a new file."""

    def __init__(self, output_dir: str, temp_dir: str, schema: pa.Schema, row_group_tokens: int):
        self._output_dir = output_dir
        self._temp_dir = temp_dir
        self._schema = schema
        self._row_group_tokens = row_group_tokens

    def process(self, plan: ShardPlan):
        final = shard_name(self._output_dir, plan.index, plan.count)
        if plan.whole_run is not None:
            # A retried step finds the rename done.
            if FileSystems.exists(plan.whole_run) or not FileSystems.exists(final):
                FileSystems.rename([plan.whole_run], [final])
        else:
            make_dir(self._temp_dir)  # a job without rows has written no run
            temporary = FileSystems.join(self._temp_dir, f"shard-{plan.index}-{uuid.uuid4().hex}{SHARD_SUFFIX}")
            self._copy(plan, temporary)
            FileSystems.rename([temporary], [final])
        yield final

    def _copy(self, plan: ShardPlan, path: str) -> None:
        """Writes the plan's row groups into ``path``, regrouped into row groups of about
        ``row_group_tokens`` tokens (small runs make small row groups)."""
        out = _ParquetFile(path, self._schema)
        pending: list[pa.Table] = []
        pending_tokens = 0
        for part in plan.parts:
            with FileSystems.open(part.path) as handle:
                source = pq.ParquetFile(handle)
                for number in range(part.first, part.stop):
                    table = source.read_row_group(number)
                    pending.append(table)
                    pending_tokens += _tokens(table)
                    if pending_tokens >= self._row_group_tokens:
                        out.write(_concat(pending, self._schema))
                        pending, pending_tokens = [], 0
        if pending:
            out.write(_concat(pending, self._schema))
        out.input_bytes = plan.input_bytes
        out.close()


def _tokens(table: pa.Table) -> int:
    return pc.sum(pc.list_value_length(table.column("tokens"))).as_py() or 0


def _concat(tables: list[pa.Table], schema: pa.Schema) -> pa.Table:
    return pa.concat_tables([table.cast(schema) for table in tables]).combine_chunks()


def _finish(unused_impulse, temp_dir: str, shards: list[str]) -> Iterable[str]:
    if FileSystems.exists(temp_dir):
        FileSystems.delete([temp_dir])
    yield from sorted(shards)


@dataclasses.dataclass
class WriteTokenShards(beam.PTransform):
    """Writes TokenRows as zstd Parquet token shards under output_dir, in input
    order and the same on every run (see the module docstring); each shard's footer
    holds the input bytes of its rows (``INPUT_BYTES_KEY``).

    Rows keep their read piece's order when their ``file`` and ``piece`` say where
    they come from (``EncodeDocuments`` sets them).

    Counters (``transforms.metrics``, step ``shards``): ``rows``, ``tokens``.

    Args:
      output_dir: the directory (any Beam filesystem) that receives the shards.
      tokenizer_sha256: SHA-256 of the tokenizer.json that made the tokens.
      vocab_size: the tokenizer's vocab size; picks uint16 or uint32 tokens.
      num_shards: how many files; 0 lets the data decide (``transforms.shard_layout``).
      eos_token_id: the EOS ID appended to every row, if any (recorded in the metadata).
      bos_token_id: the BOS ID prepended to every row, if any (recorded in the metadata).
      row_group_tokens: about how many tokens go into one row group.
      run_tokens: about how many tokens of one read piece go into one file at most.
      small_shard_tokens: with num_shards 0, runs below this size are combined.

    Returns the PCollection of the final shard file names.
    """

    output_dir: str
    tokenizer_sha256: str
    vocab_size: int
    num_shards: int = 0
    eos_token_id: int | None = None
    bos_token_id: int | None = None
    row_group_tokens: int = ROW_GROUP_TOKENS
    run_tokens: int = RUN_TOKENS
    small_shard_tokens: int = SMALL_SHARD_TOKENS

    def __post_init__(self):
        super().__init__()

    def expand(self, rows):
        schema = shard_schema(self.tokenizer_sha256, self.vocab_size, self.eos_token_id, self.bos_token_id)
        temp_dir = temp_dir_beside(FileSystems.join(self.output_dir, SHARD_PREFIX))
        runs = rows | "WriteRuns" >> beam.ParDo(
            _WriteRunsFn(temp_dir, schema, self.row_group_tokens, self.run_tokens)
        ).with_output_types(Run)
        once = rows.pipeline | "Once" >> beam.Impulse()
        shards = (
            once
            | "Plan" >> beam.FlatMap(_plan, beam.pvalue.AsList(runs), self.num_shards, self.small_shard_tokens)
            | "Spread" >> beam.Reshuffle()
            | "MakeShard" >> beam.ParDo(_MakeShardFn(self.output_dir, temp_dir, schema, self.row_group_tokens))
        )
        return (
            rows.pipeline
            | "AfterShards" >> beam.Impulse()
            | "Finish" >> beam.FlatMap(_finish, temp_dir, beam.pvalue.AsList(shards)).with_output_types(str)
        )
