"""Stopping a command promptly: SIGINT and SIGTERM during a Beam job, a worker killed by a signal.

    with stop_at_once("encode", "nothing is kept ...: rerun the same command"):
        result = pipeline.run(); result.wait_until_finish()

A Beam runner interrupted inside its job can hang in its worker shutdown and
prints a traceback per thread; nothing of an unfinished job is worth keeping,
as the next run removes its leftovers. So within the block the stop is: one
line, the output's lock dropped, stderr closed, every process this one started
(the runner's workers and the shells that start them) killed, and exit with
128 + the signal's number (130 for SIGINT, 143 for SIGTERM). Outside a job the
CLI turns SIGTERM into a KeyboardInterrupt like Ctrl-C (``pipeline.cli``).

A job that runs outside this process (on Flink or Spark, submitted through a job server) is
cancelled first, inside ``cancel_on_stop``: ending the command alone would leave it running
on the cluster, writing into the output's staging directory.

A worker process that a signal ends (the kernel's out-of-memory killer, a
memory-mapped input truncated under it) makes every thread of the runner print
its own traceback, some two hundred lines. On the command line
(``watch_workers``) it is one line naming the signal and its usual cause, then
the same end as a stop, with exit code 1 (``worker_killed``). Whichever notices
first says it: the runner's thread that waits for the worker
(``wait_for_worker``, which leaves it unreaped until then), or any report of the
failure (an error logged, a thread's or the job's exception), which first looks
for a child process ended by a signal (``_killed_child``) and otherwise stays
silent once the end has begun.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time

from pipeline.command_machinery import output_lock

__all__ = [
    "cancel_on_stop", "end_if_worker_killed", "end_workers", "exit_now", "stop_at_once", "wait_for_worker", "watch_workers",
    "worker_killed",
]

# What the line of a worker killed by a signal says of the output when no stop_at_once
# block says more; also what the command line says after an interrupt outside a job (pipeline.cli).
NOTHING_MORE_WRITTEN = "nothing more was written: rerun the same command (it removes the leftovers of this run)"
# Why a worker process is usually ended by these signals.
_USUAL_CAUSE = {
    signal.SIGKILL: "the kernel's out-of-memory killer sends it when memory runs out (see dmesg); "
                    "fewer workers (--direct_num_workers) need less",
    signal.SIGBUS: "an input file read memory-mapped was truncated while the job read it",
    signal.SIGSEGV: "a crash in compiled code",
}
_command: str | None = None  # the command line's command (watch_workers); None when run from Python
_kept: str | None = None  # what the running stop_at_once block says of the output
_ending = threading.Lock()  # held by the first of a stop and a killed worker: one line, one end
_END_WAIT = 30.0  # seconds the main thread waits for the thread that is ending the command
_CHILD_WAIT = 0.2  # seconds a report of a failure waits for a child that is ending
_CANCEL_WAIT = 20.0  # seconds a stop waits for the runner to confirm a cancel
_remote_job = None  # cancels the running job when it runs outside this process (cancel_on_stop)


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
    _ending.acquire(blocking=False)  # the workers killed below are not reported as killed
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

    global _kept

    def stop(signum, frame):
        cancelled = _cancel(_remote_job) if _remote_job is not None else ""
        print(f"beam-bpe {command}: stopped by {signal.Signals(signum).name}{cancelled}; {kept}", file=sys.stderr,
              flush=True)
        exit_now(128 + signum)

    previous = {signum: signal.signal(signum, stop) for signum in (signal.SIGINT, signal.SIGTERM)}
    _kept = kept
    try:
        yield
    finally:
        _kept = None
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _runs_elsewhere(result) -> bool:
    """Whether the job of ``result`` runs outside this process: submitted to a job service."""
    from apache_beam.runners.portability.portable_runner import PipelineResult

    return isinstance(result, PipelineResult)


def _cancel(job_cancel) -> str:
    """Cancels the job (``job_cancel()``), waiting a while for the runner to confirm it; the
    words the stop's line adds: what happened to the job."""
    outcome: list[str] = []

    def cancel():
        try:
            job_cancel()
            outcome.append(", and the job was cancelled")
        except Exception as e:  # noqa: BLE001 - the job service is gone, the job already ended
            outcome.append(f"; cancelling the job failed ({str(e).splitlines()[0] if str(e) else type(e).__name__})")

    thread = threading.Thread(target=cancel, name="beam-bpe-cancel", daemon=True)
    thread.start()
    thread.join(_CANCEL_WAIT)
    return outcome[0] if outcome else f"; the runner did not confirm the job's cancel within {_CANCEL_WAIT:.0f} s"


@contextlib.contextmanager
def cancel_on_stop(result, job_cancel):
    """Within the block (waiting for the job of ``result``), a stop cancels the job on its runner
    when it runs outside this process: ``stop_at_once``'s handler does it before the command
    ends, and a KeyboardInterrupt unwinding through the block (no such handler) does it too.

    Args:
      result: what ``pipeline.run()`` returned.
      job_cancel: cancels the job (``pipeline.command_machinery.job_service.cancel`` with its options).
    """
    global _remote_job
    if not _runs_elsewhere(result):
        yield
        return
    _remote_job = job_cancel
    try:
        yield
    except KeyboardInterrupt:
        _remote_job = None
        print(f"beam-bpe: interrupted{_cancel(job_cancel)}", file=sys.stderr, flush=True)
        raise
    finally:
        _remote_job = None


def watch_workers(command: str) -> None:
    """Makes a worker process killed by a signal end the command with one line (``worker_killed``),
    whichever thread notices first; called for the command line only, as the end is ``os._exit``."""
    global _command
    _command = command
    threading.excepthook = _quiet_thread_failure(threading.excepthook)
    for handler in logging.getLogger().handlers:
        handler.addFilter(_quiet_error_record)


def _killed_child() -> int | None:
    """The signal that ended a child process of this one (a worker of the job), if one has
    ended by a signal and is not reaped yet; it stays unreaped, for the runner's thread
    that waits for it."""
    try:
        info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:  # no child at all
        return None
    if info is not None and info.si_code in (os.CLD_KILLED, os.CLD_DUMPED):
        return info.si_status
    return None


def worker_killed(signum: int) -> None:
    """A worker process of the running job was ended by ``signum``.

    On the command line (``watch_workers``): one line naming the signal and its
    usual cause and what is kept (the running ``stop_at_once`` block's words, else
    ``NOTHING_MORE_WRITTEN``), then ``exit_now(1)``. Called from Python, or once a
    stop or another report has begun the end, it does nothing.
    """
    if _command is None or not _ending.acquire(blocking=False):
        return
    try:
        name = signal.Signals(signum).name
    except ValueError:  # a real-time signal has no name
        name = f"signal {signum}"
    cause = f" ({_USUAL_CAUSE[signum]})" if signum in _USUAL_CAUSE else ""
    print(f"beam-bpe {_command}: a worker process of the job was killed by {name}{cause}; "
          f"{_kept or NOTHING_MORE_WRITTEN}", file=sys.stderr, flush=True)
    exit_now(1)


def wait_for_worker(pid: int) -> None:
    """Waits until the worker process ``pid`` (a child of this one) ends and, if a signal
    ended it, calls ``worker_killed``. It is left unreaped until then, so that a report
    of the failure made meanwhile by another thread finds it (``_killed_child``)."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # without WNOHANG: never None
    except ChildProcessError:  # reaped already (a stop ends every child at once)
        return
    if info.si_code in (os.CLD_KILLED, os.CLD_DUMPED):
        worker_killed(info.si_status)


def _report_killed_child() -> bool:
    """Before a failure is reported: ends the command with ``worker_killed``'s line if a
    child was killed by a signal; True when the end has begun (the report is not wanted)."""
    if _command is None:
        return False
    # A process closes its connections before its parent can see that it ended, and the
    # runner's threads report the closed connection: a report waits a moment for the child.
    deadline = time.monotonic() + _CHILD_WAIT
    while not _ending.locked():
        signum = _killed_child()
        if signum is not None:
            worker_killed(signum)  # returns only when another thread is ending the command
        elif time.monotonic() > deadline:
            break
        else:
            time.sleep(0.005)
    return _ending.locked()


def end_if_worker_killed() -> None:
    """For the job's own exception, in the main thread: when a worker was killed by a signal
    the command ends here with ``worker_killed``'s line (or in the thread that said it
    first), instead of raising the job's error."""
    if _report_killed_child():
        threading.Event().wait(_END_WAIT)  # the thread that said it ends the process at once


def _quiet_thread_failure(previous):
    def hook(args):
        if not _report_killed_child():
            previous(args)
    return hook


def _quiet_error_record(record: logging.LogRecord) -> bool:
    return record.levelno < logging.ERROR or not _report_killed_child()
