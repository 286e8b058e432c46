"""Decoding token shards back into documents: ``DecodeShards`` and the per-row step it shares.

    rows = p | beam.io.ReadFromParquet("shards/part-*.parquet")
    docs = rows | DecodeShards("tokenizer/")     # (id, exact document bytes)

``decode_tokens`` is the one way a shard row becomes document bytes, used by
this transform and by ``beam-bpe decode``: the EOS token ``--append-eos``
added and the BOS token ``--prepend-bos`` added (both recorded in the shards'
metadata) are removed, so every document comes back as exactly the bytes that
were encoded.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, Mapping, Sequence

import apache_beam as beam

from bpe.tokenizer import Tokenizer
from transforms import metrics

__all__ = ["DecodeShards", "decode_tokens", "document_span", "document_tokens"]


def document_span(count: int, first: int | None, last: int | None, eos_id: int | None,
                  bos_id: int | None = None) -> tuple[int, int]:
    """(start, end) of a row's document among its ``count`` tokens (``first`` and
    ``last`` of them): without one leading BOS token (the one ``--prepend-bos``
    added) and one trailing EOS token (the one ``--append-eos`` added)."""
    start, end = 0, count
    if bos_id is not None and count and first == bos_id:
        start = 1
    if eos_id is not None and end > start and last == eos_id:
        end -= 1
    return start, end


def document_tokens(tokens: Sequence[int], eos_id: int | None, bos_id: int | None = None) -> Sequence[int]:
    """The tokens without the EOS (and BOS) that encoding added (see ``document_span``)."""
    if not len(tokens):
        return tokens
    start, end = document_span(len(tokens), tokens[0], tokens[-1], eos_id, bos_id)
    return tokens[start:end] if (start, end) != (0, len(tokens)) else tokens


def decode_tokens(tokenizer: Tokenizer, tokens: Sequence[int], eos_id: int | None = None,
                  bos_id: int | None = None) -> bytes:
    """A shard row's document bytes: its tokens decoded, without the added EOS and BOS.

    Raises:
      ValueError: an ID outside the tokenizer's vocabulary.
    """
    return tokenizer.decode_bytes(document_tokens(tokens, eos_id, bos_id))


class _DecodeFn(beam.DoFn):
    def __init__(self, tokenizer_path: str, strip_eos_token: str | None, preset: str | None = None,
                 strip_bos_token: str | None = None):
        self._tokenizer_path = tokenizer_path
        self._strip_eos_token = strip_eos_token
        self._strip_bos_token = strip_bos_token
        self._preset = preset
        self._counters = metrics.Counters("decode", "documents", "bytes")

    def setup(self):
        self._tokenizer = Tokenizer.load(self._tokenizer_path, preset=self._preset)
        specials = self._tokenizer.special_tokens
        self._eos_id = specials[self._strip_eos_token] if self._strip_eos_token is not None else None
        self._bos_id = specials[self._strip_bos_token] if self._strip_bos_token is not None else None

    def process(self, row) -> Iterable[tuple[str, bytes]]:
        row_id, tokens = (row["id"], row["tokens"]) if isinstance(row, Mapping) else row
        data = decode_tokens(self._tokenizer, tokens, self._eos_id, self._bos_id)
        self._counters.documents.inc()
        self._counters.bytes.inc(len(data))
        yield row_id, data


@dataclasses.dataclass
class DecodeShards(beam.PTransform):
    """Decodes shard rows ({"id", "tokens"} dicts or (id, tokens) pairs) into (id, bytes).

    Counters (``transforms.metrics``, step ``decode``): ``documents``, ``bytes``.

    Args:
      tokenizer_path: the tokenizer that wrote the shards (a tokenizer.json or its
        directory, or a tiktoken rank file; any Beam filesystem).
      strip_eos_token: a special token to drop when it ends a row (the EOS token
        the shards were written with), or None to keep every token.
      preset: for a tiktoken rank file, its encoding preset (``bpe.presets``).
      strip_bos_token: a special token to drop when it begins a row (the BOS token
        the shards were written with), or None.
    """

    tokenizer_path: str
    strip_eos_token: str | None = None
    preset: str | None = None
    strip_bos_token: str | None = None

    def __post_init__(self):
        super().__init__()

    def expand(self, rows):
        decode = _DecodeFn(self.tokenizer_path, self.strip_eos_token, self.preset, self.strip_bos_token)
        return rows | "Decode" >> beam.ParDo(decode)
