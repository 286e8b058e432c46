"""beam-bpe: train byte-level BPE tokenizers, encode corpora to token shards, decode them.

Flags we do not know are Beam's own pipeline options (``--runner``,
``--direct_num_workers``, ...) and are passed through to Beam unchanged.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from pipeline.errors import UserError

# Each subcommand lives in its own module with add_arguments(parser) and run(args, beam_args) -> int.
COMMANDS = {
    "train": ("pipeline.train", "train a byte-level BPE tokenizer on a sharded corpus"),
    "encode": ("pipeline.encode", "encode a corpus into token-ID Parquet shards"),
    "decode": ("pipeline.decode", "decode token-ID shards or a stream of IDs back to text"),
    "report": ("pipeline.report", "measure how well tokenizers fit a corpus: report.json and index.html"),
    "pack": ("pipeline.pack", "pack token shards into shuffled fixed-length sequences for training"),
}


def quiet_beam_import_noise() -> None:
    """Beam warns at import time that optional Google Cloud clients are missing,
    which is noise for anyone not reading BigQuery; everything else still shows."""
    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        handler.addFilter(lambda record: "apitools not found" not in record.getMessage())


def main(argv: list[str] | None = None) -> int:
    quiet_beam_import_noise()
    parser = argparse.ArgumentParser(prog="beam-bpe", description=__doc__.splitlines()[0], allow_abbrev=False)
    subparsers = parser.add_subparsers(dest="command", required=True)
    modules = {}
    for name, (module_name, help_text) in COMMANDS.items():
        module = importlib.import_module(module_name)
        sub = subparsers.add_parser(name, help=help_text, description=help_text, allow_abbrev=False)
        module.add_arguments(sub)
        modules[name] = module
    args, beam_args = parser.parse_known_args(argv)
    try:
        return modules[args.command].run(args, beam_args)
    except UserError as e:
        print(f"beam-bpe {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"beam-bpe {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
