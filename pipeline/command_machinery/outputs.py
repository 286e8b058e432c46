"""What every job leaves in its output directory, and how it gets there.

One contract for the drivers (``train``, ``encode``, and those that follow):

* **Paths.** Local paths go to the job absolute (workers of a portable runner
  do not share our current directory); ``file://`` is stripped here, once,
  because Beam's FileSystems knows local files as plain paths only. Remote
  paths (``gs://``, ``s3://``) go through Beam's FileSystems unchanged.
* **Atomic writes.** A small driver-side file (a marker, a checkpoint, stats)
  is written by ``write_atomic``: locally a hidden temporary file, flushed to
  disk and renamed, with the directory flushed too, so neither a reader nor a
  crash (even of the machine) sees half a file under the real name; on an
  object store an object appears whole when it is closed.
* **Ownership** (``claim``). Before a job writes anything it claims its
  output directory: the directory is new or empty, or holds our own
  ``.beam-bpe-output.json`` from a previous run of the same command; then it
  takes the directory's lock (``pipeline.command_machinery.output_lock``). A directory holding
  files we did not write, an output of another command, a path with glob
  characters (Beam's file systems match and delete by glob) and an output that
  holds an input file are refused. So clearing leftovers and replacing a result
  only ever delete files of our own, never the user's.
* **Staging and publish** (``StagedOutput``). The job writes only into
  ``DIR/.staging/``; when it succeeds, the driver moves the result into
  ``DIR`` and writes the completion marker last. A directory is complete
  exactly when its marker exists; anything else in it is a leftover.
* **Dead letters.** Rejected input records and files are under
  ``DIR/dead_letters/dead_letters-SSSSS-of-NNNNN.jsonl`` (written by
  ``transforms.dead_letters.WriteDeadLetters``), read back, summed up and
  refused with ``--strict`` by ``pipeline.command_machinery.unreadable_records``.
* **Summaries.** ``size`` gives a byte count as the commands print it.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import sys
from typing import IO, Sequence

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from bpe.atomic_write import replace_file
from pipeline.command_machinery.errors import UserError
from pipeline.command_machinery.output_lock import LOCK_FILE, OutputLock
from transforms.dead_letters import DEAD_LETTER_GLOB, DEAD_LETTERS_DIR

__all__ = [
    "BEAM_TEMP_GLOB", "DEAD_LETTERS_DIR", "DEAD_LETTER_GLOB", "OWNER_FILE", "STAGING_DIR", "StagedOutput", "absolute",
    "check_writable", "claim",
    "delete", "exists", "is_local", "local_path", "matching", "open_read", "read_json",
    "move_into", "readable_json", "remove", "size", "temporary_path", "write_atomic", "write_json",
]
STAGING_DIR = ".staging"  # hidden from pyarrow.dataset and from globs like part-*
# Beam's file sinks write beside their output first; a killed job leaves these.
BEAM_TEMP_GLOB = "beam-temp-*"
# Written first into every output directory: the proof that it is ours.
OWNER_FILE = ".beam-bpe-output.json"
WRITE_CHECK_PREFIX = ".beam-bpe-write-check-"
# Beam's file systems treat these as glob syntax in the paths they match and delete.
GLOB_CHARACTERS = "*?["


# --- Paths ------------------------------------------------------------------------


def is_local(path: str) -> bool:
    """Whether a path is on this machine's file system (not a URL)."""
    return "://" not in path


def local_path(path: str) -> str:
    """The path without a ``file://`` scheme (Beam's FileSystems knows plain paths only)."""
    return path[len("file://"):] if path.startswith("file://") else path


def absolute(path: str) -> str:
    """The path to hand to a job: local paths absolute and without ``file://``, URLs unchanged."""
    path = local_path(path)
    return os.path.abspath(path) if is_local(path) else path


def exists(path: str) -> bool:
    """Whether a path exists; a file system that cannot answer says no."""
    try:
        return FileSystems.exists(path)
    except Exception:  # noqa: BLE001 - e.g. missing credentials: treated as absent
        return False


def open_read(path: str) -> IO[bytes]:
    """Opens a file for reading, as it is (no decompression), on any file system."""
    path = local_path(path)
    if is_local(path):
        return open(path, "rb")
    return FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)


def read_json(path: str) -> dict | None:
    """A JSON object from ``path``; None if the file does not exist or is not one."""
    try:
        with open_read(path) as f:
            data = json.loads(f.read().decode("utf-8"))
    except Exception:  # noqa: BLE001 - missing (an IOError of some file system) or damaged
        return None
    return data if isinstance(data, dict) else None


def matching(directory: str, names: Sequence[str]) -> list[str]:
    """Paths directly in ``directory`` that match any of the glob ``names`` (files or directories).

    On an object store, which has no directories, a directory is every object
    under its prefix.
    """
    if is_local(directory):
        # Beam's local glob matching lists files only; leftovers include directories.
        return sorted({path for name in names for path in glob.glob(os.path.join(glob.escape(directory), name))})
    patterns = [FileSystems.join(directory, name) for name in names]
    patterns += [FileSystems.join(directory, name, "**") for name in names]
    paths = set()
    for pattern in patterns:
        try:
            paths.update(m.path for m in FileSystems.match([pattern])[0].metadata_list)
        except Exception:  # noqa: BLE001 - nothing matches: some file systems raise instead of answering []
            pass
    return sorted(paths)


def delete(directory: str, names: Sequence[str]) -> list[str]:
    """Deletes what matches the glob ``names`` in ``directory`` (directories recursively); returns it."""
    paths = matching(directory, names)
    if paths:
        FileSystems.delete(paths)
    return paths


def check_writable(directory: str, flag: str = "--output") -> None:
    """Creates the directory and proves it writable, before any work.

    Raises:
      UserError: it exists and is not a directory, or it cannot be written.
    """
    # One probe name per process: two jobs started on one directory must not delete each other's probe.
    probe = FileSystems.join(directory, f"{WRITE_CHECK_PREFIX}{os.getpid()}-{os.urandom(4).hex()}")
    try:
        if is_local(directory):
            if os.path.exists(directory) and not os.path.isdir(directory):
                raise UserError(f"{flag} {directory} exists and is not a directory")
            os.makedirs(directory, exist_ok=True)
        with FileSystems.create(probe) as f:
            f.write(b"ok")  # not empty: some object stores refuse an empty multipart upload
        FileSystems.delete([probe])
    except UserError:
        raise
    except Exception as e:  # noqa: BLE001 - OSError locally, BeamIOError/auth errors remotely
        reason = getattr(e, "strerror", None) or str(e).splitlines()[0]
        raise UserError(f"cannot write to {flag} {directory}: {reason}") from None


# --- Ownership ------------------------------------------------------------------------


def claim(directory: str, command: str, inputs: Sequence[str] = (), flag: str = "--output") -> None:
    """Makes ``directory`` this job's own, before the job writes anything into it.

    Creates it if needed, proves it writable, writes ``OWNER_FILE`` into a new
    or empty directory, and takes its lock (released by
    ``pipeline.command_machinery.output_lock.release_all`` when the command ends).

    Args:
      directory: the output directory (absolute local path or URL).
      command: the CLI command (``train``, ``encode``, ...): a directory
        belongs to one command.
      inputs: the job's input files, which must not lie in the directory.
      flag: the flag naming the directory, for messages.

    Raises:
      UserError: the path has glob characters, is not a writable directory,
        holds files we did not write or another command's output, holds an
        input, or is in use by another job.
    """
    bad = sorted(set(GLOB_CHARACTERS) & set(directory))
    if bad:
        raise UserError(f"{flag} {directory} contains {' '.join(bad)}, which Beam's file systems take as a "
                        "glob pattern; choose a directory name without * ? [")
    inside = [path for path in inputs if _is_inside(absolute(path), directory)]
    if inside:
        raise UserError(f"{flag} {directory} holds the input {inside[0]}; write the output to another directory "
                        "(beam-bpe replaces what it writes there)")
    check_writable(directory, flag)
    if is_local(directory):
        # Locked before the directory is read, so a second job started at the same moment is refused
        # as "in use" instead of reading a half-claimed directory.
        OutputLock(directory, command).acquire()
    owner = read_json(FileSystems.join(directory, OWNER_FILE))
    if owner is None:
        others = [p.rstrip("/").rsplit("/", 1)[-1] for p in matching(directory, ("*", ".*"))]
        others = sorted(name for name in set(others) - {LOCK_FILE} if not name.startswith(WRITE_CHECK_PREFIX))
        if others:
            shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
            raise UserError(f"{flag} {directory} is not empty and was not written by beam-bpe ({shown}); "
                            "choose a new or empty directory")
    elif owner.get("command") != command:
        raise UserError(f"{flag} {directory} holds the output of beam-bpe {owner.get('command')}, not of "
                        f"{command}; choose another directory")
    if owner is None:
        write_json(FileSystems.join(directory, OWNER_FILE), {"what": "beam-bpe output directory",
                                                             "command": command})


def _is_inside(path: str, directory: str) -> bool:
    if is_local(path) != is_local(directory):
        return False
    if is_local(path):
        path, directory = os.path.realpath(path), os.path.realpath(directory)
    return path.startswith(directory.rstrip("/") + "/")


# --- Atomic writes and markers ------------------------------------------------------


def temporary_path(path: str) -> str:
    """Where ``write_atomic`` writes before the rename: a hidden file beside ``path``."""
    directory, name = path.rsplit("/", 1) if "/" in path else ("", path)
    return f"{directory}/.{name}.tmp" if directory else f".{name}.tmp"


def write_atomic(path: str, data: str | bytes, mime_type: str = "application/octet-stream") -> None:
    """Writes a whole file or nothing: readers and crashes see the old file or the new one."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    path = local_path(path)
    if not is_local(path):
        with FileSystems.create(path, mime_type=mime_type, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            f.write(data)  # the object appears, whole, when closed
        return
    replace_file(path, data, temporary_path(path))


def write_json(path: str, data: dict, indent: int | None = 1) -> None:
    """Writes ``data`` as JSON (a marker, stats), atomically, ending with a newline: indented
    (``readable_json``), or on one line when ``indent`` is None."""
    text = readable_json(data, indent) if indent is not None else json.dumps(data, separators=(",", ":"))
    write_atomic(path, text + "\n", mime_type="application/json")


def readable_json(value, indent: int, level: int = 0) -> str:
    """``value`` as JSON indented by ``indent`` spaces per level, except that a list or dict
    holding no list or dict is written on one line (a row of numbers, a token's fields).

    The lines are made by the json module's compiled encoder: its pure-Python encoder,
    which any ``indent`` selects, is slow on a report of a large vocabulary.
    """
    is_dict = isinstance(value, dict)
    children = value.values() if is_dict else value if isinstance(value, (list, tuple)) else ()
    if not any(isinstance(child, (dict, list, tuple)) for child in children):
        return json.dumps(value)
    if is_dict:  # keys as json writes them: strings as they are, other scalars as their JSON
        lines = [f"{json.dumps(key if isinstance(key, str) else json.dumps(key))}: {readable_json(child, indent, level + 1)}"
                 for key, child in value.items()]
    else:
        lines = [readable_json(child, indent, level + 1) for child in value]
    inner, outer = " " * (indent * (level + 1)), " " * (indent * level)
    opening, closing = "{}" if is_dict else "[]"
    return f"{opening}\n{inner}" + f",\n{inner}".join(lines) + f"\n{outer}{closing}"


def remove(path: str) -> None:
    """Deletes a file if it exists."""
    if FileSystems.exists(path):
        FileSystems.delete([path])


# --- Staging and publish --------------------------------------------------------------


@dataclasses.dataclass
class StagedOutput:
    """An output directory that is complete exactly when its marker file exists.

    The job writes into ``staging``; ``publish`` moves the files matching
    ``results`` into the directory, then writes the marker. A crash at any
    point leaves a directory without the marker, whose leftovers
    ``clear_leftovers`` removes on the next run.

    Args:
      directory: the output directory (local path or URL).
      results: glob paths, relative to the directory, of what a job writes
        besides the marker (e.g. ``part-*-of-*.parquet``,
        ``dead_letters/dead_letters-*-of-*.jsonl``).
      marker: the completion marker's file name.
      command: the CLI command, for messages.
    """

    directory: str
    results: tuple[str, ...]
    marker: str = "stats.json"
    command: str = "encode"

    @property
    def staging(self) -> str:
        return FileSystems.join(self.directory, STAGING_DIR)

    @property
    def marker_path(self) -> str:
        return FileSystems.join(self.directory, self.marker)

    def _result_names(self) -> tuple[str, ...]:
        # What to delete in the directory: each result's first path component.
        return tuple(dict.fromkeys(result.split("/", 1)[0] for result in self.results))

    def _scratch_names(self) -> tuple[str, ...]:
        return STAGING_DIR, BEAM_TEMP_GLOB, temporary_path(self.marker)

    def is_complete(self) -> bool:
        return exists(self.marker_path)

    def clear_leftovers(self) -> None:
        """Removes what a previous run that did not complete left in the directory.

        Without the marker nothing in the directory is a finished result, so its
        result files go too (a rerun may write a different number of shards,
        and old ones must never mix with new ones). With the marker the old
        result stays until ``publish`` replaces it.
        """
        names = self._scratch_names()
        if not self.is_complete():
            names += self._result_names()
        leftovers = matching(self.directory, names)
        if leftovers:
            shown = ", ".join(path.rstrip("/").rsplit("/", 1)[-1] for path in leftovers[:5])
            more = f" and {len(leftovers) - 5} more" if len(leftovers) > 5 else ""
            print(
                f"beam-bpe {self.command}: removing leftovers of a previous run that did not complete from "
                f"{self.directory}: {shown}{more}",
                file=sys.stderr,
            )
            delete(self.directory, names)

    def publish(self, marker: dict) -> None:
        """Moves the staged result into the directory; the marker (``marker`` as JSON) goes last."""
        # A replaced result stops being complete before any of its files change.
        delete(self.directory, (self.marker,))
        delete(self.directory, self._result_names())
        for result in self.results:
            subdir, _, name = result.rpartition("/")
            source_dir = FileSystems.join(self.staging, subdir) if subdir else self.staging
            target_dir = FileSystems.join(self.directory, subdir) if subdir else self.directory
            move_into(matching(source_dir, (name,)), target_dir)
        delete(self.directory, (STAGING_DIR,))
        write_json(self.marker_path, marker, indent=2)


    def keep_dead_letters(self) -> str:
        """After a run that ends before ``publish`` (nothing to publish), keeps the staged dead
        letters where the error points: in ``DIR/dead_letters/``, unless a complete result
        is there, whose own dead letters they must not join; they then stay staged (until
        the next run). Returns the directory that holds them."""
        staged = FileSystems.join(self.staging, DEAD_LETTERS_DIR)
        if self.is_complete():
            return staged
        target = FileSystems.join(self.directory, DEAD_LETTERS_DIR)
        delete(target, (DEAD_LETTER_GLOB,))
        move_into(matching(staged, (DEAD_LETTER_GLOB,)), target)
        delete(self.directory, (STAGING_DIR,))
        return target


def move_into(files: Sequence[str], directory: str) -> None:
    """Moves ``files`` into ``directory``, each under its own name."""
    if files and is_local(directory) and not FileSystems.exists(directory):
        FileSystems.mkdirs(directory)  # a local rename needs the directory; object stores have none
    FileSystems.rename(list(files), [FileSystems.join(directory, p.rsplit("/", 1)[-1]) for p in files])


# --- Summaries ---------------------------------------------------------------------------


def size(n: int | None) -> str:
    """A byte count for people: 1.5 MB, 320 bytes."""
    if n is None:
        return "? bytes"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"
