"""The public tiktoken encodings' patterns and special tokens, by name.

A preset describes what a ``*.tiktoken`` rank file does not hold: the
pre-tokenizer regex and the special tokens (text -> ID). The rank file itself
always comes from a path the user gives; nothing is downloaded.

    tok = bpe.Tokenizer.load("cl100k_base.tiktoken", preset="cl100k_base")
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

from bpe.pretokenize import CL100K_PATTERN, GPT2_PATTERN, O200K_PATTERN


@dataclasses.dataclass(frozen=True)
class EncodingPreset:
    """What tiktoken knows about a public encoding besides its ranks.

    Attributes:
      name: tiktoken's name for it.
      pattern: the pre-tokenizer regex.
      special_tokens: text -> ID.
      ranks: how many mergeable ranks the encoding's file holds (a check that
        the file given is the one meant).
      sha256: the SHA-256 of the encoding's file (the one tiktoken's registry
        expects): a file with more ranks is taken as an extension of it (``train
        --extend`` writes one) only if its first ``ranks`` lines are that file.
      eos_token: the special token that ends a document.
    """

    name: str
    pattern: str
    special_tokens: Mapping[str, int]
    ranks: int
    sha256: str
    eos_token: str = "<|endoftext|>"


_R50K = EncodingPreset("r50k_base", GPT2_PATTERN, {"<|endoftext|>": 50256}, 50256,
                       "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930")

ENCODINGS: dict[str, EncodingPreset] = {
    "r50k_base": _R50K,
    "gpt2": dataclasses.replace(_R50K, name="gpt2"),
    "cl100k_base": EncodingPreset(
        "cl100k_base",
        CL100K_PATTERN,
        {
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
        100256,
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
    "o200k_base": EncodingPreset(
        "o200k_base", O200K_PATTERN, {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}, 199998,
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
}


def encoding_preset(name: str) -> EncodingPreset:
    """The preset of that name.

    Raises:
      ValueError: no such preset (the line names the ones there are).
    """
    try:
        return ENCODINGS[name]
    except KeyError:
        raise ValueError(f"unknown tokenizer preset {name!r} (choose from {', '.join(ENCODINGS)})") from None
