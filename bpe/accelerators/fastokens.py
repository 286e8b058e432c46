r"""fastokens (PyPI ``fastokens``, Apache-2.0): a Rust ``tokenizer.json`` encoder
with a PCRE2 (JIT) pre-tokenizer.

Merge semantics: Hugging Face BPE, by the rank of the pair in the merge list,
which is our own (``bpe.accelerators.vocabulary_files``); no proof is needed.

Pre-tokenization: PCRE2 runs our regex itself. The file holds the spelling of
the pattern that Oniguruma, PCRE2 and ``regex`` read alike
(``bpe.pretokenize.onig_compatible``). Only the preset patterns are used: they
are the ones tests/test_accelerators.py shows PCRE2 splits as ``regex`` does;
another pattern could use a construct the two engines read differently. The
exception is the code points in ``PCRE2_GAPS`` (older Unicode tables, and
U+180E in ``\s``): a text holding one is declined.

Input: text as ``str``; the IDs come back from ``encode_batch_flat`` as
uint32 bytes, viewed as an ``array("I")`` without a Python int per token. The
engine is built from the file's contents in memory (a model name would be
looked up on the Hugging Face Hub).
"""

from __future__ import annotations

from array import array

from bpe.accelerators.proof import checked, untested_version
from bpe.accelerators.unicode_guard import PCRE2_GAPS, CodePointGuard
from bpe.accelerators.vocabulary_files import pair_rank_json
from bpe.pretokenize import PRESETS, onig_compatible

NAME = "fastokens"
TESTED_VERSIONS = ("0.3.5",)


class FastokensEngine:
    """fastokens' encoder for one vocabulary. Pickles as its ``tokenizer.json``
    text and loads it again where it is unpickled.

    Args:
      tokenizer_json: the file built by ``pair_rank_json``.
    """

    def __init__(self, tokenizer_json: str):
        from fastokens import Tokenizer

        self.tokenizer_json = tokenizer_json
        self._backend = Tokenizer.from_json_str(tokenizer_json)
        self.guard = CodePointGuard(PCRE2_GAPS)

    def __reduce__(self):
        return FastokensEngine, (self.tokenizer_json,)

    def encode(self, text: str) -> array | None:
        """The IDs of valid text as an ``array("I")``; None for a text holding a
        code point PCRE2 classes differently (``PCRE2_GAPS``)."""
        if self.guard.rejects(text):
            return None
        ids = array("I")
        ids.frombytes(self._backend.encode_batch_flat([text])[0])
        return ids


def build(tokenizer, proven: bool = False) -> tuple[FastokensEngine | None, str]:
    """(fastokens' engine for ``tokenizer``, why) or (None, why not). ``proven`` changes nothing: no proof is needed."""
    unusable = untested_version("fastokens", TESTED_VERSIONS)
    if unusable:
        return None, unusable
    if tokenizer.pattern not in PRESETS.values():
        return None, "custom pattern: PCRE2 is shown to split like regex only for the presets"
    data = pair_rank_json(tokenizer, onig_compatible(tokenizer.pattern))
    if data is None:
        return None, "two tokens have the same bytes; a tokenizer.json vocabulary cannot hold both"
    return checked(tokenizer, NAME, lambda: FastokensEngine(data),
                   "fastokens: pair-rank merges as ours, PCRE2 running our preset regex (tested)")
