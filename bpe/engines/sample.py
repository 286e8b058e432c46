"""The verification sample: text every engine must encode as the reference does before it is used.

It exercises every branch of the preset patterns and the places where regex
engines disagree most often: Unicode whitespace and categories, digits of
other scripts, contractions in both cases, CR/LF runs, trailing spaces,
slashes before line ends, special-token strings as text. tiktoken's engine is
checked on the whole sample (``VERIFICATION_SAMPLE``); an accelerator line by
line (``SAMPLE_LINES``), so that a line it declines (``bpe.accelerators.unicode_guard``)
is skipped and the others are still checked.
"""

from __future__ import annotations

__all__ = ["SAMPLE_LINES", "VERIFICATION_SAMPLE"]

SAMPLE_LINES = (
    "Hello, world! It's 2024; we'll see—they're OK'd. I'M HERE'S 'LL 'VE 'RE 'D 'T.\n",
    "  leading and   multiple   spaces \t\ttabs\r\n\r\nCRLF\n\n\n  \n trailing   ",
    "numbers 1 12 123 1234 12345 3.14159 1,000,000 ١٢٣٤٥ １２３４ ⅫⅣ ²³ ½\n",
    "Ünïcödé façade naïve coöperate Straße ΑΒΓ αβγ Кириллица עברית العربية हिन्दी ไทย\n",
    "漢字かなカナ한국어 中文没有空格的句子很长很长 😀👍🏽👨‍👩‍👧 e\u0301 a\u0308 \u200d\u200b\ufeff\n",
    "".join(chr(c) for c in range(0x00, 0x80)),
    "\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a",
    "\u2028\u2029\u202f\u205f\u3000 x\x1c\x1d\x1e\x1fy \u00ad\u034f\u180e\n",
    # The same without U+180E, which the PCRE2 engines decline, and U+180E on its own.
    "\u2028\u2029\u202f\u205f\u3000 x\x1c\x1d\x1e\x1fy \u00ad\u034f\n",
    "a\u180eb \u180e\n",
    "def f(x):\n    return {'a': [1, 2]}  # comment\n\tif x <= 0: pass\n",
    "<|endoftext|> <s></s> [CLS] @@ ## $$ %% ^^ && ** (( )) __ ++ == ~~ `` || \\\\ // ?? !! ...\n",
    "a/b/c\n/\r\n x/\n ",
)

VERIFICATION_SAMPLE = "".join(SAMPLE_LINES)
