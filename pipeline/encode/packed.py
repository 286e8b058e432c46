"""``beam-bpe encode --pack N``: a corpus -> packed sequences, in one job.

    beam-bpe encode --tokenizer out/ --input 'corpus/*.jsonl.gz' --output packed/ --pack 2048 \
        [--pack-format parquet|llmc|mds] [the packing options of beam-bpe pack]
    beam-bpe encode --tokenizer out/ --input 'corpus/*.jsonl.gz' --output packed/ --pack-format megatron \
        [--seed S] [--validation-fraction F | --validation-documents N]
    beam-bpe encode --tokenizer out/ --source web='web/*.jsonl.gz' --source code='code/*.jsonl.gz' \
        --source-tokens web=N --source-tokens code=M --output mix/ --pack 2048 [...]

(``--pack-format megatron`` takes no N: whole documents, as ``beam-bpe pack --format megatron``.)

Encode's part of the pipeline (``pipeline.encode.job.build``) writes token
shards into ``DIR/.staging/encoded/``, and the packing stages of ``beam-bpe
pack`` (``pipeline.pack``) read them once all are written, exactly as ``pack``
reads a user's shards. The output is what ``beam-bpe encode`` then ``beam-bpe
pack`` give, with the encode's dead letters and its stats (under "encode")
beside it, and follows the same crash-safety contract (stats.json last).

With named sources (``pipeline.pack.sources``) each source's corpus is encoded
on its own into ``encoded/NAME/``, in the same job, and the shards are packed
as the mixture ``beam-bpe pack --source NAME=encoded/NAME/`` would pack them;
its dead letters are named ``dead_letters-NAME-*``, and stats.json's "encode"
holds each source's encode stats.
"""

from __future__ import annotations

import argparse

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from pipeline import runtime
from pipeline.command_machinery import outputs, progress, unreadable_records
from pipeline.command_machinery.errors import UserError
from pipeline.command_machinery.runners import pipeline_options
from pipeline.encode import job
from pipeline.pack import command as pack
from pipeline.pack import sources as pack_sources
from transforms.pack import FORMATS, ShardUnits, SourceUnits, check_format, describe_shards
from transforms.read.matching import match_inputs
from transforms.shards import SHARD_GLOB

__all__ = ["ENCODED_DIR", "add_arguments", "check_packing_flags", "packing", "run"]

ENCODED_DIR = "encoded"  # encode --pack: the per-document shards, in the staging directory


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags ``beam-bpe encode`` gains for ``--pack N`` (its --format is the input's).

    Each packing flag parses to None when not given, so that ``check_packing_flags``
    finds one given without ``--pack`` (and refuses it) and fills in the defaults with it.
    """
    parser.add_argument("--pack", type=int, default=0, metavar="N",
                        help="pack the encoded documents into sequences of N tokens (as beam-bpe pack) instead of "
                        "writing per-document shards")
    defaults = {"pack_format": parser.add_argument(
        "--pack-format", default="parquet", help=f"with --pack: output format, {', '.join(FORMATS)} (default "
        "parquet); megatron needs no --pack N: whole documents, one .bin/.idx pair per split"
    ).default}
    defaults.update(pack.add_packing_options(parser))
    defaults.update(pack_sources.add_arguments(parser, inputs="documents (a corpus glob)"))
    parser.set_defaults(**dict.fromkeys(defaults), packing_defaults=defaults)


def packing(args: argparse.Namespace) -> bool:
    """Whether encode packs: ``--pack N``, or ``--pack-format megatron`` (whole documents, no N)."""
    return bool(args.pack) or args.pack_format in pack.DOCUMENT_FORMATS


def check_packing_flags(args: argparse.Namespace) -> None:
    """Without packing, a packing flag given is refused; with it, those not given take their defaults."""
    defaults = args.packing_defaults
    if not packing(args):
        for dest in defaults:
            if getattr(args, dest) is not None:
                raise UserError(f"--{dest.replace('_', '-')} applies only with --pack N (packed sequences) or "
                                "--pack-format megatron (whole documents)")
    for dest, default in defaults.items():
        if getattr(args, dest) is None:
            setattr(args, dest, default)


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    """``beam-bpe encode --pack N``: one job encodes into token shards in the
    staging directory and packs them as they are, once all are written.

    The output is exactly what ``beam-bpe encode`` then ``beam-bpe pack`` give,
    with the encode's dead letters and its stats (under "encode") beside it.
    """
    options = pipeline_options(beam_args)
    output_dir = outputs.absolute(args.output)
    pack_args = argparse.Namespace(**{**vars(args), "seq_len": args.pack or None, "output": output_dir,
                                      "format": args.pack_format})
    pack.check_options(pack_args)
    sources = pack_sources.parse(args)
    pack.check_complete(pack_args)
    inputs = args.input if sources is None else [sources.globs[name] for name in sources.names]
    outputs.claim(output_dir, "pack", inputs=inputs)  # before encode writes its shards inside it
    output = outputs.StagedOutput(output_dir, pack.RESULTS, marker=pack.STATS_FILE, command="pack")
    output.clear_leftovers()
    try:
        _encode_and_pack(args, pack_args, options, output, sources)
    except UserError:
        # Refused before the job (the tokenizer's vocabulary), or on what it counted
        # (--validation-documents): nothing of this run stays behind.
        outputs.delete(output_dir, (outputs.STAGING_DIR,))
        raise
    unreadable_records.fail_if_strict(args.strict, output_dir, f"the packed sequences and stats.json are written to {output_dir}")
    return 0


def _encode_and_pack(args: argparse.Namespace, pack_args: argparse.Namespace, options,
                     output: outputs.StagedOutput, sources: pack_sources.Sources | None) -> None:
    """The checks that need the tokenizer, the job, and the result published into ``output``."""
    output_dir = output.directory
    encoded = FileSystems.join(output.staging, ENCODED_DIR)
    globs = {} if sources is None else {name: [outputs.absolute(sources.globs[name])] for name in sources.names}
    encode_args = argparse.Namespace(**{**vars(args), "output": encoded, "overwrite": True, "pack": 0,
                                        "input": args.input or [g for name in globs for g in globs[name]]})
    encoded_output = outputs.StagedOutput(encoded, job.RESULTS, marker=job.STATS_FILE, command="encode")
    tokenizer, eos_id, bos_id, encode_transform = job.prepare(encode_args, options, encoded_output)
    if sources is not None:
        pack_sources.check_disjoint({name: _matched(name, patterns) for name, patterns in globs.items()})
    try:
        check_format(args.pack_format, tokenizer.vocab_size, args.pack and args.pack + args.targets)
    except ValueError as e:
        raise UserError(str(e)) from None
    pack.check_pad_id(pack_args, tokenizer.vocab_size)
    transform = pack.packing_transform(pack_args, output, tokenizer.vocab_size, eos_id,
                                       None if sources is None else sources.spec(pack_args.seed))

    kept = (f"nothing of this run is in {output_dir} yet (its leftovers in {output.staging} are removed by the "
            "next run): rerun the same command")
    shown = progress.Progress("encode", "encode", files=encode_args.files, enabled=not encode_args.no_progress,
                              every=encode_args.progress_every)  # checked by job.prepare
    with runtime.stop_at_once("encode", kept):
        p = runtime.new_pipeline(options)
        if sources is None:
            shards = job.build(p, encode_args, tokenizer, encode_transform, eos_id, bos_id, encoded)
            units = shards | "ShardUnits" >> ShardUnits()
        else:
            tagged = [
                p
                | f"Encode {name}" >> _EncodeSource(argparse.Namespace(**{**vars(encode_args), "input": globs[name]}),
                                                    tokenizer, encode_transform, eos_id, bos_id,
                                                    FileSystems.join(encoded, name))
                | f"Tag {name}" >> beam.Map(lambda path, index=index: (index, path))
                for index, name in enumerate(sources.names)
            ]
            units = tagged | "AllSources" >> beam.Flatten() | "SourceUnits" >> SourceUnits(len(tagged))
        pack.write_packed(units, transform, pack_args, output.staging, tokenizer.sha256, tokenizer.vocab_size)
        result = shown.run(p)

    directories = {"": encoded} if sources is None else {name: FileSystems.join(encoded, name)
                                                         for name in sources.names}
    per_directory = {name: job.collect_stats(directory, tokenizer.sha256) for name, directory in directories.items()}
    encode_stats = per_directory[""] if sources is None else {"sources": per_directory}
    encode_stats["verified_documents"] = job.verified_documents(result)
    try:
        inputs = describe_shards(sorted(path for directory in directories.values()
                                        for path in outputs.matching(directory, (SHARD_GLOB,))))
    except ValueError as e:  # no document was read
        raise UserError(str(e)) from None
    pack.check_validation_documents(pack_args, inputs)
    for name, directory in directories.items():
        _move_dead_letters(directory, FileSystems.join(output.staging, outputs.DEAD_LETTERS_DIR), name)
    pack.publish(pack_args, output, inputs, transform, options, encoded=encode_stats)


@beam.ptransform_fn
def _EncodeSource(pbegin, args, tokenizer, encode, eos_id, bos_id, directory):  # noqa: N802 - a PTransform
    """One source's documents encoded into token shards in its own directory; gives the shards' paths."""
    return job.build(pbegin, args, tokenizer, encode, eos_id, bos_id, directory)


def _matched(name: str, patterns: list[str]) -> list[str]:
    try:
        return match_inputs(patterns)
    except FileNotFoundError as e:
        raise UserError(f"--source {name}: {e}") from None


def _move_dead_letters(directory: str, target: str, source: str) -> None:
    """A source's dead-letter files, named ``dead_letters-SOURCE-...`` so the sources' never collide."""
    letters = outputs.matching(FileSystems.join(directory, outputs.DEAD_LETTERS_DIR), ("*",))
    if not source:
        outputs.move_into(letters, target)
        return
    if letters and outputs.is_local(target) and not FileSystems.exists(target):
        FileSystems.mkdirs(target)
    prefix = outputs.DEAD_LETTER_GLOB.split("*", 1)[0]  # "dead_letters-"
    FileSystems.rename(letters, [FileSystems.join(target, prefix + source + "-" + path.rsplit("/", 1)[-1][len(prefix):])
                                 for path in letters])

