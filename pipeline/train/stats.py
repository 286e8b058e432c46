"""``train_stats.json``: what a training run read, counted and learned, and its summary lines."""

from __future__ import annotations

import dataclasses
import json

from apache_beam.io.filesystems import FileSystems

from pipeline.command_machinery import outputs
from pipeline.train.sources import summary_lines as source_lines

# The run's result and, written after it, its stats.
TOKENIZER_FILE = "tokenizer.json"
STATS_FILE = "train_stats.json"
# What the count phase measured: kept in its completion marker, so that a
# resumed run reports the same numbers without counting again.
COUNTED = ("runner", "documents", "bytes", "pieces", "unique_pieces")


@dataclasses.dataclass
class TrainStats:
    """The run's numbers, written as ``train_stats.json`` (keys in this order).

    Attributes:
      inputs: the --input globs ([] when training from --word-counts).
      files: how many files they matched.
      pattern, min_word_count, min_frequency, tie_break, special_tokens: the settings.
      runner: the runner that counted (None when nothing was counted).
      documents, bytes, pieces: read and pre-tokenized by the count job
        (its counters; None if the runner reports none).
      dead_letters: input records that could not be read (from the files).
      unique_pieces: distinct pieces counted (or the table's rows); counted by
        source, distinct (source, piece) rows.
      word_counts: the word-count table trained from.
      seconds: time per phase ("count", "train") and in "total".
      word_count_rows: rows of the table trained from (after --min-word-count).
      resumed_from_merges: merges taken from a checkpoint.
      merges, vocab_size: what was learned.
      requested_vocab_size: --vocab-size.
      parity, global_merges, source_field, source_weight: the source settings
        (``pipeline.train.sources``).
      sources: per source, its weight and its bytes, pieces and unique pieces in the
        table trained from, before and after weighting (None without sources).
      requested_vocab_size: --vocab-size (with --extend: the base's + --new-tokens).
      extend: the --extend tokenizer (None for training from scratch).
      base_vocab_size: its vocab size; ``merges`` are then the new ones.
      tokens_before, tokens_after: the tokens the counted pieces take with the base
        and with the extension.
      rank_file: the extension's tiktoken rank file, or why it is not written (a rank-file base only).
      learned_with: what the tokenizer was learned with (``Checkpoint.learned_with``): the
        word-count table, the settings the merges depend on, the base's SHA-256 and the size
        asked for; ``--resume`` replaces a finished tokenizer of other ones only with --overwrite.
    """

    inputs: list[str]
    files: int
    pattern: str
    min_word_count: int
    min_frequency: int
    tie_break: str
    special_tokens: list[str]
    runner: str | None = None
    documents: int | None = None
    bytes: int | None = None
    pieces: int | None = None
    dead_letters: int | None = None
    unique_pieces: int | None = None
    word_counts: str = ""
    seconds: dict[str, float] = dataclasses.field(default_factory=dict)
    word_count_rows: int | None = None
    resumed_from_merges: int = 0
    merges: int | None = None
    vocab_size: int | None = None
    requested_vocab_size: int | None = None
    parity: bool = False
    global_merges: int = 0
    source_field: str | None = None
    source_weight: list[str] | None = None
    sources: dict[str, dict] | None = None
    extend: str | None = None
    base_vocab_size: int | None = None
    tokens_before: int | None = None
    tokens_after: int | None = None
    rank_file: str | None = None
    learned_with: dict | None = None

    def counted(self) -> dict:
        """The count phase's numbers, for its completion marker."""
        return {**{key: getattr(self, key) for key in COUNTED}, "seconds": self.seconds["count"]}

    def take_counted(self, counted: dict) -> None:
        """Takes the numbers of a count phase from its completion marker."""
        counted = dict(counted)
        self.seconds["count"] = counted.pop("seconds")
        for key in COUNTED:
            setattr(self, key, counted.get(key))

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=1) + "\n"


def summary_lines(stats: TrainStats, tokenizer_path: str, stats_path: str, output: str) -> list[str]:
    """What ``beam-bpe train`` prints when it is done."""
    seconds = stats.seconds
    lines = []
    if stats.runner:
        documents = "?" if stats.documents is None else f"{stats.documents:,}"
        lines.append(
            f"beam-bpe train: counted {documents} documents ({outputs.size(stats.bytes)}, {stats.files:,} files) "
            f"-> {stats.unique_pieces:,} unique pieces in {seconds['count']:.1f} s on {stats.runner}"
        )
    if stats.extend is not None:
        merges_wanted = stats.requested_vocab_size - stats.base_vocab_size
    else:
        merges_wanted = stats.requested_vocab_size - 256 - len(stats.special_tokens)
    early = ""
    if stats.merges < merges_wanted:
        early = f" (stopped early: no pair occurs {stats.min_frequency}+ times)"
    resumed = f" (resumed after {stats.resumed_from_merges:,} merges)" if stats.resumed_from_merges else ""
    if stats.sources is not None:
        how = "parity-aware training over " if stats.parity else ""
        if stats.parity and stats.global_merges:
            how = f"parity-aware training (after {stats.global_merges:,} merges by the count over all) over "
        lines.append(f"beam-bpe train: {how}{len(stats.sources):,} sources (bytes and pieces in the table, "
                     "then weighted):")
        lines += source_lines(stats.sources)
    lines += [
        f"beam-bpe train: learned {stats.merges:,} merges from {stats.word_count_rows:,} pieces "
        f"-> vocab size {stats.vocab_size:,} in {seconds['train']:.1f} s{resumed}{early}",
        f"  tokenizer:    {tokenizer_path}",
        f"  word counts:  {stats.word_counts}",
        f"  stats:        {stats_path}",
    ]
    if stats.dead_letters is not None and not stats.dead_letters:
        lines.append(f"  dead letters: none ({FileSystems.join(output, outputs.DEAD_LETTERS_DIR)}/)")
    return lines
