"""``beam-bpe prune``: a tokenizer without its least-used tokens on a corpus, and the old -> new ID map.

    beam-bpe prune --tokenizer tok/ --input 'corpus/*.jsonl.gz' --vocab-size N --output DIR [Beam pipeline options]

A Beam job reads the corpus with the reader of the other commands (bad records
go to ``DIR/dead_letters/``) and counts how often the tokenizer produces each
token (``transforms.token_use.CountTokenUse``). The driver then removes the
least-used leaf tokens until N remain (``bpe.pruning``: never a single byte, a
special or an added token, never a token a kept token is built from) and
writes:

- ``DIR/tokenizer.json``: the pruned tokenizer, IDs renumbered compactly in the base's order
  (and ``DIR/tokenizer_config.json`` with the base's roles the file cannot declare, such as a
  rank file's EOS: ``bpe.tokenizer_file.roles``);
- ``DIR/id_map.json``: a JSON list, entry i the new ID of old ID i or null if removed;
- ``DIR/removed.json``: the removed tokens in the order removed, with their counts;
- ``DIR/stats.json``, written last (the completion marker): the corpus, both
  tokenizers and the corpus's tokens before and after, which a second pass of
  the job counts with the pruned tokenizer.

The output follows the job-output contract of ``pipeline.command_machinery.outputs``; a complete result is
replaced only with ``--overwrite`` (it stays whole until the new one is complete).
"""

from __future__ import annotations

import argparse
import json
import sys

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from bpe import proof_cache
from bpe.pruning import PruneError, check_prunable, token_count
from bpe.pruning import prune as prune_tokenizer
from bpe.tokenizer import FILE_NAME, Tokenizer
from bpe.tokenizer_file.roles import ROLES_FILE
from pipeline import runtime
from pipeline.command_machinery import outputs, progress, tokenizer_flags, unreadable_records
from pipeline.command_machinery.errors import UserError
from pipeline.command_machinery.runners import describe_runner, pipeline_options
from pipeline.report.json_report import ratio, token_text
from pipeline.report.measures import read_measures, write_measures
from transforms.dead_letters import WriteDeadLetters
from transforms.read import FORMATS, ReadDocuments, match_inputs
from transforms.token_use import CountTokenUse

__all__ = ["add_arguments", "run"]

ID_MAP_FILE = "id_map.json"
REMOVED_FILE = "removed.json"
STATS_FILE = "stats.json"
RESULTS = (FILE_NAME, ROLES_FILE, ID_MAP_FILE, REMOVED_FILE, f"{outputs.DEAD_LETTERS_DIR}/{outputs.DEAD_LETTER_GLOB}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    tokenizer_flags.add_arguments(parser)
    parser.add_argument("--input", required=True, action="append", help="input glob (repeatable)")
    parser.add_argument("--vocab-size", required=True, type=int,
                        help="tokens the pruned tokenizer keeps, special and added tokens included")
    parser.add_argument("--output", required=True,
                        help="directory for tokenizer.json, id_map.json, removed.json, stats.json and dead_letters/")
    parser.add_argument("--format", default="auto", help=f"input format: {', '.join(FORMATS)} (default auto)")
    parser.add_argument("--text-field", default="text", help="jsonl key / Parquet column of the text")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace a complete result in --output (it stays whole until the new one is complete)")
    progress.add_arguments(parser)


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    options = pipeline_options(beam_args)
    args.input = [outputs.absolute(pattern) for pattern in args.input]
    args.output = outputs.absolute(args.output)
    args.tokenizer = outputs.absolute(args.tokenizer)
    output = outputs.StagedOutput(args.output, RESULTS, marker=STATS_FILE, command="prune")
    base = _check_arguments(args, output)
    staging = output.staging
    output.clear_leftovers()

    before = _count(args, options, args.tokenizer, args.tokenizer_preset, base, "before", dead_letters=staging)
    if before is None:
        raise UserError(f"no documents in {', '.join(args.input)} (see {output.keep_dead_letters()}/): "
                        "pruning needs the tokens' use on a corpus")
    pruned = prune_tokenizer(base, before["counts"], args.vocab_size)
    pruned_path = pruned.tokenizer.save(FileSystems.join(staging, FILE_NAME))
    outputs.write_atomic(FileSystems.join(staging, ID_MAP_FILE), json.dumps(pruned.id_map) + "\n")
    removed = [_removed(base, token_id, before["counts"][token_id]) for token_id in pruned.removed]
    outputs.write_atomic(FileSystems.join(staging, REMOVED_FILE), outputs.readable_json(removed, 1) + "\n")
    after = _count(args, options, pruned_path, None, pruned.tokenizer, "after")
    if after is None or (after["documents"], after["bytes"]) != (before["documents"], before["bytes"]):
        read = (0, 0) if after is None else (after["documents"], after["bytes"])
        raise UserError(f"the corpus changed while prune ran: {before['documents']:,} documents "
                        f"({before['bytes']:,} bytes) in the first pass, {read[0]:,} ({read[1]:,} bytes) in the "
                        "second; nothing was published")

    dead_letters = len(unreadable_records.read_dead_letters(staging))
    stats = {
        "corpus": {"inputs": args.input, "documents": before["documents"], "bytes": before["bytes"],
                   "dead_letters": dead_letters},
        "base": {"path": args.tokenizer, "sha256": base.sha256, "tokens": token_count(base)},
        "pruned": {"sha256": pruned.tokenizer.sha256, "tokens": token_count(pruned.tokenizer)},
        "removed": len(pruned.removed),
        "removed_uses": int(sum(entry["count"] for entry in removed)),
        "tokens_before": before["tokens"],
        "tokens_after": after["tokens"],
        "bytes_per_token_before": ratio(before["bytes"], before["tokens"]),
        "bytes_per_token_after": ratio(after["bytes"], after["tokens"]),
    }
    output.publish(stats)
    change = ratio(100 * (after["tokens"] - before["tokens"]), before["tokens"]) or 0.0
    print(
        f"beam-bpe prune: counted token use on {before['documents']:,} documents ({before['bytes']:,} bytes), "
        f"{dead_letters:,} dead letters ({describe_runner(options)})\n"
        f"beam-bpe prune: removed {len(pruned.removed):,} of {token_count(base):,} tokens -> vocab size "
        f"{args.vocab_size:,}; tokens on the corpus {before['tokens']:,} -> {after['tokens']:,} ({change:+.2f}%)\n"
        f"  tokenizer: {FileSystems.join(args.output, FILE_NAME)}\n"
        f"  id map:    {FileSystems.join(args.output, ID_MAP_FILE)}\n"
        f"  removed:   {FileSystems.join(args.output, REMOVED_FILE)}",
        file=sys.stderr,
    )
    return 0


def _check_arguments(args: argparse.Namespace, output: outputs.StagedOutput) -> Tokenizer:
    """Fails before the job on any user mistake; returns the base tokenizer."""
    if args.format not in FORMATS:
        raise UserError(f"unknown --format {args.format!r} (choose from {', '.join(FORMATS)})")
    progress.check_arguments(args)
    base = tokenizer_flags.load(args)
    try:
        check_prunable(base, args.vocab_size)
    except PruneError as e:
        raise UserError(str(e)) from None
    try:
        files = match_inputs(args.input)
    except FileNotFoundError as e:
        raise UserError(str(e)) from None
    outputs.claim(args.output, "prune", inputs=files)  # ours from here on; never the user's files
    args.files = len(files)  # for the progress
    if output.is_complete() and not args.overwrite:
        raise UserError(f"{args.output} already holds a pruned tokenizer of a complete run ({STATS_FILE}); "
                        "pass --overwrite to replace it, or choose another --output")
    return base


def _count(args, options, path: str, preset: str | None, tokenizer: Tokenizer, name: str,
           dead_letters: str | None = None) -> dict | None:
    """One Beam job: the token use of ``tokenizer`` on the corpus, as {counts, documents, bytes,
    tokens}, or None without documents; ``dead_letters``: where the job writes them."""
    staging = FileSystems.join(args.output, outputs.STAGING_DIR)
    p = runtime.new_pipeline(options)
    read = p | "Read" >> ReadDocuments(args.input, format=args.format, text_field=args.text_field)
    _ = (
        read.documents
        | "CountTokenUse" >> CountTokenUse(path, proof_cache.proven(tokenizer), tokenizer.vocab_size, preset)
        | "WriteCounts" >> beam.Map(lambda use: (name, {"counts": use.counts.tolist(), "documents": use.documents,
                                                        "bytes": use.bytes, "tokens": use.tokens}))
        | "Write" >> beam.Map(write_measures, staging)
    )
    if dead_letters is not None:
        _ = read.dead_letters | "WriteDeadLetters" >> WriteDeadLetters(dead_letters)
    phase = "count token use" if dead_letters is not None else "count again with the pruned tokenizer"
    progress.Progress("prune", phase, files=args.files, enabled=not args.no_progress,
                      every=args.progress_every).run(p)
    return read_measures(staging).get(name)


def _removed(tokenizer: Tokenizer, token_id: int, count: int) -> dict:
    data = tokenizer.token_bytes(token_id)
    return {"id": token_id, "text": token_text(data), "hex": data.hex(), "count": int(count)}
