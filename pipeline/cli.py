"""beam-bpe: train byte-level BPE tokenizers, encode corpora to token shards, decode them.

Flags we do not know must be Beam's own pipeline options (``--runner``,
``--direct_num_workers``, ...), which are passed through to Beam unchanged;
any other argument is refused before the job starts (Beam would only warn and
drop it), with the closest known flag. Commands whose module sets
``BEAM_OPTIONS = False`` take none. Every command ends by releasing the lock of
its output directory.

Run from the command line, a command whose job runs on DirectRunner makes its
worker processes as soon as it has imported Beam, so they are ready when the
job starts; the ones no job took end with the command, and the command ends at
once when its output is published (``pipeline.runtime``, whose switch
``BEAM_BPE_PLAIN_BEAM=1`` turns this off).

Stopping: SIGTERM is taken like Ctrl-C. During a Beam job the command stops at
once (``pipeline.runtime.stop_at_once``); elsewhere the interrupt unwinds (train
saves its merges on the way) and ends in one line and exit 130 or 143.

A full disk (ENOSPC, or EDQUOT: a quota) ends a command in one line and exit 1,
however Beam wrapped the error of the worker that met it (``pipeline.command_machinery.disk_full``):
nothing was marked complete, and the rerun removes what the job left.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import logging
import signal
import sys

from pipeline import runtime
from pipeline.command_machinery import disk_full, output_lock
from pipeline.command_machinery.errors import JobFailed, UserError

# Each subcommand lives in its own module with add_arguments(parser) and run(args, beam_args) -> int.
COMMANDS = {
    "train": ("pipeline.train", "train a byte-level BPE tokenizer on a sharded corpus"),
    "encode": ("pipeline.encode", "encode a corpus into token-ID Parquet shards"),
    "decode": ("pipeline.decode", "decode token-ID shards or a stream of IDs back to text"),
    "report": ("pipeline.report", "measure how well tokenizers fit a corpus: report.json and index.html"),
    "pack": ("pipeline.pack", "pack token shards into shuffled fixed-length sequences for training"),
    "prune": ("pipeline.prune", "remove a tokenizer's least-used tokens on a corpus: tokenizer.json and id_map.json"),
}
# What the Beam workers of each command's job import, for the workers started
# before the job (pipeline.runtime.warm_workers); decode runs no Beam job.
_READ = ("transforms.read", "transforms.dead_letters")
WORKER_MODULES = {
    "train": (*_READ, "transforms.count", "pipeline.train.word_counts", "pyarrow.parquet"),
    "encode": (*_READ, "transforms.encode", "transforms.shards", "pyarrow.parquet"),
    "report": (*_READ, "transforms.report", "transforms.report.sample", "pipeline.report.page"),
    "prune": (*_READ, "transforms.token_use", "pipeline.report.measures"),
    "pack": ("transforms.pack", "transforms.pack.spill", "transforms.pack.write_sequences", "pyarrow.parquet"),
}


# Beam's warnings at import time that optional connectors' libraries are missing
# (Google Cloud's clients; MongoDB's, which pipeline.runtime.beam_import keeps out).
_IMPORT_NOISE = ("apitools not found", "Could not find a compatible bson package")


def quiet_beam_import_noise() -> None:
    """Keeps Beam's import-time warnings about connectors no step uses off the terminal,
    and a full disk's tracebacks (``pipeline.command_machinery.disk_full``); everything else still shows."""
    if not isinstance(sys.stderr, disk_full.QuietStderr):
        sys.stderr = disk_full.QuietStderr(sys.stderr)
    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        handler.addFilter(lambda record: not any(noise in record.getMessage() for noise in _IMPORT_NOISE))
        # A worker's full disk, which the runner logs before it raises: the command says it in one line.
        handler.addFilter(lambda record: disk_full.errno_of(record.getMessage()) is None)


class _Parser(argparse.ArgumentParser):
    """argparse, reporting a mistake as one line (``beam-bpe CMD: error: ...``) and exit 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def main(argv: list[str] | None = None) -> int:
    """Runs the command of ``argv`` (the command line's when None) and returns its exit code.

    On the command line the process then ends (``runtime.exit``: at once, as its
    output is written and published and its workers have ended).
    """
    code = _main(argv)
    if argv is None:
        runtime.exit(code)
    return code


def _main(argv: list[str] | None) -> int:
    quiet_beam_import_noise()
    # The command line's job gets its workers now, before this process starts a thread.
    command_line = sys.argv[1:] if argv is None else None
    runtime.start(command_line, WORKER_MODULES.get(command_line[0]) if command_line else None)
    # Imported after the line above: these import Beam.
    from pipeline.command_machinery.interrupts import interrupting_signal, sigterm_as_interrupt

    parser = _Parser(prog="beam-bpe", description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--version", action="version", version=f"beam-bpe {installed_version()}")
    subparsers = parser.add_subparsers(dest="command", required=True)
    modules, flags = {}, {}
    for name, (module_name, help_text) in COMMANDS.items():
        module = importlib.import_module(module_name)
        sub = subparsers.add_parser(name, help=help_text, description=help_text, allow_abbrev=False)
        module.add_arguments(sub)
        modules[name] = module
        flags[name] = [s for action in sub._actions for s in action.option_strings if s.startswith("--")]
    args, beam_args = parser.parse_known_args(argv)
    module = modules[args.command]
    try:
        with sigterm_as_interrupt():
            _check_leftover_arguments(beam_args, flags[args.command], getattr(module, "BEAM_OPTIONS", True))
            return module.run(args, beam_args)
    except UserError as e:
        print(f"beam-bpe {args.command}: error: {e}", file=sys.stderr)
        return 2
    except JobFailed as e:
        print(f"beam-bpe {args.command}: error: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # noqa: BLE001 - only a full disk is taken; anything else is re-raised
        runtime.end_if_worker_killed()  # a worker killed by a signal: one line and the end, on the command line
        code = disk_full.errno_of(e)
        if code is None:
            raise
        print(disk_full.message(args.command, code, e, getattr(args, "output", None)), file=sys.stderr)
        return 1
    except KeyboardInterrupt as e:
        signum = interrupting_signal(e)
        print(f"beam-bpe {args.command}: interrupted ({signal.Signals(signum).name}); {runtime.NOTHING_MORE_WRITTEN}",
              file=sys.stderr, flush=True)
        if argv is None:  # the real command line: runner threads may still run; do not wait for them
            runtime.exit(128 + signum, stopped=True)
        return 128 + signum
    finally:
        output_lock.release_all()
        runtime.end_idle_workers()


def installed_version() -> str:
    """The version of the installed distribution, from its metadata (setup.py's ``version``)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("beam-bpe")
    except PackageNotFoundError:
        return "(not installed: version unknown)"


def _check_leftover_arguments(beam_args: list[str], our_flags: list[str], beam_options: bool) -> None:
    """Every argument our parser did not take must be a Beam option (for a command that takes them)."""
    if beam_options:
        from pipeline.command_machinery.runners import check_beam_args

        check_beam_args(beam_args, our_flags)
        return
    if beam_args:
        name = beam_args[0].split("=", 1)[0]
        if not name.startswith("-"):
            raise UserError(f"unexpected argument {name!r}")
        close = difflib.get_close_matches(name.replace("_", "-"), our_flags, n=1, cutoff=0.75)
        raise UserError(f"unknown flag {name}" + (f": did you mean {close[0]}?" if close else ""))


if __name__ == "__main__":
    sys.exit(main())
