"""The merge loop in pure Python: the readable twin of the C loop in ``bpe/training/_merges.c``.

Both take the same arguments, keep the same state and learn the same merges;
``bpe.training.trainer`` runs the C loop when it is built and this one otherwise. The
result of both is defined by ``bpe.reference.train_bytes`` (recount every pair,
take the best); the loop computes the same merges without recounting:

* Every word is a ``str`` whose characters are token IDs (``chr(id)``). Merging a
  pair is then ``word.replace(pair, new)``, which runs in C, scans left to right
  and does not overlap: exactly BPE's rule. A str also stores one or two bytes per
  symbol, far less than a list of ints.
* A pair is the 2-character string of its two IDs; it doubles as the dict key.
* ``pairs`` maps each pair to its total count and the words it occurs in. After
  a merge only the words that held the pair are touched, and only the pairs
  next to each merge site change.
* A heap with lazy invalidation picks the best pair: an entry whose count is out
  of date is re-pushed with the current count when it surfaces. (The C loop
  keeps an indexed heap instead; both surface the same best pair.)
* A pair whose count falls below ``min_frequency`` can never be merged (a pair
  only gains occurrences while its younger token is being created), so it is
  forgotten at once: no count, no index, and its heap entry is dropped when it
  surfaces. This keeps memory to the pairs that still matter.

Order: the highest count wins. Ties go to the greatest (left_bytes,
right_bytes); with tie-break ranks (``ranks``) they go to the smallest
(rank[left], rank[right]) instead. The heap is a min-heap over a string key per
pair: the concatenation of its two tokens' keys (``_inverted`` bytes, or
``chr(rank)``), so one comparison of strings decides a tie.

Duplicate-bytes rule: a pair whose concatenated bytes already exist as a token
is never chosen (see ``bpe/reference.py``); it is forgotten when it surfaces.
"""

from __future__ import annotations

import heapq
from typing import Sequence

Pair = tuple[int, int]

# _inverted maps byte b to chr(256 - b) and ends every token with chr(257), which
# is above every mapped byte. Comparing inverted strings then reverses the order
# of the byte strings, including "a prefix sorts first": b"a" < b"ab", while
# [159, 257] > [159, 158, 257]. The terminator also makes the concatenation of
# two inverted tokens compare like the (left, right) tuple.
_INVERT = {b: chr(256 - b) for b in range(256)}
_TERMINATOR = chr(257)


def _inverted(token: bytes) -> str:
    """A string that sorts in the reverse order of ``token``'s bytes."""
    return token.decode("latin-1").translate(_INVERT) + _TERMINATOR


class LoopState:
    """What every merge loop holds besides its pairs: the words, the tokens and their tie-break keys.

    Args:
      words: one word per entry, as bytes (one token ID per byte) or as str (one
        token ID per character).
      counts: one non-negative count per word.
      token_bytes: the bytes of every token that exists, by ID.
      min_frequency: the smallest count a pair may have to be merged (at least 1).
      ranks: None for ties to the greatest byte pair; or one tie-break rank per
        existing token, ties going to the smallest (rank[left], rank[right]); a
        new token's rank is its ID.
    """

    def __init__(
        self,
        words: list,
        counts: Sequence[int],
        token_bytes: Sequence[bytes],
        min_frequency: int,
        ranks: Sequence[int] | None = None,
    ):
        # latin-1 turns byte b into chr(b): the ID string of a word's bytes.
        self.words = [word.decode("latin-1") if isinstance(word, bytes) else word for word in words]
        self.counts = counts
        self.min_frequency = min_frequency
        self.token_bytes = list(token_bytes)
        self.existing = set(self.token_bytes)
        self.ranks = None if ranks is None else list(ranks)
        self.keys = [self._key(i) for i in range(len(self.token_bytes))]  # ID -> its tie-break key

    def _key(self, token: int) -> str:
        if self.ranks is None:
            return _inverted(self.token_bytes[token])
        return chr(self.ranks[token] if token < len(self.ranks) else token)

    def current_words(self) -> list[str]:
        """The words with every merge so far applied (one character per token ID), in the given order."""
        return list(self.words)

    def _add_token(self, left: int, right: int) -> None:
        """Records the token that merging ``left`` and ``right`` creates."""
        new_bytes = self.token_bytes[left] + self.token_bytes[right]
        self.token_bytes.append(new_bytes)
        self.existing.add(new_bytes)
        self.keys.append(self._key(len(self.token_bytes) - 1))


class MergeLoop(LoopState):
    """The merge loop's state over a word-count table (arguments: ``LoopState``'s)."""

    def __init__(self, words: list, counts: Sequence[int], token_bytes: Sequence[bytes], min_frequency: int,
                 ranks: Sequence[int] | None = None):
        super().__init__(words, counts, token_bytes, min_frequency, ranks)
        self.pairs = _count_pairs(self.words, counts, min_frequency)
        keys = self.keys
        self.heap = [(-entry[0], keys[ord(pair[0])] + keys[ord(pair[1])], pair) for pair, entry in self.pairs.items()]
        heapq.heapify(self.heap)

    def learn(self, merges: list[Pair], target: int) -> bool:
        """Learns merges until ``len(merges) == target``, appending each to ``merges``.

        Returns False when no pair is left to merge, True otherwise.
        """
        pairs, keys, token_bytes, existing = self.pairs, self.keys, self.token_bytes, self.existing
        heappush, heappop = heapq.heappush, heapq.heappop
        min_frequency = self.min_frequency
        heap = self.heap
        while len(merges) < target:
            if not heap:
                return False
            neg_count, key, pair = heappop(heap)
            entry = pairs.get(pair)
            if entry is None:
                continue  # forgotten
            if entry[0] != -neg_count:
                # Out of date: the count went down since the push; back it goes
                # with its current count.
                heappush(heap, (-entry[0], key, pair))
                continue
            left, right = ord(pair[0]), ord(pair[1])
            new_bytes = token_bytes[left] + token_bytes[right]
            if new_bytes in existing:
                # The duplicate-bytes rule: never chosen, so forget the pair.
                del pairs[pair]
                continue

            new_id = len(token_bytes)
            merges.append((left, right))
            token_bytes.append(new_bytes)
            existing.add(new_bytes)
            keys.append(self._key(new_id))
            for new_pair in _apply_merge(pair, chr(new_id), self.words, self.counts, pairs, min_frequency):
                count = pairs[new_pair][0]
                if count >= min_frequency:
                    a, b = new_pair
                    heappush(heap, (-count, keys[ord(a)] + keys[ord(b)], new_pair))
                else:
                    del pairs[new_pair]
            if len(heap) > 2 * len(pairs) + 1000:
                # Mostly entries of forgotten pairs: rebuild from the live ones.
                heap = [(-pairs[pair][0], key, pair) for _, key, pair in heap if pair in pairs]
                heapq.heapify(heap)
                self.heap = heap
        return True


def _count_pairs(words: list[str], counts: Sequence[int], min_frequency: int) -> dict[str, list[int]]:
    """pair -> [count, index of a word holding it, index, ...] for the pairs that
    reach ``min_frequency``.

    One list per pair keeps the count and the word indices together: one dict
    lookup updates both. Each word is listed once per pair: an index is only
    ever appended while that word is being processed, so a repeat is always the
    last element.
    """
    pairs: dict[str, list[int]] = {}
    get = pairs.get
    for i, word in enumerate(words):
        count = counts[i]
        for j in range(len(word) - 1):
            pair = word[j : j + 2]
            entry = get(pair)
            if entry is None:
                pairs[pair] = [count, i]
            else:
                entry[0] += count
                if entry[-1] != i:
                    entry.append(i)
    for pair in [pair for pair, entry in pairs.items() if entry[0] < min_frequency]:
        del pairs[pair]
    return pairs


def _apply_merge(
    pair: str,
    new: str,
    words: list[str],
    counts: Sequence[int],
    pairs: dict[str, list[int]],
    min_frequency: int,
) -> list[str]:
    """Merges ``pair`` into the token ``new`` in every word that holds it.

    Updates ``pairs`` (counts and word indices) around each merge site and
    returns the pairs that did not exist before (they all contain ``new``). A
    pair whose count falls below ``min_frequency`` is forgotten.

    After ``replace``, each ``new`` at position k in the new word stands where
    ``a b`` stood. Its left neighbour L lost the pair (L, a) and gained (L, new);
    if L is itself a ``new`` the lost pair was (b, a). Its right neighbour R lost
    (b, R) and gained (new, R); when R is a ``new``, that boundary is the next
    site's left side, so it is counted there once.
    """
    a, b = pair[0], pair[1]
    created: list[str] = []
    get = pairs.get
    indices = iter(pairs.pop(pair))
    next(indices)  # the count
    for i in indices:
        word = words[i]
        merged = word.replace(pair, new)
        length = len(merged)
        sites = len(word) - length  # each site shortened the word by one
        if not sites:
            continue  # the pair left this word through an earlier merge
        words[i] = merged
        count = counts[i]
        last = length - 1
        k = -1
        while sites:
            k = merged.find(new, k + 1)
            sites -= 1
            # The pairs this site changes: (lost, gained) on its left, then on its right.
            if k:
                neighbour = merged[k - 1]
                changes = [((b if neighbour == new else neighbour) + a, neighbour + new)]
            else:
                changes = []
            if k < last:
                neighbour = merged[k + 1]
                if neighbour != new:
                    changes.append((b + neighbour, new + neighbour))
            for lost, gained in changes:
                entry = get(lost)
                if entry is not None:  # else already forgotten
                    entry[0] -= count
                    if entry[0] < min_frequency:
                        del pairs[lost]
                entry = get(gained)
                if entry is None:
                    pairs[gained] = [count, i]
                    created.append(gained)
                else:
                    entry[0] += count
                    if entry[-1] != i:
                        entry.append(i)
    return created
