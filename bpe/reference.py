"""Plain, obviously-correct BPE algorithms, written to be read.

These are the definitions the fast code (``bpe/training/trainer.py``, ``bpe/tokenizer.py``)
is tested against. They recount every pair after every merge and re-scan every
word: slow, but each step is visibly what the textbook says.

Two flavours:

* Symbols are strings (``train_words`` / ``encode_word``): the textbook
  character-level BPE of Sennrich et al., with an end-of-word marker symbol.
* Symbols are token IDs over bytes (``train_bytes`` / ``encode_bytes``): the
  byte-level BPE of the project contract. IDs 0..255 are the single bytes and
  merge ``i`` creates ID ``256 + i``. ``extend_bytes`` learns merges the same
  way on top of an existing tokenizer, from its encoding of each piece.

Tie-break and the duplicate-bytes rule (contract for byte-level training):

* The pair with the highest count wins; among equal counts, the
  lexicographically greatest pair of byte strings ``(left_bytes, right_bytes)``
  wins. The result therefore never depends on the order of the input table.
* ``tie_break="hf"`` orders ties as Hugging Face tokenizers' ``BpeTrainer``
  does instead: the smallest pair of HF token IDs wins. HF numbers the 256 byte
  tokens in the code-point order of the characters its ByteLevel
  pre-tokenizer writes them as (``hf_byte_ranks``), and each merged token after
  them in learned order, so a merged token's rank is its ID here too.
* A pair whose concatenated bytes already exist as a token is never chosen; it is
  skipped and the next best pair is taken. Different merge paths can spell the
  same bytes (``(ab, c)`` and ``(a, bc)`` both spell ``abc``), but tokenizer.json
  (the HF vocab is a dict keyed by the token's string) and tiktoken (ranks keyed
  by bytes) cannot hold two IDs with the same bytes, so every token's bytes are
  unique.

Parity-aware training (``train_parity``, after Foroutan et al. (2025),
"Parity-aware Byte Pair Encoding"): the table is split by source (a language,
a domain), each source with its own counts and an optional weight. Before each
merge, every source's compression is measured on its own counts (its bytes
divided by its tokens with the merges so far); the worst-compressed source (the
fewest bytes per token; among equals the first by name) picks the merge: its
most frequent pair, ties broken by the pair's count over all sources, then by
the tie-break above. A source with no pair left to merge (none reaches
``min_frequency`` in its own counts, or every one spells an existing token)
hands the choice to the next worst. A weight multiplies its source's counts;
the compression of a source does not change with its weight. The paper's hybrid
variant (``global_merges=M``) takes the first M merges by plain BPE's rule on
the weighted sum of the sources, then continues parity-aware.
"""

from __future__ import annotations

import numbers
from collections import Counter
from fractions import Fraction
from typing import Callable, Mapping, Sequence

Pair = tuple[int, int]


# --- Character-level BPE over string symbols (the textbook mode) ---------------


def _split_word(word: str, end_of_word: str | None) -> list[str]:
    """A word's starting symbols: its characters, then the end-of-word marker."""
    symbols = list(word)
    if end_of_word is not None:
        symbols.append(end_of_word)
    return symbols


def merge_pair(symbols: list, pair: tuple, new_symbol) -> list:
    """Replaces every occurrence of ``pair`` in ``symbols``, scanning left to right.

    Occurrences do not overlap: in ``a a a`` the pair ``(a, a)`` is merged once,
    at the left, giving ``aa a``.
    """
    merged = []
    i = 0
    while i < len(symbols):
        if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
            merged.append(new_symbol)
            i += 2
        else:
            merged.append(symbols[i])
            i += 1
    return merged


def train_words(
    word_counts: Mapping[str, int],
    num_merges: int,
    end_of_word: str | None = "_",
    tie_break: str = "max",
) -> list[tuple[str, str]]:
    """Learns character-level merges, recounting all pairs before every merge.

    Args:
      word_counts: word -> how often it occurs.
      num_merges: how many merges to learn (fewer if no pair is left).
      end_of_word: a symbol appended to every word, so merges can learn word
        endings; None appends nothing.
      tie_break: which pair wins among those with the highest count. "max": the
        greatest ``(left, right)`` tuple of strings. "first": the first pair met
        scanning the words in the mapping's order, each left to right.

    Returns:
      The merges in learned order, as (left, right) pairs of symbols; the merged
      symbol is ``left + right``.
    """
    if tie_break not in ("max", "first"):
        raise ValueError(f'tie_break must be "max" or "first", not {tie_break!r}')
    words = [(_split_word(word, end_of_word), count) for word, count in word_counts.items()]
    merges = []
    for _ in range(num_merges):
        # Counter keeps insertion order, so its keys are the pairs in the order
        # they are first met: exactly what tie_break="first" needs.
        pair_counts: Counter = Counter()
        for symbols, count in words:
            for pair in zip(symbols, symbols[1:]):
                pair_counts[pair] += count
        if not pair_counts:
            break
        best_count = max(pair_counts.values())
        tied = [pair for pair, count in pair_counts.items() if count == best_count]
        best = max(tied) if tie_break == "max" else tied[0]
        merges.append(best)
        words = [(merge_pair(symbols, best, best[0] + best[1]), count) for symbols, count in words]
    return merges


def encode_word(word: str, merges: Sequence[tuple[str, str]], end_of_word: str | None = "_") -> list[str]:
    """Splits ``word`` into symbols by replaying ``merges`` in learned order.

    Args:
      word: the word to encode.
      merges: (left, right) pairs as returned by ``train_words``.
      end_of_word: the marker used in training (None for none).
    """
    symbols = _split_word(word, end_of_word)
    for left, right in merges:
        symbols = merge_pair(symbols, (left, right), left + right)
    return symbols


# --- Byte-level BPE over token IDs (the project contract) ----------------------


TIE_BREAKS = ("bytes", "hf")


def piece_bytes(word: bytes | str) -> bytes:
    """A table's piece as bytes: a str is taken as its UTF-8 bytes.

    Lone surrogates in a str are kept as their 3-byte forms, as the
    pre-tokenizer does, rather than failing.
    """
    return word.encode("utf-8", "surrogatepass") if isinstance(word, str) else bytes(word)


def check_count(word: bytes | str, count: int) -> None:
    """Checks one entry of a word-count table.

    Raises:
      TypeError: the key is no piece (bytes or str): ``bytes(5)`` would make a
        number five NUL bytes.
      ValueError: a count no corpus can have: negative, or not an integer (a
        float, NaN, a bool, a string), naming the piece. Integers of other
        types (numpy's) are counts.
    """
    if type(word) is not bytes and not isinstance(word, (str, bytearray, memoryview)):
        raise TypeError(f"word_counts keys must be bytes or str, got {type(word).__name__} {word!r}")
    if type(count) is not int and (isinstance(count, bool) or not isinstance(count, numbers.Integral)):
        raise ValueError(f"count {count!r} for piece {word!r} is not a non-negative integer")
    if count < 0:
        raise ValueError(f"negative count {count} for piece {word!r}")


def hf_byte_ranks() -> list[int]:
    """The rank of each byte (by value) in HF tokenizers' byte-level alphabet.

    HF's ByteLevel pre-tokenizer writes byte b as one character (GPT-2's
    bytes_to_unicode: the printable bytes as themselves, the others as 256 + n
    in byte order) and its trainer numbers the alphabet by code point.
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    order = printable + [b for b in range(256) if b not in printable]
    ranks = [0] * 256
    for rank, b in enumerate(order):
        ranks[b] = rank
    return ranks


def train_bytes(
    word_counts: Mapping[bytes | str, int], num_merges: int, min_frequency: int = 2, tie_break: str = "bytes"
) -> list[Pair]:
    """Learns byte-level merges, recounting all pairs before every merge.

    Args:
      word_counts: piece -> count. A str piece is taken as its UTF-8 bytes; pieces
        with equal bytes add up. Pieces with count 0 take no part.
      num_merges: how many merges to learn at most.
      min_frequency: stop as soon as the best pair occurs fewer times than this.
      tie_break: "bytes" (the contract) or "hf" (HF tokenizers' order; see the
        module doc).

    Returns:
      The merges in learned order as (left_id, right_id); merge ``i`` creates
      ID ``256 + i``. Ties go to the greatest (left_bytes, right_bytes), or
      with "hf" to the smallest pair of HF IDs; a pair spelling the bytes of an
      existing token is never chosen (see module doc).
    """
    if tie_break not in TIE_BREAKS:
        raise ValueError(f"tie_break must be one of {', '.join(TIE_BREAKS)}, not {tie_break!r}")
    byte_ranks = hf_byte_ranks()

    def hf_rank(token: int) -> int:
        return byte_ranks[token] if token < 256 else token

    def by_hf_ids(pair: Pair, token_bytes: list[bytes]) -> tuple:
        return -hf_rank(pair[0]), -hf_rank(pair[1])

    words = [(list(word), count) for word, count in _piece_totals(word_counts).items()]
    order = by_hf_ids if tie_break == "hf" else _by_bytes
    return _recount_and_merge(words, [bytes([b]) for b in range(256)], num_merges, min_frequency, order)


def _piece_totals(word_counts: Mapping[bytes | str, int]) -> Counter:
    """piece bytes -> total count, for the pieces that occur (counts checked)."""
    totals: Counter = Counter()
    for word, count in word_counts.items():
        check_count(word, count)
        totals[piece_bytes(word)] += count
    return Counter({word: count for word, count in totals.items() if count > 0})


def _by_bytes(pair: Pair, token_bytes: list[bytes]) -> tuple[bytes, bytes]:
    """The contract's tie-break: the greater (left_bytes, right_bytes) wins."""
    return token_bytes[pair[0]], token_bytes[pair[1]]


def encode_bytes(data: bytes | str, merges: Sequence[Pair] | Mapping[Pair, int]) -> list[int]:
    """Encodes bytes into token IDs by replaying merges in order.

    Repeatedly: among the adjacent pairs, find the one that comes first in merge
    order (after the merges already applied) and merge all its occurrences, left
    to right. For merges learned by ``train_bytes`` this is the same as the
    GPT-2 pair-rank rule (a merge can only create pairs of later merges).

    Args:
      data: the bytes (a str is UTF-8 encoded).
      merges: a list of (left, right) pairs, merge ``i`` creating ID ``256 + i``;
        or a mapping (left, right) -> new ID, applied in insertion order.
    """
    if isinstance(merges, Mapping):
        new_ids = list(merges.values())
        pairs = list(merges.keys())
    else:
        pairs = list(merges)
        new_ids = [256 + i for i in range(len(pairs))]
    rank = {pair: i for i, pair in enumerate(pairs)}

    ids = list(piece_bytes(data))
    last_rank = -1
    while len(ids) >= 2:
        later = [rank[pair] for pair in zip(ids, ids[1:]) if rank.get(pair, -1) > last_rank]
        if not later:
            break
        last_rank = min(later)
        ids = merge_pair(ids, pairs[last_rank], new_ids[last_rank])
    return ids


def train_parity(
    source_counts: Mapping[str, Mapping[bytes | str, int]],
    num_merges: int,
    min_frequency: int = 2,
    tie_break: str = "bytes",
    weights: Mapping[str, object] | None = None,
    global_merges: int = 0,
) -> list[Pair]:
    """Learns parity-aware byte-level merges, recounting all pairs before every merge.

    Args:
      source_counts: source name -> (piece -> count); str pieces are their UTF-8.
      num_merges: how many merges to learn at most.
      min_frequency: a pair is a candidate for a source only if its (weighted)
        count in that source reaches this.
      tie_break: "bytes" or "hf", for pairs with equal source and total counts.
      weights: source name -> weight (an int, or a decimal string or number
        with up to three places); 1 where not given. Counts are multiplied by
        it exactly (as fractions).
      global_merges: how many merges come first by plain BPE's rule (the most
        frequent pair over all sources, ties by the tie-break) before the
        parity-aware rule takes over: the paper's hybrid variant.

    Returns:
      The merges in learned order as (left_id, right_id); merge ``i`` creates
      ID ``256 + i``. See the module doc for the rule.
    """
    if tie_break not in TIE_BREAKS:
        raise ValueError(f"tie_break must be one of {', '.join(TIE_BREAKS)}, not {tie_break!r}")
    byte_ranks = hf_byte_ranks()
    sources = sorted(source_counts)
    words = _weighted_words(source_counts, sources, weights or {})
    source_bytes = [sum(len(ids) * count for s, ids, count in words if s == index) for index in range(len(sources))]

    def tie_order(pair: Pair):
        if tie_break == "hf":
            return tuple(-(byte_ranks[t] if t < 256 else t) for t in pair)
        return token_bytes[pair[0]], token_bytes[pair[1]]

    token_bytes = [bytes([b]) for b in range(256)]
    merges: list[Pair] = []
    while len(merges) < num_merges:
        tokens = [sum(len(ids) * count for s, ids, count in words if s == index) for index in range(len(sources))]
        worst_first = sorted(
            (index for index in range(len(sources)) if tokens[index]),
            key=lambda index: (source_bytes[index] / tokens[index], index),
        )
        per_source = [Counter() for _ in sources]
        total: Counter = Counter()
        for s, ids, count in words:
            for pair in zip(ids, ids[1:]):
                per_source[s][pair] += count
                total[pair] += count
        existing = set(token_bytes)
        best = None
        if len(merges) < global_merges:  # the hybrid variant: one source of all, ranked by total
            worst_first, per_source = [0], [total]
        for index in worst_first:
            counts = per_source[index]
            candidates = [
                pair for pair, count in counts.items()
                if count >= min_frequency and token_bytes[pair[0]] + token_bytes[pair[1]] not in existing
            ]
            if candidates:
                best = max(candidates, key=lambda pair: (counts[pair], total[pair], tie_order(pair)))
                break
        if best is None:
            break
        new_id = 256 + len(merges)
        merges.append(best)
        token_bytes.append(token_bytes[best[0]] + token_bytes[best[1]])
        words = [(s, merge_pair(ids, best, new_id), count) for s, ids, count in words]
    return merges


def _weighted_words(source_counts: Mapping[str, Mapping[bytes | str, int]], sources: Sequence[str],
                    weights: Mapping[str, object]) -> list[tuple[int, list[int], Fraction]]:
    """``train_parity``'s words: (index of the source in ``sources``, token IDs, count times the
    source's weight), a piece's counts added up within its source."""
    words: list[tuple[int, list[int], Fraction]] = []
    for index, name in enumerate(sources):
        weight = Fraction(str(weights.get(name, 1)))
        totals: Counter = Counter()
        for word, count in source_counts[name].items():
            check_count(word, count)
            totals[piece_bytes(word)] += count
        words += [(index, list(word), count * weight) for word, count in totals.items() if count > 0 and word]
    return words


def extend_bytes(
    word_counts: Mapping[bytes | str, int],
    encode: Callable[[bytes], Sequence[int]],
    token_bytes: Sequence[bytes],
    num_merges: int,
    min_frequency: int = 2,
) -> list[Pair]:
    """Learns merges on top of an existing tokenizer, recounting all pairs before every merge.

    The same loop as ``train_bytes``, started from the existing tokenizer's
    encoding of each piece instead of its bytes: this defines ``train --extend``.

    Args:
      word_counts: piece -> count, counted with the existing tokenizer's pre-tokenizer.
      encode: the existing tokenizer's encoding of one piece (bytes -> IDs).
      token_bytes: the bytes of every existing ID (b"" for an ID that spells no
        ordinary bytes: a gap, or a special token whose text no ordinary token may
        spell, which then stands here as that text's bytes).
      num_merges: how many merges to learn at most.
      min_frequency: stop as soon as the best pair occurs fewer times than this.

    Returns:
      The new merges in learned order as (left_id, right_id); merge ``i``
      creates ID ``len(token_bytes) + i``. Ties go to the greatest
      (left_bytes, right_bytes); a pair spelling the bytes of any existing
      token is never chosen (the duplicate-bytes rule of the module doc).
    """
    words = [(list(encode(word)), count) for word, count in _piece_totals(word_counts).items()]
    return _recount_and_merge(words, list(token_bytes), num_merges, min_frequency, _by_bytes)


def _recount_and_merge(words: list, token_bytes: list[bytes], num_merges: int, min_frequency: int, order) -> list[Pair]:
    """The loop of ``train_bytes`` and ``extend_bytes``: recount every pair of ``words`` ((IDs,
    count) each), take the one with the highest count (ties: the greatest ``order(pair,
    token_bytes)``) whose bytes no token spells, merge it everywhere; new IDs from
    ``len(token_bytes)`` on (``token_bytes`` grows)."""
    merges: list[Pair] = []
    while len(merges) < num_merges:
        pair_counts: Counter = Counter()
        for ids, count in words:
            for pair in zip(ids, ids[1:]):
                pair_counts[pair] += count
        existing = set(token_bytes)
        candidates = [
            pair for pair in pair_counts if token_bytes[pair[0]] + token_bytes[pair[1]] not in existing
        ]
        if not candidates:
            break
        best = max(candidates, key=lambda pair: (pair_counts[pair], *order(pair, token_bytes)))
        if pair_counts[best] < min_frequency:
            break
        new_id = len(token_bytes)
        merges.append(best)
        token_bytes.append(token_bytes[best[0]] + token_bytes[best[1]])
        words = [(merge_pair(ids, best, new_id), count) for ids, count in words]
    return merges
