"""``beam-bpe train --extend BASE --new-tokens K``: new merges on top of an existing tokenizer.

    beam-bpe train --extend cl100k_base.tiktoken --tokenizer-preset cl100k_base \\
        --new-tokens 1000 --input 'corpus/*.txt' --output out/

The count phase is train's, with the base's own pre-tokenizer: its pattern, and
for a Hugging Face file that normalizes text or matches added tokens, the runs of
ordinary text between them (``transforms.ordinary_runs``). The merge phase runs
``bpe.training.trainer.extend_merges`` on the base's encoding of the counted
pieces (``bpe.training.extension``); ``--resume`` continues it from the
checkpoint of new merges. The result is ``OUT/tokenizer.json`` (the base's
tokens with their IDs, the new ones after the base's largest ID), and for a
rank-file base also ``OUT/tokenizer.tiktoken`` where tiktoken's own rule gives
the same IDs. The summary says how many tokens the counted pieces took before
and after.
"""

from __future__ import annotations

import argparse
import time

from apache_beam.io.filesystems import FileSystems

from bpe.presets import ENCODINGS
from bpe.tokenizer import Tokenizer, TokenizerFileError
from bpe.training import extension
from bpe.training.trainer import MAX_TOKEN_ID, extend_merges
from pipeline.command_machinery import outputs
from pipeline.command_machinery.errors import UserError
from pipeline.command_machinery.interrupts import sigterm_as_interrupt
from pipeline.train.stats import TrainStats

__all__ = ["RANK_FILE", "add_arguments", "check_settings", "learn", "load_base", "splits_text", "write_rank_file"]

RANK_FILE = "tokenizer.tiktoken"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--extend", metavar="BASE",
                        help="extend this tokenizer (tokenizer.json, ours or Hugging Face's, its directory, or a "
                        "tiktoken rank file) with --new-tokens new merges, counted with its own pre-tokenizer")
    parser.add_argument("--new-tokens", type=int, metavar="K",
                        help="with --extend: how many tokens to add (IDs after the base's largest)")
    parser.add_argument("--tokenizer-preset", metavar="NAME",
                        help=f"with --extend of a tiktoken rank file: its pattern and special tokens ({', '.join(ENCODINGS)})")


def check_settings(args: argparse.Namespace) -> None:
    """The flags that go with --extend, and those that do not.

    Raises:
      UserError: one line naming the flag.
    """
    if not args.extend:
        for name in ("new_tokens", "tokenizer_preset"):
            if getattr(args, name) is not None:
                raise UserError(f"--{name.replace('_', '-')} goes with --extend")
        return
    if args.new_tokens is None:
        raise UserError("--extend needs --new-tokens K (how many tokens to add)")
    if args.new_tokens < 1:
        raise UserError(f"--new-tokens must be at least 1, not {args.new_tokens}")
    if args.vocab_size is not None:
        raise UserError("--vocab-size does not go with --extend: give --new-tokens (the base's tokens are kept)")
    if args.special_token:
        raise UserError("--special-token does not go with --extend: the base's special tokens are kept")
    if args.pattern != "gpt2":
        raise UserError("--pattern does not go with --extend: the base's own pre-tokenizer counts the corpus")
    if args.tie_break != "bytes":
        raise UserError("--tie-break hf does not go with --extend: new merges break ties by bytes")
    if args.source_weight or args.source_field or args.parity:
        raise UserError("--source-weight, --source-field and --parity do not go with --extend: an extension "
                        "learns its merges from one plain count")


def load_base(args: argparse.Namespace) -> Tokenizer:
    """The --extend tokenizer, whose pre-tokenizer then counts the corpus (``args.pattern``).

    Raises:
      UserError: it cannot be read, has no single pattern, or leaves no room for the new IDs.
    """
    if args.tokenizer_preset is not None and args.tokenizer_preset not in ENCODINGS:
        raise UserError(f"unknown --tokenizer-preset {args.tokenizer_preset!r} (choose from {', '.join(ENCODINGS)})")
    try:
        base = Tokenizer.load(outputs.local_path(args.extend), preset=args.tokenizer_preset)
    except TokenizerFileError as e:
        raise UserError(f"--extend: {e}") from None
    if base.pattern is None:
        raise UserError(f"--extend: {args.extend}'s pre-tokenizer is a chain of steps, not one regex, "
                        "which the count job cannot run")
    if base.vocab_size + args.new_tokens - 1 > MAX_TOKEN_ID:
        raise UserError(f"--new-tokens {args.new_tokens} after ID {base.vocab_size - 1} is too many: "
                        f"token IDs stop at {MAX_TOKEN_ID}")
    args.pattern = base.pattern
    return base


def splits_text(base: Tokenizer) -> bool:
    """Whether counting the base's pieces needs its runs of ordinary text (``transforms.ordinary_runs``)
    rather than the documents: it normalizes text or matches added tokens in it."""
    return base.normalizer is not None or bool(base.added_tokens)


def learn(args: argparse.Namespace, base: Tokenizer, table: dict, resume_from: list, checkpoint,
          stats: TrainStats) -> Tokenizer:
    """The merge phase of an extension: new merges, the extended tokenizer, the stats.

    Raises:
      KeyboardInterrupt: SIGINT or SIGTERM, after the merges so far are saved.
      UserError: the extension has no exact tokenizer.json (the reason).
    """
    started = time.monotonic()
    counted = extension.BaseTable(base, table)
    with sigterm_as_interrupt():
        merges = extend_merges(counted, base, args.new_tokens, min_frequency=args.min_frequency,
                               progress=False if args.no_progress else None, resume_from=resume_from,
                               checkpoint=checkpoint.save, checkpoint_every=args.checkpoint_every)
    try:
        extended = extension.extended_tokenizer(base, merges)
    except ValueError as e:
        raise UserError(f"cannot write the extension of {args.extend}: {e}") from None
    stats.seconds["train"] = round(time.monotonic() - started, 3)
    stats.merges = len(merges)
    stats.vocab_size = extended.vocab_size
    stats.requested_vocab_size = base.vocab_size + args.new_tokens
    stats.base_vocab_size = base.vocab_size
    stats.tokens_before = counted.tokens
    stats.tokens_after = counted.tokens_after(merges, base.vocab_size)
    return extended


def write_rank_file(base: Tokenizer, extended: Tokenizer, output: str, stats: TrainStats) -> None:
    """For a rank-file base, ``OUT/tokenizer.tiktoken`` where tiktoken's rule gives the extension's
    IDs (proven), else the reason in the stats and the summary."""
    if base.kind != "tiktoken":
        return
    # The extension's merges are the base's (derived from its ranks) followed by the new ones.
    merges = extended.merges[len(extended.merges) - stats.merges:] if stats.merges else []
    text, why = extension.rank_file(base, merges)
    if text is None:
        stats.rank_file = f"not written: {why}"
        return
    path = FileSystems.join(output, RANK_FILE)
    outputs.write_atomic(path, text, mime_type="text/plain")
    stats.rank_file = path


def summary_lines(stats: TrainStats) -> list[str]:
    """What an extension adds to train's summary."""
    before, after = stats.tokens_before, stats.tokens_after
    change = f" ({(after - before) / before * 100:+.1f}%)" if before else ""
    lines = [f"beam-bpe train: extended {stats.extend} (vocab size {stats.base_vocab_size:,}) with "
             f"{stats.merges:,} new tokens; the counted pieces take {after:,} tokens instead of {before:,}{change}"]
    if stats.rank_file:
        lines.append(f"  rank file:    {stats.rank_file}")
    return lines

