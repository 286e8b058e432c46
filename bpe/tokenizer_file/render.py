"""tokenizer.json written: the Hugging Face file of a tokenizer, which ``tokenizers`` and ``transformers`` load.

Our files hold a Split pre-tokenizer with our regex, ByteLevel without its own
regex, a BPE model whose vocab maps the byte-level strings to our IDs, a
ByteLevel decoder and the special tokens as added tokens, so ``tokenizers`` and
``transformers`` load them and give our IDs. Hugging Face merges by the rank of
the *pair* in the merge list, our own semantics, so engines that read this
format (``bpe.accelerators``) load the same file (``render_with_regex``).
"""

from __future__ import annotations

import json
from typing import Mapping, Sequence

from bpe.pretokenize import onig_compatible
from bpe.tokenizer_file.spec import byte_to_char

__all__ = ["render", "render_with_regex"]


def render(token_bytes: Sequence[bytes] | Mapping[int, bytes], merges: Sequence[tuple[int, int]], pattern: str,
           special_tokens: Mapping[str, int]) -> str:
    """The tokenizer.json text of a tokenizer.

    Args:
      token_bytes: the bytes of each ordinary ID (special tokens excluded), as a
        list (ID = position) or a mapping.
      merges: (left ID, right ID) in rank order; each makes the token of their joined bytes.
      pattern: the pre-tokenizer regex; the file holds the spelling of it that
        Oniguruma, PCRE2 and ``regex`` read alike (``onig_compatible``).
      special_tokens: text -> ID, in ID order.

    Raises:
      ValueError: two tokens have the same bytes (the vocab, keyed by bytes, cannot hold both).
    """
    return render_with_regex(token_bytes, merges, onig_compatible(pattern), special_tokens, indent=1)


def render_with_regex(token_bytes: Sequence[bytes] | Mapping[int, bytes], merges: Sequence[tuple[int, int]],
                      split_regex: str, special_tokens: Mapping[str, int], indent: int | None = None) -> str:
    """``render`` with ``split_regex`` as the Split pattern, spelt exactly as given, and
    ``indent`` for the JSON (None: one line).

    Raises:
      ValueError: two tokens have the same bytes.
    """
    to_char = byte_to_char()
    items = token_bytes.items() if isinstance(token_bytes, Mapping) else enumerate(token_bytes)
    names = {token_id: "".join(to_char[b] for b in data) for token_id, data in items}
    vocab = {name: token_id for token_id, name in names.items()}
    if len(vocab) != len(names):
        first = next(token_id for token_id, name in names.items() if vocab[name] != token_id)
        raise ValueError(
            f"tokens {first} and {vocab[names[first]]} have the same bytes; tokenizer.json cannot hold both"
        )
    if sorted(special_tokens.values()) != list(range(len(vocab), len(vocab) + len(special_tokens))):
        # Hugging Face numbers added tokens on from the vocab's size unless the vocab
        # holds them: with gaps in the IDs (cl100k), the vocab must hold them.
        vocab.update(special_tokens)
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    return json.dumps(
        {
            "version": "1.0",
            "truncation": None,
            "padding": None,
            "added_tokens": [
                {
                    "id": token_id,
                    "content": content,
                    "single_word": False,
                    "lstrip": False,
                    "rstrip": False,
                    "normalized": False,
                    "special": True,
                }
                for content, token_id in special_tokens.items()
            ],
            "normalizer": None,
            "pre_tokenizer": {
                "type": "Sequence",
                "pretokenizers": [
                    {"type": "Split", "pattern": {"Regex": split_regex}, "behavior": "Isolated", "invert": False},
                    byte_level,
                ],
            },
            "post_processor": None,
            "decoder": byte_level,
            "model": {
                "type": "BPE",
                "dropout": None,
                "unk_token": None,
                "continuing_subword_prefix": None,
                "end_of_word_suffix": None,
                "fuse_unk": False,
                "byte_fallback": False,
                "ignore_merges": False,
                "vocab": vocab,
                "merges": [[names[left], names[right]] for left, right in merges],
            },
        },
        ensure_ascii=False,
        indent=indent,
    )
