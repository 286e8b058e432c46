"""``beam-bpe encode``'s flags, and which job runs: token shards, or packed sequences with ``--pack N``
(whole documents with ``--pack-format megatron``)."""

from __future__ import annotations

import argparse

from pipeline.command_machinery import progress
from pipeline.command_machinery.errors import UserError
from pipeline.encode import job, packed

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    job.add_arguments(parser)
    packed.add_arguments(parser)
    progress.add_arguments(parser)


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    packed.check_packing_flags(args)
    packing = packed.packing(args)
    if not args.input and not (packing and args.source):
        raise UserError("the following arguments are required: --input"
                        + (" (or, with --pack, --source NAME=GLOB ...)" if packing else ""))
    if packing:
        return packed.run(args, beam_args)
    return job.run(args, beam_args)
