"""Piece-counting engines (bpe.piece_counter): every engine gives regex's pieces, exactly.

gigatoken's GPT-2 pre-tokenizer is checked against ``regex`` on every code point
of Unicode in many contexts (which also checks its Unicode tables against
``regex``'s: they differ only where its measured gaps say, and texts holding
those are left to regex), on fuzzed documents, real multilingual text, whitespace
runs and long repeats. Counts are compared whole: pieces and their numbers.
"""

from __future__ import annotations

import collections
import os

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from bpe.training import gigatoken_counts, piece_counter
from bpe.accelerators.unicode_guard import parse_ranges
from bpe.training.gigatoken_counts import GigatokenCounts, _without_notices
from bpe.training.piece_counter import PieceCounter, choose_engine
from bpe.pretokenize import PRESETS, PreTokenizer
from tests.support.real_text import multilingual
from tests.support.toy_tokenizers import plain_count

pytest.importorskip("gigatoken")
pytestmark = pytest.mark.skipif(
    gigatoken_counts.unusable("gpt2") is not None, reason=str(gigatoken_counts.unusable("gpt2"))
)

FAST_PATTERNS = ["gpt2", "hf-bytelevel"]
# Where gigatoken's counter gives other pieces than regex, for the installed versions.
GAP_RANGES = gigatoken_counts.gaps()[0] or ""
GAPS = frozenset(c for first, last in parse_ranges(GAP_RANGES) for c in range(first, last + 1))


def regex_count(documents, pattern="gpt2") -> dict[bytes, int]:
    return dict(plain_count(documents, pattern))


def contexts(c: str) -> str:
    """One document putting ``c`` next to every class the GPT-2 pattern tells apart:
    letters, digits, spaces before and after, punctuation, contractions, newlines,
    runs of itself, and the end of the text."""
    return f"a{c}b {c}1{c}{c} {c}'s\n{c}  {c}x{c}.\t{c}'{c}\r\n {c}"


@pytest.mark.parametrize("pattern", FAST_PATTERNS)
def test_every_code_point_in_contexts(pattern):
    """Raw gigatoken differs from regex only on its gaps' code points (its
    Unicode tables against regex's); the checked engine declines exactly the
    blocks holding one, and the counter's totals equal regex's everywhere."""
    findall = regex.compile(PRESETS[pattern]).findall
    engine = GigatokenCounts(pattern)
    counter = PieceCounter(pattern)
    from gigatoken.gigatoken_rs import pretokenized_counts

    differing = set()
    code_points = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]  # no UTF-8 for surrogates
    block = 512
    for start in range(0, len(code_points), block):
        chunk = code_points[start : start + block]
        texts = [contexts(chr(c)) for c in chunk]
        pieces = collections.Counter()
        for text in texts:
            pieces.update(findall(text))
        expected = {piece.encode("utf-8"): n for piece, n in pieces.items()}
        documents = [text.encode("utf-8") for text in texts]
        checked = engine.count(documents)  # gigatoken's own table whenever the checks pass
        if checked is not None:
            assert checked == expected, hex(chunk[0])
            assert not GAPS.intersection(chunk), hex(chunk[0])
            continue
        assert GAPS.intersection(chunk), hex(chunk[0])  # declined only for a code point it lacks
        assert counter.count(documents) == expected, hex(chunk[0])
        for c, text, document in zip(chunk, texts, documents):
            alone = dict(_without_notices(pretokenized_counts, document, b"\xff"))
            if alone != dict(collections.Counter(piece.encode("utf-8") for piece in findall(text))):
                differing.add(c)
    assert differing, "gigatoken's tables now match regex's: its gaps should be empty"
    assert differing <= GAPS, sorted(map(hex, differing - GAPS))[:20]


# Characters where pre-tokenizers disagree most, and raw bytes that are not UTF-8.
TRICKY = (
    "aZ éß" "ΩЖж" "中文かな한" "٣४" "0189" " \t\n\r\x0b\x0c\x85\xa0\u1680\u2000\u2028\u2029\u202f\u3000"
    "'sdmtlvre" "'S" "!?.,-_/\\\"" "\u0301\u0308" "\U0001f600\U0001f44d\u200d" "\x00\x7f"
    + "".join(chr(first) for first, _ in parse_ranges(GAP_RANGES)[:8])
)
documents_strategy = st.lists(
    st.one_of(
        st.text(st.sampled_from(TRICKY), max_size=60),
        st.text(st.characters(blacklist_categories=["Cs"]), max_size=30),
        st.text(st.sampled_from(TRICKY), max_size=30).map(lambda t: t.encode("utf-8")),
        st.binary(max_size=30),
        st.text(max_size=20),  # lone surrogates too
    ),
    max_size=15,
)


@settings(max_examples=400, deadline=None)
@given(documents=documents_strategy, pattern=st.sampled_from(FAST_PATTERNS))
def test_fuzzed_documents_count_like_regex(documents, pattern):
    assert PieceCounter(pattern).count(documents) == regex_count(documents, pattern)


@settings(max_examples=150, deadline=None)
@given(documents=documents_strategy, max_unique=st.integers(1, 30), call_bytes=st.integers(1, 200))
def test_tables_are_bounded_and_sum_to_the_count(documents, max_unique, call_bytes):
    counter = PieceCounter("gpt2")
    total = collections.Counter()
    for table in counter.tables(documents, max_unique, call_bytes):
        assert 0 < len(table) <= max_unique
        total.update(table)
    assert dict(total) == regex_count(documents)


def test_multilingual_text_counts_like_regex_without_falling_back():
    documents = [text.encode("utf-8") for text in multilingual(20)]
    assert sum(map(len, documents)) > 1_000_000
    counter = PieceCounter("gpt2")
    assert counter.engine == "gigatoken"
    expected = regex_count(documents)
    assert counter.count(documents) == expected
    assert counter.count(iter(documents)) == expected  # taken one document at a time
    assert counter.regex_documents == 0


@pytest.mark.parametrize("pattern", FAST_PATTERNS)
def test_whitespace_runs_long_repeats_and_document_edges(pattern):
    spaces = " \t\n\r\x0b\x0c\x85\xa0\u2028\u3000"
    documents = []
    for n in (1, 2, 3, 17, 1000):
        for s in spaces:
            for left, right in (("", ""), ("a", ""), ("", "b"), ("a", "b"), ("1", "!"), ("'", "s")):
                documents.append(f"{left}{s * n}{right}")
                documents.append(f"{left}{s * n} {right}")
                documents.append(f"{left} {s * n}\n{right}")
    documents += ["a" * 200_000, "ab " * 70_000, "1" * 10_000, "'s" * 5_000, "!!" * 5_000, " " * 100_000,
                  "\n" * 50_000 + "x", "x" + "\r\n" * 30_000, "", "", "  ", "'", "'ll've're"]
    data = [d.encode("utf-8") for d in documents]
    counter = PieceCounter(pattern)
    assert counter.count(data) == regex_count(data, pattern)
    assert counter.regex_documents == 0


def test_declined_documents_are_found_and_counted_by_regex():
    good = [f"word{i} and more text {i}\n".encode() for i in range(200)]
    bad = [b"caf\xc3", b"\xff\xfe raw", "gap \u0558 here".encode(), "\U0001df2b".encode()]
    documents = good[:70] + bad[:2] + good[70:150] + bad[2:] + good[150:]
    lone = "a lone \udc80 surrogate"
    counter = PieceCounter("gpt2")
    assert counter.count(documents + [lone]) == regex_count(documents + [lone])
    assert counter.regex_documents == len(bad) + 1


def test_documents_longer_than_a_call_go_to_regex_within_the_bound():
    document = " ".join(f"w{i}" for i in range(5000)).encode()
    counter = PieceCounter("gpt2")
    tables = list(counter.tables([b"short one", document], max_unique=1000, call_bytes=1000))
    assert counter.regex_documents == 1
    assert max(map(len, tables)) <= 1000
    assert dict(sum(map(collections.Counter, tables), collections.Counter())) == regex_count([b"short one", document])


def test_engine_choice():
    assert choose_engine("gpt2")[0] == "gigatoken"
    assert choose_engine("hf-bytelevel")[0] == "gigatoken"
    assert choose_engine(PRESETS["gpt2"])[0] == "gigatoken"
    for other in ("cl100k", "o200k", r"\w+|\s+"):
        name, why = choose_engine(other)
        assert name == "regex" and "GPT-2" in why
        with pytest.raises(ValueError, match="gigatoken cannot count"):
            choose_engine(other, "gigatoken")
    assert choose_engine("gpt2", "regex")[0] == "regex"
    with pytest.raises(ValueError, match="unknown piece-counting engine"):
        choose_engine("gpt2", "pcre")


def test_new_releases_are_measured_and_a_structural_difference_falls_back_to_regex(monkeypatch, tmp_path):
    """No release is refused for its number: a gigatoken release no table ships has its gaps
    measured, and gigatoken counts; one whose pieces differ where no code-point guard can
    hold the difference is left to regex, with the reason."""
    from bpe.accelerators import unicode_gaps

    real = unicode_gaps.metadata.version
    monkeypatch.setattr(unicode_gaps.metadata, "version", lambda d: "9.9.9" if d == "gigatoken" else real(d))
    monkeypatch.setenv("BEAM_BPE_CACHE_DIR", str(tmp_path / "first"))
    monkeypatch.setattr(unicode_gaps, "_measured", {})
    engine, why = choose_engine("gpt2")
    assert engine == "gigatoken", why
    assert PieceCounter("gpt2").count([b"hi there"]) == {b"hi": 1, b" there": 1}
    assert GigatokenCounts("gpt2").count([f"a{chr(0x558)}b".encode()]) is None  # a gap: declined

    counts = gigatoken_counts._unguarded_counts
    monkeypatch.setattr(gigatoken_counts, "_unguarded_counts", lambda text: counts(text.replace("\r\n", "\n\r")))
    monkeypatch.setenv("BEAM_BPE_CACHE_DIR", str(tmp_path / "second"))
    monkeypatch.setattr(unicode_gaps, "_measured", {})
    engine, why = choose_engine("gpt2")
    assert engine == "regex" and "gigatoken 9.9.9's piece counter with regex" in why
    assert "no code-point guard can hold" in why
    counter = PieceCounter("gpt2")
    assert counter.engine == "regex"
    assert counter.count([b"hi there"]) == {b"hi": 1, b" there": 1}


def test_gigatokens_notices_are_dropped_and_other_stderr_kept(capfd):
    counter = PieceCounter("gpt2")
    assert counter.count([b"hello world"]) == {b"hello": 1, b" world": 1}

    def noisy():
        os.write(2, b"Using 4 threads for pretokenization\nkeep me\nPretokenization took 1ms\n")
        return 7

    assert _without_notices(noisy) == 7
    assert capfd.readouterr().err == "keep me\n"


def test_counter_pickles_and_splits_like_the_pre_tokenizer():
    import pickle

    engine = pickle.loads(pickle.dumps(GigatokenCounts("gpt2")))
    text = "Hello world's  123 ünïcode!!\n\n  x"
    assert engine.count([text.encode()]) == dict(collections.Counter(PreTokenizer("gpt2").pieces(text)))
