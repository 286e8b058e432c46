"""What the commands call to start, run a Beam job and end: the one entry to the start-up machinery.

    runtime.start(command_line, worker_modules)   # first thing in the command line (pipeline.cli)
    pipeline = runtime.new_pipeline(options)      # each command's Beam job
    with runtime.stop_at_once("encode", kept):    # while the job runs
        result = shown.run(pipeline)              # waits in runtime.cancel_on_stop(result): a stop
                                                  # cancels a job that runs on a cluster
    runtime.end_idle_workers()                    # the command is done with its jobs
    runtime.exit(code)                            # the command line's last call

The machinery makes a command start and end sooner and do less work, and
changes none of its outputs:

- start-up with the garbage collector off, then ``gc.freeze``, so no
  collection scans the objects start-up made (in the command or in its
  workers); Beam imported without pandas and unused connectors
  (``beam_import``, a ``sys.meta_path`` finder), its S3 clients sharing one
  botocore model loader (``s3_sessions``);
- DirectRunner's worker processes forked from the command before its job
  (``warm_workers``, ``worker``), holding the job's tokenizers read ahead
  (``preloaded``, which the steps ask through ``transforms.tokenizer_loading``),
  and taken by a subclass of Beam's FnApiRunner (``runner``) that also reads
  the running job's counters for the progress display (``live_counters``);
- a stop (SIGINT, SIGTERM) during a job, or a worker process killed by a
  signal, that ends the command and its workers at once with one line
  (``stopping``), and the command line's end by ``os._exit`` once its output
  is published.

The switch: with ``BEAM_BPE_PLAIN_BEAM=1`` in the environment (any value but
"" and "0") all of it is off, and a command runs as plain Beam would run it:
Beam imported as usual, the collector left alone, the job on Beam's own
FnApiRunner whose workers start as Beam starts them and read their tokenizers
from the files, an interrupt unwinding as in any Python program, the process
ending the usual way. The outputs are the same (tests/pipeline/runtime/test_plain_beam.py).
The progress display then shows the elapsed time while a job runs, as for a
runner that gives no counters. Worker processes inherit the environment, so
the switch holds for them too.

Everything here that reaches into Beam's private names is listed in
``beam_internals.BEAM_PRIVATE_NAMES``; ``new_pipeline`` checks them before a job
runs on the machinery and fails with their names if the installed Beam lacks one.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
from typing import NoReturn, Sequence

from pipeline.runtime import stopping

__all__ = [
    "NOTHING_MORE_WRITTEN", "PLAIN_BEAM_VARIABLE", "cancel_on_stop", "end_idle_workers", "end_if_worker_killed",
    "exit", "is_on",
    "new_pipeline", "start", "stop_at_once",
]

PLAIN_BEAM_VARIABLE = "BEAM_BPE_PLAIN_BEAM"
NOTHING_MORE_WRITTEN = stopping.NOTHING_MORE_WRITTEN


def is_on() -> bool:
    """Whether the start-up machinery runs: unless ``BEAM_BPE_PLAIN_BEAM`` is set (not "" or "0")."""
    return os.environ.get(PLAIN_BEAM_VARIABLE, "") in ("", "0")


def start(command_line: Sequence[str] | None = None, worker_modules: Sequence[str] | None = None) -> None:
    """The command's start-up: Beam imported lean, with the collector off, then frozen.

    Args:
      command_line: the process's own arguments after the program's name, when the
        command runs from the command line (None when called from Python).
      worker_modules: what the Beam workers of the command's job import; with a
        ``command_line``, its DirectRunner job gets its worker processes now
        (``warm_workers.start_for``), before this process starts a thread, and a
        worker process killed by a signal ends the command with one line
        (``stopping.watch_workers``).
    """
    if not is_on():
        return
    from pipeline.runtime import beam_import, warm_workers

    # Start-up makes objects the command keeps to its end (modules, Beam's classes, the
    # tokenizers' tables): the collector is off while they are made, then they are frozen
    # (here, and before the workers are forked from this process) so that no collection,
    # in the command or in its workers, scans them again.
    gc.disable()
    beam_import.import_beam()
    if command_line is not None and worker_modules is not None:
        warm_workers.start_for(command_line, worker_modules)
        stopping.watch_workers(command_line[0])
    gc.freeze()
    gc.enable()


def new_pipeline(options):
    """A ``beam.Pipeline`` for the options (``pipeline.command_machinery.runners.pipeline_options``): Beam's
    default DirectRunner runs on an FnApiRunner, ours with the machinery on, else Beam's.

    Raises:
      beam_internals.BeamInternalsChanged: the machinery is on and the installed Beam lacks
        a name it relies on.
    """
    if is_on():
        from pipeline.runtime import beam_internals

        beam_internals.require(f"set {PLAIN_BEAM_VARIABLE}=1 to run without beam-bpe's start-up machinery")
    from pipeline.runtime import runner

    return runner.new_pipeline(options, warm=is_on())


@contextlib.contextmanager
def stop_at_once(command: str, kept: str):
    """Within the block (a running Beam job), SIGINT and SIGTERM end the command and its workers
    at once with one line (``stopping.stop_at_once``); with the machinery off they interrupt
    the job as in any Python program.

    Args:
      command: the CLI command, for the line.
      kept: what the line says about the output and how to go on.
    """
    if not is_on():
        yield
        return
    with stopping.stop_at_once(command, kept):
        yield


def cancel_on_stop(result, job_cancel):
    """A context manager: within it, a stop cancels the job of ``result`` on its runner with
    ``job_cancel()`` when the job runs outside this process (Flink, Spark:
    ``stopping.cancel_on_stop``). On with the machinery on or off: a job left running on a
    cluster is never a matter of start-up speed."""
    return stopping.cancel_on_stop(result, job_cancel)


def end_if_worker_killed() -> None:
    """Called with the job's exception: on the command line, a worker process killed by a
    signal ends the command here with one line (``stopping.worker_killed``); otherwise
    it returns and the exception goes on."""
    if is_on():
        stopping.end_if_worker_killed()


def end_idle_workers() -> None:
    """Ends the warm workers no job took (none with the machinery off)."""
    if is_on():
        from pipeline.runtime import warm_workers

        warm_workers.discard()


def exit(code: int, *, stopped: bool = False) -> NoReturn:  # noqa: A001 - the facade's verb
    """Ends the command line's process with ``code``.

    With the machinery on it ends at once (``os._exit``): the output is written and
    published and the workers have ended; what is left is the interpreter freeing every
    object and Beam's idle runner threads. ``stopped``: the command was interrupted, so
    its output's lock is dropped, stderr closed and every process it started killed
    first (``stopping.exit_now``). With the machinery off it raises ``SystemExit(code)``.
    """
    if not is_on():
        sys.exit(code)
    if stopped:
        stopping.exit_now(code)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
