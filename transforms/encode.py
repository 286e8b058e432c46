"""Encoding documents into token IDs: ``EncodeDocuments`` and the tokenizer it loads.

The tokenizer is read once per worker (``DoFn.setup``) through Beam's
FileSystems, so ``gs://`` and ``s3://`` paths work on any runner, and its
SHA-256 is checked against the one the driver saw, so a file replaced while the
job runs cannot silently mix two tokenizers in one dataset.

The hot loop may run on tiktoken's Rust core, but only after it is proven to
give our IDs for the tokenizer at hand (see ``fast_encoder``); our own encoder
stays the reference and handles everything tiktoken cannot (bytes that are not
valid UTF-8, custom patterns, tokenizers whose merges tiktoken would replay
differently).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Callable, NamedTuple

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from bpe.pretokenize import PRESETS
from bpe.encoder import PieceEncoder
from bpe.tokenizer import FILE_NAME, Tokenizer, TokenizerFileError
from transforms.coders import SizedPickleCoder

NAMESPACE = "beam_bpe.encode"


class TokenRow(NamedTuple):
    """One encoded document: a row of a token shard.

    Attributes:
      id: the record's id field, or ``<file>:<record number>``.
      tokens: the token IDs (EOS included when appended).
    """

    id: str
    tokens: list[int]


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


# Text that exercises every branch of the preset patterns and the places where
# regex engines disagree most often: Unicode whitespace and categories, digits of
# other scripts, contractions in both cases, CR/LF runs, trailing spaces.
VERIFICATION_SAMPLE = "".join(
    [
        "Hello, world! It's 2024; we'll see—they're OK'd. I'M HERE'S 'LL 'VE 'RE 'D 'T.\n",
        "  leading and   multiple   spaces \t\ttabs\r\n\r\nCRLF\n\n\n  \n trailing   ",
        "numbers 1 12 123 1234 12345 3.14159 1,000,000 ١٢٣٤٥ １２３４ ⅫⅣ ²³ ½\n",
        "Ünïcödé façade naïve coöperate Straße ΑΒΓ αβγ Кириллица עברית العربية हिन्दी ไทย\n",
        "漢字かなカナ한국어 中文没有空格的句子很长很长 😀👍🏽👨‍👩‍👧 e\u0301 a\u0308 \u200d\u200b\ufeff\n",
        "".join(chr(c) for c in range(0x00, 0x80)),
        "\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a",
        "\u2028\u2029\u202f\u205f\u3000 x\x1c\x1d\x1e\x1fy \u00ad\u034f\u180e\n",
        "def f(x):\n    return {'a': [1, 2]}  # comment\n\tif x <= 0: pass\n",
        "<|endoftext|> <s></s> [CLS] @@ ## $$ %% ^^ && ** (( )) __ ++ == ~~ `` || \\\\ // ?? !! ...\n",
    ]
)


def fast_encoder(tokenizer: Tokenizer, proven: bool = False) -> tuple[Callable[[str], list[int]] | None, str]:
    """tiktoken's ``encode_ordinary`` for this tokenizer, if it provably gives our IDs.

    Both encoders return a piece that is a whole token as that token. Otherwise
    tiktoken repeatedly merges the adjacent pair whose *concatenated bytes* have
    the lowest rank (our ID), while ours replays the merge *pairs* in learned
    order. They can differ only where two adjacent tokens (a, b) spell a token T
    whose own merge is some other pair: tiktoken joins them, ours never does.
    ``_rank_mismatch`` proves, for every such "foreign" pair, that our encoder can
    never leave a and b side by side (see there). Pieces must match too, so only
    the preset patterns (tiktoken's own) qualify, and a sample text is encoded
    both ways as a last check of the two regex engines.

    Args:
      tokenizer: the tokenizer at hand.
      proven: ``_rank_mismatch`` already found nothing for this very tokenizer
        (same SHA-256), e.g. in the driver; skip it here. The sample check stays.

    Returns:
      (encode function or None, a one-line reason for the choice).
    """
    if tokenizer.pattern not in PRESETS.values():
        return None, "custom pre-tokenizer pattern: tiktoken's regex engine may split it differently"
    try:
        import tiktoken  # noqa: F401  (an optional accelerator, not a dependency)
    except ImportError:
        return None, "tiktoken is not installed"
    mismatch = None if proven else _rank_mismatch(tokenizer)
    if mismatch:
        return None, mismatch
    try:
        encoding = tokenizer.to_tiktoken()
    except Exception as e:  # any failure to build it just means the slow path
        return None, f"tiktoken rejected the vocabulary: {e}"
    ours = tokenizer.encode(VERIFICATION_SAMPLE)
    theirs = encoding.encode_ordinary(VERIFICATION_SAMPLE)
    if ours != theirs:
        first = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
        return None, f"tiktoken differs from our encoder on the verification sample at token {first}"
    return encoding.encode_ordinary, "tiktoken verified identical for this tokenizer"


def _rank_mismatch(tokenizer: Tokenizer) -> str | None:
    """Why tiktoken could encode some text differently from our encoder, or None.

    Checks, with t(x) = the merge step that creates token x (-1 for bytes):

    1. Token bytes are unique, and every token's bytes, replayed as one piece,
       give that token (both encoders return whole-token pieces directly).
    2. For every foreign pair (a, b) spelling token T (see ``fast_encoder``),
       a and b can never be adjacent in our encoder. Suppose they were, split at
       byte k. Then the token ending at k-1 has always been an element of a's
       right spine (a, right(a), right(right(a)), ...) and the token starting at
       k one of b's left spine. Spine elements x and y are side by side during
       the steps after both exist and before their parents: if merge (x, y)
       is step r within that window, step r would have joined them across k,
       and tokens are never split again, so the adjacency is impossible. (When
       y's parent is made at step r itself, that is the same merge (c, c) on a
       run c c c; merging left to right, x takes y first.) A foreign pair with no
       such refuting (x, y) is a possible difference, and disqualifies tiktoken.
    """
    merges = tokenizer.merges
    token_bytes = [tokenizer.token_bytes(i) for i in range(256 + len(merges))]
    rank: dict[bytes, int] = {}
    for token_id, data in enumerate(token_bytes):
        if data in rank:
            return f"tokens {rank[data]} and {token_id} have the same bytes"
        rank[data] = token_id
    replay = PieceEncoder(merges).encode_bytes
    for token_id in range(256, len(token_bytes)):
        if replay(token_bytes[token_id]) != [token_id]:
            return f"token {token_id}'s own bytes do not encode to it by replaying the merges"
    merge_step = {pair: step for step, pair in enumerate(merges)}

    def created(token_id: int) -> float:
        return token_id - 256 if token_id >= 256 else -1

    def spine(token_id: int, side: int) -> list[int]:
        chain = [token_id]
        while token_id >= 256:
            token_id = merges[token_id - 256][side]
            chain.append(token_id)
        return chain

    def refuted(a: int, b: int) -> bool:
        lefts, rights = spine(a, 1), spine(b, 0)
        for j, x in enumerate(lefts):
            x_until = created(lefts[j - 1]) if j else float("inf")
            for i, y in enumerate(rights):
                step = merge_step.get((x, y))
                if step is None:
                    continue
                y_until = created(rights[i - 1]) if i else float("inf")
                if max(created(x), created(y)) < step < x_until and step <= y_until:
                    return True
        return False

    for token_id in range(256, len(token_bytes)):
        data = token_bytes[token_id]
        own = merges[token_id - 256]
        for k in range(1, len(data)):
            left = rank.get(data[:k])
            if left is None:
                continue
            right = rank.get(data[k:])
            if right is not None and (left, right) != own and not refuted(left, right):
                return (
                    f"tiktoken could build token {token_id} from ({left}, {right}), "
                    f"which is not its merge {own}"
                )
    return None


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
            self._fast, reason = fast_encoder(tokenizer, proven=self._tiktoken_proven)
            logging.info("beam-bpe encode: %s", reason)

    def process(self, documents):
        tokenizer, fast, eos = self._tokenizer, self._fast, self._eos
        fast_count = tokens = input_bytes = 0
        for doc in documents:
            data = doc.data
            ids = None
            if fast is not None:
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError:
                    pass  # tiktoken takes only valid text; ours is lossless on any bytes
                else:
                    ids = fast(text)
                    fast_count += 1
            if ids is None:
                ids = tokenizer.encode(data)
            if eos:
                ids.extend(eos)
            tokens += len(ids)
            input_bytes += len(data)
            row_id = doc.doc_id if doc.doc_id is not None else f"{doc.file}:{doc.record}"
            yield TokenRow(row_id, ids)
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
