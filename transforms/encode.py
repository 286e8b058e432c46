"""Encoding documents into token IDs: ``EncodeDocuments``.

Each worker loads the tokenizer once (``DoFn.setup``, with ``Tokenizer.load``,
so local, ``gs://`` and ``s3://`` paths work on any runner, or takes the one a
warm worker read ahead, ``transforms.tokenizer_loading``) and takes the
engine the driver proved for it (``bpe.engines``): the proof names the
tokenizer's SHA-256, so a file replaced while the job runs cannot silently mix
two tokenizers in one dataset, and no worker repeats the O(vocabulary) proof.

Runtime verification: a deterministic sample of the documents (``verified``,
by a hash of file and record number, so a rerun checks the same ones) is
encoded a second time with the pure-Python reference, and a document whose IDs
differ fails the job with ``VerificationError`` naming it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from array import array

import apache_beam as beam
import numpy as np

from bpe import engines
from bpe.engines import EngineProof
from transforms import metrics
from transforms.batches import fixed_batches
from transforms.shards import TokenRow, token_typecode
from transforms.tokenizer_loading import load_proven

__all__ = ["EncodeDocuments", "VerificationError", "verified", "check_against_reference", "row_tokens"]


class VerificationError(RuntimeError):
    """An engine gave a document other IDs than the reference encoder."""


def verified(file: str, record: int, fraction: float) -> bool:
    """Whether the document at (file, record) is in the verification sample.

    The same in every process and every run (BLAKE2b, not Python's salted
    ``hash``); about ``fraction`` of all documents, every one when it is 1.
    """
    if fraction <= 0:
        return False
    digest = hashlib.blake2b(f"{file}\0{record}".encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big") < fraction * 2**64


def check_against_reference(engine, reference, doc, ids) -> None:
    """Raises VerificationError naming the document unless ``ids`` are the reference's."""
    expected = reference.encode_array(doc.data)
    if expected == ids:
        return
    at = next((i for i, (a, b) in enumerate(zip(expected, ids)) if a != b), min(len(expected), len(ids)))
    name = f"{doc.file}:{doc.record}" + (f" (id {doc.doc_id})" if doc.doc_id is not None else "")
    raise VerificationError(
        f"engine {engine.name} gave document {name} other IDs than the reference encoder, from token {at} "
        f"({len(ids)} vs {len(expected)} tokens); encode with {engines.ENGINES_VARIABLE}=python to use the reference"
    )


# Token IDs narrowed per slice of this many: no second full-size array beside the IDs.
_NARROW_SLICE = 1 << 20


def row_tokens(ids: array, bos: list[int], eos: list[int], typecode: str) -> array:
    """``bos + ids + eos`` as an ``array(typecode)``, the width of the shard's tokens column.

    Narrowing ``array("I")`` to ``"H"`` goes a slice at a time through numpy
    (no Python int per token), checking every ID fits.

    Raises:
      ValueError: an ID does not fit ``typecode``.
    """
    if ids.typecode == typecode and not bos:
        ids.extend(eos)
        return ids
    out = array(typecode, bos)
    if ids.typecode == typecode:
        out += ids
    else:
        view = np.frombuffer(ids, dtype=np.uint32)
        for start in range(0, len(view), _NARROW_SLICE):
            part = view[start: start + _NARROW_SLICE]
            if part.max() > 0xFFFF:
                raise ValueError(f"token ID {int(part.max())} does not fit uint16")
            out.frombytes(memoryview(part.astype(np.uint16)).cast("B"))
    out.extend(eos)
    return out


class _EncodeBatchFn(beam.DoFn):
    """Encodes a batch of Documents into TokenRows with the engine the proof names."""

    def __init__(
        self, tokenizer_path: str, proof: EngineProof, eos_token: str | None, append_eos: bool,
        preset: str | None = None, prepend_bos: bool = False, transport_params: dict | None = None,
        verify_fraction: float = 0.0,
    ):
        self._tokenizer_path = tokenizer_path
        self._transport_params = transport_params
        self._proof = proof
        self._eos_token = eos_token
        self._append_eos = append_eos
        self._preset = preset
        self._prepend_bos = prepend_bos
        self._verify_fraction = verify_fraction
        self._counters = metrics.Counters(
            "encode", "documents", "tokens", "input_bytes", "reference_fallbacks", "verified_documents"
        )

    def setup(self):
        tokenizer, self._engine = load_proven(self._tokenizer_path, self._preset, self._proof,
                                              self._transport_params)
        self._eos = [tokenizer.eos_token_id(self._eos_token)] if self._append_eos else []
        self._bos = [tokenizer.bos_id] if self._prepend_bos else []
        self._reference = tokenizer.reference
        self._typecode = token_typecode(tokenizer.vocab_size)
        logging.info("beam-bpe encode: engine %s", self._engine.reason)

    def process(self, documents):
        engine, eos, bos = self._engine, self._eos, self._bos
        fallbacks = engine.fallbacks
        tokens = input_bytes = checked = 0
        for doc in documents:
            data = doc.data
            ids = engine.encode_array(data)
            if verified(doc.file, doc.record, self._verify_fraction):
                check_against_reference(engine, self._reference, doc, ids)
                checked += 1
            ids = row_tokens(ids, bos, eos, self._typecode)
            tokens += len(ids)
            input_bytes += len(data)
            row_id = doc.doc_id if doc.doc_id is not None else f"{doc.file}:{doc.record}"
            yield TokenRow(row_id, ids, len(data), doc.file, doc.piece, doc.record)
        counters = self._counters
        counters.documents.inc(len(documents))
        counters.tokens.inc(tokens)
        counters.input_bytes.inc(input_bytes)
        if checked:
            counters.verified_documents.inc(checked)
        if engine.fallbacks != fallbacks:
            counters.reference_fallbacks.inc(engine.fallbacks - fallbacks)


@dataclasses.dataclass
class EncodeDocuments(beam.PTransform):
    """Encodes Documents into TokenRows (id, token IDs as an ``array`` of the shards' width).

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
      verify_fraction: the share of documents (``verified``) encoded again with
        the reference and compared; a difference fails the job. 0: none.
    """

    tokenizer_path: str
    proof: EngineProof
    append_eos: bool = False
    eos_token: str | None = None
    batch_size: int = 64
    preset: str | None = None
    prepend_bos: bool = False
    transport_params: dict | None = None
    verify_fraction: float = 0.0

    def __post_init__(self):
        super().__init__()

    def expand(self, documents):
        return (
            documents
            | "Batch" >> fixed_batches(self.batch_size)
            | "Encode" >> beam.ParDo(
                _EncodeBatchFn(
                    self.tokenizer_path, self.proof, self.eos_token, self.append_eos,
                    self.preset, self.prepend_bos, self.transport_params, self.verify_fraction,
                )
            ).with_output_types(TokenRow)
        )
