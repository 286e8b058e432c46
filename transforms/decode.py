"""Decoding token shards back into documents: ``DecodeShards`` and the per-row step it shares.

    rows = p | beam.io.ReadFromParquet("shards/part-*.parquet")
    docs = rows | DecodeShards("tokenizer/")     # (id, exact document bytes)

``decode_tokens`` is the one way a shard row becomes document bytes, used by
this transform and by ``beam-bpe decode``: EOS tokens that ``--append-eos``
added are removed, so every document comes back as exactly the bytes that were
encoded.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, Mapping, Sequence

import apache_beam as beam

from bpe.tokenizer import Tokenizer
from transforms import metrics


def strip_eos(tokens: Sequence[int], eos_id: int | None) -> Sequence[int]:
    """The tokens without one trailing EOS token (the one ``--append-eos`` added)."""
    if eos_id is not None and len(tokens) and tokens[-1] == eos_id:
        return tokens[:-1]
    return tokens


def decode_tokens(tokenizer: Tokenizer, tokens: Sequence[int], eos_id: int | None = None) -> bytes:
    """A shard row's document bytes: its tokens decoded, without the appended EOS.

    Raises:
      ValueError: an ID outside the tokenizer's vocabulary.
    """
    return tokenizer.decode_bytes(strip_eos(tokens, eos_id))


class _DecodeFn(beam.DoFn):
    def __init__(self, tokenizer_path: str, strip_eos_token: str | None, preset: str | None = None):
        self._tokenizer_path = tokenizer_path
        self._strip_eos_token = strip_eos_token
        self._preset = preset
        self._documents = metrics.counter("decode", "documents")
        self._bytes = metrics.counter("decode", "bytes")

    def setup(self):
        self._tokenizer = Tokenizer.load(self._tokenizer_path, preset=self._preset)
        self._eos_id = None
        if self._strip_eos_token is not None:
            self._eos_id = self._tokenizer.special_tokens[self._strip_eos_token]

    def process(self, row) -> Iterable[tuple[str, bytes]]:
        row_id, tokens = (row["id"], row["tokens"]) if isinstance(row, Mapping) else row
        data = decode_tokens(self._tokenizer, tokens, self._eos_id)
        self._documents.inc()
        self._bytes.inc(len(data))
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
    """

    tokenizer_path: str
    strip_eos_token: str | None = None
    preset: str | None = None

    def __post_init__(self):
        super().__init__()

    def expand(self, rows):
        return rows | "Decode" >> beam.ParDo(_DecodeFn(self.tokenizer_path, self.strip_eos_token, self.preset))
