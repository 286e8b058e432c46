"""The fast trainer gives exactly the reference's merges; train() validates its input."""

import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpe import reference
from bpe.training.trainer import train, train_merges


def spelled(merges):
    """The bytes of every token, by ID, for a list of merges."""
    token_bytes = [bytes([b]) for b in range(256)]
    for left, right in merges:
        token_bytes.append(token_bytes[left] + token_bytes[right])
    return token_bytes


# Small alphabets and a few repeated counts make ties (and runs like "aaaa") the norm.
ALPHABETS = [b"ab", b"abc", b"a", bytes([0, 255]), "é√".encode()]


@st.composite
def tables(draw):
    alphabet = draw(st.sampled_from(ALPHABETS))
    word = st.lists(st.sampled_from(alphabet), min_size=0, max_size=12).map(bytes)
    counts = st.sampled_from([0, 1, 2, 3, 5, 8]) if draw(st.booleans()) else st.integers(0, 50)
    return draw(st.dictionaries(word, counts, max_size=12))


@settings(max_examples=400, deadline=None)
@given(table=tables(), num_merges=st.integers(0, 30), min_frequency=st.integers(1, 3))
def test_matches_reference(table, num_merges, min_frequency):
    expected = reference.train_bytes(table, num_merges, min_frequency)
    assert train_merges(table, num_merges, min_frequency, progress=False) == expected


@settings(max_examples=150, deadline=None)
@given(table=tables(), num_merges=st.integers(0, 30), seed=st.integers(0, 2**32))
def test_independent_of_table_order(table, num_merges, seed):
    items = list(table.items())
    random.Random(seed).shuffle(items)
    assert train_merges(dict(items), num_merges, 1, progress=False) == train_merges(table, num_merges, 1, progress=False)


@settings(max_examples=150, deadline=None)
@given(table=tables(), num_merges=st.integers(0, 30))
def test_tokens_have_unique_bytes(table, num_merges):
    token_bytes = spelled(train_merges(table, num_merges, 1, progress=False))
    assert len(set(token_bytes)) == len(token_bytes)


def test_ties_go_to_greatest_byte_pair():
    assert train_merges({b"ab": 3, b"cd": 3}, 1) == [(99, 100)]
    # The left bytes decide first: (b"b", b"a") > (b"a", b"z").
    assert train_merges({b"az": 2, b"ba": 2}, 1) == [(98, 97)]
    # A prefix sorts before its extension: (b"aa", b"b") > (b"a", b"b").
    assert train_merges({b"aa": 10, b"aab": 2, b"ab": 2}, 2) == [(97, 97), (256, 98)]
    # Bytes >= 0x80 are greater than ASCII.
    assert train_merges({b"\xff\x00": 2, b"zz": 2}, 1) == [(255, 0)]


def test_worked_example_in_bytes():
    table = {"low": 5, "lower": 2, "newest": 6, "widest": 3}
    merges = train_merges(table, 10)
    assert merges == reference.train_bytes(table, 10)
    names = [b.decode() for b in spelled(merges)[256:]]
    # e+s and s+t tie at 9: (s, t) is greater; then o+w beats l+o at 7.
    assert names[:4] == ["st", "est", "ow", "low"]


def test_overlapping_runs():
    # "aaaaa" -> aa aa a -> (aa, aa) then (aaaa, a).
    assert train_merges({b"aaaaa": 3}, 3) == [(97, 97), (256, 256), (257, 97)]


def test_str_and_bytes_keys_add_up():
    # Separately each count is 1 (< min_frequency 2); together they reach 2.
    assert train_merges({"é": 1, "é".encode(): 1}, 1) == [(0xC3, 0xA9)]
    assert train_merges({"é": 1}, 1) == []


def test_stops_early_below_min_frequency():
    table = {b"abc": 3, b"xy": 1}
    assert train_merges(table, 10, min_frequency=2) == [(98, 99), (97, 256)]
    assert len(train_merges(table, 10, min_frequency=1)) == 3
    assert train_merges(table, 10, min_frequency=4) == []


def test_stops_when_no_pair_is_left():
    assert train_merges({b"ab": 5}, 10, min_frequency=1) == [(97, 98)]
    assert train_merges({}, 10) == []
    assert train_merges({b"a": 100, b"": 3}, 10) == []


def test_zero_counts_take_no_part():
    assert train_merges({b"ab": 0, b"cd": 2}, 5) == [(99, 100)]


def test_duplicate_bytes_rule_holds_on_a_larger_table():
    # Project decision: a pair whose bytes already exist as a token is never
    # chosen. Check it, and agreement with the reference, on a table with many
    # repeated letters (the runs where left-to-right merging is context-dependent).
    rng = random.Random(7)
    table = {bytes(rng.choice(b"aab") for _ in range(rng.randint(2, 14))): rng.randint(1, 6) for _ in range(60)}
    merges = train_merges(table, 60, min_frequency=1)
    assert merges == reference.train_bytes(table, 60, min_frequency=1)
    token_bytes = spelled(merges)
    assert len(set(token_bytes)) == len(token_bytes)


def test_negative_count_is_an_error():
    with pytest.raises(ValueError, match="negative count"):
        train_merges({b"ab": -1}, 1)


def test_progress_bar_can_be_forced(capsys):
    train_merges({b"abcabc": 3}, 3, progress=True)
    assert "merges" in capsys.readouterr().err
    train_merges({b"abcabc": 3}, 3, progress=False)
    assert capsys.readouterr().err == ""


# --- train(): validation, then the Tokenizer -----------------------------------


def test_train_rejects_vocab_smaller_than_bytes_and_specials():
    with pytest.raises(ValueError, match="vocab_size=256 is too small.*at least 257"):
        train({b"ab": 5}, 256, special_tokens=("<|endoftext|>",))
    with pytest.raises(ValueError, match="vocab_size=255 is too small"):
        train({b"ab": 5}, 255)


def test_train_rejects_non_integer_vocab_size():
    with pytest.raises(ValueError, match="vocab_size must be an integer"):
        train({b"ab": 5}, 300.0)


def test_train_rejects_duplicate_special_tokens():
    with pytest.raises(ValueError, match="duplicate special tokens: '<s>'"):
        train({b"ab": 5}, 300, special_tokens=("<s>", "</s>", "<s>"))


def test_train_rejects_empty_special_token():
    with pytest.raises(ValueError, match="non-empty"):
        train({b"ab": 5}, 300, special_tokens=("<s>", ""))


def test_train_rejects_negative_counts():
    with pytest.raises(ValueError, match="negative count -3"):
        train({b"ab": 5, b"cd": -3}, 300)


@pytest.mark.parametrize("key", [5, 3.0, None, (1, 2)])
def test_train_rejects_keys_that_are_not_pieces(key):
    # bytes(5) would be five NUL bytes: a number is no piece.
    message = f"word_counts keys must be bytes or str, got {type(key).__name__} {key!r}"
    with pytest.raises(TypeError, match=re.escape(message)):
        train({key: 3, b"ab": 5}, 300)


@pytest.mark.parametrize("count", [float("nan"), 2.5, 3.0, "7", None, True])
def test_train_rejects_counts_that_are_not_integers(count):
    with pytest.raises(ValueError, match=r"count .* for piece b'cd' is not a non-negative integer"):
        train({b"ab": 5, b"cd": count}, 300)


def test_train_takes_numpy_integer_counts():
    import numpy as np

    assert train({b"ab": np.int64(5), "cd": np.int32(3)}, 258).merges == train({b"ab": 5, "cd": 3}, 258).merges


# "he" and "hel" are ordinary tokens of the table below; " he" is too, and tokenizer.json
# names it "Ġhe"; byte 10 is named "Ċ". The rest are spelled by no ordinary token.
SPECIAL_CANDIDATES = ["he", "hel", "Ġhe", "h", "\n", "Ċ", " he", "<|endoftext|>", "hello!", "Ġ"]


@pytest.mark.parametrize("special", SPECIAL_CANDIDATES)
def test_special_tokens_are_refused_exactly_where_hf_would_give_another_id(special):
    import tokenizers

    from bpe import Tokenizer

    table = {b"hello": 10, b"help": 10, b" he": 10}
    merges = train(table, 262, pattern="gpt2").merges  # the same merges with or without specials
    hf = tokenizers.Tokenizer.from_str(Tokenizer(merges, special_tokens=[special]).to_json())
    hf_agrees = hf.token_to_id(special) == 256 + len(merges) and hf.get_vocab_size() == 257 + len(merges)
    if hf_agrees:
        tok = train(table, 263, special_tokens=[special])
        assert tok.special_tokens == {special: 262}
    else:
        with pytest.raises(ValueError, match=r"special token .* is spelled like the ordinary token \d+ "):
            train(table, 263, special_tokens=[special])
    assert hf_agrees == (special not in {"he", "hel", "Ġhe", "h", "Ċ", "Ġ"})


def test_train_rejects_invalid_pattern():
    with pytest.raises(ValueError, match="invalid pre-tokenizer"):
        train({b"ab": 5}, 300, pattern="(unclosed")


def test_train_builds_tokenizer_with_merges_and_specials():
    table = {"hello": 10, " world": 5, " hello": 3}
    tok = train(table, 256 + 5 + 1, special_tokens=("<|endoftext|>",), progress=False)
    assert list(tok.merges) == train_merges(table, 5)
    assert tok.vocab_size == 256 + 5 + 1


def test_matches_reference_on_real_text():
    # Real source code plus multilingual text (multi-byte UTF-8), pre-tokenized
    # as in the pipeline; 200 merges reach pairs of long tokens and many ties.
    import inspect
    import textwrap
    from collections import Counter

    from bpe.pretokenize import PreTokenizer

    text = inspect.getsource(textwrap) + "Ünïcödé текст на русском языке, 日本語のテキスト、中文文本。 " * 20
    table = Counter(PreTokenizer("gpt2").pieces(text))
    merges = train_merges(table, 200, progress=False)
    assert len(merges) == 200
    assert merges == reference.train_bytes(table, 200)


def test_garbage_collector_state_is_restored():
    import gc

    assert gc.isenabled()
    train_merges({b"abcabc": 3}, 3)
    assert gc.isenabled()
    gc.disable()
    try:
        train_merges({b"abcabc": 3}, 3)
        assert not gc.isenabled()
    finally:
        gc.enable()


# --- Resuming from a checkpoint ------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(table=tables(), num_merges=st.integers(0, 30), k=st.integers(0, 35), min_frequency=st.integers(1, 3))
def test_resumed_run_equals_uninterrupted_run(table, num_merges, k, min_frequency):
    expected = reference.train_bytes(table, num_merges, min_frequency)
    # The checkpoint may come from a shorter or a longer run than this one.
    checkpoint = train_merges(table, k, min_frequency, progress=False)
    resumed = train_merges(table, num_merges, min_frequency, progress=False, resume_from=checkpoint)
    assert resumed == expected


def test_resume_on_real_text_from_every_hundredth_merge():
    import inspect
    import textwrap
    from collections import Counter

    from bpe.pretokenize import PreTokenizer

    table = Counter(PreTokenizer("gpt2").pieces(inspect.getsource(textwrap) + "Ünïcödé текст 日本語 " * 20))
    full = train_merges(table, 600, progress=False)
    assert len(full) == 600
    for k in range(0, 601, 100):
        assert train_merges(table, 600, progress=False, resume_from=full[:k]) == full


def test_resume_accepts_lists_from_json():
    full = train_merges({b"abcabc": 3}, 3)
    assert train_merges({b"abcabc": 3}, 3, resume_from=[list(pair) for pair in full[:1]]) == full


@pytest.mark.parametrize(
    "resume_from, message",
    [
        ([(97, 256)], r"resume_from\[0\] = \(97, 256\) uses an ID that does not exist yet: merge 0 can only join IDs 0..255"),
        ([(97, 98), (257, 97)], r"resume_from\[1\] = \(257, 97\) uses an ID that does not exist yet"),
        ([(-1, 97)], "uses an ID that does not exist yet"),
        ([(97, 98), (97, 98)], r"resume_from\[1\] = \(97, 98\) spells b'ab', which an earlier token already spells"),
        # Another path to the same bytes: a + bc after ab + c.
        ([(97, 98), (98, 99), (256, 99), (97, 257)], r"resume_from\[3\] = \(97, 257\) spells b'abc'"),
        ([(97,)], r"resume_from\[0\] must be a pair of token IDs"),
        ([(97.0, 98)], "must be a pair of token IDs"),
        ([(True, 98)], "must be a pair of token IDs"),
        (["ab"], "must be a pair of token IDs"),
    ],
)
def test_resume_from_that_training_cannot_produce_is_rejected(resume_from, message):
    with pytest.raises(ValueError, match=message):
        train_merges({b"abcabc": 3}, 10, resume_from=resume_from)


def test_checkpoints_are_prefixes_of_the_result():
    rng = random.Random(3)
    table = {bytes(rng.choice(b"abcde") for _ in range(rng.randint(2, 12))): rng.randint(1, 9) for _ in range(400)}
    seen = []
    merges = train_merges(table, 300, min_frequency=1, checkpoint=seen.append, checkpoint_every=0)
    # checkpoint_every=0: at every look at the clock, then once at the end.
    assert len(seen) > 2 and seen[-1] == merges
    assert all(checkpoint == merges[: len(checkpoint)] for checkpoint in seen)
    assert [len(c) for c in seen] == sorted(len(c) for c in seen)
    # A checkpoint is a copy: the caller may keep it.
    assert seen[0] is not seen[-1] and seen[-1] is not merges


def test_no_checkpoint_before_checkpoint_every_seconds():
    seen = []
    merges = train_merges({b"abcdefgh" * 50: 3}, 200, checkpoint=seen.append, checkpoint_every=3600)
    assert seen == [merges]


def test_interrupted_training_checkpoints_then_reraises():
    table = {bytes([a, b, c]): 2 for a in range(97, 110) for b in range(97, 110) for c in range(97, 110)}
    seen = []

    def checkpoint(merges):
        seen.append(merges)
        if len(seen) == 2:
            raise KeyboardInterrupt  # as if Ctrl-C arrived while the loop was running

    with pytest.raises(KeyboardInterrupt):
        train_merges(table, 1000, checkpoint=checkpoint, checkpoint_every=0)
    # The periodic checkpoint that was interrupted, then the one on the way out.
    assert len(seen) == 3 and seen[2] == seen[1]
    assert train_merges(table, 1000, resume_from=seen[-1]) == train_merges(table, 1000)


def test_checkpoint_longer_than_the_run_gives_its_prefix():
    table = {"low": 5, "lower": 2, "newest": 6, "widest": 3}
    full = train_merges(table, 10)
    seen = []
    assert train_merges(table, 4, resume_from=full, checkpoint=seen.append) == full[:4]
    assert seen == [full[:4]]


def test_train_passes_resume_and_checkpoint_through():
    table = {"hello": 10, " world": 5, " hello": 3}
    full = train(table, 256 + 6, progress=False)
    seen = []
    resumed = train(table, 256 + 6, progress=False, resume_from=full.merges[:2], checkpoint=seen.append)
    assert list(resumed.merges) == list(full.merges) == seen[-1]
    assert resumed.to_json() == full.to_json()
