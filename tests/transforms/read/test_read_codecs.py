"""Every codec reads multi-stream files to the end; an undecodable remainder is a dead letter.

Multi-stream files are common: pbzip2 and Wikipedia's multistream dumps write
one bzip2 stream per block, ``cat a.gz b.gz`` makes a multi-member gzip, and
xz and zstd files may hold several streams or frames. The streams are cut at
arbitrary bytes, so lines cross stream boundaries.
"""

import bz2
import gzip
import io
import lzma
import subprocess

import pytest
import zstandard

from pipeline import cli
from tests.support.cli import IN_MEMORY
from tests.support.read_assertions import check_read, text_documents
from transforms.read import compression

LINES = [b"line %04d of the corpus %s\n" % (i, b"x" * (i % 13)) for i in range(600)]
DATA = b"".join(LINES)

COMPRESSORS = {
    ".gz": gzip.compress,
    ".bz2": bz2.compress,
    ".xz": lzma.compress,
    ".zst": zstandard.ZstdCompressor().compress,
}


def streams(ext: str, *pieces: bytes) -> bytes:
    """Each piece compressed as one stream (member, frame), concatenated."""
    return b"".join(COMPRESSORS[ext](piece) for piece in pieces)


def damaged(stream: bytes) -> bytes:
    """A stream whose header is damaged, so that none of it decodes."""
    return stream[:1] + bytes([stream[1] ^ 0xFF]) + stream[2:]


@pytest.fixture(params=sorted(COMPRESSORS))
def ext(request):
    return request.param


def test_every_stream_is_read_to_the_end(corpus, ext):
    # Cut in the middle of a line, and one empty stream in between.
    cut = len(DATA) // 3 + 5
    path = corpus.write_raw(f"multi.txt{ext}", streams(ext, DATA[:cut], b"", DATA[cut:2 * cut], DATA[2 * cut:]))
    check_read([path], text_documents(path, LINES))


def test_a_damaged_second_stream_is_a_dead_letter_after_the_first(corpus, ext):
    first = LINES[:200]
    path = corpus.write_raw(
        f"damaged.txt{ext}",
        COMPRESSORS[ext](b"".join(first)) + damaged(COMPRESSORS[ext](b"".join(LINES[200:]))),
    )
    check_read([path], text_documents(path, first), [(path, -1, "reading file stopped after record 200: ")])


@pytest.mark.parametrize("garbage", [b"trailing garbage\n", b"B", b"\x1f\x8b\x08" + b"\0" * 7])
def test_trailing_garbage_is_a_dead_letter_after_the_last_record(corpus, ext, garbage):
    path = corpus.write_raw(f"tail.txt{ext}", streams(ext, DATA[:1000], DATA[1000:]) + garbage)
    check_read([path], text_documents(path, LINES), [(path, -1, f"stopped after record {len(LINES)}: ")])


@pytest.mark.parametrize("ext", [".gz", ".xz"])
def test_zero_padding_between_streams_is_not_data(corpus, ext):
    # Both formats allow it (xz in multiples of 4 bytes); gzip and xz skip it.
    path = corpus.write_raw(f"padded.txt{ext}", COMPRESSORS[ext](DATA[:999]) + b"\0" * 8 + COMPRESSORS[ext](DATA[999:]) + b"\0" * 4)
    check_read([path], text_documents(path, LINES))


def test_pbzip2_style_file_from_the_bzip2_tool(corpus, tmp_path):
    # Streams written by the real tool, concatenated as pbzip2 writes them.
    parts = []
    for piece in (DATA[:7000], DATA[7000:]):
        parts.append(subprocess.run(["bzip2", "-c"], input=piece, capture_output=True, check=True).stdout)
    path = corpus.write_raw("tool.txt.bz2", b"".join(parts) + damaged(parts[0]))
    check_read([path], text_documents(path, LINES), [(path, -1, f"stopped after record {len(LINES)}: OSError")])


def test_decompression_output_is_bounded_per_step():
    # A highly compressible stream comes out in pieces, not as one block.
    zeros = b"\0" * (8 << 20)
    for ext in (".gz", ".bz2", ".xz"):
        codec = compression._CODECS[compression.detect_compression("x" + ext)]
        pieces = list(compression.decompress(io.BytesIO(COMPRESSORS[ext](zeros)), codec))
        assert b"".join(pieces) == zeros
        assert max(map(len, pieces)) <= compression._OUTPUT_CHUNK


def test_strict_train_fails_on_a_damaged_second_bz2_stream(corpus, tmp_path, capsys):
    corpus.write_raw("dump.txt.bz2", bz2.compress(DATA[:5000]) + damaged(bz2.compress(DATA[5000:])))
    out = tmp_path / "out"
    code = cli.main(["train", "--no-progress", "--input", corpus.path("*.bz2"), "--vocab-size", "260",
                     "--output", str(out), "--strict", *IN_MEMORY])
    assert code == 2
    err = capsys.readouterr().err
    assert "(--strict)" in err and "dump.txt.bz2" in err
    assert not (out / "tokenizer.json").exists()
