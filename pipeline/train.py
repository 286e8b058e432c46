"""``beam-bpe train``: count pre-tokens with Beam, then learn the merges on one machine.

    beam-bpe train --input 'corpus/*.jsonl.gz' --vocab-size 32000 --output out/

Phase 1 (a Beam job, on any runner): ReadDocuments -> CountPreTokenTables ->
``OUT/word_counts.parquet`` (word binary, count int64), and unreadable records
under ``OUT/dead_letters/``. Phase 2 (this process): ``bpe.train`` on that
table -> ``OUT/tokenizer.json``, plus ``OUT/train_stats.json``.

``--word-counts FILE`` skips phase 1 and trains from an existing table, e.g.
another vocabulary size without recounting the corpus.

Resuming (``--resume``): a finished phase 1 leaves ``OUT/word_counts.complete``
(the table's size, rows and SHA-256, the settings that made it, its counters);
the table counts as complete only with a matching marker. Phase 2 saves the
merges learned so far to ``OUT/merges.checkpoint.json`` every
``--checkpoint-every`` seconds and when stopped by SIGINT or SIGTERM (always
written to a temporary file and renamed, so a SIGKILL leaves the previous one
whole). ``--resume`` skips a complete phase 1 and continues from the
checkpoint; the result is byte for byte the one of an uninterrupted run.

Everything the user can get wrong is checked before the job starts and
reported as one line (``pipeline.errors.UserError``).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shlex
import signal
import sys
import threading
import time
from collections import Counter

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

import bpe
from bpe.pretokenize import compile_pattern
from bpe.trainer import MAX_TOKEN_ID, check_merges
from pipeline.config import Setting, default_help, resolve
from pipeline.errors import UserError
from pipeline.runners import committed_counters, describe_runner, new_pipeline, pipeline_options
from transforms.count import CountPreTokenTables
from transforms.dead_letters import WriteDeadLetters
from transforms.parquet import WriteParquetTables
from transforms.read import FORMATS, ReadDocuments, match_inputs

WORD_COUNTS_FILE = "word_counts.parquet"
COUNT_MARKER_FILE = "word_counts.complete"  # written once the table is complete
CHECKPOINT_FILE = "merges.checkpoint.json"
STATS_FILE = "train_stats.json"
WORD_COUNTS_SCHEMA = pa.schema([("word", pa.binary()), ("count", pa.int64())])

# Keys of --config files (flag names with underscores) and their defaults.
SETTINGS = {
    "input": Setting("list", []),
    "vocab_size": Setting("int"),
    "output": Setting("str"),
    "format": Setting("str", "auto"),
    "text_field": Setting("str", "text"),
    "pattern": Setting("str", "gpt2"),
    "special_token": Setting("list", []),
    "min_frequency": Setting("int", 2),
    "min_word_count": Setting("int", 1),
    "word_counts": Setting("str"),
    "strict": Setting("bool", False),
    "no_progress": Setting("bool", False),
    "resume": Setting("bool", False),
    # Seconds, a number; "str" because config.Setting has no float kind.
    "checkpoint_every": Setting("str", "30"),
}

# How many dead letters a summary or a --strict failure lists in full.
_SHOWN_DEAD_LETTERS = 5


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds train's flags. Defaults stay None so config files can fill them in."""
    h = default_help(SETTINGS)
    parser.epilog = (
        "Other --flags are Beam pipeline options (--runner, --direct_num_workers, ...). "
        "DirectRunner uses all local cores unless told otherwise."
    )
    parser.add_argument("--input", action="append", metavar="GLOB",
                        help="corpus files: a glob, path or URL (gs://, s3://); repeatable")
    parser.add_argument("--vocab-size", type=int, metavar="N",
                        help="256 byte tokens + merges + special tokens (required)")
    parser.add_argument("--output", metavar="DIR", help="directory for tokenizer.json and the rest (required)")
    parser.add_argument("--format", metavar="FORMAT", help=h("format", f"one of {', '.join(FORMATS)}"))
    parser.add_argument("--text-field", metavar="NAME", help=h("text_field", "jsonl key / Parquet column of the text"))
    parser.add_argument("--pattern", metavar="PATTERN",
                        help=h("pattern", "pre-tokenizer: gpt2, cl100k, o200k or a regex"))
    parser.add_argument("--special-token", action="append", metavar="TOKEN",
                        help="a special token, given its own ID after the merges; repeatable")
    parser.add_argument("--min-frequency", type=int, metavar="N",
                        help=h("min_frequency", "stop when the best pair occurs fewer times"))
    parser.add_argument("--min-word-count", type=int, metavar="N",
                        help=h("min_word_count", "drop pieces seen fewer times in the corpus before training"))
    parser.add_argument("--word-counts", metavar="FILE",
                        help="train from this word-count table instead of reading --input")
    parser.add_argument("--config", action="append", default=[], metavar="FILE.yaml",
                        help="flag values from YAML (keys = flag names with underscores, "
                        "beam_options = Beam flags); command-line flags win; repeatable")
    parser.add_argument("--strict", action="store_true", default=None,
                        help="fail (exit 2) if any input record could not be read")
    parser.add_argument("--no-progress", action="store_true", default=None, help="no progress bar")
    parser.add_argument("--resume", action="store_true", default=None,
                        help=f"continue an interrupted run in --output: skip a complete count phase "
                        f"({COUNT_MARKER_FILE}) and continue the merges from {CHECKPOINT_FILE}")
    parser.add_argument("--checkpoint-every", metavar="SECONDS",
                        help=h("checkpoint_every", f"save the merges so far to {CHECKPOINT_FILE} this often"))


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    started = time.monotonic()
    _check_misspelled_flags(beam_args)
    config_flags = resolve(args, SETTINGS, args.config)
    output = _check_settings(args)
    options = pipeline_options([*config_flags, *beam_args])
    files = [] if args.word_counts else _match(args.input)
    _check_output(output)

    stats = {
        "inputs": [] if args.word_counts else list(args.input),
        "files": len(files),
        "pattern": args.pattern,
        "min_word_count": args.min_word_count,
        "min_frequency": args.min_frequency,
        "special_tokens": list(args.special_token),
        "runner": None,
        "documents": None,
        "bytes": None,
        "pieces": None,
        "dead_letters": None,
        "unique_pieces": None,
        "word_counts": args.word_counts or FileSystems.join(output, WORD_COUNTS_FILE),
        "seconds": {},
    }

    if args.word_counts:
        print(f"beam-bpe train: training from {args.word_counts} (not reading any --input)", file=sys.stderr)
        table_path = args.word_counts
        table_id = _fingerprint(table_path)
    else:
        table_path = stats["word_counts"]
        table_id = _count_phase(args, files, output, options, stats)
        if stats["dead_letters"] and args.strict:
            _report_dead_letters(_read_dead_letters(output), output, file=sys.stderr)
            print(
                f"beam-bpe train: error: {stats['dead_letters']} input record(s) could not be read (--strict); "
                f"not training. Word counts so far: {stats['word_counts']}",
                file=sys.stderr,
            )
            return 2
    table = _read_word_counts(table_path)
    stats["word_count_rows"] = len(table)
    if stats["unique_pieces"] is None:
        stats["unique_pieces"] = len(table)

    checkpoint = _Checkpoint(output, table_id, args)
    resume_from = checkpoint.load() if args.resume else []
    stats["resumed_from_merges"] = len(resume_from)
    checkpoint.save(resume_from)  # from here on, --resume continues these merges
    train_started = time.monotonic()
    try:
        with _sigterm_as_interrupt():
            tokenizer = bpe.train(
                table,
                vocab_size=args.vocab_size,
                pattern=args.pattern,
                special_tokens=args.special_token,
                min_frequency=args.min_frequency,
                progress=False if args.no_progress else None,
                resume_from=resume_from,
                checkpoint=checkpoint.save,
                checkpoint_every=args.checkpoint_every,
            )
    except ValueError as e:  # checked up front; kept so a slip is still one line
        raise UserError(str(e)) from None
    except KeyboardInterrupt as e:
        # bpe.train saved the merges on its way out (see train_merges).
        signum = e.signum if isinstance(e, _Terminated) else signal.SIGINT
        print(
            f"beam-bpe train: interrupted ({signal.Signals(signum).name}); {checkpoint.saved:,} merges are saved "
            f"in {checkpoint.path}. To resume: {_resume_command()}",
            file=sys.stderr,
        )
        return 128 + signum
    stats["seconds"]["train"] = round(time.monotonic() - train_started, 3)
    stats["merges"] = len(tokenizer.merges)
    stats["vocab_size"] = tokenizer.vocab_size
    stats["requested_vocab_size"] = args.vocab_size

    tokenizer_path = FileSystems.join(output, "tokenizer.json")
    stats_path = FileSystems.join(output, STATS_FILE)
    _write_text(tokenizer_path, tokenizer.to_json())
    stats["seconds"]["total"] = round(time.monotonic() - started, 3)
    _write_text(stats_path, json.dumps(stats, indent=1) + "\n")
    checkpoint.remove()  # only now: until tokenizer.json is whole, --resume needs it
    _print_summary(stats, tokenizer_path, stats_path, output)
    if stats["dead_letters"]:
        _report_dead_letters(_read_dead_letters(output), output, file=sys.stdout)
    return 0


def _count_phase(args: argparse.Namespace, files: list[str], output: str, options, stats: dict) -> dict:
    """Phase 1: counts the corpus into OUT/word_counts.parquet, unless --resume finds
    that count complete. Fills ``stats``; returns the table's fingerprint."""
    table_path = stats["word_counts"]
    count_settings = _count_settings(args, files)
    marker = _complete_count(output, table_path, count_settings) if args.resume else None
    if marker is not None:
        print(
            f"beam-bpe train: the count phase is complete ({FileSystems.join(output, COUNT_MARKER_FILE)}); "
            "not counting again",
            file=sys.stderr,
        )
        counted = dict(marker["stats"])
        stats["seconds"]["count"] = counted.pop("seconds")
        stats.update(counted)
        table_id = marker["table"]
    else:
        # Until this count is complete, the table of an earlier one is not.
        marker_path = FileSystems.join(output, COUNT_MARKER_FILE)
        if FileSystems.exists(marker_path):
            FileSystems.delete([marker_path])
        stats["runner"] = describe_runner(options)
        count_started = time.monotonic()
        counters = run_count_job(args, output, options)
        stats["seconds"]["count"] = round(time.monotonic() - count_started, 3)
        for name in ("documents", "bytes", "pieces", "unique_pieces"):
            stats[name] = counters.get(("CountPreTokens", name))
        table_id = _fingerprint(table_path)
        _write_count_marker(output, table_id, count_settings, stats)
    # The files are the source of truth; counters are for reporting only.
    stats["dead_letters"] = len(_read_dead_letters(output))
    return table_id


# --- Resuming: the count marker, the merge checkpoint, signals -------------------


def _fingerprint(path: str) -> dict:
    """What identifies a word-count table: its SHA-256, size and row count.

    The merges are a function of the table's contents, so a checkpoint or a
    count marker applies to a table only if these match.
    """
    digest = hashlib.sha256()
    size = 0
    if path.startswith("file://"):
        path = path[len("file://"):]
    try:
        with (open(path, "rb") if _is_local(path)
              else FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)) as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
                size += len(chunk)
        if _is_local(path):
            rows = pq.read_metadata(path).num_rows
        else:
            with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
                rows = pq.read_metadata(pa.BufferReader(f.read())).num_rows
    except Exception as e:  # noqa: BLE001 - the table was read before; this is a race or a bad disk
        raise UserError(f"cannot read word-count table {path}: {str(e).splitlines()[0]}") from None
    return {"sha256": digest.hexdigest(), "bytes": size, "rows": rows}


def _count_settings(args: argparse.Namespace, files: list[str]) -> dict:
    """The settings that decide what the count phase writes (not the runner's)."""
    return {
        "input": list(args.input),
        "files": len(files),
        # The matched files themselves: a glob that matches more shards now is another corpus.
        "files_sha256": hashlib.sha256("\n".join(sorted(files)).encode("utf-8", "surrogateescape")).hexdigest(),
        "format": args.format,
        "text_field": args.text_field,
        "pattern": args.pattern,
        "min_word_count": args.min_word_count,
    }


def _write_count_marker(output: str, table_id: dict, settings: dict, stats: dict) -> None:
    """Marks the count phase complete: written only after the table is whole."""
    counted = {key: stats[key] for key in ("runner", "documents", "bytes", "pieces", "unique_pieces")}
    counted["seconds"] = stats["seconds"]["count"]
    marker = {"table": table_id, "settings": settings, "stats": counted}
    _write_text(FileSystems.join(output, COUNT_MARKER_FILE), json.dumps(marker, indent=1) + "\n")


def _complete_count(output: str, table_path: str, settings: dict) -> dict | None:
    """The count marker, if the count phase in ``output`` is complete; else None (count again).

    Raises:
      UserError: the count phase is complete but was run with other settings:
        continuing would mix two runs.
    """
    marker_path = FileSystems.join(output, COUNT_MARKER_FILE)
    marker = _read_json(marker_path)
    if marker is None:
        print(f"beam-bpe train: no complete count phase in {output}; counting", file=sys.stderr)
        return None
    for key, value in settings.items():
        if marker.get("settings", {}).get(key) != value:
            then = marker.get("settings", {}).get(key)
            what = "the --input globs match other files" if key == "files_sha256" else (
                f"--{key.replace('_', '-')} was {_show(then)}, now {_show(value)}")
            raise UserError(
                f"cannot --resume: the count phase in {output} was run with other settings ({what}); "
                "run without --resume to start over"
            )
    if not FileSystems.exists(table_path) or marker.get("table") != _fingerprint(table_path):
        print(f"beam-bpe train: {table_path} does not match {marker_path}; counting again", file=sys.stderr)
        return None
    return marker


def _show(value) -> str:
    return " ".join(value) if isinstance(value, list) else str(value)


def _read_json(path: str) -> dict | None:
    """A JSON object from ``path``; None if the file does not exist or is not one."""
    try:
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            data = json.loads(f.read().decode("utf-8"))
    except Exception:  # noqa: BLE001 - missing (an IOError of some file system) or damaged
        return None
    return data if isinstance(data, dict) else None


class _Checkpoint:
    """``OUT/merges.checkpoint.json``: the merges so far and what they depend on.

    Args:
      output: the output directory.
      table_id: the word-count table's ``_fingerprint``.
      args: the run's settings.
    """

    def __init__(self, output: str, table_id: dict, args: argparse.Namespace):
        self.path = FileSystems.join(output, CHECKPOINT_FILE)
        # The merges depend on the table and min_frequency only; the pattern
        # must match because the table was counted with it. vocab_size and the
        # special tokens only say how many merges to learn, and the first N
        # merges of any run are the same: they may change between runs.
        self.settings = {
            "word_counts": table_id,
            "min_frequency": args.min_frequency,
            "pattern": args.pattern,
        }
        self.wanted = {"vocab_size": args.vocab_size, "special_tokens": list(args.special_token)}
        self.saved = 0  # how many merges the file on disk holds

    def load(self) -> list:
        """The checkpoint's merges; [] when there is none.

        Raises:
          UserError: the checkpoint is damaged, or belongs to other settings.
        """
        data = _read_json(self.path)
        if data is None:
            if FileSystems.exists(self.path):
                raise UserError(f"cannot --resume: {self.path} is damaged; delete it to start the merges from zero")
            print(f"beam-bpe train: no checkpoint in {self.path}; starting the merges from zero", file=sys.stderr)
            return []
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
            merges = check_merges(merges if isinstance(merges, list) else None)
        except (TypeError, ValueError) as e:
            raise UserError(f"cannot --resume: {self.path} is damaged ({e}); delete it to start over") from None
        print(f"beam-bpe train: resuming after {len(merges):,} merges from {self.path}", file=sys.stderr)
        return merges

    def save(self, merges: list) -> None:
        """Writes the checkpoint atomically: a crash at any moment leaves the old or the new one."""
        data = {"what": "beam-bpe merges checkpoint", **self.settings, **self.wanted, "merges": merges}
        _write_text(self.path, json.dumps(data, separators=(",", ":")) + "\n")
        self.saved = len(merges)

    def remove(self) -> None:
        if FileSystems.exists(self.path):
            FileSystems.delete([self.path])


class _Terminated(KeyboardInterrupt):
    """SIGTERM, delivered like Ctrl-C so training saves a checkpoint on the way out."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def _sigterm_as_interrupt():
    """Within the block, SIGTERM raises ``_Terminated`` (a KeyboardInterrupt)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers (e.g. run from a test thread)
        return

    def terminated(signum, frame):
        raise _Terminated(signum)

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _resume_command() -> str:
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


def _check_misspelled_flags(beam_args: list[str]) -> None:
    """Refuses our own flags spelled with underscores (--vocab_size).

    Unknown flags go to Beam, which only logs a warning for flags it does not
    know either; --min_frequency would otherwise be silently ignored.
    """
    ours = {key.replace("_", "-") for key in SETTINGS} | {"config"}
    for arg in beam_args:
        if arg.startswith("--"):
            name = arg[2:].split("=", 1)[0].replace("_", "-")
            if name in ours:
                raise UserError(f"unknown flag {arg.split('=', 1)[0]}: did you mean --{name}?")


def _check_settings(args: argparse.Namespace) -> str:
    """Checks every value that does not need the file system; returns the output dir."""
    if args.vocab_size is None:
        raise UserError("--vocab-size is required")
    if not args.output:
        raise UserError("--output is required")
    if not args.input and not args.word_counts:
        raise UserError("--input is required (or --word-counts to train from an existing table)")
    if args.format not in FORMATS:
        raise UserError(f"unknown --format {args.format!r}: use one of {', '.join(FORMATS)}")
    if not args.text_field:
        raise UserError("--text-field must not be empty")
    try:
        compile_pattern(args.pattern)
    except ValueError as e:
        raise UserError(f"--pattern: {e}") from None
    specials = args.special_token
    if any(not token for token in specials):
        raise UserError("--special-token must not be empty")
    duplicates = sorted({t for t in specials if specials.count(t) > 1})
    if duplicates:
        raise UserError(f"--special-token given twice: {', '.join(duplicates)}")
    minimum = 256 + len(specials)
    if args.vocab_size < minimum:
        raise UserError(
            f"--vocab-size {args.vocab_size} is too small: it must be at least {minimum} "
            f"(256 byte tokens + {len(specials)} special tokens)"
        )
    if args.vocab_size - len(specials) - 1 > MAX_TOKEN_ID:
        raise UserError(f"--vocab-size {args.vocab_size} is too large: token IDs stop at {MAX_TOKEN_ID}")
    if args.min_frequency < 1:
        raise UserError(f"--min-frequency must be at least 1, not {args.min_frequency}")
    if args.min_word_count < 1:
        raise UserError(f"--min-word-count must be at least 1, not {args.min_word_count}")
    try:
        args.checkpoint_every = float(args.checkpoint_every)
    except ValueError:
        args.checkpoint_every = -1.0
    if not args.checkpoint_every >= 0:  # also NaN
        raise UserError("--checkpoint-every must be a number of seconds, at least 0")
    if args.word_counts:
        _read_word_counts(args.word_counts)  # a bad table fails now, not after a job
    # Workers of a portable runner do not share our current directory: local
    # paths go to the job as absolute paths.
    args.input = [_absolute(pattern) for pattern in args.input]
    return _absolute(args.output)


def _absolute(path: str) -> str:
    # Beam's FileSystems knows local files as plain paths only.
    if path.startswith("file://"):
        path = path[len("file://"):]
    return os.path.abspath(path) if _is_local(path) else path


def _match(patterns: list[str]) -> list[str]:
    try:
        return match_inputs(patterns)
    except FileNotFoundError as e:
        raise UserError(f"--input: {e}") from None
    except Exception as e:  # noqa: BLE001 - e.g. an unknown scheme or missing credentials
        raise UserError(f"--input: cannot list files: {e}") from None


def _is_local(path: str) -> bool:
    return "://" not in path


def _check_output(output: str) -> None:
    """Creates the output directory and proves it writable, before any work."""
    probe = FileSystems.join(output, ".beam-bpe-write-check")
    try:
        if _is_local(output):
            if os.path.exists(output) and not os.path.isdir(output):
                raise UserError(f"--output {output} exists and is not a directory")
            os.makedirs(output, exist_ok=True)
        FileSystems.create(probe).close()
        FileSystems.delete([probe])
    except UserError:
        raise
    except Exception as e:  # noqa: BLE001 - OSError locally, BeamIOError/auth errors remotely
        reason = getattr(e, "strerror", None) or str(e).splitlines()[0]
        raise UserError(f"cannot write to --output {output}: {reason}") from None


def _dead_letter_glob(output: str) -> str:
    return FileSystems.join(output, "dead_letters", "dead_letters-*-of-*.jsonl")


def run_count_job(args: argparse.Namespace, output: str, options) -> dict[tuple[str, str], int]:
    """Runs the counting job (phase 1) into ``output``; returns its counters ({} if the
    runner has none). ``args`` needs input, format, text_field, pattern, min_word_count."""
    # Shards of an earlier run in the same directory would be mistaken for ours.
    stale = [m.path for m in FileSystems.match([_dead_letter_glob(output)])[0].metadata_list]
    if stale:
        FileSystems.delete(stale)

    pipeline = new_pipeline(options)
    read = pipeline | "ReadDocuments" >> ReadDocuments(args.input, format=args.format, text_field=args.text_field)
    (
        read.documents
        | "CountPreTokens" >> CountPreTokenTables(args.pattern, min_word_count=args.min_word_count)
        | "ToArrow" >> beam.Map(_word_count_table).with_output_types(pa.Table)
        # One file with exactly this name: one shard, no shard numbers in the
        # name, written by Beam's sink (temp file + rename) on any runner.
        | "WriteWordCounts" >> WriteParquetTables(
            FileSystems.join(output, "word_counts"),
            WORD_COUNTS_SCHEMA,
            file_name_suffix=".parquet",
            num_shards=1,
            shard_name_template="",
        )
    )
    read.dead_letters | "WriteDeadLetters" >> WriteDeadLetters(output)
    result = pipeline.run()
    result.wait_until_finish()
    return committed_counters(result)


def _word_count_table(counts: dict[bytes, int]) -> pa.Table:
    return pa.Table.from_arrays(
        [pa.array(list(counts.keys()), pa.binary()), pa.array(list(counts.values()), pa.int64())],
        schema=WORD_COUNTS_SCHEMA,
    )


def _read_word_counts(path: str) -> dict[bytes, int]:
    """Reads a word-count table (word binary/string, count integer) into a dict."""
    try:
        if _is_local(path):
            table = pq.read_table(path[len("file://"):] if path.startswith("file://") else path)
        else:
            with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
                table = pq.read_table(pa.BufferReader(f.read()))
    except FileNotFoundError:
        raise UserError(f"word-count table {path} does not exist") from None
    except Exception as e:  # noqa: BLE001 - OSError, ArrowInvalid: not a readable Parquet file
        raise UserError(f"cannot read word-count table {path}: {str(e).splitlines()[0]}") from None
    problem = None
    if "word" not in table.column_names or "count" not in table.column_names:
        problem = f"it needs columns 'word' and 'count', it has {', '.join(table.column_names) or 'none'}"
    else:
        word_type, count_type = table.schema.field("word").type, table.schema.field("count").type
        if not (pa.types.is_binary(word_type) or pa.types.is_large_binary(word_type)
                or pa.types.is_string(word_type) or pa.types.is_large_string(word_type)):
            problem = f"column 'word' has type {word_type}, expected binary"
        elif not pa.types.is_integer(count_type):
            problem = f"column 'count' has type {count_type}, expected int64"
        elif table.column("word").null_count or table.column("count").null_count:
            problem = "it has null words or counts"
    if problem:
        raise UserError(f"word-count table {path} is not usable: {problem}")
    words = table.column("word").to_pylist()
    counts = table.column("count").to_pylist()
    if any(c < 0 for c in counts):
        raise UserError(f"word-count table {path} is not usable: it has negative counts")
    words = [w.encode("utf-8") if isinstance(w, str) else w for w in words]
    table_dict = dict(zip(words, counts))
    if len(table_dict) != len(words):
        # A table written by someone else may list a word twice: add them up.
        summed: Counter[bytes] = Counter()
        for word, count in zip(words, counts):
            summed[word] += count
        table_dict = dict(summed)
    return table_dict


def _read_dead_letters(output: str) -> list[dict]:
    dead_letters = []
    for metadata in sorted(FileSystems.match([_dead_letter_glob(output)])[0].metadata_list, key=lambda m: m.path):
        with FileSystems.open(metadata.path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            for line in f.read().decode("utf-8").splitlines():
                if line.strip():
                    dead_letters.append(json.loads(line))
    dead_letters.sort(key=lambda d: (d["file"], d["record"]))
    return dead_letters


def _report_dead_letters(dead_letters: list[dict], output: str, file) -> None:
    where = FileSystems.join(output, "dead_letters")
    print(f"{len(dead_letters)} input record(s) could not be read; all are listed in {where}/", file=file)
    for d in dead_letters[:_SHOWN_DEAD_LETTERS]:
        record = "whole file" if d["record"] == -1 else f"record {d['record']}"
        print(f"  {d['file']} ({record}): {d['reason']}", file=file)
    if len(dead_letters) > _SHOWN_DEAD_LETTERS:
        print(f"  ... and {len(dead_letters) - _SHOWN_DEAD_LETTERS} more", file=file)


def _write_text(path: str, text: str) -> None:
    # Through FileSystems so gs:// and s3:// outputs work (an object appears
    # whole when closed); locally, write a temporary file, flush it to disk and
    # rename it, so neither a reader nor a crash (even of the machine) ever
    # leaves half a file under the real name.
    if _is_local(path):
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        # The rename itself is durable once the directory is flushed.
        directory = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
    else:
        with FileSystems.create(path, mime_type="application/json") as f:
            f.write(text.encode("utf-8"))


def _size(n: int | None) -> str:
    if n is None:
        return "? bytes"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def _print_summary(stats: dict, tokenizer_path: str, stats_path: str, output: str) -> None:
    seconds = stats["seconds"]
    if stats["runner"]:
        documents = "?" if stats["documents"] is None else f"{stats['documents']:,}"
        print(
            f"beam-bpe train: counted {documents} documents ({_size(stats['bytes'])}, {stats['files']:,} files) "
            f"-> {stats['unique_pieces']:,} unique pieces in {seconds['count']:.1f} s on {stats['runner']}"
        )
    merges_wanted = stats["requested_vocab_size"] - 256 - len(stats["special_tokens"])
    early = ""
    if stats["merges"] < merges_wanted:
        early = f" (stopped early: no pair occurs {stats['min_frequency']}+ times)"
    resumed = ""
    if stats["resumed_from_merges"]:
        resumed = f" (resumed after {stats['resumed_from_merges']:,} merges)"
    print(
        f"beam-bpe train: learned {stats['merges']:,} merges from {stats['word_count_rows']:,} pieces "
        f"-> vocab size {stats['vocab_size']:,} in {seconds['train']:.1f} s{resumed}{early}"
    )
    print(f"  tokenizer:    {tokenizer_path}")
    print(f"  word counts:  {stats['word_counts']}")
    print(f"  stats:        {stats_path}")
    if stats["dead_letters"] is not None and not stats["dead_letters"]:
        print(f"  dead letters: none ({FileSystems.join(output, 'dead_letters')}/)")
