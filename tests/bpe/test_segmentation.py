"""bpe.segmentation: greedy longest match and the fewest-tokens segmentation, against brute force."""

import functools

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from bpe.segmentation import Vocabulary
from tests.support.toy_tokenizers import train_small

BYTES = [bytes([b]) for b in range(256)]


def all_segmentations(data: bytes, tokens: set[bytes]):
    """Every way to spell data with the tokens (brute force)."""
    if not data:
        yield []
        return
    for end in range(1, len(data) + 1):
        if data[:end] in tokens:
            for rest in all_segmentations(data[end:], tokens):
                yield [data[:end], *rest]


def plain_greedy(data: bytes, tokens: set[bytes]) -> list[bytes]:
    out = []
    while data:
        token = max((t for t in tokens if data.startswith(t)), key=len)
        out.append(token)
        data = data[len(token):]
    return out


# Multi-byte tokens over a small alphabet, so that segmentations really differ.
extra_tokens = st.lists(st.binary(min_size=2, max_size=5).map(lambda b: bytes(97 + x % 3 for x in b)), max_size=12, unique=True)
texts = st.binary(max_size=10).map(lambda b: bytes(97 + x % 3 for x in b))


@settings(max_examples=300, deadline=None)
@given(extra_tokens, texts)
def test_fewest_is_the_minimum_over_all_segmentations(extra, data):
    vocabulary = Vocabulary([*BYTES, *extra])
    tokens = set(vocabulary.ids)
    fewest = vocabulary.fewest(data)
    assert b"".join(vocabulary_bytes(vocabulary, fewest)) == data
    assert len(fewest) == min(len(s) for s in all_segmentations(data, tokens))


@settings(max_examples=300, deadline=None)
@given(extra_tokens, texts)
def test_greedy_takes_the_longest_match_each_time(extra, data):
    vocabulary = Vocabulary([*BYTES, *extra])
    greedy = vocabulary_bytes(vocabulary, vocabulary.greedy(data))
    assert greedy == plain_greedy(data, set(vocabulary.ids))
    assert len(vocabulary.fewest(data)) <= len(greedy)


def vocabulary_bytes(vocabulary: Vocabulary, ids: list[int]) -> list[bytes]:
    by_id = {i: t for t, i in vocabulary.ids.items()}
    return [by_id[i] for i in ids]


def test_greedy_can_lose_to_the_fewest():
    # Greedy takes "abc" and is left with two single bytes; the fewest is a + bcde.
    vocabulary = Vocabulary([*BYTES, b"abc", b"cd", b"ab", b"bcde"])
    assert vocabulary_bytes(vocabulary, vocabulary.greedy(b"abcde")) == [b"abc", b"d", b"e"]
    assert vocabulary_bytes(vocabulary, vocabulary.fewest(b"abcde")) == [b"a", b"bcde"]


def test_ids_are_the_vocabulary_ids_and_duplicates_keep_the_lowest():
    vocabulary = Vocabulary([*BYTES, b"ab", b"ab"])
    assert vocabulary.fewest(b"ab") == [256]
    assert vocabulary.greedy(b"xab") == [ord("x"), 256]
    assert vocabulary.fewest(b"") == [] and vocabulary.greedy(b"") == []


def test_the_vocabulary_must_hold_every_single_byte():
    with pytest.raises(ValueError, match="every single byte must be a token.*255 are not"):
        Vocabulary([b"a"] * 256)


def test_byte_tokens_at_any_ids_and_gaps_between_ids():
    """A Hugging Face file's or a rank file's vocabulary: the bytes under other IDs, a gap."""
    permuted = {1000 + (b * 7) % 256: bytes([b]) for b in range(256)}
    vocabulary = Vocabulary({**permuted, 5: b"ab", 9000: b"abc", 12: b"cde"})
    by_bytes = {data: token_id for token_id, data in permuted.items()}
    assert vocabulary.greedy(b"abcdex") == [9000, by_bytes[b"d"], by_bytes[b"e"], by_bytes[b"x"]]
    assert vocabulary.fewest(b"abcdex") == [5, 12, by_bytes[b"x"]]
    greedy, fewest = vocabulary.counts([b"abcdex", b"abc", b"zz"])
    assert greedy.tolist() == [4, 1, 2] and fewest.tolist() == [3, 1, 2]


@functools.lru_cache(maxsize=1)
def _trained():
    with open(__file__, encoding="utf-8") as f:
        return train_small(f.read().splitlines(keepends=True) + ["Привет мир, 中文字符 e\u0301\n"] * 5, vocab_size=500)


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.sampled_from("abcdefr ntoiПрвет中文\u0301_(=)"), max_size=24))
def test_fewest_never_exceeds_bpe_on_any_piece(text):
    tok = _trained()
    vocabulary = Vocabulary([tok.token_bytes(i) for i in range(256 + len(tok.merges))])
    for piece in tok.pre_tokenizer.pieces(text):
        bpe = tok.encode(piece)
        fewest = vocabulary.fewest(piece)
        assert len(fewest) <= len(bpe)
        assert tok.decode_bytes(fewest) == piece == tok.decode_bytes(vocabulary.greedy(piece))


# -- Vocabulary.counts: the same counts for many pieces at once, with numpy ----------------------------

pieces_of = st.lists(texts.filter(bool), min_size=1, max_size=8)


@settings(max_examples=300, deadline=None)
@given(extra_tokens, pieces_of)
def test_counts_are_the_greedy_and_the_fewest_over_all_segmentations(extra, pieces):
    vocabulary = Vocabulary([*BYTES, *extra])
    tokens = set(vocabulary.ids)
    greedy, fewest = vocabulary.counts(pieces)
    assert greedy.tolist() == [len(plain_greedy(p, tokens)) for p in pieces]
    assert fewest.tolist() == [min(len(s) for s in all_segmentations(p, tokens)) for p in pieces]


@pytest.mark.parametrize("dense_nodes", [1, 1 << 14], ids=["root-only-in-the-table", "shallow-levels-in-the-table"])
def test_counts_equal_the_plain_segmentations_on_a_trained_vocabulary(monkeypatch, dense_nodes):
    from bpe.segmentation import Trie

    monkeypatch.setattr(Trie, "DENSE_NODES", dense_nodes)  # every lookup path of Trie.matches
    tok = _trained()
    vocabulary = Vocabulary([tok.token_bytes(i) for i in range(256 + len(tok.merges))])
    with open(__file__, "rb") as f:
        source = f.read()
    pieces = [p for p in tok.pre_tokenizer.pieces(source + "Привет мир, 中文字符 e\u0301 \xff\xfe".encode("utf-8", "surrogateescape"))]
    pieces += [b"=" * 300, b" " * 77, source[:2000]]  # long pieces: many rounds of each walk
    greedy, fewest = vocabulary.counts(pieces)
    assert greedy.tolist() == [len(vocabulary.greedy(p)) for p in pieces]
    assert fewest.tolist() == [len(vocabulary.fewest(p)) for p in pieces]
    assert (fewest <= greedy).all() and (fewest < greedy).any()


def test_counts_of_no_pieces_and_refusal_of_an_empty_one():
    vocabulary = Vocabulary([*BYTES, b"ab"])
    greedy, fewest = vocabulary.counts([])
    assert greedy.tolist() == [] == fewest.tolist()
    with pytest.raises(ValueError, match="never empty"):
        vocabulary.counts([b"ab", b""])


def test_the_trie_keeps_the_lowest_id_of_equal_tokens():
    from bpe.segmentation import Trie

    vocabulary = Vocabulary([*BYTES, b"ab", b"ab", b"abc"])
    trie = Trie(vocabulary.ids)
    data = np.frombuffer(b"abc", dtype=np.uint8)
    found = [(s.tolist(), e.tolist(), i.tolist()) for s, e, i in trie.matches(data, np.full(3, 3), np.arange(3))]
    assert found[0] == ([0, 1, 2], [1, 2, 3], [ord("a"), ord("b"), ord("c")])
    assert found[1] == ([0], [2], [256]) and found[2] == ([0], [3], [258])
