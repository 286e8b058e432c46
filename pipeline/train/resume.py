"""Resuming ``beam-bpe train``: the count marker and the merge checkpoint.

A finished count phase leaves ``OUT/word_counts.complete``: the table's
fingerprint (SHA-256, size, rows), the settings that made it, every input
file's path, size and modification time, and what the count measured. The
table counts as complete only with a matching marker: ``--resume`` refuses
when a setting or an input file changed (a file rewritten under the same name
is another corpus), and counts again when the marker or the table is damaged.
Training saves the merges learned so far to ``OUT/merges.checkpoint.json``
(atomically, so a SIGKILL leaves the previous one whole); SIGTERM is turned
into a KeyboardInterrupt so that it saves one on the way out, as Ctrl-C does.
``--resume`` skips a complete count phase and continues from the checkpoint;
the result is byte for byte the one of an uninterrupted run.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shlex
import sys

from apache_beam.io.filesystems import FileSystems

from bpe.training.extension import check_extension_merges
from bpe.training.trainer import check_merges
from pipeline.command_machinery import outputs
from pipeline.command_machinery.errors import UserError
from pipeline.train import sources, superwords
from pipeline.train.stats import COUNTED, TrainStats
from pipeline.train.word_counts import num_rows

COUNT_MARKER_FILE = "word_counts.complete"  # written once the table is complete
CHECKPOINT_FILE = "merges.checkpoint.json"


def fingerprint(path: str) -> dict:
    """What identifies a word-count table: its SHA-256, size and row count.

    The merges are a function of the table's contents, so a checkpoint or a
    count marker applies to a table only if these match.
    """
    digest = hashlib.sha256()
    size = 0
    try:
        with outputs.open_read(path) as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
                size += len(chunk)
        rows = num_rows(path)
    except Exception as e:  # noqa: BLE001 - the table was read before; this is a race or a bad disk
        raise UserError(f"cannot read word-count table {outputs.local_path(path)}: {str(e).splitlines()[0]}") from None
    return {"sha256": digest.hexdigest(), "bytes": size, "rows": rows}


def count_settings(args: argparse.Namespace, files: list[str], runs_of: str | None = None) -> dict:
    """The settings that decide what the count phase writes (not the runner's). ``runs_of``:
    the SHA-256 of the tokenizer whose runs of ordinary text are counted (``train --extend``
    of a Hugging Face file that normalizes or matches added tokens), else None."""
    return {
        "input": list(args.input),
        "files": len(files),
        # The matched files themselves: a glob that matches more shards now is another corpus.
        "files_sha256": hashlib.sha256("\n".join(sorted(files)).encode("utf-8", "surrogateescape")).hexdigest(),
        "format": args.format,
        "text_field": args.text_field,
        "pattern": args.pattern,
        "min_word_count": args.min_word_count,
        # The sources decide the table's rows, and with --min-word-count (weighted) which pieces stay.
        **sources.settings(args),
        "runs_of": runs_of,
        # The stage-two pieces are counted too (``pipeline.train.superwords``); only then the key is there.
        **({"superwords": True} if superwords.wanted(args) else {}),
    }


def file_states(files: list[str]) -> list[list]:
    """[path, size, modification time] of every input file, sorted by path.

    What the counts depend on besides the settings: a file rewritten under
    the same name changes its size or its modification time.
    """
    files = sorted(files)
    if all(outputs.is_local(path) for path in files):
        states = []
        for path in files:
            try:
                st = os.stat(path)
                states.append([path, st.st_size, st.st_mtime_ns])
            except OSError:
                states.append([path, None, None])  # gone: the reader makes it a dead letter
        return states
    try:
        results = FileSystems.match(files)
    except Exception:  # noqa: BLE001 - a file system that cannot answer: names only
        return [[path, None, None] for path in files]
    return [[path, *((r.metadata_list[0].size_in_bytes, r.metadata_list[0].last_updated_in_seconds)
                     if r.metadata_list else (None, None))] for path, r in zip(files, results)]


def _changed_file(then: list, now: list) -> str | None:
    """Which input file differs between two ``file_states`` lists, said for people; None if none."""
    for old, new in zip(then, now):
        if old != new:
            return f"{new[0]} changed since the count (size {old[1]} -> {new[1]}, modified {old[2]} -> {new[2]})"
    return None if len(then) == len(now) else "the input files changed since the count"


def _damage(marker: dict) -> str | None:
    """What is wrong with the shape of a count marker (hand-edited or from another version); None if nothing."""
    for key in ("settings", "table", "stats"):
        if not isinstance(marker.get(key), dict):
            return f"{key} is not an object"
    if not isinstance(marker.get("inputs"), list) or not all(
            isinstance(state, list) and len(state) == 3 for state in marker["inputs"]):
        return "inputs is not a list of [path, size, modified]"
    stats = marker["stats"]
    if isinstance(stats.get("seconds"), bool) or not isinstance(stats.get("seconds"), (int, float)):
        return "stats.seconds is not a number"
    for key in COUNTED:
        value = stats.get(key)
        expected = str if key == "runner" else int
        if value is not None and (isinstance(value, bool) or not isinstance(value, expected)):
            return f"stats.{key} is not {'a string' if expected is str else 'an integer'}"
    return None


def recorded_count(table_path: str, table_id: dict) -> dict | None:
    """The settings of the count that wrote the table at ``table_path`` (local paths
    absolute), as the count marker beside it records them; None when no marker there
    describes this very table (none, damaged, or one of a table changed since).

    Args:
      table_path: the word-count table.
      table_id: its ``fingerprint``.
    """
    directory = table_path.rsplit("/", 1)[0]
    marker = outputs.read_json(FileSystems.join(directory, COUNT_MARKER_FILE))
    if marker is None or _damage(marker) or marker["table"] != table_id:
        return None
    return marker["settings"]


class CountMarker:
    """``OUT/word_counts.complete``: marks the count phase in ``output`` complete.

    Args:
      output: the output directory.
      settings: ``count_settings`` of this run.
      inputs: ``file_states`` of this run's input files, taken before the count.
    """

    def __init__(self, output: str, settings: dict, inputs: list[list]):
        self.output = output
        self.path = FileSystems.join(output, COUNT_MARKER_FILE)
        self.settings = settings
        self.inputs = inputs

    def write(self, table_id: dict, stats: TrainStats) -> None:
        """Written only after the table is whole."""
        outputs.write_json(self.path, {"table": table_id, "settings": self.settings, "inputs": self.inputs,
                                       "stats": stats.counted()})

    def remove(self) -> None:
        """Until a new count is complete, the table of an earlier one is not."""
        outputs.remove(self.path)

    def load(self, table_path: str) -> dict | None:
        """The marker, if the count phase is complete for this table; else None (count again).

        Raises:
          UserError: the count phase is complete but was run with other
            settings or on input files that changed since: continuing would
            mix two corpora.
        """
        marker = outputs.read_json(self.path)
        if marker is None:
            damaged = " (its marker is damaged)" if FileSystems.exists(self.path) else ""
            print(f"beam-bpe train: no complete count phase in {self.output}{damaged}; counting", file=sys.stderr)
            return None
        damage = _damage(marker)
        if damage:
            print(f"beam-bpe train: {self.path} is damaged ({damage}); counting again", file=sys.stderr)
            return None
        for key, value in self.settings.items():
            then = marker["settings"].get(key)
            if then != value:
                what = "the --input globs match other files" if key == "files_sha256" else (
                    f"--{key.replace('_', '-')} was {_show(then)}, now {_show(value)}")
                raise UserError(
                    f"cannot --resume: the count phase in {self.output} was run with other settings ({what}); "
                    "run without --resume to start over"
                )
        changed = _changed_file(marker["inputs"], self.inputs)
        if changed:
            raise UserError(f"cannot --resume: {changed}; run without --resume to count the corpus again")
        if not FileSystems.exists(table_path) or marker["table"] != fingerprint(table_path):
            print(f"beam-bpe train: {table_path} does not match {self.path}; counting again", file=sys.stderr)
            return None
        return marker


def _show(value) -> str:
    if value is None or value == []:
        return "none"
    return " ".join(value) if isinstance(value, list) else str(value)


def _other_setting(key: str, then, now) -> str:
    """How a setting recorded in the output differs from this run's, said for people."""
    if key == "word_counts":
        return "another word-count table"
    if key == "extend":
        return "another --extend base" if then and now else f"--extend was {_show(then)}, now {_show(now)}"
    return f"--{key.replace('_', '-')} was {_show(then)}, now {_show(now)}"


def merge_settings(args: argparse.Namespace, base=None) -> dict:
    """What the merges depend on besides the word-count table: min_frequency and the
    tie-break; the pattern, because the table was counted with it; the sources; the
    tokenizer being extended (``train --extend``), by its SHA-256; and the superword stage."""
    return {
        "min_frequency": args.min_frequency,
        "pattern": args.pattern,
        "tie_break": args.tie_break,
        "parity": bool(args.parity),
        "global_merges": args.global_merges or 0,
        **sources.settings(args),
        "extend": base.sha256 if base is not None else None,
        # Stage one ends at the transition, and superword merges are not an ordinary extension's.
        "superword_transition": getattr(args, "superword_transition", None),
        "superword_merges": bool(getattr(args, "superword_merges", None)),
    }


def asked_size(args: argparse.Namespace) -> dict:
    """What says how many merges to learn: --vocab-size and the special tokens, or --new-tokens."""
    return {"vocab_size": args.vocab_size, "special_tokens": list(args.special_token),
            "new_tokens": getattr(args, "new_tokens", None),
            "superword_merges": getattr(args, "superword_merges", None)}


def check_finished_result(output: str, recorded: dict | None, learned_with: dict) -> None:
    """``--resume`` where a finished tokenizer is and no checkpoint (a run removes it once
    it finishes): only the run that finished there may continue, which learns the same
    tokenizer again; a finished result of anything else is replaced only with --overwrite.

    Args:
      output: the output directory.
      recorded: the finished run's ``learned_with`` (train_stats.json); None if it records none.
      learned_with: this run's (``Checkpoint.learned_with``, or before the count the same
        without the table, which is then not compared).

    Raises:
      UserError: the finished tokenizer records other settings, or none.
    """
    if FileSystems.exists(FileSystems.join(output, CHECKPOINT_FILE)):
        return  # the checkpoint's own checks decide (Checkpoint.load)
    if not isinstance(recorded, dict):
        raise UserError(f"cannot --resume: {output} holds a finished tokenizer that records no settings to compare "
                        "with this run's; pass --overwrite to replace it, or choose another --output")
    for key, value in learned_with.items():
        if recorded.get(key) != value:
            raise UserError(
                f"cannot --resume: {output} holds the finished tokenizer of another run "
                f"({_other_setting(key, recorded.get(key), value)}); pass --overwrite to replace it, "
                "or choose another --output"
            )


class Checkpoint:
    """``OUT/merges.checkpoint.json``: the merges so far and what they depend on.

    Args:
      output: the output directory.
      table_id: the word-count table's ``fingerprint``.
      args: the run's settings.
      base: the tokenizer being extended (``train --extend``): the merges are new ones on it.
    """

    def __init__(self, output: str, table_id: dict, args: argparse.Namespace, base=None):
        self.output = output
        self.path = FileSystems.join(output, CHECKPOINT_FILE)
        # The merges depend on the table and ``merge_settings``. vocab_size and the
        # special tokens only say how many merges to learn, and the first N
        # merges of any run are the same: they may change between runs.
        self.settings = {"word_counts": table_id, **merge_settings(args, base)}
        self.base = base
        self.size = asked_size(args)
        self.wanted = {"vocab_size": args.vocab_size, "special_tokens": list(args.special_token)}
        self.saved = 0  # how many merges the file on disk holds

    def learned_with(self) -> dict:
        """What the finished tokenizer records (train_stats.json's ``learned_with``): the
        checkpoint's settings and the size asked for. Once the checkpoint is gone,
        ``--resume`` continues only a run with all of them the same
        (``check_finished_result``)."""
        return {**self.settings, **self.size}

    def load(self) -> list:
        """The checkpoint's merges; [] when there is none.

        Raises:
          UserError: the checkpoint is damaged, or belongs to other settings.
        """
        data = outputs.read_json(self.path)
        if data is None:
            if FileSystems.exists(self.path):
                raise UserError(f"cannot --resume: {self.path} is damaged; delete it to start the merges from zero")
            print(f"beam-bpe train: no checkpoint in {self.path}; starting the merges from zero", file=sys.stderr)
            return []
        data.setdefault("tie_break", "bytes")  # checkpoints of versions before --tie-break
        for key, value in (("parity", False), ("global_merges", 0), ("source_field", None), ("source_weight", None)):
            data.setdefault(key, value)  # and before sources
        for key, value in (("superword_transition", None), ("superword_merges", False)):
            data.setdefault(key, value)  # and before superwords
        for key, value in self.settings.items():
            if data.get(key) != value:
                what = "another word-count table" if key == "word_counts" else (
                    f"--{key.replace('_', '-')} {_show(data.get(key))}, not {_show(value)}")
                raise UserError(
                    f"cannot --resume: {self.path} was made with {what}; "
                    "run without --resume to start over (or use the same settings)"
                )
        merges = data.get("merges")
        try:
            # Checks the shape (IDs exist before use, no bytes spelled twice).
            merges = merges if isinstance(merges, list) else None
            merges = check_merges(merges) if self.base is None else check_extension_merges(self.base, merges)
        except (TypeError, ValueError) as e:
            raise UserError(f"cannot --resume: {self.path} is damaged ({e}); delete it to start over") from None
        print(f"beam-bpe train: resuming after {len(merges):,} merges from {self.path}", file=sys.stderr)
        return merges

    def save(self, merges: list) -> None:
        """Writes the checkpoint atomically: a crash at any moment leaves the old or the new one."""
        data = {"what": "beam-bpe merges checkpoint", **self.settings, **self.wanted, "merges": merges}
        outputs.write_json(self.path, data, indent=None)
        self.saved = len(merges)

    def remove(self) -> None:
        outputs.remove(self.path)


def resume_command() -> str:
    """This process's own command line plus --resume, ready to paste into a shell."""
    argv = sys.argv[1:]
    if not argv or argv[0] != "train":  # called as a library (e.g. cli.main from a test)
        return "the same beam-bpe train command with --resume"
    if sys.argv[0].endswith(os.path.join("pipeline", "cli.py")):
        program = [sys.executable, "-m", "pipeline.cli"]  # run as python -m pipeline.cli
    else:
        program = [sys.argv[0]]
    if "--resume" not in argv:
        argv = [*argv, "--resume"]
    return shlex.join([*program, *argv])
