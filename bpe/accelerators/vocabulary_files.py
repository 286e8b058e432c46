"""A tokenizer in the files accelerators load a vocabulary from, built in memory.

- ``pair_rank_json``: a Hugging Face ``tokenizer.json``, for engines that merge
  by the rank of the *pair* in the file's merge list, which is our own
  semantics: merge i joins (left, right) into its ID, the list order is the
  learned order, and the IDs merges create increase with it (256 + i, or with
  gaps where special tokens sit between merges: the vocab keeps our IDs, and
  such a special token fills its gap as an entry spelled like its text, which
  no merge makes, so no text is encoded to it). The file holds no added tokens,
  so special-token strings stay ordinary text, as in ``Tokenizer.encode(text)``.
  The Split regex is whatever spelling of our pattern the engine reads as the
  same regex.
- ``rank_file``: a tiktoken rank file (base64 token, rank per line), our IDs
  as ranks, for engines that merge by the rank of the concatenated bytes.
"""

from __future__ import annotations

import base64

from bpe.tokenizer_file.render import render_with_regex

__all__ = ["pair_rank_json", "rank_file"]


def pair_rank_json(tokenizer, split_regex: str) -> str | None:
    """The file, or None when two tokens have the same bytes (a vocab cannot hold both)."""
    token_bytes = dict(tokenizer.ordinary_tokens())
    last = max(token_bytes)
    for text, token_id in tokenizer.special_tokens.items():
        if token_id < last:
            token_bytes[token_id] = text.encode("utf-8")  # fills a gap; no merge makes it
    try:
        return render_with_regex(token_bytes, tokenizer.merges, split_regex, {})
    except ValueError:
        return None


def rank_file(tokenizer) -> bytes:
    """The tokenizer's ordinary tokens as a tiktoken rank file, our IDs as ranks."""
    lines = [base64.b64encode(tokenizer.token_bytes(i)) + b" %d" % i for i in tokenizer.ordinary_ids()]
    return b"\n".join(lines) + b"\n"
