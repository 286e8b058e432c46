"""The parity-aware merge loop in pure Python: the readable twin of the C loop's
parity mode (``bpe/training/_merges.c`` given ``sources``).

The rule is ``bpe.reference.train_parity``'s: before each merge, the source
with the fewest bytes per token (over its own counts; among equals the lowest
index) picks its most frequent pair, ties by the pair's count over all sources,
then by the tie-break of ``bpe.training.merge_loop``; a source with no pair to
merge hands over to the next worst. The loop computes the same merges without
recounting:

* Words are ID strings, as in ``merge_loop``, each with a source and a count.
* ``totals`` maps each live pair to its count over all sources and
  ``by_source[s]`` to its count in source ``s``; ``where`` lists the words
  that hold it. A merge re-reads only the words that held the pair: the
  difference between a word's pairs before and after is what changes.
* One heap per source with lazy invalidation, over (source count, total,
  tie-break key). A pair's counts only fall once both its tokens exist, so an
  entry that surfaces is either current or too high: too high, it goes back
  with its current counts. A pair whose count in a source falls below
  ``min_frequency`` can never be picked by that source again; its entry there
  is dropped when it surfaces. A pair below ``min_frequency`` in total is
  below it in every source: it is forgotten at once.
* Each source's tokens (``sum(count * len(word))``) fall by the word's count at
  every merge site; its bytes never change.
"""

from __future__ import annotations

import heapq
from collections import Counter
from functools import cmp_to_key
from typing import Sequence

from bpe.training.merge_loop import LoopState

Pair = tuple[int, int]


def _pairs(word: str) -> Counter:
    return Counter(word[j : j + 2] for j in range(len(word) - 1))


class ParityMergeLoop(LoopState):
    """The parity-aware merge loop's state over a table by source.

    Args:
      words, counts, token_bytes, ranks: as ``LoopState``'s.
      min_frequency: the smallest count a pair may have in a source to be merged for it.
      sources: the source index (0..n-1) of each word.
      source_bytes: each source's bytes (``sum(count * len(piece))`` over its original pieces).
    """

    def __init__(self, words: list, counts: Sequence[int], token_bytes: Sequence[bytes], min_frequency: int,
                 ranks: Sequence[int] | None, sources: Sequence[int], source_bytes: Sequence[int]):
        super().__init__(words, counts, token_bytes, min_frequency, ranks)
        self.sources = list(sources)
        self.source_bytes = list(source_bytes)
        self.source_tokens = [0] * len(self.source_bytes)
        self.totals: dict[str, int] = {}
        self.by_source: list[dict[str, int]] = [{} for _ in self.source_bytes]
        self.where: dict[str, list[int]] = {}
        for i, word in enumerate(self.words):
            count, source = self.counts[i], self.sources[i]
            self.source_tokens[source] += count * len(word)
            for pair, times in _pairs(word).items():
                self._add(pair, source, count * times, i)
        for pair in [pair for pair, total in self.totals.items() if total < min_frequency]:
            self._forget(pair)
        self.heaps = [[] for _ in self.source_bytes]
        for pair in self.totals:
            self._push(pair)
        for heap in self.heaps:
            heapq.heapify(heap)

    def _add(self, pair: str, source: int, count: int, word: int) -> None:
        self.totals[pair] = self.totals.get(pair, 0) + count
        counts = self.by_source[source]
        counts[pair] = counts.get(pair, 0) + count
        where = self.where.setdefault(pair, [])
        if not where or where[-1] != word:
            where.append(word)

    def _forget(self, pair: str) -> None:
        del self.totals[pair], self.where[pair]
        for counts in self.by_source:
            counts.pop(pair, None)

    def _entry(self, source: int, pair: str) -> tuple:
        key = self.keys[ord(pair[0])] + self.keys[ord(pair[1])]
        return (-self.by_source[source][pair], -self.totals[pair], key, pair)

    def _push(self, pair: str) -> None:
        """Puts the pair in the heap of every source where it reaches min_frequency (before heapify)."""
        for source, counts in enumerate(self.by_source):
            if counts.get(pair, 0) >= self.min_frequency:
                self.heaps[source].append(self._entry(source, pair))

    def _worst_first(self) -> list[int]:
        """The sources with tokens, the fewest bytes per token first (exact: cross-multiplied)."""
        b, t = self.source_bytes, self.source_tokens

        def compare(x: int, y: int) -> int:
            left, right = b[x] * t[y], b[y] * t[x]
            return -1 if left < right else 1 if left > right else x - y

        return sorted((s for s in range(len(t)) if t[s]), key=cmp_to_key(compare))

    def _best_of(self, source: int) -> str | None:
        """The source's best live pair (its heap's top, made current), or None."""
        heap, counts = self.heaps[source], self.by_source[source]
        while heap:
            entry = heap[0]
            pair = entry[3]
            count = counts.get(pair)
            if count is None or count < self.min_frequency:
                heapq.heappop(heap)  # forgotten, or never again a candidate here
                continue
            current = self._entry(source, pair)
            if current != entry:
                heapq.heapreplace(heap, current)  # out of date: its counts fell
                continue
            left, right = ord(pair[0]), ord(pair[1])
            if self.token_bytes[left] + self.token_bytes[right] in self.existing:
                self._forget(pair)  # the duplicate-bytes rule: never chosen
                heapq.heappop(heap)
                continue
            return pair
        return None

    def learn(self, merges: list[Pair], target: int) -> bool:
        """Learns merges until ``len(merges) == target``; False when no pair is left to merge."""
        while len(merges) < target:
            pair = None
            for source in self._worst_first():
                pair = self._best_of(source)
                if pair is not None:
                    break
            if pair is None:
                return False
            left, right = ord(pair[0]), ord(pair[1])
            new_id = len(self.token_bytes)
            merges.append((left, right))
            self._add_token(left, right)
            self._apply(pair, chr(new_id))
        return True

    def _apply(self, pair: str, new: str) -> None:
        """Merges ``pair`` into ``new`` in every word holding it; updates every count it changes."""
        indices = self.where[pair]
        self._forget(pair)
        created = set()
        for i in indices:
            word = self.words[i]
            merged = word.replace(pair, new)
            if merged == word:
                continue  # the pair left this word through an earlier merge
            self.words[i] = merged
            count, source = self.counts[i], self.sources[i]
            self.source_tokens[source] -= count * (len(word) - len(merged))
            delta = _pairs(merged)
            delta.subtract(_pairs(word))
            for changed, times in delta.items():
                if times > 0:  # holds the new token: created by this merge
                    self._add(changed, source, count * times, i)
                    created.add(changed)
                elif times < 0 and changed in self.totals:
                    self.totals[changed] += count * times
                    self.by_source[source][changed] += count * times
                    if self.totals[changed] < self.min_frequency:
                        self._forget(changed)
        for changed in sorted(created):
            if self.totals[changed] < self.min_frequency:
                self._forget(changed)
                continue
            for source, counts in enumerate(self.by_source):
                if counts.get(changed, 0) >= self.min_frequency:
                    heapq.heappush(self.heaps[source], self._entry(source, changed))
