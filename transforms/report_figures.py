"""The report's per-document measures and how partial results merge (pure: numpy, no Beam).

Definitions (the figures of ``beam-bpe report`` use exactly these):

- **Characters** are those of the document decoded as UTF-8; each byte that is
  not valid UTF-8 is a character of its own, of class ``invalid UTF-8``.
  Every character has one class of ``bpe.scripts.SCRIPTS``.
- **A token's script** (``bpe.scripts.class_of_text`` over the characters any
  of whose bytes lie in the token): the class of its first writing-script
  character, else of its first non-whitespace character, else whitespace. So
  " the" is Latin, " 42" digits, "\\n\\n" whitespace, and a token holding the
  2nd and 3rd byte of "中" is Han.
- A script's **bytes** are the bytes of its tokens, its **characters** the
  characters whose first byte lies in one of its tokens, so bytes, characters
  and tokens all add up over the scripts to the corpus totals.
- **Words** are maximal runs of non-whitespace characters within a document; a
  word's script is that of its first writing-script character, else of its
  first character. Tokens per word (fertility) of a script is its tokens over
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
            ids = self.tokenizer.encode(data)
        return np.asarray(ids, dtype=np.uint32)


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


def _next_true(flags: np.ndarray) -> np.ndarray:
    """For each position i (and len(flags)), the smallest j >= i with flags[j], else len(flags)."""
    n = len(flags)
    positions = np.where(flags, np.arange(n), n)
    out = np.empty(n + 1, dtype=np.int64)
    out[n] = n
    out[:n] = np.minimum.accumulate(positions[::-1])[::-1]
    return out


def decode(data: bytes) -> str:
    """The document's characters: invalid bytes become lone surrogates (surrogateescape)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("utf-8", "surrogateescape")


class _Characters:
    """The characters of a batch of documents, as arrays (characters never cross documents)."""

    def __init__(self, texts: Sequence[str]):
        text = "".join(texts)
        cps = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        lengths = np.array([len(t) for t in texts], dtype=np.int64)
        starts = np.zeros(len(cps) + 1, dtype=bool)
        starts[np.cumsum(lengths) - lengths] = True  # first character of each document
        starts = starts[: len(cps)]
        classes = np.frombuffer(code_point_classes(), dtype=np.uint8)[cps].astype(np.int64)
        # Combining characters take the class before them, never across documents.
        inherited = classes == INHERITED
        classes[inherited & starts] = OTHER
        own = ~inherited | starts
        classes = classes[np.maximum.accumulate(np.where(own, np.arange(len(cps)), 0))] if len(cps) else classes
        # Lone surrogates stand for one invalid byte each (surrogateescape).
        self.byte_lengths = np.select(
            [cps < 0x80, cps < 0x800, (cps >= 0xD800) & (cps < 0xE000), cps < 0x10000], [1, 2, 1, 3], 4
        ).astype(np.int64)
        self.classes = classes
        self.document_starts = starts
        self.per_document = lengths


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
    chars = _Characters([decode(data) for _, data in documents])
    n_sources, shape = len(names), (len(names), N_CLASSES)

    # Bytes: the class of the character each belongs to; valid character starts.
    char_of_byte = np.repeat(np.arange(len(chars.classes)), chars.byte_lengths)
    byte_classes = chars.classes[char_of_byte]
    char_ends = np.cumsum(chars.byte_lengths)
    valid_start = np.zeros(len(byte_classes), dtype=bool)
    valid_start[char_ends - chars.byte_lengths] = chars.classes != INVALID
    char_start = np.zeros(len(byte_classes), dtype=bool)
    char_start[char_ends - chars.byte_lengths] = True
    chars_before = np.concatenate([[0], np.cumsum(char_start)])
    next_writing = _next_true(_IS_WRITING[byte_classes])
    next_visible = _next_true(byte_classes != WHITESPACE)
    next_valid = _next_true(valid_start)
    end_of_char = np.append(char_ends[char_of_byte], len(byte_classes))

    counts = np.zeros((len(tokenizers), 4, n_sources * N_CLASSES), dtype=np.int64)
    for t, tokenizer in enumerate(tokenizers):
        per_doc = encoded[t] if encoded is not None else [tokenizer.encode(data) for _, data in documents]
        ids = np.concatenate(per_doc).astype(np.int64) if per_doc else np.zeros(0, np.int64)
        lengths = tokenizer.lengths[ids]
        ends = np.cumsum(lengths)
        starts = ends - lengths
        if len(ends) and ends[-1] != len(byte_classes) or not len(ends) and len(byte_classes):
            raise ValueError("the tokens do not spell the documents' bytes")
        classes = _span_classes(byte_classes, next_writing, next_visible, starts, ends)
        sources = np.repeat(doc_sources, [len(d) for d in per_doc])
        keys = sources * N_CLASSES + classes
        valid = next_valid[starts]
        fallback = ~((valid < ends) & (end_of_char[valid] <= ends))
        size = n_sources * N_CLASSES
        counts[t, Quantity.TOKENS] = np.bincount(keys, minlength=size)
        counts[t, Quantity.BYTES] = np.bincount(keys, weights=lengths, minlength=size)
        counts[t, Quantity.CHARACTERS] = np.bincount(keys, weights=chars_before[ends] - chars_before[starts], minlength=size)
        counts[t, Quantity.FALLBACK] = np.bincount(keys, weights=fallback, minlength=size)
        figures.token_counts[t] += np.bincount(ids, minlength=tokenizer.vocab_size)

    words = _word_counts(chars, doc_sources, n_sources)
    per_source_docs = np.bincount(doc_sources, minlength=n_sources)
    for i, name in enumerate(names):
        figures.counts[name] = counts[:, :, i * N_CLASSES : (i + 1) * N_CLASSES].copy()
        figures.words[name] = words[i]
        figures.documents[name] = int(per_source_docs[i])
    return figures


def _span_classes(classes, next_writing, next_visible, starts, ends) -> np.ndarray:
    """``class_of_text`` of the spans [starts, ends) of a sequence of classes (non-empty spans)."""
    last = max(len(classes) - 1, 0)
    writing, visible = next_writing[starts], next_visible[starts]
    return np.where(
        writing < ends,
        classes[np.minimum(writing, last)],
        np.where(visible < ends, classes[np.minimum(visible, last)], WHITESPACE),
    )


def _word_counts(chars: _Characters, doc_sources: np.ndarray, n_sources: int) -> np.ndarray:
    """Words per (source, class): runs of non-whitespace characters within a document."""
    n = len(chars.classes)
    space = chars.classes == WHITESPACE
    previous_space = np.concatenate([[True], space[:-1]]) if n else space
    word_starts = np.flatnonzero(~space & (previous_space | chars.document_starts))
    # A word ends at the next whitespace or document start after it.
    boundary = _next_true(space | chars.document_starts)
    word_ends = boundary[np.minimum(word_starts + 1, n)]
    classes = _span_classes(
        chars.classes, _next_true(_IS_WRITING[chars.classes]), _next_true(~space), word_starts, word_ends
    )
    doc_of_char = np.repeat(np.arange(len(chars.per_document)), chars.per_document)
    keys = doc_sources[doc_of_char[word_starts]] * N_CLASSES + classes
    return np.bincount(keys, minlength=n_sources * N_CLASSES).reshape(n_sources, N_CLASSES).astype(np.int64)
