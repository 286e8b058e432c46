"""Superword training (SuperBPE): the count-based trainer learns the whole-document
reference's merges, stage two's rules hold, and the tokenizer encodes as the reference."""

import functools
from collections import Counter

import pytest
import tokenizers
from hypothesis import given, settings
from hypothesis import strategies as st

import bpe
from bpe.decoder import vocabulary_bytes
from bpe.encoder import PieceEncoder
from bpe.pretokenize import PreTokenizer
from bpe.superwords import reference
from bpe.superwords.candidates import StageOneRuns, piece_runs
from bpe.superwords.rules import STAGE_TWO_PATTERN, MAX_WORDS, is_superword, refused, word_count
from bpe.training import extension
from bpe.training.superwords import extend_superwords, train_superwords, transition_problem
from tests.support.real_text import MULTILINGUAL_LINES, cl100k_rank_file, man_pages, stdlib_lines
from tests.support.toy_tokenizers import untrained_merges

# Few distinct words, so phrases repeat and stage two has pairs to merge; digits,
# punctuation runs, colons, line breaks and non-ASCII exercise the stage-two splits.
WORDS = ["the", "cat", "sat", "on", "a", "mat", "by", "way", "é", "Ж", "1", "42", ",", ".", "!!", ":", "\n", "  "]


@st.composite
def documents(draw):
    words = st.sampled_from(WORDS)
    spacers = st.sampled_from([" ", "", " "])
    docs = []
    for _ in range(draw(st.integers(1, 6))):
        parts = draw(st.lists(st.tuples(spacers, words), max_size=30))
        docs.append("".join(spacer + word for spacer, word in parts))
    return docs * draw(st.integers(1, 3))


def tables(docs, pattern):
    word_counts = Counter(piece for doc in docs for piece in PreTokenizer(pattern).pieces(doc))
    superword_counts = Counter(piece for doc in docs for piece in PreTokenizer(STAGE_TWO_PATTERN).pieces(doc))
    return word_counts, superword_counts


@settings(max_examples=200, deadline=None)
@given(docs=documents(), stage_one=st.integers(0, 30), stage_two=st.integers(0, 40),
       min_frequency=st.integers(1, 3), pattern=st.sampled_from(["gpt2", "o200k"]))
def test_matches_reference(docs, stage_one, stage_two, min_frequency, pattern):
    transition, vocab_size = 256 + stage_one, 256 + stage_one + stage_two
    expected = reference.train(docs, transition, vocab_size, pattern, min_frequency)
    tokenizer = train_superwords(*tables(docs, pattern), vocab_size, transition, pattern,
                                 min_frequency=min_frequency, progress=False)
    assert tokenizer.merges == expected
    for doc in docs[:3]:
        assert tokenizer.encode(doc) == reference.encode(doc, expected)
        assert tokenizer.decode_bytes(tokenizer.encode(doc)) == doc.encode()


@settings(max_examples=100, deadline=None)
@given(docs=documents())
def test_stage_two_keeps_its_rules(docs):
    tokenizer = train_superwords(*tables(docs, "gpt2"), 256 + 60, 256 + 20, progress=False)
    tokens = vocabulary_bytes(tokenizer.merges)
    assert len(set(tokens)) == len(tokens)
    assert not any(refused(token) for token in tokens[256 + 20:])


def test_rules():
    assert word_count(b" by the way") == 3 and is_superword(b" by the way") and not is_superword(b" the")
    assert refused(b"Note: the") and not refused(b"a: b".replace(b" ", b""))
    assert refused(b" a b c d e") and not refused(b" a b c d") and MAX_WORDS == 4
    assert PreTokenizer(STAGE_TWO_PATTERN).pieces("by the way, it costs 1234 $$ now  ok") == [
        b"by the way, it costs ", b"123", b"4", b" $$", b" now", b" ", b" ok"]


def test_transition_problems():
    assert transition_problem(1000, 800, 1) is None
    assert "between 256" in transition_problem(1000, 1000, 1)
    assert "between 256" in transition_problem(1000, 100, 0)


def test_real_multilingual_text_matches_reference():
    """Man pages in several scripts and the hand-written lines of many more."""
    docs = [text[:3000] for texts in man_pages(2).values() for text in texts] + list(MULTILINGUAL_LINES) * 2
    expected = reference.train(docs, 256 + 150, 256 + 250, "o200k")
    tokenizer = train_superwords(*tables(docs, "o200k"), 256 + 250, 256 + 150, "o200k", progress=False)
    assert tokenizer.merges == expected
    assert any(is_superword(token) for token in vocabulary_bytes(expected)[256 + 150:])


# --- Superwords added to an existing tokenizer -------------------------------------------------


def small_base(docs, merges, specials):
    """Ours, trained on ``docs``, with ``specials`` after its merges."""
    return bpe.train(Counter(p for doc in docs for p in PreTokenizer("gpt2").pieces(doc)), 256 + merges + len(specials),
                     special_tokens=specials)


def stage_two_counts(docs):
    return Counter(piece for doc in docs for piece in PreTokenizer(STAGE_TWO_PATTERN).pieces(doc))


def base_ids_of(base, text):
    """What the extension's expansion gives back: the base's merges over each stage-two piece."""
    return [i for piece in PreTokenizer(STAGE_TWO_PATTERN).pieces(text) for i in base.piece_encoder.encode_bytes(piece)]


@settings(max_examples=100, deadline=None)
@given(docs=documents(), base_merges=st.integers(0, 30), new=st.integers(0, 30), min_frequency=st.integers(1, 3),
       specials=st.sampled_from([[], ["<|e|>"]]))
def test_extension_matches_reference_and_keeps_every_base_id(docs, base_merges, new, min_frequency, specials):
    base = small_base(docs, base_merges, specials)
    extended = extend_superwords(base, stage_two_counts(docs), new, min_frequency, progress=False)
    first = base.vocab_size
    expected = reference.extend(docs, base.piece_encoder.encode_bytes, extension.spelled_bytes(base), base.pattern,
                                new, min_frequency)
    learned = extended.merges[len(extended.merges) - len(expected):] if expected else []
    assert learned == expected and extended.vocab_size == first + len(expected)
    assert extended.special_tokens == base.special_tokens
    for token_id, data in base.ordinary_tokens().items():
        assert extended.token_bytes(token_id) == data
    for doc in docs[:3]:
        ids = extended.encode(doc)
        assert extension.expand(ids, expected, first) == base_ids_of(base, doc)
        assert extended.decode_bytes(ids) == doc.encode()


def test_extending_cl100k_keeps_its_ids_and_hugging_face_agrees(tmp_path):
    rank_file = cl100k_rank_file()
    if rank_file is None:
        pytest.skip("tiktoken's cl100k rank file is not installed")
    base = bpe.Tokenizer.load(rank_file, preset="cl100k_base")
    docs = [line.decode() for line in stdlib_lines()[:2000]]
    extended = extend_superwords(base, stage_two_counts(docs), 60, progress=False)
    new = extended.merges[-60:]
    assert new == reference.extend(docs, base.piece_encoder.encode_bytes, extension.spelled_bytes(base),
                                   base.pattern, 60)
    assert extended.special_tokens == base.special_tokens
    assert any(is_superword(extended.token_bytes(base.vocab_size + i)) for i in range(60))
    hf = tokenizers.Tokenizer.from_file(extended.save(str(tmp_path)))
    changed = 0
    for text in [line.decode() for line in stdlib_lines()[-300:]] + list(MULTILINGUAL_LINES):
        ids = extended.encode(text)
        assert hf.encode(text, add_special_tokens=False).ids == ids
        expanded = extension.expand(ids, new, base.vocab_size)
        assert expanded == base_ids_of(base, text) and extended.decode(ids) == text
        changed += expanded != base.encode(text)
    # cl100k's merges cross its own piece boundaries on a few lines only (whitespace runs before a word).
    assert changed < 30


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 10**6), count=st.integers(0, 120), pattern=st.sampled_from(["gpt2", "o200k"]))
def test_stage_one_runs_equal_the_whole_piece_encoding(seed, count, pattern):
    """Random merges join tokens across pretoken boundaries (whitespace, apostrophes, punctuation):
    the per-pretoken runs must still be the whole piece's, by detecting those pieces."""
    import random

    rng = random.Random(seed)
    # A small alphabet: merges overlap, so joined pretokens meet further joins (clusters grow).
    merges = untrained_merges(rng, b" \n'ab.\xc3\xa9", count)
    fast = StageOneRuns(merges, pattern)
    token_length = [len(data) for data in vocabulary_bytes(merges)]
    slow = functools.partial(piece_runs, encode=PieceEncoder(merges).encode_bytes,
                             pretokenizer=PreTokenizer(pattern), token_length=token_length)
    for _ in range(5):
        text = "".join(rng.choice(" \n'ab.é") for _ in range(rng.randint(1, 30)))
        for piece in PreTokenizer(STAGE_TWO_PATTERN).pieces(text) + [text.encode()]:
            assert fast(piece) == slow(piece)
