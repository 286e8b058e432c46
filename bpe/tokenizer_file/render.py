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
from typing import Iterable, Mapping, Sequence

from bpe.pretokenize import onig_compatible
from bpe.tokenizer_file.spec import byte_to_char

__all__ = ["as_text", "file_object", "render", "render_with_regex", "special_token_clash", "specials_in_vocab"]


def render(token_bytes: Sequence[bytes] | Mapping[int, bytes], merges: Sequence[tuple[int, int]], pattern: str,
           special_tokens: Mapping[str, int], ignore_merges: bool = False) -> str:
    """The tokenizer.json text of a tokenizer.

    Args:
      token_bytes: the bytes of each ordinary ID (special tokens excluded), as a
        list (ID = position) or a mapping.
      merges: (left ID, right ID) in rank order; each makes the token of their joined bytes.
      pattern: the pre-tokenizer regex; the file holds the spelling of it that
        Oniguruma, PCRE2 and ``regex`` read alike (``onig_compatible``).
      special_tokens: text -> ID, in ID order.
      ignore_merges: the model's flag: a piece that is a whole token is that token
        (a tiktoken rank file's export needs it: ``bpe.tokenizer_export``).

    Raises:
      ValueError: two tokens have the same bytes (the vocab, keyed by bytes, cannot hold both).
    """
    return as_text(file_object(token_bytes, merges, pattern, special_tokens, ignore_merges))


def file_object(token_bytes: Sequence[bytes] | Mapping[int, bytes], merges: Sequence[tuple[int, int]], pattern: str,
                special_tokens: Mapping[str, int], ignore_merges: bool = False) -> dict:
    """What ``render`` writes, as the JSON object (for a caller that adds to it before writing).

    Raises:
      ValueError: two tokens have the same bytes.
    """
    return _json_object(token_bytes, merges, onig_compatible(pattern), special_tokens, ignore_merges)


def as_text(file: dict) -> str:
    """A tokenizer.json object as ``render`` writes it (one JSON value per line)."""
    return json.dumps(file, ensure_ascii=False, indent=1)


def render_with_regex(token_bytes: Sequence[bytes] | Mapping[int, bytes], merges: Sequence[tuple[int, int]],
                      split_regex: str, special_tokens: Mapping[str, int], indent: int | None = None,
                      ignore_merges: bool = False) -> str:
    """``render`` with ``split_regex`` as the Split pattern, spelt exactly as given, and
    ``indent`` for the JSON (None: one line).

    Raises:
      ValueError: two tokens have the same bytes.
    """
    return json.dumps(_json_object(token_bytes, merges, split_regex, special_tokens, ignore_merges),
                      ensure_ascii=False, indent=indent)


def _json_object(token_bytes: Sequence[bytes] | Mapping[int, bytes], merges: Sequence[tuple[int, int]],
                 split_regex: str, special_tokens: Mapping[str, int], ignore_merges: bool) -> dict:
    """The tokenizer.json object with ``split_regex`` as the Split pattern, spelt exactly as given."""
    to_char = byte_to_char()
    items = token_bytes.items() if isinstance(token_bytes, Mapping) else enumerate(token_bytes)
    names = {token_id: "".join(to_char[b] for b in data) for token_id, data in items}
    vocab = {name: token_id for token_id, name in names.items()}
    if len(vocab) != len(names):
        first = next(token_id for token_id, name in names.items() if vocab[name] != token_id)
        raise ValueError(
            f"tokens {first} and {vocab[names[first]]} have the same bytes; tokenizer.json cannot hold both"
        )
    if specials_in_vocab(len(vocab), special_tokens):
        vocab.update(special_tokens)
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    return {
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
            "ignore_merges": ignore_merges,
            "vocab": vocab,
            "merges": [[names[left], names[right]] for left, right in merges],
        },
    }


def specials_in_vocab(ordinary_count: int, special_tokens: Mapping[str, int]) -> bool:
    """Whether the file's vocab holds the special tokens besides ``ordinary_count`` ordinary ones.

    Hugging Face numbers added tokens on from the vocab's size unless the vocab
    holds them: with gaps in the IDs (cl100k), the vocab must hold them.
    """
    return sorted(special_tokens.values()) != list(range(ordinary_count, ordinary_count + len(special_tokens)))


def special_token_clash(special_tokens: Iterable[str], token_bytes: Sequence[bytes] | Mapping[int, bytes]) -> str | None:
    """What is wrong with a special token that an ordinary token spells, or None.

    tokenizer.json keys its vocabulary by each ordinary token's byte-level name
    (``byte_to_char``: "he" for b"he", "Ġhe" for b" he"), and Hugging Face
    tokenizers gives an added token that the vocabulary holds the vocabulary's ID:
    such a special token would get another ID there, and the vocabulary would be
    one shorter. A special token whose bytes equal an ordinary token's is one.

    Args:
      special_tokens: the special tokens' texts.
      token_bytes: the ordinary tokens' bytes, by ID (a list: ID = position, or a mapping).
    """
    to_char = byte_to_char()
    wanted = set(special_tokens)
    items = token_bytes.items() if isinstance(token_bytes, Mapping) else enumerate(token_bytes)
    for token_id, data in items:
        name = "".join(to_char[b] for b in data)
        if name in wanted:
            return (
                f"special token {name!r} is spelled like the ordinary token {token_id} ({data!r}) in "
                "tokenizer.json, where Hugging Face tokenizers would give it that token's ID: choose a special "
                "token that no ordinary token spells, such as one in <|...|>"
            )
    return None
