"""gigatoken (PyPI ``gigatoken``, MIT): a SIMD pre-tokenizer and a Rust merge loop.

Merge semantics: loaded from a ``tokenizer.json``, gigatoken merges by the rank
of the pair in the merge list, using the merged token's ID as that rank. Our
merge i creates ID 256 + i, so the ranks are exactly ours and no proof is
needed (``bpe.accelerators.vocabulary_files``).

Pre-tokenization: gigatoken has no regex engine. It runs hand-written
pre-tokenizers for a fixed set of schemes and recognises each by the exact
Split regex string of the Hugging Face file. ``_SCHEME_REGEX`` gives, for each
of our presets, the string that selects gigatoken's version of it; that the
pieces are ours is what tests/bpe/accelerators/test_accelerators.py shows. Custom patterns are
refused. Its Unicode tables are older than ``regex``'s: a text holding one of
the code points in ``GIGATOKEN_GAPS`` is declined (``bpe.accelerators.unicode_guard``);
for a rank file, also one in ``TIKTOKEN_GAPS``.

A tiktoken rank file (``kind == "tiktoken"``) is loaded with gigatoken's own
tiktoken loader instead, which builds every token from the two parts tiktoken
ends with on the token's own bytes using only lower ranks, and panics on a
token that ends as one part or more than two (legal in a rank file: tiktoken
encodes it). So each rank file is proven before it is loaded:
``bpe.engines.rank_proof.rank_file_mismatch`` finds every token built from two
parts, and merging by those pairs giving tiktoken's IDs on every text; so
whether gigatoken then merges by pair or by the rank of the joined bytes, its
IDs are tiktoken's. A file that fails the proof is left to tiktoken's engine.
Its pre-tokenizer is named by scheme (``_SCHEME_NAME``) rather than by regex.

Input: the text's UTF-8 bytes (gigatoken also takes a ``str``, more slowly);
the IDs come back as a numpy uint32 array. Loading from a repo id or a file
name would look on the Hugging Face Hub, so the engine is built only from the
file's contents, in memory.
"""

from __future__ import annotations

from bpe.accelerators.native_engine import NativeEngine
from bpe.accelerators.proof import checked, preset_spelling
from bpe.accelerators.unicode_guard import GIGATOKEN_GAPS, TIKTOKEN_GAPS
from bpe.accelerators.vocabulary_files import pair_rank_json, rank_file
from bpe.engines import rank_proof
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


# Our preset -> gigatoken's name for that scheme, for rank files.
_SCHEME_NAME = {GPT2_PATTERN: "gpt2", CL100K_PATTERN: "gpt4", O200K_PATTERN: "o200k"}


class GigatokenEngine(NativeEngine):
    """gigatoken's encoder for one vocabulary, declining texts with a code point its
    Unicode tables lack (``GIGATOKEN_GAPS``). Pickles as its ``tokenizer.json`` text.

    Args:
      tokenizer_json: the file built by ``pair_rank_json``.
    """

    GAPS = GIGATOKEN_GAPS

    def _load(self, tokenizer_json: str):
        from gigatoken.gigatoken_rs import load_hf_json

        return load_hf_json(tokenizer_json)

    def _encode(self, text: str):
        # Its own UTF-8 bytes: gigatoken reads them faster than a str (a lone
        # surrogate raises here); the IDs come back as a numpy uint32 array.
        return self._backend.encode(text.encode("utf-8"))

    def encode_utf8(self, data: bytes, text: str | None):
        """``encode`` of valid UTF-8 bytes; ``text`` is their decoding, None for ASCII."""
        if text is not None and self.guard.rejects(text):
            return None
        return self._backend.encode(data)


class GigatokenRankEngine(GigatokenEngine):
    """gigatoken's encoder for a tiktoken rank file. Pickles as the rank file's
    text and its scheme.

    Args:
      rank_file: the file's contents (base64 token, rank per line).
      scheme: gigatoken's name of the pre-tokenizer (``_SCHEME_NAME``).
    """

    # The file's IDs are tiktoken's: declined too are the texts where tiktoken's
    # Unicode tables differ from ours (and so, gigatoken's being ours, from gigatoken's).
    GAPS = f"{GIGATOKEN_GAPS} {TIKTOKEN_GAPS}"

    def _load(self, rank_file: bytes, scheme: str):
        import tempfile

        from gigatoken.gigatoken_rs import BPETokenizer

        # Its loader reads a path; no special tokens, so their strings stay ordinary text.
        with tempfile.NamedTemporaryFile(suffix=".tiktoken") as f:
            f.write(rank_file)
            f.flush()
            return BPETokenizer.from_tiktoken(f.name, scheme, {})


def build(tokenizer, proven: bool = False) -> tuple[GigatokenEngine | None, str]:
    """(gigatoken's engine for ``tokenizer``, why) or (None, why not).

    ``proven``: the O(vocabulary) proof of a rank file already passed for a
    tokenizer with this SHA-256 (``bpe.engines.from_proof``); skip it. Our own
    tokenizers need no proof.
    """
    regex, why = preset_spelling(tokenizer, "gigatoken", TESTED_VERSIONS, _SCHEME_REGEX,
                                 "gigatoken runs only its built-in pre-tokenizers, not a custom pattern")
    if regex is None:
        return None, why
    if tokenizer.kind == "tiktoken":
        mismatch = None if proven else rank_proof.rank_file_mismatch(tokenizer.ordinary_tokens())
        if mismatch:
            return None, mismatch
        make, semantics = (lambda: GigatokenRankEngine(rank_file(tokenizer), _SCHEME_NAME[tokenizer.pattern]),
                           "rank-of-bytes merges as the rank file's (proven for this file)")
    elif tokenizer.kind == "beam-bpe":
        data = pair_rank_json(tokenizer, regex)
        if data is None:
            return None, "two tokens have the same bytes; gigatoken's vocabulary cannot hold both"
        make, semantics = (lambda: GigatokenEngine(data)), "pair-rank merges as ours"
    else:
        return None, f"gigatoken is proven for beam-bpe tokenizers and tiktoken rank files, not {tokenizer.kind} files"
    return checked(tokenizer, NAME, make, f"gigatoken: {semantics}, its pre-tokenizer for the preset (tested)")
