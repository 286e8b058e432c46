"""What a Hugging Face ``tokenizer.json`` is to beam-bpe: ``TokenizerSpec``, its alphabet, its error.

``TokenizerSpec`` is what a byte-level BPE file defines once it is read and
validated (``bpe.tokenizer_file.validate``); ``byte_to_char`` is the ByteLevel
alphabet in which the file spells token bytes; ``TokenizerFileError`` is the
one-line error every problem with a tokenizer file becomes.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache

__all__ = ["BYTE_LEVEL_PATTERN", "TOP_LEVEL_KEYS", "Step", "TokenizerFileError", "TokenizerSpec", "byte_to_char"]

# The top-level keys of a Hugging Face tokenizer.json.
# The top-level keys of a Hugging Face tokenizer.json.
TOP_LEVEL_KEYS = (
    "version", "truncation", "padding", "added_tokens", "normalizer",
    "pre_tokenizer", "post_processor", "decoder", "model",
)


class TokenizerFileError(ValueError):
    """A tokenizer file that is missing, not JSON, or not a valid beam-bpe tokenizer."""


@lru_cache(maxsize=None)
def byte_to_char() -> dict[int, str]:
    """GPT-2's reversible map from bytes to printable characters (HF's ByteLevel alphabet).

    Printable Latin-1 bytes stand for themselves; the rest are shifted to U+0100 and up.
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    mapping = {b: chr(b) for b in printable}
    shift = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + shift)
            shift += 1
    return mapping


# HF ByteLevel's own regex (``use_regex``), as tokenizers spells it.
BYTE_LEVEL_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
# A pre-tokenizer step: ("split", regex) splits every piece, keeping the text
# between matches as pieces; ("prefix_space", "") puts a space before every
# piece that does not start with one (ByteLevel's add_prefix_space).
Step = tuple[str, str]


@dataclasses.dataclass(frozen=True)
class TokenizerSpec:
    """What a byte-level BPE tokenizer.json defines.

    Attributes:
      token_bytes: the model's vocab, ID -> the bytes the token stands for.
      merges: (left ID, right ID) in rank order.
      merged_ids: the ID merge i creates.
      ignore_merges: a piece that is a whole token is that token.
      steps: the pre-tokenizer, as steps applied in order (see ``Step``).
      special_tokens: added tokens marked special, text -> ID.
      added_tokens: added tokens not marked special (matched in any text), text -> ID.
      bos_token, eos_token: the special tokens the post-processor puts around a
        single sequence, if it does.
      normalizer: ``"NFC"`` when the file normalizes text to NFC, else None.
      normalized_tokens: the added and special tokens marked ``normalized``:
        matched in the normalized text, after the others are matched in the text
        as given.
    """

    token_bytes: dict[int, bytes]
    merges: list[tuple[int, int]]
    merged_ids: list[int]
    ignore_merges: bool
    steps: tuple[Step, ...]
    special_tokens: dict[str, int]
    added_tokens: dict[str, int]
    bos_token: str | None = None
    eos_token: str | None = None
    normalizer: str | None = None
    normalized_tokens: frozenset[str] = frozenset()

    @property
    def pattern(self) -> str | None:
        """The regex, when the pre-tokenizer is one Split and nothing else."""
        if len(self.steps) == 1 and self.steps[0][0] == "split":
            return self.steps[0][1]
        return None

    def is_ours(self) -> bool:
        """Whether the file follows beam-bpe's ID contract, so that our own Tokenizer reproduces
        it: bytes 0..255; merges create the IDs from 256 on in increasing order, and special
        tokens hold the IDs between and after them, with no gap (an extension of ours keeps
        its base's special tokens before its new merges)."""
        n, special_ids = len(self.merges), set(self.special_tokens.values())
        ordinary = {i: data for i, data in self.token_bytes.items() if i not in special_ids}
        return (
            self.pattern is not None
            and self.normalizer is None
            and not self.ignore_merges
            and not self.added_tokens
            and self.bos_token is None
            and self.eos_token is None
            and len(ordinary) == 256 + n
            and all(ordinary.get(b) == bytes([b]) for b in range(256))
            and min(special_ids, default=256) >= 256
            and sorted([*self.merged_ids, *special_ids]) == list(range(256, 256 + n + len(special_ids)))
            and all(a < b for a, b in zip(self.merged_ids, self.merged_ids[1:]))
            and list(self.special_tokens.values()) == sorted(special_ids)
        )

    def specials_last(self) -> bool:
        """Whether the special tokens hold the IDs after every merge (the layout ``render`` writes)."""
        n = len(self.merges)
        return list(self.special_tokens.values()) == list(range(256 + n, 256 + n + len(self.special_tokens)))
