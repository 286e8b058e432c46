"""Byte-level BPE encoding of single pieces, in the two semantics byte-level BPE libraries use.

- ``PieceEncoder``, pair-rank (merge-order) semantics: ours and Hugging Face's.
  Inside one piece it repeatedly takes the adjacent pair that was learned first
  and merges it, left to right; exactly ``reference.encode_bytes`` for our own
  tokenizers (merge i creates ID 256 + i), and HF ``tokenizers``' BPE model for
  a ``tokenizer.json`` (merge i creates the ID the vocab gives the pair's
  concatenation; with ``ignore_merges`` a piece that is a whole token is that token).
- ``RankEncoder``, byte-rank semantics: tiktoken's. It repeatedly merges the
  adjacent pair whose concatenated bytes have the lowest rank (the rank is the ID).

``PieceEncoder`` has two code paths, one semantics:

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
one is proven to give these IDs (``bpe.engines``) and hands this encoder
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


class _CachedPieces:
    """Encodes pieces through a piece -> IDs cache; subclasses define ``encode_bytes``."""

    _cache: "_PieceCache"

    def encode_bytes(self, data: bytes) -> list[int]:
        raise NotImplementedError

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


class PieceEncoder(_CachedPieces):
    """Encodes pre-tokenized pieces with a fixed list of merges (pair-rank semantics).

    Args:
      merges: merge i joins the pair (left ID, right ID).
      cache_size: the most pieces kept in the piece -> IDs cache.
      merged_ids: the ID merge i creates; default 256 + i (our contract).
      byte_ids: the ID of each single byte; default the byte's value.
      whole_tokens: token bytes -> ID; when given, a piece that is a whole token
        is that token without merging (HF's ``ignore_merges``).
    """

    def __init__(self, merges: Sequence[tuple[int, int]], cache_size: int = 1 << 18,
                 merged_ids: Sequence[int] | None = None, byte_ids: Sequence[int] | None = None,
                 whole_tokens: dict[bytes, int] | None = None):
        self.merges = [tuple(pair) for pair in merges]
        self.merged = list(merged_ids) if merged_ids is not None else [256 + i for i in range(len(self.merges))]
        self.byte_ids = list(byte_ids) if byte_ids is not None else list(range(256))
        self._identity_bytes = self.byte_ids == list(range(256))
        self.whole_tokens = whole_tokens
        # A pair is keyed by one int, left * key_base + right: cheaper to build and
        # look up than a tuple. key_base is above every ID, so keys are unique; the
        # ID ``end`` is in no merge and closes every ID list in encode_bytes.
        top = max([255, *self.merged, *self.byte_ids, *chain.from_iterable(self.merges)])
        self.end = top + 1
        self.key_base = top + 2
        self.pair_rank: dict[int, int] = {}
        for rank, (left, right) in enumerate(self.merges):
            # A pair listed twice keeps its first (effective) rank.
            self.pair_rank.setdefault(left * self.key_base + right, rank)
        # Every piece starts as bytes, so the ranks of byte pairs are a table:
        # a piece's first rank list is then two C-level maps and no hashing.
        byte_of = {token_id: b for b, token_id in enumerate(self.byte_ids)}
        no_merge = [_NO_MERGE] * 256
        self.byte_pair_rank = [no_merge] * 256
        for key, rank in self.pair_rank.items():
            left, right = divmod(key, self.key_base)
            if left in byte_of and right in byte_of:
                left, right = byte_of[left], byte_of[right]
                if self.byte_pair_rank[left] is no_merge:
                    self.byte_pair_rank[left] = list(no_merge)
                self.byte_pair_rank[left][right] = rank
        self._cache = _PieceCache(self, cache_size)

    def encode_bytes(self, data: bytes) -> list[int]:
        """Encodes one piece given as bytes (uncached)."""
        if self.whole_tokens is not None:
            token_id = self.whole_tokens.get(data)
            if token_id is not None:
                return [token_id]
        if len(data) > LONG_PIECE:
            return self._encode_long(data)
        return self._encode_short(data)

    def _encode_short(self, data: bytes) -> list[int]:
        """Encodes a short piece with a list of pair ranks.

        ``ranks[i]`` is the rank of the pair (ids[i], ids[i + 1]). Each step merges
        the leftmost pair of the lowest rank and recomputes only the two pairs
        beside it, so the search (min, index) runs in C. Taking the leftmost one
        each time merges every occurrence left to right, since a merge only ever
        creates pairs of higher rank.
        """
        ids = list(data) if self._identity_bytes else list(map(self.byte_ids.__getitem__, data))
        if len(data) < 2:
            return ids
        get = self.pair_rank.get
        merged = self.merged
        key_base = self.key_base
        # ``end`` after the last ID makes both neighbours of a merge exist: at the
        # right end its pair is (last ID, end), and at i == 0 the left neighbour
        # ids[-1] is ``end`` too. Neither ever merges, so the loop needs no bounds
        # checks (the hot loop of every cache miss).
        ids.append(self.end)
        ranks = list(map(getitem, map(self.byte_pair_rank.__getitem__, data), data[1:]))
        ranks.append(_NO_MERGE)
        while (best := min(ranks)) != _NO_MERGE:
            i = ranks.index(best)
            new_id = merged[best]
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
        ids = list(data) if self._identity_bytes else list(map(self.byte_ids.__getitem__, data))
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
            new_id = self.merged[rank]
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


class RankEncoder(_CachedPieces):
    """Encodes pre-tokenized pieces as tiktoken does (byte-rank semantics).

    A piece that is a whole token is that token. Otherwise it starts as single
    bytes, and each step merges the leftmost adjacent pair whose concatenated
    bytes have the lowest rank, until no adjacent pair's bytes are a token.

    Args:
      ranks: token bytes -> rank (= ID); every single byte must be a token.
      cache_size: the most pieces kept in the piece -> IDs cache.
    """

    def __init__(self, ranks: dict[bytes, int], cache_size: int = 1 << 18):
        self.ranks = ranks
        self._cache = _PieceCache(self, cache_size)

    def encode_bytes(self, data: bytes) -> list[int]:
        """Encodes one piece given as bytes (uncached)."""
        token_id = self.ranks.get(data)
        if token_id is not None:
            return [token_id]
        if len(data) > LONG_PIECE:
            return self._encode_long(data)
        # starts[i] is where part i begins; part i is data[starts[i]:starts[i + 1]],
        # and pair_ranks[i] the rank of parts i and i + 1 joined.
        get = self.ranks.get
        starts = list(range(len(data) + 1))

        def pair_rank(i: int) -> int:
            if i < 0 or i + 2 >= len(starts):
                return _NO_MERGE
            return get(data[starts[i]:starts[i + 2]], _NO_MERGE)

        pair_ranks = [pair_rank(i) for i in range(len(data) - 1)]
        while pair_ranks and (best := min(pair_ranks)) != _NO_MERGE:
            i = pair_ranks.index(best)  # the leftmost of the lowest rank
            del starts[i + 1], pair_ranks[i]
            if i > 0:
                pair_ranks[i - 1] = pair_rank(i - 1)
            if i < len(pair_ranks):
                pair_ranks[i] = pair_rank(i)
        return [self.ranks[data[a:b]] for a, b in zip(starts, starts[1:])]

    def _encode_long(self, data: bytes) -> list[int]:
        """The same merges with a heap of candidate pairs: O(n log n) for long pieces.

        Parts are named by where they start; a heap entry (rank, start, right
        start, right end) is stale once either part has changed. Popping the
        lowest (rank, start) among live entries is the step above.
        """
        get = self.ranks.get
        n = len(data)
        end = list(range(1, n + 1))  # end[i]: where the part starting at i ends
        prev = list(range(-1, n - 1))
        alive = [True] * n
        heap = []
        for i in range(n - 1):
            rank = get(data[i:i + 2])
            if rank is not None:
                heap.append((rank, i, i + 1, i + 2))
        heapq.heapify(heap)
        while heap:
            rank, i, j, k = heapq.heappop(heap)
            if not (alive[i] and alive[j] and end[i] == j and end[j] == k):
                continue  # stale
            alive[j] = False
            end[i] = k
            if k < n:
                prev[k] = i
            p = prev[i]
            if p >= 0:
                r = get(data[p:k])
                if r is not None:
                    heapq.heappush(heap, (r, p, i, k))
            if k < n:
                r = get(data[i:end[k]])
                if r is not None:
                    heapq.heappush(heap, (r, i, k, end[k]))
        return [self.ranks[data[i:end[i]]] for i in range(n) if alive[i]]


class _PieceCache(dict):
    """piece -> IDs; a miss encodes the piece. Bounded: past ``limit`` entries it
    starts over empty, which costs a few misses and keeps memory flat on any corpus.

    The IDs are kept as tuples: the garbage collector stops tracking a tuple of
    ints, so a full cache does not make every full collection walk it.

    (It is not prefilled with the tokens' own texts: a token's bytes need not
    encode to that token, e.g. merges b+c, a+b, ab+c encode "abc" as a, bc.)
    """

    def __init__(self, encoder: _CachedPieces, limit: int):
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
