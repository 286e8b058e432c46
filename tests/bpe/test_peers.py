"""The peers as oracles: a tokenizer we train on real text gives the same IDs in
Hugging Face ``tokenizers``, ``transformers`` and ``tiktoken`` on held-out text."""

import json
from collections import Counter

import pytest

import bpe
from tests.support.real_text import man_pages, multilingual, stdlib_sources

tokenizers = pytest.importorskip("tokenizers")
tiktoken = pytest.importorskip("tiktoken")


@pytest.fixture(scope="module", params=["gpt2", "cl100k", "o200k"])
def trained(request, tmp_path_factory):
    pattern = request.param
    pre = bpe.PreTokenizer(pattern)
    counts = Counter()
    for doc in multilingual(6):
        counts.update(pre.pieces(doc))
    tok = bpe.train(counts, vocab_size=1500, pattern=pattern, special_tokens=["<|endoftext|>"], progress=False)
    assert len(tok.merges) == 1500 - 256 - 1
    path = tok.save(str(tmp_path_factory.mktemp(pattern)))
    return tok, path


def held_out() -> list[str]:
    docs = stdlib_sources(4, start=50)
    for pages in man_pages(2, start=20).values():
        docs.extend(pages)
    return docs


def test_tokenizers_and_transformers_give_our_ids(trained):
    tok, path = trained
    hf = tokenizers.Tokenizer.from_file(path)
    transformers = pytest.importorskip("transformers")
    fast = transformers.PreTrainedTokenizerFast(tokenizer_file=path)
    for doc in held_out():
        text = doc
        ours = tok.encode(text)
        assert hf.encode(text).ids == ours
        assert fast(text)["input_ids"] == ours
        assert hf.decode(ours) == text


def test_tiktoken_gives_our_ids(trained):
    tok, _ = trained
    enc = tok.to_tiktoken()
    for doc in held_out():
        assert enc.encode_ordinary(doc) == tok.encode(doc)
        assert enc.decode_bytes(tok.encode(doc)) == doc.encode()
    assert enc.encode("<|endoftext|>", allowed_special="all") == [tok.special_tokens["<|endoftext|>"]]


def test_possessive_interval_is_written_for_oniguruma(trained, tmp_path):
    """The one disagreement between the regex engines, and how the file format avoids it.

    cl100k's ``\\p{N}{1,3}+`` is possessive in Python's regex and in tiktoken, so
    "10000" splits into "100", "00". Oniguruma (HF's regex engine) reads ``{1,3}+``
    as "1 to 3 digits, one or more times" and takes the whole run. Our tokenizer.json
    therefore spells it ``(?>\\p{N}{1,3})``, which every engine reads alike; loading
    the file gives back tiktoken's own pattern string."""
    tok, path = trained
    text = "in 10000 years"
    hf = tokenizers.Tokenizer.from_file(path)
    assert hf.encode(text).ids == tok.encode(text)
    assert bpe.Tokenizer.load(path).pattern == tok.pattern
    if tok.pattern != bpe.PRESETS["cl100k"]:
        return
    literal = json.load(open(path))
    literal["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = tok.pattern
    (tmp_path / "literal.json").write_text(json.dumps(literal))
    naive = tokenizers.Tokenizer.from_file(str(tmp_path / "literal.json"))
    naive_pieces = [piece for piece, _ in naive.pre_tokenizer.pre_tokenize_str(text)]
    assert "10000" in naive_pieces
    assert [p.decode() for p in tok.pre_tokenizer.pieces(text)] == ["in", " ", "100", "00", " years"]


def test_tiktoken_merges_by_token_rank_not_by_pair(tmp_path):
    """Why tiktoken is an oracle only on trained tokenizers, not on any merge list.

    tiktoken merges the adjacent parts whose *concatenation* has the lowest rank;
    BPE as trained (GPT-2's encoder, HF, ours) applies the learned *pairs* in order.
    They differ when a token's bytes can be reached by another pair than the one
    that made it: with merges b+c, a+b, ab+c, "abc" becomes a, bc by merge order,
    and tiktoken then joins a+bc because "abc" is a token. On tokenizers trained on
    real text the two agree (the comparisons above); where they may not, ours is
    the reference and tiktoken is only used after a check."""
    tok = bpe.Tokenizer([(98, 99), (97, 98), (257, 99)])
    hf = tokenizers.Tokenizer.from_file(tok.save(str(tmp_path)))
    assert tok.encode("abc") == hf.encode("abc").ids == [97, 256]
    assert tok.to_tiktoken().encode_ordinary("abc") == [258]


def test_encode_batch_uses_tiktoken_where_proven_and_equals_encode(trained, monkeypatch):
    monkeypatch.setenv("BEAM_BPE_ENGINES", "tiktoken,python")  # tiktoken is the engine under test
    tok, path = trained
    tok = bpe.Tokenizer.load(path)  # a fresh one: the decision is made once per tokenizer
    texts = held_out()[:6] + [b"caf\xc3\xa9 \xff\xfe broken \xe2\x82", "lone \udc80 surrogate", "", b""]
    assert tok.engine.name == "tiktoken", tok.engine.reason
    expected = [list(tok.reference.encode(text)) for text in texts]
    assert tok.encode_batch(texts) == expected
    assert tok.encode_batch(texts, fast=False) == expected


def test_encode_batch_falls_back_where_tiktoken_would_differ(monkeypatch):
    """The hand-made merges of the test above: tiktoken gives [258] for "abc", we
    give [97, 256]; encode_batch must refuse tiktoken and stay exact."""
    monkeypatch.setenv("BEAM_BPE_ENGINES", "tiktoken,python")  # tiktoken is the engine under test
    tok = bpe.Tokenizer([(98, 99), (97, 98), (257, 99)])
    assert tok.engine.name == "python" and "token 258" in tok.engine.reason
    assert tok.encode_batch(["abc", "xabcabc"]) == [tok.encode("abc"), tok.encode("xabcabc")] == [[97, 256], [120, 97, 256, 97, 256]]


def test_tokenizer_pickles_after_encode_batch(trained):
    import pickle

    tok, path = trained
    tok = bpe.Tokenizer.load(path)
    tok.encode_batch(["hello world"])
    copy = pickle.loads(pickle.dumps(tok))
    assert copy.encode_batch(["hello world", b"\xff"]) == [tok.encode("hello world"), tok.encode(b"\xff")]


def test_tiktoken_proof_runs_once_per_tokenizer(trained, monkeypatch):
    from bpe.engines import rank_proof

    tok, path = trained
    tok = bpe.Tokenizer.load(path)
    calls = []
    proof = rank_proof.rank_mismatch
    monkeypatch.setattr(rank_proof, "rank_mismatch", lambda t: calls.append(t) or proof(t))
    for _ in range(3):
        tok.encode_batch(["hello world", "again"])
    assert len(calls) == 1
