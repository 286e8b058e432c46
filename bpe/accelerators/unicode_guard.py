"""Texts an engine is not proven on: those holding a code point that the
engine's Unicode tables class differently from ``regex``'s.

Each engine carries character tables from some Unicode version; ``regex``
carries its own. Where a code point is a letter, mark or number in one and
unassigned in the other, the two pre-tokenizers split differently around it.
The ranges each adapter names here are exactly the code points where
tests/bpe/accelerators/test_accelerators.py finds the engine's IDs differ from ours, for the tested
package versions; ``CodePointGuard.rejects`` says whether a text holds one, and
such a text is left to the next engine down.
"""

from __future__ import annotations

from functools import lru_cache

# Code points ``regex`` assigns (letters, marks, numbers of recent Unicode
# versions) that gigatoken's tables do not have.
GIGATOKEN_GAPS = (
    "0558 058B-058C 05C8-05C9 0B53-0B54 1ADE-1ADF 1AEC-1AF0 208F 209D-209F A7DD A7E2 AB6C-AB6D "
    "107BB-107BF 10ECB-10ECF 10ED9-10EEE 10EF0-10EF9 11B0A 11DF0-11DF1 1246F 12475-1247F 12550-12686 "
    "18CD6-18CDA 18D1F-18D20 18E00-19191 191A0-191D2 1B123-1B128 1B168 1D127-1D128 1D250-1D252 "
    "1D25B-1D25C 1D25F 1D280-1D281 1D6A6 1DF1F-1DF24 1DF2B-1DF81 1DF90-1DF96 1DFCD-1DFFF 2B81E 3D000-3FC3F"
)

# The code points ``regex`` assigns (letters, marks, numbers of recent Unicode
# versions) that tiktoken's regex engine and the PCRE2 builds in fastokens and
# splintr both lack: measured for each, the same ranges.
_TIKTOKEN_AND_PCRE2_GAPS = (
    "0558 058B-058C 05C8-05C9 088F 0B53-0B54 0C5C 0CDC 1ACF-1AF0 208F 209D-209F A7CE-A7CF A7D2 A7D4 "
    "A7DD A7E2 A7F1 AB6C-AB6D 107BB-107BF 10940-10959 10EC5-10EC7 10ECB-10ECF 10ED9-10EEE "
    "10EF0-10EFB 11B0A 11B60-11B67 11DB0-11DDB 11DE0-11DE9 11DF0-11DF1 1246F 12475-1247F 12550-12686 "
    "16EA0-16EB8 16EBB-16ED3 16FF2-16FF6 187F8-187FF 18CD6-18CDA 18D09-18D20 18D80-18DF2 18E00-19191 "
    "191A0-191D2 1B123-1B128 1B168 1D127-1D128 1D250-1D252 1D25B-1D25C 1D25F 1D280-1D281 1D6A6 "
    "1DF1F-1DF24 1DF2B-1DF81 1DF90-1DF96 1DFCD-1DFFF 1E6C0-1E6DE 1E6E0-1E6F5 1E6FE-1E6FF 2B73A-2B73F "
    "2B81E 2CEA2-2CEAD 323B0-33479 3D000-3FC3F"
)

# The gaps of tiktoken's regex engine (its letter, mark and number classes,
# including the case classes o200k's pattern uses): those, and U+0295. Where
# our own tokenizers are concerned, a text holding one goes from tiktoken's
# engine to the reference. A tiktoken rank file's own library is tiktoken, so
# there its engine keeps such texts and the accelerators decline them.
TIKTOKEN_GAPS = f"0295 {_TIKTOKEN_AND_PCRE2_GAPS}"

# The gaps of the PCRE2 builds in fastokens and splintr: those, and U+180E
# (MONGOLIAN VOWEL SEPARATOR), which PCRE2's \s matches and ``regex``'s does not.
PCRE2_GAPS = f"180E {_TIKTOKEN_AND_PCRE2_GAPS}"


def parse_ranges(ranges: str) -> list[tuple[int, int]]:
    """"0558 058B-058C" -> [(0x558, 0x558), (0x58B, 0x58C)]."""
    parsed = []
    for item in ranges.split():
        first, _, last = item.partition("-")
        parsed.append((int(first, 16), int(last or first, 16)))
    return parsed


@lru_cache(maxsize=None)
def _table(ranges: str):
    """A flag per code point (numpy bool array), built once per process."""
    import numpy as np

    table = np.zeros(0x110000, dtype=bool)
    for first, last in parse_ranges(ranges):
        table[first : last + 1] = True
    return table


class CodePointGuard:
    """Whether a text holds a code point from ``ranges``.

    Pickles as its ranges; the lookup table is built where it is first used.

    Args:
      ranges: space-separated hexadecimal code points and ranges ("0558 058B-058C").
    """

    def __init__(self, ranges: str):
        self.ranges = ranges

    def __reduce__(self):
        return CodePointGuard, (self.ranges,)

    def rejects(self, text: str) -> bool:
        if text.isascii():  # a flag CPython keeps on every str: free
            return False
        import numpy as np

        return self.rejects_code_points(np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32))

    def rejects_code_points(self, code_points) -> bool:
        """``rejects`` of the text of these code points (an integer numpy array)."""
        import numpy as np

        return bool(np.take(_table(self.ranges), code_points).any())
