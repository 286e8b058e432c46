"""Matching input patterns to files: for drivers before a job, and as the job's first step.

Patterns follow Beam's FileSystems: ``*`` matches within one path segment,
``**`` across segments, ``?`` one character, ``[...]`` a set; a pattern ending
in ``/`` means the files directly in that directory. A pattern without
wildcards that names a directory means the same as with the ``/``: the files
directly in it, not recursively (``dir/**`` reads a whole tree). Local paths
and ``file://`` URLs are matched here rather than by Beam's local file
system, whose listing skips entries it cannot stat: every entry a pattern
matches is returned, and one that cannot be read (a broken symbolic link, a
FIFO, a socket, a directory that cannot be listed) carries the reason, so it
becomes a dead letter instead of vanishing.
"""

import os
import re
import stat
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import apache_beam as beam
import regex
from apache_beam.io.filesystem import FileSystem
from apache_beam.io.filesystems import FileSystems
from apache_beam.io.localfilesystem import LocalFileSystem

from transforms.read.documents import DeadLetter, describe

__all__ = ["MatchedFile", "match_pattern", "match_inputs", "MatchFilesFn", "as_list"]

_WILDCARD = re.compile(r"[*?[]")


class MatchedFile(NamedTuple):
    """A file a pattern matched.

    Attributes:
      path: the path or URL (local paths without ``file://``).
      size: its size in bytes (compressed size for compressed files).
      problem: why it cannot be read, found while matching; None if it can be.
    """

    path: str
    size: int
    problem: str | None = None


def as_list(patterns: str | Sequence[str]) -> list[str]:
    """Patterns as a list (a lone string would otherwise be iterated character by character)."""
    return [patterns] if isinstance(patterns, str) else list(patterns)


def match_pattern(pattern: str) -> list[MatchedFile]:
    """The files one pattern matches, in listing order; [] when it matches none.

    Raises:
      OSError (BeamIOError): a remote listing failed.
      ValueError: an unknown URL scheme.
    """
    path = pattern[len("file://"):] if pattern.startswith("file://") else pattern
    if isinstance(FileSystems.get_filesystem(path), LocalFileSystem):
        return _match_local(path)
    files = FileSystems.match([path])[0].metadata_list
    if not files and not _WILDCARD.search(path) and not path.endswith("/"):
        # Object stores have no directories: a prefix names the files under it.
        files = FileSystems.match([path + "/"])[0].metadata_list
    return [MatchedFile(m.path, m.size_in_bytes) for m in files]


def match_inputs(patterns: str | Sequence[str]) -> list[str]:
    """Expands patterns into the list of files they match, without duplicates.

    Used by drivers before the job starts, so a missing input fails at once.
    Files that match but cannot be read are kept: the job reports each as a
    dead letter.

    Args:
      patterns: globs, paths or URLs (``file://``, ``gs://``, ``s3://``).

    Returns:
      The matched paths, sorted within each pattern, each path once.

    Raises:
      FileNotFoundError: ``no file matches PATTERN`` for the first pattern that
        matches nothing.
    """
    seen = {}
    for pattern in as_list(patterns):
        files = match_pattern(pattern)
        if not files:
            raise FileNotFoundError(f"no file matches {pattern}")
        for path in sorted(f.path for f in files):
            seen.setdefault(path, None)
    return list(seen)


def _match_local(path: str) -> list[MatchedFile]:
    """Beam's local matching, keeping the entries it would skip."""
    if path.endswith(("/", "\\")):
        path += "*"
    elif not _WILDCARD.search(path) and os.path.isdir(path):
        path = os.path.join(path, "*")
    if not _WILDCARD.search(path):
        return [_local_file(path)] if os.path.lexists(path) else []
    # As Beam does: list the directory before the first wildcard, recursively,
    # and keep the paths the whole pattern matches.
    root = os.path.dirname(_WILDCARD.split(path, 1)[0])
    if not os.path.isdir(root):
        return []
    translated = FileSystem.translate_pattern(path)
    matches = re.compile(translated).match
    found = []

    def unlistable(error: OSError) -> None:
        # Reported only if files in that directory could match the pattern.
        directory = error.filename
        if regex.match(translated, os.path.join(directory, ""), partial=True):
            found.append(MatchedFile(directory, 0, f"cannot list directory: {describe(error)}"))

    for directory, _, names in os.walk(root, onerror=unlistable):
        for name in names:
            entry = os.path.join(directory, name)
            if matches(entry):
                found.append(_local_file(entry))
    return found


def _local_file(path: str) -> MatchedFile:
    try:
        status = os.stat(path)
    except OSError as e:
        link = f" (a symbolic link to {os.readlink(path)!r})" if os.path.islink(path) else ""
        return MatchedFile(path, 0, f"cannot stat file{link}: {describe(e)}")
    if not stat.S_ISREG(status.st_mode):
        return MatchedFile(path, 0, f"not a regular file but {_kind(status.st_mode)}")
    return MatchedFile(path, status.st_size)


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    return "a directory" if stat.S_ISDIR(mode) else "a special file"


class MatchFilesFn(beam.DoFn):
    """Expands all the patterns, given as one list, into their files, each file once
    (several patterns may match it), and a DeadLetter, each once, for every pattern or
    file that cannot be read, in the same output (``ReadDocuments`` says why). One
    element for all: no shuffle is needed to drop what two patterns share.

    Files come largest first. The runner spreads the reads over its workers in the order
    they come: Flink deals them out in turn, and an equal number of reads each, in the
    order of the names, gave one of two workers 8% more bytes to encode than the other
    (a 240 MB corpus of 16 files of 15-16 MB), every run. Largest first, the workers' shares
    differ by less than one file, and a worker that takes reads as it becomes free ends
    with the small ones. (The order of the reads changes no output: shards keep the
    order of the files' names, ``transforms.write_shards``.)"""

    def process(self, patterns: list[str]) -> Iterator[MatchedFile | DeadLetter]:
        files: dict[str, MatchedFile] = {}
        dead: dict[tuple, None] = {}
        for pattern in patterns:
            try:
                matched = match_pattern(pattern)
            except (OSError, ValueError) as e:
                dead[(pattern, -1, f"cannot match: {describe(e)}")] = None
                continue
            if not matched:
                dead[(pattern, -1, f"no file matches {pattern}")] = None
            for file in matched:
                if file.problem:
                    dead[(file.path, -1, file.problem)] = None
                else:
                    files.setdefault(file.path, file)
        for path, line, reason in dead:
            yield DeadLetter(path, line, reason)
        yield from sorted(files.values(), key=lambda file: (-file.size, file.path))