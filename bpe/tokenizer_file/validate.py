"""tokenizer.json read: parsing and validation, field by field, into a ``TokenizerSpec``.

Any Hugging Face byte-level BPE file is read: Split (Isolated) and ByteLevel
pre-tokenizers in a Sequence, ``add_prefix_space``, ``use_regex``, vocab and
merges in both forms, added tokens special or not, ``ignore_merges``, an NFC
normalizer (alone or in a Sequence), and the BOS/EOS of a TemplateProcessing,
Roberta or Bert post-processor. Reading is parsing and validation only: a
tokenizer file is data, never code. A field that would make Hugging Face give
other IDs than ours (another normalizer, another model or pre-tokenizer, byte
fallback, BPE dropout, ...) is refused with one line naming it, never ignored.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Mapping

import regex

from bpe.pretokenize import PRESETS, onig_compatible
from bpe.tokenizer_file.spec import BYTE_LEVEL_PATTERN, TOP_LEVEL_KEYS, Step, TokenizerFileError, TokenizerSpec, byte_to_char
from bpe.tokenizer_file.storage import FILE_NAME

__all__ = ["parse", "token_bytes_of"]


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
