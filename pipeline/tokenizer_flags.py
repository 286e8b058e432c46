"""The flags that name a tokenizer (``--tokenizer``, ``--tokenizer-preset``), shared by the commands.

    add_arguments(parser)
    tokenizer = load(args)      # one clear line (UserError) for any problem
"""

from __future__ import annotations

import argparse

from bpe.presets import ENCODINGS
from bpe.tokenizer import Tokenizer, TokenizerFileError
from pipeline.errors import UserError
from transforms.tokenizer_loading import load_tokenizer


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tokenizer", required=True,
        help="tokenizer.json (ours or a Hugging Face byte-level BPE one), a directory holding it, or a tiktoken rank file",
    )
    parser.add_argument(
        "--tokenizer-preset", default=None,
        help=f"with a tiktoken rank file: the encoding's pattern and special tokens ({', '.join(ENCODINGS)})",
    )


def load(args: argparse.Namespace, transport: dict | None = None) -> Tokenizer:
    """The tokenizer ``args`` name; ``transport``: smart_open's parameters for a remote path.

    Raises:
      UserError: an unknown preset, or a tokenizer file that is missing, unreadable or invalid.
    """
    if args.tokenizer_preset is not None and args.tokenizer_preset not in ENCODINGS:
        raise UserError(f"unknown --tokenizer-preset {args.tokenizer_preset!r} (choose from {', '.join(ENCODINGS)})")
    try:
        # Maybe read by this command an instant ago, under the path it hands its job
        # (pipeline.runtime.warm_workers).
        return load_tokenizer(args.tokenizer, args.tokenizer_preset, None, transport)
    except TokenizerFileError as e:
        raise UserError(str(e)) from None
