"""Ctrl-C and SIGTERM, handled alike by every command.

SIGTERM (what a scheduler or ``kill`` sends) is turned into a KeyboardInterrupt
inside ``sigterm_as_interrupt``, so each command stops the way Ctrl-C stops it:
training saves a merge checkpoint on the way out, a job leaves no output marked
complete, and the command line reports which signal ended it.
"""

from __future__ import annotations

import contextlib
import signal
import threading

__all__ = ["Terminated", "interrupting_signal", "sigterm_as_interrupt"]


class Terminated(KeyboardInterrupt):
    """SIGTERM, delivered like Ctrl-C so training saves a checkpoint on the way out."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def interrupting_signal(error: KeyboardInterrupt) -> int:
    """The signal behind a KeyboardInterrupt: SIGTERM for ``Terminated``, else SIGINT."""
    return error.signum if isinstance(error, Terminated) else signal.SIGINT


@contextlib.contextmanager
def sigterm_as_interrupt():
    """Within the block, SIGTERM raises ``Terminated`` (a KeyboardInterrupt)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers (e.g. run from a test thread)
        return

    def terminated(signum, frame):
        raise Terminated(signum)

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
