"""gigatoken (PyPI ``gigatoken``, MIT): a SIMD pre-tokenizer and a Rust merge loop.

Merge semantics: loaded from a ``tokenizer.json``, gigatoken merges by the rank
of the pair in the merge list, using the merged token's ID as that rank. Our
merge i creates ID 256 + i, so the ranks are exactly ours and no proof is
needed (``bpe.accelerators.pair_file``).

Pre-tokenization: gigatoken has no regex engine. It runs hand-written
pre-tokenizers for a fixed set of schemes and recognises each by the exact
Split regex string of the Hugging Face file. ``_SCHEME_REGEX`` gives, for each
of our presets, the string that selects gigatoken's version of it; that the
pieces are ours is what tests/test_accelerators.py shows. Custom patterns are
refused. Its Unicode tables are older than ``regex``'s: a text holding one of
the code points in ``GIGATOKEN_GAPS`` is declined (``bpe.accelerators.unicode_guard``).

Input: the text's UTF-8 bytes (gigatoken also takes a ``str``, more slowly);
the IDs come back as a numpy uint32 array. Loading from a repo id or a file
name would look on the Hugging Face Hub, so the engine is built only from the
file's contents, in memory.
"""

from __future__ import annotations

from bpe.accelerators.pair_file import pair_rank_json
from bpe.accelerators.proof import sample_mismatch, untested_version
from bpe.accelerators.unicode_guard import GIGATOKEN_GAPS, CodePointGuard
from bpe.pretokenize import CL100K_PATTERN, GPT2_PATTERN, O200K_PATTERN

NAME = "gigatoken"
TESTED_VERSIONS = ("0.10.0",)

# Our preset -> the Split regex by which gigatoken picks its own pre-tokenizer
# for that scheme ("gpt2", "gpt4", "o200k" in its terms).
_SCHEME_REGEX = {
    GPT2_PATTERN: r"'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
    CL100K_PATTERN: (
        r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"
        r"|\s++$|\s*[\r\n]|\s+(?!\S)|\s+"
    ),
    O200K_PATTERN: O200K_PATTERN,
}


class GigatokenEngine:
    """gigatoken's encoder for one vocabulary. Pickles as its ``tokenizer.json``
    text and loads it again where it is unpickled.

    Args:
      tokenizer_json: the file built by ``pair_rank_json``.
    """

    def __init__(self, tokenizer_json: str):
        from gigatoken.gigatoken_rs import load_hf_json

        self.tokenizer_json = tokenizer_json
        self._backend = load_hf_json(tokenizer_json)
        self.guard = CodePointGuard(GIGATOKEN_GAPS)

    def __reduce__(self):
        return GigatokenEngine, (self.tokenizer_json,)

    def encode(self, text: str):
        """The IDs of valid text as a numpy uint32 array; None for a text holding
        a code point gigatoken's Unicode tables lack (``GIGATOKEN_GAPS``)."""
        if self.guard.rejects(text):
            return None
        # Its own UTF-8 bytes: gigatoken reads them faster than a str (a lone
        # surrogate raises here).
        return self._backend.encode(text.encode("utf-8"))


def build(tokenizer, proven: bool = False) -> tuple[GigatokenEngine | None, str]:
    """(gigatoken's engine for ``tokenizer``, why) or (None, why not). ``proven`` changes nothing: no proof is needed."""
    unusable = untested_version("gigatoken", TESTED_VERSIONS)
    if unusable:
        return None, unusable
    regex = _SCHEME_REGEX.get(tokenizer.pattern)
    if regex is None:
        return None, "gigatoken runs only its built-in pre-tokenizers, not a custom pattern"
    data = pair_rank_json(tokenizer, regex)
    if data is None:
        return None, "two tokens have the same bytes; gigatoken's vocabulary cannot hold both"
    try:
        engine = GigatokenEngine(data)
    except Exception as e:  # whatever the native loader rejects means: not this engine
        return None, f"gigatoken rejected the vocabulary: {e}"
    mismatch = sample_mismatch(tokenizer, engine, NAME)
    if mismatch:
        return None, mismatch
    return engine, "gigatoken: pair-rank merges as ours, its pre-tokenizer for the preset (tested)"
