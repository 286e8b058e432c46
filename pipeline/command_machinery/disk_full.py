"""A full disk (ENOSPC, or EDQUOT: a quota) during a job: one line, not tracebacks.

Beam re-raises the OSError of the worker that met it wrapped in other types,
keeping only its text, and its SDK worker prints the traceback to stderr and logs
it before the job fails. ``errno_of`` finds the full disk by errno or by that
text; ``QuietStderr`` keeps those tracebacks off the terminal (in the command's
process and in its worker processes, ``pipeline.runtime.worker``); the CLI then
says it in one line (``message``). Nothing was marked complete: the rerun removes
what the job left.
"""

from __future__ import annotations

import errno
from typing import TextIO

__all__ = ["QuietStderr", "errno_of", "message"]

# What a full disk is called, by errno, and the text a wrapped error keeps of it.
NAMES = {errno.ENOSPC: "no space left on device", errno.EDQUOT: "disk quota exceeded"}
TEXTS = {"No space left on device": errno.ENOSPC, "Disk quota exceeded": errno.EDQUOT}
TRACEBACK = "Traceback (most recent call last)"


def errno_of(error: BaseException | str) -> int | None:
    """ENOSPC or EDQUOT when ``error`` (an exception with its causes and contexts, or
    a message) is a full disk; else None."""
    if isinstance(error, str):
        return next((code for text, code in TEXTS.items() if text in error), None)
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno in NAMES:
            return error.errno
        code = errno_of(str(error))
        if code is not None:
            return code
        error = error.__cause__ or error.__context__
    return None


def message(command: str, code: int, error: BaseException, output: str | None) -> str:
    """The one line a full disk ends ``command`` with: what, where, the error's last
    line (Beam's wrapped errors start with the worker's traceback), what to do."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    detail = lines[-1] if lines else type(error).__name__
    detail = detail if len(detail) <= 300 else detail[:300] + "..."
    return (f"beam-bpe {command}: error: {NAMES[code]} while writing {output or 'the output'}: {detail}; "
            "nothing was marked complete; free space and rerun the same command")


class QuietStderr:
    """stderr, less the tracebacks of a full disk that Beam's SDK worker prints (one
    ``print`` each: the traceback, then its newline). Everything else passes."""

    def __init__(self, stream: TextIO):
        self._stream = stream
        self._dropped = False

    def write(self, text: str) -> int:
        dropped, self._dropped = self._dropped, False
        if TRACEBACK in text and errno_of(text) is not None:
            self._dropped = True
            return len(text)
        if dropped and text == "\n":
            return len(text)
        return self._stream.write(text)

    def __getattr__(self, name):
        return getattr(self._stream, name)
