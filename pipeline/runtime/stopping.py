"""Stopping a command promptly: SIGINT and SIGTERM during a Beam job.

    with stop_at_once("encode", "nothing is kept ...: rerun the same command"):
        result = pipeline.run(); result.wait_until_finish()

A Beam runner interrupted inside its job can hang in its worker shutdown and
prints a traceback per thread; nothing of an unfinished job is worth keeping,
as the next run removes its leftovers. So within the block the stop is: one
line, the output's lock dropped, stderr closed, every process this one started
(the runner's workers and the shells that start them) killed, and exit with
128 + the signal's number (130 for SIGINT, 143 for SIGTERM). Outside a job the
CLI turns SIGTERM into a KeyboardInterrupt like Ctrl-C (``pipeline.cli``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading

from pipeline import output_lock

__all__ = ["end_workers", "exit_now", "stop_at_once"]


def _descendants() -> list[int]:
    """The process IDs of this process's children and theirs (the runner starts each
    worker through a shell), deepest first."""
    parents: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []  # no /proc: the workers end when their connection to us closes
    for entry in entries:
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(parent, []).append(int(entry))
    found, todo = [], [os.getpid()]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found[::-1]


def end_workers() -> None:
    """Kills every process this one started, and theirs: nothing of the job keeps running."""
    descendants = _descendants()
    for pid in descendants:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    for pid in descendants:
        with contextlib.suppress(OSError):
            os.waitpid(pid, 0)  # our children; a grandchild is reaped by its shell or init


def exit_now(code: int) -> None:
    """Ends the process at once: its lock dropped, its workers ended, nothing more printed.

    The runner's threads report a worker that goes away with a traceback each;
    stderr is closed first, so the line already printed is the last.
    """
    output_lock.release_all()
    sys.stderr.flush()
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    end_workers()
    os._exit(code)


@contextlib.contextmanager
def stop_at_once(command: str, kept: str):
    """Within the block (a running Beam job), SIGINT and SIGTERM stop the command at once.

    Args:
      command: the CLI command, for the line.
      kept: what the line says about the output and how to go on.
    """
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread receives signals
        return

    def stop(signum, frame):
        print(f"beam-bpe {command}: stopped by {signal.Signals(signum).name}; {kept}", file=sys.stderr, flush=True)
        exit_now(128 + signum)

    previous = {signum: signal.signal(signum, stop) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
