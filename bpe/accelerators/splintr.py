r"""splintr (PyPI ``splintr-rs``, MIT): a Rust tiktoken-style encoder with a
PCRE2 (JIT) pre-tokenizer.

Merge semantics: tiktoken's, by the rank of the concatenated bytes (our IDs as
ranks). That equals ours only where ``bpe.engines.rank_proof.rank_mismatch`` finds nothing for the
vocabulary, so every build runs that proof.

Pre-tokenization: splintr compiles the pattern with its own regex engine
first, which has no possessive quantifiers, and then with PCRE2. It gets
``_POSSESSIVE_FREE``: each preset spelled without them. It is the same regex:
every possessive quantifier in the presets ends its alternative or is followed
by something its atom never matches, so backtracking never gives back what it
took; and in ``\s++$`` the longest run is the only one ``$`` can follow. Only
the presets are used; tests/bpe/accelerators/test_accelerators.py shows PCRE2 splits them as
``regex`` does, except for its gaps (older Unicode tables, and U+180E in
``\s``, measured by ``bpe.accelerators.unicode_gaps``): a text holding one is declined.

Input: text as ``str``; ``encode_flat`` gives the IDs as uint32 bytes, viewed
as an ``array("I")``. splintr's bundled vocabularies are not used.
"""

from __future__ import annotations

from array import array

from bpe.accelerators.native_engine import NativeEngine
from bpe.accelerators.proof import checked, measured_gaps, preset_spelling
from bpe.accelerators.vocabulary_files import rank_file
from bpe.engines import rank_proof
from bpe.pretokenize import CL100K_PATTERN, GPT2_PATTERN, O200K_PATTERN

NAME = "splintr"

_POSSESSIVE_FREE = {
    GPT2_PATTERN: r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+$|\s+(?!\S)|\s""",
    CL100K_PATTERN: (
        r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
        r"""|\s+$|\s*[\r\n]|\s+(?!\S)|\s"""
    ),
    O200K_PATTERN: O200K_PATTERN,
}


class SplintrEngine(NativeEngine):
    """splintr's encoder for one vocabulary, on PCRE2, declining texts with a code point
    of its gaps. Pickles as its gaps, rank file and pattern.

    Args:
      gaps: the code point ranges to decline (``unicode_gaps``).
      ranks: the vocabulary as a tiktoken rank file (base64 token, rank per line).
      pattern: the pre-tokenizer regex, without possessive quantifiers.
    """

    def _load(self, ranks: bytes, pattern: str):
        from splintr import Tokenizer

        return Tokenizer.from_bytes(ranks, pattern, {}).pcre2(True)

    def _encode(self, text: str) -> array:
        ids = array("I")
        ids.frombytes(self._backend.encode_flat(text))
        return ids


def build(tokenizer, proven: bool = False) -> tuple[SplintrEngine | None, str]:
    """(splintr's engine for ``tokenizer``, why) or (None, why not).

    ``proven``: the O(vocabulary) proof already passed for a tokenizer with
    this SHA-256 (``bpe.engines.from_proof``); skip it.
    """
    pattern, why = preset_spelling(tokenizer, "splintr-rs", _POSSESSIVE_FREE,
                                   "custom pattern: splintr is shown to split like regex only for the presets")
    if pattern is None:
        return None, why
    gaps, why = measured_gaps(NAME, tokenizer.pattern, lambda tok: SplintrEngine("", rank_file(tok), pattern))
    if gaps is None:
        return None, why
    mismatch = None if proven else rank_proof.rank_mismatch(tokenizer)
    if mismatch:
        return None, mismatch
    return checked(tokenizer, NAME, lambda: SplintrEngine(gaps, rank_file(tokenizer), pattern),
                   "splintr: rank merges proven equal to ours, PCRE2 running our preset regex (tested)")
