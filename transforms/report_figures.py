"""The report's per-document measures and how partial results merge (pure: numpy, no Beam).

Definitions (the figures of ``beam-bpe report`` use exactly these):

- **Characters** are those of the document decoded as UTF-8; each byte that is
  not valid UTF-8 is a character of its own, of class ``invalid UTF-8``.
  Every character has one class of ``bpe.scripts.SCRIPTS``.
- **A token's script** (``bpe.scripts.class_of_span``): the class of the
  character holding its last byte, or, if that is whitespace, of the one
  holding its first byte. So " the" is Latin, " 42" digits, ");\\n"
  punctuation, "\\n\\n" whitespace, and a token holding the 2nd and 3rd byte of
  "中" is Han. (Tokens of the preset patterns hold one class after an optional
  space, so this is the class of their text.)
- A script's **bytes** are the bytes of its tokens, its **characters** the
  characters whose first byte lies in one of its tokens, so bytes, characters
  and tokens all add up over the scripts to the corpus totals.
- **Words** are maximal runs of non-whitespace characters within a document; a
  word's script is ``bpe.scripts.class_of_text``: that of its first
  writing-script character, else of its first character. Tokens per word (fertility) of a script is its tokens over
  its words.
- **A byte-level fallback token** holds no whole valid character: all its bytes
  are part of a multi-byte UTF-8 sequence that continues outside the token (one
  byte of "中", or two of its three), or are invalid UTF-8.
- A document's **source** is its input file, or the value of a source field.
"""

from __future__ import annotations

import dataclasses
import hashlib
import heapq
from array import array
from typing import Sequence

import numpy as np

from bpe.scripts import INHERITED, INVALID, OTHER, SCRIPTS, WRITING, code_point_classes
from bpe.tiktoken_core import encode_if_valid
from bpe.tokenizer import Tokenizer

__all__ = ["Figures", "MeasuredTokenizer", "Quantity", "measure_batch"]

N_CLASSES = len(SCRIPTS)
WHITESPACE = SCRIPTS.index("whitespace")
_IS_WRITING = np.zeros(256, dtype=bool)
_IS_WRITING[list(WRITING)] = True


class Quantity:
    """Rows of ``Figures.counts``: what is counted per (tokenizer, source, class)."""

    TOKENS, BYTES, CHARACTERS, FALLBACK = range(4)
    NAMES = ("tokens", "bytes", "characters", "fallback_tokens")


class MeasuredTokenizer:
    """A tokenizer as the measures use it: its encoder and its tokens' lengths.

    Args:
      tokenizer: the tokenizer; encoding uses tiktoken's core where
        ``tokenizer.fast_encoder`` proves it gives the same IDs.
      proven: the proof already passed for this file (e.g. in the driver).
    """

    def __init__(self, tokenizer: Tokenizer, proven: bool = False):
        self.tokenizer = tokenizer
        self.vocab_size = tokenizer.vocab_size
        self.lengths = np.array([len(tokenizer.token_bytes(i)) for i in range(tokenizer.vocab_size)], dtype=np.int64)
        self._fast = tokenizer.fast_encoder(proven=proven)[0]

    def encode(self, data: bytes) -> np.ndarray:
        """The document's IDs as ordinary text (no special tokens), as uint32."""
        ids = encode_if_valid(self._fast, data) if self._fast is not None else None
        if ids is None:
            return np.array(self.tokenizer.encode(data), dtype=np.uint32)
        return np.frombuffer(ids, dtype=np.uint32) if isinstance(ids, array) else np.array(ids, dtype=np.uint32)


@dataclasses.dataclass
class Figures:
    """Additive totals over a set of documents; ``merge`` adds two of them.

    Attributes:
      counts: per source, an int64 array [tokenizer, Quantity, class].
      words: per source, words per class (int64 [class]).
      documents: per source, the number of documents.
      token_counts: per tokenizer, how often each ID was produced (int64 [vocab]).
      sample: the ``sample_size`` documents with the smallest ``sample_key``, as
        (key, source, file, record, bytes): a sample that does not depend on how
        the corpus is sharded or read.
      sample_size: how many documents the sample keeps.
    """

    counts: dict[str, np.ndarray]
    words: dict[str, np.ndarray]
    documents: dict[str, int]
    token_counts: list[np.ndarray]
    sample: list[tuple[bytes, str, str, int, bytes]] = dataclasses.field(default_factory=list)
    sample_size: int = 0

    @classmethod
    def empty(cls, vocab_sizes: Sequence[int], sample_size: int = 0) -> "Figures":
        return cls({}, {}, {}, [np.zeros(v, dtype=np.int64) for v in vocab_sizes], [], sample_size)

    def offer(self, documents: Sequence[tuple[str, str, int, bytes]]) -> None:
        """Keeps those of the (source, file, record, bytes) whose keys are among the smallest."""
        if self.sample_size:
            offered = [(sample_key(file, record), source, file, record, data) for source, file, record, data in documents]
            self.sample = heapq.nsmallest(self.sample_size, [*self.sample, *offered])

    def merge(self, other: "Figures") -> "Figures":
        """Adds ``other`` into this one (in place) and returns it."""
        for source, counts in other.counts.items():
            if source in self.counts:
                self.counts[source] += counts
                self.words[source] += other.words[source]
                self.documents[source] += other.documents[source]
            else:
                self.counts[source] = counts.copy()
                self.words[source] = other.words[source].copy()
                self.documents[source] = other.documents[source]
        for mine, theirs in zip(self.token_counts, other.token_counts):
            mine += theirs
        self.sample_size = max(self.sample_size, other.sample_size)
        self.sample = heapq.nsmallest(self.sample_size, [*self.sample, *other.sample])
        return self


def sample_key(file: str, record: int) -> bytes:
    """A document's place in the sample order: a hash of its file and record number."""
    return hashlib.blake2b(f"{file}\0{record}".encode("utf-8", "surrogatepass"), digest_size=8).digest()


def decode(data: bytes) -> tuple[str, bool]:
    """(the document's characters, whether it is valid UTF-8); invalid bytes become
    lone surrogates (surrogateescape)."""
    try:
        return data.decode("utf-8"), True
    except UnicodeDecodeError:
        return data.decode("utf-8", "surrogateescape"), False


class _Characters:
    """The characters of a batch of documents as arrays (characters never cross documents).

    Attributes:
      classes: uint8 class index per character (combining characters resolved).
      byte_lengths: UTF-8 bytes per character (1 for an invalid byte).
      document_starts: bool per character, True at each document's first.
      per_document: characters per document.
      ascii: every character is one byte.
      valid: no character is an invalid byte.
    """

    def __init__(self, texts: Sequence[str], valid: bool):
        text = "".join(texts)
        cps = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        n = len(cps)
        self.per_document = np.array([len(t) for t in texts], dtype=np.int64)
        starts = np.zeros(n + 1, dtype=bool)
        starts[np.cumsum(self.per_document) - self.per_document] = True
        self.document_starts = starts[:n]
        classes = np.frombuffer(code_point_classes(), dtype=np.uint8)[cps]
        inherited = classes == INHERITED
        if inherited.any():  # combining characters take the class before them, never across documents
            classes = classes.copy()
            classes[inherited & self.document_starts] = OTHER
            own = ~inherited | self.document_starts
            classes = classes[np.maximum.accumulate(np.where(own, np.arange(n), 0))]
        self.classes = classes
        self.ascii = bool(n == 0 or cps.max() < 0x80)
        self.valid = valid
        if self.ascii:
            self.byte_lengths = np.ones(n, dtype=np.uint8)
        else:
            self.byte_lengths = (1 + (cps >= 0x80) + (cps >= 0x800) + (cps >= 0x10000)).astype(np.uint8)
            if not valid:  # lone surrogates stand for one invalid byte each (surrogateescape)
                self.byte_lengths[(cps >= 0xD800) & (cps < 0xE000)] = 1


class _Bytes:
    """Per byte of the batch: its character's class; characters and valid ones started before it."""

    def __init__(self, chars: _Characters):
        self.classes = chars.classes if chars.ascii else np.repeat(chars.classes, chars.byte_lengths)
        n = self.size = len(self.classes)
        self.chars_before = self.valid_before = self.inside = None  # None: every byte is a valid character
        if not chars.ascii:
            char_start = np.zeros(n + 1, dtype=bool)
            char_start[np.cumsum(chars.byte_lengths, dtype=np.int64) - chars.byte_lengths] = True
            char_start[n] = True
            self.inside = ~char_start  # the byte continues a character begun before it
            self.chars_before = _before(char_start[:n])
            if not chars.valid:
                self.valid_before = _before(char_start[:n] & (self.classes != INVALID))


def _before(flags: np.ndarray) -> np.ndarray:
    """out[i] = flags[:i].sum(), for i in 0..len(flags)."""
    out = np.zeros(len(flags) + 1, dtype=np.int64)
    np.cumsum(flags, out=out[1:])
    return out


def _token_classes(bytes_: _Bytes, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """``bpe.scripts.class_of_span`` of every token: its last byte's class, unless whitespace."""
    last = bytes_.classes[ends - 1]
    return np.where(last == WHITESPACE, bytes_.classes[starts], last).astype(np.int64)


def measure_batch(
    documents: Sequence[tuple[str, bytes]],
    tokenizers: Sequence[MeasuredTokenizer],
    encoded: Sequence[Sequence[np.ndarray]] | None = None,
    sample_size: int = 0,
) -> Figures:
    """The Figures of a batch of (source, document bytes).

    Args:
      documents: (source, bytes) pairs.
      tokenizers: the tokenizers to measure.
      encoded: ``encoded[t][d]``, the IDs of document d by tokenizer t, if known;
        else they are encoded here.
      sample_size: the sample size of the result (documents are offered to the
        sample by the caller, who knows their files and records).
    """
    figures = Figures.empty([t.vocab_size for t in tokenizers], sample_size)
    if not documents:
        return figures
    names = sorted({source for source, _ in documents})
    source_index = {name: i for i, name in enumerate(names)}
    doc_sources = np.array([source_index[source] for source, _ in documents], dtype=np.int64)
    texts = [decode(data) for _, data in documents]
    chars = _Characters([t for t, _ in texts], valid=all(ok for _, ok in texts))
    bytes_ = _Bytes(chars)
    size = len(names) * N_CLASSES

    counts = np.zeros((len(tokenizers), 4, size), dtype=np.int64)
    for t, tokenizer in enumerate(tokenizers):
        per_doc = encoded[t] if encoded is not None else [tokenizer.encode(data) for _, data in documents]
        ids = np.concatenate(per_doc).astype(np.int64)
        lengths = tokenizer.lengths[ids]
        ends = np.cumsum(lengths)
        if (ends[-1] if len(ends) else 0) != bytes_.size:
            raise ValueError("the tokens do not spell the documents' bytes")
        if not len(ids):
            continue
        starts = ends - lengths
        keys = _token_classes(bytes_, starts, ends)
        if len(names) > 1:
            keys += np.repeat(doc_sources, [len(d) for d in per_doc]) * N_CLASSES
        if bytes_.chars_before is None:
            characters, fallback = lengths, None
        else:
            characters = bytes_.chars_before[ends] - bytes_.chars_before[starts]
            valid = characters if bytes_.valid_before is None else bytes_.valid_before[ends] - bytes_.valid_before[starts]
            # A token ending inside a character does not hold that (last begun) character whole.
            fallback = (valid - bytes_.inside[ends]) <= 0
        counts[t, Quantity.TOKENS] = np.bincount(keys, minlength=size)
        counts[t, Quantity.BYTES] = np.bincount(keys, weights=lengths, minlength=size)
        counts[t, Quantity.CHARACTERS] = np.bincount(keys, weights=characters, minlength=size)
        if fallback is not None:
            counts[t, Quantity.FALLBACK] = np.bincount(keys, weights=fallback, minlength=size)
        figures.token_counts[t] += np.bincount(ids, minlength=tokenizer.vocab_size)

    words = _word_counts(chars, doc_sources, len(names))
    per_source_docs = np.bincount(doc_sources, minlength=len(names))
    for i, name in enumerate(names):
        figures.counts[name] = counts[:, :, i * N_CLASSES : (i + 1) * N_CLASSES].copy()
        figures.words[name] = words[i]
        figures.documents[name] = int(per_source_docs[i])
    return figures


def _word_counts(chars: _Characters, doc_sources: np.ndarray, n_sources: int) -> np.ndarray:
    """Words per (source, class): runs of non-whitespace characters within a document."""
    n = len(chars.classes)
    space = chars.classes == WHITESPACE
    previous_space = np.empty(n, dtype=bool)
    previous_space[:1] = True
    previous_space[1:] = space[:-1]
    word_starts = np.flatnonzero(~space & (previous_space | chars.document_starts))
    if not len(word_starts):
        return np.zeros((n_sources, N_CLASSES), dtype=np.int64)
    # The first writing character at or after each position (n: none). Between one
    # word's start and the next one's there is the word, then only whitespace.
    writing = np.where(_IS_WRITING[chars.classes], np.arange(n, dtype=np.int32), np.int32(n))
    first = np.minimum.accumulate(writing[::-1])[::-1][word_starts]
    next_start = np.append(word_starts[1:], n)
    found = first < next_start
    keys = np.where(found, chars.classes[np.minimum(first, n - 1)], chars.classes[word_starts]).astype(np.int64)
    if n_sources > 1:
        keys += np.repeat(doc_sources, chars.per_document)[word_starts] * N_CLASSES
    return np.bincount(keys, minlength=n_sources * N_CLASSES).reshape(n_sources, N_CLASSES).astype(np.int64)
