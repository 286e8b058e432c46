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

from apache_beam.io.filesystems import FileSystems

import bpe
from bpe.pretokenize import resolve_pattern
from bpe.tokenizer_file.roles import ROLES_FILE
from pipeline.command_machinery import outputs, progress, unreadable_records
from pipeline.command_machinery.config import Setting, default_help, preset_names, resolve
from pipeline.command_machinery.errors import UserError
from pipeline.command_machinery.interrupts import interrupting_signal, sigterm_as_interrupt
from pipeline.command_machinery.runners import pipeline_options
from pipeline.train import checks, count_job, extend, sources, superwords
from pipeline.train.resume import CHECKPOINT_FILE, COUNT_MARKER_FILE, Checkpoint, fingerprint, recorded_count, resume_command
from pipeline.train.stats import STATS_FILE, TOKENIZER_FILE, TrainStats, summary_lines
from pipeline.train.word_counts import WORD_COUNTS_FILE, read_word_counts
from transforms.read import FORMATS

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
    checks.check_misspelled_flags(beam_args, SETTINGS)
    config_flags = resolve(args, SETTINGS, args.config)
    output = checks.check_settings(args)
    base = extend.load_base(args) if args.extend else None
    superwords.check_base(args, base)
    options = pipeline_options([*config_flags, *beam_args])
    given_table, given_id = _given_word_counts(args, base) if args.word_counts else (None, None)  # bad: fail now
    files = [] if args.word_counts else checks.match_files(args.input)
    rule = sources.source_rule(args, files)  # bad source flags: fail now
    outputs.claim(output, "train", inputs=files)  # ours from here on; never the user's files
    checks.check_complete(args, output, base)
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
        table_id = count_job.count_phase(args, files, output, options, stats, rule, base)
        unreadable_records.fail_if_strict(args.strict, output, f"not training. Word counts so far: {stats.word_counts}")
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
        checks.check_finished(checkpoint.output, checkpoint.learned_with())
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
    letters = unreadable_records.read_dead_letters(output)
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
        unreadable_records.print_dead_letters(unreadable_records.read_dead_letters(output), output, file=sys.stderr)
