"""Tokenizer files read and written, local or remote; a reader never sees half a file.

Paths are local files or directories, ``file://`` URLs, or any URL smart_open
opens (``s3://``, ``gs://``, ...). Remote stores use their client libraries'
own configuration: for S3, boto3's (``AWS_ENDPOINT_URL_S3`` or
``AWS_ENDPOINT_URL`` for a custom endpoint, ``AWS_ACCESS_KEY_ID``, ``~/.aws``),
or a client passed as ``transport_params={"client": boto3.client("s3", ...)}``;
for GCS, google-cloud-storage's default credentials (``pip install
smart_open[gcs]``) or ``transport_params={"client": storage.Client(...)}``.

A file is read whole, up to ``MAX_FILE_BYTES``, and refused at its first bytes
when it cannot be a tokenizer.json or a tiktoken rank file.
"""

from __future__ import annotations

import os
from typing import IO

from bpe.atomic_write import replace_file
from bpe.tokenizer_file import tiktoken_file
from bpe.tokenizer_file.spec import TokenizerFileError

__all__ = ["FILE_NAME", "MAX_FILE_BYTES", "beside", "read", "read_beside", "write"]

FILE_NAME = "tokenizer.json"
# Tokenizer files above this size are refused before they are read whole.
MAX_FILE_BYTES = 1 << 30
_CHUNK = 1 << 20


def write(path: str, text: str, transport_params: dict | None = None) -> str:
    """Writes tokenizer.json into a directory (or to a path ending in .json); returns the file's path.

    A reader never sees half a file: a local file is written to a temporary
    name and renamed; an object store publishes an object only when its upload
    completes.
    """
    file_path = path if path.endswith(".json") else _join(path, FILE_NAME)
    local = _local_path(file_path)
    if local is None:
        import smart_open  # only for URLs: local files need none of it

        with smart_open.open(file_path, "wb", compression="disable", transport_params=transport_params) as f:
            f.write(text.encode("utf-8"))
        return file_path
    os.makedirs(os.path.dirname(local) or ".", exist_ok=True)
    replace_file(local, text.encode("utf-8"), local + ".tmp")
    return file_path


def read(path: str, transport_params: dict | None = None) -> tuple[bytes, str]:
    """(the bytes, the file's path) of the tokenizer.json a path names: the file, or the one in a directory.

    Raises:
      TokenizerFileError: missing, unreadable, larger than ``MAX_FILE_BYTES``,
        or plainly not a JSON object.
    """
    local = _local_path(path)
    if local is not None:
        file_path = os.path.join(local, FILE_NAME) if os.path.isdir(local) else local
        try:
            with open(file_path, "rb") as f:
                return _read_capped(f, file_path, os.fstat(f.fileno()).st_size), file_path
        except FileNotFoundError:
            raise TokenizerFileError(f"tokenizer file not found: {file_path}") from None
        except OSError as e:
            raise TokenizerFileError(f"cannot read tokenizer file {file_path}: {e.strerror or e}") from None
    import smart_open  # only for URLs: local files need none of it

    # An object store has no directories: try the directory form first, then the path itself.
    candidates = [path] if path.endswith(".json") else [_join(path, FILE_NAME), path]
    first_error = None
    for file_path in candidates:
        try:
            with smart_open.open(file_path, "rb", compression="disable", transport_params=transport_params) as f:
                return _read_capped(f, file_path, None), file_path
        except TokenizerFileError:
            raise
        except Exception as e:  # each store's client raises its own types
            first_error = first_error or (file_path, e)
    file_path, e = first_error
    reason = " ".join(str(e).split())[:300] or type(e).__name__
    raise TokenizerFileError(f"cannot read tokenizer file {file_path}: {reason}") from None


def read_beside(file_path: str, name: str, transport_params: dict | None = None,
                limit: int = MAX_FILE_BYTES) -> bytes | None:
    """The file ``name`` in the directory of ``file_path`` (its first ``limit`` bytes), or
    None where there is none.

    Raises:
      TokenizerFileError: it is there but cannot be read.
    """
    path = beside(file_path, name)
    local = _local_path(path)
    if local is not None:
        try:
            with open(local, "rb") as f:
                return f.read(limit)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise TokenizerFileError(f"cannot read {local}: {e.strerror or e}") from None
    import smart_open  # only for URLs: local files need none of it

    try:
        with smart_open.open(path, "rb", compression="disable", transport_params=transport_params) as f:
            return f.read(limit)
    except Exception:  # noqa: BLE001 - each store's client says "no such object" its own way
        return None


def beside(file_path: str, name: str) -> str:
    """The path of the file ``name`` in the directory of ``file_path``."""
    if "://" not in file_path:
        return os.path.join(os.path.dirname(file_path), name)
    return file_path.rsplit("/", 1)[0] + "/" + name


def _read_capped(f: IO[bytes], source: str, size: int | None) -> bytes:
    """Reads a file of at most MAX_FILE_BYTES; stops at once if it cannot be a JSON object."""
    if size is not None and size > MAX_FILE_BYTES:
        raise TokenizerFileError(f"{source} is {size} bytes, more than a tokenizer file may be ({MAX_FILE_BYTES})")
    chunks: list[bytes] = []
    total = 0
    started = False
    while chunk := f.read(_CHUNK):
        if not started:
            stripped = chunk.lstrip(b" \t\r\n")
            first = stripped[:1]
            if first and first != b"{" and not tiktoken_file.looks_like_rank_file(stripped):
                raise TokenizerFileError(
                    f"{source}: expected a JSON object (tokenizer.json) or a tiktoken rank file, found {first!r} at the start"
                )
            started = bool(first)
        total += len(chunk)
        if total > MAX_FILE_BYTES:
            raise TokenizerFileError(f"{source} is more than {MAX_FILE_BYTES} bytes, more than a tokenizer file may be")
        chunks.append(chunk)
    return b"".join(chunks)


def _local_path(path: str) -> str | None:
    """The local path a path or ``file://`` URL names; None for other URLs."""
    if path.startswith("file://"):
        return path[len("file://"):]
    return None if "://" in path else path


def _join(directory: str, name: str) -> str:
    if "://" not in directory:
        return os.path.join(directory, name)
    return directory.rstrip("/") + "/" + name
