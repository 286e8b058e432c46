"""``beam-bpe encode``: a corpus -> token-ID Parquet shards, dead letters and stats.json.

    beam-bpe encode --tokenizer out/ --input 'corpus/*.jsonl.gz' --output shards/ \
        [--append-eos] [--num-shards N] [Beam pipeline options]

Everything a user can get wrong (tokenizer file, EOS token, inputs, format,
runner) is checked before the job starts. After the job, stats.json is computed
from what was written (the shards' Parquet footers and the dead-letter files),
not from runner metrics, so it describes the output exactly.

Crash safety: **stats.json is the completion marker.** An output directory is
complete exactly when DIR/stats.json exists; it is written last, atomically
(written beside as ``.stats.json.tmp``, then renamed). The job itself writes only
into ``DIR/.staging/`` (shards, dead letters, Beam's ``beam-temp-*`` dirs), so a
killed job leaves nothing but scratch files there. On success the driver, in
this order: computes the stats from the staged files; removes a replaced
result's stats.json (the old marker first), shards and dead letters; moves the
new shards and dead letters into DIR; removes ``.staging``; writes stats.json.
A crash at any point leaves a directory without stats.json, which a rerun
treats as leftovers: it removes them (saying so in one line on stderr) and
starts over. A directory that already holds a complete result is refused unless
``--overwrite``; with it the old result stays whole until the new one is ready.
(stats.json rather than a separate ``_SUCCESS`` file: readers already look for
it, and directories written before staging existed, where stats.json was also
written last, are recognised as complete.)
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
from typing import Sequence

import apache_beam as beam
import pyarrow.parquet as pq
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from bpe.tokenizer import Tokenizer, TokenizerFileError
from pipeline.errors import UserError
from pipeline.runners import describe_runner, new_pipeline, pipeline_options
from transforms.dead_letters import WriteDeadLetters
from transforms.encode import EncodeDocuments, eos_token_id, exists, read_tokenizer
from transforms.read import FORMATS, ReadDocuments, match_inputs
from transforms.shards import INPUT_BYTES_KEY, SHA256_KEY, SHARD_GLOB, WriteTokenShards

STATS_FILE = "stats.json"  # written last: the completion marker
STATS_TMP = ".stats.json.tmp"
STAGING_DIR = ".staging"  # where the job writes; hidden from pyarrow.dataset and globs
DEAD_LETTERS_DIR = "dead_letters"
DEAD_LETTER_GLOB = "dead_letters-*-of-*.jsonl"
# The result besides stats.json, and scratch files: names a run may leave in DIR.
RESULT_NAMES = (SHARD_GLOB, DEAD_LETTERS_DIR)
SCRATCH_NAMES = (STAGING_DIR, "beam-temp-*", STATS_TMP)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tokenizer", required=True, help="tokenizer.json, or a directory holding it")
    parser.add_argument("--input", required=True, action="append", help="input glob (repeatable)")
    parser.add_argument(
        "--output", required=True,
        help="directory for the shards, dead_letters/ and stats.json; stats.json is written last and "
        "marks the directory complete (leftovers of a run that did not complete are removed on rerun)",
    )
    parser.add_argument("--format", default="auto", help=f"input format: {', '.join(FORMATS)} (default auto)")
    parser.add_argument("--text-field", default="text", help="jsonl key / Parquet column of the text")
    parser.add_argument("--id-field", default=None, help="jsonl key / Parquet column of the document id")
    parser.add_argument("--append-eos", action="store_true", help="append the EOS token to every document")
    parser.add_argument("--eos-token", default=None, help="the EOS special token (default: the first special token)")
    parser.add_argument("--num-shards", type=int, default=0, help="number of shard files (default: automatic)")
    parser.add_argument("--strict", action="store_true", help="fail (exit 2) if any input record was unreadable")
    parser.add_argument(
        "--overwrite", action="store_true",
        help="replace a complete result in --output (it stays whole until the new one is complete)",
    )
    parser.epilog = (
        "Crash safety: the job writes into OUTPUT/.staging/; shards and dead letters are moved into "
        "OUTPUT when it succeeds, and stats.json is written last as the completion marker. A directory "
        "without stats.json is incomplete: rerunning removes its leftovers and starts over."
    )


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    options = pipeline_options(beam_args)
    # Workers of portable runners may run in another directory: give them absolute local paths.
    args.tokenizer, args.output = _absolute(args.tokenizer), _absolute(args.output)
    args.input = [_absolute(pattern) for pattern in args.input]
    tokenizer, eos_id = _check_arguments(args)
    tokenizer_sha256, vocab_size = tokenizer.sha256, tokenizer.vocab_size
    # The proof that tiktoken gives our IDs is O(vocabulary): run it once here.
    fast, reason = tokenizer.fast_encoder()
    print(f"beam-bpe encode: {reason}", file=sys.stderr)
    _prepare_output(args.output, overwrite=args.overwrite)
    staging = FileSystems.join(args.output, STAGING_DIR)

    with new_pipeline(options) as p:
        read = p | "Read" >> ReadDocuments(
            args.input, format=args.format, text_field=args.text_field, id_field=args.id_field
        )
        rows = read.documents | "Encode" >> EncodeDocuments(
            args.tokenizer,
            append_eos=args.append_eos,
            eos_token=args.eos_token,
            tokenizer_sha256=tokenizer_sha256,
            use_tiktoken=fast is not None,
            tiktoken_proven=True,
        )
        _ = rows | "WriteShards" >> WriteTokenShards(
            staging, tokenizer_sha256, vocab_size, num_shards=args.num_shards, eos_token_id=eos_id
        )
        _ = read.dead_letters | "WriteDeadLetters" >> WriteDeadLetters(staging)

    stats = collect_stats(staging, tokenizer_sha256)
    _publish(staging, args.output, stats)
    print(
        f"beam-bpe encode: {stats['documents']} documents, {stats['tokens']} tokens "
        f"({stats['bytes_per_token']:.2f} bytes/token), {stats['dead_letters']} dead letters, "
        f"{len(stats['shards'])} shards in {args.output} ({describe_runner(options)})",
        file=sys.stderr,
    )
    if args.strict and stats["dead_letters"]:
        raise UserError(
            f"{stats['dead_letters']} input records could not be read (see "
            f"{FileSystems.join(args.output, 'dead_letters')}); failing because of --strict"
        )
    return 0


def _absolute(path: str) -> str:
    return path if "://" in path else os.path.abspath(path)


def _check_arguments(args: argparse.Namespace) -> tuple[Tokenizer, int | None]:
    """Fails before the job on any user mistake; returns (tokenizer, EOS ID)."""
    if args.format not in FORMATS:
        raise UserError(f"unknown --format {args.format!r} (choose from {', '.join(FORMATS)})")
    if args.num_shards < 0:
        raise UserError(f"--num-shards must be 0 (automatic) or more, not {args.num_shards}")
    if args.eos_token is not None and not args.append_eos:
        raise UserError("--eos-token needs --append-eos")
    try:
        tokenizer = read_tokenizer(args.tokenizer)
    except TokenizerFileError as e:
        raise UserError(str(e)) from None
    eos_id = None
    if args.append_eos:
        try:
            eos_id = eos_token_id(tokenizer, args.eos_token)
        except ValueError as e:
            raise UserError(f"--append-eos: {e}") from None
    try:
        match_inputs(args.input)
    except FileNotFoundError as e:
        raise UserError(str(e)) from None
    if "://" not in args.output and os.path.exists(args.output) and not os.path.isdir(args.output):
        raise UserError(f"--output {args.output} exists and is not a directory")
    if exists(FileSystems.join(args.output, STATS_FILE)) and not args.overwrite:
        # New shards could have a different count (part-*-of-N) and mix with old ones.
        raise UserError(
            f"{args.output} already holds token shards of a complete run ({STATS_FILE}); "
            "pass --overwrite to replace them, or choose another --output"
        )
    return tokenizer, eos_id


def _matching(output_dir: str, names: Sequence[str]) -> list[str]:
    """Paths directly in output_dir matching any of the glob names (files or directories)."""
    if "://" not in output_dir:
        # Beam's local glob matching lists files only; leftovers include directories.
        return sorted({path for name in names for path in glob.glob(os.path.join(glob.escape(output_dir), name))})
    # Object stores have no directories: a "directory" is the objects under a prefix.
    patterns = [FileSystems.join(output_dir, name) for name in names]
    patterns += [FileSystems.join(output_dir, name, "**") for name in names]
    paths = set()
    for pattern in patterns:
        try:
            paths.update(m.path for m in FileSystems.match([pattern])[0].metadata_list)
        except Exception:  # nothing matches: some filesystems raise instead of answering []
            pass
    return sorted(paths)


def _delete(output_dir: str, names: Sequence[str]) -> list[str]:
    """Deletes what matches the names in output_dir (directories recursively); returns it."""
    paths = _matching(output_dir, names)
    if paths:
        FileSystems.delete(paths)
    return paths


def _prepare_output(output_dir: str, overwrite: bool) -> None:
    """Removes what an earlier run that did not complete left in output_dir.

    Without stats.json nothing in the directory is a finished result, so its
    shards and dead letters go too (a rerun could write a different number of
    shards, and old ones must never mix with new ones). With stats.json (only
    reached with --overwrite) the old result is kept until the new one replaces it.
    """
    complete = exists(FileSystems.join(output_dir, STATS_FILE))
    names = SCRATCH_NAMES if complete else SCRATCH_NAMES + RESULT_NAMES
    leftovers = _matching(output_dir, names)
    if leftovers:
        shown = ", ".join(path.rstrip("/").rsplit("/", 1)[-1] for path in leftovers[:5])
        more = f" and {len(leftovers) - 5} more" if len(leftovers) > 5 else ""
        print(
            f"beam-bpe encode: removing leftovers of an earlier run that did not complete from "
            f"{output_dir}: {shown}{more}",
            file=sys.stderr,
        )
        _delete(output_dir, names)


def _publish(staging: str, output_dir: str, stats: dict) -> None:
    """Moves the staged result into output_dir; stats.json, the completion marker, goes last."""
    # A replaced result stops being complete before any of its files change.
    _delete(output_dir, (STATS_FILE,))
    _delete(output_dir, RESULT_NAMES)
    shards = _matching(staging, (SHARD_GLOB,))
    FileSystems.rename(shards, [FileSystems.join(output_dir, p.rsplit("/", 1)[-1]) for p in shards])
    letters = _matching(FileSystems.join(staging, DEAD_LETTERS_DIR), (DEAD_LETTER_GLOB,))
    dead_dir = FileSystems.join(output_dir, DEAD_LETTERS_DIR)
    if letters and "://" not in dead_dir:
        FileSystems.mkdirs(dead_dir)  # local rename needs the directory; object stores have none
    FileSystems.rename(letters, [FileSystems.join(dead_dir, p.rsplit("/", 1)[-1]) for p in letters])
    _delete(output_dir, (STAGING_DIR,))
    write_stats(output_dir, stats)


def collect_stats(output_dir: str, tokenizer_sha256: str) -> dict:
    """stats.json's content, read back from the shards' footers and the dead-letter files."""
    shards = sorted(m.path for m in FileSystems.match([FileSystems.join(output_dir, SHARD_GLOB)])[0].metadata_list)
    documents = tokens = input_bytes = 0
    for path in shards:
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            parquet = pq.ParquetFile(f)
            if parquet.schema_arrow.metadata.get(SHA256_KEY, b"").decode() != tokenizer_sha256:
                raise RuntimeError(f"{path} was not written with tokenizer {tokenizer_sha256}")
            documents += parquet.metadata.num_rows
            tokens += _token_count(parquet)
            # Written by the shard sink itself (see transforms.shards), so it is
            # exact even when bundles were retried.
            input_bytes += int(parquet.metadata.metadata.get(INPUT_BYTES_KEY, 0))
    dead_letters = 0
    dead_dir = FileSystems.join(output_dir, DEAD_LETTERS_DIR, DEAD_LETTER_GLOB)
    for m in FileSystems.match([dead_dir])[0].metadata_list:
        with FileSystems.open(m.path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            dead_letters += sum(1 for line in f if line.strip())
    return {
        "documents": documents,
        "tokens": tokens,
        "input_bytes": input_bytes,
        "bytes_per_token": input_bytes / tokens if tokens else 0.0,
        "dead_letters": dead_letters,
        "records_read": documents + dead_letters,
        "tokenizer_sha256": tokenizer_sha256,
        "shards": [path.rsplit("/", 1)[-1] for path in shards],
    }


def _token_count(parquet: pq.ParquetFile) -> int:
    """Total tokens in a shard, from the footer when its statistics allow."""
    metadata = parquet.metadata
    column = metadata.schema.to_arrow_schema().get_field_index("tokens")
    total = 0
    for rg in range(metadata.num_row_groups):
        stats = metadata.row_group(rg).column(column).statistics
        # The leaf column's non-null values are exactly the tokens (lists are never null;
        # empty lists count as nulls at the leaf).
        if stats is None or not stats.has_null_count:
            return sum(
                sum(len(tokens) for tokens in batch.column(0).to_pylist())
                for batch in parquet.iter_batches(columns=["tokens"])
            )
        total += stats.num_values
    return total


def write_stats(output_dir: str, stats: dict) -> None:
    """Writes stats.json atomically (a temporary file, then a rename): it marks the directory complete."""
    tmp = FileSystems.join(output_dir, STATS_TMP)
    with FileSystems.create(tmp, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        f.write((json.dumps(stats, indent=2) + "\n").encode())
    FileSystems.rename([tmp], [FileSystems.join(output_dir, STATS_FILE)])
