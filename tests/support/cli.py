"""The ``beam-bpe`` commands run in the test's own process, with the runner flags
the tests share."""

from __future__ import annotations

from pipeline import cli

__all__ = ["IN_MEMORY", "VOCAB", "encode_and_pack", "pack", "report", "train"]

# Fast, single-process runner for tests where the runner is not the point.
IN_MEMORY = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]
# The vocabulary size of the small training runs.
VOCAB = 400


def train(*argv: str) -> int:
    """``beam-bpe train --no-progress ARGV``; its exit code."""
    return cli.main(["train", "--no-progress", *argv])


def pack(*argv: str) -> int:
    """``beam-bpe pack ARGV``; its exit code."""
    return cli.main(["pack", *argv])


def encode_and_pack(*argv: str) -> int:
    """``beam-bpe encode ARGV`` (with ``--pack N``); its exit code."""
    return cli.main(["encode", *argv])


def report(*argv: str) -> int:
    """``beam-bpe report ARGV``; its exit code."""
    return cli.main(["report", *argv])
