"""Which Unicode script a piece of text is written in.

Every character falls in exactly one class of ``SCRIPTS``, decided in this
order (the first that applies):

1. ``whitespace``: what the pre-tokenizer patterns call ``\\s`` (the ``regex``
   module's Unicode whitespace);
2. ``digits``: decimal digits of any script (``\\p{Nd}``);
3. a named writing script (``\\p{Script=...}``): Latin, Cyrillic, Greek, ...,
   Han, ``Hiragana/Katakana`` (one class: Japanese mixes them), Hangul;
4. ``other script``: a character of any other script (not Common, Inherited
   or Unknown);
5. ``punctuation``: the rest of punctuation and symbols (``\\p{P}``, ``\\p{S}``:
   brackets, operators, quotes, emoji), the code-like characters;
6. combining characters (``\\p{Script=Inherited}``: accents, ZWJ, variation
   selectors) take the class of the character before them (``other`` at the
   start of a text);
7. ``invalid UTF-8``: the lone surrogates U+DC80..U+DCFF by which
   ``surrogateescape`` stands for bytes that are not valid UTF-8 (other lone
   surrogates too);
8. ``other``: everything else (control characters, unassigned code points).

The writing scripts are those of step 3 and 4. A word is attributed to its
first writing-script character, else to its first non-whitespace character
(``class_of_text``: "(hello" is Latin); a token or a pre-token piece to its last
character, or its first if the last is whitespace (``class_of_span``: " the" is
Latin, " 42" digits, ");\\n" punctuation).

    classify("Привет, world")   # one class index per character
    runs("Привет, world")       # [(class, start, end), ...] over characters
    classes_of(code_points)     # the same for a numpy array of code points
"""

from __future__ import annotations

import threading
from functools import lru_cache

import numpy as np
import regex

__all__ = [
    "SCRIPTS", "WRITING", "INHERITED", "INVALID", "OTHER", "WHITESPACE",
    "classify", "classes_of", "code_point_classes", "runs", "class_of_span", "class_of_text",
]

# Named writing scripts: (class name, the regex class of its characters).
_NAMED = (
    ("Latin", r"\p{Script=Latin}"),
    ("Cyrillic", r"\p{Script=Cyrillic}"),
    ("Greek", r"\p{Script=Greek}"),
    ("Armenian", r"\p{Script=Armenian}"),
    ("Georgian", r"\p{Script=Georgian}"),
    ("Hebrew", r"\p{Script=Hebrew}"),
    ("Arabic", r"\p{Script=Arabic}"),
    ("Devanagari", r"\p{Script=Devanagari}"),
    ("Bengali", r"\p{Script=Bengali}"),
    ("Gurmukhi", r"\p{Script=Gurmukhi}"),
    ("Gujarati", r"\p{Script=Gujarati}"),
    ("Tamil", r"\p{Script=Tamil}"),
    ("Telugu", r"\p{Script=Telugu}"),
    ("Kannada", r"\p{Script=Kannada}"),
    ("Malayalam", r"\p{Script=Malayalam}"),
    ("Sinhala", r"\p{Script=Sinhala}"),
    ("Thai", r"\p{Script=Thai}"),
    ("Lao", r"\p{Script=Lao}"),
    ("Tibetan", r"\p{Script=Tibetan}"),
    ("Myanmar", r"\p{Script=Myanmar}"),
    ("Khmer", r"\p{Script=Khmer}"),
    ("Ethiopic", r"\p{Script=Ethiopic}"),
    ("Han", r"\p{Script=Han}"),
    ("Hiragana/Katakana", r"[\p{Script=Hiragana}\p{Script=Katakana}]"),
    ("Hangul", r"\p{Script=Hangul}"),
)

SCRIPTS: tuple[str, ...] = (
    "whitespace", "digits", *(name for name, _ in _NAMED), "other script",
    "punctuation", "invalid UTF-8", "other",
)
INVALID = SCRIPTS.index("invalid UTF-8")
WHITESPACE = SCRIPTS.index("whitespace")
OTHER = SCRIPTS.index("other")
# Writing scripts: the named ones and "other script".
WRITING = frozenset(range(SCRIPTS.index("Latin"), SCRIPTS.index("other script") + 1))
# Not a class of its own: the marker of combining characters in code_point_classes().
INHERITED = 255

# (class index, regex class), in the order of the module docstring.
_RULES = (
    (SCRIPTS.index("whitespace"), r"\s"),
    (SCRIPTS.index("digits"), r"\p{Nd}"),
    *((SCRIPTS.index(name), chars) for name, chars in _NAMED),
    (SCRIPTS.index("other script"), r"[^\p{Script=Common}\p{Script=Inherited}\p{Script=Unknown}]"),
    (SCRIPTS.index("punctuation"), r"[\p{P}\p{S}]"),
    (INHERITED, r"\p{Script=Inherited}"),
    (INVALID, r"\p{Cs}"),
)


def _classes_in_order(text: str) -> bytearray:
    """The class index of each character of ``text`` on its own (``INHERITED`` for combining ones)."""
    table = bytearray([OTHER]) * len(text)
    # The last rule first: an earlier rule overwrites a later one where both match.
    for index, chars in reversed(_RULES):
        for match in regex.finditer(chars + "+", text):
            start, end = match.span()
            table[start:end] = bytes([index]) * (end - start)
    return table


@lru_cache(maxsize=1)
def code_point_classes() -> bytes:
    """One byte per code point 0..U+10FFFF: its class index (``INHERITED`` for
    combining characters, which take the class of the character before them)."""
    everything = np.arange(0x110000, dtype="<u4").tobytes().decode("utf-32-le", "surrogatepass")
    return bytes(_classes_in_order(everything))


# Not a class: a code point of _known whose class is not looked up yet.
_UNKNOWN = 254
_known = np.full(0x110000, _UNKNOWN, dtype=np.uint8)
_known_lock = threading.Lock()


def classes_of(code_points: np.ndarray) -> np.ndarray:
    """``code_point_classes()`` at each of an array of code points, as uint8 (combining
    characters unresolved: ``INHERITED``). Only the code points met so far are looked
    up, once each, so a text in a few scripts never pays for the whole table."""
    code_points = code_points.astype(np.intp, copy=False)  # indexing with intp is the fast path
    found = _known[code_points]
    missing = np.flatnonzero(found == _UNKNOWN)
    if len(missing):
        new = np.unique(code_points[missing])
        with _known_lock:
            _known[new] = np.frombuffer(_classes_in_order("".join(map(chr, new.tolist()))), dtype=np.uint8)
        found[missing] = _known[code_points[missing]]
    return found


def classify(text: str) -> list[int]:
    """The class index of every character of ``text`` (combining ones resolved)."""
    table = code_point_classes()
    out, previous = [], OTHER
    for char in text:
        index = table[ord(char)]
        if index == INHERITED:
            index = previous
        out.append(index)
        previous = index
    return out


def runs(text: str) -> list[tuple[int, int, int]]:
    """Maximal runs of characters of one class: (class index, start, end)."""
    out: list[tuple[int, int, int]] = []
    for position, index in enumerate(classify(text)):
        if out and out[-1][0] == index:
            out[-1] = (index, out[-1][1], position + 1)
        else:
            out.append((index, position, position + 1))
    return out


def class_of_text(classes: list[int]) -> int:
    """The class a span (a token, a word, a piece) is attributed to, given its
    characters' classes: its first writing-script character's, else its first
    non-whitespace character's, else whitespace (``other`` if it is empty)."""
    for index in classes:
        if index in WRITING:
            return index
    for index in classes:
        if index != WHITESPACE:
            return index
    return WHITESPACE if classes else OTHER


def class_of_span(classes: list[int]) -> int:
    """The class a token or a pre-token piece is attributed to, given the classes
    of the characters holding its bytes: its last one's, or its first one's if the
    last is whitespace (``other`` if it is empty)."""
    if not classes:
        return OTHER
    return classes[0] if classes[-1] == WHITESPACE else classes[-1]
