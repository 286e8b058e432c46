"""Pre-tokenization: split text into the pieces that merges never cross.

The presets are exactly the patterns tiktoken uses for r50k_base (GPT-2),
cl100k_base and o200k_base. Any other string is taken as a regex.

Bytes that are not valid UTF-8 are split losslessly: they are decoded with
``surrogateescape`` (each bad byte becomes one lone surrogate U+DC80..U+DCFF,
which the patterns treat as punctuation), split, and every piece is encoded back
with the same handler, giving exactly the original bytes.
"""

from __future__ import annotations

from typing import Iterable, Iterator

import regex

GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""

CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)

O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)

PRESETS = {
    "gpt2": GPT2_PATTERN,
    "cl100k": CL100K_PATTERN,
    "o200k": O200K_PATTERN,
    # The regex of HF tokenizers' ByteLevel pre-tokenizer (use_regex=True): with
    # tie_break="hf" training gives HF BpeTrainer's merges.
    "hf-bytelevel": r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
}


def resolve_pattern(pattern: str) -> str:
    """Returns the regex for a preset name, or ``pattern`` itself if it is not one."""
    return PRESETS.get(pattern, pattern)


# An atom followed by a possessive interval quantifier such as ``\p{N}{1,3}+``.
_POSSESSIVE_INTERVAL = regex.compile(r"(\\[pP]\{[^}]*\}|\\.|\[(?:\\.|[^\]\\])*\]|[^\\()\[\]{}|])(\{\d+(?:,\d*)?\})\+")


def onig_compatible(pattern: str) -> str:
    r"""The same regex, spelled so that Hugging Face tokenizers (Oniguruma) reads it alike.

    Oniguruma has no possessive interval quantifier: it reads ``X{1,3}+`` as
    ``(X{1,3})+``, so cl100k's ``\p{N}{1,3}+`` would take any run of digits. An
    atomic group ``(?>X{1,3})`` means the same in every engine (regex, Oniguruma,
    tiktoken's fancy-regex).
    """
    return _POSSESSIVE_INTERVAL.sub(r"(?>\1\2)", resolve_pattern(pattern))


def compile_pattern(pattern: str) -> "regex.Pattern[str]":
    """Compiles a preset name or a regex; an invalid regex is a ValueError saying why."""
    source = resolve_pattern(pattern)
    if not source:
        raise ValueError("invalid pre-tokenizer pattern: it is empty")
    try:
        compiled = regex.compile(source)
    except regex.error as e:
        raise ValueError(f"invalid pre-tokenizer regex {source!r}: {e}") from None
    return compiled


def to_text(data: bytes | str) -> tuple[str, str]:
    """Turns input into (text, errors) such that ``piece.encode("utf-8", errors)``
    gives back each piece's original bytes."""
    if isinstance(data, str):
        # A str may hold lone surrogates (U+D800..U+DFFF); keep them as their
        # 3-byte forms rather than fail or replace them.
        return data, "surrogatepass"
    try:
        return data.decode("utf-8"), "strict"
    except UnicodeDecodeError:
        return data.decode("utf-8", "surrogateescape"), "surrogateescape"


class PreTokenizer:
    """Splits text into pieces with a regex; ``segments`` splits out allowed special tokens first.

    Args:
      pattern: a preset name (``gpt2``, ``cl100k``, ``o200k``) or a regex.
    """

    def __init__(self, pattern: str = "gpt2"):
        self.pattern = resolve_pattern(pattern)
        self.regex = compile_pattern(pattern)
        # The presets match every character, so findall loses nothing. A custom
        # regex may not: the text between its matches becomes pieces of its own.
        self.split = self.regex.findall if self.pattern in PRESETS.values() else self._split_keeping_gaps
        self._special_regex_cache: dict[frozenset[str], regex.Pattern] = {}

    def pieces(self, data: bytes | str) -> list[bytes]:
        """The pieces of ``data`` as bytes; their concatenation is the input's bytes."""
        text, errors = to_text(data)
        return [piece.encode("utf-8", errors) for piece in self.split(text)]

    def _split_keeping_gaps(self, text: str) -> list[str]:
        return list(self.iter_split(text))

    def iter_split(self, text: str) -> Iterator[str]:
        """Like ``split``, one piece at a time, for texts too big to hold all their
        pieces at once. Text between matches is yielded as pieces of its own."""
        end = 0
        for match in self.regex.finditer(text):
            if match.start() > end:
                yield text[end : match.start()]
            if match.end() > match.start():
                yield match.group()
            end = match.end()
        if end < len(text):
            yield text[end:]

    def segments(self, text: str, allowed_special: Iterable[str] = ()) -> Iterator[tuple[str, bool]]:
        """Yields (segment, is_special): ordinary text between allowed special tokens.

        Longer special tokens win over shorter ones starting at the same place.
        """
        allowed = frozenset(allowed_special)
        if not allowed:
            if text:
                yield text, False
            return
        finder = self._special_regex_cache.get(allowed)
        if finder is None:
            ordered = sorted(allowed, key=lambda s: (-len(s), s))
            finder = regex.compile("|".join(regex.escape(s) for s in ordered))
            self._special_regex_cache[allowed] = finder
        start = 0
        for match in finder.finditer(text):
            if match.start() > start:
                yield text[start : match.start()], False
            yield match.group(), True
            start = match.end()
        if start < len(text):
            yield text[start:], False
