"""Cutting a huge text into chunks that pre-tokenize exactly as the whole text does.

An engine that encodes a text in one call holds the whole text in its own
forms (a ``str``, its UTF-8 bytes, a buffer of IDs) at once. For a text of many
megabytes the encoding engines (``bpe.engines``) encode it chunk by chunk
instead, appending the IDs to one array; the IDs are the same only if the
chunks' pieces are the whole text's pieces. Merges never cross pieces, so that
is the one condition.

The cut rule: a text is cut at position ``c`` only where the character before
``c`` is a letter (``\\p{L}`` of the ``regex`` module, which defines the
reference's pieces) and the character at ``c`` is a space or a line feed. That
gives the same pieces for every pattern in ``bpe.pretokenize.PRESETS``:

- ``c`` is a piece boundary of the whole text. The piece holding the letter
  before ``c`` is made by an alternative that matches letters (and marks), with
  at most an optional prefix before them and an optional contraction (``'s``,
  which starts with an apostrophe) after them. None of these takes a space or
  a line feed, so the piece ends at ``c``.
- The chunk before ``c`` ends with that letter. Every match attempt in it
  examines text at ``c`` or later only after taking the whole run of letters up
  to ``c``, and then it looks for one more letter, mark or apostrophe: a space,
  a line feed and the end of the text all fail it alike, and nothing after
  them is examined. So the chunk's pieces are the whole text's up to ``c``
  (``\\s++$`` cannot match at the chunk's end: it ends with a letter).
- The chunk from ``c`` on starts a match attempt at ``c``, as the whole scan
  does; the patterns have no lookbehind and no start anchor, so what the
  attempt matches depends only on the text from ``c`` on.

Invalid UTF-8 and lone surrogates change nothing: they are never letters, and
a cut at an ASCII space or line feed splits no UTF-8 sequence, so each chunk of
bytes decodes (``surrogateescape`` included) to the matching slice of the whole
text. The tests check the rule against the whole-text split for every preset.
"""

from __future__ import annotations

from typing import Iterator

import regex

# Texts longer than this (in characters of a str, or bytes) are encoded in
# chunks of about this size.
CHUNK_SIZE = 1 << 20

_LETTER = regex.compile(r"\p{L}")
# A space or line feed after a letter; for bytes, after an ASCII letter or the
# last byte of a multi-byte character, which ``_ends_with_letter`` decides.
_STR_CUT = regex.compile(r"(?<=\p{L})[ \n]")
_BYTES_CUT = regex.compile(rb"(?<=[A-Za-z\x80-\xbf])[ \n]")


def chunks(data: str | bytes, size: int | None = None) -> Iterator[str | bytes]:
    """``data`` in consecutive slices of at least ``size`` (the last may be shorter),
    each cut where the rule above allows; a text without such a place is one chunk.

    Default size: ``CHUNK_SIZE`` (read at call time).
    """
    size = CHUNK_SIZE if size is None else size
    start = 0
    while len(data) - start > size:
        cut = _next_cut(data, start + size)
        if cut is None:
            break
        yield data[start:cut]
        start = cut
    yield data[start:]


def _next_cut(data: str | bytes, pos: int) -> int | None:
    """The first position at or after ``pos`` where the rule allows a cut, or None."""
    if isinstance(data, str):
        match = _STR_CUT.search(data, pos)
        return None if match is None else match.start()
    while True:
        match = _BYTES_CUT.search(data, pos)
        if match is None:
            return None
        if _ends_with_letter(data, match.start()):
            return match.start()
        pos = match.end()


def _ends_with_letter(data: bytes, end: int) -> bool:
    """Whether the UTF-8 character that ends just before ``end`` is a letter.

    The character is the last complete, valid UTF-8 sequence there; a lead byte
    never continues another sequence, so the whole text's decoding (strict or
    with ``surrogateescape``) gives that same character.
    """
    last = data[end - 1]
    if last < 0x80:
        return (0x41 <= last <= 0x5A) or (0x61 <= last <= 0x7A)
    for length in (2, 3, 4):
        start = end - length
        if start < 0:
            return False
        lead = data[start]
        if lead >= 0xC0:
            try:
                char = data[start:end].decode("utf-8")
            except UnicodeDecodeError:
                return False
            return _LETTER.fullmatch(char) is not None
        if lead < 0x80:
            return False
    return False
