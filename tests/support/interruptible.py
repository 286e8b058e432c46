"""Children that a test stops with a signal while they work."""

from __future__ import annotations

import os
import signal


def lowest_priority_and_default_sigint() -> None:
    """``preexec_fn`` of a child a test interrupts: the lowest priority, so that on a busy
    machine its work cannot run far ahead of the signal, and SIGINT's default action (a
    shell that starts a run in the background ignores SIGINT, a child inherits that, and
    Python would then not turn the signal into KeyboardInterrupt)."""
    os.nice(19)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
