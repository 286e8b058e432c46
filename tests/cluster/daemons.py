"""Long-running processes of the cluster: started in a network namespace, known by a PID file.

Each daemon is started as one command (``ip netns exec NS ...`` execs it, and Flink's and
Spark's start scripts exec the JVM), so the PID that Popen returns is the process itself,
and it is stopped by that PID. The PID file also holds the process's start time (from
/proc), so a PID the kernel has since given to another process is never signalled.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import subprocess
import time
from collections.abc import Callable, Sequence

_STOP_SECONDS = 30.0


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat, field 22)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    if fields[0] == "Z":
        return None  # a zombie has ended
    return fields[19]


def start(name: str, argv: Sequence[str], run_dir: pathlib.Path, netns: str | None = None,
          env: dict | None = None) -> int:
    """Starts ``argv`` in the background, in ``netns`` if given; output to ``run_dir/NAME.log``.

    Args:
      name: the daemon's name, for its PID and log files.
      argv: the command; it must exec the long-running process (no shell in between).
      run_dir: where the PID and log files go.
      netns: a network namespace to run in (``ip netns exec``).
      env: the environment (default: this process's).

    Returns:
      The PID.
    """
    command = ["ip", "netns", "exec", netns, *argv] if netns else list(argv)
    with open(run_dir / f"{name}.log", "ab") as log:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                   env=env, cwd=run_dir, start_new_session=True)  # Ctrl-C of the caller spares it
    (run_dir / f"{name}.pid").write_text(f"{process.pid} {_start_time(process.pid)}\n")
    return process.pid


def pid(name: str, run_dir: pathlib.Path) -> int | None:
    """The PID of the daemon if it is running, else None."""
    path = run_dir / f"{name}.pid"
    try:
        number, started = path.read_text().split()
    except (OSError, ValueError):
        return None
    return int(number) if _start_time(int(number)) == started else None


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                    children.setdefault(int(f.read().rsplit(")", 1)[1].split()[1]), []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill(name: str, run_dir: pathlib.Path) -> int | None:
    """SIGKILLs the daemon (a failing machine): returns its PID, None if it was not running."""
    number = pid(name, run_dir)
    if number is not None:
        os.kill(number, signal.SIGKILL)
        wait_until(lambda: _start_time(number) is None, f"{name} (PID {number}) to end", 10)
    return number


def kill_pid(number: int) -> None:
    """SIGKILLs a process and waits until it has ended."""
    with contextlib.suppress(OSError):
        os.kill(number, signal.SIGKILL)
    wait_until(lambda: _start_time(number) is None, f"PID {number} to end", 10)


def stop(name: str, run_dir: pathlib.Path) -> None:
    """Stops the daemon and what it started (a worker pool's SDK workers): SIGTERM, then
    SIGKILL after a while; removes its PID file."""
    number = pid(name, run_dir)
    if number is not None:
        family = [number, *_descendants(number)]
        for member in family:
            with contextlib.suppress(OSError):
                os.kill(member, signal.SIGTERM)
        deadline = time.monotonic() + _STOP_SECONDS
        while time.monotonic() < deadline and any(_start_time(p) is not None for p in family):
            time.sleep(0.2)
        for member in family:
            with contextlib.suppress(OSError):
                os.kill(member, signal.SIGKILL)
    (run_dir / f"{name}.pid").unlink(missing_ok=True)


def wait_until(ready: Callable[[], object], what: str, seconds: float, alive: Callable[[], bool] | None = None,
               log: pathlib.Path | None = None) -> object:
    """Polls ``ready()`` until it returns something true; returns that.

    Args:
      ready: the check.
      what: what is awaited, for the error.
      seconds: how long to wait at most.
      alive: a check that the process being waited for still runs.
      log: its log, whose end the error shows.

    Raises:
      RuntimeError: the time ran out or the process ended.
    """
    deadline = time.monotonic() + seconds
    while True:
        value = ready()
        if value:
            return value
        ended = alive is not None and not alive()
        if ended or time.monotonic() > deadline:
            tail = ""
            if log is not None and log.is_file():
                tail = "\n" + "\n".join(log.read_text(errors="replace").splitlines()[-20:])
            raise RuntimeError(f"gave up waiting for {what}: {'the process ended' if ended else 'timed out'}{tail}")
        time.sleep(0.3)
