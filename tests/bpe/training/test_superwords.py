"""Superword training (SuperBPE): the count-based trainer learns the whole-document
reference's merges, stage two's rules hold, and the tokenizer encodes as the reference."""

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from bpe.decoder import vocabulary_bytes
from bpe.pretokenize import PreTokenizer
from bpe.superwords import reference
from bpe.superwords.rules import STAGE_TWO_PATTERN, MAX_WORDS, is_superword, refused, word_count
from bpe.training.superwords import train_superwords, transition_problem
from tests.support.real_text import MULTILINGUAL_LINES, man_pages

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
