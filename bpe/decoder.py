"""Decoding token IDs to bytes and text, in one go or as a stream.

The stream decoder never emits half a character: it relies on Python's
incremental UTF-8 decoder, which holds back an incomplete tail, turns bytes into
U+FFFD as soon as they are known to be invalid, and agrees with the one-shot
decoder, so that for any IDs the concatenated stream output equals
``decode_bytes(ids).decode("utf-8", "replace")``.
"""

from __future__ import annotations

import codecs
from typing import Iterable, Mapping, Sequence


def vocabulary_bytes(merges: Iterable[tuple[int, int]] = ()) -> list[bytes]:
    """The bytes each ID spells: IDs 0..255 are the single bytes, merge i spells ID 256 + i.

    Without merges, the 256-byte vocabulary every tokenizer starts from.
    """
    token_bytes = [bytes([b]) for b in range(256)]
    for left, right in merges:
        token_bytes.append(token_bytes[left] + token_bytes[right])
    return token_bytes


class Decoder:
    """Turns IDs into bytes with a lookup table of every token's bytes.

    Args:
      token_bytes: the bytes of each ID: a list (token ID i at position i) or a
        mapping (a vocabulary may have gaps).
      special_ids: IDs of special tokens (dropped when asked to skip them).
    """

    def __init__(self, token_bytes: Sequence[bytes] | Mapping[int, bytes], special_ids: Iterable[int] = ()):
        self.token_bytes = dict(token_bytes) if isinstance(token_bytes, Mapping) else dict(enumerate(token_bytes))
        self.vocab_size = max(self.token_bytes, default=-1) + 1
        self.special_ids = frozenset(special_ids)
        # A token that is whole characters by itself streams out without touching
        # the incremental decoder: the common case, and the fast path.
        self.token_text: dict[int, str] = {}
        for token_id, data in self.token_bytes.items():
            try:
                self.token_text[token_id] = data.decode("utf-8")
            except UnicodeDecodeError:
                pass

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        try:
            return b"".join(map(self.token_bytes.__getitem__, ids))
        except (KeyError, TypeError) as e:
            raise self.invalid_id(e.args[0] if isinstance(e, KeyError) else None) from None

    def decode(self, ids: Iterable[int], errors: str = "replace") -> str:
        return self.decode_bytes(ids).decode("utf-8", errors)

    def invalid_id(self, token_id) -> ValueError:
        if not hasattr(token_id, "__index__"):
            return ValueError(f"token ID {token_id!r} is not an integer")
        if 0 <= token_id < self.vocab_size:
            return ValueError(f"token ID {token_id!r} is not in the vocabulary (it has no token with this ID)")
        return ValueError(
            f"token ID {token_id!r} is out of range: the vocabulary has {self.vocab_size} "
            f"tokens (IDs 0..{self.vocab_size - 1})"
        )

    def stream(self, skip_special_tokens: bool = False, errors: str = "replace") -> "StreamDecoder":
        return StreamDecoder(self, skip_special_tokens, errors)


class StreamDecoder:
    """Decodes IDs one at a time, emitting only complete characters.

    ``step(id)`` returns the text that became complete (often "" while a
    character is still incomplete); ``flush()`` ends the stream, turning an
    incomplete tail into U+FFFD. ``feed(ids)`` decodes many IDs at once.
    With ``errors="strict"``, invalid UTF-8 raises UnicodeDecodeError instead of
    becoming U+FFFD. ``prefill(ids)`` feeds a prompt's IDs without
    emitting them, so that the first generated ID continues a character the
    prompt began.
    """

    def __init__(self, decoder: Decoder, skip_special_tokens: bool = False, errors: str = "replace"):
        self._token_bytes = decoder.token_bytes
        self._token_text = decoder.token_text
        self._decoder = decoder
        self._skip = decoder.special_ids if skip_special_tokens else frozenset()
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors)
        self._holding = False  # whether the incremental decoder holds an incomplete tail

    def step(self, token_id: int) -> str:
        if not self._holding:
            text = self._token_text.get(token_id)
            if text is not None and token_id not in self._skip:
                return text
        try:
            data = self._token_bytes[token_id]
        except (KeyError, TypeError):
            raise self._decoder.invalid_id(token_id) from None
        if token_id in self._skip:
            return ""
        return self._decode(data)

    def feed(self, ids: Iterable[int]) -> str:
        """Decodes many IDs at once: the same text as stepping through them, faster."""
        if self._skip:
            ids = [i for i in ids if i not in self._skip]
        return self._decode(self._decoder.decode_bytes(ids))

    def _decode(self, data: bytes) -> str:
        """With errors="strict", a UnicodeDecodeError's ``object[:start]`` holds the
        valid bytes not yet returned, whichever branch raises it."""
        text = self._utf8.decode(data)
        held = self._utf8.getstate()[0]
        if held[:1] == b"\xed" and held[1:2] >= b"\xa0":
            # ED A0..BF starts an encoded surrogate, invalid from its second byte,
            # but CPython waits for a third byte to say so; say it now. Flushing
            # gives one U+FFFD per byte, as the one-shot decoder does.
            try:
                text += self._utf8.decode(b"", final=True)
            except UnicodeDecodeError as e:
                done = text.encode("utf-8")
                raise UnicodeDecodeError("utf-8", done + e.object, len(done) + e.start, len(done) + e.end, e.reason) from None
            held = b""
        self._holding = bool(held)
        return text

    def prefill(self, ids: Iterable[int]) -> None:
        self.feed(ids)

    def flush(self) -> str:
        text = self._utf8.decode(b"", final=True)
        self._holding = False
        return text
