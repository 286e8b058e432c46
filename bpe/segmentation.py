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
single byte is a token (IDs 0..255), so every byte string has a segmentation.

    vocab = Vocabulary([tok.token_bytes(i) for i in range(256 + len(tok.merges))])
    vocab.greedy(b"lowest"), vocab.fewest(b"lowest")     # token IDs
"""

from __future__ import annotations

from typing import Sequence

__all__ = ["Vocabulary"]


class Vocabulary:
    """The tokens a segmentation may use, by their bytes.

    Args:
      tokens: ``tokens[i]`` is the bytes of token ID ``i``; IDs 0..255 must be
        the single bytes. Special tokens are left out by the caller: ordinary
        text never produces them. Two IDs with the same bytes: the lower wins.
    """

    def __init__(self, tokens: Sequence[bytes]):
        if len(tokens) < 256 or any(tokens[b] != bytes([b]) for b in range(256)):
            raise ValueError("a vocabulary starts with the 256 single bytes as IDs 0..255")
        self.ids: dict[bytes, int] = {}
        for token_id, token in enumerate(tokens):
            self.ids.setdefault(bytes(token), token_id)
        # Every prefix of a token, so a scan stops as soon as no longer token can match.
        self.prefixes = {token[:n] for token in self.ids for n in range(1, len(token) + 1)}

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
