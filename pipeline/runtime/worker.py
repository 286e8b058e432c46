"""Beam's SDK worker process for DirectRunner jobs: quiet on the terminal, quick to exit.

    python -m pipeline.runtime.worker              # what the runner starts, once per worker process
    python -m pipeline.runtime.worker --warm JSON  # started early (pipeline.runtime.warm_workers)
    worker.run_forked(job_input)                   # in a copy of the command (pipeline.runtime.warm_workers)

Warm: the process imports the modules its job's steps need (a copy of the
command's process has them already; a module that does not exist fails the
process, naming it) and reads their tokenizers (``pipeline.runtime.preloaded``),
then waits for the environment Beam gives a worker, as one line of JSON on its
input, and runs with it as above (``pipeline.runtime.warm_workers``). It ends
quietly if its input ends first.

Quiet: a worker sends its log records to the runner, which shows the ones that
matter (errors; see ``pipeline.command_machinery.runners``). But importing Beam logs a warning
through the root logger ("apitools not found"), Python's logging then gives the
root logger a handler that prints to stderr, and from there every INFO and
WARNING of the worker's start-up ("Logging handler created.", "No
semi_persistent_directory found", "Discarding unparseable args") lands on the
user's terminal as well. A do-nothing handler on the root logger beforehand
keeps stderr for tracebacks; the records still reach the runner.

Stoppable by the driver only: Ctrl-C in a terminal sends SIGINT to every
process of the job, and each worker would print its own traceback. Workers
ignore it; the driver ends them (``pipeline.runtime.stopping``).

Lean: Beam, and pyarrow with it, run without pandas (``pipeline.runtime.beam_import``).

Quick: when Beam's ``main`` returns, the harness has finished every bundle, torn
down the DoFns and sent its logs. What is left is the interpreter freeing every
object of the job, and the runner waits for that, one worker after the other,
so the worker exits at once.
"""

import gc
import importlib
import json
import logging
import os
import signal
import sys
import traceback
from typing import Callable, NoReturn, Sequence

from pipeline.command_machinery import disk_full
from pipeline.runtime import beam_import

__all__ = ["SAMPLING_PERIOD_MS", "WARM_FLAG", "import_ahead", "run_forked", "settle", "start_up"]

WARM_FLAG = "--warm"  # python -m pipeline.runtime.worker --warm JSON: a warm worker
SAMPLING_PERIOD_MS = 20  # of Beam's step-time sampler in a worker (Beam's: 200; see _sample_step_times_every)


def settle() -> None:
    """What a worker process does first: no terminal output but tracebacks, no Ctrl-C,
    Beam imported without pandas for good (see the module's docstring)."""
    logging.getLogger().handlers[:] = [logging.NullHandler()]  # before Beam's import, on purpose
    sys.stderr = disk_full.QuietStderr(sys.stderr)  # a full disk: the command says it in one line
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    beam_import.import_beam(for_good=True)
    _sample_step_times_every(SAMPLING_PERIOD_MS)


def _sample_step_times_every(milliseconds: int) -> None:
    """Beam's bundles sample their steps' times with this period at most.

    Beam's sampler thread sleeps between samples, 200 ms at most (reached within a
    bundle's first second), and a bundle's end waits for it to wake (``StateSampler.stop``
    joins it): up to 200 ms at the end of every bundle that lasted over a second. On Flink
    every stage of a job is deployed, its bundle open, when the job starts, so each stage
    at the end of a job paid it in turn: 0.1-0.15 s each after encoding and after making
    the shards, in a 240 MB encode of under 4 s (its TaskManagers' flight recordings and
    the workers' clocks). A sample is a few integer updates under a lock; 50 a second
    cost nothing measurable. Bundle processors make their sampler through the module's
    ``StateSampler``, so a subclass with this period put there is the one they use."""
    from apache_beam.runners.worker import statesampler

    class _StateSampler(statesampler.StateSampler):
        def __init__(self, prefix, counter_factory, sampling_period_ms=milliseconds):
            super().__init__(prefix, counter_factory, sampling_period_ms)

    statesampler.StateSampler = _StateSampler


def start_up(prepare: Callable[[], None]) -> None:
    """Runs ``prepare`` (settling, imports, tokenizers) with the garbage collector off, then
    freezes every object it made, as the command does (pipeline.cli): the worker keeps them
    all, and the collections during its job do not scan them again and again (some 160,000
    objects after beam-bpe's imports, 25-45 ms a full collection)."""
    gc.disable()
    prepare()
    gc.freeze()
    gc.enable()


def import_ahead(modules: Sequence[str]) -> None:
    """Imports the modules a job's steps need, and Beam's worker.

    Raises:
      ModuleNotFoundError: a module that does not exist (a name in the command's list
        that went stale), naming it. Any other error of an import is left to the job,
        which imports what it needs again and fails there if it must.
    """
    for module in modules:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name is not None and (module == e.name or module.startswith(e.name + ".")):
                raise ModuleNotFoundError(f"import_ahead: no module named {module!r} ({e})", name=e.name) from e
        except Exception:  # noqa: BLE001 - the job imports what it needs again, and fails there if it must
            pass
    from apache_beam.runners.worker import sdk_worker_main  # noqa: F401


def _preload(tokenizers: Sequence[Sequence]) -> None:
    if tokenizers:
        from pipeline.runtime import preloaded

        for path, preset in tokenizers:
            preloaded.load(path, preset)


def _take_environment(job_input) -> None:
    """Reads the job's environment, one line of JSON, from ``job_input`` (exits when it
    ends first) and makes it this process's; stdin becomes empty."""
    line = job_input.readline()
    if not line:
        os._exit(0)
    environment = json.loads(line)
    os.environ.clear()
    os.environ.update(environment)
    stdin = os.open(os.devnull, os.O_RDONLY)
    os.dup2(stdin, 0)


def _run_beam_worker() -> NoReturn:
    from apache_beam.runners.worker import sdk_worker_main

    sdk_worker_main.main([])  # an error raises here and exits the usual way
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def run_forked(job_input: int) -> NoReturn:
    """Runs a warm worker in a copy of the command's process (``pipeline.runtime.warm_workers``,
    which has read the tokenizers): builds their engines, takes the job's environment
    from the pipe ``job_input``, runs Beam's worker, and never returns."""
    try:
        settle()
        from pipeline.runtime import preloaded

        preloaded.build_engines()
        with os.fdopen(job_input, "rb") as lines:
            _take_environment(lines)
        _run_beam_worker()
    except BaseException:  # noqa: BLE001 - a copy of the command must not go on as the command
        traceback.print_exc()
        sys.stderr.flush()
    os._exit(1)


def _prepare(ahead: str) -> None:
    """Imports the modules and reads the tokenizers ``ahead`` (JSON) names."""
    ahead = json.loads(ahead)
    import_ahead(ahead["modules"])
    _preload(ahead["tokenizers"])


if __name__ == "__main__":
    warm = sys.argv[1:2] == [WARM_FLAG]

    def _start() -> None:
        settle()
        if warm:
            _prepare(sys.argv[2])

    start_up(_start)
    if warm:
        _take_environment(sys.stdin.buffer)  # or exits when stdin ends first
    _run_beam_worker()
