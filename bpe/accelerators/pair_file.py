"""A tokenizer as a Hugging Face ``tokenizer.json`` for engines that read that format.

Such engines merge by the rank of the *pair* in the file's merge list, which is
our own semantics: merge i joins (left, right) into ID 256 + i, and the list
order is the learned order. The file holds no added tokens, so special-token
strings stay ordinary text, as in ``Tokenizer.encode(text)``. The Split regex
is whatever spelling of our pattern the engine reads as the same regex.
"""

from __future__ import annotations

import json
from functools import lru_cache


@lru_cache(maxsize=None)
def _byte_names() -> dict[int, str]:
    """GPT-2's byte -> printable character map (the ByteLevel alphabet), as a
    ``str.translate`` table from the latin-1 character of each byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    names = {b: chr(b) for b in printable}
    shift = 0
    for b in range(256):
        if b not in names:
            names[b] = chr(256 + shift)
            shift += 1
    return names


def pair_rank_json(tokenizer, split_regex: str) -> str | None:
    """The file, or None when two tokens have the same bytes (a vocab cannot hold both)."""
    to_names = _byte_names()
    names = [tokenizer.token_bytes(i).decode("latin-1").translate(to_names)
             for i in range(256 + len(tokenizer.merges))]
    vocab = {name: i for i, name in enumerate(names)}
    if len(vocab) != len(names):
        return None
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    return json.dumps(
        {
            "version": "1.0",
            "truncation": None,
            "padding": None,
            "added_tokens": [],
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
                "merges": [[names[left], names[right]] for left, right in tokenizer.merges],
            },
        },
        ensure_ascii=False,
    )
