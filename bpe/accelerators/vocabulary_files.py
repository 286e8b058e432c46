"""A tokenizer in the files accelerators load a vocabulary from, built in memory.

- ``pair_rank_json``: a Hugging Face ``tokenizer.json``, for engines that merge
  by the rank of the *pair* in the file's merge list, which is our own
  semantics: merge i joins (left, right) into ID 256 + i, and the list order is
  the learned order. The file holds no added tokens, so special-token strings
  stay ordinary text, as in ``Tokenizer.encode(text)``. The Split regex is
  whatever spelling of our pattern the engine reads as the same regex.
- ``rank_file``: a tiktoken rank file (base64 token, rank per line), our IDs
  as ranks, for engines that merge by the rank of the concatenated bytes.
"""

from __future__ import annotations

import base64

from bpe.tokenizer_file.render import render_with_regex

__all__ = ["pair_rank_json", "rank_file"]


def pair_rank_json(tokenizer, split_regex: str) -> str | None:
    """The file, or None when two tokens have the same bytes (a vocab cannot hold both)."""
    token_bytes = [tokenizer.token_bytes(i) for i in range(256 + len(tokenizer.merges))]
    try:
        return render_with_regex(token_bytes, tokenizer.merges, split_regex, {})
    except ValueError:
        return None


def rank_file(tokenizer) -> bytes:
    """The tokenizer's ordinary tokens as a tiktoken rank file, our IDs as ranks."""
    lines = [base64.b64encode(tokenizer.token_bytes(i)) + b" %d" % i for i in tokenizer.ordinary_ids()]
    return b"\n".join(lines) + b"\n"
