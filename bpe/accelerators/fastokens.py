r"""fastokens (PyPI ``fastokens``, Apache-2.0): a Rust ``tokenizer.json`` encoder
with a PCRE2 (JIT) pre-tokenizer.

Merge semantics: Hugging Face BPE, by the rank of the pair in the merge list,
which is our own (``bpe.accelerators.vocabulary_files``); no proof is needed.

Pre-tokenization: PCRE2 runs our regex itself. The file holds the spelling of
the pattern that Oniguruma, PCRE2 and ``regex`` read alike
(``bpe.pretokenize.onig_compatible``). Only the preset patterns are used: they
are the ones tests/bpe/accelerators/test_accelerators.py shows PCRE2 splits as ``regex`` does;
another pattern could use a construct the two engines read differently. The
exception is its gaps (older Unicode tables, and U+180E in ``\s``, measured
by ``bpe.accelerators.unicode_gaps``): a text holding one is declined.

Input: text as ``str``; the IDs come back from ``encode_batch_flat`` as
uint32 bytes, viewed as an ``array("I")`` without a Python int per token. The
engine is built from the file's contents in memory (a model name would be
looked up on the Hugging Face Hub).
"""

from __future__ import annotations

from array import array

from bpe.accelerators.native_engine import NativeEngine
from bpe.accelerators.proof import checked, measured_gaps, preset_spelling
from bpe.accelerators.vocabulary_files import pair_rank_json
from bpe.pretokenize import PRESETS, onig_compatible

NAME = "fastokens"

# Our preset -> the spelling of it that PCRE2 reads as the same regex.
_ONIG_SPELLING = {pattern: onig_compatible(pattern) for pattern in PRESETS.values()}


class FastokensEngine(NativeEngine):
    """fastokens' encoder for one vocabulary, declining texts with a code point of its
    gaps. Pickles as its gaps and ``tokenizer.json`` text.

    Args:
      gaps: the code point ranges to decline (``unicode_gaps``).
      tokenizer_json: the file built by ``pair_rank_json``.
    """

    def _load(self, tokenizer_json: str):
        from fastokens import Tokenizer

        return Tokenizer.from_json_str(tokenizer_json)

    def _encode(self, text: str) -> array:
        ids = array("I")
        ids.frombytes(self._backend.encode_batch_flat([text])[0])
        return ids


def build(tokenizer, proven: bool = False) -> tuple[FastokensEngine | None, str]:
    """(fastokens' engine for ``tokenizer``, why) or (None, why not). ``proven`` changes nothing: no proof is needed."""
    regex, why = preset_spelling(tokenizer, "fastokens", _ONIG_SPELLING,
                                 "custom pattern: PCRE2 is shown to split like regex only for the presets")
    if regex is None:
        return None, why
    gaps, why = measured_gaps(NAME, tokenizer.pattern, lambda tok: FastokensEngine("", pair_rank_json(tok, regex)))
    if gaps is None:
        return None, why
    data = pair_rank_json(tokenizer, regex)
    if data is None:
        return None, "two tokens have the same bytes; a tokenizer.json vocabulary cannot hold both"
    return checked(tokenizer, NAME, lambda: FastokensEngine(gaps, data),
                   "fastokens: pair-rank merges as ours, PCRE2 running our preset regex (tested)")
