"""A tokenizer's pre-tokenizer regex as a JavaScript regex that matches exactly the same text.

The page's live box splits text in the browser, so the browser's regex must
find the same pieces as the ``regex`` module. Character classes are where
engines differ (``\\s`` holds U+0085 in ``regex`` but U+FEFF in JavaScript; the
Unicode version behind ``\\p{L}`` differs; ``(?i:s)`` matches U+017F in
both, by different rules), so every class, escape and case-insensitive letter
is replaced by the explicit set of code points the ``regex`` module matches,
computed here. The operators left (sequence, alternation, greedy and lazy
quantifiers, groups, lookahead) mean the same in both backtracking engines.
The rest is rewritten exactly:

- possessive quantifiers and atomic groups, which JavaScript lacks, become a
  lookahead capturing the greedy match and a backreference to it,
  ``(?=(?<aN>X+))\\k<aN>`` (a JavaScript lookahead is atomic);
- ``$`` (end, or before a final newline) becomes ``(?=\\n?$)``;
- capturing groups become non-capturing (the pieces are whole matches).

Anything else (lookbehind, backreferences, word boundaries, inline flags other
than ``i``, ...) raises ``UnsupportedPattern``, and the page says so instead of
guessing. Empty matches are refused by the page at run time.

    source = to_javascript(tokenizer.pattern)   # use as new RegExp(source, "gu")
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import regex

__all__ = ["UnsupportedPattern", "to_javascript"]


class UnsupportedPattern(ValueError):
    """The pattern uses a construct this translation cannot reproduce exactly."""


@lru_cache(maxsize=1)
def _everything() -> str:
    """Every code point in order, lone surrogates included."""
    return np.arange(0x110000, dtype="<u4").tobytes().decode("utf-32-le", "surrogatepass")


@lru_cache(maxsize=None)
def code_point_set(python_class: str, ignore_case: bool) -> tuple[tuple[int, int], ...]:
    """The ranges of code points that one-character ``python_class`` matches in the ``regex`` module."""
    try:
        compiled = regex.compile(("(?i)" if ignore_case else "") + f"(?:{python_class})+")
    except regex.error as e:
        raise UnsupportedPattern(f"cannot read {python_class!r}: {e}") from None
    return tuple(match.span() for match in compiled.finditer(_everything()))


def _js_class(ranges: tuple[tuple[int, int], ...]) -> str:
    if not ranges:
        return "[]"  # matches nothing, as in Python
    parts = []
    for start, end in ranges:
        last = end - 1
        parts.append(f"\\u{{{start:x}}}" if start == last else f"\\u{{{start:x}}}-\\u{{{last:x}}}")
    return "[" + "".join(parts) + "]"


_CLASS_ESCAPES = set("pPsSdDwWhH")
_LITERAL_ESCAPES = {"r": "\r", "n": "\n", "t": "\t", "f": "\f", "v": "\v", "a": "\a", "e": "\x1b"}
_UNSUPPORTED_ESCAPES = {"b": "word boundaries", "B": "word boundaries", "A": "anchors", "Z": "anchors",
                        "z": "anchors", "G": "\\G", "K": "\\K", "X": "grapheme clusters", "N": "named characters",
                        "m": "word boundaries", "M": "word boundaries"}


class _Translator:
    def __init__(self, pattern: str):
        self.s, self.i, self.atomic = pattern, 0, 0

    def fail(self, what: str):
        raise UnsupportedPattern(f"the pattern uses {what} (at offset {self.i}), which the browser cannot match exactly")

    def peek(self, n: int = 1) -> str:
        return self.s[self.i : self.i + n]

    def alternation(self, ignore_case: bool) -> str:
        out = [self.sequence(ignore_case)]
        while self.peek() == "|":
            self.i += 1
            out.append(self.sequence(ignore_case))
        return "|".join(out)

    def sequence(self, ignore_case: bool) -> str:
        out = []
        while self.i < len(self.s) and self.peek() not in "|)":
            atom, quantifiable = self.atom(ignore_case)
            out.append(self.quantified(atom) if quantifiable else self.refuse_quantifier(atom))
        return "".join(out)

    def refuse_quantifier(self, atom: str) -> str:
        if self.peek() in ("*", "+", "?") or regex.match(r"\{\d", self.s[self.i :]):
            self.fail("a quantified assertion")
        return atom

    def quantified(self, atom: str) -> str:
        match = regex.match(r"(\*|\+|\?|\{\d+(?:,\d*)?\})([+?]?)", self.s[self.i :])
        if not match:
            if self.peek() == "{":
                self.fail("a brace that is not a quantifier")
            return atom
        self.i += match.end()
        quantifier, mode = match.groups()
        if mode == "+":  # possessive: an atomic group around the greedy form
            return self.make_atomic(f"(?:{atom}){quantifier}")
        return f"(?:{atom}){quantifier}{mode}"

    def make_atomic(self, body: str) -> str:
        self.atomic += 1
        name = f"a{self.atomic}"
        return f"(?=(?<{name}>{body}))\\k<{name}>"

    def atom(self, ignore_case: bool) -> tuple[str, bool]:
        c = self.peek()
        if c == "(":
            return self.group(ignore_case)
        if c == "[":
            return self.char_class(ignore_case), True
        if c == "\\":
            return self.escape(ignore_case), True
        self.i += 1
        if c == ".":
            return _js_class(code_point_set(".", ignore_case)), True
        if c == "^":
            return "^", False
        if c == "$":
            return "(?=\\n?$)", False
        if c in "*+?{":
            self.fail("a quantifier with nothing before it")
        return self.literal(c, ignore_case), True

    def literal(self, char: str, ignore_case: bool) -> str:
        if not ignore_case:  # a character matches itself only
            return f"\\u{{{ord(char):x}}}"
        ranges = code_point_set(regex.escape(char), ignore_case)
        if len(ranges) == 1 and ranges[0][1] - ranges[0][0] == 1:
            return f"\\u{{{ord(char):x}}}"
        return _js_class(ranges)

    def escape(self, ignore_case: bool) -> str:
        c = self.s[self.i + 1 : self.i + 2]
        if c in ("p", "P"):
            end = self.s.find("}", self.i)
            if self.s[self.i + 2 : self.i + 3] != "{" or end < 0:
                self.fail("a one-letter property")
            source, self.i = self.s[self.i : end + 1], end + 1
            return _js_class(code_point_set(source, ignore_case))
        if c in _CLASS_ESCAPES:
            self.i += 2
            return _js_class(code_point_set("\\" + c, ignore_case))
        if c in _LITERAL_ESCAPES:
            self.i += 2
            return self.literal(_LITERAL_ESCAPES[c], ignore_case)
        hex_escape = regex.match(r"\\(?:x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8}))", self.s[self.i :])
        if hex_escape:
            self.i += hex_escape.end()
            return self.literal(chr(int(next(g for g in hex_escape.groups() if g), 16)), ignore_case)
        if c in _UNSUPPORTED_ESCAPES:
            self.fail(_UNSUPPORTED_ESCAPES[c])
        if c.isalnum() or not c:
            self.fail(f"the escape \\{c}")
        self.i += 2
        return self.literal(c, ignore_case)

    def char_class(self, ignore_case: bool) -> str:
        """A bracket class, passed whole to the regex module to learn its code points."""
        match = regex.match(r"\[\^?\]?(?:\\.|\\[pP]\{[^}]*\}|[^\]\\\[])*\]", self.s[self.i :])
        if not match:
            self.fail("a nested or unterminated character class")
        self.i += match.end()
        return _js_class(code_point_set(match.group(), ignore_case))

    def group(self, ignore_case: bool) -> tuple[str, bool]:
        rest = self.s[self.i :]
        for prefix, kind in (("(?:", "group"), ("(?>", "atomic"), ("(?=", "ahead"), ("(?!", "not ahead"),
                             ("(?i:", "ignore case")):
            if rest.startswith(prefix):
                break
        else:
            named = regex.match(r"\(\?P?<[A-Za-z_]\w*>", rest)
            if named:
                prefix, kind = named.group(), "group"
            elif rest.startswith("(?"):
                self.fail(f"the group {rest[:4]!r}")
            else:
                prefix, kind = "(", "group"
        self.i += len(prefix)
        inner = self.alternation(ignore_case or kind == "ignore case")
        if self.peek() != ")":
            self.fail("an unclosed group")
        self.i += 1
        if kind == "atomic":
            return self.make_atomic(inner), True
        if kind == "ahead":
            return f"(?={inner})", False
        if kind == "not ahead":
            return f"(?!{inner})", False
        return f"(?:{inner})", True


def to_javascript(pattern: str) -> str:
    """The JavaScript regex source (flags ``gu``) matching exactly what ``pattern`` matches.

    Raises:
      UnsupportedPattern: the pattern uses something without an exact JavaScript form.
    """
    translator = _Translator(pattern)
    source = translator.alternation(ignore_case=False)
    if translator.i != len(pattern):
        translator.fail("an unbalanced ')'")
    return source
