"""tokenizer.json: the Hugging Face file format, written, read and validated.

Our files hold a Split pre-tokenizer with our regex, ByteLevel without its own
regex, a BPE model whose vocab maps the byte-level strings to our IDs, a
ByteLevel decoder and the special tokens as added tokens, so ``tokenizers`` and
``transformers`` load them and give our IDs.

Any Hugging Face byte-level BPE file is read too (``TokenizerSpec``): Split
(Isolated) and ByteLevel pre-tokenizers in a Sequence, ``add_prefix_space``,
``use_regex``, vocab and merges in both forms, added tokens special or not,
``ignore_merges``, an NFC normalizer (alone or in a Sequence), and the BOS/EOS
of a TemplateProcessing, Roberta or Bert post-processor. Reading is parsing and
validation only: a tokenizer file is data, never code. A field that would make
Hugging Face give other IDs than ours (another normalizer, another model or
pre-tokenizer, byte fallback, BPE dropout, ...) is refused with one line naming
it, never ignored.

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

import regex

from bpe import tiktoken_file
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


# HF ByteLevel's own regex (``use_regex``), as tokenizers spells it.
BYTE_LEVEL_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
# A pre-tokenizer step: ("split", regex) splits every piece, keeping the text
# between matches as pieces; ("prefix_space", "") puts a space before every
# piece that does not start with one (ByteLevel's add_prefix_space).
Step = tuple[str, str]


@dataclasses.dataclass(frozen=True)
class TokenizerSpec:
    """What a byte-level BPE tokenizer.json defines.

    Attributes:
      token_bytes: the model's vocab, ID -> the bytes the token stands for.
      merges: (left ID, right ID) in rank order.
      merged_ids: the ID merge i creates.
      ignore_merges: a piece that is a whole token is that token.
      steps: the pre-tokenizer, as steps applied in order (see ``Step``).
      special_tokens: added tokens marked special, text -> ID.
      added_tokens: added tokens not marked special (matched in any text), text -> ID.
      bos_token, eos_token: the special tokens the post-processor puts around a
        single sequence, if it does.
      normalizer: ``"NFC"`` when the file normalizes text to NFC, else None.
      normalized_tokens: the added and special tokens marked ``normalized``:
        matched in the normalized text, after the others are matched in the text
        as given.
    """

    token_bytes: dict[int, bytes]
    merges: list[tuple[int, int]]
    merged_ids: list[int]
    ignore_merges: bool
    steps: tuple[Step, ...]
    special_tokens: dict[str, int]
    added_tokens: dict[str, int]
    bos_token: str | None = None
    eos_token: str | None = None
    normalizer: str | None = None
    normalized_tokens: frozenset[str] = frozenset()

    @property
    def pattern(self) -> str | None:
        """The regex, when the pre-tokenizer is one Split and nothing else."""
        if len(self.steps) == 1 and self.steps[0][0] == "split":
            return self.steps[0][1]
        return None

    def is_ours(self) -> bool:
        """Whether the file follows beam-bpe's ID contract (bytes 0..255, merge i = 256 + i,
        special tokens after the merges), so that our own Tokenizer reproduces it."""
        n = len(self.merges)
        return (
            self.pattern is not None
            and self.normalizer is None
            and not self.ignore_merges
            and not self.added_tokens
            and self.bos_token is None
            and self.eos_token is None
            and len(self.token_bytes) == 256 + n
            and all(self.token_bytes.get(b) == bytes([b]) for b in range(256))
            and self.merged_ids == list(range(256, 256 + n))
            and list(self.special_tokens.values()) == list(range(256 + n, 256 + n + len(self.special_tokens)))
        )


# -- writing ---------------------------------------------------------------------


def render(token_bytes: Sequence[bytes] | Mapping[int, bytes], merges: Sequence[tuple[int, int]], pattern: str,
           special_tokens: Mapping[str, int]) -> str:
    """The tokenizer.json text of a tokenizer.

    Args:
      token_bytes: the bytes of each ordinary ID (special tokens excluded), as a
        list (ID = position) or a mapping.
      merges: (left ID, right ID) in rank order; each makes the token of their joined bytes.
      pattern: the pre-tokenizer regex.
      special_tokens: text -> ID, in ID order.

    Raises:
      ValueError: two tokens have the same bytes (the vocab, keyed by bytes, cannot hold both).
    """
    to_char = byte_to_char()
    items = token_bytes.items() if isinstance(token_bytes, Mapping) else enumerate(token_bytes)
    names = {token_id: "".join(to_char[b] for b in data) for token_id, data in items}
    vocab = {name: token_id for token_id, name in names.items()}
    if len(vocab) != len(names):
        first = next(token_id for token_id, name in names.items() if vocab[name] != token_id)
        raise ValueError(
            f"tokens {first} and {vocab[names[first]]} have the same bytes; tokenizer.json cannot hold both"
        )
    if sorted(special_tokens.values()) != list(range(len(vocab), len(vocab) + len(special_tokens))):
        # Hugging Face numbers added tokens on from the vocab's size unless the vocab
        # holds them: with gaps in the IDs (cl100k), the vocab must hold them.
        vocab.update(special_tokens)
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
            stripped = chunk.lstrip(b" \t\r\n")
            first = stripped[:1]
            if first and first != b"{" and not tiktoken_file.looks_like_rank_file(stripped):
                raise TokenizerFileError(
                    f"{source}: expected a JSON object (tokenizer.json) or a tiktoken rank file, found {first!r} at the start"
                )
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
    """Parses and validates a byte-level BPE tokenizer.json; any problem is one TokenizerFileError line.

    Everything that could make Hugging Face ``tokenizers`` give other IDs than
    ours is refused, naming the field: other models (WordPiece, Unigram),
    byte fallback, normalizers other than NFC, pre-tokenizers other than Split and ByteLevel,
    added tokens that strip or match whole words only, and so on.
    """
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
    except RecursionError:
        raise TokenizerFileError(f"{source} is not a tokenizer file: it is nested too deeply") from None
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
        detail = f"missing key {e}" if isinstance(e, KeyError) else str(e)
        raise TokenizerFileError(f"{source} is not a valid byte-level BPE tokenizer: {detail}") from None


def _show(value: Any) -> str:
    """A field's value for an error line: a component by its type, anything else as short JSON."""
    if isinstance(value, dict) and isinstance(value.get("type"), str):
        return value["type"]
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


@lru_cache(maxsize=None)
def _char_to_byte_table() -> dict[int, int | None]:
    """A str.translate table: each ByteLevel character to the character of its byte's
    code point, and every other character below U+0400 deleted (so that a length
    check finds it)."""
    table: dict[int, int | None] = {c: None for c in range(0x400)}
    for b, char in byte_to_char().items():
        table[ord(char)] = b
    return table


def token_bytes_of(name: str) -> bytes | None:
    """The bytes a ByteLevel vocab string stands for, or None if it is not one."""
    mapped = name.translate(_char_to_byte_table())
    if len(mapped) != len(name):
        return None
    try:
        return mapped.encode("latin-1")
    except UnicodeEncodeError:
        return None


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
        for key in ("truncation", "padding"):
            if spec.get(key) is not None:
                raise self.fail(f"{key} = {_show(spec[key])} is not supported (beam-bpe implements only null)")
        normalizer = self.normalizer(spec.get("normalizer"))
        decoder = spec.get("decoder")
        if decoder is not None:
            self.only("decoder", decoder, {"type": ("ByteLevel",), "add_prefix_space": (), "trim_offsets": (), "use_regex": ()})
        steps = self.pre_tokenizer(spec.get("pre_tokenizer"))
        added = self.added_tokens(spec.get("added_tokens") or [])
        token_bytes, merges, merged_ids = self.model(model, added)
        special_tokens = {t["content"]: t["id"] for t in added if t["special"]}
        added_tokens = {t["content"]: t["id"] for t in added if not t["special"]}
        normalized_tokens = frozenset(t["content"] for t in added if t["normalized"])
        bos, eos = self.post_processor(spec.get("post_processor"), special_tokens)
        return TokenizerSpec(token_bytes, merges, merged_ids, bool(model.get("ignore_merges")), steps,
                             special_tokens, added_tokens, bos, eos, normalizer, normalized_tokens)

    # -- the normalizer -------------------------------------------------------------

    def normalizer(self, normalizer: Any, depth: int = 0) -> str | None:
        """``"NFC"`` for NFC, alone or in Sequences of nothing else; None for no normalizer."""
        if normalizer is None:
            return None
        kind = normalizer.get("type") if isinstance(normalizer, dict) else None
        if kind == "Sequence" and depth < 8:
            self.only("normalizer Sequence", normalizer, {"type": (), "normalizers": ()})
            found = {self.normalizer(step, depth + 1) for step in normalizer["normalizers"]}
            return "NFC" if "NFC" in found else None
        if kind == "NFC":
            self.only("normalizer NFC", normalizer, {"type": ()})
            return "NFC"
        raise self.fail(f"normalizer = {_show(normalizer)} is not supported (beam-bpe implements only null and NFC)")

    # -- the pre-tokenizer ----------------------------------------------------------

    def pre_tokenizer(self, pre_tokenizer: Any) -> tuple[Step, ...]:
        """The steps of Split (Isolated) pre-tokenizers and a final ByteLevel, in order."""
        if not pre_tokenizer:
            raise self.fail("pre_tokenizer is null: not a byte-level BPE tokenizer (beam-bpe needs ByteLevel)")
        flat = self.flatten(pre_tokenizer)
        types = [step.get("type") for step in flat]
        if "ByteLevel" not in types:
            raise self.fail(f"pre_tokenizer is {' + '.join(map(str, types))}, without ByteLevel: "
                            "not a byte-level BPE tokenizer")
        if types[-1] != "ByteLevel" or types.count("ByteLevel") > 1:
            raise self.fail(f"pre_tokenizer is {' + '.join(map(str, types))}: beam-bpe implements only "
                            "Split pre-tokenizers followed by one ByteLevel")
        steps: list[Step] = []
        for step in flat[:-1]:
            if step.get("type") != "Split":
                raise self.fail(f"pre_tokenizer type {step.get('type')!r} is not supported "
                                "(beam-bpe implements Split, ByteLevel and Sequence)")
            steps.append(("split", self.split(step)))
        byte_level = flat[-1]
        self.only("pre_tokenizer ByteLevel", byte_level, {"type": (), "add_prefix_space": (), "trim_offsets": (), "use_regex": ()})
        if byte_level.get("add_prefix_space", True):
            steps.append(("prefix_space", ""))
        if byte_level.get("use_regex", True):
            steps.append(("split", BYTE_LEVEL_PATTERN))
        return tuple(steps)

    def flatten(self, pre_tokenizer: dict, depth: int = 0) -> list[dict]:
        if depth > 8:
            raise self.fail("pre_tokenizer Sequences are nested more than 8 deep")
        if pre_tokenizer.get("type") != "Sequence":
            return [pre_tokenizer]
        self.only("pre_tokenizer Sequence", pre_tokenizer, {"type": (), "pretokenizers": ()})
        return [s for step in pre_tokenizer["pretokenizers"] for s in self.flatten(step, depth + 1)]

    def split(self, split: dict) -> str:
        self.only("pre_tokenizer Split", split, {"type": (), "pattern": (), "behavior": ("Isolated",), "invert": (False,)})
        pattern = split["pattern"]
        if isinstance(pattern.get("Regex"), str):
            # Files hold the Oniguruma spelling of a preset; keep tiktoken's own string.
            return next((p for p in PRESETS.values() if onig_compatible(p) == pattern["Regex"]), pattern["Regex"])
        if isinstance(pattern.get("String"), str) and pattern["String"]:
            return regex.escape(pattern["String"])
        raise self.fail(f"pre_tokenizer Split.pattern = {_show(pattern)} is not supported (a Regex or a non-empty String)")

    # -- the model ------------------------------------------------------------------

    def model(self, model: dict, added: list[dict]) -> tuple[dict[int, bytes], list[tuple[int, int]], list[int]]:
        """(ID -> bytes, merges as ID pairs, the ID each merge creates)."""
        if model.get("type") != "BPE":
            kind = model.get("type")
            raise self.fail(f"model type is {kind!r}: beam-bpe implements only byte-level BPE ('BPE')")
        self.only("model", model, {
            "type": (), "dropout": (None,), "unk_token": (), "continuing_subword_prefix": (None, ""),
            "end_of_word_suffix": (None, ""), "fuse_unk": (), "byte_fallback": (False,), "ignore_merges": (True, False),
            "vocab": (), "merges": (),
        })
        vocab: dict[str, int] = model["vocab"]
        added_bytes = {t["id"]: t["content"].encode("utf-8") for t in added}
        token_bytes = self.vocab_bytes(vocab, added_bytes)
        for token_id, content in added_bytes.items():
            if token_bytes.get(token_id, content) != content:
                raise self.fail(f"added token {content.decode('utf-8')!r} has ID {token_id}, "
                                f"which the vocab gives to {token_bytes[token_id]!r}")
        by_bytes = {data: token_id for token_id, data in token_bytes.items()}
        missing = [b for b in range(256) if bytes([b]) not in by_bytes]
        if missing:
            raise self.fail(f"vocab lacks {len(missing)} of the 256 single bytes (first: byte {missing[0]}), "
                            "so Hugging Face would drop such bytes from the text")
        merges, merged_ids = self.merges(vocab, model["merges"])
        return token_bytes, merges, merged_ids

    def merges(self, vocab: dict[str, int], raw: list) -> tuple[list[tuple[int, int]], list[int]]:
        """(merges as ID pairs, the ID each creates): whole-list operations first,
        the merge-by-merge checks only to name a problem."""
        pairs = [m.split(" ") if type(m) is str else m for m in raw]
        try:
            if all(len(p) == 2 for p in pairs):
                merges = [(vocab[a], vocab[b]) for a, b in pairs]
                merged_ids = [vocab[a + b] for a, b in pairs]
                if len(set(merges)) == len(merges):
                    return merges, merged_ids
        except (KeyError, TypeError):
            pass
        merges, merged_ids = [], []
        seen: dict[tuple[int, int], int] = {}
        for i, merge in enumerate(raw):
            parts = merge.split(" ") if isinstance(merge, str) else merge
            if len(parts) != 2:
                raise self.fail(f"merge {i} is {_show(merge)}, not two tokens")
            left, right = parts
            for name in (left, right):
                if name not in vocab:
                    raise self.fail(f"merge {i} names unknown token {name!r}")
            merged = vocab.get(left + right)
            if merged is None:
                raise self.fail(f"merge {i} ({left!r}, {right!r}) makes {left + right!r}, which is not in the vocab")
            pair = (vocab[left], vocab[right])
            if pair in seen:
                raise self.fail(f"merge {i} repeats merge {seen[pair]} ({left!r}, {right!r})")
            seen[pair] = i
            merges.append(pair)
            merged_ids.append(merged)
        return merges, merged_ids

    def vocab_bytes(self, vocab: dict[str, int], added_bytes: Mapping[int, bytes]) -> dict[int, bytes]:
        """ID -> bytes of the vocab: whole-list operations first (a vocab has 100k+
        entries), the entry-by-entry checks only to name a problem."""
        ids = list(vocab.values())
        if all(type(token_id) is int for token_id in ids) and min(ids, default=0) >= 0:
            table = _char_to_byte_table()
            mapped = [name.translate(table) for name in vocab]
            if list(map(len, mapped)) == list(map(len, vocab)):
                try:
                    token_bytes = dict(zip(ids, (m.encode("latin-1") for m in mapped)))
                except UnicodeEncodeError:
                    token_bytes = None
                if token_bytes is not None and len(token_bytes) == len(ids):
                    return token_bytes
        token_bytes = {}
        for name, token_id in vocab.items():
            if not isinstance(token_id, int) or isinstance(token_id, bool) or token_id < 0:
                raise self.fail(f"vocab token {name!r} has ID {token_id!r}, not a non-negative integer")
            data = token_bytes_of(name)
            if data is None:
                data = added_bytes.get(token_id)
                if data != name.encode("utf-8"):
                    raise self.fail(f"vocab token {name!r} is not a ByteLevel string (is this a byte-level BPE tokenizer?)")
            if token_id in token_bytes:
                raise self.fail(f"vocab gives ID {token_id} to two tokens")
            token_bytes[token_id] = data
        return token_bytes

    def added_tokens(self, added_tokens: list) -> list[dict]:
        # Hugging Face strips or word-bounds an added token with these flags; beam-bpe implements neither.
        allowed = {"id": (), "content": (), "single_word": (False,), "lstrip": (False,), "rstrip": (False,),
                   "normalized": (), "special": ()}
        seen: dict[str, int] = {}
        for token in added_tokens:
            self.only(f"added token {token.get('content')!r}", token, allowed)
            content, token_id = token["content"], token["id"]
            if not isinstance(content, str) or not content:
                raise self.fail(f"added token {content!r} is not a non-empty string")
            if not isinstance(token_id, int) or isinstance(token_id, bool) or token_id < 0:
                raise self.fail(f"added token {content!r} has ID {token_id!r}, not a non-negative integer")
            if content in seen:
                raise self.fail(f"added token {content!r} is listed twice")
            seen[content] = token_id
        ids = [t["id"] for t in added_tokens]
        if len(set(ids)) != len(ids):
            raise self.fail("two added tokens have the same ID")
        # A file without the flags gets Hugging Face's defaults: special tokens are matched
        # in the text as given, the others in the normalized text.
        return [{**t, "special": bool(t.get("special", False)),
                 "normalized": bool(t.get("normalized", not t.get("special", False)))} for t in added_tokens]

    # -- the post-processor ---------------------------------------------------------

    def post_processor(self, processor: Any, special_tokens: Mapping[str, int]) -> tuple[str | None, str | None]:
        """(BOS, EOS): the special tokens the post-processor puts around a single sequence."""
        if processor is None:
            return None, None
        kind = processor.get("type")
        if kind == "Sequence":
            self.only("post_processor Sequence", processor, {"type": (), "processors": ()})
            found = [self.post_processor(p, special_tokens) for p in processor["processors"]]
            bos = [b for b, _ in found if b is not None]
            eos = [e for _, e in found if e is not None]
            if len(bos) > 1 or len(eos) > 1:
                raise self.fail("post_processor adds special tokens in more than one step: not supported")
            return (bos[0] if bos else None), (eos[0] if eos else None)
        if kind == "ByteLevel":  # changes offsets only, never IDs
            return None, None
        if kind == "TemplateProcessing":
            return self.template(processor, special_tokens)
        if kind in ("RobertaProcessing", "BertProcessing"):
            cls, sep = processor["cls"], processor["sep"]
            for content, token_id in (cls, sep):
                self.check_special(content, token_id, special_tokens, f"post_processor {kind}")
            return cls[0], sep[0]
        raise self.fail(f"post_processor = {_show(processor)} is not supported "
                        "(beam-bpe implements ByteLevel, TemplateProcessing, RobertaProcessing, BertProcessing)")

    def template(self, processor: dict, special_tokens: Mapping[str, int]) -> tuple[str | None, str | None]:
        single = processor["single"]
        kinds = ["Sequence" if "Sequence" in item else "SpecialToken" for item in single]
        if kinds.count("Sequence") != 1 or len(single) > 3 or (
            len(single) == 3 and kinds != ["SpecialToken", "Sequence", "SpecialToken"]
        ):
            raise self.fail("post_processor TemplateProcessing.single is not [BOS] $A [EOS]: not supported")
        at = kinds.index("Sequence")
        if single[at]["Sequence"].get("id") != "A":
            raise self.fail("post_processor TemplateProcessing.single does not hold $A")
        ends = []
        for item in (single[:at][-1:] or [None]) + (single[at + 1:][:1] or [None]):
            if item is None:
                ends.append(None)
                continue
            name = item["SpecialToken"]["id"]
            entry = processor["special_tokens"][name]
            if len(entry["ids"]) != 1:
                raise self.fail(f"post_processor TemplateProcessing token {name!r} is {len(entry['ids'])} IDs: not supported")
            content = entry["tokens"][0] if entry.get("tokens") else name
            self.check_special(content, entry["ids"][0], special_tokens, "post_processor TemplateProcessing")
            ends.append(content)
        return ends[0], ends[1]

    def check_special(self, content: str, token_id: int, special_tokens: Mapping[str, int], where: str) -> None:
        if special_tokens.get(content) != token_id:
            raise self.fail(f"{where} adds {content!r} with ID {token_id}, which is not a special token of the file")
