"""Tokens matched in the text before pre-tokenization: allowed special tokens and HF's added tokens.

``split_out`` cuts text into ordinary segments (str) and matched tokens (their
IDs, as int), leftmost-longest as Hugging Face's added-token matcher does;
``AddedTokenEncoder`` encodes such a list of pieces and IDs.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Iterable, Iterator, Mapping

import regex


@lru_cache(maxsize=64)
def _finder(tokens: frozenset[str]) -> "regex.Pattern[str]":
    # Longest first: at one position the longest token wins; the leftmost position always does.
    ordered = sorted(tokens, key=lambda s: (-len(s), s))
    return regex.compile("|".join(regex.escape(s) for s in ordered))


def split_out(text: str, tokens: Mapping[str, int]) -> Iterator[str | int]:
    """Yields the ordinary text between the tokens (str) and each token found (its ID)."""
    if not tokens:
        if text:
            yield text
        return
    start = 0
    for match in _finder(frozenset(tokens)).finditer(text):
        if match.start() > start:
            yield text[start : match.start()]
        yield tokens[match.group()]
        start = match.end()
    if start < len(text):
        yield text[start:]


class AddedTokenEncoder:
    """Encodes pieces among which matched tokens stand as their IDs (ints).

    Args:
      encoder: the piece encoder for the ordinary pieces.
    """

    def __init__(self, encoder):
        self.encoder = encoder

    def encode_pieces(self, pieces: Iterable[str | int], errors: str = "strict") -> list[int]:
        out: list[int] = []
        run: list[str] = []
        for piece in pieces:
            if type(piece) is int:
                if run:
                    out += self.encoder.encode_pieces(run, errors)
                    run = []
                out.append(piece)
            else:
                run.append(piece)
        if run:
            out += self.encoder.encode_pieces(run, errors)
        return out

    def encode_bytes(self, data: bytes) -> list[int]:
        return self.encoder.encode_bytes(data)
