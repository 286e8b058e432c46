"""``beam-bpe train``'s phase 1: the Beam job that counts the corpus into ``OUT/word_counts.parquet``
(``pipeline.train.word_counts``), its unreadable records under ``OUT/dead_letters/``, or the
complete count that ``--resume`` finds there (``pipeline.train.resume.CountMarker``).

    table_id = count_phase(args, files, output, options, stats, rule, base)   # fills stats
    counters = run_count_job(args, output, options)                           # the job alone
"""

from __future__ import annotations

import argparse
import sys
import time

import apache_beam as beam
import pyarrow as pa
from apache_beam.io.filesystems import FileSystems

import bpe
from bpe.pretokenize import resolve_pattern
from bpe.tokenizer_file.roles import ROLES_FILE
from bpe.training.gigatoken_counts import PATTERNS as GIGATOKEN_PATTERNS
from bpe.training.piece_counter import choose_engine
from pipeline import runtime
from pipeline.command_machinery import outputs, progress, unreadable_records
from pipeline.command_machinery.runners import committed_counters, describe_runner
from pipeline.train import extend, sources, superwords
from pipeline.train.resume import CHECKPOINT_FILE, COUNT_MARKER_FILE, CountMarker, count_settings, file_states, fingerprint
from pipeline.train.stats import STATS_FILE, TOKENIZER_FILE, TrainStats
from pipeline.train.word_counts import SOURCE_COUNTS_SCHEMA, WORD_COUNTS_FILE, WORD_COUNTS_SCHEMA, word_count_table
from transforms import metrics
from transforms.count import CountPreTokenTables
from transforms.dead_letters import WriteDeadLetters
from transforms.ordinary_runs import OrdinaryRuns
from transforms.parquet import WriteParquetTables
from transforms.read import ReadDocuments

__all__ = ["count_phase", "run_count_job"]

# The driver's own files, written atomically (a stop may leave their temporary files).
OWN_FILES = (STATS_FILE, TOKENIZER_FILE, ROLES_FILE, CHECKPOINT_FILE, COUNT_MARKER_FILE)


def count_phase(args: argparse.Namespace, files: list[str], output: str, options, stats: TrainStats,
                 rule: sources.SourceRule | None, base: bpe.Tokenizer | None) -> dict:
    """Phase 1: counts the corpus into OUT/word_counts.parquet (with ``base``'s pre-tokenizer
    when extending), unless --resume finds that count complete. Fills ``stats``; returns
    the table's fingerprint."""
    runs_of = args.extend if base is not None and extend.splits_text(base) else None
    settings = count_settings(args, files, runs_of=base.sha256 if runs_of else None)
    marker = CountMarker(output, settings, file_states(files))
    complete = marker.load(stats.word_counts) if args.resume else None
    if complete is not None:
        print(f"beam-bpe train: the count phase is complete ({marker.path}); not counting again", file=sys.stderr)
        stats.take_counted(complete["stats"])
        table_id = complete["table"]
    else:
        marker.remove()
        stats.runner = describe_runner(options)
        count_started = time.monotonic()
        counters = run_count_job(args, output, options, files=len(files), rule=rule, runs_of=runs_of)
        stats.seconds["count"] = round(time.monotonic() - count_started, 3)
        for name in ("documents", "bytes", "pieces", "unique_pieces"):
            setattr(stats, name, counters.get(metrics.key("count", name)))
        if runs_of is not None:  # the count step saw runs of text: the documents are the reader's
            stats.documents = counters.get(metrics.key("read", "documents"))
        table_id = fingerprint(stats.word_counts)
        marker.write(table_id, stats)
    # The files are the source of truth; counters are for reporting only.
    stats.dead_letters = len(unreadable_records.read_dead_letters(output))
    return table_id


def run_count_job(args: argparse.Namespace, output: str, options, files: int | None = None,
                  rule: sources.SourceRule | None = None, runs_of: str | None = None) -> dict[tuple[str, str], int]:
    """Runs the counting job (phase 1) into ``output``; returns its counters ({} if the
    runner has none). ``args`` needs input, format, text_field, pattern, min_word_count,
    no_progress and progress_every (seconds); ``files``: how many input files, for the
    progress; ``rule``: count by source (``pipeline.train.sources``), reading
    ``args.source_field``; ``runs_of``: a tokenizer whose runs of ordinary text are
    counted (``transforms.ordinary_runs``) instead of the documents (never with ``rule``)."""
    # Dead letters of a previous run would be mistaken for ours, and Beam's temporary
    # directories of a job that was stopped are never removed by Beam.
    stale = unreadable_records.dead_letter_files(output)
    if stale:
        FileSystems.delete(stale)
    outputs.delete(output, (outputs.BEAM_TEMP_GLOB, *(outputs.temporary_path(name) for name in OWN_FILES)))
    outputs.delete(FileSystems.join(output, outputs.DEAD_LETTERS_DIR), (outputs.BEAM_TEMP_GLOB,))

    if runs_of is None:
        _say_why_pieces_are_counted_by_regex(args.pattern)
    pipeline = runtime.new_pipeline(options)
    source_field = getattr(args, "source_field", None) if rule is not None else None
    read = pipeline | "ReadDocuments" >> ReadDocuments(
        args.input, format=args.format, text_field=args.text_field, id_field=source_field
    )
    texts = read.documents if runs_of is None else read.documents | "OrdinaryRuns" >> OrdinaryRuns(runs_of)
    (
        texts
        | "CountPreTokens" >> CountPreTokenTables(args.pattern, min_word_count=args.min_word_count, sources=rule)
        | "ToArrow" >> beam.Map(word_count_table).with_output_types(pa.Table)
        # One file with exactly this name: one shard, no shard numbers in the
        # name, written by Beam's sink (temp file + rename) on any runner.
        | "WriteWordCounts" >> WriteParquetTables(
            FileSystems.join(output, WORD_COUNTS_FILE.removesuffix(".parquet")),
            WORD_COUNTS_SCHEMA if rule is None else SOURCE_COUNTS_SCHEMA,
            file_name_suffix=".parquet",
            num_shards=1,
            shard_name_template="",
            # The partitions reach the one writer in whatever order the workers finish them:
            # sorted by word bytes, the file is the same with any workers and on any runner.
            sort_by=("word", "source") if rule is not None else ("word",),
        )
    )
    if superwords.wanted(args):
        superwords.count(texts, output)
    read.dead_letters | "WriteDeadLetters" >> WriteDeadLetters(output)
    kept = (f"no counts are kept in {output} (the next run removes the leftovers): rerun the same command, "
            "with or without --resume, to count again")
    shown = progress.Progress("train", "count", files=files, enabled=not args.no_progress, every=args.progress_every)
    with runtime.stop_at_once("train", kept):
        result = shown.run(pipeline)
    return committed_counters(result)


def _say_why_pieces_are_counted_by_regex(pattern: str) -> None:
    """One line when gigatoken could count the pattern's pieces but does not here (not
    installed, or the installed release splits unlike regex): the remedy is the user's."""
    engine, why = choose_engine(pattern)
    if engine == "regex" and resolve_pattern(pattern) in GIGATOKEN_PATTERNS:
        print(f"beam-bpe train: counting pieces with regex, not gigatoken (several times slower): {why}",
              file=sys.stderr)
