"""What every adapter checks before it hands out an engine.

1. The package, and ``regex``, are versions the differential tests
   (tests/test_accelerators.py) ran against: pre-tokenizers and Unicode tables change
   between releases of both, and only the tested pair is known to split alike
   (the Unicode guards list the code points where they differ).
2. For engines that merge by the rank of the concatenated bytes (tiktoken's
   semantics), ``rank_mismatch`` finds nothing for this vocabulary.
3. Sample texts that exercise every branch of the preset patterns encode to
   the same IDs both ways (a last guard, cheap at build time); a line the
   engine declines (see ``unicode_guard``) is skipped.
"""

from __future__ import annotations

from importlib import metadata

# The ``regex`` releases whose Unicode tables the engines' guards were measured against.
REGEX_VERSIONS = ("2026.11.19",)

# Every branch of the preset patterns and where regex engines disagree most:
# Unicode whitespace and categories, digits of other scripts, contractions in
# both cases, CR/LF runs, trailing spaces, special-token strings as text.
SAMPLE_LINES = (
    "Hello, world! It's 2024; we'll see—they're OK'd. I'M HERE'S 'LL 'VE 'RE 'D 'T.\n",
    "  leading and   multiple   spaces \t\ttabs\r\n\r\nCRLF\n\n\n  \n trailing   ",
    "numbers 1 12 123 1234 12345 3.14159 1,000,000 ١٢٣٤٥ １２３４ ⅫⅣ ²³ ½\n",
    "Ünïcödé façade naïve coöperate Straße ΑΒΓ αβγ Кириллица עברית العربية हिन्दी ไทย\n",
    "漢字かなカナ한국어 中文没有空格的句子很长很长 😀👍🏽👨‍👩‍👧 e\u0301 a\u0308 \u200d\u200b\ufeff\n",
    "".join(chr(c) for c in range(0x00, 0x80)),
    "\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a",
    "\u2028\u2029\u202f\u205f\u3000 x\x1c\x1d\x1e\x1fy \u00ad\u034f\n",
    "a\u180eb \u180e\n",
    "def f(x):\n    return {'a': [1, 2]}  # comment\n\tif x <= 0: pass\n",
    "<|endoftext|> <s></s> [CLS] @@ ## $$ %% ^^ && ** (( )) __ ++ == ~~ `` || \\\\ // ?? !! ...\n",
    "a/b/c\n/\r\n x/\n ",
)


def untested_version(distribution: str, tested: tuple[str, ...]) -> str | None:
    """Why the installed ``distribution`` (or ``regex``) is not usable, or None
    if both are tested versions."""
    try:
        version = metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return f"{distribution} is not installed"
    if version not in tested:
        return f"{distribution} {version} is not a tested version ({', '.join(tested)})"
    if distribution != "regex":
        return untested_version("regex", REGEX_VERSIONS)
    return None


def rank_mismatch(tokenizer) -> str | None:
    """Why tiktoken-style rank merges could give other IDs than ours for this
    vocabulary, or None (the proof in the tokenizer's own tiktoken support)."""
    from bpe.engines import _rank_mismatch

    return _rank_mismatch(tokenizer)


def sample_mismatch(tokenizer, engine, name: str) -> str | None:
    """Why ``engine`` fails the sample check, or None."""
    for line_number, line in enumerate(SAMPLE_LINES):
        try:
            theirs = engine.encode(line)
        except Exception as e:  # a native failure is a reason, not a crash
            return f"{name} failed on verification sample line {line_number}: {e}"
        if theirs is None:
            continue
        if [int(i) for i in theirs] != tokenizer.reference.encode(line):
            return f"{name} differs from our encoder on verification sample line {line_number}"
    return None
