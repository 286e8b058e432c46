"""The input records a job could not read (its dead letters), read back from its output
directory and reported: the summary lines every command prints, and ``--strict``.

    letters = read_dead_letters(directory)                # [{"file", "record", "reason"}, ...]
    print_dead_letters(letters, directory, file=sys.stderr)
    fail_if_strict(args.strict, directory, "not training")  # UserError with any dead letter

The job writes them under ``DIR/dead_letters/dead_letters-SSSSS-of-NNNNN.jsonl``
(``transforms.dead_letters.WriteDeadLetters``). ``fail_if_strict`` lists them on
stderr and raises ``UserError``: one error line, exit 2, for every command.
"""

from __future__ import annotations

import json
import sys

from apache_beam.io.filesystems import FileSystems

from pipeline.command_machinery.errors import UserError
from pipeline.command_machinery.outputs import open_read
from transforms.dead_letters import DEAD_LETTER_GLOB, DEAD_LETTERS_DIR

__all__ = ["dead_letter_files", "dead_letter_glob", "dead_letter_lines", "fail_if_strict", "print_dead_letters",
           "read_dead_letters"]

# How many dead letters a summary or a --strict failure lists in full.
SHOWN_DEAD_LETTERS = 5


def dead_letter_glob(directory: str) -> str:
    """The glob of the dead-letter files of a job that wrote into ``directory``."""
    return FileSystems.join(directory, DEAD_LETTERS_DIR, DEAD_LETTER_GLOB)


def dead_letter_files(directory: str) -> list[str]:
    """The dead-letter files under ``directory``, sorted."""
    return sorted(m.path for m in FileSystems.match([dead_letter_glob(directory)])[0].metadata_list)


def read_dead_letters(directory: str) -> list[dict]:
    """Every dead letter under ``directory`` ({"file", "record", "reason"}), by file and record."""
    dead_letters = []
    for path in dead_letter_files(directory):
        with open_read(path) as f:
            for line in f.read().decode("utf-8").splitlines():
                if line.strip():
                    dead_letters.append(json.loads(line))
    dead_letters.sort(key=lambda d: (d["file"], d["record"]))
    return dead_letters


def dead_letter_lines(dead_letters: list[dict], directory: str) -> list[str]:
    """The summary of the dead letters: how many, where, and the first few."""
    where = FileSystems.join(directory, DEAD_LETTERS_DIR)
    lines = [f"{len(dead_letters):,} input record(s) could not be read; all are listed in {where}/"]
    for d in dead_letters[:SHOWN_DEAD_LETTERS]:
        record = "whole file" if d["record"] == -1 else f"record {d['record']}"
        lines.append(f"  {d['file']} ({record}): {d['reason']}")
    if len(dead_letters) > SHOWN_DEAD_LETTERS:
        lines.append(f"  ... and {len(dead_letters) - SHOWN_DEAD_LETTERS:,} more")
    return lines


def print_dead_letters(dead_letters: list[dict], directory: str, file=None) -> None:
    """Prints ``dead_letter_lines`` (nothing when there are none)."""
    if dead_letters:
        print("\n".join(dead_letter_lines(dead_letters, directory)), file=file or sys.stdout)


def fail_if_strict(strict: bool, directory: str, outcome: str) -> None:
    """The ``--strict`` decision: with dead letters, lists them on stderr and fails.

    Args:
      strict: whether --strict was given.
      directory: the job's output directory, holding ``dead_letters/``.
      outcome: what the command did or did not do, for the error line.

    Raises:
      UserError: strict and at least one dead letter (the CLI exits 2).
    """
    if not strict:
        return
    dead_letters = read_dead_letters(directory)
    if dead_letters:
        print_dead_letters(dead_letters, directory, file=sys.stderr)
        raise UserError(f"{len(dead_letters):,} input records could not be read (--strict); {outcome}")
