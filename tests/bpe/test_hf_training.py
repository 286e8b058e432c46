"""tie_break="hf" with the hf-bytelevel preset learns HF tokenizers' BpeTrainer merges, in order."""

import json
from collections import Counter

import pytest

import bpe
from bpe import reference
from bpe.pretokenize import PreTokenizer
from bpe.training import trainer
from bpe.training.trainer import train_merges
from tests.support.real_text import multilingual

tokenizers = pytest.importorskip("tokenizers")


def byte_of_char() -> dict[str, int]:
    """HF ByteLevel's character for each byte, inverted (GPT-2's bytes_to_unicode)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    others = [b for b in range(256) if b not in printable]
    chars = {b: chr(b) for b in printable} | {b: chr(256 + n) for n, b in enumerate(others)}
    return {c: b for b, c in chars.items()}


BYTE_OF_CHAR = byte_of_char()


def hf_bytes(token: str) -> bytes:
    return bytes(BYTE_OF_CHAR[c] for c in token)


def hf_merges(docs, vocab_size, special_tokens, min_frequency):
    """HF's merges as (left bytes, right bytes), trained the usual byte-level way."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    hf = Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf_trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(special_tokens),
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    hf.train_from_iterator(docs, hf_trainer)
    merges = json.loads(hf.to_str())["model"]["merges"]
    pairs = [m.split(" ") if isinstance(m, str) else m for m in merges]
    return [(hf_bytes(a), hf_bytes(b)) for a, b in pairs], hf


def spelled_merges(merges):
    token_bytes = [bytes([b]) for b in range(256)]
    for left, right in merges:
        token_bytes.append(token_bytes[left] + token_bytes[right])
    return [(token_bytes[left], token_bytes[right]) for left, right in merges]


@pytest.fixture(scope="module")
def docs():
    return multilingual(12)


@pytest.fixture(scope="module")
def table(docs):
    pretokenizer = PreTokenizer("hf-bytelevel")
    counts = Counter()
    for doc in docs:
        counts.update(pretokenizer.pieces(doc))
    return counts


def test_hf_bytelevel_preset_splits_as_hf(docs, table):
    from tokenizers import pre_tokenizers

    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False)
    theirs = Counter()
    for doc in docs:
        theirs.update(hf_bytes(piece) for piece, _ in byte_level.pre_tokenize_str(doc))
    assert theirs == table


@pytest.mark.parametrize(
    "vocab_size, special_tokens, min_frequency",
    [(3000, (), 2), (6000, ("<|endoftext|>", "<pad>"), 1), (2500, ("<s>",), 9)],
)
@pytest.mark.parametrize("loop", ["compiled", "python"])
def test_hf_tie_break_learns_hf_merges_in_order(docs, table, vocab_size, special_tokens, min_frequency, loop, monkeypatch):
    if loop == "python":
        monkeypatch.setattr(trainer, "_merges", None)
    expected, hf = hf_merges(docs, vocab_size, special_tokens, min_frequency)
    tok = bpe.train(
        table,
        vocab_size,
        pattern="hf-bytelevel",
        special_tokens=special_tokens,
        min_frequency=min_frequency,
        tie_break="hf",
        progress=False,
    )
    assert len(expected) > 1000
    assert spelled_merges(tok.merges) == expected
    assert tok.vocab_size == hf.get_vocab_size()


def test_hf_and_bytes_tie_breaks_differ_on_real_text(table):
    # Our default order is not HF's: the same table gives other merges.
    ours = train_merges(table, 2000, progress=False)
    hf = train_merges(table, 2000, progress=False, tie_break="hf")
    assert ours != hf


def test_hf_ties_go_to_the_smallest_hf_ids():
    # Equal counts: "bytes" takes the greatest byte pair, "hf" the smallest IDs.
    assert train_merges({b"ab": 3, b"cd": 3}, 1) == [(99, 100)]
    assert train_merges({b"ab": 3, b"cd": 3}, 1, tie_break="hf") == [(97, 98)]
    # HF numbers printable bytes first: "~" (0x7e) before "¡" (0xa1), and both
    # before a space, which ByteLevel writes as U+0120.
    table = {"~a".encode(): 2, "\xa1a".encode("latin-1"): 2, b" a": 2}
    assert train_merges(table, 1, tie_break="hf") == [(0x7E, 0x61)]
    assert train_merges(table, 1) == [(0xA1, 0x61)]
    assert reference.hf_byte_ranks()[0x20] > reference.hf_byte_ranks()[0xFF] > reference.hf_byte_ranks()[0x7E]


def test_unknown_tie_break_is_an_error():
    with pytest.raises(ValueError, match="tie_break must be one of bytes, hf"):
        train_merges({b"ab": 2}, 1, tie_break="HF")
    with pytest.raises(ValueError, match="tie_break must be one of bytes, hf"):
        reference.train_bytes({b"ab": 2}, 1, tie_break="first")


def test_train_cli_with_tie_break_hf_gives_hf_merges(docs, tmp_path):
    """``beam-bpe train --pattern hf-bytelevel --tie-break hf``: HF's merges, in order, from files."""
    from tests.support.cli import IN_MEMORY, train

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"text": doc}) + "\n" for doc in docs), encoding="utf-8")
    out = tmp_path / "tok"
    assert train("--input", str(corpus), "--vocab-size", "1500", "--pattern", "hf-bytelevel",
                 "--tie-break", "hf", "--min-frequency", "2", "--output", str(out), *IN_MEMORY) == 0
    expected, _ = hf_merges(docs, 1500, (), 2)
    ours = bpe.Tokenizer.load(str(out))
    assert spelled_merges(ours.merges) == expected
    assert json.loads((out / "train_stats.json").read_text())["tie_break"] == "hf"
    # The tie-break is what makes the difference: by default the same text gives other merges.
    default = tmp_path / "default"
    assert train("--input", str(corpus), "--vocab-size", "1500", "--pattern", "hf-bytelevel",
                 "--output", str(default), *IN_MEMORY) == 0
    assert spelled_merges(bpe.Tokenizer.load(str(default)).merges) != expected
