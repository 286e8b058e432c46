"""``beam-bpe train --superword-transition T``: a superword tokenizer (SuperBPE);
``--extend BASE --superword-merges K``: superwords added to an existing tokenizer.

    beam-bpe train --input 'corpus/*.txt' --vocab-size 32000 --superword-transition 28000 --output out/
    beam-bpe train --extend cl100k_base.tiktoken --tokenizer-preset cl100k_base --superword-merges 2000 \
        --input 'corpus/*.txt' --output out/

The count job is train's, with one more branch over the same documents: the
pieces of SuperBPE's stage-two regex (``bpe.superwords.rules``), counted exactly
like the pre-token pieces, into ``OUT/superword_counts.parquet`` (the columns of
``word_counts.parquet``). The merge phase learns stage one from
``word_counts.parquet`` up to vocabulary size T and stage two from the
supermerge candidates of ``superword_counts.parquet``
(``bpe.training.superwords``), then writes one tokenizer.json whose
pre-tokenizer is the stage-two regex.

With ``--extend`` the count is ``--extend``'s (the base's pattern) plus the same
branch, and stage two runs on the base's encoding instead of stage one's
(``bpe.training.superwords.extend_superwords``); a base that normalizes text or
matches added tokens is refused before counting, and no rank file is written.

``--resume`` works as for ordinary training: the count marker records that the
stage-two pieces were counted, and the checkpoint records T or the superword
extension (stage one continues from it; stage two takes seconds and is learned
again). Weighted and parity-aware training and ``--tie-break hf`` are refused
with one line: their merge loops have no stage two. ``--word-counts FILE``
trains from FILE and the superword_counts.parquet beside it.
"""

from __future__ import annotations

import argparse
import time

import apache_beam as beam
import pyarrow as pa
from apache_beam.io.filesystems import FileSystems

from bpe.superwords.rules import STAGE_TWO_PATTERN
from bpe.tokenizer import Tokenizer
from bpe.training.extension import BaseTable
from bpe.training.superwords import extend_superwords, superword_base_problem, train_superwords, transition_problem
from pipeline.command_machinery.errors import UserError
from pipeline.command_machinery.interrupts import sigterm_as_interrupt
from pipeline.train.stats import TrainStats
from pipeline.train.word_counts import WORD_COUNTS_SCHEMA, read_word_counts, word_count_table
from transforms.count import CountPreTokenTables
from transforms.parquet import WriteParquetTables

__all__ = ["SUPERWORD_COUNTS_FILE", "add_arguments", "check_base", "check_settings", "count", "counts_beside", "learn",
           "wanted"]

SUPERWORD_COUNTS_FILE = "superword_counts.parquet"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--superword-transition", type=int, metavar="T",
                        help="train a superword tokenizer (SuperBPE): ordinary merges up to vocabulary size T "
                        "(without special tokens), then merges that join words up to --vocab-size")
    parser.add_argument("--superword-merges", type=int, metavar="K",
                        help="with --extend: add K superword merges (SuperBPE's stage two) to the base instead "
                        "of --new-tokens ordinary ones; every base ID is kept")


def wanted(args: argparse.Namespace) -> bool:
    """Whether this run learns superword merges (a superword tokenizer, or superwords for --extend)."""
    return getattr(args, "superword_transition", None) is not None or getattr(args, "superword_merges", None) is not None


def check_settings(args: argparse.Namespace) -> None:
    """The flags that go with --superword-transition and --superword-merges, and those that do not.
    Runs before ``extend.check_settings``: --superword-merges K stands for its --new-tokens K.

    Raises:
      UserError: one line naming the flag.
    """
    if not wanted(args):
        return
    flag = "--superword-transition" if args.superword_transition is not None else "--superword-merges"
    if args.superword_transition is not None and args.superword_merges is not None:
        raise UserError("--superword-transition and --superword-merges do not go together: the first trains a "
                        "superword tokenizer, the second adds superwords to an --extend tokenizer")
    for other, given in (("--source-weight", args.source_weight), ("--source-field", args.source_field),
                         ("--parity", args.parity)):
        if given:
            raise UserError(f"{other} does not go with {flag}: superword training learns from one plain count")
    if args.tie_break != "bytes":
        raise UserError(f"--tie-break hf does not go with {flag}: stage two breaks ties by bytes")
    if args.superword_merges is not None:
        if not args.extend:
            raise UserError("--superword-merges goes with --extend BASE (or train a superword tokenizer with "
                            "--superword-transition T)")
        if args.new_tokens is not None:
            raise UserError("--new-tokens does not go with --superword-merges: give the number of superword merges")
        if args.superword_merges < 1:
            raise UserError(f"--superword-merges must be at least 1, not {args.superword_merges}")
        args.new_tokens = args.superword_merges  # what --extend's own checks and ID limit read
        return
    if args.extend:
        raise UserError("--extend does not go with --superword-transition: add superwords to it with "
                        "--superword-merges K")
    if args.vocab_size is None:
        return  # train's own check names --vocab-size
    problem = transition_problem(args.vocab_size, args.superword_transition, len(args.special_token or ()))
    if problem:
        raise UserError(f"--superword-transition: {problem}")


def check_base(args: argparse.Namespace, base: Tokenizer | None) -> None:
    """Refuses an --extend base that cannot take superword merges, before anything is counted.

    Raises:
      UserError: one line saying why.
    """
    if base is not None and wanted(args):
        problem = superword_base_problem(base)
        if problem:
            raise UserError(f"--superword-merges: {args.extend} cannot take superword merges: {problem}")


def count(texts, output: str) -> None:
    """Adds the stage-two count to the count job: ``texts`` (the documents) -> OUT/superword_counts.parquet.

    Every stage-two piece is kept (no ``--min-word-count``): the candidates' counts
    must be exact for stage two to learn the merges of whole documents.
    """
    (
        texts
        | "CountSuperwordPieces" >> CountPreTokenTables(STAGE_TWO_PATTERN, engine="regex", step="count_superwords")
        | "SuperwordsToArrow" >> beam.Map(word_count_table).with_output_types(pa.Table)
        | "WriteSuperwordCounts" >> WriteParquetTables(
            FileSystems.join(output, SUPERWORD_COUNTS_FILE.removesuffix(".parquet")),
            WORD_COUNTS_SCHEMA,
            file_name_suffix=".parquet",
            num_shards=1,
            shard_name_template="",
            # The partitions reach the one writer in whatever order the workers finish them:
            # sorted, the file is the same bytes for any number of workers.
            sort_by=("word",),
        )
    )


def counts_beside(word_counts: str) -> str:
    """The path of the stage-two table that belongs to the word-count table ``word_counts``."""
    return FileSystems.join(FileSystems.split(word_counts)[0], SUPERWORD_COUNTS_FILE)


def learn(args: argparse.Namespace, base: Tokenizer | None, table: dict, resume_from: list, checkpoint,
          stats: TrainStats) -> Tokenizer:
    """The merge phase: stage one on ``table`` (or the --extend ``base``), stage two on the
    superword_counts.parquet beside it.

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
    if base is not None:
        return _extend(args, base, table, superword_counts, checkpoint, stats)
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


def _extend(args: argparse.Namespace, base: Tokenizer, table: dict, superword_counts: dict, checkpoint,
            stats: TrainStats) -> Tokenizer:
    """The merge phase of --extend BASE --superword-merges K, with the stats an extension reports:
    the tokens the corpus takes with the base, and with the extension."""
    started = time.monotonic()
    try:
        with sigterm_as_interrupt():
            extended = extend_superwords(base, superword_counts, args.superword_merges,
                                         min_frequency=args.min_frequency,
                                         progress=False if args.no_progress else None, checkpoint=checkpoint.save,
                                         checkpoint_every=args.checkpoint_every)
    except ValueError as e:
        raise UserError(f"cannot write the extension of {args.extend}: {e}") from None
    stats.seconds["train"] = round(time.monotonic() - started, 3)
    stats.merges = extended.vocab_size - base.vocab_size
    stats.vocab_size = extended.vocab_size
    stats.requested_vocab_size = base.vocab_size + args.superword_merges
    stats.base_vocab_size = base.vocab_size
    stats.tokens_before = BaseTable(base, table).tokens
    encode = extended.piece_encoder.encode_bytes
    stats.tokens_after = sum(count * len(encode(piece)) for piece, count in superword_counts.items())
    return extended
