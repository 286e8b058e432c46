"""Tokenizer files: Hugging Face ``tokenizer.json`` and tiktoken rank files, read, validated and written.

- ``spec``: what a tokenizer.json defines (``TokenizerSpec``), its ByteLevel
  alphabet (``byte_to_char``) and ``TokenizerFileError``.
- ``render``: a tokenizer as tokenizer.json text.
- ``validate``: a tokenizer.json parsed and checked field by field (``parse``).
- ``storage``: files read and written, local or remote (``read``, ``write``).
- ``tiktoken_file``: tiktoken rank files.
- ``hf_normalizer``, ``hf_pretokenizer``, ``added_tokens``: the parts of a
  Hugging Face file beam-bpe reproduces when it encodes (NFC, chains of
  pre-tokenizer steps, added tokens matched in any text).
"""

from bpe.tokenizer_file.render import render, render_with_regex
from bpe.tokenizer_file.spec import (
    BYTE_LEVEL_PATTERN,
    TOP_LEVEL_KEYS,
    Step,
    TokenizerFileError,
    TokenizerSpec,
    byte_to_char,
)
from bpe.tokenizer_file.storage import FILE_NAME, MAX_FILE_BYTES, read, write
from bpe.tokenizer_file.validate import parse, token_bytes_of

__all__ = [
    "BYTE_LEVEL_PATTERN",
    "FILE_NAME",
    "MAX_FILE_BYTES",
    "TOP_LEVEL_KEYS",
    "Step",
    "TokenizerFileError",
    "TokenizerSpec",
    "byte_to_char",
    "parse",
    "read",
    "render",
    "render_with_regex",
    "token_bytes_of",
    "write",
]
