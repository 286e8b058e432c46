"""Small tokenizers for tests: trained in memory on a few documents, or made of random
merges; and the plain pre-token counts they are checked against."""

from __future__ import annotations

import collections

import bpe
from bpe.pretokenize import PreTokenizer

__all__ = ["pieces_with_bpe_tokens", "plain_count", "train_small", "train_with_pattern", "untrained_merges", "use_counts"]


def plain_count(documents, pattern: str = "gpt2") -> collections.Counter:
    """The obviously-correct count of pre-token pieces: a Counter over PreTokenizer pieces."""
    counter = collections.Counter()
    pre = PreTokenizer(pattern)
    for doc in documents:
        counter.update(pre.pieces(doc))
    return counter


def train_with_pattern(docs, pattern: str, vocab_size: int = 600, special_tokens=("<|endoftext|>",)):
    """A small tokenizer trained on docs with the given pre-tokenizer pattern."""
    counts = collections.Counter()
    pre = PreTokenizer(pattern)
    for doc in docs:
        counts.update(pre.split(doc))
    return bpe.train(counts, vocab_size=vocab_size, pattern=pattern, special_tokens=special_tokens)


def train_small(docs, vocab_size=600, special_tokens=("<|endoftext|>",)):
    """A small tokenizer trained on docs with the gpt2 pattern."""
    return train_with_pattern(docs, "gpt2", vocab_size=vocab_size, special_tokens=special_tokens)


def pieces_with_bpe_tokens(tok, data):
    """(piece, how many of ``tok.encode(data)``'s tokens cover it) for each pre-token piece of data."""
    lengths = [len(tok.token_bytes(i)) for i in tok.encode(data)]
    for piece in tok.pre_tokenizer.pieces(data):
        bpe, covered = 0, 0
        while covered < len(piece):
            covered += lengths.pop(0)
            bpe += 1
        yield piece, bpe


def untrained_merges(rng, alphabet: bytes, count: int) -> list[tuple[int, int]]:
    """Random merges over a small alphabet (any pair of existing tokens, in any order),
    skipping pairs whose bytes already are a token: tiktoken needs unique bytes."""
    spelled = [bytes([b]) for b in range(256)]
    tokens = list(alphabet)
    merges = []
    for _ in range(count):
        left, right = rng.choice(tokens), rng.choice(tokens)
        if spelled[left] + spelled[right] in spelled:
            continue
        merges.append((left, right))
        spelled.append(spelled[left] + spelled[right])
        tokens.append(len(spelled) - 1)
    return merges


def use_counts(tok, texts) -> list[int]:
    """How often ``tok`` produces each ID on the texts (str or bytes), one ``encode`` each."""
    counts = [0] * tok.vocab_size
    for text in texts:
        for token_id in tok.encode(text):
            counts[token_id] += 1
    return counts
