"""The Tokenizer: a vocabulary (ID -> bytes), a pre-tokenizer, merge semantics and special tokens.

Three kinds, one interface:

- ours (``kind == "beam-bpe"``), the contract: 0..255 are the single bytes,
  merges create the IDs from 256 on in learned order, special tokens follow the
  merges in the order given; merges replay in learned order. An extension of
  ours (and its pruning) keeps its base's special tokens where they are, with
  new merges after them: special tokens may sit between merges, whose IDs then
  skip theirs (``merge_ids``).
- a tiktoken rank file (``"tiktoken"``): the file's IDs; tiktoken's byte-rank
  semantics (``bpe.encoder.RankEncoder``); pattern and special tokens from a
  preset (``bpe.presets``) or the caller.
- a Hugging Face byte-level BPE tokenizer.json (``"huggingface"``): the file's
  IDs; HF's merge-rank semantics with ``ignore_merges``; its NFC normalizer if
  any, pre-tokenizer chain, added tokens and the BOS/EOS its post-processor
  declares (and the roles its ``tokenizer_config.json`` gives, ``bpe.tokenizer_file.roles``).

Text goes through the steps in Hugging Face's order: added tokens (and allowed
special tokens) not marked ``normalized`` are matched in the text as given; the
rest is normalized (NFC, when the file says so); the tokens marked
``normalized`` are matched in that; the pre-tokenizer splits what is left.
Decoding gives the tokens' bytes: it does not undo the normalization.

Files are read local or remote (see ``bpe.tokenizer_file.storage``). ``encode`` runs
through ``engine``, the fastest chain of engines proven to give the reference's
IDs for this tokenizer (see ``bpe.engines``); ``reference`` is the pure-Python
reference encoder itself.
"""

from __future__ import annotations

import hashlib
import json
from types import MappingProxyType
from typing import Callable, Iterable, Mapping, Sequence

from bpe import engines, pruning, tokenizer_export, tokenizer_file
from bpe.decoder import Decoder, StreamDecoder
from bpe.encoder import PieceEncoder, RankEncoder
from bpe.engines import EngineProof
from bpe.presets import ENCODINGS, encoding_preset
from bpe.pretokenize import PreTokenizer, to_text
from bpe.tokenizer_file import FILE_NAME, TokenizerFileError, byte_to_char, tiktoken_file
from bpe.tokenizer_file import roles as roles_file
from bpe.tokenizer_file import storage
from bpe.tokenizer_file.added_tokens import AddedTokenEncoder, split_out
from bpe.tokenizer_file.hf_normalizer import nfc
from bpe.tokenizer_file.hf_pretokenizer import StepPreTokenizer

__all__ = ["FILE_NAME", "Tokenizer", "TokenizerFileError", "byte_to_char", "check_special_tokens", "merge_ids"]


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
    """A byte-level BPE tokenizer: ours, a tiktoken rank file's or a Hugging Face tokenizer.json's.

    The constructor makes one of ours; ``load`` reads any of the three.

    Args:
      merges: merge i joins (left ID, right ID) into the i-th ID from 256 on that no
        special token holds (``merge_ids``: 256 + i when the special tokens come
        last); each ID it names must exist before it.
      pattern: a preset name (``gpt2``, ``cl100k``, ``o200k``) or a regex.
      special_tokens: strings given IDs after the merges, in this order; or text -> ID,
        IDs from 256 on that merges and special tokens fill without a gap (special
        tokens between merges, as in an extension of ours).

    Attributes:
      kind: ``"beam-bpe"`` (our ID contract), ``"tiktoken"`` (a rank file: byte-rank
        semantics) or ``"huggingface"`` (a foreign tokenizer.json: HF's merge semantics).
      merges: (left ID, right ID) in rank order, for ours and Hugging Face's; a rank
        file has none (``[]``): tiktoken merges by the ranks of token bytes.
      special_tokens: text -> ID.
      added_tokens: Hugging Face added tokens that are not special, text -> ID: matched
        in any text, as HF does.
      bos_token, eos_token, pad_token: the special tokens that begin and end a document
        and pad a sequence, where the tokenizer declares them (``eos_token`` of ours is
        the special token with the lowest ID, unless the ``tokenizer_config.json`` beside
        one with special tokens between merges names another; a rank file's comes from its
        preset; a Hugging Face file's from its post-processor, else from
        ``tokenizer_config.json`` beside it).
      normalizer: ``"NFC"`` when the tokenizer normalizes text to NFC
        (``bpe.tokenizer_file.hf_normalizer``) before pre-tokenization, else None.
      vocab_size: the largest ID + 1 (IDs may have gaps: cl100k has no 100256).
    """

    def __init__(
        self,
        merges: Sequence[tuple[int, int]],
        pattern: str = "gpt2",
        special_tokens: Sequence[str] | Mapping[str, int] = (),
    ):
        merges = [(int(left), int(right)) for left, right in merges]
        if isinstance(special_tokens, Mapping):
            special_ids = _placed_special_tokens(special_tokens, len(merges))
        else:
            names = check_special_tokens(special_tokens)
            special_ids = {s: 256 + len(merges) + i for i, s in enumerate(names)}
        merged_ids = merge_ids(len(merges), special_ids.values())
        specials_last = min(special_ids.values(), default=256) > max(merged_ids, default=255)
        token_bytes = {b: bytes([b]) for b in range(256)}
        for i, (left, right) in enumerate(merges):
            if left not in token_bytes or right not in token_bytes:
                raise ValueError(f"merge {i} ({left}, {right}) names a token that does not exist before it")
            token_bytes[merged_ids[i]] = token_bytes[left] + token_bytes[right]
        self._setup(
            kind="beam-bpe",
            token_bytes=token_bytes,
            special_tokens=special_ids,
            pre_tokenizer=PreTokenizer(pattern),
            encoder=PieceEncoder(merges, merged_ids=merged_ids),
            merges=merges,
            eos_token=next(iter(special_ids), None),
            # Ours declares it by its layout; with special tokens between merges (an extension),
            # tokenizer_config.json names it too, for transformers.
            roles_in_file=("eos_token",) if specials_last else (),
        )

    def _setup(self, kind: str, token_bytes: Mapping[int, bytes], special_tokens: Mapping[str, int],
               pre_tokenizer, encoder, merges: list[tuple[int, int]], added_tokens: Mapping[str, int] | None = None,
               bos_token: str | None = None, eos_token: str | None = None, file_text: bytes | None = None,
               normalizer: str | None = None, normalized_tokens: frozenset[str] = frozenset(),
               roles_in_file: tuple[str, ...] = ()) -> None:
        """Sets every attribute; the one place a Tokenizer of any kind is put together.

        ``roles_in_file``: the roles (``bos_token``, ...) its tokenizer.json declares
        itself; ``roles_config`` gives the others to the file beside it."""
        self.kind = kind
        self.normalizer = normalizer
        self._normalize = nfc if normalizer == "NFC" else None
        self._normalized_tokens = normalized_tokens  # matched after normalization (see the module)
        self.merges = merges
        self.pre_tokenizer = pre_tokenizer
        self.pattern = pre_tokenizer.pattern
        self.special_tokens = dict(special_tokens)
        self.added_tokens = dict(added_tokens or {})
        self.bos_token, self.eos_token, self.pad_token = bos_token, eos_token, None
        self._roles_in_file = frozenset(role for role in roles_in_file if getattr(self, role) is not None)
        self._token_bytes = dict(token_bytes)  # ordinary tokens
        self._spelled_ids = frozenset({**self.added_tokens, **self.special_tokens}.values())  # spelled by their text
        self.vocab_size = max([*self._token_bytes, *self.added_tokens.values(), *self.special_tokens.values()]) + 1
        self._sha256: str | None = None  # of the file it was loaded from, else computed when asked
        self._file_text = file_text  # a foreign file's own bytes, which ``save`` writes back
        self._encoder = encoder
        self._decoder_made: Decoder | None = None  # made when first asked: an encoding worker never is
        self._engine: engines.Engine | None = None  # decided once, by the first of engine / use_proof

    def _decoder(self) -> Decoder:
        """The lookup table of every token's bytes, special and added tokens included."""
        if self._decoder_made is None:
            table = dict(self._token_bytes)
            for text, token_id in {**self.added_tokens, **self.special_tokens}.items():
                table[token_id] = text.encode("utf-8")
            self._decoder_made = Decoder(table, self.special_tokens.values())
        return self._decoder_made

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
        ``allowed_special`` (or it is ``"all"``). Hugging Face added tokens that
        are not special are matched in any text, as HF does. Ordinary text (no
        special token allowed) is encoded by ``engine``: default the tokenizer's
        ``engine`` (decided on first use); ``self.reference`` gives the
        pure-Python reference's IDs, which every engine is proven to equal.

        Raises:
          TypeError: ``text`` is neither str nor bytes.
        """
        if not isinstance(text, (str, bytes, bytearray)):
            raise TypeError(f"encode takes str or bytes, got {type(text).__name__}")
        engine = engine or self.engine
        if allowed_special == "all":
            allowed_special = self.special_tokens
        allowed_special = set(allowed_special)
        if not allowed_special:
            return list(engine.encode(text))
        text, errors = to_text(text)
        unknown = allowed_special - set(self.special_tokens)
        if unknown:
            raise ValueError(f"not special tokens of this tokenizer: {sorted(unknown)}")
        matched = {**self.added_tokens, **{s: self.special_tokens[s] for s in allowed_special}}
        return AddedTokenEncoder(self._encoder).encode_pieces(self._split_out(text, matched), errors)

    def reference_parts(self) -> tuple[Callable[[str], list], object]:
        """(split, encoder) of the reference for ordinary text: ``encoder.encode_pieces(split(text), errors)``.

        ``split`` normalizes and pre-tokenizes; with added tokens, it gives their
        IDs (ints) among the pieces.
        """
        if self.added_tokens:
            return (lambda text: self._split_out(text, self.added_tokens)), AddedTokenEncoder(self._encoder)
        if self._normalize is not None:
            normalize, split = self._normalize, self.pre_tokenizer.split
            return (lambda text: split(normalize(text))), self._encoder
        return self.pre_tokenizer.split, self._encoder

    def normalize(self, text: str) -> str:
        """The text as the pre-tokenizer sees it: NFC when the tokenizer normalizes, else as it is."""
        return text if self._normalize is None else self._normalize(text)

    def ordinary_runs(self, text: str) -> list[str]:
        """The runs of ordinary text the pre-tokenizer splits: normalized, between the added
        tokens matched (special-token strings are ordinary text); non-empty."""
        return [run for run in self._split_out(text, self.added_tokens, lambda run: [run]) if type(run) is str and run]

    def _split_out(self, text: str, tokens: Mapping[str, int], split=None) -> list[str | int]:
        """Pieces of ordinary text and IDs of the ``tokens`` matched, in Hugging Face's
        order (see the module): tokens not marked normalized in the text as given,
        then the normalized ones in the normalized rest. ``split``: the pre-tokenizer's
        split unless given."""
        split = split or self.pre_tokenizer.split
        as_given = {t: i for t, i in tokens.items() if t not in self._normalized_tokens}
        normalized = {self.normalize(t): i for t, i in tokens.items() if t in self._normalized_tokens}
        pieces: list[str | int] = []
        for part in split_out(text, as_given):
            if type(part) is int:
                pieces.append(part)
                continue
            for rest in split_out(self.normalize(part), normalized):
                if type(rest) is int:
                    pieces.append(rest)
                else:
                    pieces += split(rest)
        return pieces

    def with_bos_eos(self, ids: list[int], bos: bool = False, eos: bool = False) -> list[int]:
        """``ids`` with the BOS token before and/or the EOS token after.

        Raises:
          ValueError: the tokenizer declares no such token.
        """
        head = [self.bos_id] if bos else []
        tail = [self.eos_id] if eos else []
        return head + ids + tail if head or tail else ids

    @property
    def bos_id(self) -> int:
        """The ID of ``bos_token`` (a Hugging Face post-processor's).

        Raises:
          ValueError: the tokenizer declares none.
        """
        if self.bos_token is None:
            raise ValueError("the tokenizer declares no BOS token (a Hugging Face post-processor or "
                             "tokenizer_config.json declares one)")
        return self.special_tokens[self.bos_token]

    @property
    def eos_id(self) -> int:
        """The ID of ``eos_token``: ``eos_token_id()``."""
        return self.eos_token_id()

    def eos_token_id(self, name: str | None = None) -> int:
        """The ID of the EOS token ``name``, by default the one the tokenizer declares
        (``eos_token``; for ours the first special token).

        Raises:
          ValueError: the tokenizer has no such special token, or declares none and none is named.
        """
        if name is None:
            if not self.special_tokens:
                raise ValueError("the tokenizer has no special tokens, so there is no EOS token to append")
            if self.eos_token is None:
                raise ValueError(
                    "the tokenizer declares no EOS token: name one of its special tokens with --eos-token "
                    f"({', '.join(sorted(self.special_tokens)[:8])})"
                )
            name = self.eos_token
        if name not in self.special_tokens:
            raise ValueError(
                f"EOS token {name!r} is not a special token of the tokenizer "
                f"(it has {sorted(self.special_tokens) or 'none'})"
            )
        return self.special_tokens[name]

    @property
    def roles(self) -> dict[str, str]:
        """The roles the tokenizer declares, role (``bos_token``, ``eos_token``, ``pad_token``) -> special token."""
        return {role: getattr(self, role) for role in roles_file.ROLES if getattr(self, role) is not None}

    def keep_roles(self, roles: Mapping[str, str]) -> None:
        """Takes the ``roles`` (role -> special token text) its tokenizer.json does not declare
        itself: those of the ``tokenizer_config.json`` beside its file, or of the base of an
        extension or a pruning made from it (they name the EOS of ours with special tokens
        between merges, whose first special token is only the default). A role naming none
        of its special tokens is not taken."""
        for role, text in roles.items():
            if role not in self._roles_in_file and text in self.special_tokens:
                setattr(self, role, text)

    def roles_config(self, existing: bytes | None = None) -> str | None:
        """The ``tokenizer_config.json`` text of the roles its tokenizer.json does not declare
        (``bpe.tokenizer_file.roles``), the other keys of an ``existing`` one kept; None when
        the tokenizer.json declares every role the tokenizer has.

        Raises:
          TokenizerFileError: ``existing`` is not a JSON object.
        """
        if set(self.roles) <= self._roles_in_file:
            return None
        config = roles_file.parse_config(existing, roles_file.ROLES_FILE) if existing is not None else None
        return roles_file.render_roles(self.roles, config)

    def encode_batch(self, texts: Iterable[str | bytes], fast: bool = True) -> list[list[int]]:
        """Encodes many texts (str or any bytes) as ordinary text: ``[encode(t) for t in texts]``.

        With ``fast``, the tokenizer's ``engine`` encodes them (deciding it on
        the first call); else the reference encoder does.

        Raises:
          TypeError: ``texts`` is one str or bytes (whose characters or bytes
            would be taken as the texts), or a text is neither str nor bytes.
        """
        if isinstance(texts, (str, bytes, bytearray)):
            raise TypeError(f"encode_batch takes an iterable of texts, not one {type(texts).__name__}: "
                            "encode encodes one text")
        encode = self.engine.encode if fast else self.reference.encode
        try:
            return [encode(text) for text in texts]
        except TypeError:
            # Said only on failure, so that a batch of texts pays for no check.
            if isinstance(texts, Sequence):
                for position, text in enumerate(texts):
                    if not isinstance(text, (str, bytes, bytearray)):
                        raise TypeError(f"encode_batch takes str or bytes texts, got {type(text).__name__} "
                                        f"at position {position}") from None
            raise

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
        return engines.PythonEngine(*self.reference_parts())

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

    def ordinary_ids(self) -> list[int]:
        """The IDs of the vocabulary's ordinary tokens (neither special nor added), ascending."""
        return sorted(self._token_bytes)

    def ordinary_tokens(self) -> Mapping[int, bytes]:
        """ID -> bytes of the vocabulary's ordinary tokens (a read-only view)."""
        return MappingProxyType(self._token_bytes)

    @property
    def piece_encoder(self) -> PieceEncoder:
        """The reference encoder of pre-tokenized pieces (with its cache)."""
        return self._encoder

    # -- decoding -------------------------------------------------------------

    def token_bytes(self, token_id: int) -> bytes:
        # An ordinary token's bytes without the decoder's table (an encoding worker never
        # makes it), unless a special or added token holds that ID and spells it.
        data = self._token_bytes.get(token_id)
        if data is not None and token_id not in self._spelled_ids:
            return data
        return self._decoder().decode_bytes((token_id,))

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The exact bytes the IDs stand for; out-of-range IDs raise ValueError."""
        return self._decoder().decode_bytes(ids)

    def decode(self, ids: Iterable[int], errors: str = "replace") -> str:
        """IDs to text; invalid UTF-8 becomes U+FFFD, or raises with errors="strict"."""
        return self._decoder().decode(ids, errors)

    def stream_decoder(self, skip_special_tokens: bool = False, errors: str = "replace") -> StreamDecoder:
        """A decoder for IDs that arrive one at a time (``step``, ``feed``, ``flush``, ``prefill``)."""
        return self._decoder().stream(skip_special_tokens, errors)

    # -- files ----------------------------------------------------------------

    def to_json(self) -> str:
        """The tokenizer in the Hugging Face ``tokenizer.json`` format.

        Ours is rendered; a rank file's merges are derived and proven so that HF's
        merge semantics give tiktoken's IDs (``bpe.tokenizer_export``); a foreign
        tokenizer.json is its own text.

        Raises:
          bpe.tokenizer_export.NoExactFile: a rank file no tokenizer.json reproduces
            exactly, with the reason; ValueError: two tokens with the same bytes.
        """
        if self._file_text is not None:
            return self._file_text.decode("utf-8")
        if self.kind == "tiktoken":
            return tokenizer_export.rank_file_json(self._token_bytes, self.pattern, self.special_tokens)
        return tokenizer_file.render(self._token_bytes, self.merges, self.pattern, self.special_tokens)

    def save(self, path: str, transport_params: dict | None = None) -> str:
        """Writes ``tokenizer.json`` into a directory (or to a path ending in .json); returns the file's path.

        ``path``: local, ``file://``, or a URL smart_open opens (``s3://``,
        ``gs://``); ``transport_params`` go to smart_open (see ``bpe.tokenizer_file.storage``).
        A reader never sees half a file. Hugging Face ``tokenizers`` reads the file with
        this tokenizer's IDs, a rank file's included (see ``to_json``). Roles the file
        cannot declare (a rank file's EOS) go into ``tokenizer_config.json`` beside it,
        whose other keys are kept (``roles_config``).

        Raises:
          bpe.tokenizer_export.NoExactFile: a rank file that no tokenizer.json reproduces
            exactly, with the reason (nothing is written).
        """
        file_path = tokenizer_file.write(path, self.to_json(), transport_params)
        config = self.roles_config(roles_file.read_config(file_path, transport_params))
        if config is not None:
            tokenizer_file.write(storage.beside(file_path, roles_file.ROLES_FILE), config, transport_params)
        return file_path

    @classmethod
    def load(cls, path: str, transport_params: dict | None = None, *, pattern: str | None = None,
             special_tokens: Mapping[str, int] | None = None, preset: str | None = None) -> "Tokenizer":
        """Reads a tokenizer: a tokenizer.json (ours or a Hugging Face byte-level BPE one),
        a directory holding one, or a tiktoken rank file; ``.sha256`` is the file's.

        ``path``: local, ``file://``, or a URL smart_open opens (``s3://``,
        ``gs://``); ``transport_params`` go to smart_open (see ``bpe.tokenizer_file.storage``).
        A rank file holds no pattern and no special tokens: give ``preset``
        (``cl100k_base``, ``o200k_base``, ``r50k_base``/``gpt2``; see ``bpe.presets``)
        and/or ``pattern`` (a preset name or a regex) and ``special_tokens`` (text -> ID),
        which override the preset's.

        Raises:
          TokenizerFileError: one line: missing, unreadable, too big, not a valid
            tokenizer, or using something beam-bpe does not reproduce exactly.
        """
        data, file_path = tokenizer_file.read(path, transport_params)
        if not (file_path.endswith(".tiktoken") or tiktoken_file.looks_like_rank_file(data[:4096])):
            if pattern is not None or special_tokens is not None or preset is not None:
                raise TokenizerFileError(
                    f"{file_path} is a tokenizer.json, which defines its own pattern and special tokens: "
                    "a preset, pattern or special tokens go with tiktoken rank files only"
                )
            tokenizer = cls.from_json(data, source=file_path)
            tokenizer._read_roles(file_path, transport_params)
            return tokenizer
        return cls.from_tiktoken(data, source=file_path, pattern=pattern, special_tokens=special_tokens, preset=preset)

    def _read_roles(self, file_path: str, transport_params: dict | None) -> None:
        """Takes the roles of the ``tokenizer_config.json`` beside the file, if there is one.

        Raises:
          TokenizerFileError: it is not JSON, or names a role that is no special token.
        """
        data = roles_file.read_config(file_path, transport_params)
        if data is not None:
            where = storage.beside(file_path, roles_file.ROLES_FILE)
            self.keep_roles(roles_file.parse_roles(roles_file.parse_config(data, where), where, self.special_tokens))

    @classmethod
    def from_json(cls, data: str | bytes, source: str = FILE_NAME) -> "Tokenizer":
        """Parses and validates a tokenizer.json; any problem is one TokenizerFileError line."""
        data = data if isinstance(data, bytes) else data.encode("utf-8")
        spec = tokenizer_file.parse(data, source)
        try:
            if spec.is_ours():
                tokenizer = cls(spec.merges, pattern=spec.pattern, special_tokens=spec.special_tokens)
                if not spec.specials_last():
                    tokenizer._file_text = data  # an extension's own file: saved as it was read
            else:
                tokenizer = cls.__new__(cls)
                tokenizer._setup(
                    kind="huggingface",
                    token_bytes=spec.token_bytes,
                    special_tokens=spec.special_tokens,
                    pre_tokenizer=StepPreTokenizer(spec.steps),
                    encoder=_hf_encoder(spec),
                    merges=spec.merges,
                    added_tokens=spec.added_tokens,
                    bos_token=spec.bos_token,
                    eos_token=spec.eos_token,
                    roles_in_file=("bos_token", "eos_token"),  # its post-processor's
                    file_text=data,
                    normalizer=spec.normalizer,
                    normalized_tokens=spec.normalized_tokens,
                )
        except ValueError as e:
            raise TokenizerFileError(f"{source}: {e}") from None
        # The checksum of the very bytes parsed: it describes what was loaded.
        tokenizer._sha256 = hashlib.sha256(data).hexdigest()
        return tokenizer

    @classmethod
    def from_tiktoken(cls, data: bytes, source: str = "rank file", pattern: str | None = None,
                      special_tokens: Mapping[str, int] | None = None, preset: str | None = None) -> "Tokenizer":
        """Parses a tiktoken rank file; the pattern and special tokens come from the arguments or the preset.

        Raises:
          TokenizerFileError: one line naming the problem.
        """
        try:
            known = encoding_preset(preset) if preset is not None else None
            if pattern is None and known is None:
                raise ValueError(
                    "a tiktoken rank file holds no pattern: give a preset "
                    f"({', '.join(ENCODINGS)}) or a pattern"
                )
            ranks = tiktoken_file.parse(data, source).ranks
            if known is not None and pattern is None:
                _check_preset_ranks(ranks, known)
            specials = dict(special_tokens if special_tokens is not None else (known.special_tokens if known else {}))
            check_special_tokens(list(specials))
            taken = set(ranks.values())
            for text, token_id in specials.items():
                if not isinstance(token_id, int) or token_id < 0 or token_id in taken:
                    raise ValueError(f"special token {text!r} has ID {token_id!r}, which is not a free non-negative ID")
            eos = known.eos_token if known is not None and known.eos_token in specials else None
            tokenizer = cls.__new__(cls)
            tokenizer._setup(
                kind="tiktoken",
                token_bytes={rank: token for token, rank in ranks.items()},
                special_tokens=specials,
                pre_tokenizer=PreTokenizer(pattern if pattern is not None else known.pattern),
                encoder=RankEncoder(ranks),
                merges=[],
                eos_token=eos,
            )
        except ValueError as e:
            message = str(e)
            raise TokenizerFileError(message if message.startswith(source) else f"{source}: {message}") from None
        tokenizer._sha256 = hashlib.sha256(data).hexdigest()
        return tokenizer

    def prune(self, counts: Sequence[int] | Mapping[int, int], vocab_size: int) -> tuple["Tokenizer", list[int | None]]:
        """(the tokenizer without its least-used leaf tokens, down to ``vocab_size`` tokens, the ID map):
        ``id_map[i]`` is the new ID of old ID i, or None if removed. See ``bpe.pruning``.

        ``counts``: how often each ID was produced on a corpus (indexed by ID, or ID -> count).

        Raises:
          bpe.pruning.PruneError: a rank file, or a ``vocab_size`` not below this
            tokenizer's size or below its single bytes, special and added tokens.
        """
        pruned = pruning.prune(self, counts, vocab_size)
        return pruned.tokenizer, pruned.id_map

    # -- peers ----------------------------------------------------------------

    def to_tiktoken(self, name: str = "beam-bpe", special_tokens: Mapping[str, int] | None = None):
        """A ``tiktoken.Encoding`` with our IDs as ranks and our pattern.

        ``special_tokens``: tiktoken's special tokens (text -> ID); default ours.
        tiktoken merges by the rank of the concatenated bytes: for a rank file
        that is the file's own rule; for ours and Hugging Face files it gives the
        same IDs only where ``engine`` proves it.

        Raises:
          ValueError: the pre-tokenizer is not one regex (a Hugging Face chain),
            or the tokenizer normalizes text, which tiktoken does not.
        """
        import tiktoken  # only here: most uses of a tokenizer need none of it

        if self.normalizer is not None:
            raise ValueError(f"tiktoken does not normalize text; this tokenizer's file normalizes it ({self.normalizer})")
        if self.pattern is None:
            raise ValueError("tiktoken takes one pre-tokenizer regex; this tokenizer's pre-tokenizer is a chain of steps")
        return tiktoken.Encoding(
            name=name,
            pat_str=self.pattern,
            mergeable_ranks={data: token_id for token_id, data in self._token_bytes.items()},
            special_tokens=dict(self.special_tokens if special_tokens is None else special_tokens),
        )

    def __repr__(self) -> str:
        return (f"Tokenizer(kind={self.kind!r}, vocab_size={self.vocab_size}, merges={len(self.merges)}, "
                f"special_tokens={list(self.special_tokens)})")


def merge_ids(count: int, special_ids: Iterable[int]) -> list[int]:
    """The IDs ``count`` merges of ours create: from 256 on, in learned order, skipping the
    special tokens' IDs."""
    taken = set(special_ids)
    ids: list[int] = []
    token_id = 256
    while len(ids) < count:
        if token_id not in taken:
            ids.append(token_id)
        token_id += 1
    return ids


def _placed_special_tokens(special_tokens: Mapping[str, int], merge_count: int) -> dict[str, int]:
    """Special tokens given with their IDs, in ID order, if the IDs are ours to give: distinct,
    from 256 on, and with ``merge_count`` merges filling every ID from 256 up to the largest.

    Raises:
      ValueError: a special token or ID that breaks a rule, named.
    """
    check_special_tokens(list(special_tokens))
    end = 256 + merge_count + len(special_tokens)
    for text, token_id in special_tokens.items():
        if not isinstance(token_id, int) or isinstance(token_id, bool) or not 256 <= token_id < end:
            raise ValueError(f"special token {text!r} has ID {token_id!r}: with {merge_count} merges, the special "
                             f"tokens of ours hold IDs from 256 to {end - 1}")
    if len(set(special_tokens.values())) != len(special_tokens):
        raise ValueError("two special tokens have the same ID")
    return dict(sorted(special_tokens.items(), key=lambda item: item[1]))


def _check_preset_ranks(ranks: Mapping[bytes, int], known) -> None:
    """A rank file read with a preset is the preset's file, or an extension of it: more
    ranks, the first ``known.ranks`` of them exactly the preset's file
    (``tiktoken_file.is_extension_of``), as ``train --extend`` writes one.

    Raises:
      ValueError: fewer ranks, or more whose first ones are not the preset's file.
    """
    if len(ranks) == known.ranks:
        return
    if len(ranks) < known.ranks or not tiktoken_file.is_extension_of(ranks, known.ranks, known.sha256):
        raise ValueError(f"has {len(ranks)} ranks, but {known.name}'s file has {known.ranks}"
                         f"{'' if len(ranks) < known.ranks else ' and they are not its first ones'}: "
                         "is it the right file?")


def _hf_encoder(spec: tokenizer_file.TokenizerSpec) -> PieceEncoder:
    """The pair-rank encoder of a Hugging Face BPE model."""
    by_bytes = {data: token_id for token_id, data in spec.token_bytes.items()}
    return PieceEncoder(
        spec.merges,
        merged_ids=spec.merged_ids,
        byte_ids=[by_bytes[bytes([b])] for b in range(256)],
        whole_tokens=by_bytes if spec.ignore_merges else None,
    )
