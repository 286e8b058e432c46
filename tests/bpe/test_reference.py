"""The reference algorithms reproduce the worked examples exactly."""

from collections import Counter

import pytest

from bpe.reference import encode_bytes, encode_word, train_bytes, train_words

SENNRICH = {"low": 5, "lower": 2, "newest": 6, "widest": 3}
LOW_LOWER = Counter("low low low low lower lower newest newest newest widest".split())


def test_train_words_first_tie_break():
    merges = train_words(SENNRICH, 6, tie_break="first")
    assert merges == [("e", "s"), ("es", "t"), ("est", "_"), ("l", "o"), ("lo", "w"), ("n", "e")]


def test_encode_word_after_first_tie_break():
    merges = train_words(SENNRICH, 6, tie_break="first")
    assert encode_word("lowest", merges) == ["low", "est_"]
    assert encode_word("newer", merges) == ["ne", "w", "e", "r", "_"]
    assert encode_word("wider", merges) == ["w", "i", "d", "e", "r", "_"]
    assert encode_word("slow", merges) == ["s", "low", "_"]


def test_train_words_max_tie_break():
    merges = train_words(LOW_LOWER, 6, tie_break="max")
    assert merges == [("o", "w"), ("l", "ow"), ("t", "_"), ("s", "t_"), ("low", "_"), ("e", "st_")]


def test_encode_word_after_max_tie_break():
    merges = train_words(LOW_LOWER, 6, tie_break="max")
    assert encode_word("lowest", merges) == ["low", "est_"]
    assert encode_word("slow", merges) == ["s", "low_"]
    assert encode_word("newer", merges) == ["n", "e", "w", "e", "r", "_"]


def test_train_words_without_end_of_word_marker():
    merges = train_words({"aaab": 3}, 5, end_of_word=None)
    # a a a b: (a,a) twice, (a,b) once; "aa a b" then (aa,a) and (a,b) tie at 3.
    assert merges[0] == ("a", "a")
    assert all("_" not in left + right for left, right in merges)
    assert encode_word("aaab", merges, end_of_word=None) == ["aaab"]


def test_train_words_rejects_unknown_tie_break():
    with pytest.raises(ValueError, match="tie_break"):
        train_words(SENNRICH, 1, tie_break="last")


def test_encode_bytes_with_list_of_merges():
    assert encode_bytes(b"slower", [(108, 111), (256, 119)]) == [115, 257, 101, 114]


def test_encode_bytes_with_mapping_in_order():
    assert encode_bytes(b"slower", {(108, 111): 256, (256, 119): 257}) == [115, 257, 101, 114]


def test_encode_bytes_with_mapping_applies_insertion_order():
    # (256, 119) comes first but 256 does not exist yet when it is tried.
    assert encode_bytes(b"slower", {(256, 119): 257, (108, 111): 256}) == [115, 256, 119, 101, 114]


def test_encode_bytes_merges_left_to_right_without_overlap():
    assert encode_bytes(b"aaa", [(97, 97)]) == [256, 97]
    assert encode_bytes("aaaa", [(97, 97), (256, 256)]) == [257]


def test_train_bytes_ties_go_to_greatest_byte_pair():
    # (a,b) and (c,d) both occur 3 times: (c,d) is greater.
    assert train_bytes({b"ab": 3, b"cd": 3}, 1) == [(99, 100)]
    # Left bytes decide first, as a tuple: (b"b", b"a") beats (b"a", b"z").
    assert train_bytes({"az": 2, "ba": 2}, 1) == [(98, 97)]


def test_train_bytes_prefix_sorts_before_its_extension():
    # Tokens "a" and "aa" both exist; pairs (aa, b) and (a, b) tie at count 2 ...
    merges = train_bytes({b"aa": 10, b"aab": 2, b"ab": 2}, 2)
    assert merges[0] == (97, 97)
    # ... (b"aa", b"b") > (b"a", b"b") because b"aa" > b"a".
    assert merges[1] == (256, 98)


def test_train_bytes_str_keys_are_utf8_and_add_up():
    assert train_bytes({"é": 1, "é".encode(): 1}, 1) == [(0xC3, 0xA9)]
    assert train_bytes({"é": 1}, 1) == []


def test_train_bytes_stops_below_min_frequency():
    table = {b"abc": 3, b"xy": 1}
    assert train_bytes(table, 10, min_frequency=2) == [(98, 99), (97, 256)]
    assert len(train_bytes(table, 10, min_frequency=1)) == 3
    assert train_bytes(table, 10, min_frequency=4) == []


def test_train_bytes_never_creates_a_duplicate_token():
    # Project decision: a pair whose concatenated bytes already exist as a token
    # is never chosen, so every token's bytes are unique (tokenizer.json and
    # tiktoken key tokens by their bytes). "abc" could be spelled (a, bc) or
    # (ab, c); here both b+c and a+b get merged, and "abc" must appear once.
    table = {b"bc": 10, b"ab": 9, b"abc": 5, b"xabc": 5, b"abcy": 5}
    merges = train_bytes(table, 10, min_frequency=1)
    token_bytes = [bytes([b]) for b in range(256)]
    for left, right in merges:
        token_bytes.append(token_bytes[left] + token_bytes[right])
    assert token_bytes.count(b"abc") == 1
    assert len(set(token_bytes)) == len(token_bytes)
    assert merges[:3] == [(98, 99), (97, 256), (97, 98)]


def test_train_bytes_recounts_overlapping_runs():
    # "aaaa" merges (a,a) into "AA", so (A,A) is the next pair (count 1 * 4).
    assert train_bytes({b"aaaa": 4}, 2) == [(97, 97), (256, 256)]
