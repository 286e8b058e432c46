"""Measuring where an engine's pre-tokenizer splits text unlike ``regex``'s: ``measure``.

Each engine carries character tables from some Unicode version, and ``regex``
carries its own; where a code point is a letter, mark, number or space in one
and not in the other, the two split text differently around it. Which code
points those are depends on the installed versions of both, so it is measured
where the engine runs (``bpe.accelerators.unicode_gaps`` keeps the result),
not assumed from a version number.

The measurement encodes probe texts with the engine and with our rules, and
compares the IDs:

- the vocabulary is every pair of bytes, merged in byte order
  (``measurement_tokenizer``): its tokens show most piece boundaries directly,
  since two bytes merge unless a boundary separates them or a lower-ranked
  pair takes one of them. No merge involves the byte 0xFF, which valid UTF-8
  never holds;
- our IDs come from ``regex``'s pieces joined by 0xFF and merged in one call
  of tiktoken's byte-pair merge, which no pattern or Unicode table enters:
  0xFF merges with nothing, so the merges inside each piece are the piece's own;
- ``STRUCTURAL_TEXTS`` hold no exotic code point (whitespace runs, CR/LF
  mixes, long repeats, contractions, other scripts' digits): a difference there
  is one no code-point guard can hold, and the engine is refused;
- then every code point (beyond the first four planes, which no Unicode
  version assigns yet, one in ``SAMPLE_STEP``), each in ``in_context`` beside
  letters of both cases, digits, punctuation, spaces, newlines and apostrophes,
  ``CHUNK`` code points a text. A text that differs is measured again code
  point by code point; the ones that differ are the engine's gaps.

An engine that runs the pattern with a regex engine of its own (tiktoken's)
differs only where its classes do: ``measure_classes`` reads them off for
every code point at once, after the structural texts.

A gap among the ASCII code points would also be one no guard can hold (the
guard lets ASCII text through unread), and refuses the engine.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from functools import lru_cache
from typing import Callable

__all__ = ["CLASSES", "STRUCTURAL_TEXTS", "Measurement", "in_context", "measure", "measure_classes", "measure_pieces",
           "measurement_tokenizer", "probe_code_points"]

SAMPLE_BEYOND = 0x40000
SAMPLE_STEP = 61
CHUNK = 64

STRUCTURAL_TEXTS = [
    " " * n + tail for n in (1, 2, 3, 17) for tail in ("", "x", "\n", "\r\n", " \n", "1", "!", "'s")
] + [
    "\n" * 5 + "\r\n" * 3 + "\r" * 2 + " \r \n \t\n\r\n  x",
    "a\r\n\r\nb\n\n\nc \n \n d\t\t\n\t e\u3000\u3000f\u2028g\x85h\xa0\xa0i\u200bj",
    "trailing spaces   ",
    "trailing newlines\n\n",
    "trailing mix \t\n \r\n ",
    "a" * 3000,
    "ab" * 1500,
    " " * 3000 + "x",
    "\n" * 2000,
    "!" * 2000,
    "1" * 1000 + " " + "12345678901234",
    "٠١٢٣٤٥٦٧٨٩ ۰۱۲۳ ०१२३४ ০১২৩ ๐๑๒๓ ၀၁၂ ០១២ ᠐᠑᠒ ０１２３４５ 𝟎𝟏𝟐𝟑 ⅠⅡⅢⅣ ¹²³ ½¼ ⓵⓶ 𑁦𑁧",
    "I'm you're he's we've they'll I'd don't I'M YOU'RE HE'S WE'VE THEY'LL I'D DON'T 'S 'T 'Re 'vE x'",
    "it’s curly ’s ‘quoted’ ‘S",
    "ΑΒΓΔ αβγδ ǅǈǋ ǅa aǅ ÀÉÎ àéî ß ẞ İı ﬁﬂ",
    "漢字かなカナ한국어 中文没有空格的句子很长很长很长 𠀀𠀁𪜀 😀👍🏽👨\u200d👩\u200d👧 e\u0301 a\u0308",
    "<|endoftext|> is ordinary text here <|endoftext|><|endoftext|>",
    "path/to/file a/ b/\n c//\r\n// /x",
    "CamelCase HTTPServer iPhone McDONALD'S ABCdef abcDEF Ǆǅǆ",
]


@dataclasses.dataclass(frozen=True)
class Measurement:
    """What a measurement found.

    Args:
      gaps: the code points where the engine splits unlike ``regex``, sorted.
      refused: why no code-point guard can hold the difference ("" when one can).
    """

    gaps: tuple[int, ...]
    refused: str = ""


def in_context(c: str) -> str:
    """A short text putting ``c`` beside letters of both cases, digits, punctuation,
    spaces, newlines and apostrophes, so that every branch of the preset patterns sees it."""
    # Two bytes merge in the measurement's vocabulary unless a lower-ranked pair takes one
    # of them, and pairs starting with a low byte rank first: a boundary after ``c`` shows
    # best before a character of two or more bytes (Ω, é, ١, the ideographic space).
    return f"{c}a{c}A {c}1{c}{c}{c}{c}!{c}. {c}\n{c}\r\n\t{c}'s{c}'S  {c} x{c}/ {c}Ωb{c}é{c}١{c}\u3000"


@lru_cache(maxsize=1)
def probe_code_points() -> tuple[int, ...]:
    """Every code point but the surrogates, sampled beyond the first four planes."""
    return tuple(c for c in range(0x110000)
                 if not 0xD800 <= c <= 0xDFFF and (c < SAMPLE_BEYOND or c % SAMPLE_STEP == 0))


def measurement_tokenizer(pattern: str):
    """The vocabulary of every pair of bytes but those with 0xFF, merged in byte order."""
    from bpe.tokenizer import Tokenizer

    return Tokenizer([(a, b) for a in range(255) for b in range(255)], pattern=pattern)


class _OurIds:
    """Our IDs of a text under the measurement vocabulary, without tiktoken's regex engine."""

    def __init__(self, pattern: str):
        import regex

        self._split = regex.compile(pattern).findall
        self._merge = measurement_tokenizer(pattern).to_tiktoken(special_tokens={})._encode_single_piece

    def __call__(self, text: str):
        import numpy as np

        pieces = self._split(text)
        if "\x00" in text:
            joined = b"\xff".join([piece.encode("utf-8") for piece in pieces])
        else:  # the same bytes, joined faster: one encode, then each NUL made 0xFF
            joined = "\x00".join(pieces).encode("utf-8").replace(b"\x00", b"\xff")
        ids = np.array(self._merge(joined), dtype=np.uint32)
        return ids[ids != 0xFF]


def measure(encode: Callable[[str], object], pattern: str) -> Measurement:
    """Where ``encode`` (an engine of ``measurement_tokenizer(pattern)``, its guard off:
    text -> IDs) gives IDs other than ours."""
    import numpy as np

    ours = _OurIds(pattern)
    digests = _our_chunk_digests(pattern)

    def differs(text: str) -> bool:
        theirs = np.asarray(encode(text), dtype=np.uint32)
        expected = digests.get(text)
        if expected is not None:  # a chunk: compared by digest, ours made once per pattern
            return _digest(theirs) != expected
        expected = ours(text)
        return len(theirs) != len(expected) or bool((theirs != expected).any())

    return _measured(differs)


def measure_classes(read_class: Callable[[str, str], str], encode: Callable[[str], object],
                    pattern: str) -> Measurement:
    """Where an engine that runs the pattern with a regex engine of its own classes code
    points unlike ``regex``: ``read_class(class_regex, text)`` gives the characters of
    ``text`` the engine's regex matches. The classes are those the presets use; the
    pattern's other constructs are checked on ``STRUCTURAL_TEXTS`` with ``encode``, as in ``measure``."""
    import regex

    ours = _OurIds(pattern)
    for text in STRUCTURAL_TEXTS:
        if [int(i) for i in encode(text)] != ours(text).tolist():
            return Measurement((), f"it splits {text[:24]!r} unlike regex, a difference no code-point guard can hold")
    every = "".join(map(chr, probe_code_points()))
    gaps = set()
    for cls in CLASSES:
        gaps.update(set(read_class(cls, every)) ^ set(regex.findall(cls, every)))
    return _refused_for_ascii(sorted(map(ord, gaps)))


# The character classes of the preset patterns.
CLASSES = (r"\p{L}", r"\p{N}", r"\s", r"\p{Lu}", r"\p{Ll}", r"\p{Lt}", r"\p{Lm}", r"\p{Lo}", r"\p{M}")


def _chunks() -> list[str]:
    points = probe_code_points()
    return ["".join(in_context(chr(c)) for c in points[start : start + CHUNK]) for start in range(0, len(points), CHUNK)]


@lru_cache(maxsize=4)
def _our_chunk_digests(pattern: str) -> dict[str, bytes]:
    """Each probe chunk -> a digest of our IDs for it: made once per pattern and process,
    shared by the engines measured there."""
    ours = _OurIds(pattern)
    return {text: _digest(ours(text)) for text in _chunks()}


def _digest(ids) -> bytes:
    import hashlib

    return hashlib.blake2b(ids.tobytes(), digest_size=16).digest()


def measure_pieces(count: Callable[[str], dict], pattern: str) -> Measurement:
    """Where ``count`` (a piece counter, its guard off: text -> {piece bytes: count})
    gives pieces other than ``regex``'s."""
    import regex

    split = regex.compile(pattern).findall

    def differs(text: str) -> bool:
        return dict(count(text)) != Counter(piece.encode("utf-8") for piece in split(text))

    return _measured(differs)


def _measured(differs: Callable[[str], bool]) -> Measurement:
    for text in STRUCTURAL_TEXTS:
        if differs(text):
            return Measurement((), f"it splits {text[:24]!r} unlike regex, a difference no code-point guard can hold")
    points = probe_code_points()
    gaps = []
    for start, text in zip(range(0, len(points), CHUNK), _chunks()):
        if differs(text):
            chunk = points[start : start + CHUNK]
            found = [c for c in chunk if differs(in_context(chr(c)))]
            gaps.extend(found or chunk)  # a difference only between neighbours: keep the whole chunk out
    return _refused_for_ascii(gaps)


def _refused_for_ascii(gaps: list[int]) -> Measurement:
    ascii_gaps = [c for c in gaps if c < 0x80]
    if ascii_gaps:
        return Measurement(tuple(gaps), f"it splits text holding {chr(ascii_gaps[0])!r} (U+{ascii_gaps[0]:04X}) "
                                        "unlike regex, and a guard cannot hold an ASCII character")
    return Measurement(tuple(gaps))
