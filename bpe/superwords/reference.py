"""Superword BPE (SuperBPE) over whole documents, written to be read.

This is the definition that ``bpe/training/superwords.py`` is tested against.
Like ``bpe/reference.py`` it recounts every pair before every merge and keeps
every document in memory: slow, but each step is visibly the algorithm.

Stage one is ordinary byte-level BPE (``reference.train_bytes``) on the pieces
of ``pattern``, up to the transition vocabulary size.

Stage two:

1. Split every document into stage-two pieces with
   ``rules.STAGE_TWO_PATTERN`` (SuperBPE's: only digits, runs of punctuation
   and extra spaces split, so a piece spans many words).
2. Encode each piece with the stage-one merges, as the finished tokenizer will
   (pair-rank order over the whole piece).
3. A token of that encoding is *whole* if it spells exactly one pretoken of
   ``pattern`` within the piece (" the", "cat", ","). Only whole tokens take
   part in stage two; the others (pieces of a rare word, a token that spans two
   pretokens) stay as they are. This is where we depart from SuperBPE, which
   lets stage two go on merging inside words too: as in the two-phase form of
   "Faster Superword Tokenization" (Schmidt, Tanner and Pinter, 2026), stage two
   joins whole words, so the runs of whole tokens between the others can be
   counted by frequency instead of kept as documents.
4. Repeat: count the adjacent pairs of stage-two tokens (whole tokens and the
   tokens merged from them); take the most frequent one whose bytes no token
   spells yet and which ``rules.refused`` allows (at most four words, no colon
   before a space); ties go to the greatest (left_bytes, right_bytes); merge it
   everywhere, left to right. Stop at the vocabulary size or when the best
   count falls below ``min_frequency``.

Encoding (``encode``): split with the stage-two pattern and encode each piece
with all the merges in pair-rank order, which is what Hugging Face tokenizers
does with the tokenizer.json of a superword tokenizer.
"""

from __future__ import annotations

from collections import Counter
from typing import Callable, Iterable, Sequence

from bpe import reference
from bpe.pretokenize import PreTokenizer
from bpe.superwords.rules import STAGE_TWO_PATTERN, refused

Pair = tuple[int, int]


def train(
    documents: Iterable[bytes | str],
    transition: int,
    vocab_size: int,
    pattern: str = "gpt2",
    min_frequency: int = 2,
) -> list[Pair]:
    """Learns the merges of a superword tokenizer from whole documents.

    Args:
      documents: the training text, one document per entry (str is UTF-8).
      transition: the vocabulary size at which stage two starts (256 + stage-one merges).
      vocab_size: the final vocabulary size (256 + all merges).
      pattern: stage one's pre-tokenizer (a preset name or a regex).
      min_frequency: in both stages, stop when the best pair occurs fewer times.

    Returns:
      The merges in learned order as (left_id, right_id); merge ``i`` creates ID ``256 + i``.
    """
    documents = [reference.piece_bytes(document) for document in documents]
    pretokenizer = PreTokenizer(pattern)
    stage_one_counts = Counter(piece for document in documents for piece in pretokenizer.pieces(document))
    merges = reference.train_bytes(stage_one_counts, max(0, transition - 256), min_frequency)
    token_bytes = [bytes([b]) for b in range(256)]
    for left, right in merges:
        token_bytes.append(token_bytes[left] + token_bytes[right])
    stage_two = extend(documents, lambda piece: reference.encode_bytes(piece, merges), token_bytes, pattern,
                       vocab_size - 256 - len(merges), min_frequency)
    return merges + stage_two


def extend(
    documents: Iterable[bytes | str],
    encode: Callable[[bytes], Sequence[int]],
    token_bytes: Sequence[bytes],
    pattern: str,
    num_merges: int,
    min_frequency: int = 2,
) -> list[Pair]:
    """Stage two on top of existing tokens: stage one's, or an existing tokenizer's (``train --extend
    BASE --superword-merges K``).

    Args:
      documents: the training text, one document per entry (str is UTF-8).
      encode: the existing tokens' encoding of a piece (their merges in pair-rank order over the piece).
      token_bytes: the bytes of every existing ID; new IDs follow from ``len(token_bytes)``.
      pattern: the pre-tokenizer the existing tokens were learned with (which tokens are whole).
      num_merges: how many merges to learn at most.
      min_frequency: stop when the best pair occurs fewer times.

    Returns:
      The new merges in learned order as (left_id, right_id); merge ``i`` creates ID
      ``len(token_bytes) + i``.
    """
    token_bytes = list(token_bytes)
    pretokenizer = PreTokenizer(pattern)
    stage_two = PreTokenizer(STAGE_TWO_PATTERN)
    pieces = [
        _whole_tokens(piece, encode, pretokenizer, token_bytes)
        for document in documents
        for piece in stage_two.pieces(document)
    ]
    merges: list[Pair] = []
    while len(merges) < num_merges:
        pair_counts: Counter = Counter()
        for ids, whole in pieces:
            for i in range(len(ids) - 1):
                if whole[i] and whole[i + 1]:
                    pair_counts[ids[i], ids[i + 1]] += 1
        existing = set(token_bytes)
        candidates = [
            pair for pair in pair_counts
            if token_bytes[pair[0]] + token_bytes[pair[1]] not in existing
            and not refused(token_bytes[pair[0]] + token_bytes[pair[1]])
        ]
        if not candidates:
            break
        best = max(candidates, key=lambda pair: (pair_counts[pair], token_bytes[pair[0]], token_bytes[pair[1]]))
        if pair_counts[best] < min_frequency:
            break
        new_id = len(token_bytes)
        merges.append(best)
        token_bytes.append(token_bytes[best[0]] + token_bytes[best[1]])
        pieces = [_merge_whole(ids, whole, best, new_id) for ids, whole in pieces]
    return merges


def _whole_tokens(piece: bytes, encode: Callable[[bytes], Sequence[int]], pretokenizer: PreTokenizer,
                  token_bytes: Sequence[bytes]) -> tuple[list[int], list[bool]]:
    """A stage-two piece encoded with the existing tokens, and which of its tokens are whole
    (spell exactly one pretoken of the piece)."""
    pretokens = pretokenizer.pieces(piece)
    spans = set()
    start = 0
    for pretoken in pretokens:
        spans.add((start, start + len(pretoken)))
        start += len(pretoken)
    ids = list(encode(piece))
    whole = []
    start = 0
    for token in ids:
        end = start + len(token_bytes[token])
        whole.append((start, end) in spans)
        start = end
    return ids, whole


def _merge_whole(ids: list[int], whole: list[bool], pair: Pair, new_id: int) -> tuple[list[int], list[bool]]:
    """Merges every occurrence of ``pair`` between two whole tokens, left to right; the merged token is whole."""
    merged_ids, merged_whole = [], []
    i = 0
    while i < len(ids):
        if i + 1 < len(ids) and whole[i] and whole[i + 1] and (ids[i], ids[i + 1]) == pair:
            merged_ids.append(new_id)
            merged_whole.append(True)
            i += 2
        else:
            merged_ids.append(ids[i])
            merged_whole.append(whole[i])
            i += 1
    return merged_ids, merged_whole


def encode(data: bytes | str, merges: Sequence[Pair]) -> list[int]:
    """Encodes text with a superword tokenizer's merges: stage-two pieces, each in pair-rank order."""
    return [token for piece in PreTokenizer(STAGE_TWO_PATTERN).pieces(data)
            for token in reference.encode_bytes(piece, merges)]
