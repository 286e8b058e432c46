"""Training on tables by source: exact weights and parity-aware merges.

Weighted training equals ordinary training on the weighted sum (a weight of 3 is
three copies); parity-aware training, plain or hybrid (``global_merges``), equals
``bpe.reference.train_parity`` with the C loop and with its pure-Python twin,
resumed or not.
"""

from collections import Counter
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bpe
from bpe import reference
from bpe.decoder import vocabulary_bytes
from bpe.reference import TIE_BREAKS
from bpe.training import trainer
from bpe.training.parity_loop import ParityMergeLoop
from bpe.training.sources import load_sources, parse_weight, scale_of, weighted_table
from bpe.training.trainer import train_merges
from tests.bpe.training.test_merge_loop import both_loops, pure_python, tables

WEIGHTS = st.sampled_from([1, 2, 3, "0.5", "1.25", "0.001", "2.5", 7])


@st.composite
def source_tables(draw):
    names = draw(st.lists(st.sampled_from(["en", "de", "ja", "sw", "code"]), min_size=1, max_size=4, unique=True))
    return {name: draw(tables()) for name in names}


@st.composite
def source_weights(draw, table):
    return {name: draw(WEIGHTS) for name in table if draw(st.booleans())}


@settings(max_examples=400, deadline=None)
@given(data=st.data(), num_merges=st.integers(0, 30), min_frequency=st.integers(1, 3),
       tie_break=st.sampled_from(TIE_BREAKS))
def test_parity_in_both_loops_equals_the_reference(data, num_merges, min_frequency, tie_break):
    table = data.draw(source_tables())
    weights = data.draw(source_weights(table))
    expected = reference.train_parity(table, num_merges, min_frequency, tie_break, weights)
    compiled, python = both_loops(table, num_merges, min_frequency, tie_break=tie_break, weights=weights, parity=True)
    assert compiled == expected
    assert python == expected


@settings(max_examples=150, deadline=None)
@given(data=st.data(), num_merges=st.integers(0, 30), k=st.integers(0, 35), tie_break=st.sampled_from(TIE_BREAKS))
def test_parity_resumes_to_the_reference(data, num_merges, k, tie_break):
    table = data.draw(source_tables())
    expected = reference.train_parity(table, num_merges, 1, tie_break)
    checkpoint = train_merges(table, k, 1, progress=False, tie_break=tie_break, parity=True)
    resumed = both_loops(table, num_merges, 1, resume_from=checkpoint, tie_break=tie_break, parity=True)
    assert resumed == (expected, expected)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), num_merges=st.integers(0, 30), global_merges=st.integers(0, 35),
       min_frequency=st.integers(1, 3), tie_break=st.sampled_from(TIE_BREAKS))
def test_hybrid_parity_in_both_loops_equals_the_reference(data, num_merges, global_merges, min_frequency, tie_break):
    table = data.draw(source_tables())
    weights = data.draw(source_weights(table))
    expected = reference.train_parity(table, num_merges, min_frequency, tie_break, weights, global_merges)
    compiled, python = both_loops(table, num_merges, min_frequency, tie_break=tie_break, weights=weights,
                                  parity=True, global_merges=global_merges)
    assert compiled == python == expected
    # Its first merges are plain training's on the weighted sum of the sources.
    first = min(global_merges, num_merges)
    plain = train_merges(table, first, min_frequency, progress=False, tie_break=tie_break, weights=weights)
    assert expected[:first] == plain


@settings(max_examples=100, deadline=None)
@given(data=st.data(), num_merges=st.integers(0, 30), global_merges=st.integers(0, 30), k=st.integers(0, 35))
def test_hybrid_parity_resumes_to_the_reference(data, num_merges, global_merges, k):
    table = data.draw(source_tables())
    expected = reference.train_parity(table, num_merges, 1, global_merges=global_merges)
    checkpoint = train_merges(table, k, 1, progress=False, parity=True, global_merges=global_merges)
    resumed = both_loops(table, num_merges, 1, resume_from=checkpoint, parity=True, global_merges=global_merges)
    assert resumed == (expected, expected)


def test_global_merges_needs_parity_and_a_count():
    table = {"en": {b"abab": 3}}
    with pytest.raises(ValueError, match="needs parity=True"):
        train_merges(table, 3, weights={}, global_merges=2)
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="at least 0"):
            train_merges(table, 3, parity=True, global_merges=bad)


@settings(max_examples=300, deadline=None)
@given(data=st.data(), num_merges=st.integers(0, 30), min_frequency=st.integers(1, 4),
       tie_break=st.sampled_from(TIE_BREAKS))
def test_a_whole_weight_gives_the_merges_of_that_many_copies(data, num_merges, min_frequency, tie_break):
    table = data.draw(source_tables())
    weights = {name: data.draw(st.integers(1, 4)) for name in table}
    copies = Counter()
    for name, counts in table.items():
        for _ in range(weights[name]):  # the source's text listed weight times
            for word, count in counts.items():
                copies[reference.piece_bytes(word)] += count
    expected = reference.train_bytes(copies, num_merges, min_frequency, tie_break)
    assert weighted_table(table, weights)[0] == {w: c for w, c in copies.items() if c > 0 and w}
    assert both_loops(table, num_merges, min_frequency, tie_break=tie_break, weights=weights) == (expected, expected)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), num_merges=st.integers(0, 30), min_frequency=st.integers(1, 4))
def test_decimal_weights_are_exact(data, num_merges, min_frequency):
    # The definition: every count times its weight, as a fraction; min_frequency on those.
    table = data.draw(source_tables())
    weights = data.draw(source_weights(table))
    scale = scale_of([parse_weight(weights.get(name, 1)) for name in table])
    scaled = Counter()
    for name, counts in table.items():
        for word, count in counts.items():
            exact = count * Fraction(str(weights.get(name, 1))) * scale
            assert exact.denominator == 1
            scaled[reference.piece_bytes(word)] += int(exact)
    expected = reference.train_bytes(scaled, num_merges, min_frequency * scale)
    assert both_loops(table, num_merges, min_frequency, weights=weights) == (expected, expected)


def test_min_frequency_applies_to_the_weighted_counts():
    # "ab" occurs once; weighted by 1.5 it counts 1.5: below 2, as three halves of a pair are.
    assert train_merges({"x": {b"ab": 1}}, 5, 2, weights={"x": "1.5"}, progress=False) == []
    assert train_merges({"x": {b"ab": 2}}, 5, 2, weights={"x": "1.5"}, progress=False) == [(97, 98)]
    assert train_merges({"x": {b"ab": 3}}, 5, 2, weights={"x": "0.5"}, progress=False) == []
    assert train_merges({"x": {b"ab": 4}}, 5, 2, weights={"x": "0.5"}, progress=False) == [(97, 98)]


@pytest.mark.parametrize("weight, problem", [
    ("0", "positive"), ("-1", "positive"), ("abc", "not a number"), ("1.0005", "three decimal places"),
    ("nan", "positive"), ("inf", "positive"), (True, "not a number"), ("2000000", "largest weight"),
])
def test_bad_weights_are_refused(weight, problem):
    with pytest.raises(ValueError, match=problem):
        parse_weight(weight)


def test_weights_are_held_in_thousandths():
    assert [parse_weight(w) for w in (1, "0.5", "1.25", "0.001", 3, "2.500")] == [1000, 500, 1250, 1, 3000, 2500]
    assert scale_of([1000, 3000]) == 1 and scale_of([500, 1000]) == 2 and scale_of([1, 1000]) == 1000


def test_weights_need_a_table_by_source_and_name_its_sources():
    with pytest.raises(ValueError, match="table by source"):
        train_merges({b"ab": 3}, 5, weights={"x": 2})
    with pytest.raises(ValueError, match="table by source"):
        train_merges({b"ab": 3}, 5, parity=True)
    with pytest.raises(ValueError, match="'y'"):
        train_merges({"x": {b"ab": 3}}, 5, weights={"y": 2})


def test_a_table_by_source_keeps_one_byte_pieces_for_the_compression():
    table = load_sources({"a": {b"x": 4, b"yz": 1}, "b": {"é": 2}}, {"b": "0.5"})
    assert table.names == ["a", "b"] and table.scale == 2
    assert list(zip(table.words, table.sources, table.counts)) == [(b"x", 0, 8), (b"yz", 0, 2), ("é".encode(), 1, 2)]
    assert table.source_bytes == [12, 4]


@pytest.fixture(scope="module")
def languages():
    from bpe.pretokenize import PreTokenizer
    from tests.support.real_text import man_pages, stdlib_sources

    pretokenizer = PreTokenizer("gpt2")
    table = {"code": Counter()}
    for doc in stdlib_sources(6):
        table["code"].update(pretokenizer.pieces(doc))
    for language, docs in man_pages(3).items():
        table[language] = Counter()
        for doc in docs:
            table[language].update(pretokenizer.pieces(doc))
    return table


@pytest.mark.parametrize("tie_break", TIE_BREAKS)
def test_both_loops_agree_on_parity_over_real_languages(languages, tie_break):
    compiled, python = both_loops(languages, 3000, 2, tie_break=tie_break, parity=True)
    assert len(compiled) > 1000
    assert compiled == python
    assert compiled != train_merges(languages, 3000, 2, progress=False, tie_break=tie_break, weights={})


def test_the_compiled_loop_runs_parity_and_equals_the_reference(languages):
    if trainer._merges is None:
        pytest.skip("the C loop is not built")
    small = {name: dict(Counter(counts).most_common(150)) for name, counts in languages.items()}
    table = load_sources(small)
    loop = trainer._new_loop(table.words, table.counts, vocabulary_bytes(), 2, "bytes",
                             (table.sources, table.source_bytes))
    assert isinstance(loop, trainer._merges.MergeLoop)
    with pure_python():
        assert isinstance(trainer._new_loop(table.words, table.counts, vocabulary_bytes(), 2, "bytes",
                                            (table.sources, table.source_bytes)), ParityMergeLoop)
    assert train_merges(small, 120, parity=True, progress=False) == reference.train_parity(small, 120)


def test_parity_evens_out_the_compression_of_the_sources(languages):
    def bytes_per_token(merges):
        tok = bpe.Tokenizer(merges)
        ratios = {}
        for name, counts in languages.items():
            pieces = [(piece, count) for piece, count in counts.items()]
            tokens = sum(len(tok.encode(piece)) * count for piece, count in pieces)
            ratios[name] = sum(len(piece) * count for piece, count in pieces) / tokens
        return ratios

    plain = bytes_per_token(train_merges(languages, 2000, progress=False, weights={}))
    parity = bytes_per_token(train_merges(languages, 2000, progress=False, parity=True))
    assert min(parity.values()) > min(plain.values())
    assert max(parity.values()) / min(parity.values()) < max(plain.values()) / min(plain.values())


def test_hybrid_parity_lies_between_plain_and_parity_aware_training(languages):
    plain = train_merges(languages, 2000, progress=False, weights={})
    parity = train_merges(languages, 2000, progress=False, parity=True)
    hybrid = train_merges(languages, 2000, progress=False, parity=True, global_merges=1000)
    assert hybrid[:1000] == plain[:1000]
    assert hybrid[1000:] != plain[1000:] and hybrid != parity
    assert train_merges(languages, 2000, progress=False, parity=True, global_merges=2000) == plain


def test_the_api_trains_a_tokenizer_by_source():
    table = {"en": {"hello": 10, " world": 5}, "de": {"hallo": 3, " welt": 8}}
    weighted = bpe.train(table, vocab_size=270, weights={"de": 2})
    assert weighted.merges == bpe.train({"hello": 10, " world": 5, "hallo": 6, " welt": 16}, vocab_size=270).merges
    parity = bpe.train(table, vocab_size=270, parity=True)
    assert parity.merges == reference.train_parity(table, 14)
    assert parity.decode(parity.encode("hallo welt")) == "hallo welt"
    hybrid = bpe.train(table, vocab_size=270, parity=True, global_merges=5)
    assert hybrid.merges == reference.train_parity(table, 14, global_merges=5)


def test_a_table_mixing_counts_and_sources_is_refused():
    with pytest.raises(ValueError, match="must map pieces to counts"):
        train_merges({"en": {b"ab": 2}, "de": 5}, 3)
    with pytest.raises(ValueError, match="not a non-negative integer"):
        train_merges({b"ab": 2, b"cd": {b"x": 1}}, 3)
