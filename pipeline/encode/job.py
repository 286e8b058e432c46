"""``beam-bpe encode``: a corpus -> token-ID Parquet shards, dead letters and stats.json.

    beam-bpe encode --tokenizer out/ --input 'corpus/*.jsonl.gz' --output shards/ \
        [--append-eos] [--num-shards N] [--verify-fraction F] [Beam pipeline options]
    beam-bpe encode --tokenizer cl100k_base.tiktoken --tokenizer-preset cl100k_base ...

Everything a user can get wrong (tokenizer file, EOS token, inputs, format,
runner, output directory) is checked before the job starts. After the job,
stats.json is computed from what was written (the shards' Parquet footers and
the dead-letter files), not from runner metrics, so it describes the output
exactly; only ``verified_documents`` (how many documents the reference encoded
again, ``--verify-fraction``) is the runner's committed counter.

Crash safety (``pipeline.command_machinery.outputs.StagedOutput``): **stats.json is the
completion marker.** The job writes only into ``DIR/.staging/``; on success
the shards and dead letters move into DIR and stats.json is written last. A
directory without stats.json holds leftovers, which a rerun removes (saying so
on stderr) before starting over. A directory with a complete result is refused
unless ``--overwrite``; with it the old result stays whole until the new one is
ready. (stats.json rather than a separate ``_SUCCESS`` file: readers already
look for it.) All of this happens only in a directory that is ours: --output
must be new, empty, or an earlier encode's output, and must not hold an input
(``outputs.claim``).

``prepare``, ``build`` and ``collect_stats`` also make the encode part of
``beam-bpe encode --pack N`` (``pipeline.encode.packed``).
"""

from __future__ import annotations

import argparse
import sys

import apache_beam as beam
import pyarrow.compute as pc
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

from bpe import proof_cache
from bpe.tokenizer import Tokenizer
from pipeline import runtime
from pipeline.command_machinery import outputs, progress, tokenizer_flags, unreadable_records
from pipeline.command_machinery.errors import UserError
from pipeline.command_machinery.runners import committed_counters, describe_runner, pipeline_options, tokenizer_transport
from transforms import metrics
from transforms.dead_letters import WriteDeadLetters
from transforms.encode import EncodeDocuments
from transforms.read import FORMATS, ReadDocuments, match_inputs
from transforms.read.records import is_unicode
from transforms.shards import (
    INPUT_BYTES_KEY,
    SHARD_GLOB,
    shard_bos_id,
    shard_eos_id,
    shard_tokenizer_sha256,
)
from transforms.write_shards import WriteTokenShards

__all__ = ["RESULTS", "STATS_FILE", "add_arguments", "build", "collect_stats", "prepare", "run", "verified_documents"]

STATS_FILE = "stats.json"  # written last: the completion marker
# What a job leaves in DIR besides stats.json, relative to DIR.
RESULTS = (SHARD_GLOB, f"{outputs.DEAD_LETTERS_DIR}/{outputs.DEAD_LETTER_GLOB}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``beam-bpe encode`` but those of ``--pack`` and of the progress."""
    tokenizer_flags.add_arguments(parser)
    parser.add_argument("--input", default=[], nargs="+", action="extend", metavar="GLOB",
                        help="input globs or paths (several, or repeated; a shell-expanded glob works too); "
                        "required but with --pack and --source")
    parser.add_argument(
        "--output", required=True,
        help="a new or empty directory (or an earlier encode's) for the shards, dead_letters/ and stats.json; "
        "stats.json is written last and marks the directory complete (leftovers of a run that did not complete "
        "are removed on rerun)",
    )
    parser.add_argument("--format", default="auto", help=f"input format: {', '.join(FORMATS)} (default auto)")
    parser.add_argument("--text-field", default="text", help="jsonl key / Parquet column of the text")
    parser.add_argument(
        "--id-field", default="id",
        help="jsonl key / Parquet column of the document id (default id); a record without it gets "
        "<file>:<record number>; '' gives every record <file>:<record number>",
    )
    parser.add_argument("--append-eos", action="store_true", help="append the EOS token to every document")
    parser.add_argument(
        "--eos-token", default=None,
        help="the EOS special token (default: the one the tokenizer declares; ours: the first special token)",
    )
    parser.add_argument(
        "--prepend-bos", action="store_true", help="put the BOS token the tokenizer declares before every document"
    )
    parser.add_argument("--num-shards", type=int, default=0, help="number of shard files (default: automatic)")
    parser.add_argument("--strict", action="store_true", help="fail (exit 2) if any input record was unreadable")
    parser.add_argument(
        "--verify-fraction", type=float, default=0.001,
        help="share of documents (a fixed sample, by file and record) encoded again with the pure-Python "
        "reference; any difference fails the job, naming the document (default 0.001; 0: off)",
    )
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
    """``beam-bpe encode`` without ``--pack``."""
    options = pipeline_options(beam_args)
    args.output = outputs.absolute(args.output)
    output = outputs.StagedOutput(args.output, RESULTS, marker=STATS_FILE, command="encode")
    tokenizer, eos_id, bos_id, encode = prepare(args, options, output)
    output.clear_leftovers()

    kept = (f"nothing of this run is in {args.output} yet (its leftovers in {output.staging} are removed by the "
            "next run): rerun the same command")
    shown = progress.Progress("encode", "encode", files=args.files, enabled=not args.no_progress,
                              every=args.progress_every)
    with runtime.stop_at_once("encode", kept):
        p = runtime.new_pipeline(options)
        _ = build(p, args, tokenizer, encode, eos_id, bos_id, output.staging)
        result = shown.run(p)

    stats = collect_stats(output.staging, tokenizer.sha256)
    stats["verified_documents"] = verified_documents(result)
    output.publish(stats)
    print(
        f"beam-bpe encode: {stats['documents']:,} documents, {stats['tokens']:,} tokens "
        f"({stats['bytes_per_token']:.2f} bytes/token), {stats['dead_letters']:,} dead letters, "
        f"{len(stats['shards']):,} shards in {args.output} ({describe_runner(options)})",
        file=sys.stderr,
    )
    unreadable_records.fail_if_strict(args.strict, args.output, f"the shards and stats.json are written to {args.output}")
    return 0


def prepare(args: argparse.Namespace, options, output: outputs.StagedOutput):
    """Checks the arguments before any work and makes the encoding transform:
    (tokenizer, EOS ID, BOS ID, EncodeDocuments). ``args`` gets absolute paths."""
    args.transport = tokenizer_transport(options)
    args.tokenizer = outputs.absolute(args.tokenizer)
    args.input = [outputs.absolute(pattern) for pattern in args.input]
    tokenizer, eos_id, bos_id = _check_arguments(args, output)
    return tokenizer, eos_id, bos_id, _encode_documents(args, tokenizer)


def build(p: beam.Pipeline, args: argparse.Namespace, tokenizer: Tokenizer, encode: beam.PTransform,
          eos_id: int | None, bos_id: int | None, directory: str) -> beam.PCollection:
    """The encode part of a pipeline: token shards and dead letters written into
    ``directory``; returns the PCollection of the shards' paths (once all are written)."""
    read = p | "Read" >> ReadDocuments(
        args.input, format=args.format, text_field=args.text_field, id_field=args.id_field or None
    )
    rows = read.documents | "Encode" >> encode
    shards = rows | "WriteShards" >> WriteTokenShards(
        directory, tokenizer.sha256, tokenizer.vocab_size, num_shards=args.num_shards, eos_token_id=eos_id,
        bos_token_id=bos_id,
    )
    _ = read.dead_letters | "WriteDeadLetters" >> WriteDeadLetters(directory)
    return shards


def verified_documents(result) -> int:
    """How many documents the reference encoded again (the job's committed counter)."""
    return committed_counters(result).get(metrics.key("encode", "verified_documents"), 0)


# --- The calls into bpe and transforms.encode: loading, proving, encoding ----------


def _eos_id(tokenizer: Tokenizer, eos_token: str | None) -> int:
    try:
        return tokenizer.eos_token_id(eos_token)
    except ValueError as e:
        raise UserError(f"--append-eos: {e}") from None


def _encode_documents(args: argparse.Namespace, tokenizer: Tokenizer) -> beam.PTransform:
    """EncodeDocuments for the run. Which engine gives this tokenizer's IDs is proven
    here, once (the proof is O(vocabulary)), or read from the proof cache
    (``bpe.proof_cache``); workers check the proof's SHA-256."""
    proof = proof_cache.proven(tokenizer)
    print(f"beam-bpe encode: engine {proof.reason}", file=sys.stderr)
    return EncodeDocuments(
        args.tokenizer, proof, append_eos=args.append_eos, eos_token=args.eos_token,
        preset=args.tokenizer_preset, prepend_bos=args.prepend_bos, transport_params=args.transport,
        verify_fraction=args.verify_fraction,
    )


# --- Checks before any work, and the stats of the result --------------------------


def _check_arguments(
    args: argparse.Namespace, output: outputs.StagedOutput
) -> tuple[Tokenizer, int | None, int | None]:
    """Fails before the job on any user mistake; returns (tokenizer, EOS ID, BOS ID)."""
    if args.format not in FORMATS:
        raise UserError(f"unknown --format {args.format!r} (choose from {', '.join(FORMATS)})")
    if args.num_shards < 0:
        raise UserError(f"--num-shards must be 0 (automatic) or more, not {args.num_shards}")
    if not 0 <= args.verify_fraction <= 1:
        raise UserError(f"--verify-fraction must be between 0 and 1, not {args.verify_fraction}")
    if args.eos_token is not None and not args.append_eos:
        raise UserError("--eos-token needs --append-eos")
    progress.check_arguments(args)
    tokenizer = tokenizer_flags.load(args, args.transport)
    eos_id = _eos_id(tokenizer, args.eos_token) if args.append_eos else None
    bos_id = None
    if args.prepend_bos:
        try:
            bos_id = tokenizer.bos_id
        except ValueError as e:
            raise UserError(f"--prepend-bos: {e}") from None
    try:
        files = match_inputs(args.input)
    except FileNotFoundError as e:
        raise UserError(str(e)) from None
    unnamed = next((path for path in files if not is_unicode(path)), None)
    if unnamed is not None:
        raise UserError(
            f"input file {unnamed!r}: its name is not valid UTF-8, so a record of it without an id could not be "
            "given its id <file>:<record number> (ids are stored as UTF-8 text): rename the file"
        )
    outputs.claim(args.output, "encode", inputs=files)  # ours from here on; never the user's files
    args.files = len(files)  # for the progress
    if output.is_complete() and not args.overwrite:
        # New shards could have a different count (part-*-of-N) and mix with old ones.
        raise UserError(
            f"{args.output} already holds token shards of a complete run ({STATS_FILE}); "
            "pass --overwrite to replace them, or choose another --output"
        )
    return tokenizer, eos_id, bos_id


def collect_stats(output_dir: str, tokenizer_sha256: str) -> dict:
    """stats.json's content, read back from the shards' footers and the dead-letter files."""
    shards = sorted(m.path for m in FileSystems.match([FileSystems.join(output_dir, SHARD_GLOB)])[0].metadata_list)
    documents = tokens = input_bytes = 0
    eos_id = bos_id = None  # as the shards record them (all alike: one job wrote them)
    for path in shards:
        with outputs.open_read(path) as f:
            parquet = pq.ParquetFile(f)
            if shard_tokenizer_sha256(parquet.schema_arrow) != tokenizer_sha256:
                raise RuntimeError(f"{path} was not written with tokenizer {tokenizer_sha256}")
            eos_id, bos_id = shard_eos_id(parquet.schema_arrow), shard_bos_id(parquet.schema_arrow)
            documents += parquet.metadata.num_rows
            tokens += _token_count(parquet)
            # Written by the shard sink itself (see transforms.shards), so it is
            # exact even when bundles were retried.
            input_bytes += int(parquet.metadata.metadata.get(INPUT_BYTES_KEY, 0))
    dead_letters = len(unreadable_records.read_dead_letters(output_dir))
    return {
        "documents": documents,
        "tokens": tokens,
        "input_bytes": input_bytes,
        "bytes_per_token": input_bytes / tokens if tokens else 0.0,
        "dead_letters": dead_letters,
        "records_read": documents + dead_letters,
        "tokenizer_sha256": tokenizer_sha256,
        "eos_token_id": eos_id,
        "bos_token_id": bos_id,
        "shards": [path.rsplit("/", 1)[-1] for path in shards],
    }


def _token_count(parquet: pq.ParquetFile) -> int:
    """Total tokens in a shard, from the footer when its statistics allow."""
    metadata = parquet.metadata
    column = metadata.schema.to_arrow_schema().get_field_index("tokens")
    total = 0
    for rg in range(metadata.num_row_groups):
        if metadata.row_group(rg).num_rows == 0:
            continue
        stats = metadata.row_group(rg).column(column).statistics
        # The leaf column's non-null values are exactly the tokens (lists are never null;
        # empty lists count as nulls at the leaf).
        if stats is None or not stats.has_null_count:
            # Counted from the list lengths, never as Python ints (a shard may hold a huge document).
            return sum(
                pc.sum(pc.list_value_length(batch.column(0))).as_py() or 0
                for batch in parquet.iter_batches(columns=["tokens"])
            )
        total += stats.num_values
    return total
