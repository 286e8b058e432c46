"""What tokens are on their own: ``MeasuredTokenizer`` and the class of a text (pure: numpy, no Beam).

The report's measures (``transforms.report.figures``) count most tokens from
tables per ID built here once per tokenizer, and look at the text around the
others only.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from bpe.chunking import CHUNK_SIZE
from bpe.engines import AcceleratedEngine
from bpe.scripts import INHERITED, OTHER, WHITESPACE, classes_of
from bpe.tokenizer import Tokenizer

__all__ = ["MeasuredTokenizer", "text_span_classes", "token_lengths"]


class MeasuredTokenizer:
    """A tokenizer as the measures use it: its encoder and, per ID, what its bytes alone tell.

    A token whose bytes are valid UTF-8 on their own and do not start with a
    combining character has the same characters wherever it stands (it starts
    and ends on character boundaries, and its characters' classes resolve
    inside it), so its class, its characters and that it is no fallback token
    follow from its ID. The measures look at the text around the others only.

    Attributes:
      lengths: int32 [vocab_size], each token's length in bytes.
      classes: int64 [vocab_size], each token's class (``bpe.scripts.class_of_span``
        of its characters), or -1 where the text around it decides.
      characters: int64 [vocab_size], each token's characters where ``classes`` is known.
      kinds: int64 [vocab_size], each token's kind: the index of its (class, length,
        characters) among those of the tokens whose class is known, or ``len(kind_classes)``
        where it is not; a batch's tokens are counted per kind, and kinds are few.
      kind_classes, kind_lengths, kind_characters: int64 per kind, its class, length and characters.
      normalizes: whether the tokenizer normalizes text: its tokens spell ``as_seen(document)``.

    Args:
      tokenizer: the tokenizer.
      engine: the engine that encodes for it (``tokenizer.use_proof(proof)``);
        default ``tokenizer.engine``, proven here.
    """

    def __init__(self, tokenizer: Tokenizer, engine=None):
        self.tokenizer = tokenizer
        self.vocab_size = tokenizer.vocab_size
        self.lengths = token_lengths(tokenizer).astype(np.int32)
        self.classes, self.characters = _self_contained(tokenizer)
        known = np.flatnonzero(self.classes >= 0)
        # (class, length, characters) as one number, in their order (characters <= length < m).
        m = int(self.lengths.max(initial=0)) + 1
        unique, inverse = np.unique((self.classes[known] * m + self.lengths[known]) * m + self.characters[known],
                                    return_inverse=True)
        self.kind_classes, self.kind_lengths, self.kind_characters = unique // (m * m), unique // m % m, unique % m
        self.kinds = np.full(self.vocab_size, len(unique), dtype=np.int64)
        self.kinds[known] = inverse.reshape(-1)
        self._engine = engine or tokenizer.engine
        self.normalizes = tokenizer.normalizer is not None

    def as_seen(self, data: bytes) -> bytes:
        """The document as the tokenizer sees it: normalized when it normalizes (bytes that are
        not UTF-8 stay as they are around the text, as its reference keeps them)."""
        if not self.normalizes:
            return data
        text = data.decode("utf-8", "surrogateescape")
        return self.tokenizer.normalize(text).encode("utf-8", "surrogateescape")

    def encode(self, data: bytes) -> np.ndarray:
        """The document's IDs as ordinary text (no special tokens), as uint32."""
        return np.frombuffer(self._engine.encode_array(data), dtype=np.uint32)

    def encode_valid(self, documents: Sequence[bytes], code_points: np.ndarray) -> list[np.ndarray]:
        """``encode`` of each document, for documents that are all valid UTF-8 and whose code
        points, one document after the other, are ``code_points``: where the engine's accelerator
        takes all of them, it encodes the documents without looking at each one again."""
        engine = self._engine
        if not (isinstance(engine, AcceleratedEngine) and engine.takes(code_points)):
            return [self.encode(data) for data in documents]
        return [engine.encode_taken(data) if len(data) <= CHUNK_SIZE else self.encode(data) for data in documents]

    def encode_text(self, text: str) -> list[int]:
        """``Tokenizer.encode(text)``'s IDs, by the same engine."""
        return list(self._engine.encode(text))


def token_lengths(tokenizer: Tokenizer) -> np.ndarray:
    """int64 [vocab_size]: the length in bytes of every token, 0 for an ID no token has
    (IDs may have gaps: cl100k has no 100256)."""
    return np.array([len(data or b"") for data in _spellings(tokenizer)], dtype=np.int64)


def _spellings(tokenizer: Tokenizer) -> list[bytes | None]:
    """Every ID's bytes (special and added tokens spelled by their text, as ``token_bytes``
    does), None for an ID no token has."""
    spelled: list[bytes | None] = [None] * tokenizer.vocab_size
    for token_id, data in tokenizer.ordinary_tokens().items():
        spelled[token_id] = data
    for text, token_id in {**tokenizer.added_tokens, **tokenizer.special_tokens}.items():
        spelled[token_id] = text.encode("utf-8")
    return spelled


def _self_contained(tokenizer: Tokenizer) -> tuple[np.ndarray, np.ndarray]:
    """(class, characters) of every token whose bytes alone decide them (see
    ``MeasuredTokenizer``); class -1 for the others (and for IDs no token has)."""
    ids, texts = [], []
    for token_id, data in enumerate(_spellings(tokenizer)):
        if data is None:
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if text:
            ids.append(token_id)
            texts.append(text)
    classes = np.full(tokenizer.vocab_size, -1, dtype=np.int64)
    characters = np.zeros(tokenizer.vocab_size, dtype=np.int64)
    if not texts:
        return classes, characters
    first = classes_of(np.array([ord(text[0]) for text in texts], dtype=np.uint32))
    kept = np.flatnonzero(first != INHERITED)
    chosen = np.array(ids, dtype=np.int64)[kept]
    classes[chosen] = text_span_classes([texts[i] for i in kept])
    characters[chosen] = [len(texts[i]) for i in kept]
    return classes, characters


def text_span_classes(texts: Sequence[str]) -> np.ndarray:
    """``class_of_span(classify(text))`` of each non-empty text (lone surrogates stand
    for invalid bytes), for all texts at once.

    ``classify`` gives a combining character the class of the nearest character
    before it that is not one, and "other" to those that start a text: a text's
    last character has the class of its last character that is not combining,
    or "other" if it has none.
    """
    if not texts:
        return np.zeros(0, dtype=np.int64)
    own = classes_of(np.frombuffer("".join(texts).encode("utf-32-le", "surrogatepass"), dtype=np.uint32))
    own = own.astype(np.int64)
    lengths = np.array([len(text) for text in texts], dtype=np.int64)
    if not lengths.all():
        raise ValueError("spans are never empty")
    ends = np.cumsum(lengths)
    starts = ends - lengths
    solid = np.flatnonzero(own != INHERITED)
    at = np.searchsorted(solid, ends) - 1  # the last character that is not combining, before each end
    position = solid[np.maximum(at, 0)] if len(solid) else ends - 1
    last = np.where((at >= 0) & (position >= starts), own[position], OTHER)
    first = np.where(own[starts] == INHERITED, OTHER, own[starts])
    return np.where(last == WHITESPACE, first, last)
