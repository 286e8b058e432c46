"""Fuzzing: round trips, the stream decoder and pre-tokenization on hostile input.

Inputs are arbitrary bytes and Unicode from all planes, salted with the cases
that break tokenizers in practice: combining-mark stacks, RTL text with marks
and direction controls, emoji ZWJ sequences, flags and skin tones, lone
surrogates (from a caller's str and from invalid bytes), truncated multi-byte
sequences, NUL, control characters and CRLF.

The tokenizers under test are trained with ``bpe.train`` on a small real table
(stdlib code, man pages in several scripts, and the fragments above, invalid
bytes included), one per preset, so that real merges split characters apart.

``benchmarks/fuzz.py`` runs these same tests with many more examples: the
number of examples comes from ``BEAM_BPE_FUZZ_EXAMPLES`` when set (nightly),
else from the CI counts below (the whole module stays well under a minute).
"""

from __future__ import annotations

import functools
import os
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bpe
from bpe import reference
from bpe.encoder import PieceEncoder
from bpe.training.trainer import train_merges
from tests.support.real_text import multilingual
from tests.support.toy_tokenizers import untrained_merges

PRESETS = ("gpt2", "cl100k", "o200k")
EOT = "<|endoftext|>"


def fuzz_settings(ci_examples: int) -> settings:
    """CI example count, or the nightly one from the environment."""
    examples = int(os.environ.get("BEAM_BPE_FUZZ_EXAMPLES", ci_examples))
    return settings(
        max_examples=examples,
        deadline=None,
        # The trained tokenizers are built lazily on first use inside a test.
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


# -- inputs -------------------------------------------------------------------

# Text that tokenizers get wrong in practice. Each is a whole string (a sequence
# of code points that belong together), so the fuzzer can glue them to anything.
FRAGMENTS = [
    "e\u0301\u0302",  # e + acute + circumflex: a stack of combining marks
    "a\u0308\u0323\u0331",
    "\u0915\u094d\u0937\u093f",  # Devanagari conjunct with a vowel sign
    "שָׁלוֹם עוֹלָם",  # Hebrew with points
    "مَرْحَبًا بِالْعَالَم",  # Arabic with harakat
    "\u200f\u202eabc\u202c\u200e",  # RTL mark, right-to-left override, pop, LTR mark
    "\U0001F468\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466",  # family: ZWJ sequence
    "\U0001F3F3\ufe0f\u200d\U0001F308",  # rainbow flag: variation selector + ZWJ
    "\U0001F1EB\U0001F1F7\U0001F1EF\U0001F1F5",  # two regional-indicator flags
    "\U0001F44D\U0001F3FD",  # thumbs up + skin tone
    "\U0001F9D1\U0001F3FF\u200d\U0001F680",
    "\U0001D518\U0001D52B\U0001D526",  # mathematical fraktur (plane 1 letters)
    "\U0002070E\U00020731",  # CJK extension B (plane 2)
    "\U000E0001\U000E0068\U000E007F",  # tag characters (plane 14)
    "\U0010FFFF\U000FFFFD",  # private use planes
    "\ufeff\ufffd\ufffe",
    "\x00",
    "\r\n",
    "\n\n",
    "\t",
    "\x0b\x0c\x1b\x7f",
    "\x85\u2028\u2029",
    "\u00a0\u3000\u2009",
    "'s",
    "'LL",
    "n't",
    "1234567",
    "\u0661\u0662\u0663\u0664",  # Arabic-Indic digits
    "\u216b\u00bd",  # Roman numeral twelve, one half
    "中文字符测试",
    "日本語のテキスト",
    "한국어 문장",
    "Привет, мир",
    "İıŞğ ß ﬁ",
    " ",
    "   ",
    "hello",
    " world",
]

# Invalid UTF-8: encoded surrogates, bytes that never occur, overlong forms,
# truncated sequences, stray continuation bytes, code points above U+10FFFF.
BAD_BYTES = [
    b"\xed\xa0\x80",  # U+D800 as if it were encodable
    b"\xed\xbf\xbf",
    b"\xed\xa0\xbd\xed\xb8\x80",  # a surrogate pair, CESU-8 style
    b"\xff",
    b"\xfe\xff",
    b"\xc0\xaf",  # overlong "/"
    b"\xe0\x80\xaf",
    b"\xc3",  # truncated 2-byte
    b"\xe2\x82",  # truncated 3-byte
    b"\xf0\x9f\x98",  # truncated 4-byte
    b"\x80",
    b"\xbf\xbf",
    b"\xf4\x90\x80\x80",  # above U+10FFFF
    b"\xf8\x88\x80\x80\x80",  # old 5-byte form
]

# Any code point that is valid in UTF-8 (all planes; not the surrogates).
valid_chars = st.characters(exclude_categories=("Cs",))
astral_chars = st.characters(min_codepoint=0x10000, exclude_categories=("Cs",))
lone_surrogates = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)

texts = st.lists(
    st.sampled_from(FRAGMENTS) | st.text(valid_chars, max_size=8) | st.text(astral_chars, max_size=3),
    max_size=24,
).map("".join)

any_bytes = st.binary(max_size=120) | st.lists(
    st.sampled_from(BAD_BYTES) | texts.map(str.encode) | st.binary(max_size=4),
    max_size=16,
).map(b"".join)

# A str holding lone surrogates: typed by a caller, or what surrogateescape
# makes of invalid bytes (U+DC80..U+DCFF).
texts_with_surrogates = st.lists(
    texts | lone_surrogates | any_bytes.map(lambda b: b.decode("utf-8", "surrogateescape")),
    min_size=1,
    max_size=8,
).map("".join)

patterns = st.sampled_from(PRESETS)


# -- the tokenizers under test --------------------------------------------------


def training_documents() -> list[bytes]:
    """Real code and prose in several scripts, plus the fuzz fragments and bad bytes,
    so that merges form inside multi-byte characters and around invalid bytes."""
    docs = [doc.encode("utf-8") for doc in multilingual(2)]
    docs.append(" ".join(FRAGMENTS * 3).encode("utf-8"))
    docs.append(b" ".join(BAD_BYTES * 3))
    return docs


@functools.lru_cache(maxsize=None)
def trained(pattern: str) -> bpe.Tokenizer:
    """A tokenizer with a vocab of 600 (one special token) trained with ``pattern``."""
    pre = bpe.PreTokenizer(pattern)
    counts: Counter = Counter()
    for doc in training_documents():
        counts.update(pre.pieces(doc))
    tok = bpe.train(counts, vocab_size=600, pattern=pattern, special_tokens=[EOT], progress=False)
    assert tok.vocab_size == 600, "the table is too small for 343 merges"
    return tok


# -- encode/decode round trips --------------------------------------------------


@fuzz_settings(300)
@given(pattern=patterns, data=any_bytes)
def test_any_bytes_round_trip(pattern, data):
    tok = trained(pattern)
    ids = tok.encode(data)
    assert tok.decode_bytes(ids) == data
    assert tok.special_tokens[EOT] not in ids  # never produced unless allowed


@fuzz_settings(300)
@given(pattern=patterns, text=texts)
def test_text_round_trip(pattern, text):
    tok = trained(pattern)
    ids = tok.encode(text)
    assert tok.decode(ids, errors="strict") == text
    # str and its UTF-8 bytes are the same input.
    assert tok.encode(text.encode("utf-8")) == ids


@fuzz_settings(300)
@given(pattern=patterns, text=texts_with_surrogates)
def test_lone_surrogates_round_trip_as_their_surrogatepass_bytes(pattern, text):
    tok = trained(pattern)
    ids = tok.encode(text)
    assert tok.decode_bytes(ids) == text.encode("utf-8", "surrogatepass")


@fuzz_settings(300)
@given(pattern=patterns, data=any_bytes | texts_with_surrogates)
def test_encoder_equals_reference_per_piece(pattern, data):
    """The fast encoder (cache, scan and heap paths) is the replay-merges reference,
    piece by piece; and pieces never cross: the whole is the sum of its pieces."""
    tok = trained(pattern)
    pieces = tok.pre_tokenizer.pieces(data)
    expected = [i for piece in pieces for i in reference.encode_bytes(piece, tok.merges)]
    assert tok.encode(data) == expected
    # Twice: the second encode is served from the piece cache.
    assert tok.encode(data) == expected


# -- pre-tokenization -----------------------------------------------------------


@fuzz_settings(300)
@given(pattern=patterns, data=any_bytes | texts_with_surrogates)
def test_pieces_join_to_the_input(pattern, data):
    pieces = trained(pattern).pre_tokenizer.pieces(data)
    expected = data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass")
    assert b"".join(pieces) == expected
    assert all(pieces), "empty piece"


@fuzz_settings(300)
@given(pattern=patterns, text=texts)
def test_str_and_its_utf8_bytes_split_alike(pattern, text):
    pre = trained(pattern).pre_tokenizer
    assert pre.pieces(text) == pre.pieces(text.encode("utf-8"))


# -- the stream decoder ---------------------------------------------------------


def incomplete_tail(data: bytes) -> int:
    """How many trailing bytes begin a well-formed UTF-8 sequence without finishing it.

    Written from the Unicode standard's table of well-formed byte sequences
    (Table 3-7), independently of Python's codec: these are exactly the bytes a
    stream decoder must hold back; anything else is decidable now.
    """
    for back in (1, 2, 3):
        if back > len(data):
            return 0
        lead = data[-back]
        if 0x80 <= lead <= 0xBF:
            continue  # a continuation byte: the sequence starts further back
        if 0xC2 <= lead <= 0xDF:
            length, second = 2, (0x80, 0xBF)
        elif lead == 0xE0:
            length, second = 3, (0xA0, 0xBF)  # no overlong forms
        elif lead == 0xED:
            length, second = 3, (0x80, 0x9F)  # no surrogates
        elif 0xE1 <= lead <= 0xEF:
            length, second = 3, (0x80, 0xBF)
        elif lead == 0xF0:
            length, second = 4, (0x90, 0xBF)
        elif 0xF1 <= lead <= 0xF3:
            length, second = 4, (0x80, 0xBF)
        elif lead == 0xF4:
            length, second = 4, (0x80, 0x8F)  # nothing above U+10FFFF
        else:
            return 0  # ASCII or a byte that never starts a sequence
        if back >= length:
            return 0  # complete (or invalid): nothing to wait for
        if back >= 2 and not second[0] <= data[-back + 1] <= second[1]:
            return 0
        return back
    return 0


@st.composite
def id_sequences(draw):
    """(pattern, IDs): random valid IDs (byte tokens favoured: they split characters),
    or the IDs of random text or bytes, either possibly cut at both ends so the
    sequence starts and ends inside a character."""
    pattern = draw(patterns)
    tok = trained(pattern)
    if draw(st.booleans()):
        token = st.integers(0, tok.vocab_size - 1) | st.integers(0x80, 0xFF)
        ids = draw(st.lists(token, max_size=60))
    else:
        ids = tok.encode(draw(any_bytes | texts))
        if ids and draw(st.booleans()):
            start = draw(st.integers(0, len(ids)))
            end = draw(st.integers(start, len(ids)))
            ids = ids[start:end]
    return pattern, ids


@fuzz_settings(400)
@given(case=id_sequences())
def test_stream_emits_each_character_as_soon_as_it_is_decided(case):
    """After every step, the text emitted so far is exactly the one-shot decode of the
    bytes so far minus the incomplete tail (nothing early, nothing late); every chunk
    is whole characters (it encodes as strict UTF-8: no lone surrogates); at the
    end, chunks + flush are the one-shot decode of all the IDs."""
    pattern, ids = case
    tok = trained(pattern)
    dec = tok.stream_decoder()
    emitted = ""
    data = b""
    for token_id in ids:
        chunk = dec.step(token_id)
        chunk.encode("utf-8")  # raises on a lone surrogate, i.e. half a character
        emitted += chunk
        data += tok.token_bytes(token_id)
        assert emitted == data[: len(data) - incomplete_tail(data)].decode("utf-8", "replace")
    emitted += dec.flush()
    assert emitted == tok.decode_bytes(ids).decode("utf-8", "replace") == tok.decode(ids)


@fuzz_settings(400)
@given(case=id_sequences(), data=st.data())
def test_prefill_continues_like_a_decoder_that_emitted_the_prompt(case, data):
    """prefill(prompt) then steps + flush emit exactly the full decode minus what the
    prompt's complete part decodes to: a character the prompt began is finished
    by the first generated IDs, and nothing of the prompt is repeated."""
    pattern, ids = case
    tok = trained(pattern)
    cut = data.draw(st.integers(0, len(ids)), label="cut")
    prompt, generated = ids[:cut], ids[cut:]

    dec = tok.stream_decoder()
    dec.prefill(prompt)
    out = "".join(dec.step(i) for i in generated) + dec.flush()

    prompt_bytes = tok.decode_bytes(prompt)
    prompt_text = prompt_bytes[: len(prompt_bytes) - incomplete_tail(prompt_bytes)].decode("utf-8", "replace")
    full = tok.decode(ids)
    assert full.startswith(prompt_text)
    assert out == full[len(prompt_text) :]


# -- tiktoken -------------------------------------------------------------------
#
# Two ways tiktoken could differ from us, each checked separately so that a
# failure says which:
# - where pieces are cut: Python's ``regex`` module vs tiktoken's fancy-regex
#   (Rust regex Unicode tables, possibly another Unicode version);
# - how a piece is merged: tiktoken repeatedly joins the adjacent parts whose
#   *concatenated bytes* are the token of lowest rank; we replay the learned
#   *pairs* in order; and tiktoken maps a piece that is itself a token straight to
#   it. Both can differ from us on arbitrary merge lists (tests/bpe/test_peers.py has a
#   3-merge example); on trained tokenizers they must not, and the tiktoken
#   engine is used only where bpe/engines.py proves it.


def encode_by_rank_of_bytes(piece: bytes, ranks: dict[bytes, int]) -> list[int]:
    """tiktoken's merge rule, written plainly: a piece that is itself a token is
    that token (a shortcut tiktoken takes before merging: merges can build a
    token such as b"abbbbbb" that merging never reaches from its bytes); otherwise, while some adjacent parts join into a token, join
    the leftmost pair whose joined bytes have the lowest rank."""
    if piece in ranks:
        return [ranks[piece]]
    parts = [bytes([b]) for b in piece]
    while True:
        joins = [(ranks[a + b], i) for i, (a, b) in enumerate(zip(parts, parts[1:])) if a + b in ranks]
        if not joins:
            return [ranks[part] for part in parts]
        _, i = min(joins)
        parts[i : i + 2] = [parts[i] + parts[i + 1]]


def rank_table(tok: bpe.Tokenizer) -> dict[bytes, int]:
    return {tok.token_bytes(i): i for i in range(256 + len(tok.merges))}


@functools.lru_cache(maxsize=None)
def _tiktoken(pattern: str):
    return trained(pattern).to_tiktoken(), rank_table(trained(pattern))


@fuzz_settings(300)
@given(pattern=patterns, text=texts)
def test_tiktoken_gives_our_ids_on_valid_text(pattern, text):
    pytest.importorskip("tiktoken")
    tok = trained(pattern)
    enc, ranks = _tiktoken(pattern)
    by_rank_on_our_pieces = [i for piece in tok.pre_tokenizer.pieces(text) for i in encode_by_rank_of_bytes(piece, ranks)]
    assert enc.encode_ordinary(text) == by_rank_on_our_pieces, "regex difference: tiktoken cuts other pieces"
    assert tok.encode(text) == by_rank_on_our_pieces, "merge-order vs rank-of-bytes difference on a trained tokenizer"


@st.composite
def tie_heavy_tables(draw):
    """Small tables over 2-4 letter alphabets (some multi-byte) with few distinct
    counts: most pairs tie, so the tie-break decides most merges."""
    alphabet = draw(st.sampled_from([b"ab", b"abc", b"ab\xc3\xa9", "中文".encode(), b"a\xff\x00"]))
    word = st.lists(st.sampled_from(alphabet), min_size=0, max_size=10).map(bytes)
    counts = st.sampled_from([1, 2, 3]) if draw(st.booleans()) else st.integers(0, 30)
    return draw(st.dictionaries(word, counts, max_size=12)), alphabet


@fuzz_settings(200)
@given(case=tie_heavy_tables(), num_merges=st.integers(0, 30), min_frequency=st.integers(1, 3), data=st.data())
def test_trained_on_random_tables(case, num_merges, min_frequency, data):
    """The fast trainer is the recount-everything reference on tables full of ties;
    and on what it trains, tiktoken's rank-of-bytes rule gives our IDs."""
    table, alphabet = case
    merges = train_merges(table, num_merges, min_frequency=min_frequency, progress=False)
    assert merges == reference.train_bytes(table, num_merges, min_frequency=min_frequency)
    tok = bpe.Tokenizer(merges)
    ranks = rank_table(tok)
    piece = data.draw(st.lists(st.sampled_from(alphabet), max_size=40).map(bytes), label="piece")
    assert PieceEncoder(merges).encode_bytes(piece) == reference.encode_bytes(piece, merges)
    assert encode_by_rank_of_bytes(piece, ranks) == reference.encode_bytes(piece, merges)


@fuzz_settings(300)
@given(alphabet=st.sampled_from([b"ab", b"abc", "é中".encode()]), rng=st.randoms(use_true_random=False), data=st.data())
def test_arbitrary_merge_lists_fast_encoder_and_tiktoken_rule(alphabet, rng, data):
    """On arbitrary merge lists the fast encoder is still the reference, and tiktoken
    is still its own rule (rank of joined bytes); the two rules may differ here, which
    is why tiktoken is an oracle only for trained tokenizers."""
    tiktoken = pytest.importorskip("tiktoken")
    merges = untrained_merges(rng, alphabet, data.draw(st.integers(0, 40), label="merges"))
    # min_size=1: tiktoken's _encode_single_piece panics (Rust slice index) on b"".
    piece = data.draw(st.lists(st.sampled_from(alphabet), min_size=1, max_size=80).map(bytes), label="piece")
    assert PieceEncoder(merges).encode_bytes(piece) == reference.encode_bytes(piece, merges)
    ranks = rank_table(bpe.Tokenizer(merges))
    enc = tiktoken.Encoding("fuzz", pat_str=r"[\s\S]+", mergeable_ranks=ranks, special_tokens={})
    assert enc._encode_single_piece(piece) == encode_by_rank_of_bytes(piece, ranks)


def test_stream_decides_encoded_surrogate_lead_at_once():
    """Byte tokens ED, A0: per the Unicode table of well-formed sequences, ED may
    only be followed by 80..9F, so after A0 both bytes are decided and the stream
    emits two U+FFFD right away, as it does for 0xE0 0x80 (overlong). CPython's
    incremental decoder waits for a third byte there; the stream decoder does not,
    so a prompt ending in ED A0 keeps its two U+FFFD inside prefill instead of
    leaking them into the generated text."""
    tok = bpe.Tokenizer([])
    dec = tok.stream_decoder()
    assert dec.step(0xE0) == ""
    assert dec.step(0x80) == "\ufffd\ufffd"
    assert dec.step(0xED) == ""
    assert dec.step(0xA0) == "\ufffd\ufffd"
    dec = tok.stream_decoder()
    dec.prefill([0xED, 0xA0])
    assert dec.step(ord("x")) == "x"


def test_count_dict_cap_holds_inside_one_document():
    """The DoFn promises memory "bounded whatever the batch holds": a batch of one
    document with 5000 unique words and a cap of 1000 is emitted in flushes of at
    most 1000 pieces, because the DoFn counts big documents chunk by chunk."""
    from transforms.count import _CountBatchFn  # imports Beam: only here

    fn = _CountBatchFn("gpt2", max_batch_pieces=1000, num_partitions=1)
    fn.setup()
    # 5000 distinct three-letter words: one piece each (" abc").
    document = " ".join("".join(chr(97 + i // 26**k % 26) for k in range(3)) for i in range(5000))
    flushes = [counts for _, counts in fn.process([document])]  # one partition: one element per flush
    assert sum(sum(counts.values()) for counts in flushes) == 5000  # nothing lost
    assert max(len(counts) for counts in flushes) <= 1000
