"""Stage two's pre-tokenizer and the superword tokens it may not create.

Both follow SuperBPE (Liu et al., 2025) and its released training setup:

- Stage two splits text with ``STAGE_TWO_PATTERN``: runs of one to three
  digits, runs of two or more punctuation characters (with an optional space
  before and line breaks or slashes after), and spaces that do not precede a
  word each stand alone; everything between them (words, single spaces, single
  punctuation marks, line breaks) stays together in one piece, so a merge may
  join words.
- A token may hold at most ``MAX_WORDS`` words, counted as the non-empty parts
  between spaces, and no colon followed by a space (a colon and the text after
  it, "Note: the", rarely form a unit).
"""

from __future__ import annotations

STAGE_TWO_PATTERN = r"""\p{N}{1,3}| ?[^\s\p{L}\p{N}]{2,}[\r\n/]*| +(?!\S)"""

MAX_WORDS = 4


def word_count(token: bytes) -> int:
    """How many words ``token`` holds: its non-empty parts between spaces."""
    return sum(1 for part in token.split(b" ") if part)


def refused(token: bytes) -> bool:
    """Whether stage two may never create ``token`` (too many words, or a colon before a space)."""
    return b": " in token or word_count(token) > MAX_WORDS


def is_superword(token: bytes) -> bool:
    """Whether ``token`` bridges whitespace: a space between two of its non-space bytes."""
    return word_count(token) >= 2
