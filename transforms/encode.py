"""Encoding documents into token IDs: ``EncodeDocuments``.

Each worker loads the tokenizer once (``DoFn.setup``, with ``Tokenizer.load``,
so local, ``gs://`` and ``s3://`` paths work on any runner) and takes the
engine the driver proved for it (``bpe.engines``): the proof names the
tokenizer's SHA-256, so a file replaced while the job runs cannot silently mix
two tokenizers in one dataset, and no worker repeats the O(vocabulary) proof.
"""

from __future__ import annotations

import dataclasses
import logging
from array import array
from typing import NamedTuple, Sequence

import apache_beam as beam

from bpe.engines import EngineProof, ProofMismatch
from bpe.tokenizer import Tokenizer
from transforms import metrics
from transforms.coders import SizedPickleCoder


class TokenRow(NamedTuple):
    """One encoded document: a row of a token shard.

    Attributes:
      id: the record's id field, or ``<file>:<record number>``.
      tokens: the token IDs (EOS included when appended), an ``array("I")``.
      input_bytes: the size of the input document in bytes.
    """

    id: str
    tokens: Sequence[int]
    input_bytes: int = 0


class TokenRowCoder(SizedPickleCoder):
    """Token rows; size: two bytes a token (as in the shards) and the id."""

    value_type = TokenRow

    def estimate_size(self, row: TokenRow) -> int:
        return 2 * len(row.tokens) + len(row.id)


beam.coders.registry.register_coder(TokenRow, TokenRowCoder)


def eos_token_id(tokenizer: Tokenizer, eos_token: str | None) -> int:
    """The ID of the EOS token (default: the one the tokenizer declares; for ours the first special token).

    Raises:
      ValueError: the tokenizer has no such special token, or declares none and none is named.
    """
    if eos_token is None:
        if not tokenizer.special_tokens:
            raise ValueError("the tokenizer has no special tokens, so there is no EOS token to append")
        if tokenizer.eos_token is None:
            raise ValueError(
                "the tokenizer declares no EOS token: name one of its special tokens with --eos-token "
                f"({', '.join(sorted(tokenizer.special_tokens)[:8])})"
            )
        eos_token = tokenizer.eos_token
    if eos_token not in tokenizer.special_tokens:
        raise ValueError(
            f"EOS token {eos_token!r} is not a special token of the tokenizer "
            f"(it has {sorted(tokenizer.special_tokens) or 'none'})"
        )
    return tokenizer.special_tokens[eos_token]


def bos_token_id(tokenizer: Tokenizer) -> int:
    """The ID of the BOS token the tokenizer declares (a Hugging Face post-processor's).

    Raises:
      ValueError: it declares none.
    """
    if tokenizer.bos_token is None:
        raise ValueError("the tokenizer declares no BOS token (only a Hugging Face post-processor declares one)")
    return tokenizer.special_tokens[tokenizer.bos_token]


class _EncodeBatchFn(beam.DoFn):
    """Encodes a batch of Documents into TokenRows with the engine the proof names."""

    def __init__(
        self, tokenizer_path: str, proof: EngineProof, eos_token: str | None, append_eos: bool,
        preset: str | None = None, prepend_bos: bool = False, transport_params: dict | None = None,
    ):
        self._tokenizer_path = tokenizer_path
        self._transport_params = transport_params
        self._proof = proof
        self._eos_token = eos_token
        self._append_eos = append_eos
        self._preset = preset
        self._prepend_bos = prepend_bos
        self._documents = metrics.counter("encode", "documents")
        self._tokens = metrics.counter("encode", "tokens")
        self._input_bytes = metrics.counter("encode", "input_bytes")
        self._fallbacks = metrics.counter("encode", "reference_fallbacks")

    def setup(self):
        tokenizer = Tokenizer.load(self._tokenizer_path, self._transport_params, preset=self._preset)
        try:
            self._engine = tokenizer.use_proof(self._proof)
        except ProofMismatch:
            raise RuntimeError(
                f"tokenizer {self._tokenizer_path} changed while the job ran: SHA-256 is "
                f"{tokenizer.sha256}, the job was started with {self._proof.tokenizer_sha256}"
            ) from None
        self._eos = [eos_token_id(tokenizer, self._eos_token)] if self._append_eos else []
        self._bos = [bos_token_id(tokenizer)] if self._prepend_bos else []
        logging.info("beam-bpe encode: engine %s", self._engine.reason)

    def process(self, documents):
        engine, eos, bos = self._engine, self._eos, self._bos
        fallbacks = engine.fallbacks
        tokens = input_bytes = 0
        for doc in documents:
            data = doc.data
            ids = engine.encode_array(data)
            if bos:
                ids = array("I", bos) + ids
            if eos:
                ids.extend(eos)
            tokens += len(ids)
            input_bytes += len(data)
            row_id = doc.doc_id if doc.doc_id is not None else f"{doc.file}:{doc.record}"
            yield TokenRow(row_id, ids, len(data))
        self._documents.inc(len(documents))
        self._tokens.inc(tokens)
        self._input_bytes.inc(input_bytes)
        if engine.fallbacks != fallbacks:
            self._fallbacks.inc(engine.fallbacks - fallbacks)


@dataclasses.dataclass
class EncodeDocuments(beam.PTransform):
    """Encodes Documents into TokenRows (id, token IDs as ``array("I")``).

    Args:
      tokenizer_path: a tokenizer.json (ours or a Hugging Face byte-level BPE one),
        a directory holding one, or a tiktoken rank file (local, ``file://``,
        ``gs://``, ``s3://``; see ``bpe.tokenizer_file``).
      proof: ``Tokenizer.prove()`` of that tokenizer, made once by the driver;
        each worker checks its SHA-256 against the file it loads and fails if
        they differ.
      append_eos: append the EOS token to every document.
      eos_token: the EOS special token; default the one the tokenizer declares.
      batch_size: documents encoded per DoFn call.
      preset: for a tiktoken rank file, the encoding preset (``bpe.presets``).
      prepend_bos: put the BOS token the tokenizer declares before every document.
      transport_params: smart_open's parameters for a remote tokenizer path
        (e.g. an S3 endpoint and credentials); None: the client's own configuration.
    """

    tokenizer_path: str
    proof: EngineProof
    append_eos: bool = False
    eos_token: str | None = None
    batch_size: int = 64
    preset: str | None = None
    prepend_bos: bool = False
    transport_params: dict | None = None

    def __post_init__(self):
        super().__init__()

    def expand(self, documents):
        return (
            documents
            | "Batch" >> beam.BatchElements(
                min_batch_size=self.batch_size, max_batch_size=self.batch_size, record_metrics=False
            )
            | "Encode" >> beam.ParDo(
                _EncodeBatchFn(self.tokenizer_path, self.proof, self.eos_token, self.append_eos,
                               self.preset, self.prepend_bos, self.transport_params)
            ).with_output_types(TokenRow)
        )
