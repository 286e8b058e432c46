"""One job at a time per output directory: ``DIR/.beam-bpe.lock``.

A job takes the lock before it changes anything in its output directory and
drops it when it ends; a second job on the same directory is refused with one
line naming the first. The lock file holds the owner's host and process ID, so
a lock left by a job that was killed (SIGKILL, a crash of the machine) is
recognised as stale, reported and taken over: on the same host when that
process no longer exists. A lock from another host is never taken over; the
message says which file to delete if that job is gone.

Locks are local files, created with ``O_EXCL`` (atomic on local file systems).
Object stores have no atomic create-if-absent here, so a remote output
directory is not locked.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time

from pipeline.command_machinery.errors import UserError

__all__ = ["LOCK_FILE", "OutputLock", "release_all"]

LOCK_FILE = ".beam-bpe.lock"
_held: list["OutputLock"] = []  # locks this process holds, released by release_all


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by another user
    return True


class OutputLock:
    """The lock file of one local output directory.

    Args:
      directory: the output directory (local, existing).
      command: the CLI command, for messages.
    """

    def __init__(self, directory: str, command: str):
        self.directory = directory
        self.command = command
        self.path = os.path.join(directory, LOCK_FILE)

    def acquire(self) -> None:
        """Takes the lock, taking over a stale one.

        Raises:
          UserError: another live job holds it.
        """
        mine = json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "command": self.command,
                           "since": time.strftime("%Y-%m-%d %H:%M:%S")})
        for _ in range(3):  # a stale lock is removed, then the create is retried
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                self._take_over_or_refuse()
                continue
            with os.fdopen(fd, "w") as f:
                f.write(mine + "\n")
            _held.append(self)
            return
        raise UserError(f"cannot lock --output {self.directory}: {self.path} keeps reappearing")

    def _take_over_or_refuse(self) -> None:
        try:
            with open(self.path, encoding="utf-8") as f:
                owner = json.loads(f.read())
            host, pid = owner["host"], int(owner["pid"])
        except FileNotFoundError:
            return  # released meanwhile
        except (OSError, ValueError, KeyError, TypeError):
            owner, host, pid = {}, socket.gethostname(), -1  # half-written by a job killed at once
        if host == socket.gethostname() and (pid == os.getpid() or pid <= 0 or not _alive(pid)):
            print(f"beam-bpe {self.command}: removing the stale lock {self.path} of a job that no longer runs"
                  f"{f' (pid {pid})' if pid > 0 else ''}", file=sys.stderr)
            try:
                os.remove(self.path)
            except FileNotFoundError:
                pass
            return
        raise UserError(
            f"--output {self.directory} is in use by another beam-bpe job ({owner.get('command', '?')}, "
            f"pid {pid} on {host}, since {owner.get('since', '?')}); wait for it, or choose another --output "
            f"(if that job no longer runs, delete {self.path})"
        )

    def release(self) -> None:
        if self in _held:
            _held.remove(self)
            try:
                os.remove(self.path)
            except FileNotFoundError:
                pass


def release_all() -> None:
    """Drops every lock this process holds (the end of a command, or a stop)."""
    for lock in list(_held):
        lock.release()
