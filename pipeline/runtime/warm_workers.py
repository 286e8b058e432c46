"""Beam worker processes made at the command's beginning, ready when its job starts.

    warm_workers.start_for(argv, modules)   # in runtime.start, once Beam is imported
    ...                                     # the driver loads, checks, builds the job
    process = warm_workers.take(env)        # the runner, for each worker the job needs

A DirectRunner job in multi_processing mode starts its worker processes when
its first stage runs, and the driver then waits while each one imports Beam,
pyarrow and our transforms. Made as the command begins, they are ready while
the driver does the rest of its start-up (tokenizer, checks, pipeline
construction), and the runner hands each one the connection details of the
job instead of starting a new process (``pipeline.runtime.runner``).

A warm worker holds the modules its job's steps need and reads its tokenizer
files (``pipeline.runtime.preloaded``; the values of ``--tokenizer`` and
``--tokenizer-preset``), then waits for one line on its input, the environment
Beam gives its workers (the addresses of the runner's control and logging
services, the pipeline options), and from there runs as Beam's own worker
(``pipeline.runtime.worker``). End of input without that line (the command ended before
its job, or started none) ends it quietly; workers not taken are ended when the
command returns (``discard``). When the pool has no worker left (a second job,
or a guess below that was too low) the runner starts one the usual way, so the
pool changes when workers start, never what they do.

Where it comes from: ``start_for``, which the command line calls once, right
after it has imported Beam and before it has started a thread or a job, makes
each worker a copy of its own process (``os.fork``, on Linux) with the modules
imported once, there, instead of once per process; a copy starts at once and
shares the parent's memory pages until it writes to them. ``start``, and
``start_for`` on other systems, starts ``python -m pipeline.runtime.worker --warm JSON``
instead, which imports the modules itself.

How many: ``start_for`` reads the Beam flags of the command line itself,
because Beam's own parsing comes only after Beam is imported. It starts none
unless the job will run on DirectRunner in multi_processing mode (our default,
``pipeline.command_machinery.runners.DIRECT_DEFAULTS``), and as many as ``--direct_num_workers``
says (0: one per core).
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import json
import os
import signal
import subprocess
import sys
from typing import Mapping, Sequence

from pipeline.runtime import worker
from pipeline.runtime.worker import WARM_FLAG

__all__ = ["direct_workers", "discard", "start", "start_for", "take"]

_DIRECT_RUNNERS = {"directrunner", "direct", "switchingdirectrunner", "fnapirunner"}

_idle: list = []  # subprocess.Popen, or _Forked: the same interface


class _Forked:
    """A worker forked from this process, with the part of ``subprocess.Popen`` the runner uses."""

    def __init__(self, pid: int, stdin):
        self.pid = pid
        self.stdin = stdin
        self.returncode: int | None = None

    def _reap(self, flags: int) -> None:
        try:
            pid, status = os.waitpid(self.pid, flags)
        except ChildProcessError:  # reaped already (pipeline.runtime.stopping ends every child at once)
            self.returncode = -signal.SIGKILL
            return
        if pid:
            self.returncode = os.waitstatus_to_exitcode(status)

    def poll(self) -> int | None:
        if self.returncode is None:
            self._reap(os.WNOHANG)
        return self.returncode

    def wait(self) -> int:
        if self.returncode is None:
            self._reap(0)
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)


def _flag_values(argv: Sequence[str], name: str) -> list[str]:
    """The values of ``--name=V`` and ``--name V`` in argv, in order."""
    values = []
    for i, arg in enumerate(argv):
        if arg.startswith(name + "="):
            values.append(arg.split("=", 1)[1])
        elif arg == name and i + 1 < len(argv):
            values.append(argv[i + 1])
    return values


def direct_workers(argv: Sequence[str]) -> int:
    """How many worker processes a job with these Beam flags starts on DirectRunner's
    multi_processing mode; 0 for any other runner or mode, or for ``--help``."""
    if "-h" in argv or "--help" in argv:
        return 0
    runner = (_flag_values(argv, "--runner") or ["DirectRunner"])[-1]
    if runner.rsplit(".", 1)[-1].lower() not in _DIRECT_RUNNERS:
        return 0
    if (_flag_values(argv, "--direct_running_mode") or ["multi_processing"])[-1] != "multi_processing":
        return 0
    try:
        count = int((_flag_values(argv, "--direct_num_workers") or ["0"])[-1])
    except ValueError:
        return 0  # Beam refuses it before the job starts
    return count if count > 0 else os.cpu_count() or 1


def start(count: int, modules: Sequence[str] = (), tokenizers: Sequence[tuple[str, str | None]] = ()) -> None:
    """Starts ``count`` warm workers that import ``modules`` and read the local
    ``tokenizers`` ((path, preset) pairs) while they wait."""
    ahead = json.dumps({"modules": list(modules), "tokenizers": [list(pair) for pair in tokenizers]})
    for _ in range(count):
        _idle.append(subprocess.Popen([sys.executable, "-m", "pipeline.runtime.worker", WARM_FLAG, ahead],
                                      stdin=subprocess.PIPE))


def start_for(argv: Sequence[str], modules: Sequence[str] = ()) -> None:
    """Starts the warm workers the job of this command line will use (``direct_workers``),
    reading its ``--tokenizer`` files as the job will name them (local paths made absolute).

    Called once by the command line, before this process starts a thread: on
    Linux the workers are copies of it (``os.fork``), with ``modules`` imported
    and the tokenizers read here first (``pipeline.runtime.preloaded``, where the command
    takes its own too, by the path ``pipeline.command_machinery.outputs.absolute`` gives).
    """
    from pipeline.command_machinery import outputs  # imports Beam: only now, once the command has

    preset = (_flag_values(argv, "--tokenizer-preset") or [None])[-1]
    paths = [outputs.absolute(path) for path in _flag_values(argv, "--tokenizer")]
    tokenizers = [(path, preset) for path in paths if outputs.is_local(path)]
    count = direct_workers(argv)
    if not count or not sys.platform.startswith("linux"):
        start(count, modules, tokenizers)
        return
    from pipeline.runtime import preloaded

    worker.import_ahead(modules)
    for path, preset in tokenizers:  # read once, here: each copy takes its own, and so does the command
        preloaded.load(path, preset, engine=False)  # each copy builds its engines (pipeline.runtime.worker)
    gc.freeze()  # the copies never scan what they share with this process (see _fork)
    for _ in range(count):
        _idle.append(_fork())


def _fork() -> _Forked:
    """A copy of this process that becomes a warm worker (``pipeline.runtime.worker.run_forked``)."""
    job_input, ours = os.pipe()
    sys.stdout.flush()  # or the copy would print what is still buffered again
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(ours)
            for process in _idle:  # the input of the workers forked before this one is not the copy's
                os.close(process.stdin.fileno())
            gc.enable()  # the command forks with the collector off (pipeline.cli); a worker needs it
            worker.run_forked(job_input)
        finally:
            os._exit(1)  # never back into the command's code
    os.close(job_input)
    return _Forked(pid, os.fdopen(ours, "wb"))


def take(environment: Mapping[str, str]) -> subprocess.Popen | None:
    """A warm worker, made Beam's worker for ``environment``; None when none is left."""
    while _idle:
        process = _idle.pop(0)
        try:
            process.stdin.write(json.dumps(dict(environment)).encode("utf-8") + b"\n")
            process.stdin.close()
        except OSError:  # it has ended (killed from outside): the next one, or a new process
            process.kill()
            process.wait()
            continue
        return process
    return None


@atexit.register
def discard() -> None:
    """Ends every warm worker no job has taken."""
    while _idle:
        process = _idle.pop()
        process.kill()
        process.wait()
