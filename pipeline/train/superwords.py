"""``beam-bpe train --superword-transition T``: a superword tokenizer (SuperBPE).

    beam-bpe train --input 'corpus/*.txt' --vocab-size 32000 --superword-transition 28000 --output out/

The count job is train's, with one more branch over the same documents: the
pieces of SuperBPE's stage-two regex (``bpe.superwords.rules``), counted exactly
like the pre-token pieces, into ``OUT/superword_counts.parquet`` (the columns of
``word_counts.parquet``). The merge phase learns stage one from
``word_counts.parquet`` up to vocabulary size T and stage two from the
supermerge candidates of ``superword_counts.parquet``
(``bpe.training.superwords``), then writes one tokenizer.json whose
pre-tokenizer is the stage-two regex.

``--resume`` works as for ordinary training: the count marker records that the
stage-two pieces were counted, and the checkpoint records T (stage one continues
from it; stage two takes seconds and is learned again). Weighted and
parity-aware training, ``--tie-break hf`` and ``--extend`` are refused with one
line: their merge loops have no stage two. ``--word-counts FILE`` trains from
FILE and the superword_counts.parquet beside it.
"""

from __future__ import annotations

import argparse
import time

import apache_beam as beam
import pyarrow as pa
from apache_beam.io.filesystems import FileSystems

from bpe.superwords.rules import STAGE_TWO_PATTERN
from bpe.tokenizer import Tokenizer
from bpe.training.superwords import train_superwords, transition_problem
from pipeline.errors import UserError
from pipeline.interrupts import sigterm_as_interrupt
from pipeline.train.stats import TrainStats
from pipeline.train.word_counts import WORD_COUNTS_SCHEMA, read_word_counts, word_count_table
from transforms.count import CountPreTokenTables
from transforms.parquet import WriteParquetTables

__all__ = ["SUPERWORD_COUNTS_FILE", "add_arguments", "check_settings", "count", "counts_beside", "learn", "wanted"]

SUPERWORD_COUNTS_FILE = "superword_counts.parquet"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--superword-transition", type=int, metavar="T",
                        help="train a superword tokenizer (SuperBPE): ordinary merges up to vocabulary size T "
                        "(without special tokens), then merges that join words up to --vocab-size")


def wanted(args: argparse.Namespace) -> bool:
    """Whether this run trains a superword tokenizer."""
    return getattr(args, "superword_transition", None) is not None


def check_settings(args: argparse.Namespace) -> None:
    """The flags that go with --superword-transition, and those that do not.

    Raises:
      UserError: one line naming the flag.
    """
    if not wanted(args):
        return
    for flag, given in (("--extend", args.extend), ("--source-weight", args.source_weight),
                        ("--source-field", args.source_field), ("--parity", args.parity)):
        if given:
            raise UserError(f"{flag} does not go with --superword-transition: superword training learns from "
                            "one plain count")
    if args.tie_break != "bytes":
        raise UserError("--tie-break hf does not go with --superword-transition: stage two breaks ties by bytes")
    if args.vocab_size is None:
        return  # train's own check names --vocab-size
    problem = transition_problem(args.vocab_size, args.superword_transition, len(args.special_token or ()))
    if problem:
        raise UserError(f"--superword-transition: {problem}")


def count(texts, output: str) -> None:
    """Adds the stage-two count to the count job: ``texts`` (the documents) -> OUT/superword_counts.parquet.

    Every stage-two piece is kept (no ``--min-word-count``): the candidates' counts
    must be exact for stage two to learn the merges of whole documents.
    """
    (
        texts
        | "CountSuperwordPieces" >> CountPreTokenTables(STAGE_TWO_PATTERN, engine="regex")
        | "SuperwordsToArrow" >> beam.Map(word_count_table).with_output_types(pa.Table)
        | "WriteSuperwordCounts" >> WriteParquetTables(
            FileSystems.join(output, SUPERWORD_COUNTS_FILE.removesuffix(".parquet")),
            WORD_COUNTS_SCHEMA,
            file_name_suffix=".parquet",
            num_shards=1,
            shard_name_template="",
        )
    )


def counts_beside(word_counts: str) -> str:
    """The path of the stage-two table that belongs to the word-count table ``word_counts``."""
    return FileSystems.join(FileSystems.split(word_counts)[0], SUPERWORD_COUNTS_FILE)


def learn(args: argparse.Namespace, table: dict, resume_from: list, checkpoint, stats: TrainStats) -> Tokenizer:
    """The merge phase: stage one on ``table``, stage two on the superword_counts.parquet beside it.

    Raises:
      UserError: there is no stage-two table beside the word counts (``--word-counts``
        of a corpus counted without --superword-transition).
      KeyboardInterrupt: SIGINT or SIGTERM, after the merges so far are saved.
    """
    path = counts_beside(stats.word_counts)
    if not FileSystems.exists(path):
        raise UserError(f"{path} does not exist: stage two needs the stage-two pieces counted beside "
                        f"{stats.word_counts}; count the corpus with --superword-transition")
    superword_counts = read_word_counts(path)
    started = time.monotonic()
    try:
        with sigterm_as_interrupt():
            tokenizer = train_superwords(
                table,
                superword_counts,
                vocab_size=args.vocab_size,
                transition=args.superword_transition,
                pattern=args.pattern,
                special_tokens=args.special_token,
                min_frequency=args.min_frequency,
                progress=False if args.no_progress else None,
                resume_from=resume_from,
                checkpoint=checkpoint.save,
                checkpoint_every=args.checkpoint_every,
            )
    except ValueError as e:  # checked up front; kept so a slip is still one line
        raise UserError(str(e)) from None
    stats.seconds["train"] = round(time.monotonic() - started, 3)
    stats.merges = len(tokenizer.merges)
    stats.vocab_size = tokenizer.vocab_size
    stats.requested_vocab_size = args.vocab_size
    return tokenizer
