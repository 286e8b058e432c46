"""Which token rows make which shard: decided from the data alone. Pure, no Beam.

Encode writes its rows in *runs* first (``transforms.write_shards``): the rows of
one read piece (a whole input file, or a line range or run of row groups of a
big one; ``transforms.read.planning``) in record order, cut every ``run_tokens``
tokens, each run one temporary Parquet file whose row groups are cut every
``row_group_tokens`` tokens. A piece is read by one worker in one go, so its
runs and their row groups depend on the input alone: not on the runner, the
bundling or the number of workers. Sorted by (file, piece, first record), the runs
give the rows in input order. (Rows that do not say where they come from, file
"", are written in runs too, ordered by their file names: nothing lost, no
order kept.)

``plan_shards`` then says which runs (or row groups of runs) make each shard:

- by default a run of at least ``small_tokens`` tokens is a shard of its own
  (its file is renamed), and consecutive smaller runs are combined until they
  reach that size (their rows are copied), so a corpus of many small files
  does not become as many small shards;
- with ``num_shards`` N the row groups of all runs, in order, are dealt into N
  consecutive shards by where each row group starts in the token stream
  (shard ``start * N // total``), so the shards hold about equal tokens; a
  shard that receives none is written empty.

Shard k of N is named ``part-k-of-N``; reading the shards in name order, row
groups and rows in order, gives the rows in input order. So identical reruns
write byte-identical shards, and ``beam-bpe pack`` (which reads shards in name
order) gives the same sequences however the encode job was run.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

__all__ = ["RowGroup", "Run", "Part", "ShardPlan", "plan_shards"]


class RowGroup(NamedTuple):
    """One row group of a run: its tokens and the input bytes of its rows."""

    tokens: int
    input_bytes: int


class Run(NamedTuple):
    """A temporary Parquet file of consecutive rows of one read piece.

    Attributes:
      file: the input file the rows come from.
      piece: the record number the read piece starts at (its first record).
      first_record: the record number of the run's first row.
      path: the temporary file.
      row_groups: its row groups, in order.
    """

    file: str
    piece: int
    first_record: int
    path: str
    row_groups: tuple[RowGroup, ...]

    @property
    def tokens(self) -> int:
        return sum(group.tokens for group in self.row_groups)

    @property
    def order(self) -> tuple[str, int, int, str]:
        """Where the run's rows stand in the input: (file, piece, first record); runs
        of rows that do not say where they come from (file "") follow their file names."""
        return self.file, self.piece, self.first_record, self.path if not self.file else ""


class Part(NamedTuple):
    """Row groups [first, stop) of one run's file."""

    path: str
    first: int
    stop: int


class ShardPlan(NamedTuple):
    """One shard: its number, the number of shards, and the parts it holds in order.

    Attributes:
      index: k in part-k-of-N.
      count: N.
      parts: the row groups it holds, in order (none: an empty shard).
      input_bytes: the input bytes of its rows, for its footer.
      whole_run: the one run file that is exactly this shard (renamed, not
        copied), or None.
    """

    index: int
    count: int
    parts: tuple[Part, ...]
    input_bytes: int
    whole_run: str | None


def plan_shards(runs: Sequence[Run], num_shards: int, small_tokens: int) -> list[ShardPlan]:
    """The shards that hold ``runs`` in input order (see the module docstring).

    Args:
      runs: every run of the job, in any order; their (file, piece, first record)
        are distinct where file is set.
      num_shards: the number of shards asked for; 0 lets the data decide.
      small_tokens: with num_shards 0, the size below which consecutive runs are combined.

    Raises:
      ValueError: two runs claim the same place in the input.
    """
    runs = sorted(runs, key=lambda run: run.order)
    for before, after in zip(runs, runs[1:]):
        if before.order == after.order:
            raise ValueError(f"two runs of rows claim the same place in the input: {before.order}")
    groups = _by_row_groups(runs, num_shards) if num_shards else _by_runs(runs, small_tokens)
    count = len(groups)
    plans = []
    for index, members in enumerate(groups):
        parts = tuple(Part(run.path, first, stop) for run, first, stop in members)
        input_bytes = sum(row_group.input_bytes for run, first, stop in members
                          for row_group in run.row_groups[first:stop])
        only = members[0] if len(members) == 1 else None
        whole = only[0].path if only and only[1:] == (0, len(only[0].row_groups)) else None
        plans.append(ShardPlan(index, count, parts, input_bytes, whole))
    return plans


def _by_runs(runs: list[Run], small_tokens: int) -> list[list[tuple[Run, int, int]]]:
    """Big runs alone, consecutive small runs together until they reach ``small_tokens``."""
    groups: list[list[tuple[Run, int, int]]] = []
    pending: list[tuple[Run, int, int]] = []
    pending_tokens = 0
    for run in runs:
        whole = (run, 0, len(run.row_groups))
        if run.tokens >= small_tokens:
            if pending:
                groups.append(pending)
                pending, pending_tokens = [], 0
            groups.append([whole])
            continue
        pending.append(whole)
        pending_tokens += run.tokens
        if pending_tokens >= small_tokens:
            groups.append(pending)
            pending, pending_tokens = [], 0
    if pending or not groups:
        groups.append(pending)  # no rows at all: one empty shard, so readers find one
    return groups


def _by_row_groups(runs: list[Run], num_shards: int) -> list[list[tuple[Run, int, int]]]:
    """The runs' row groups dealt into ``num_shards`` consecutive shards by where each starts."""
    total = sum(run.tokens for run in runs)
    groups: list[list[tuple[Run, int, int]]] = [[] for _ in range(num_shards)]
    start = 0
    for run in runs:
        for number, group in enumerate(run.row_groups):
            shard = min(num_shards - 1, start * num_shards // total) if total else 0
            parts = groups[shard]
            if parts and parts[-1][0] is run and parts[-1][2] == number:
                parts[-1] = (run, parts[-1][1], number + 1)  # extends the run's part in this shard
            else:
                parts.append((run, number, number + 1))
            start += group.tokens
    return groups
