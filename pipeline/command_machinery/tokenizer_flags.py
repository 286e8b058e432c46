"""The flags that name a tokenizer (``--tokenizer``, ``--tokenizer-preset``), shared by the commands.

    add_arguments(parser)
    tokenizer = load(args)      # one clear line (UserError) for any problem

A command that takes several tokenizers (``report``) takes a preset per
tokenizer: ``add_several_arguments(parser)``; each ``--tokenizer-preset``
belongs to the ``--tokenizer`` given just before it (to the first one when it
comes before them all), and ``load_several(args)`` gives (path, preset,
tokenizer) for each.
"""

from __future__ import annotations

import argparse

from bpe.presets import ENCODINGS
from bpe.tokenizer import Tokenizer, TokenizerFileError
from pipeline.command_machinery.errors import UserError
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
    return _load(args.tokenizer, args.tokenizer_preset, transport)


def _load(path: str, preset: str | None, transport: dict | None = None) -> Tokenizer:
    """The tokenizer at ``path`` with ``preset``, or a UserError naming the problem."""
    if preset is not None and preset not in ENCODINGS:
        raise UserError(f"unknown --tokenizer-preset {preset!r} (choose from {', '.join(ENCODINGS)})")
    try:
        # Maybe read by this command an instant ago, under the path it hands its job
        # (pipeline.runtime.warm_workers).
        return load_tokenizer(path, preset, None, transport)
    except TokenizerFileError as e:
        raise UserError(str(e)) from None


def add_several_arguments(parser: argparse.ArgumentParser) -> None:
    """``--tokenizer`` (repeatable) and a ``--tokenizer-preset`` for each that is a rank file."""
    parser.add_argument(
        "--tokenizer", required=True, action="append",
        help="tokenizer.json (ours or a Hugging Face byte-level BPE one), a directory holding it, or a "
        "tiktoken rank file (repeat to compare several side by side)",
    )
    parser.add_argument(
        "--tokenizer-preset", action=_PresetOfTokenizer, dest="tokenizer_presets", default={}, metavar="NAME",
        help="for the tiktoken rank file given by the --tokenizer just before: the encoding's pattern and "
        f"special tokens ({', '.join(ENCODINGS)})",
    )


class _PresetOfTokenizer(argparse.Action):
    """Keeps {index of a --tokenizer: its preset}: the --tokenizer given just before (the first
    one when none is); a second preset for the same one is an error."""

    def __call__(self, parser, namespace, value, option_string=None):
        presets = dict(getattr(namespace, self.dest) or {})
        index = max(len(getattr(namespace, "tokenizer", None) or []) - 1, 0)
        if index in presets:
            raise argparse.ArgumentError(
                self, f"two presets ({presets[index]}, {value}) for one --tokenizer: "
                "give each rank file's --tokenizer-preset right after its --tokenizer"
            )
        presets[index] = value
        setattr(namespace, self.dest, presets)


def load_several(args: argparse.Namespace, paths: list[str]) -> list[tuple[str | None, Tokenizer]]:
    """(preset, tokenizer) for each of ``paths`` (``args.tokenizer`` as the job names them).

    Raises:
      UserError: an unknown preset, a preset for a file that is not a rank file,
        or a tokenizer file that is missing, unreadable or invalid.
    """
    presets = [args.tokenizer_presets.get(i) for i in range(len(paths))]
    return [(preset, _load(path, preset)) for path, preset in zip(paths, presets)]
