"""The Tokenizer: a pre-tokenizer pattern, a list of merges and special tokens.

IDs (the contract): 0..255 are the single bytes, merge i creates 256 + i, and
special tokens follow the merges in the order given.

Files are Hugging Face ``tokenizer.json`` (see ``bpe.tokenizer_file``), local or
remote. ``encode`` runs through ``engine``, the fastest chain of engines
proven to give the reference's IDs for this tokenizer (see ``bpe.engines``);
``reference`` is the pure-Python reference encoder itself.
"""

from __future__ import annotations

import hashlib
import json
from typing import Iterable, Mapping, Sequence

from bpe import engines, tokenizer_file
from bpe.decoder import Decoder, StreamDecoder, vocabulary_bytes
from bpe.encoder import PieceEncoder
from bpe.engines import EngineProof
from bpe.pretokenize import PreTokenizer, to_text
from bpe.tokenizer_file import FILE_NAME, TokenizerFileError, byte_to_char

__all__ = ["FILE_NAME", "Tokenizer", "TokenizerFileError", "byte_to_char", "check_special_tokens"]


def check_special_tokens(special_tokens: Sequence[str], name: str = "special token") -> tuple[str, ...]:
    """The special tokens as a tuple, if they are distinct non-empty strings.

    Args:
      special_tokens: the strings to check.
      name: what the caller calls one of them in errors (e.g. a flag's name).

    Raises:
      ValueError: one line naming the first problem.
    """
    if isinstance(special_tokens, str):
        raise ValueError("special_tokens must be a sequence of strings, not one string")
    special_tokens = tuple(special_tokens)
    for token in special_tokens:
        if not isinstance(token, str):
            raise ValueError(f"{name} must be a string (special tokens are non-empty strings), got {token!r}")
        if not token:
            raise ValueError(f"{name} must not be empty (special tokens are non-empty strings)")
    duplicates = sorted({t for t in special_tokens if special_tokens.count(t) > 1})
    if duplicates:
        raise ValueError(f"duplicate special tokens: {', '.join(map(repr, duplicates))} ({name} given twice)")
    return special_tokens


class Tokenizer:
    """A byte-level BPE tokenizer.

    Args:
      merges: merge i joins (left ID, right ID) into ID 256 + i; each ID it names
        must exist before it.
      pattern: a preset name (``gpt2``, ``cl100k``, ``o200k``) or a regex.
      special_tokens: strings given IDs after the merges, in this order.
    """

    def __init__(
        self,
        merges: Sequence[tuple[int, int]],
        pattern: str = "gpt2",
        special_tokens: Sequence[str] = (),
    ):
        self.merges = [(int(left), int(right)) for left, right in merges]
        for i, (left, right) in enumerate(self.merges):
            if not (0 <= left < 256 + i and 0 <= right < 256 + i):
                raise ValueError(f"merge {i} ({left}, {right}) names a token that does not exist before it")
        special_tokens = check_special_tokens(special_tokens)
        self.pre_tokenizer = PreTokenizer(pattern)
        self.pattern = self.pre_tokenizer.pattern
        first_special = 256 + len(self.merges)
        self.special_tokens = {s: first_special + i for i, s in enumerate(special_tokens)}
        self.vocab_size = first_special + len(self.special_tokens)
        self._sha256: str | None = None  # of the file it was loaded from, else computed when asked

        token_bytes = vocabulary_bytes(self.merges)
        token_bytes.extend(s.encode("utf-8") for s in self.special_tokens)
        self._encoder = PieceEncoder(self.merges)
        self._decoder = Decoder(token_bytes, self.special_tokens.values())
        self._engine: engines.Engine | None = None  # decided once, by the first of engine / use_proof

    @property
    def sha256(self) -> str:
        """SHA-256 of the tokenizer.json it was loaded from, or of the one ``save`` writes."""
        if self._sha256 is None:
            try:
                text = self.to_json()
            except ValueError:  # two tokens with the same bytes have no tokenizer.json
                text = json.dumps([self.pattern, self.merges, list(self.special_tokens)])
            self._sha256 = hashlib.sha256(text.encode("utf-8")).hexdigest()
        return self._sha256

    # -- encoding -------------------------------------------------------------

    def encode(self, text: str | bytes, allowed_special: Iterable[str] | str = (), engine=None) -> list[int]:
        """Encodes text or any bytes (invalid UTF-8 included) into IDs.

        Special-token strings in the text are ordinary text unless listed in
        ``allowed_special`` (or it is ``"all"``). The text between allowed
        special tokens, or all of it, is encoded by ``engine``: default the
        tokenizer's ``engine`` (decided on first use); ``self.reference`` gives
        the pure-Python reference's IDs, which every engine is proven to equal.
        """
        engine = engine or self.engine
        if allowed_special == "all":
            allowed_special = self.special_tokens
        if not allowed_special:
            return engine.encode(text)
        unknown = set(allowed_special) - set(self.special_tokens)
        if unknown:
            raise ValueError(f"not special tokens of this tokenizer: {sorted(unknown)}")
        text, errors = to_text(text)
        ids: list[int] = []
        for segment, is_special in self.pre_tokenizer.segments(text, allowed_special):
            if is_special:
                ids.append(self.special_tokens[segment])
            else:
                # Text decoded from invalid UTF-8 goes back to its own bytes.
                ids.extend(engine.encode(segment.encode("utf-8", errors) if errors == "surrogateescape" else segment))
        return ids

    def encode_batch(self, texts: Iterable[str | bytes], fast: bool = True) -> list[list[int]]:
        """Encodes many texts (str or any bytes) as ordinary text: ``[encode(t) for t in texts]``.

        With ``fast``, the tokenizer's ``engine`` encodes them (deciding it on
        the first call); else the reference encoder does.
        """
        encode = self.engine.encode if fast else self.reference.encode
        return [encode(text) for text in texts]

    @property
    def engine(self) -> engines.Engine:
        """The fastest engine proven to give this tokenizer's IDs (``.name``, ``.reason``).

        Decided on first use, by running the proofs (O(vocabulary)), or taken
        from ``use_proof``; kept from then on.
        """
        if self._engine is None:
            self._engine = engines.choose(self)
        return self._engine

    @property
    def reference(self) -> engines.PythonEngine:
        """The pure-Python reference encoder (``encode(data)``, ``encode_array(data)``):
        the oracle every engine is proven against; ``encode(text, engine=tokenizer.reference)``
        with special tokens."""
        return engines.PythonEngine(self.pre_tokenizer.split, self._encoder)

    def prove(self) -> EngineProof:
        """The proof of which engine gives this tokenizer's IDs: small, picklable, for ``use_proof`` elsewhere."""
        return self.engine.proof

    def use_proof(self, proof: EngineProof) -> engines.Engine:
        """Takes the engine a proof names (made by ``prove`` for a tokenizer with the same
        SHA-256, e.g. in a job's driver) without re-running the O(vocabulary) proof.

        An engine already decided is kept. Returns ``self.engine``.

        Raises:
          bpe.engines.ProofMismatch: the proof is for another tokenizer.
        """
        engines.check(self, proof)
        if self._engine is None:
            self._engine = engines.from_proof(self, proof)
        return self._engine

    @property
    def piece_encoder(self) -> PieceEncoder:
        """The reference encoder of pre-tokenized pieces (with its cache)."""
        return self._encoder

    # -- decoding -------------------------------------------------------------

    def token_bytes(self, token_id: int) -> bytes:
        return self._decoder.decode_bytes((token_id,))

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The exact bytes the IDs stand for; out-of-range IDs raise ValueError."""
        return self._decoder.decode_bytes(ids)

    def decode(self, ids: Iterable[int], errors: str = "replace") -> str:
        """IDs to text; invalid UTF-8 becomes U+FFFD, or raises with errors="strict"."""
        return self._decoder.decode(ids, errors)

    def stream_decoder(self, skip_special_tokens: bool = False, errors: str = "replace") -> StreamDecoder:
        """A decoder for IDs that arrive one at a time (``step``, ``feed``, ``flush``, ``prefill``)."""
        return self._decoder.stream(skip_special_tokens, errors)

    # -- files ----------------------------------------------------------------

    def to_json(self) -> str:
        """The tokenizer in the Hugging Face ``tokenizer.json`` format."""
        token_bytes = [self._decoder.token_bytes[i] for i in range(256 + len(self.merges))]
        return tokenizer_file.render(token_bytes, self.merges, self.pattern, self.special_tokens)

    def save(self, path: str, transport_params: dict | None = None) -> str:
        """Writes ``tokenizer.json`` into a directory (or to a path ending in .json); returns the file's path.

        ``path``: local, ``file://``, or a URL smart_open opens (``s3://``,
        ``gs://``); ``transport_params`` go to smart_open (see ``bpe.tokenizer_file``).
        A reader never sees half a file.
        """
        return tokenizer_file.write(path, self.to_json(), transport_params)

    @classmethod
    def load(cls, path: str, transport_params: dict | None = None) -> "Tokenizer":
        """Reads a tokenizer from a tokenizer.json, or a directory holding one; ``.sha256`` is the file's.

        ``path``: local, ``file://``, or a URL smart_open opens (``s3://``,
        ``gs://``); ``transport_params`` go to smart_open (see ``bpe.tokenizer_file``).

        Raises:
          TokenizerFileError: one line: missing, unreadable, too big, or not a valid tokenizer.
        """
        data, file_path = tokenizer_file.read(path, transport_params)
        return cls.from_json(data, source=file_path)

    @classmethod
    def from_json(cls, data: str | bytes, source: str = FILE_NAME) -> "Tokenizer":
        """Parses and validates a tokenizer.json; any problem is one TokenizerFileError line."""
        spec = tokenizer_file.parse(data, source)
        try:
            tokenizer = cls(spec.merges, pattern=spec.pattern, special_tokens=spec.special_tokens)
        except ValueError as e:
            raise TokenizerFileError(f"{source}: {e}") from None
        # The checksum of the very bytes parsed: it describes what was loaded.
        tokenizer._sha256 = hashlib.sha256(data if isinstance(data, bytes) else data.encode("utf-8")).hexdigest()
        return tokenizer

    # -- peers ----------------------------------------------------------------

    def to_tiktoken(self, name: str = "beam-bpe", special_tokens: Mapping[str, int] | None = None):
        """A ``tiktoken.Encoding`` with our IDs as ranks and our pattern.

        ``special_tokens``: tiktoken's special tokens (text -> ID); default ours.
        """
        import tiktoken  # only here: most uses of a tokenizer need none of it

        token_bytes = self._decoder.token_bytes
        return tiktoken.Encoding(
            name=name,
            pat_str=self.pattern,
            mergeable_ranks={token_bytes[i]: i for i in range(256 + len(self.merges))},
            special_tokens=dict(self.special_tokens if special_tokens is None else special_tokens),
        )

    def __repr__(self) -> str:
        return f"Tokenizer(vocab_size={self.vocab_size}, merges={len(self.merges)}, special_tokens={list(self.special_tokens)})"
