"""A local file written whole or not at all: the one way beam-bpe replaces a local file.

The bytes go to a temporary file beside the target, are flushed to disk, and the
temporary is renamed over the target (``os.replace``, atomic on one filesystem);
the directory is then flushed so that the rename itself survives a crash. A
reader, a crash or a second writer sees the old file or the new one, never a
part. Object stores need none of this (an object appears whole when its upload
completes), so callers write those through their own clients.
"""

from __future__ import annotations

import contextlib
import os
import tempfile

__all__ = ["replace_file"]


def replace_file(path: str, data: bytes, temporary: str | None = None) -> None:
    """Writes ``data`` to the local ``path`` atomically and durably.

    Args:
      path: the local file to create or replace; its directory must exist.
      data: the file's whole content.
      temporary: where to write before the rename (a caller whose cleanup knows the
        name picks it); None picks a unique name beside ``path``, so that processes
        writing the same file at once never share a temporary.

    Raises:
      OSError: the file could not be written; the temporary is removed and ``path``
        is as it was.
    """
    directory = os.path.dirname(path) or "."
    if temporary is None:
        fd, temporary = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
        file = os.fdopen(fd, "wb")
    else:
        file = open(temporary, "wb")
    try:
        with file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
