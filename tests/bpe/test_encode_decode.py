"""The fast encoder and the decoders against the reference and against their contracts."""

import codecs
import functools
import random
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bpe
from bpe import reference
from bpe.encoder import LONG_PIECE, PieceEncoder
from bpe.pretokenize import PreTokenizer
from bpe.tokenizer import Tokenizer
from tests.support.real_text import multilingual

PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def random_merges(rng: random.Random, alphabet: bytes, count: int) -> list[tuple[int, int]]:
    """Valid merges over a small alphabet, so that merges actually fire."""
    tokens = list(alphabet)
    merges = []
    for _ in range(count):
        pair = (rng.choice(tokens), rng.choice(tokens))
        if pair in merges:
            continue
        merges.append(pair)
        tokens.append(255 + len(merges))
    return merges


merge_lists = st.builds(
    random_merges,
    st.randoms(use_true_random=False),
    st.sampled_from([b"ab", b"abc", b"a\xe4\xb8\xad"]),
    st.integers(0, 40),
)


@PROPERTY
@given(merges=merge_lists, data=st.binary(max_size=200) | st.text("abc", max_size=200).map(str.encode))
def test_piece_encoder_equals_reference(merges, data):
    assert PieceEncoder(merges).encode_bytes(data) == reference.encode_bytes(data, merges)


@PROPERTY
@given(merges=merge_lists, data=st.text("abc", min_size=LONG_PIECE + 1, max_size=600).map(str.encode))
def test_long_piece_path_equals_reference(merges, data):
    # Pieces longer than LONG_PIECE take the heap path; it must agree with the plain scan.
    assert PieceEncoder(merges)._encode_long(data) == reference.encode_bytes(data, merges)


@PROPERTY
@given(merges=merge_lists, data=st.binary(max_size=300))
def test_any_bytes_round_trip(merges, data):
    tok = Tokenizer(merges, special_tokens=["<|endoftext|>"])
    ids = tok.encode(data)
    assert tok.decode_bytes(ids) == data
    assert all(0 <= i < tok.vocab_size - 1 for i in ids)  # ordinary input never yields a special


@PROPERTY
@given(merges=merge_lists, text=st.text(max_size=200))
def test_text_round_trip_and_pieces_never_crossed(merges, text):
    tok = Tokenizer(merges)
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    # Encoding the whole equals encoding each piece: merges never cross pieces.
    pieces = PreTokenizer("gpt2").pieces(text)
    assert ids == [i for piece in pieces for i in reference.encode_bytes(piece, merges)]


# Characters of 1, 2, 3 and 4 bytes; merges over their bytes form inside
# characters and across them, including merges that join part of a character
# to its neighbour (" " + the lead byte of "Ж", as byte-level training learns).
MIXED_CHARS = "a bé Жо中文😀"
MIXED_BYTES = bytes(sorted(set(MIXED_CHARS.encode())))

mixed_merge_lists = st.builds(random_merges, st.randoms(use_true_random=False), st.just(MIXED_BYTES), st.integers(0, 80))


@PROPERTY
@given(merges=mixed_merge_lists, text=st.text(st.sampled_from(MIXED_CHARS), max_size=80))
def test_valid_utf8_mixing_scripts_equals_reference(merges, text):
    tok = Tokenizer(merges)
    ids = tok.encode(text)
    assert isinstance(ids, list)
    pieces = PreTokenizer("gpt2").pieces(text)
    assert ids == [i for piece in pieces for i in reference.encode_bytes(piece, merges)]
    # Twice: the second time every piece comes from the cache.
    assert tok.encode(text) == ids
    assert PieceEncoder(merges).encode_bytes(text.encode()) == reference.encode_bytes(text, merges)


@functools.lru_cache(maxsize=None)
def trained_on_real_text() -> Tokenizer:
    """1000 merges learned from code and man pages in several scripts."""
    pre = PreTokenizer("gpt2")
    counts: Counter = Counter()
    for doc in multilingual(1):
        counts.update(pre.pieces(doc))
    return bpe.train(counts, vocab_size=256 + 1000, pattern="gpt2", progress=False)


@functools.lru_cache(maxsize=None)
def real_words() -> list[str]:
    """Pieces of real text the tokenizer was not trained on."""
    return sorted(set(PreTokenizer("gpt2").split(" ".join(multilingual(1, start=5)))))


@PROPERTY
@given(words=st.lists(st.integers(0, 10**9), max_size=20), noise=st.text(st.sampled_from(MIXED_CHARS), max_size=20))
def test_trained_tokenizer_equals_reference(words, noise):
    tok = trained_on_real_text()
    vocab = real_words()
    text = "".join(vocab[w % len(vocab)] for w in words) + noise
    expected = [i for piece in PreTokenizer("gpt2").pieces(text) for i in reference.encode_bytes(piece, tok.merges)]
    assert tok.encode(text) == expected
    assert tok.encode(text.encode()) == expected  # bytes take the same path


def test_trained_tokenizer_on_held_out_text():
    tok = trained_on_real_text()
    pieces = real_words()[::7]  # about 650 pieces, half of them not ASCII
    enc = PieceEncoder(tok.merges)
    for piece in pieces:
        data = piece.encode("utf-8", "surrogatepass")
        assert enc.encode_bytes(data) == reference.encode_bytes(data, tok.merges), piece


def test_a_merge_joining_part_of_a_character_is_honoured():
    # "a" + the lead byte of "Ж" merges first, before "Ж" is complete. Encoding
    # "aЖ" from its characters ("a", then "Ж" as one token) would miss that.
    lead, cont = "Ж".encode()
    merges = [(ord("a"), lead), (lead, cont), (256, cont)]  # 256 = a+0xD0, 257 = Ж, 258 = aЖ
    tok = Tokenizer(merges)
    assert reference.encode_bytes("aЖ", merges) == [258]
    assert tok.encode("aЖ") == [258]
    assert tok.encode("Ж aЖ aЖ") == [257, 32, 258, 32, 258]  # the cached path agrees
    assert tok.encode("aЖ".encode()) == [258]


def test_merges_at_the_ends_and_tiny_pieces():
    # The first and the last pair of a piece (the rank list's edges) and pieces
    # too short to have a pair.
    merges = [(97, 98), (256, 97), (98, 98), (258, 258), (257, 256)]
    enc = PieceEncoder(merges)
    for data in [b"", b"a", b"b", b"ab", b"ba", b"aba", b"abab", b"bbab", b"abb", b"bb" * 5, b"abaab"]:
        assert enc.encode_bytes(data) == reference.encode_bytes(data, merges), data


def test_token_bytes_need_not_encode_to_the_token():
    # Merge order decides: b+c comes first, so "abc" never reaches a+b, ab+c.
    tok = Tokenizer([(98, 99), (97, 98), (257, 99)])
    assert tok.token_bytes(258) == b"abc"
    assert tok.encode("abc") == reference.encode_bytes(b"abc", tok.merges) == [97, 256]
    assert tok.encode("abc abc") == [97, 256, 32, 97, 256]  # the cached path agrees


def test_lone_surrogates_in_str_are_kept_as_their_bytes():
    tok = Tokenizer([])
    text = "a\ud800b"
    assert tok.decode_bytes(tok.encode(text)) == text.encode("utf-8", "surrogatepass")


def test_special_tokens_are_text_unless_allowed():
    tok = Tokenizer([(ord("<"), ord("|"))], special_tokens=["<|endoftext|>", "<|end"])
    text = "hi<|endoftext|>there"
    eot = tok.special_tokens["<|endoftext|>"]
    assert eot not in tok.encode(text)
    assert tok.decode(tok.encode(text)) == text
    allowed = tok.encode(text, allowed_special="all")
    assert allowed.count(eot) == 1  # the longer special wins over its prefix "<|end"
    assert tok.decode(allowed) == text
    assert tok.encode(text, allowed_special=["<|end"]).count(tok.special_tokens["<|end"]) == 1
    with pytest.raises(ValueError, match="not special tokens"):
        tok.encode(text, allowed_special=["<|nope|>"])


def test_encode_and_encode_batch_refuse_what_is_not_text():
    tok = bpe.train({b"hello": 5, b"help": 4}, 262)
    with pytest.raises(TypeError, match="^encode takes str or bytes, got NoneType$"):
        tok.encode(None)
    with pytest.raises(TypeError, match="^encode takes str or bytes, got int$"):
        tok.encode(5, allowed_special="all")
    for batch in ("abc", b"abc"):  # one text, not a batch of one-character texts
        with pytest.raises(TypeError, match=f"^encode_batch takes an iterable of texts, not one {type(batch).__name__}"):
            tok.encode_batch(batch)
    with pytest.raises(TypeError, match="^encode_batch takes str or bytes texts, got NoneType at position 1$"):
        tok.encode_batch(["hello", None])
    assert tok.encode_batch(["hello", b"help", bytearray(b"he")]) == [tok.encode("hello"), tok.encode(b"help"),
                                                                       tok.encode(b"he")]


def test_cache_stays_bounded_on_unique_strings():
    tok = Tokenizer(random_merges(random.Random(0), b"abcdefgh", 50))
    tok._encoder = PieceEncoder(tok.merges, cache_size=1000)
    rng = random.Random(1)
    for _ in range(300):
        words = " ".join("".join(rng.choices("abcdefgh", k=rng.randint(3, 12))) for _ in range(50))
        assert tok.decode(tok.encode(words)) == words
        assert len(tok._encoder._cache) <= 1000


def test_megabyte_single_pieces_encode_exactly():
    """One letter repeated and CJK without spaces are single pieces of 1 MB; the heap
    path keeps them O(n log n). HF tokenizers (also heap-based) is the oracle."""
    tokenizers = pytest.importorskip("tokenizers")
    doubling = [(ord("a"), ord("a"))] + [(256 + i, 256 + i) for i in range(9)]  # a, aa, ..., a*1024
    cjk = "中文字符测试汉语"
    cjk_bytes = cjk.encode()
    merges = doubling + [(cjk_bytes[0], cjk_bytes[1])]
    tok = Tokenizer(merges)
    path = tok.save(str(__import__("tempfile").mkdtemp()))
    hf = tokenizers.Tokenizer.from_file(path)
    for text in ["a" * 1_000_000, (cjk * 50_000)[:333_334]]:
        ids = tok.encode(text)
        assert tok.decode(ids) == text
        assert ids == hf.encode(text).ids
    assert tok.encode("a" * 1_000_000).count(265) == 1_000_000 // 1024


# -- decoding -----------------------------------------------------------------


def multibyte_tokenizer():
    """Tokens that cut characters apart: the stream decoder's hard cases."""
    data = "é中😀".encode()
    merges = [(data[0], data[1]), (data[2], data[3]), (data[5], data[6]), (data[7], data[8])]
    return Tokenizer(merges, special_tokens=["<|endoftext|>"])


@PROPERTY
@given(ids=st.lists(st.integers(0, 260), max_size=60))
def test_stream_output_equals_one_shot_decode(ids):
    tok = multibyte_tokenizer()
    dec = tok.stream_decoder()
    pieces = [dec.step(i) for i in ids]
    out = "".join(pieces) + dec.flush()
    assert out == tok.decode_bytes(ids).decode("utf-8", "replace")
    # Nothing emitted so far ever ends in half a character: every prefix of the
    # output is a prefix of the final text, made only of whole characters.
    assert all("\ufffd" not in p or "\ufffd" in out for p in pieces)


@PROPERTY
@given(ids=st.lists(st.integers(0, 260), max_size=60), cut=st.integers(0, 60))
def test_feeding_many_ids_equals_stepping(ids, cut):
    tok = multibyte_tokenizer()
    stepped, fed = tok.stream_decoder(), tok.stream_decoder()
    expected = [stepped.step(i) for i in ids]
    # Two feeds split anywhere give exactly what the steps gave up to each split.
    assert fed.feed(ids[:cut]) == "".join(expected[:cut])
    assert fed.feed(ids[cut:]) == "".join(expected[cut:])
    assert fed.flush() == stepped.flush()


def test_strict_stream_raises_with_the_valid_bytes_before_the_error():
    tok = Tokenizer([])
    dec = tok.stream_decoder(errors="strict")
    assert dec.feed(list("ab".encode()) + [0xE4, 0xB8]) == "ab"  # an incomplete tail is held
    with pytest.raises(UnicodeDecodeError) as info:
        dec.feed([0xAD, ord("c"), 0xFF, ord("d")])
    assert info.value.object[: info.value.start] == "中c".encode()
    dec = tok.stream_decoder(errors="strict")
    with pytest.raises(UnicodeDecodeError) as info:
        dec.feed([ord("x"), 0xED, 0xA0])  # an encoded surrogate: invalid at once
    assert info.value.object[: info.value.start] == b"x"
    dec = tok.stream_decoder(errors="strict")
    assert dec.feed([0xE4]) == ""
    with pytest.raises(UnicodeDecodeError, match="unexpected end of data"):
        dec.flush()


def test_stream_holds_back_and_emits_replacement_as_soon_as_known():
    tok = Tokenizer([])
    dec = tok.stream_decoder()
    assert dec.step(0xE4) == ""  # first byte of a 3-byte character
    assert dec.step(0xB8) == ""
    assert dec.step(0xAD) == "中"
    assert dec.step(0xE4) == ""
    assert dec.step(ord("x")) == "\ufffdx"  # invalid as soon as the next byte is known
    assert dec.step(0xF0) == ""
    assert dec.flush() == "\ufffd"


def test_stream_prefill_and_skip_special():
    tok = Tokenizer([], special_tokens=["<|endoftext|>"])
    eot = tok.special_tokens["<|endoftext|>"]
    dec = tok.stream_decoder(skip_special_tokens=True)
    dec.prefill(list("ab".encode()) + [0xE4, 0xB8])
    assert dec.step(0xAD) == "中"  # completes the character the prompt began
    assert dec.step(eot) == ""
    plain = tok.stream_decoder()
    assert plain.step(eot) == "<|endoftext|>"


def test_decode_errors():
    tok = Tokenizer([(97, 98)])
    with pytest.raises(ValueError, match=r"token ID 300 is out of range.*257 tokens"):
        tok.decode([97, 300])
    with pytest.raises(ValueError, match=r"token ID -1 is out of range"):
        tok.decode_bytes([-1])
    with pytest.raises(ValueError, match="not an integer"):
        tok.decode(["7"])
    with pytest.raises(ValueError, match="out of range"):
        tok.stream_decoder().step(257)
    with pytest.raises(UnicodeDecodeError):
        tok.decode([0xFF], errors="strict")
    assert tok.decode([0xFF]) == "\ufffd"


def test_incremental_decoder_is_the_semantics_we_rely_on():
    # The stream decoder leans on this: Python's incremental decoder agrees with
    # the one-shot decoder byte by byte, including on invalid input.
    data = b"\xe4\xb8\xad\xe4\xb8x\xf0\x9f\x98\x80\xff\xc3"
    inc = codecs.getincrementaldecoder("utf-8")("replace")
    assert "".join(inc.decode(bytes([b])) for b in data) + inc.decode(b"", final=True) == data.decode(
        "utf-8", "replace"
    )
