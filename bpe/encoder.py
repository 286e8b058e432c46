"""Fast byte-level BPE encoding of single pieces, with pair-rank (merge-order) semantics.

Inside one piece the encoder repeatedly takes the adjacent pair that was learned
first and merges every occurrence of it, left to right; exactly
``reference.encode_bytes``. Two code paths, one semantics:

- short pieces (almost all of them) keep a list of the ranks of adjacent pairs;
- long pieces (a megabyte of one letter, CJK text without spaces) use a doubly
  linked list and a heap of candidate pairs, O(n log n) instead of O(n^2).

A piece -> IDs cache makes repeated pieces cost one dict lookup. It is bounded:
when it outgrows ``cache_size`` it starts over.

Pieces start from their bytes, not from their characters' own encodings. That
would be exact only where no merge can join part of a character to a neighbour
before the character is complete, and byte-level training learns such merges
early (a space and the first byte of a Cyrillic letter, say); where it is
exact, it saves a merge or two, less than checking costs.

This is the reference encoder: ``Tokenizer.engine`` uses a faster engine where
one is proven to give these IDs (``bpe/engines.py``) and hands this encoder
what that engine cannot take.
"""

from __future__ import annotations

import heapq
from itertools import chain
from operator import getitem
from typing import Iterable, Sequence

# Pieces up to this many bytes use the rank list; beyond it the heap wins.
LONG_PIECE = 64
# The rank of a pair that is not a merge: above every real rank.
_NO_MERGE = 1 << 62


class PieceEncoder:
    """Encodes pre-tokenized pieces with a fixed list of merges.

    Args:
      merges: merge i joins the pair (left ID, right ID) into ID 256 + i.
      cache_size: the most pieces kept in the piece -> IDs cache.
    """

    def __init__(self, merges: Sequence[tuple[int, int]], cache_size: int = 1 << 18):
        self.merges = [tuple(pair) for pair in merges]
        # A pair is keyed by one int, left * key_base + right: cheaper to build and
        # look up than a tuple. key_base is above every ID, so keys are unique; the
        # ID ``end`` is in no merge and closes every ID list in encode_bytes.
        top = max([255 + len(self.merges), *chain.from_iterable(self.merges)])
        self.end = top + 1
        self.key_base = top + 2
        self.pair_rank: dict[int, int] = {}
        for rank, (left, right) in enumerate(self.merges):
            # A pair listed twice keeps its first (effective) rank.
            self.pair_rank.setdefault(left * self.key_base + right, rank)
        # Every piece starts as bytes, so the ranks of byte pairs are a table:
        # a piece's first rank list is then two C-level maps and no hashing.
        no_merge = [_NO_MERGE] * 256
        self.byte_pair_rank = [no_merge] * 256
        for key, rank in self.pair_rank.items():
            left, right = divmod(key, self.key_base)
            if left < 256 and right < 256:
                if self.byte_pair_rank[left] is no_merge:
                    self.byte_pair_rank[left] = list(no_merge)
                self.byte_pair_rank[left][right] = rank
        self._cache = _PieceCache(self, cache_size)

    def encode_pieces(self, pieces: Iterable[str], errors: str = "strict") -> list[int]:
        """Encodes pieces (str, as split by the pre-tokenizer) and concatenates the IDs.

        ``errors`` is the handler that turns each piece back into its original bytes
        (see ``bpe.pretokenize.to_text``).
        """
        out: list[int] = []
        if errors == "surrogateescape":
            # Text decoded from invalid UTF-8: a piece holding an escaped byte means
            # other bytes than the same str from a caller, so it bypasses the cache.
            get = self._cache.get
            for piece in pieces:
                ids = get(piece)
                out += ids if ids is not None else self.encode_bytes(piece.encode("utf-8", errors))
            return out
        for ids in map(self._cache.__getitem__, pieces):
            out += ids
        return out

    def encode_bytes(self, data: bytes) -> list[int]:
        """Encodes one piece given as bytes (uncached).

        ``ranks[i]`` is the rank of the pair (ids[i], ids[i + 1]). Each step merges
        the leftmost pair of the lowest rank and recomputes only the two pairs
        beside it, so the search (min, index) runs in C. Taking the leftmost one
        each time merges every occurrence left to right, since a merge only ever
        creates pairs of higher rank.
        """
        if len(data) > LONG_PIECE:
            return self._encode_long(data)
        if len(data) < 2:
            return list(data)
        get = self.pair_rank.get
        key_base = self.key_base
        # ``end`` after the last ID makes both neighbours of a merge exist: at the
        # right end its pair is (last ID, end), and at i == 0 the left neighbour
        # ids[-1] is ``end`` too. Neither ever merges, so the loop needs no bounds
        # checks (the hot loop of every cache miss).
        ids = list(data)
        ids.append(self.end)
        ranks = list(map(getitem, map(self.byte_pair_rank.__getitem__, data), data[1:]))
        ranks.append(_NO_MERGE)
        while (best := min(ranks)) != _NO_MERGE:
            i = ranks.index(best)
            new_id = 256 + best
            ids[i] = new_id
            del ids[i + 1], ranks[i]
            ranks[i - 1] = get(ids[i - 1] * key_base + new_id, _NO_MERGE)
            ranks[i] = get(new_id * key_base + ids[i + 1], _NO_MERGE)
        ids.pop()
        return ids

    def _encode_long(self, data: bytes) -> list[int]:
        """O(n log n) encoding: a linked list of symbols and a heap of candidate merges.

        Heap entries are (rank, position, left ID, right ID). Merging at a position
        only creates pairs of higher rank (a merge's new ID is used only by later
        merges), so all occurrences of one rank pop in left-to-right order before
        any later rank: the same result as merging the best pair everywhere at once.
        Stale entries are skipped when popped (lazy invalidation).
        """
        get = self.pair_rank.get
        key_base = self.key_base
        ids = list(data)
        n = len(ids)
        next_pos = list(range(1, n + 1))  # n marks the end
        prev_pos = list(range(-1, n - 1))
        alive = [True] * n
        heap = []
        for i in range(n - 1):
            rank = get(ids[i] * key_base + ids[i + 1])
            if rank is not None:
                heap.append((rank, i, ids[i], ids[i + 1]))
        heapq.heapify(heap)
        while heap:
            rank, i, left, right = heapq.heappop(heap)
            j = next_pos[i] if alive[i] else n
            if j >= n or ids[i] != left or ids[j] != right:
                continue  # stale: one side was merged away or changed
            new_id = 256 + rank
            ids[i] = new_id
            alive[j] = False
            k = next_pos[j]
            next_pos[i] = k
            if k < n:
                prev_pos[k] = i
            p = prev_pos[i]
            if p >= 0:
                r = get(ids[p] * key_base + new_id)
                if r is not None:
                    heapq.heappush(heap, (r, p, ids[p], new_id))
            if k < n:
                r = get(new_id * key_base + ids[k])
                if r is not None:
                    heapq.heappush(heap, (r, i, new_id, ids[k]))
        return [ids[i] for i in range(n) if alive[i]]


class _PieceCache(dict):
    """piece -> IDs; a miss encodes the piece. Bounded: past ``limit`` entries it
    starts over empty, which costs a few misses and keeps memory flat on any corpus.

    The IDs are kept as tuples: the garbage collector stops tracking a tuple of
    ints, so a full cache does not make every full collection walk it.

    (It is not prefilled with the tokens' own texts: a token's bytes need not
    encode to that token, e.g. merges b+c, a+b, ab+c encode "abc" as a, bc.)
    """

    def __init__(self, encoder: PieceEncoder, limit: int):
        super().__init__()
        self.encoder = encoder
        self.limit = limit

    def __missing__(self, piece: str) -> tuple[int, ...] | list[int]:
        try:
            data = piece.encode("utf-8")
        except UnicodeEncodeError:
            # Lone surrogates from a caller's str: keep them as their 3-byte forms,
            # uncached (see encode_pieces).
            return self.encoder.encode_bytes(piece.encode("utf-8", "surrogatepass"))
        ids = tuple(self.encoder.encode_bytes(data))
        if len(self) >= self.limit:
            self.clear()
        self[piece] = ids
        return ids
