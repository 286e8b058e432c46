"""tokenizer.json: the Hugging Face file format, written, read and validated.

Our files hold a Split pre-tokenizer with our regex, ByteLevel without its own
regex, a BPE model whose vocab maps the byte-level strings to our IDs, a
ByteLevel decoder and the special tokens as added tokens, so ``tokenizers`` and
``transformers`` load them and give our IDs. Reading is parsing and validation
only: a tokenizer file is data, never code. A field that would make Hugging
Face give other IDs than ours (a normalizer, a post-processor, BPE dropout, ...)
is refused with one line naming it, never ignored.

Paths are local files or directories, ``file://`` URLs, or any URL smart_open
opens (``s3://``, ``gs://``, ...). Remote stores use their client libraries'
own configuration: for S3, boto3's (``AWS_ENDPOINT_URL_S3`` or
``AWS_ENDPOINT_URL`` for a custom endpoint, ``AWS_ACCESS_KEY_ID``, ``~/.aws``),
or a client passed as ``transport_params={"client": boto3.client("s3", ...)}``;
for GCS, google-cloud-storage's default credentials (``pip install
smart_open[gcs]``) or ``transport_params={"client": storage.Client(...)}``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from functools import lru_cache
from typing import IO, Any, Mapping, Sequence

from bpe.pretokenize import PRESETS, onig_compatible

FILE_NAME = "tokenizer.json"
# Tokenizer files above this size are refused before they are read whole.
MAX_FILE_BYTES = 1 << 30
_CHUNK = 1 << 20

# The top-level keys of a Hugging Face tokenizer.json.
TOP_LEVEL_KEYS = (
    "version", "truncation", "padding", "added_tokens", "normalizer",
    "pre_tokenizer", "post_processor", "decoder", "model",
)


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


@dataclasses.dataclass(frozen=True)
class TokenizerSpec:
    """What a tokenizer.json defines, in the terms of ``bpe.Tokenizer``'s arguments."""

    merges: list[tuple[int, int]]
    pattern: str
    special_tokens: list[str]


# -- writing ---------------------------------------------------------------------


def render(token_bytes: Sequence[bytes], merges: Sequence[tuple[int, int]], pattern: str,
           special_tokens: Mapping[str, int]) -> str:
    """The tokenizer.json text of a tokenizer.

    Args:
      token_bytes: the bytes of each ID up to the last merge (special tokens excluded).
      merges: merge i joins (left ID, right ID) into ID 256 + i.
      pattern: the pre-tokenizer regex.
      special_tokens: text -> ID, in ID order.

    Raises:
      ValueError: two tokens have the same bytes (the vocab, keyed by bytes, cannot hold both).
    """
    to_char = byte_to_char()
    names = ["".join(to_char[b] for b in data) for data in token_bytes]
    vocab = {name: i for i, name in enumerate(names)}
    if len(vocab) != len(names):
        first = next(i for i, name in enumerate(names) if vocab[name] != i)
        raise ValueError(
            f"tokens {first} and {vocab[names[first]]} have the same bytes; tokenizer.json cannot hold both"
        )
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
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
                for content, token_id in special_tokens.items()
            ],
            "normalizer": None,
            "pre_tokenizer": {
                "type": "Sequence",
                "pretokenizers": [
                    {"type": "Split", "pattern": {"Regex": onig_compatible(pattern)}, "behavior": "Isolated", "invert": False},
                    byte_level,
                ],
            },
            "post_processor": None,
            "decoder": byte_level,
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
                "merges": [[names[left], names[right]] for left, right in merges],
            },
        },
        ensure_ascii=False,
        indent=1,
    )


def write(path: str, text: str, transport_params: dict | None = None) -> str:
    """Writes tokenizer.json into a directory (or to a path ending in .json); returns the file's path.

    A reader never sees half a file: a local file is written to a temporary
    name and renamed; an object store publishes an object only when its upload
    completes.
    """
    file_path = path if path.endswith(".json") else _join(path, FILE_NAME)
    local = _local_path(file_path)
    if local is None:
        import smart_open  # only for URLs: local files need none of it

        with smart_open.open(file_path, "wb", compression="disable", transport_params=transport_params) as f:
            f.write(text.encode("utf-8"))
        return file_path
    os.makedirs(os.path.dirname(local) or ".", exist_ok=True)
    tmp_path = local + ".tmp"
    with open(tmp_path, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp_path, local)
    return file_path


# -- reading ---------------------------------------------------------------------


def read(path: str, transport_params: dict | None = None) -> tuple[bytes, str]:
    """(the bytes, the file's path) of the tokenizer.json a path names: the file, or the one in a directory.

    Raises:
      TokenizerFileError: missing, unreadable, larger than ``MAX_FILE_BYTES``,
        or plainly not a JSON object.
    """
    local = _local_path(path)
    if local is not None:
        file_path = os.path.join(local, FILE_NAME) if os.path.isdir(local) else local
        try:
            with open(file_path, "rb") as f:
                return _read_capped(f, file_path, os.fstat(f.fileno()).st_size), file_path
        except FileNotFoundError:
            raise TokenizerFileError(f"tokenizer file not found: {file_path}") from None
        except OSError as e:
            raise TokenizerFileError(f"cannot read tokenizer file {file_path}: {e.strerror or e}") from None
    import smart_open  # only for URLs: local files need none of it

    # An object store has no directories: try the directory form first, then the path itself.
    candidates = [path] if path.endswith(".json") else [_join(path, FILE_NAME), path]
    first_error = None
    for file_path in candidates:
        try:
            with smart_open.open(file_path, "rb", compression="disable", transport_params=transport_params) as f:
                return _read_capped(f, file_path, None), file_path
        except TokenizerFileError:
            raise
        except Exception as e:  # each store's client raises its own types
            first_error = first_error or (file_path, e)
    file_path, e = first_error
    reason = " ".join(str(e).split())[:300] or type(e).__name__
    raise TokenizerFileError(f"cannot read tokenizer file {file_path}: {reason}") from None


def _read_capped(f: IO[bytes], source: str, size: int | None) -> bytes:
    """Reads a file of at most MAX_FILE_BYTES; stops at once if it cannot be a JSON object."""
    if size is not None and size > MAX_FILE_BYTES:
        raise TokenizerFileError(f"{source} is {size} bytes, more than a tokenizer file may be ({MAX_FILE_BYTES})")
    chunks: list[bytes] = []
    total = 0
    started = False
    while chunk := f.read(_CHUNK):
        if not started:
            first = chunk.lstrip(b" \t\r\n")[:1]
            if first and first != b"{":
                raise TokenizerFileError(f"{source}: expected a JSON object, found {first!r} at the start")
            started = bool(first)
        total += len(chunk)
        if total > MAX_FILE_BYTES:
            raise TokenizerFileError(f"{source} is more than {MAX_FILE_BYTES} bytes, more than a tokenizer file may be")
        chunks.append(chunk)
    return b"".join(chunks)


def _local_path(path: str) -> str | None:
    """The local path a path or ``file://`` URL names; None for other URLs."""
    if path.startswith("file://"):
        return path[len("file://"):]
    return None if "://" in path else path


def _join(directory: str, name: str) -> str:
    if "://" not in directory:
        return os.path.join(directory, name)
    return directory.rstrip("/") + "/" + name


# -- parsing and validation --------------------------------------------------------


def parse(data: str | bytes, source: str = FILE_NAME) -> TokenizerSpec:
    """Parses and validates a tokenizer.json; any problem is one TokenizerFileError line."""
    try:
        spec = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise TokenizerFileError(f"{source} is not valid JSON: {e}") from None
    except RecursionError:
        raise TokenizerFileError(f"{source} is not a tokenizer file: its JSON is nested too deeply") from None
    try:
        return _Validator(source).spec(spec)
    except TokenizerFileError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
        detail = f"missing key {e}" if isinstance(e, KeyError) else str(e)
        raise TokenizerFileError(f"{source} is not a valid beam-bpe tokenizer: {detail}") from None


def _show(value: Any) -> str:
    """A field's value for an error line: a component by its type, anything else as short JSON."""
    if isinstance(value, dict) and isinstance(value.get("type"), str):
        return value["type"]
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


class _Validator:
    """Checks a parsed tokenizer.json field by field; each problem is one line naming the field."""

    def __init__(self, source: str):
        self.source = source

    def fail(self, reason: str) -> TokenizerFileError:
        return TokenizerFileError(f"{self.source}: {reason}")

    def only(self, where: str, obj: dict, allowed: Mapping[str, tuple]) -> None:
        """Each listed key of ``obj`` holds one of its allowed values (if any are listed), and no other key is there."""
        for key, values in allowed.items():
            if values and key in obj and obj[key] not in values:
                wanted = " or ".join(json.dumps(v) for v in values)
                raise self.fail(f"{where}.{key} = {_show(obj[key])} is not supported (beam-bpe implements only {wanted})")
        for key in obj:
            if key not in allowed:
                raise self.fail(f"unknown key {key!r} in {where} (beam-bpe reads only {', '.join(allowed)})")

    def spec(self, spec: Any) -> TokenizerSpec:
        if not isinstance(spec, dict):
            raise self.fail("expected a JSON object")
        model = spec["model"]
        for key in spec:
            if key not in TOP_LEVEL_KEYS:
                raise self.fail(f"unknown top-level key {key!r} (a tokenizer.json has only {', '.join(TOP_LEVEL_KEYS)})")
        for key in ("truncation", "padding", "normalizer", "post_processor"):
            if spec.get(key) is not None:
                raise self.fail(f"{key} = {_show(spec[key])} is not supported (beam-bpe implements only null)")
        decoder = spec.get("decoder")
        if decoder is not None:
            self.only("decoder", decoder, {"type": ("ByteLevel",), "add_prefix_space": (), "trim_offsets": (), "use_regex": ()})
        pattern = self.pattern(spec.get("pre_tokenizer"))
        merges = self.merges(model)
        special_tokens = self.special_tokens(spec.get("added_tokens") or [], 256 + len(merges))
        return TokenizerSpec(merges, pattern, special_tokens)

    def pattern(self, pre_tokenizer: Any) -> str:
        """The regex of the one shape we implement: Sequence[Split(regex, Isolated), ByteLevel]."""
        if not pre_tokenizer:
            raise self.fail("no Split pre-tokenizer with a regex (pre_tokenizer is null)")
        steps = pre_tokenizer["pretokenizers"] if pre_tokenizer.get("type") == "Sequence" else [pre_tokenizer]
        types = [step.get("type") for step in steps]
        if "Split" not in types:
            raise self.fail(f"no Split pre-tokenizer with a regex (found {', '.join(map(str, types))})")
        if types != ["Split", "ByteLevel"]:
            raise self.fail(f"pre_tokenizer is {' + '.join(map(str, types))}: beam-bpe implements only Split + ByteLevel")
        split, byte_level = steps
        self.only("pre_tokenizer Split", split, {"type": (), "pattern": (), "behavior": ("Isolated",), "invert": (False,)})
        self.only("pre_tokenizer ByteLevel", byte_level,
                  {"type": (), "add_prefix_space": (False,), "trim_offsets": (), "use_regex": (False,)})
        pattern = split["pattern"].get("Regex")
        if not isinstance(pattern, str):
            raise self.fail(f"no Split pre-tokenizer with a regex (its pattern is {_show(split['pattern'])})")
        # Files hold the Oniguruma spelling of a preset; keep tiktoken's own string.
        return next((p for p in PRESETS.values() if onig_compatible(p) == pattern), pattern)

    def merges(self, model: dict) -> list[tuple[int, int]]:
        if model.get("type") != "BPE":
            raise self.fail(f"model type is {model.get('type')!r}, expected 'BPE'")
        self.only("model", model, {
            "type": (), "dropout": (None,), "unk_token": (), "continuing_subword_prefix": (None,),
            "end_of_word_suffix": (None,), "fuse_unk": (), "byte_fallback": (False,), "ignore_merges": (False,),
            "vocab": (), "merges": (),
        })
        vocab: dict[str, int] = model["vocab"]
        to_char = byte_to_char()
        for b in range(256):
            if vocab.get(to_char[b]) != b:
                raise self.fail(f"byte {b} must have ID {b}, found {vocab.get(to_char[b])!r}")
        merges = []
        for i, merge in enumerate(model["merges"]):
            left, right = merge.split(" ") if isinstance(merge, str) else merge
            for name in (left, right):
                if name not in vocab:
                    raise self.fail(f"merge {i} names unknown token {name!r}")
            merged = vocab.get(left + right)
            if merged != 256 + i:
                raise self.fail(f"merge {i} ({left!r}, {right!r}) must create ID {256 + i}, vocab says {merged!r}")
            merges.append((vocab[left], vocab[right]))
        if len(vocab) != 256 + len(merges):
            raise self.fail(f"vocab has {len(vocab)} entries, expected 256 + {len(merges)} merges")
        return merges

    def special_tokens(self, added_tokens: list, first_id: int) -> list[str]:
        # Hugging Face matches an added token that is not special in any text, and
        # strips or word-bounds one with these flags; beam-bpe implements neither.
        allowed = {"id": (), "content": (), "single_word": (False,), "lstrip": (False,), "rstrip": (False,),
                   "normalized": (), "special": (True,)}
        specials = sorted(added_tokens, key=lambda t: t["id"])
        for offset, token in enumerate(specials):
            self.only(f"added token {token.get('content')!r}", token, allowed)
            if token["id"] != first_id + offset:
                raise self.fail(f"special token {token['content']!r} has ID {token['id']}, expected {first_id + offset}")
        return [token["content"] for token in specials]
