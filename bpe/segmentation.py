"""Segmenting bytes into tokens of a fixed vocabulary, other than by BPE's merges.

BPE's segmentation is one of many ways to spell a byte string with a
vocabulary. Two others show how good it is:

- **greedy longest match**: from the left, always take the longest token that
  the remaining bytes start with (WordPiece-style, no merge order);
- **fewest tokens**: the segmentation with the smallest number of tokens, found
  exactly by dynamic programming (a shortest path over the byte positions, one
  edge per vocabulary token that matches there).

Both run over one pre-token piece at a time, as BPE does, so the three count
tokens over the same pieces and differ only in how a piece is spelled. Every
single byte is a token (under any ID), so every byte string has a segmentation.

``Vocabulary.both`` segments one piece, plainly. ``Vocabulary.counts`` gives
the same two token counts for many pieces at once, with numpy: the tokens as a
trie of arrays (``Trie``), every match at every position found level by level
(``Trie.matches``), greedy longest match by following each piece's longest
matches, and the fewest tokens by a breadth-first search back from each
piece's end (every token is one step, so the first time a position is reached
gives its fewest tokens: the same numbers as the dynamic programme).

    vocab = Vocabulary(tok.ordinary_tokens())               # ID -> bytes, any IDs
    vocab.greedy(b"lowest"), vocab.fewest(b"lowest")     # token IDs
    greedy, fewest = vocab.counts([b"low", b"est"])       # token counts per piece
"""

from __future__ import annotations

from functools import cached_property
from typing import Mapping, Sequence

import numpy as np

__all__ = ["Trie", "Vocabulary"]


class Vocabulary:
    """The tokens a segmentation may use, by their bytes.

    Args:
      tokens: ID -> the token's bytes (a mapping, or a sequence indexed by ID).
        IDs may have gaps and the single bytes any IDs, but each of the 256 must
        be a token. Special tokens are left out by the caller: ordinary text
        never produces them. Two IDs with the same bytes: the lower wins.
    """

    def __init__(self, tokens: Mapping[int, bytes] | Sequence[bytes]):
        pairs = tokens.items() if isinstance(tokens, Mapping) else enumerate(tokens)
        self.ids: dict[bytes, int] = {}
        for token_id, token in sorted(pairs):
            self.ids.setdefault(bytes(token), token_id)
        missing = [b for b in range(256) if bytes([b]) not in self.ids]
        if missing:
            raise ValueError(f"every single byte must be a token of the vocabulary; {len(missing)} are not "
                             f"(the first: 0x{missing[0]:02x})")

    @cached_property
    def prefixes(self) -> set[bytes]:
        """Every prefix of a token, so a scan stops as soon as no longer token can match."""
        return {token[:n] for token in self.ids for n in range(1, len(token) + 1)}

    @cached_property
    def trie(self) -> Trie:
        """The tokens as a trie of arrays, for ``counts``."""
        return Trie(self.ids)

    def matches(self, data: bytes, start: int) -> list[tuple[int, int]]:
        """The tokens ``data[start:]`` starts with, as (end, ID), shortest first."""
        found = []
        ids, prefixes = self.ids, self.prefixes
        for end in range(start + 1, len(data) + 1):
            prefix = data[start:end]
            if prefix not in prefixes:
                break
            token_id = ids.get(prefix)
            if token_id is not None:
                found.append((end, token_id))
        return found

    def greedy(self, data: bytes) -> list[int]:
        """Greedy longest-match segmentation: the longest matching token, left to right."""
        return self.both(data)[0]

    def fewest(self, data: bytes) -> list[int]:
        """A segmentation with the fewest tokens (exact: dynamic programming); see ``both``."""
        return self.both(data)[1]

    def both(self, data: bytes) -> tuple[list[int], list[int]]:
        """(greedy longest match, fewest tokens), from one scan of the matches.

        Fewest tokens: ``best[i]`` is the fewest tokens that spell ``data[i:]``;
        filled from the end, each position takes the matching token whose rest
        is cheapest (the longest such token on ties), so the result is
        deterministic.
        """
        n = len(data)
        matches = [self.matches(data, start) for start in range(n)]
        greedy, start = [], 0
        while start < n:
            end, token_id = matches[start][-1]
            greedy.append(token_id)
            start = end
        best = [0] * (n + 1)
        choice: list[tuple[int, int]] = [(0, 0)] * n
        for start in range(n - 1, -1, -1):
            cost, pick = n + 1, matches[start][0]
            for end, token_id in matches[start]:
                if best[end] + 1 <= cost:
                    cost, pick = best[end] + 1, (end, token_id)
            best[start], choice[start] = cost, pick
        fewest, start = [], 0
        while start < n:
            end, token_id = choice[start]
            fewest.append(token_id)
            start = end
        return greedy, fewest

    def counts(self, pieces: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray]:
        """(greedy longest match's, the fewest) token counts of every piece, as int64 arrays:
        ``len(greedy(p))`` and ``len(fewest(p))`` for each, computed for all pieces at once."""
        return _counts(self.trie, pieces)


class Trie:
    """Tokens as a trie of arrays: node 0 is the root, one node per distinct token prefix.

    Nodes are numbered level by level (all prefixes of length L before those of
    length L + 1), so the edge keys, ``parent * 256 + byte``, come out sorted.

    Attributes:
      keys: sorted int64 edge keys; ``children[i]`` is the node edge ``keys[i]`` leads to.
      children: int64 child node of each edge.
      token: int64 per node, the ID of the token it spells, or -1.
      depth: the longest token's length.
      level_end: ``level_end[L]`` is one past the last node of level L.
      dense_nodes: the nodes of the shallow levels (where most matching
        happens), at most ``DENSE_NODES``, whose edges ``dense`` holds as a
        table: ``dense[key]`` is the child, 0 for none (the root is nobody's child).

    Args:
      ids: token bytes -> ID (distinct bytes).
    """

    DENSE_NODES = 1 << 14

    def __init__(self, ids: dict[bytes, int]):
        tokens = sorted(ids, key=len, reverse=True)
        lengths = np.array([len(t) for t in tokens], dtype=np.int64)
        flat = np.frombuffer(b"".join(tokens), dtype=np.uint8)
        offsets = np.cumsum(lengths) - lengths
        token_ids = np.array([ids[t] for t in tokens], dtype=np.int64)
        self.depth = int(lengths[0]) if len(tokens) else 0
        node = np.zeros(len(tokens), dtype=np.int64)
        keys, children, ending = [], [], []
        nodes = 1
        self.level_end = [1]
        for level in range(1, self.depth + 1):
            longer = int(np.count_nonzero(lengths >= level))  # the tokens are sorted longest first
            edge = node[:longer] * 256 + flat[offsets[:longer] + level - 1]
            unique, inverse = np.unique(edge, return_inverse=True)
            node[:longer] = nodes + inverse
            keys.append(unique)
            children.append(np.arange(nodes, nodes + len(unique), dtype=np.int64))
            nodes += len(unique)
            self.level_end.append(nodes)
            done = int(np.count_nonzero(lengths > level))
            ending.append((node[done:longer], token_ids[done:longer]))
        self.keys = np.concatenate(keys) if keys else np.zeros(0, dtype=np.int64)
        self.children = np.concatenate(children) if children else np.zeros(0, dtype=np.int64)
        self.token = np.full(nodes, -1, dtype=np.int64)
        for spelt, token_id in ending:
            self.token[spelt] = token_id
        self.dense_nodes = max(end for end in self.level_end if end <= self.DENSE_NODES)
        shallow = self.keys < self.dense_nodes * 256
        self.dense = np.zeros(self.dense_nodes * 256, dtype=np.int32)
        self.dense[self.keys[shallow]] = self.children[shallow]

    def matches(self, data: np.ndarray, limit: np.ndarray, starts: np.ndarray):
        """Every token that matches at each start: yields (starts, ends, IDs) per token length, shortest first.

        Args:
          data: uint8 bytes.
          limit: per byte position, where its piece ends (no token crosses it).
          starts: the positions to match at.
        """
        node = np.zeros(len(starts), dtype=np.int64)
        for level in range(1, self.depth + 1):
            edge = node * 256 + data[starts + level - 1]
            if self.level_end[level - 1] <= self.dense_nodes:  # every parent is in the table
                node = self.dense[edge].astype(np.int64)
                found = node > 0
                starts, node = starts[found], node[found]
            else:
                at = np.minimum(np.searchsorted(self.keys, edge), len(self.keys) - 1)
                found = self.keys[at] == edge
                starts, node = starts[found], self.children[at[found]]
            token = self.token[node]
            hit = token >= 0
            yield starts[hit], starts[hit] + level, token[hit]
            longer = starts + level < limit[starts]
            starts, node = starts[longer], node[longer]
            if not len(starts):
                return


def _counts(trie: Trie, pieces: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """(greedy, fewest) token counts per piece; see ``Vocabulary.counts``."""
    lengths = np.array([len(p) for p in pieces], dtype=np.int64)
    if (lengths == 0).any():
        raise ValueError("pieces are never empty")
    if not len(pieces):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    # The pieces one after the other, each followed by one position of its own,
    # its end: positions of different pieces never meet.
    ends = np.cumsum(lengths + 1) - 1
    begins = ends - lengths
    size = int(ends[-1]) + 1
    data = np.zeros(size, dtype=np.uint8)
    inside = np.ones(size, dtype=bool)
    inside[ends] = False
    data[inside] = np.frombuffer(b"".join(pieces), dtype=np.uint8)
    limit = np.repeat(ends, lengths + 1)
    longest = np.zeros(size, dtype=np.int64)
    match_starts, match_ends = [], []
    for starts, stops, _ in trie.matches(data, limit, np.flatnonzero(inside)):
        longest[starts] = stops  # longer matches come later
        match_starts.append(starts)
        match_ends.append(stops)
    greedy = _steps_to_end(longest, begins, ends)
    fewest = _fewest_to_end(np.concatenate(match_starts), np.concatenate(match_ends), ends, size)[begins]
    return greedy, fewest


def _steps_to_end(longest: np.ndarray, begins: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """How many jumps ``position -> longest[position]`` lead from each begin to its end."""
    steps = np.zeros(len(begins), dtype=np.int64)
    walking = np.arange(len(begins))
    position = begins.copy()
    while len(walking):
        position = longest[position]
        steps[walking] += 1
        going = position < ends[walking]
        walking, position = walking[going], position[going]
    return steps


def _fewest_to_end(starts: np.ndarray, stops: np.ndarray, ends: np.ndarray, size: int) -> np.ndarray:
    """Per position, the fewest tokens (edges start -> stop) that lead from it to its piece's end.

    Breadth first from the ends, along the edges backwards: round k reaches the
    positions whose fewest is k. Each edge is looked at once, when its stop is reached.
    """
    order = np.argsort(stops, kind="stable")
    starts = starts[order]
    first = np.zeros(size + 1, dtype=np.int64)  # the edges into p: first[p]..first[p + 1]
    np.cumsum(np.bincount(stops, minlength=size), out=first[1:])
    fewest = np.full(size, -1, dtype=np.int64)
    fewest[ends] = 0
    seen = np.zeros(size, dtype=np.int64)
    frontier, rounds = ends, 0
    while len(frontier):
        rounds += 1
        into = first[frontier + 1] - first[frontier]
        edges = np.arange(int(into.sum())) + np.repeat(first[frontier] - (np.cumsum(into) - into), into)
        reached = starts[edges]
        reached = reached[fewest[reached] < 0]
        fewest[reached] = rounds
        # Each position once: of its copies, the one whose index is written last
        # (any one of them will do).
        seen[reached] = np.arange(len(reached))
        frontier = reached[seen[reached] == np.arange(len(reached))]
    return fewest
