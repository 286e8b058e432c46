"""Texts an engine is not proven on: those holding a code point that the
engine's Unicode tables class differently from ``regex``'s.

Each engine carries character tables from some Unicode version; ``regex``
carries its own. Where a code point is a letter, mark or number in one and
unassigned in the other, the two pre-tokenizers split differently around it.
The ranges an engine's guard holds are exactly the code points where its
pre-tokenizer splits unlike ``regex``, measured for the installed versions
(``bpe.accelerators.unicode_gaps``); ``CodePointGuard.rejects`` says whether a
text holds one, and such a text is left to the next engine down.
"""

from __future__ import annotations

from functools import lru_cache


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
