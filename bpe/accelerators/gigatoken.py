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
the code points where it splits unlike ``regex`` (its gaps, measured by
``bpe.accelerators.unicode_gaps``) is declined; for a rank file, also one of
tiktoken's gaps.

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
from bpe.accelerators.proof import checked, measured_gaps, preset_spelling, tiktoken_gaps
from bpe.accelerators.vocabulary_files import pair_rank_json, rank_file
from bpe.engines import rank_proof
from bpe.pretokenize import CL100K_PATTERN, GPT2_PATTERN, O200K_PATTERN

NAME = "gigatoken"

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
    """gigatoken's encoder for one vocabulary, declining texts with a code point of
    its gaps. Pickles as its gaps and ``tokenizer.json`` text.

    Args:
      gaps: the code point ranges to decline (``unicode_gaps``).
      tokenizer_json: the file built by ``pair_rank_json``.
    """

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
    """gigatoken's encoder for a tiktoken rank file. Pickles as its gaps, the rank
    file's text and its scheme.

    Args:
      gaps: the code point ranges to decline: gigatoken's, and tiktoken's, since
        the file's IDs are tiktoken's (where tiktoken's tables differ from ours, so
        do they from gigatoken's where its are ours).
      rank_file: the file's contents (base64 token, rank per line).
      scheme: gigatoken's name of the pre-tokenizer (``_SCHEME_NAME``).
    """

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
    regex, why = preset_spelling(tokenizer, "gigatoken", _SCHEME_REGEX,
                                 "gigatoken runs only its built-in pre-tokenizers, not a custom pattern")
    if regex is None:
        return None, why
    if tokenizer.kind not in ("tiktoken", "beam-bpe"):
        return None, f"gigatoken is proven for beam-bpe tokenizers and tiktoken rank files, not {tokenizer.kind} files"
    gaps, why = measured_gaps(NAME, tokenizer.pattern, lambda tok: GigatokenEngine("", pair_rank_json(tok, regex)))
    if gaps is None:
        return None, why
    if tokenizer.kind == "tiktoken":
        tiktoken_ranges, why = tiktoken_gaps(tokenizer.pattern)
        if tiktoken_ranges is None:
            return None, why
        mismatch = None if proven else rank_proof.rank_file_mismatch(tokenizer.ordinary_tokens())
        if mismatch:
            return None, mismatch
        scheme = _SCHEME_NAME[tokenizer.pattern]
        make = lambda: GigatokenRankEngine(f"{gaps} {tiktoken_ranges}", rank_file(tokenizer), scheme)  # noqa: E731
        semantics = "rank-of-bytes merges as the rank file's (proven for this file)"
    else:
        data = pair_rank_json(tokenizer, regex)
        if data is None:
            return None, "two tokens have the same bytes; gigatoken's vocabulary cannot hold both"
        make, semantics = (lambda: GigatokenEngine(gaps, data)), "pair-rank merges as ours"
    return checked(tokenizer, NAME, make, f"gigatoken: {semantics}, its pre-tokenizer for the preset (tested)")
