"""``beam-bpe train``'s checks before any work: the flags' values, the vocabulary, the input files,
and a complete run already in --output (replaced only with --overwrite, continued with --resume).

Each mistake is one line (``UserError``) before the count job starts.
"""

from __future__ import annotations

import argparse
from typing import Iterable

from apache_beam.io.filesystems import FileSystems

import bpe
from bpe.decoder import vocabulary_bytes
from bpe.pretokenize import compile_pattern
from bpe.training.trainer import MAX_TOKEN_ID, special_token_clash, vocab_size_problem
from pipeline.command_machinery import outputs, progress
from pipeline.command_machinery.errors import UserError
from pipeline.train import extend, sources, superwords
from pipeline.train.resume import asked_size, check_finished_result, merge_settings
from pipeline.train.stats import STATS_FILE, TOKENIZER_FILE
from transforms.read import FORMATS, match_inputs

__all__ = ["check_complete", "check_finished", "check_misspelled_flags", "check_settings", "check_vocabulary",
           "match_files"]


def check_misspelled_flags(beam_args: list[str], settings: Iterable[str]) -> None:
    """Refuses our own flags (``settings``: their names with underscores) spelled with
    underscores (--vocab_size).

    Unknown flags go to Beam, which only logs a warning for flags it does not
    know either; --min_frequency would otherwise be silently ignored.
    """
    ours = {key.replace("_", "-") for key in settings} | {"config"}
    for arg in beam_args:
        if arg.startswith("--"):
            name = arg[2:].split("=", 1)[0].replace("_", "-")
            if name in ours:
                raise UserError(f"unknown flag {arg.split('=', 1)[0]}: did you mean --{name}?")


def check_settings(args: argparse.Namespace) -> str:
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
        check_vocabulary(args.vocab_size, args.special_token)
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


def check_complete(args: argparse.Namespace, output: str, base: bpe.Tokenizer | None) -> None:
    """A complete tokenizer in --output is replaced only with --overwrite (or continued
    with --resume, if it is this run's: ``check_finished``): token shards encoded with
    it can be decoded with no other."""
    if args.overwrite:
        return
    if args.resume:
        check_finished(output, {**merge_settings(args, base), **asked_size(args)})  # the table is not known yet
        return
    if outputs.exists(FileSystems.join(output, TOKENIZER_FILE)):
        raise UserError(
            f"{output} already holds the tokenizer of a complete run ({TOKENIZER_FILE}); "
            "pass --overwrite to replace it, or choose another --output"
        )


def check_finished(output: str, learned_with: dict) -> None:
    """With --resume and no --overwrite, a finished tokenizer in --output must be this run's
    (``check_finished_result``): before the job with the settings, after the count with the table."""
    if not outputs.exists(FileSystems.join(output, TOKENIZER_FILE)):
        return
    recorded = outputs.read_json(FileSystems.join(output, STATS_FILE))
    check_finished_result(output, recorded.get("learned_with") if recorded else None, learned_with)


def check_vocabulary(vocab_size: int, specials: list[str]) -> None:
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


def match_files(patterns: list[str]) -> list[str]:
    """The files of the --input patterns, or a UserError saying why there are none."""
    try:
        return match_inputs(patterns)
    except FileNotFoundError as e:
        raise UserError(f"--input: {e}") from None
    except Exception as e:  # noqa: BLE001 - e.g. an unknown scheme or missing credentials
        raise UserError(f"--input: cannot list files: {e}") from None
