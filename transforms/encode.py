"""Encoding documents into token IDs: ``EncodeDocuments`` and the tokenizer it loads.

The tokenizer is read once per worker (``DoFn.setup``) through Beam's
FileSystems, so ``gs://`` and ``s3://`` paths work on any runner, and its
SHA-256 is checked against the one the driver saw, so a file replaced while the
job runs cannot silently mix two tokenizers in one dataset.

The hot loop may run on tiktoken's Rust core, but only after it is proven to
give our IDs for the tokenizer at hand (``bpe.tiktoken_core.fast_encoder``); our
own encoder stays the reference and handles everything tiktoken cannot (bytes
that are not valid UTF-8, custom patterns, tokenizers whose merges tiktoken
would replay differently).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import NamedTuple, Sequence

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from bpe.tiktoken_core import encode_if_valid
from bpe.tokenizer import FILE_NAME, Tokenizer, TokenizerFileError
from transforms.coders import SizedPickleCoder

NAMESPACE = "beam_bpe.encode"


class TokenRow(NamedTuple):
    """One encoded document: a row of a token shard.

    Attributes:
      id: the record's id field, or ``<file>:<record number>``.
      tokens: the token IDs (EOS included when appended): a list from our
        encoder, an ``array("I")`` from tiktoken's.
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


def tokenizer_file(path: str) -> str:
    """The tokenizer.json a path names: the path itself, or the file inside a directory."""
    if path.endswith(".json"):
        return path
    inside = FileSystems.join(path, FILE_NAME)
    return inside if exists(inside) else path


def read_tokenizer(path: str) -> Tokenizer:
    """Reads and validates a tokenizer from any Beam filesystem; ``.sha256`` is set.

    Raises:
      TokenizerFileError: the file is missing, unreadable, or not a valid tokenizer.
    """
    file_path = tokenizer_file(path)
    try:
        with FileSystems.open(file_path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            data = f.read()
    except Exception as e:  # FileSystems wraps OS and cloud errors in several types
        reason = "not found" if not exists(file_path) else f"cannot be read ({type(e).__name__})"
        raise TokenizerFileError(f"tokenizer file {file_path} {reason}") from None
    # from_json hashes the very bytes it parses: the checksum describes what was loaded.
    return Tokenizer.from_json(data, source=file_path)


def exists(path: str) -> bool:
    """Whether a path exists on any Beam filesystem; one that cannot answer says no."""
    try:
        return FileSystems.exists(path)
    except Exception:
        return False


def eos_token_id(tokenizer: Tokenizer, eos_token: str | None) -> int:
    """The ID of the EOS token (default: the first special token).

    Raises:
      ValueError: the tokenizer has no such special token.
    """
    if eos_token is None:
        if not tokenizer.special_tokens:
            raise ValueError("the tokenizer has no special tokens, so there is no EOS token to append")
        eos_token = next(iter(tokenizer.special_tokens))
    if eos_token not in tokenizer.special_tokens:
        raise ValueError(
            f"EOS token {eos_token!r} is not a special token of the tokenizer "
            f"(it has {sorted(tokenizer.special_tokens) or 'none'})"
        )
    return tokenizer.special_tokens[eos_token]


class _EncodeBatchFn(beam.DoFn):
    """Encodes a batch of Documents into TokenRows with a per-worker tokenizer."""

    def __init__(
        self,
        tokenizer_path: str,
        tokenizer_sha256: str | None,
        eos_token: str | None,
        append_eos: bool,
        use_tiktoken: bool,
        tiktoken_proven: bool = False,
    ):
        self._tokenizer_path = tokenizer_path
        self._tokenizer_sha256 = tokenizer_sha256
        self._eos_token = eos_token
        self._append_eos = append_eos
        self._use_tiktoken = use_tiktoken
        self._tiktoken_proven = tiktoken_proven
        self._documents = beam.metrics.Metrics.counter(NAMESPACE, "documents")
        self._tokens = beam.metrics.Metrics.counter(NAMESPACE, "tokens")
        self._input_bytes = beam.metrics.Metrics.counter(NAMESPACE, "input_bytes")
        self._fast_documents = beam.metrics.Metrics.counter(NAMESPACE, "documents_encoded_by_tiktoken")

    def setup(self):
        tokenizer = read_tokenizer(self._tokenizer_path)
        if self._tokenizer_sha256 and tokenizer.sha256 != self._tokenizer_sha256:
            raise RuntimeError(
                f"tokenizer {self._tokenizer_path} changed while the job ran: SHA-256 is "
                f"{tokenizer.sha256}, the job was started with {self._tokenizer_sha256}"
            )
        self._tokenizer = tokenizer
        self._eos = [eos_token_id(tokenizer, self._eos_token)] if self._append_eos else []
        self._fast = None
        if self._use_tiktoken:
            self._fast, reason = tokenizer.fast_encoder(proven=self._tiktoken_proven)
            logging.info("beam-bpe encode: %s", reason)

    def process(self, documents):
        tokenizer, fast, eos = self._tokenizer, self._fast, self._eos
        fast_count = tokens = input_bytes = 0
        for doc in documents:
            data = doc.data
            ids = encode_if_valid(fast, data) if fast is not None else None
            if ids is None:
                ids = tokenizer.encode(data)
            else:
                fast_count += 1
            if eos:
                ids.extend(eos)
            tokens += len(ids)
            input_bytes += len(data)
            row_id = doc.doc_id if doc.doc_id is not None else f"{doc.file}:{doc.record}"
            yield TokenRow(row_id, ids, len(data))
        self._documents.inc(len(documents))
        self._tokens.inc(tokens)
        self._input_bytes.inc(input_bytes)
        if fast_count:
            self._fast_documents.inc(fast_count)


@dataclasses.dataclass
class EncodeDocuments(beam.PTransform):
    """Encodes Documents into TokenRows (id, token IDs).

    Args:
      tokenizer_path: a tokenizer.json, or a directory holding one; any Beam
        filesystem path.
      append_eos: append the EOS token to every document.
      eos_token: the EOS special token; default the tokenizer's first special token.
      batch_size: documents encoded per DoFn call.
      tokenizer_sha256: the SHA-256 the driver saw; workers fail if theirs differs.
      use_tiktoken: let tiktoken's Rust core encode valid UTF-8 documents when it is
        verified to give identical IDs (see ``fast_encoder``).
      tiktoken_proven: the driver already proved it for the tokenizer with
        ``tokenizer_sha256`` (which workers check), so each worker need not.
    """

    tokenizer_path: str
    append_eos: bool = False
    eos_token: str | None = None
    batch_size: int = 64
    tokenizer_sha256: str | None = None
    use_tiktoken: bool = True
    tiktoken_proven: bool = False

    def __post_init__(self):
        super().__init__()

    def expand(self, documents):
        return (
            documents
            | "Batch" >> beam.BatchElements(
                min_batch_size=self.batch_size, max_batch_size=self.batch_size, record_metrics=False
            )
            | "Encode" >> beam.ParDo(
                _EncodeBatchFn(
                    self.tokenizer_path,
                    self.tokenizer_sha256,
                    self.eos_token,
                    self.append_eos,
                    self.use_tiktoken,
                    self.tiktoken_proven and self.tokenizer_sha256 is not None,
                )
            ).with_output_types(TokenRow)
        )
