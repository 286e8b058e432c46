"""``beam-bpe train``: count pre-tokens with Beam, then learn the merges on one machine.

    beam-bpe train --input 'corpus/*.jsonl.gz' --vocab-size 32000 --output out/

Phase 1 (a Beam job, on any runner): ReadDocuments -> CountPreTokenTables ->
``OUT/word_counts.parquet`` (see ``pipeline.train.word_counts``), and unreadable
records under ``OUT/dead_letters/``. Phase 2 (this process): ``bpe.train`` on
that table -> ``OUT/tokenizer.json``, plus ``OUT/train_stats.json``
(``pipeline.train.stats``).

``--word-counts FILE`` skips phase 1 and trains from an existing table, e.g.
another vocabulary size without recounting the corpus; the table must have been
counted with ``--pattern`` (see ``_given_word_counts``). ``--resume`` skips a
complete phase 1 and continues the merges from their checkpoint (see
``pipeline.train.resume``). ``--source-weight``, ``--source-field`` and
``--parity`` count by source and train weighted or parity-aware
(``pipeline.train.sources``).

Everything the user can get wrong is checked before the job starts and
reported as one line (``pipeline.command_machinery.errors.UserError``).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections import Counter

import apache_beam as beam
import pyarrow as pa
from apache_beam.io.filesystems import FileSystems

import bpe
from bpe.pretokenize import compile_pattern, resolve_pattern
from bpe.decoder import vocabulary_bytes
from bpe.tokenizer_file.roles import ROLES_FILE
from bpe.training.gigatoken_counts import PATTERNS as GIGATOKEN_PATTERNS
from bpe.training.piece_counter import choose_engine
from bpe.training.trainer import MAX_TOKEN_ID, special_token_clash, vocab_size_problem
from pipeline import runtime
from pipeline.command_machinery import outputs, progress
from pipeline.command_machinery.config import Setting, default_help, preset_names, resolve
from pipeline.command_machinery.errors import UserError
from pipeline.command_machinery.interrupts import interrupting_signal, sigterm_as_interrupt
from pipeline.train.resume import (
    CHECKPOINT_FILE, COUNT_MARKER_FILE, Checkpoint, CountMarker, asked_size, check_finished_result, count_settings,
    file_states, fingerprint, merge_settings, recorded_count, resume_command,
)
from pipeline.command_machinery.runners import committed_counters, describe_runner, pipeline_options
from pipeline.train import extend
from pipeline.train import sources
from pipeline.train import superwords
from pipeline.train.stats import TrainStats, summary_lines
from pipeline.train.word_counts import (
    SOURCE_COUNTS_SCHEMA, WORD_COUNTS_FILE, WORD_COUNTS_SCHEMA, read_word_counts, word_count_table,
)
from transforms import metrics
from transforms.count import CountPreTokenTables
from transforms.dead_letters import WriteDeadLetters
from transforms.ordinary_runs import OrdinaryRuns
from transforms.parquet import WriteParquetTables
from transforms.read import FORMATS, ReadDocuments, match_inputs

STATS_FILE = "train_stats.json"
TOKENIZER_FILE = "tokenizer.json"
# The driver's own files, written atomically (a stop may leave their temporary files).
OWN_FILES = (STATS_FILE, TOKENIZER_FILE, ROLES_FILE, CHECKPOINT_FILE, COUNT_MARKER_FILE)

# A run is not what the user asked for, and fails (exit 2), when more than this share of
# the input records are dead letters for one reason (a wrong --text-field or --format) ...
DEAD_LETTER_SHARE = 0.5
# ... or when it learns fewer than this share of the merges --vocab-size asks for
# (unless --allow-smaller-vocab).
MERGES_SHARE = 0.5

# Keys of --config files (flag names with underscores) and their defaults.
SETTINGS = {
    "input": Setting("list", []),
    "vocab_size": Setting("int"),
    "output": Setting("str"),
    "format": Setting("str", "auto"),
    "text_field": Setting("str", "text"),
    "pattern": Setting("str", "gpt2"),
    "special_token": Setting("list", []),
    "min_frequency": Setting("int", 2),
    "tie_break": Setting("str", "bytes"),
    "min_word_count": Setting("int", 1),
    "word_counts": Setting("str"),
    "trust_word_counts": Setting("bool", False),
    "strict": Setting("bool", False),
    "no_progress": Setting("bool", False),
    "progress_every": Setting("str", progress.DEFAULT_EVERY),  # seconds, as checkpoint_every
    "resume": Setting("bool", False),
    "overwrite": Setting("bool", False),
    "allow_smaller_vocab": Setting("bool", False),
    # Seconds, a number; "str" because config.Setting has no float kind.
    "checkpoint_every": Setting("str", "30"),
    "source_weight": Setting("list", []),
    "source_field": Setting("str"),
    "parity": Setting("bool", False),
    "global_merges": Setting("int"),
    "extend": Setting("str"),
    "new_tokens": Setting("int"),
    "tokenizer_preset": Setting("str"),
    "superword_transition": Setting("int"),
    "superword_merges": Setting("int"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds train's flags. Defaults stay None so config files can fill them in."""
    h = default_help(SETTINGS)
    parser.epilog = (
        "Other --flags are Beam pipeline options (--runner, --direct_num_workers, ...). "
        "DirectRunner uses all local cores unless told otherwise."
    )
    parser.add_argument("--input", nargs="+", action="extend", metavar="GLOB",
                        help="corpus files: globs, paths or URLs (gs://, s3://); several, or repeated")
    parser.add_argument("--vocab-size", type=int, metavar="N",
                        help="256 byte tokens + merges + special tokens (required)")
    parser.add_argument("--output", metavar="DIR", help="directory for tokenizer.json and the rest (required)")
    parser.add_argument("--format", metavar="FORMAT", help=h("format", f"one of {', '.join(FORMATS)}"))
    parser.add_argument("--text-field", metavar="NAME", help=h("text_field", "jsonl key / Parquet column of the text"))
    parser.add_argument("--pattern", metavar="PATTERN",
                        help=h("pattern", "pre-tokenizer: gpt2, cl100k, o200k, hf-bytelevel or a regex"))
    parser.add_argument("--tie-break", choices=("bytes", "hf"),
                        help=h("tie_break", "order of pairs with equal counts: bytes (the greatest byte pair) or hf "
                               "(HF tokenizers' BpeTrainer; with --pattern hf-bytelevel it gives HF's merges)"))
    parser.add_argument("--allow-smaller-vocab", action="store_true", default=None,
                        help=f"write the tokenizer even if it learns fewer than {MERGES_SHARE * 100:.0f}%% of the merges "
                        "--vocab-size asks for (no pair reaches --min-frequency); without it such a run fails")
    parser.add_argument("--special-token", action="append", metavar="TOKEN",
                        help="a special token, given its own ID after the merges; repeatable")
    parser.add_argument("--min-frequency", type=int, metavar="N",
                        help=h("min_frequency", "stop when the best pair occurs fewer times"))
    parser.add_argument("--min-word-count", type=int, metavar="N",
                        help=h("min_word_count", "drop pieces seen fewer times in the corpus before training"))
    parser.add_argument("--word-counts", metavar="FILE",
                        help="train from this word-count table instead of reading --input; it must have been "
                        f"counted with --pattern (as the {COUNT_MARKER_FILE} beside it records)")
    parser.add_argument("--trust-word-counts", action="store_true", default=None,
                        help=f"train from a --word-counts table that records no pattern (no matching "
                        f"{COUNT_MARKER_FILE} beside it), taking it as counted with --pattern")
    parser.add_argument("--config", action="append", default=[], metavar="FILE.yaml|PRESET",
                        help="flag values from YAML (keys = flag names with underscores, "
                        f"beam_options = Beam flags), or a shipped preset by name ({', '.join(preset_names())}); "
                        "command-line flags win; repeatable")
    parser.add_argument("--strict", action="store_true", default=None,
                        help="fail (exit 2) if any input record could not be read")
    progress.add_arguments(parser, from_config=True)
    parser.add_argument("--resume", action="store_true", default=None,
                        help=f"continue an interrupted run in --output: skip a complete count phase "
                        f"({COUNT_MARKER_FILE}) and continue the merges from {CHECKPOINT_FILE}")
    parser.add_argument("--overwrite", action="store_true", default=None,
                        help=f"replace the tokenizer of a complete run in --output ({TOKENIZER_FILE}); "
                        "--resume continues a run there without it")
    parser.add_argument("--checkpoint-every", metavar="SECONDS",
                        help=h("checkpoint_every", f"save the merges so far to {CHECKPOINT_FILE} this often"))
    sources.add_arguments(parser)
    extend.add_arguments(parser)
    superwords.add_arguments(parser)


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    started = time.monotonic()
    _check_misspelled_flags(beam_args)
    config_flags = resolve(args, SETTINGS, args.config)
    output = _check_settings(args)
    base = extend.load_base(args) if args.extend else None
    superwords.check_base(args, base)
    options = pipeline_options([*config_flags, *beam_args])
    given_table, given_id = _given_word_counts(args, base) if args.word_counts else (None, None)  # bad: fail now
    files = [] if args.word_counts else _match(args.input)
    rule = sources.source_rule(args, files)  # bad source flags: fail now
    outputs.claim(output, "train", inputs=files)  # ours from here on; never the user's files
    _check_complete(args, output, base)
    stats = TrainStats(
        inputs=[] if args.word_counts else list(args.input),
        files=len(files),
        pattern=args.pattern,
        min_word_count=args.min_word_count,
        min_frequency=args.min_frequency,
        tie_break=args.tie_break,
        special_tokens=list(args.special_token),
        word_counts=args.word_counts or FileSystems.join(output, WORD_COUNTS_FILE),
        parity=bool(args.parity),
        global_merges=args.global_merges or 0,
        **sources.settings(args),
        extend=args.extend,
    )

    if args.word_counts:
        print(f"beam-bpe train: training from {args.word_counts} (not reading any --input)", file=sys.stderr)
        table, table_id = given_table, given_id
    else:
        table_id = _count_phase(args, files, output, options, stats, rule, base)
        outputs.fail_if_strict(args.strict, output, f"not training. Word counts so far: {stats.word_counts}")
        _check_dead_letters(stats, output)
        table = read_word_counts(stats.word_counts)
    if sources.training_weights(args) is not None:  # counted by source
        sources.check_counted(args, table)
        stats.sources = sources.source_stats(table, args)
    stats.word_count_rows = sum(map(len, table.values())) if stats.sources is not None else len(table)
    if stats.unique_pieces is None:
        stats.unique_pieces = len(table)

    checkpoint = Checkpoint(output, table_id, args, base)
    try:
        tokenizer = _merge_phase(args, table, checkpoint, stats, base)
    except KeyboardInterrupt as e:
        # bpe.train saved the merges on its way out (see train_merges).
        signum = interrupting_signal(e)
        print(
            f"beam-bpe train: interrupted ({signal.Signals(signum).name}); {checkpoint.saved:,} merges are saved "
            f"in {checkpoint.path}. To resume: {resume_command()}",
            file=sys.stderr,
        )
        return 128 + signum
    _check_vocabulary_reached(args, tokenizer, checkpoint, stats)
    if base is not None and not superwords.wanted(args):  # a rank file's preset has no stage-two regex
        extend.write_rank_file(base, tokenizer, output, stats)
    _write_results(tokenizer, output, stats, started, checkpoint)
    return 0


def _count_phase(args: argparse.Namespace, files: list[str], output: str, options, stats: TrainStats,
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
    stats.dead_letters = len(outputs.read_dead_letters(output))
    return table_id


def _given_word_counts(args: argparse.Namespace, base: bpe.Tokenizer | None) -> tuple[dict, dict]:
    """The --word-counts table, cut by --min-word-count, and what identifies it for a checkpoint.

    Merges learned on pieces of one pattern are wrong for another (they can never
    occur under it), so the table must have been counted with --pattern: the
    count marker beside it says so, or the user vouches for a table that records
    no pattern with --trust-word-counts.

    Raises:
      UserError: the table is unusable, was counted with another pattern, or records none.
    """
    table = read_word_counts(args.word_counts)
    table_id = fingerprint(args.word_counts)
    counted = recorded_count(outputs.absolute(args.word_counts), table_id)
    sources.check_table(args, table, args.word_counts, counted)
    if counted is None:
        if not args.trust_word_counts:
            raise UserError(
                f"word-count table {args.word_counts} records no pattern (no {COUNT_MARKER_FILE} beside it that "
                f"matches it): pass --trust-word-counts if it was counted with --pattern {args.pattern}"
            )
    elif resolve_pattern(str(counted.get("pattern"))) != resolve_pattern(args.pattern):
        then = counted.get("pattern")
        raise UserError(
            f"word-count table {args.word_counts} was counted with --pattern {then}, not --pattern {args.pattern}: "
            f"train with --pattern {then}, or count the corpus again with --pattern {args.pattern}"
        )
    elif base is not None and extend.splits_text(base) and counted.get("runs_of") != base.sha256:
        raise UserError(
            f"word-count table {args.word_counts} was not counted on the runs of text {args.extend} pre-tokenizes "
            "(it normalizes text or matches added tokens): count the corpus with --extend"
        )
    if args.min_word_count > 1:
        # As the count phase does: pieces seen fewer times are dropped before training.
        table = sources.keep_common(table, args)
        table_id = {**table_id, "min_word_count": args.min_word_count}  # another table for --resume
    return table, table_id


def _merge_phase(args: argparse.Namespace, table: dict, checkpoint: Checkpoint, stats: TrainStats,
                 base: bpe.Tokenizer | None) -> bpe.Tokenizer:
    """Phase 2: learns the merges (new ones on ``base`` when extending), continuing a
    checkpoint with --resume.

    Raises:
      KeyboardInterrupt: SIGINT or SIGTERM, after the merges so far are saved.
    """
    if args.resume and not args.overwrite:  # the table is known now: the finished run's must be this one
        _check_finished(checkpoint.output, checkpoint.learned_with())
    resume_from = checkpoint.load() if args.resume else []
    stats.resumed_from_merges = len(resume_from)
    checkpoint.save(resume_from)  # from here on, --resume continues these merges
    if superwords.wanted(args):
        return superwords.learn(args, base, table, resume_from, checkpoint, stats)
    if base is not None:
        return extend.learn(args, base, table, resume_from, checkpoint, stats)
    train_started = time.monotonic()
    try:
        with sigterm_as_interrupt():
            tokenizer = bpe.train(
                table,
                vocab_size=args.vocab_size,
                pattern=args.pattern,
                special_tokens=args.special_token,
                min_frequency=args.min_frequency,
                progress=False if args.no_progress else None,
                resume_from=resume_from,
                checkpoint=checkpoint.save,
                checkpoint_every=args.checkpoint_every,
                tie_break=args.tie_break,
                weights=sources.training_weights(args),
                parity=bool(args.parity),
                global_merges=args.global_merges or 0,
            )
    except ValueError as e:  # checked up front; kept so a slip is still one line
        raise UserError(str(e)) from None
    stats.seconds["train"] = round(time.monotonic() - train_started, 3)
    stats.merges = len(tokenizer.merges)
    stats.vocab_size = tokenizer.vocab_size
    stats.requested_vocab_size = args.vocab_size
    return tokenizer


def _check_dead_letters(stats: TrainStats, output: str) -> None:
    """Refuses to train when more than ``DEAD_LETTER_SHARE`` of the input records are dead
    letters for one reason: that is a wrong --text-field or --format, not a corpus.

    A reason is its text up to the first ": " (``malformed JSON: ...`` is one reason
    whatever the detail). Needs the runner's document counter: without it (None) the
    share is unknown and nothing is refused.

    Raises:
      UserError: naming the reason, the first such record and where the outputs are.
    """
    if not stats.dead_letters or stats.documents is None:
        return
    records = stats.documents + stats.dead_letters
    if stats.dead_letters <= records * DEAD_LETTER_SHARE:
        return
    letters = outputs.read_dead_letters(output)
    reasons = Counter(letter["reason"].split(": ", 1)[0] for letter in letters)
    reason, count = reasons.most_common(1)[0]
    if count <= records * DEAD_LETTER_SHARE:
        return
    first = next(letter for letter in letters if letter["reason"].split(": ", 1)[0] == reason)
    where = "whole file" if first["record"] == -1 else f"record {first['record']}"
    raise UserError(
        f"{count:,} of {records:,} input records are dead letters for one reason ({reason}, e.g. {first['file']} "
        f"{where}): not training; is --text-field or --format wrong? They are listed in "
        f"{FileSystems.join(output, outputs.DEAD_LETTERS_DIR)}/; the counts of the rest are in "
        f"{stats.word_counts} (--word-counts trains from them)"
    )


def _check_vocabulary_reached(args: argparse.Namespace, tokenizer: bpe.Tokenizer, checkpoint: Checkpoint,
                              stats: TrainStats) -> None:
    """Refuses a tokenizer with fewer than ``MERGES_SHARE`` of the merges asked for, unless
    --allow-smaller-vocab: it is not the vocabulary the user asked for. The merges stay
    in the checkpoint, so ``--resume --allow-smaller-vocab`` writes it without training again.

    Raises:
      UserError: saying how many merges were learned and where they are.
    """
    wanted = stats.requested_vocab_size - (stats.base_vocab_size or 256 + len(args.special_token))
    learned = stats.merges
    if args.allow_smaller_vocab or learned >= wanted * MERGES_SHARE:
        return
    asked = f"--new-tokens {args.new_tokens}" if args.extend else f"--vocab-size {args.vocab_size}"
    raise UserError(
        f"learned only {learned:,} of the {wanted:,} merges {asked} asks for (no pair occurs "
        f"{args.min_frequency}+ times in the rest), so the vocabulary would be {tokenizer.vocab_size:,}: not writing "
        f"{TOKENIZER_FILE}. The merges are saved in {checkpoint.path}: rerun with --resume --allow-smaller-vocab "
        f"to write that tokenizer, or use a larger corpus, a lower --min-frequency or a smaller {asked.split()[0]}"
    )


def _write_results(tokenizer: bpe.Tokenizer, output: str, stats: TrainStats, started: float,
                   checkpoint: Checkpoint) -> None:
    """Writes tokenizer.json with, beside it, tokenizer_config.json for the roles the file cannot
    declare (an extension keeps its base's EOS) or none (one left in the folder would lend its roles),
    and train_stats.json; then prints the summary."""
    tokenizer_path = FileSystems.join(output, TOKENIZER_FILE)
    stats_path = FileSystems.join(output, STATS_FILE)
    roles_path, roles_config = FileSystems.join(output, ROLES_FILE), tokenizer.roles_config()
    if roles_config is None:
        outputs.remove(roles_path)
    else:
        outputs.write_atomic(roles_path, roles_config, mime_type="application/json")
    outputs.write_atomic(tokenizer_path, tokenizer.to_json(), mime_type="application/json")
    stats.seconds["total"] = round(time.monotonic() - started, 3)
    stats.learned_with = checkpoint.learned_with()
    outputs.write_atomic(stats_path, stats.to_json(), mime_type="application/json")
    checkpoint.remove()  # only now: until tokenizer.json is whole, --resume needs it
    lines = summary_lines(stats, tokenizer_path, stats_path, output)
    if stats.extend is not None:
        learned = next(i for i, line in enumerate(lines) if line.startswith("beam-bpe train: learned"))
        lines[learned + 1:learned + 1] = extend.summary_lines(stats)
    print("\n".join(lines), file=sys.stderr)
    if stats.dead_letters:
        outputs.print_dead_letters(outputs.read_dead_letters(output), output, file=sys.stderr)


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
    stale = outputs.dead_letter_files(output)
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


# --- Checks before any work --------------------------------------------------------


def _check_misspelled_flags(beam_args: list[str]) -> None:
    """Refuses our own flags spelled with underscores (--vocab_size).

    Unknown flags go to Beam, which only logs a warning for flags it does not
    know either; --min_frequency would otherwise be silently ignored.
    """
    ours = {key.replace("_", "-") for key in SETTINGS} | {"config"}
    for arg in beam_args:
        if arg.startswith("--"):
            name = arg[2:].split("=", 1)[0].replace("_", "-")
            if name in ours:
                raise UserError(f"unknown flag {arg.split('=', 1)[0]}: did you mean --{name}?")


def _check_settings(args: argparse.Namespace) -> str:
    """Checks every value that does not need the file system; returns the output dir."""
    sources.check_settings(args)
    superwords.check_settings(args)  # first: --superword-merges K gives --extend its --new-tokens K
    extend.check_settings(args)
    if args.vocab_size is None and not args.extend:
        raise UserError("--vocab-size is required (or --extend BASE --new-tokens K)")
    if not args.output:
        raise UserError("--output is required")
    if not args.input and not args.word_counts:
        raise UserError("--input is required (or --word-counts to train from an existing table)")
    if args.format not in FORMATS:
        raise UserError(f"unknown --format {args.format!r}: use one of {', '.join(FORMATS)}")
    if not args.text_field:
        raise UserError("--text-field must not be empty")
    try:
        compile_pattern(args.pattern)
    except ValueError as e:
        raise UserError(f"--pattern: {e}") from None
    if not args.extend:
        _check_vocabulary(args.vocab_size, args.special_token)
    if args.min_frequency < 1:
        raise UserError(f"--min-frequency must be at least 1, not {args.min_frequency}")
    if args.min_word_count < 1:
        raise UserError(f"--min-word-count must be at least 1, not {args.min_word_count}")
    try:
        args.checkpoint_every = float(args.checkpoint_every)
    except ValueError:
        args.checkpoint_every = -1.0
    if not args.checkpoint_every >= 0:  # also NaN
        raise UserError("--checkpoint-every must be a number of seconds, at least 0")
    progress.check_arguments(args)
    args.input = [outputs.absolute(pattern) for pattern in args.input]
    return outputs.absolute(args.output)


def _check_complete(args: argparse.Namespace, output: str, base: bpe.Tokenizer | None) -> None:
    """A complete tokenizer in --output is replaced only with --overwrite (or continued
    with --resume, if it is this run's: ``_check_finished``): token shards encoded with
    it can be decoded with no other."""
    if args.overwrite:
        return
    if args.resume:
        _check_finished(output, {**merge_settings(args, base), **asked_size(args)})  # the table is not known yet
        return
    if outputs.exists(FileSystems.join(output, TOKENIZER_FILE)):
        raise UserError(
            f"{output} already holds the tokenizer of a complete run ({TOKENIZER_FILE}); "
            "pass --overwrite to replace it, or choose another --output"
        )


def _check_finished(output: str, learned_with: dict) -> None:
    """With --resume and no --overwrite, a finished tokenizer in --output must be this run's
    (``check_finished_result``): before the job with the settings, after the count with the table."""
    if not outputs.exists(FileSystems.join(output, TOKENIZER_FILE)):
        return
    recorded = outputs.read_json(FileSystems.join(output, STATS_FILE))
    check_finished_result(output, recorded.get("learned_with") if recorded else None, learned_with)


def _check_vocabulary(vocab_size: int, specials: list[str]) -> None:
    """--vocab-size and --special-token: room for the bytes and the specials, IDs in range, and
    no special token that a byte token spells (``special_token_clash``)."""
    if any(not token for token in specials):
        raise UserError("--special-token must not be empty")
    duplicates = sorted({t for t in specials if specials.count(t) > 1})
    if duplicates:
        raise UserError(f"--special-token given twice: {', '.join(duplicates)}")
    clash = special_token_clash(specials, vocabulary_bytes())  # a byte's; a learned token's after training
    if clash:
        raise UserError(f"--special-token: {clash}")
    problem = vocab_size_problem(vocab_size, len(specials))
    if problem:
        raise UserError(f"--vocab-size {vocab_size} {problem}")
    if vocab_size - len(specials) - 1 > MAX_TOKEN_ID:
        raise UserError(f"--vocab-size {vocab_size} is too large: token IDs stop at {MAX_TOKEN_ID}")


def _match(patterns: list[str]) -> list[str]:
    try:
        return match_inputs(patterns)
    except FileNotFoundError as e:
        raise UserError(f"--input: {e}") from None
    except Exception as e:  # noqa: BLE001 - e.g. an unknown scheme or missing credentials
        raise UserError(f"--input: cannot list files: {e}") from None
