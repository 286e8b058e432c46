"""The Tokenizer: a pre-tokenizer pattern, a list of merges and special tokens.

IDs (the contract): 0..255 are the single bytes, merge i creates 256 + i, and
special tokens follow the merges in the order given.

Files are Hugging Face ``tokenizer.json``: a Split pre-tokenizer with our regex,
ByteLevel without its own regex, a BPE model whose vocab maps the byte-level
strings to our IDs, a ByteLevel decoder and the specials as added tokens. So
``tokenizers`` and ``transformers`` load our files and give our IDs. Loading is
parsing and validation only: a tokenizer file is data, never code.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from typing import Iterable, Mapping, Sequence

from bpe.decoder import Decoder, StreamDecoder
from bpe.encoder import PieceEncoder
from bpe.pretokenize import PRESETS, PreTokenizer, onig_compatible, to_text
from bpe.tiktoken_core import encode_if_valid, fast_encoder

FILE_NAME = "tokenizer.json"


class TokenizerFileError(ValueError):
    """A tokenizer file that is missing, not JSON, or not a valid beam-bpe tokenizer."""


@lru_cache(maxsize=None)
def byte_to_char() -> dict[int, str]:
    """GPT-2's reversible map from bytes to printable characters (HF's ByteLevel alphabet).

    Printable Latin-1 bytes stand for themselves; the rest are shifted to U+0100 and up.
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    mapping = {b: chr(b) for b in printable}
    shift = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + shift)
            shift += 1
    return mapping


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
        _check_special_tokens(special_tokens)
        self.pre_tokenizer = PreTokenizer(pattern, special_tokens)
        self.pattern = self.pre_tokenizer.pattern
        first_special = 256 + len(self.merges)
        self.special_tokens = {s: first_special + i for i, s in enumerate(special_tokens)}
        self.vocab_size = first_special + len(self.special_tokens)
        self.sha256: str | None = None  # of the file it was loaded from

        token_bytes = [bytes([b]) for b in range(256)]
        for left, right in self.merges:
            token_bytes.append(token_bytes[left] + token_bytes[right])
        token_bytes.extend(s.encode("utf-8") for s in self.special_tokens)
        self._encoder = PieceEncoder(self.merges)
        self._decoder = Decoder(token_bytes, self.special_tokens.values())
        self._fast = None  # (tiktoken's encode or None, why), once fast_encoder() decided

    # -- encoding -------------------------------------------------------------

    def encode(self, text: str | bytes, allowed_special: Iterable[str] | str = ()) -> list[int]:
        """Encodes text or any bytes (invalid UTF-8 included) into IDs.

        Special-token strings in the text are ordinary text unless listed in
        ``allowed_special`` (or it is ``"all"``).
        """
        text, errors = to_text(text)
        if allowed_special == "all":
            allowed_special = self.special_tokens
        if not allowed_special:
            return self._encoder.encode_pieces(self.pre_tokenizer.split(text), errors)
        unknown = set(allowed_special) - set(self.special_tokens)
        if unknown:
            raise ValueError(f"not special tokens of this tokenizer: {sorted(unknown)}")
        ids: list[int] = []
        for segment, is_special in self.pre_tokenizer.segments(text, allowed_special):
            if is_special:
                ids.append(self.special_tokens[segment])
            else:
                ids.extend(self._encoder.encode_pieces(self.pre_tokenizer.split(segment), errors))
        return ids

    def encode_batch(self, texts: Iterable[str | bytes], fast: bool = True) -> list[list[int]]:
        """Encodes many texts (str or any bytes) as ordinary text: ``[encode(t) for t in texts]``.

        With ``fast`` and tiktoken installed (``pip install beam-bpe[fast]``),
        tiktoken's Rust core encodes the texts that are valid UTF-8, but only
        once it is proven to give this tokenizer's IDs (``fast_encoder``; the
        proof runs on the first call and is kept). Other texts, and every text
        when tiktoken does not qualify, go through our own encoder.
        """
        encode_fast = self.fast_encoder()[0] if fast else None
        if encode_fast is not None:
            # Lists, as encode gives: tiktoken's own list call, not arrays turned into lists.
            encode_fast = encode_fast.encoding.encode_ordinary
        out = []
        for text in texts:
            ids = encode_if_valid(encode_fast, text) if encode_fast is not None else None
            out.append(self.encode(text) if ids is None else ids)
        return out

    def fast_encoder(self, proven: bool = False):
        """(tiktoken's encoder for this tokenizer or None, the reason), decided once.

        The encoder takes valid text and returns the IDs as an ``array("I")``.

        ``proven``: skip the O(vocabulary) proof because it already passed for a
        tokenizer with the same SHA-256 (e.g. in a job's driver); see
        ``bpe.tiktoken_core.fast_encoder``.
        """
        if self._fast is None:
            self._fast = fast_encoder(self, proven=proven)
        return self._fast

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
        to_char = byte_to_char()
        names = ["".join(to_char[b] for b in self._decoder.token_bytes[i]) for i in range(256 + len(self.merges))]
        vocab = {name: i for i, name in enumerate(names)}
        if len(vocab) != len(names):
            first = next(i for i, name in enumerate(names) if vocab[name] != i)
            raise ValueError(
                f"tokens {first} and {vocab[names[first]]} have the same bytes; tokenizer.json cannot hold both"
            )
        return json.dumps(
            {
                "version": "1.0",
                "truncation": None,
                "padding": None,
                "added_tokens": [
                    {
                        "id": token_id,
                        "content": content,
                        "single_word": False,
                        "lstrip": False,
                        "rstrip": False,
                        "normalized": False,
                        "special": True,
                    }
                    for content, token_id in self.special_tokens.items()
                ],
                "normalizer": None,
                "pre_tokenizer": {
                    "type": "Sequence",
                    "pretokenizers": [
                        {"type": "Split", "pattern": {"Regex": onig_compatible(self.pattern)}, "behavior": "Isolated", "invert": False},
                        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
                    ],
                },
                "post_processor": None,
                "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
                "model": {
                    "type": "BPE",
                    "dropout": None,
                    "unk_token": None,
                    "continuing_subword_prefix": None,
                    "end_of_word_suffix": None,
                    "fuse_unk": False,
                    "byte_fallback": False,
                    "ignore_merges": False,
                    "vocab": vocab,
                    "merges": [[names[left], names[right]] for left, right in self.merges],
                },
            },
            ensure_ascii=False,
            indent=1,
        )

    def save(self, path: str) -> str:
        """Writes ``tokenizer.json`` into a directory (or to a path ending in .json).

        The file is written to a temporary name and renamed, so a reader never sees
        half a file. Returns the file's path.
        """
        file_path = path if path.endswith(".json") else os.path.join(path, FILE_NAME)
        os.makedirs(os.path.dirname(file_path) or ".", exist_ok=True)
        tmp_path = file_path + ".tmp"
        with open(tmp_path, "w", encoding="utf-8") as f:
            f.write(self.to_json())
        os.replace(tmp_path, file_path)
        return file_path

    @classmethod
    def load(cls, path: str) -> "Tokenizer":
        """Reads a tokenizer from a directory holding tokenizer.json, or from the file."""
        file_path = os.path.join(path, FILE_NAME) if os.path.isdir(path) else path
        try:
            with open(file_path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            raise TokenizerFileError(f"tokenizer file not found: {file_path}") from None
        except OSError as e:
            raise TokenizerFileError(f"cannot read tokenizer file {file_path}: {e.strerror}") from None
        return cls.from_json(data, source=file_path)

    @classmethod
    def from_json(cls, data: str | bytes, source: str = "tokenizer.json") -> "Tokenizer":
        """Parses and validates a tokenizer.json; any problem is one TokenizerFileError line."""
        try:
            spec = json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise TokenizerFileError(f"{source} is not valid JSON: {e}") from None
        try:
            tokenizer = cls._from_spec(spec, source)
        except TokenizerFileError:
            raise
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
            detail = f"missing key {e}" if isinstance(e, KeyError) else str(e)
            raise TokenizerFileError(f"{source} is not a valid beam-bpe tokenizer: {detail}") from None
        tokenizer.sha256 = hashlib.sha256(data if isinstance(data, bytes) else data.encode("utf-8")).hexdigest()
        return tokenizer

    @classmethod
    def _from_spec(cls, spec: dict, source: str) -> "Tokenizer":
        def fail(reason: str) -> TokenizerFileError:
            return TokenizerFileError(f"{source}: {reason}")

        if not isinstance(spec, dict):
            raise fail("expected a JSON object")
        model = spec["model"]
        if model.get("type") != "BPE":
            raise fail(f"model type is {model.get('type')!r}, expected 'BPE'")
        pattern = _find_split_pattern(spec.get("pre_tokenizer"))
        if pattern is None:
            raise fail("no Split pre-tokenizer with a regex")
        # Files hold the Oniguruma spelling of a preset; keep tiktoken's own string.
        pattern = next((p for p in PRESETS.values() if onig_compatible(p) == pattern), pattern)
        vocab: dict[str, int] = model["vocab"]
        to_char = byte_to_char()
        for b in range(256):
            if vocab.get(to_char[b]) != b:
                raise fail(f"byte {b} must have ID {b}, found {vocab.get(to_char[b])!r}")
        merges = []
        for i, merge in enumerate(model["merges"]):
            left, right = merge.split(" ") if isinstance(merge, str) else merge
            for name in (left, right):
                if name not in vocab:
                    raise fail(f"merge {i} names unknown token {name!r}")
            merged = vocab.get(left + right)
            if merged != 256 + i:
                raise fail(f"merge {i} ({left!r}, {right!r}) must create ID {256 + i}, vocab says {merged!r}")
            merges.append((vocab[left], vocab[right]))
        if len(vocab) != 256 + len(merges):
            raise fail(f"vocab has {len(vocab)} entries, expected 256 + {len(merges)} merges")
        specials = sorted(spec.get("added_tokens") or [], key=lambda t: t["id"])
        for offset, token in enumerate(specials):
            if token["id"] != 256 + len(merges) + offset:
                raise fail(f"special token {token['content']!r} has ID {token['id']}, expected {256 + len(merges) + offset}")
        try:
            return cls(merges, pattern=pattern, special_tokens=[t["content"] for t in specials])
        except ValueError as e:
            raise fail(str(e)) from None

    # -- peers ----------------------------------------------------------------

    def to_tiktoken(self, name: str = "beam-bpe", special_tokens: Mapping[str, int] | None = None):
        """A ``tiktoken.Encoding`` with our IDs as ranks and our pattern.

        ``special_tokens``: tiktoken's special tokens (text -> ID); default ours.
        """
        import tiktoken  # only here: tiktoken is a peer, not a dependency

        token_bytes = self._decoder.token_bytes
        return tiktoken.Encoding(
            name=name,
            pat_str=self.pattern,
            mergeable_ranks={token_bytes[i]: i for i in range(256 + len(self.merges))},
            special_tokens=dict(self.special_tokens if special_tokens is None else special_tokens),
        )

    def __repr__(self) -> str:
        return f"Tokenizer(vocab_size={self.vocab_size}, merges={len(self.merges)}, special_tokens={list(self.special_tokens)})"


def _find_split_pattern(pre_tokenizer: dict | None) -> str | None:
    if not pre_tokenizer:
        return None
    if pre_tokenizer.get("type") == "Sequence":
        for step in pre_tokenizer.get("pretokenizers", []):
            found = _find_split_pattern(step)
            if found is not None:
                return found
        return None
    if pre_tokenizer.get("type") == "Split":
        return pre_tokenizer["pattern"].get("Regex")
    return None


def _check_special_tokens(special_tokens: Sequence[str]) -> None:
    if isinstance(special_tokens, str):
        raise ValueError("special_tokens must be a sequence of strings, not one string")
    seen = set()
    for token in special_tokens:
        if not isinstance(token, str) or not token:
            raise ValueError(f"special tokens must be non-empty strings, got {token!r}")
        if token in seen:
            raise ValueError(f"special token {token!r} is given twice")
        seen.add(token)
