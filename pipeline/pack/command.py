"""``beam-bpe pack``: token shards -> shuffled fixed-length sequences, train/ and validation/;
or, with ``--format megatron``, shuffled whole documents, one Megatron-LM dataset per split.

    beam-bpe pack (--input 'shards/part-*.parquet' | --source NAME=SHARD_GLOB ... BUDGETS) \\
        --seq-len 2048 --output packed/ [--seed S] [--validation-fraction F | --validation-documents N] \\
        [--format parquet|llmc|mds] [--targets] [--drop-remainder] \\
        [--no-split-documents] [--pad-id N] [--overwrite] [Beam pipeline options]
    beam-bpe pack --input 'shards/part-*.parquet' --format megatron --output packed/ \\
        [--seed S] [--validation-fraction F | --validation-documents N] [--overwrite]

Everything a user can get wrong (inputs that are not token shards, shards of
different tokenizers, options that do not fit together or do not fit the
format) is checked before the job starts, from the shards' footers. After the
job, stats.json is computed from what was written and checked against the
input (``pipeline.pack.stats``).

Named sources with token budgets (``--source``, ``pipeline.pack.sources``)
make a mixture, recorded in mixture.json beside stats.json; the output then
accounts for the tokens the mixture took instead of the input's.

``beam-bpe encode --pack N`` (``pipeline.encode.packed``) runs the same
packing stages in one job after encode's, through ``add_packing_options``,
``check_options``, ``packing_transform``, ``write_packed`` and ``publish``.

Crash safety (``pipeline.command_machinery.outputs.StagedOutput``, as in ``beam-bpe encode``):
the job writes into ``DIR/.staging/`` (with the spilled token streams of
packing, ``transforms.pack.spill``, in ``spill/``, about two or four bytes
a token, and for megatron the parts of each split's dataset in ``parts/``,
both removed after the job); on success train/ and validation/ (a split
without sequences has no folder), or megatron's SPLIT.bin and SPLIT.idx, are
moved into DIR and stats.json, the completion marker, is written last. A directory without stats.json holds
leftovers, removed on rerun; a complete one is replaced only with --overwrite.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from typing import Sequence

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from pipeline import runtime
from pipeline.command_machinery import outputs, progress
from pipeline.command_machinery.errors import UserError
from pipeline.command_machinery.runners import describe_runner, pipeline_options
from pipeline.pack import sources as pack_sources
from pipeline.pack.stats import DOCUMENT_FORMATS, PLAN_FILE, STATS_FILE, collect_stats, plan_json
from transforms.pack import MixtureSpec, PackSequences, bad_token_shard, shard_units, source_units
from transforms.pack import (
    FILE_TOKEN_LIMITS, FORMATS, PARTS_DIR, SPLITS, ShardsInfo, WriteFiles, WriteMegatronDocuments, WriteSequences,
    check_format, describe_shards, split_files,
)
from transforms.pack.mds_format import INDEX_FILE
from transforms.shards import SHARD_GLOB

__all__ = [
    "DOCUMENT_FORMATS", "MAX_SEQUENCE_TOKENS", "RESULTS", "SEQUENCE_OPTIONS", "SPILL_DIR", "STATS_FILE",
    "UNPADDED_FORMATS", "add_arguments",
    "add_packing_options", "check_complete", "check_options", "check_pad_id", "check_sequence_length",
    "check_validation_documents", "packing_transform", "publish", "run", "write_packed",
]

SPILL_DIR = "spill"  # in the staging directory: the job's spilled token streams (transforms.pack.spill)
# What a job leaves in DIR besides stats.json, relative to DIR: each split's sequence
# files (and MDS index), or its Megatron dataset; the dead letters; a mixture's figures.
RESULTS = (*(f"{split}/part-*" for split in SPLITS), *(f"{split}/{INDEX_FILE}" for split in SPLITS),
           *(name for split in SPLITS for name in split_files(split)),
           f"{outputs.DEAD_LETTERS_DIR}/{outputs.DEAD_LETTER_GLOB}", pack_sources.MIXTURE_FILE)
# The longest sequence: positions in a sequence are int32 in every format (Parquet's
# doc_starts and list sizes, Megatron's entry lengths, llm.c's header).
MAX_SEQUENCE_TOKENS = 2**31 - 1
# Formats that are streams of real tokens: no padding, so no --pad-id.
UNPADDED_FORMATS = ("megatron", "llmc")
# The options of sequences, with their values when not given: {dest: (flag, default)}.
SEQUENCE_OPTIONS = {"seq_len": ("--seq-len", None), "targets": ("--targets", False),
                    "drop_remainder": ("--drop-remainder", False), "no_split_documents": ("--no-split-documents", False),
                    "window_tokens": ("--window-tokens", 1 << 22)}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input", action="append", default=[],
                        help="token shards: a glob, a file or a directory of part-*.parquet (repeatable)")
    pack_sources.add_arguments(parser)
    parser.add_argument("--seq-len", type=int, default=None,
                        help="tokens per sequence (required, but with --format megatron: whole documents)")
    parser.add_argument("--output", required=True,
                        help="directory for train/, validation/ and stats.json (written last: the completion marker)")
    parser.add_argument("--format", default="parquet",
                        help=f"output format: {', '.join(FORMATS)} (default parquet; megatron: whole documents, "
                        "one .bin/.idx pair per split)")
    add_packing_options(parser)
    parser.add_argument("--overwrite", action="store_true",
                        help="replace a complete result in --output (it stays whole until the new one is complete)")
    progress.add_arguments(parser)


def add_packing_options(parser: argparse.ArgumentParser) -> dict[str, object]:
    """The options ``pack`` shares with ``encode --pack N``; returns {dest: default} of each."""
    options = [parser.add_argument("--seed", type=int, default=0, help="seed of the shuffle of sequences (default 0)")]
    split = parser.add_mutually_exclusive_group()
    options += [
        split.add_argument("--validation-fraction", type=float, default=0.0,
                           help="fraction of documents (by a hash of their id and its occurrence) held out "
                           "for validation"),
        split.add_argument("--validation-documents", type=int, default=0,
                           help="number of documents (the smallest hashes of their id and its occurrence) "
                           "held out for validation"),
        parser.add_argument("--targets", action="store_true",
                            help="seq-len + 1 tokens per sequence, for shifted targets"),
        parser.add_argument("--drop-remainder", action="store_true",
                            help="drop the last, incomplete sequence of each split instead of padding it"),
        parser.add_argument("--no-split-documents", action="store_true",
                            help="keep documents whole (best-fit packing, padding); longer ones are cut into pieces"),
        parser.add_argument("--pad-id", type=int, default=None,
                            help="token ID of padding (default: the shards' EOS token, else 0); parquet and mds "
                            "only: megatron and llmc files hold no padding"),
        parser.add_argument("--tokens-per-file", type=int, default=1 << 23,
                            help="about how many tokens per output file (megatron: per part a worker writes "
                            "before the parts are joined)"),
        parser.add_argument("--window-tokens", type=int, default=SEQUENCE_OPTIONS["window_tokens"][1],
                            help="with --no-split-documents: documents are packed within windows of this many tokens"),
    ]
    return {option.dest: option.default for option in options}


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    options = pipeline_options(beam_args)
    args.output = outputs.absolute(args.output)
    output = outputs.StagedOutput(args.output, RESULTS, marker=STATS_FILE, command="pack")
    sources = pack_sources.parse(args)
    if sources is None:
        shards = _match_shards([outputs.absolute(pattern) for pattern in args.input])
        units, mixture = shard_units(shards), None
    else:
        by_source = {name: _match_shards([outputs.absolute(sources.globs[name])], f"--source {name}=")
                     for name in sources.names}
        pack_sources.check_shards(by_source)
        shards = sorted(path for paths in by_source.values() for path in paths)
        units, mixture = source_units([by_source[name] for name in sources.names]), sources.spec(args.seed)
    inputs, transform = _check_arguments(args, shards, output, mixture)
    output.clear_leftovers()

    p = runtime.new_pipeline(options)
    write_packed(p | "Units" >> beam.Create(units), transform, args, output.staging,
                 inputs.tokenizer_sha256, inputs.vocab_size)
    with _bad_shard_as_one_line(args.output):
        progress.Progress("pack", "pack", fields=progress.PACKED, enabled=not args.no_progress,
                          every=args.progress_every).run(p)
    publish(args, output, inputs, transform, options)
    return 0


@contextlib.contextmanager
def _bad_shard_as_one_line(directory: str):
    """A job that fails on a bad token shard (``transforms.pack.bad_token_shard``: data
    its footer did not show, found by a worker) ends in one line and leaves no staging
    directory behind."""
    try:
        yield
    except Exception as e:  # noqa: BLE001 - a bad shard is one line; anything else is raised as it is
        problem = bad_token_shard(e)
        if problem is None:
            raise
        outputs.delete(directory, (outputs.STAGING_DIR,))
        raise UserError(f"{problem}; nothing was written") from None


def write_packed(units: beam.PCollection, transform: PackSequences, args: argparse.Namespace, staging: str,
                 tokenizer_sha256: str, vocab_size: int) -> None:
    """The packing part of a pipeline: the sequences (or Megatron's documents) and the
    plan written into ``staging``."""
    packed = units | "Pack" >> transform
    if args.format in DOCUMENT_FORMATS:
        _, plans = packed.documents | "WriteMegatron" >> WriteMegatronDocuments(
            staging, transform.scratch_dir, vocab_size, args.seed, transform.tokens_per_file)
    else:
        metadata = {b"tokenizer_sha256": tokenizer_sha256.encode(), b"vocab_size": str(vocab_size).encode(),
                    b"seq_len": str(args.seq_len).encode(), b"targets": str(int(args.targets)).encode()}
        _ = packed.blocks | "WriteSequences" >> WriteSequences(
            staging, args.format, vocab_size, metadata, loss_mask=transform.layout.has_padding
        )
        plans = packed.plans
    found = [beam.pvalue.AsSingleton(packed.repeated_ids)]
    if packed.mixture is not None:
        found.append(beam.pvalue.AsSingleton(packed.mixture))
    _ = (
        plans
        | "PlanFile" >> beam.Map(lambda plans, *found: (PLAN_FILE, plan_json(plans, *found, spec=transform.mixture)),
                                 *found)
        | "WritePlan" >> WriteFiles(staging)
    )


def publish(args: argparse.Namespace, output: outputs.StagedOutput, inputs: ShardsInfo, transform: PackSequences,
            options, encoded: dict | None = None) -> None:
    """After the job: stats.json from what was written, checked; the result moved into place."""
    outputs.delete(output.staging, (SPILL_DIR, PARTS_DIR))
    mixture = None
    if transform.mixture is not None:
        mixture = (outputs.read_json(FileSystems.join(output.staging, PLAN_FILE)) or {}).get("mixture")
        try:
            pack_sources.check_result(mixture)
        except UserError:
            outputs.delete(output.directory, (outputs.STAGING_DIR,))
            raise
        outputs.write_json(FileSystems.join(output.staging, pack_sources.MIXTURE_FILE), mixture, indent=2)
    stats = collect_stats(output.staging, args.format, inputs, _settings(args, transform), mixture)
    if encoded is not None:
        stats["encode"] = encoded
    output.publish(stats)
    if args.format in DOCUMENT_FORMATS:
        print(f"beam-bpe pack: {stats['documents']:,} whole documents ({stats['splits']['train']['documents']:,} "
              f"train, {stats['splits']['validation']['documents']:,} validation), {stats['tokens']:,} tokens, "
              f"one entry each, shuffled, in {args.output} ({describe_runner(options)})", file=sys.stderr)
        return
    print(
        f"beam-bpe pack: {stats['sequences']:,} sequences of {stats['sequence_length']:,} tokens "
        f"({stats['splits']['train']['sequences']:,} train, {stats['splits']['validation']['sequences']:,} validation), "
        f"{stats['tokens']:,} real tokens, {stats['padding_tokens']:,} padding, {stats['dropped_tokens']:,} dropped, "
        f"in {args.output} ({describe_runner(options)})",
        file=sys.stderr,
    )
    if mixture is not None:
        print(f"beam-bpe pack: mixture ({pack_sources.MIXTURE_FILE}): {pack_sources.summary(mixture)}", file=sys.stderr)


def _match_shards(patterns: Sequence[str], flag: str = "--input ") -> list[str]:
    """The shard files the patterns name, sorted by path: the order of their documents."""
    paths = set()
    for pattern in patterns:
        if "://" not in pattern and os.path.isdir(pattern):
            pattern = os.path.join(pattern, SHARD_GLOB)
        try:
            found = [m.path for m in FileSystems.match([pattern])[0].metadata_list]
        except Exception:  # some filesystems raise instead of matching nothing
            found = []
        if not found:
            raise UserError(f"{flag}{pattern} matches no files")
        paths.update(found)
    return sorted(paths)


def _check_arguments(args: argparse.Namespace, shards: list[str], output: outputs.StagedOutput,
                     mixture: MixtureSpec | None = None) -> tuple[ShardsInfo, PackSequences]:
    """Fails before the job on any user mistake; returns the inputs and the transform."""
    check_options(args)
    try:
        inputs = describe_shards(shards)
    except ValueError as e:
        raise UserError(str(e)) from None
    if inputs.vocab_declared:
        check_pad_id(args, inputs.vocab_size)
    elif args.pad_id is not None:  # no vocabulary declared: the one the tokens and the padding use
        inputs = inputs._replace(vocab_size=max(inputs.vocab_size, args.pad_id + 1))
    try:
        check_format(args.format, inputs.vocab_size, args.seq_len and args.seq_len + args.targets)
    except ValueError as e:
        raise UserError(str(e)) from None
    check_validation_documents(args, inputs)
    if args.format not in DOCUMENT_FORMATS:
        check_sequence_length(args, inputs)
    _check_input_stats(shards, inputs)
    transform = packing_transform(args, output, inputs.vocab_size, inputs.eos_token_id, mixture)
    outputs.claim(args.output, "pack", inputs=shards)
    check_complete(args)
    return inputs, transform


def check_options(args: argparse.Namespace) -> None:
    """The checks of the packing options that need no input."""
    flag = "--pack" if getattr(args, "command", "pack") == "encode" else "--seq-len"
    if args.format in DOCUMENT_FORMATS:
        _check_document_options(args, flag)
    elif args.seq_len is None:
        raise UserError(f"{flag} N is required with --format {args.format} (sequences of N tokens); only "
                        "--format megatron writes whole documents")
    else:
        _check_sequence_options(args, flag)
    if not 0 <= args.validation_fraction < 1:
        raise UserError(f"--validation-fraction must be in [0, 1), not {args.validation_fraction}")
    if args.validation_documents < 0:
        raise UserError(f"--validation-documents must be 0 or more, not {args.validation_documents}")
    if args.pad_id is not None and args.pad_id < 0:
        raise UserError(f"--pad-id must be 0 or more, not {args.pad_id}")
    if args.pad_id is not None and args.format in UNPADDED_FORMATS:
        raise UserError(f"--pad-id: {args.format} files hold no padding (only the real tokens, sequence after "
                        "sequence); leave it out, or choose --format parquet")
    if args.tokens_per_file < 1 or args.window_tokens < 1:
        raise UserError("--tokens-per-file and --window-tokens must be positive")
    progress.check_arguments(args)


def _check_sequence_options(args: argparse.Namespace, flag: str) -> None:
    if args.seq_len < 1:
        raise UserError(f"{flag} must be at least 1, not {args.seq_len}")
    if args.seq_len + args.targets > MAX_SEQUENCE_TOKENS:
        raise UserError(f"{flag} {args.seq_len} is more than the {MAX_SEQUENCE_TOKENS} tokens a sequence can hold"
                        + (" (with --targets, one more)" if args.targets else ""))
    if args.drop_remainder and args.no_split_documents:
        raise UserError("--drop-remainder needs split documents: with --no-split-documents every sequence is padded")


def _check_document_options(args: argparse.Namespace, flag: str) -> None:
    """Whole documents, one entry each: an option of sequences given is refused."""
    for dest, (name, default) in SEQUENCE_OPTIONS.items():
        if getattr(args, dest) != default:
            raise UserError(f"{flag if dest == 'seq_len' else name}: megatron output is whole documents, one entry "
                            "each, and Megatron-LM packs them into sequences at training time; leave it out")


def check_sequence_length(args: argparse.Namespace, inputs: ShardsInfo) -> None:
    """A sequence may not be longer than all the input's tokens: it would be mostly
    padding, and its padding is allocated and written whole."""
    length = args.seq_len + args.targets
    if inputs.tokens and length > inputs.tokens:
        most = f"{inputs.tokens - args.targets} with --targets" if args.targets else str(inputs.tokens)
        raise UserError(f"--seq-len {args.seq_len} is longer than the {inputs.tokens} tokens of the shards: every "
                        f"sequence would be mostly padding; choose at most {most}")


def check_pad_id(args: argparse.Namespace, vocab_size: int) -> None:
    """--pad-id must be a token ID of the tokenizer (when its vocabulary is known)."""
    if args.pad_id is not None and args.pad_id >= vocab_size:
        raise UserError(f"--pad-id {args.pad_id} is not a token ID of the tokenizer (vocab_size {vocab_size})")


def check_validation_documents(args: argparse.Namespace, inputs: ShardsInfo) -> None:
    """--validation-documents must leave training documents."""
    if args.validation_documents and args.validation_documents >= inputs.documents:
        raise UserError(
            f"--validation-documents {args.validation_documents} leaves no training documents "
            f"(the shards hold {inputs.documents})"
        )


def check_complete(args: argparse.Namespace) -> None:
    """A complete result in --output is replaced only with --overwrite."""
    if outputs.exists(FileSystems.join(args.output, STATS_FILE)) and not args.overwrite:
        raise UserError(
            f"{args.output} already holds the result of a complete run ({STATS_FILE}); "
            "pass --overwrite to replace it, or choose another --output"
        )


def packing_transform(args: argparse.Namespace, output: outputs.StagedOutput, vocab_size: int,
                      eos_token_id: int | None, mixture: MixtureSpec | None = None) -> PackSequences:
    """The packing transform the options describe, spilling into the staging directory."""
    pad_id = args.pad_id if args.pad_id is not None else (eos_token_id or 0)
    sequences = args.format not in DOCUMENT_FORMATS
    try:
        return PackSequences(
            FileSystems.join(output.staging, SPILL_DIR), args.seq_len if sequences else 1, targets=args.targets,
            split_documents=not args.no_split_documents, drop_remainder=args.drop_remainder, pad_id=pad_id,
            seed=args.seed, validation_fraction=args.validation_fraction,
            validation_documents=args.validation_documents, vocab_size=vocab_size,
            tokens_per_file=min(args.tokens_per_file, FILE_TOKEN_LIMITS.get(args.format, args.tokens_per_file)),
            window_tokens=args.window_tokens, sequences=sequences, mixture=mixture,
        )
    except ValueError as e:
        raise UserError(str(e)) from None


def _check_input_stats(shards: list[str], inputs: ShardsInfo) -> None:
    """When the shards are all those of one encode run, its stats.json must agree with their footers."""
    directory = shards[0].rsplit("/", 1)[0]
    path = FileSystems.join(directory, STATS_FILE)
    encoded = outputs.read_json(path)
    if encoded is None:
        return
    if sorted(encoded.get("shards", [])) != sorted(p.rsplit("/", 1)[-1] for p in shards):
        return  # a subset, or shards from several places
    if (encoded.get("documents"), encoded.get("tokens")) != (inputs.documents, inputs.tokens):
        raise UserError(
            f"{path} says {encoded.get('documents')} documents and {encoded.get('tokens')} tokens, the shards "
            f"hold {inputs.documents} and {inputs.tokens}: the shards changed after they were written"
        )


def _settings(args: argparse.Namespace, transform: PackSequences) -> dict:
    return {
        "format": args.format,
        "seq_len": args.seq_len if transform.sequences else None,
        "sequence_length": transform.layout.length if transform.sequences else None,
        "targets": args.targets,
        "split_documents": not args.no_split_documents and transform.sequences,
        "drop_remainder": args.drop_remainder,
        "pad_id": transform.pad_id if transform.sequences else None,
        "seed": args.seed,
        "validation_fraction": args.validation_fraction,
        "validation_documents": args.validation_documents,
    }


