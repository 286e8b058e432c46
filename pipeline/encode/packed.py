"""``beam-bpe encode --pack N``: a corpus -> packed sequences, in one job.

    beam-bpe encode --tokenizer out/ --input 'corpus/*.jsonl.gz' --output packed/ --pack 2048 \
        [--pack-format parquet|llmc|mds] [the packing options of beam-bpe pack]
    beam-bpe encode --tokenizer out/ --input 'corpus/*.jsonl.gz' --output packed/ --pack-format megatron \
        [--seed S] [--validation-fraction F | --validation-documents N]

(``--pack-format megatron`` takes no N: whole documents, as ``beam-bpe pack --format megatron``.)

Encode's part of the pipeline (``pipeline.encode.job.build``) writes token
shards into ``DIR/.staging/encoded/``, and the packing stages of ``beam-bpe
pack`` (``pipeline.pack``) read them once all are written, exactly as ``pack``
reads a user's shards. The output is what ``beam-bpe encode`` then ``beam-bpe
pack`` give, with the encode's dead letters and its stats (under "encode")
beside it, and follows the same crash-safety contract (stats.json last).
"""

from __future__ import annotations

import argparse

from apache_beam.io.filesystems import FileSystems

from pipeline import outputs, pack, progress, runtime
from pipeline.encode import job
from pipeline.errors import UserError
from pipeline.runners import pipeline_options
from transforms.pack import FORMATS, ShardUnits, check_format, describe_shards
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
    pack.check_complete(pack_args)
    outputs.claim(output_dir, "pack", inputs=args.input)  # before encode writes its shards inside it
    output = outputs.StagedOutput(output_dir, pack.RESULTS, marker=pack.STATS_FILE, command="pack")
    output.clear_leftovers()
    try:
        _encode_and_pack(args, pack_args, options, output)
    except UserError:
        # Refused before the job (the tokenizer's vocabulary), or on what it counted
        # (--validation-documents): nothing of this run stays behind.
        outputs.delete(output_dir, (outputs.STAGING_DIR,))
        raise
    outputs.fail_if_strict(args.strict, output_dir, f"the packed sequences and stats.json are written to {output_dir}")
    return 0


def _encode_and_pack(args: argparse.Namespace, pack_args: argparse.Namespace, options,
                     output: outputs.StagedOutput) -> None:
    """The checks that need the tokenizer, the job, and the result published into ``output``."""
    output_dir = output.directory
    encoded = FileSystems.join(output.staging, ENCODED_DIR)
    encode_args = argparse.Namespace(**{**vars(args), "output": encoded, "overwrite": True, "pack": 0})
    encoded_output = outputs.StagedOutput(encoded, job.RESULTS, marker=job.STATS_FILE, command="encode")
    tokenizer, eos_id, bos_id, encode_transform = job.prepare(encode_args, options, encoded_output)
    try:
        check_format(args.pack_format, tokenizer.vocab_size, args.pack and args.pack + args.targets)
    except ValueError as e:
        raise UserError(str(e)) from None
    pack.check_pad_id(pack_args, tokenizer.vocab_size)
    transform = pack.packing_transform(pack_args, output, tokenizer.vocab_size, eos_id)

    kept = (f"nothing of this run is in {output_dir} yet (its leftovers in {output.staging} are removed by the "
            "next run): rerun the same command")
    shown = progress.Progress("encode", "encode", files=encode_args.files, enabled=not encode_args.no_progress,
                              every=encode_args.progress_every)  # checked by job.prepare
    with runtime.stop_at_once("encode", kept):
        p = runtime.new_pipeline(options)
        shards = job.build(p, encode_args, tokenizer, encode_transform, eos_id, bos_id, encoded)
        pack.write_packed(shards | "ShardUnits" >> ShardUnits(), transform, pack_args, output.staging,
                          tokenizer.sha256, tokenizer.vocab_size)
        result = shown.run(p)

    encode_stats = job.collect_stats(encoded, tokenizer.sha256)
    encode_stats["verified_documents"] = job.verified_documents(result)
    try:
        inputs = describe_shards(sorted(outputs.matching(encoded, (SHARD_GLOB,))))
    except ValueError as e:  # no document was read
        raise UserError(str(e)) from None
    pack.check_validation_documents(pack_args, inputs)
    letters = outputs.matching(FileSystems.join(encoded, outputs.DEAD_LETTERS_DIR), ("*",))
    outputs.move_into(letters, FileSystems.join(output.staging, outputs.DEAD_LETTERS_DIR))
    pack.publish(pack_args, output, inputs, transform, options, encoded=encode_stats)

