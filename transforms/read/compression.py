"""Opening input files through Beam's FileSystems and decompressing them by our rules.

The rules: a compressed file is read to its very end. Every codec's file may
hold several streams one after another (gzip members, bzip2 streams as pbzip2
writes them, xz streams, zstd frames); each is decompressed in turn. A stream
cut short raises EOFError, and bytes after a stream that do not start a valid
one (a damaged stream, trailing garbage) raise the codec's error, after the
data before them has been handed out. The standard library's file objects do
not give that guarantee (``bz2.BZ2File`` and ``lzma.LZMAFile`` end quietly at
trailing data that is not a valid stream, and Beam's own decompressing reader
ends a truncated gzip or zstd stream as if it were complete), so the streams
are decoded here with the codecs' decompressor objects.

Zero bytes between gzip members and between xz streams are padding that both
formats allow (``gzip`` and ``xz`` skip it too), not data.
"""

import bz2
import contextlib
import io
import lzma
import posixpath
import zlib
from collections.abc import Callable, Iterator
from typing import NamedTuple

import pyarrow as pa
import zstandard
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

__all__ = ["READ_ERRORS", "detect_compression", "open_file"]

# Extension -> our compression name.
_COMPRESSION_BY_EXTENSION = {
    ".gz": "gzip",
    ".gzip": "gzip",
    ".bz2": "bzip2",
    ".zst": "zstd",
    ".zstd": "zstd",
    ".xz": "xz",
}

# Errors that mean "this file (or the rest of it) cannot be read". Anything
# else is a bug and fails loudly rather than becoming a dead letter.
READ_ERRORS = (
    OSError,  # includes PermissionError, IsADirectoryError, BeamIOError, bz2's errors
    EOFError,  # a stream cut short
    zlib.error,
    lzma.LZMAError,
    zstandard.ZstdError,
    pa.ArrowException,  # Parquet files
)

_INPUT_CHUNK = 1 << 16  # compressed bytes read at a time
_OUTPUT_CHUNK = 1 << 20  # at most this many decompressed bytes per step
_BUFFER = 1 << 20


def detect_compression(path: str) -> str:
    """Returns "gzip", "bzip2", "zstd", "xz" or "" (none) from the extension."""
    ext = posixpath.splitext(path)[1].lower()
    return _COMPRESSION_BY_EXTENSION.get(ext, "")


@contextlib.contextmanager
def open_file(path: str, compression: str) -> Iterator[io.RawIOBase | io.BufferedIOBase]:
    """Opens ``path`` for reading, decompressed as ``compression`` ("" for none) says.

    Uncompressed files come back as Beam opens them (seekable); compressed ones
    as a buffered stream of the decompressed bytes, read to the file's end.
    """
    raw = FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)
    with raw:
        if not compression:
            yield raw
        else:
            yield io.BufferedReader(_ChunkStream(decompress(raw, _CODECS[compression])), _BUFFER)


class _Codec(NamedTuple):
    new_stream: Callable[[], object]  # a decompressor for one stream
    zero_padding: bool  # zero bytes may separate streams


class _OneStream:
    """A decompressor of one stream (``_inner``) behind the interface of bz2's and
    lzma's: where the stream ends, and the bytes after it, are the inner one's."""

    @property
    def eof(self) -> bool:
        return self._inner.eof

    @property
    def unused_data(self) -> bytes:
        return self._inner.unused_data


class _GzipMember(_OneStream):
    """One gzip member."""

    def __init__(self):
        self._inner = zlib.decompressobj(16 + zlib.MAX_WBITS)  # gzip header and trailer
        self.needs_input = True

    def decompress(self, data: bytes, max_length: int) -> bytes:
        out = self._inner.decompress(self._inner.unconsumed_tail + data, max_length)
        # A full output may leave more inside zlib even with no input left.
        self.needs_input = not self._inner.unconsumed_tail and len(out) < max_length
        return out


class _ZstdFrame(_OneStream):
    """One zstd frame (its output is not limited)."""

    needs_input = True

    def __init__(self):
        # Beam's window limit, so files written with --long decompress.
        self._inner = zstandard.ZstdDecompressor(max_window_size=1 << 31).decompressobj()

    def decompress(self, data: bytes, max_length: int) -> bytes:
        return self._inner.decompress(data)


_CODECS = {
    "gzip": _Codec(_GzipMember, zero_padding=True),
    "bzip2": _Codec(bz2.BZ2Decompressor, zero_padding=False),
    "xz": _Codec(lzma.LZMADecompressor, zero_padding=True),  # also .lzma (format auto)
    "zstd": _Codec(_ZstdFrame, zero_padding=False),
}


def decompress(raw, codec: _Codec) -> Iterator[bytes]:
    """The decompressed bytes of every stream in ``raw``, in pieces, to its end.

    Raises:
      EOFError: ``raw`` ends inside a stream.
      the codec's error: bytes that do not decode (raised once the bytes
        before them have been yielded).
    """
    data = b""  # compressed bytes not yet given to a decompressor
    stream = None
    while True:
        if stream is None or stream.needs_input:
            if not data:
                data = raw.read(_INPUT_CHUNK)
                if not data:
                    if stream is not None:
                        raise EOFError("Compressed file ended before the end-of-stream marker was reached")
                    return
            if stream is None:
                if codec.zero_padding:
                    data = data.lstrip(b"\0")
                    if not data:
                        continue
                stream = codec.new_stream()
        out = stream.decompress(data, _OUTPUT_CHUNK)
        data = b""
        if out:
            yield out
        if stream.eof:
            data, stream = stream.unused_data, None


class _ChunkStream(io.RawIOBase):
    """A readable raw stream over an iterator of byte chunks."""

    def __init__(self, chunks: Iterator[bytes]):
        super().__init__()
        self._chunks = chunks
        self._chunk = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self._chunk:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._chunk = memoryview(chunk)
        n = min(len(buffer), len(self._chunk))
        buffer[:n] = self._chunk[:n]
        self._chunk = self._chunk[n:]
        return n
