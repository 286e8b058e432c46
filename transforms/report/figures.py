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
- A tokenizer that normalizes text (NFC, as Qwen2.5's file says) is measured on the
  text as it sees it: each document in NFC. Its bytes and characters are those of
  that text (its words, the corpus's, are counted on the documents as they are).
"""

from __future__ import annotations

import dataclasses
import hashlib
import heapq
from typing import Sequence

import numpy as np

from bpe.scripts import INHERITED, INVALID, OTHER, SCRIPTS, WRITING, classes_of
from transforms.report.tokens import MeasuredTokenizer, text_span_classes

__all__ = ["SAMPLE_BYTES", "Figures", "Quantity", "document_classes", "measure_batch", "sample_prefix", "span_classes"]

N_CLASSES = len(SCRIPTS)
# The sample keeps at most this many bytes of each document (see sample_prefix): enough for
# the visualizer and for the segmentations' figures, whose cost grows with the sample's bytes.
SAMPLE_BYTES = 4096
WHITESPACE = SCRIPTS.index("whitespace")
_IS_WRITING = np.zeros(256, dtype=bool)
_IS_WRITING[list(WRITING)] = True


class Quantity:
    """Rows of ``Figures.counts``: what is counted per (tokenizer, source, class)."""

    TOKENS, BYTES, CHARACTERS, FALLBACK = range(4)
    NAMES = ("tokens", "bytes", "characters", "fallback_tokens")


@dataclasses.dataclass
class Figures:
    """Additive totals over a set of documents; ``merge`` adds two of them.

    Attributes:
      counts: per source, an int64 array [tokenizer, Quantity, class].
      words: per source, words per class (int64 [class]).
      documents: per source, the number of documents.
      token_counts: per tokenizer, how often each ID was produced (int64 [vocab]).
      sample: the ``sample_size`` documents with the smallest ``sample_key``, as
        (key, source, file, record, first bytes (``sample_prefix``), length): a
        sample that does not depend on how the corpus is sharded or read.
      sample_size: how many documents the sample keeps.
    """

    counts: dict[str, np.ndarray]
    words: dict[str, np.ndarray]
    documents: dict[str, int]
    token_counts: list[np.ndarray]
    sample: list[tuple[bytes, str, str, int, bytes, int]] = dataclasses.field(default_factory=list)
    sample_size: int = 0

    @classmethod
    def empty(cls, vocab_sizes: Sequence[int], sample_size: int = 0) -> "Figures":
        return cls({}, {}, {}, [np.zeros(v, dtype=np.int64) for v in vocab_sizes], [], sample_size)

    def offer(self, documents: Sequence[tuple[str, str, int, bytes]]) -> None:
        """Keeps those of the (source, file, record, bytes) whose keys are among the smallest."""
        if self.sample_size:
            offered = [
                (sample_key(file, record), source, file, record, sample_prefix(data), len(data))
                for source, file, record, data in documents
            ]
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


def sample_prefix(data: bytes) -> bytes:
    """The part of a document the sample keeps: its first SAMPLE_BYTES bytes, cut
    before a UTF-8 continuation byte (10xxxxxx) so that no character is split."""
    if len(data) <= SAMPLE_BYTES:
        return data
    cut = SAMPLE_BYTES
    while cut > 0 and data[cut] & 0xC0 == 0x80:
        cut -= 1
    return data[:cut]


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


class _Batch:
    """A batch of documents as arrays: their characters' classes and where characters start in the bytes.

    Characters never cross documents (each is decoded on its own).

    Attributes:
      code_points: uint32 per character (a lone surrogate for each invalid byte).
      valid: whether every document is valid UTF-8.
      classes: uint8 class index per character (combining characters resolved).
      document_starts: bool per character, True at each document's first.
      per_document: characters per document.
      size: bytes in the batch.
      char_start: bool per byte and one more (True, at ``size``): whether a
        character starts there; None when every byte is a character (ASCII).
      chars_before: per byte position 0..size, how many characters start
        before it; None when every byte is a character.
      valid_before: ``valid_before[i]``: the valid characters among the first
        i; None when all are valid.
    """

    def __init__(self, datas: Sequence[bytes]):
        decoded = [decode(data) for data in datas]
        text = "".join(t for t, _ in decoded)
        self.valid = valid = all(ok for _, ok in decoded)
        self.code_points = cps = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        n = len(cps)
        self.per_document = np.array([len(t) for t, _ in decoded], dtype=np.int64)
        starts = np.zeros(n + 1, dtype=bool)
        starts[np.cumsum(self.per_document) - self.per_document] = True
        self.document_starts = starts[:n]
        self.classes = _resolve_inherited(classes_of(cps), self.document_starts)
        self.size = sum(len(data) for data in datas)
        self.char_start = self.chars_before = None
        if self.size != n:
            if valid:  # character starts are the bytes that are not 10xxxxxx
                starting = np.frombuffer(b"".join(datas), dtype=np.int8) >= -64  # 10xxxxxx: -128..-65
            else:  # a lone surrogate stands for one invalid byte (surrogateescape)
                lengths = np.where(cps < 0x80, 1, np.where(cps < 0x800, 2, np.where(cps < 0x10000, 3, 4)))
                lengths[(cps >= 0xD800) & (cps < 0xE000)] = 1
                starting = np.zeros(self.size, dtype=bool)
                starting[np.cumsum(lengths) - lengths] = True
            self.char_start = np.append(starting, True)
            self.chars_before = _before(starting)
        self.valid_before = None if valid else _before(self.classes != INVALID)

    def _chars_before(self, byte_positions: np.ndarray) -> np.ndarray:
        """How many characters start before each byte position (0..size)."""
        return byte_positions if self.chars_before is None else self.chars_before[byte_positions]

    def spans(self, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per byte span [start, end): its class (``bpe.scripts.class_of_span``: the class of the
        character holding its last byte, unless whitespace, then of the one holding its first),
        its characters (those that start in it) and whether it is a byte-level fallback token."""
        first, last = self._chars_before(starts), self._chars_before(ends)
        characters = last - first
        valid = characters if self.valid_before is None else self.valid_before[last] - self.valid_before[first]
        # A span ending inside a character does not hold that (last begun) character whole.
        inside = False if self.char_start is None else ~self.char_start[ends]
        classes = self.classes[last - 1].astype(np.int64)  # the last character begun before the end
        space = np.flatnonzero(classes == WHITESPACE)
        holding = first[space]  # the character starting at the first byte, else the one before it
        if self.char_start is not None:
            holding -= ~self.char_start[starts[space]]
        classes[space] = self.classes[holding]
        return classes, characters, (valid - inside) <= 0


def _resolve_inherited(classes: np.ndarray, document_starts: np.ndarray) -> np.ndarray:
    """Combining characters take the class of the character before them, never across documents."""
    marked = np.flatnonzero(classes == INHERITED)
    if not len(marked):
        return classes
    classes = classes.copy()
    classes[marked[document_starts[marked]]] = OTHER
    marked = marked[~document_starts[marked]]
    while len(marked):  # runs of combining characters resolve one position per pass
        classes[marked] = classes[marked - 1]
        marked = marked[classes[marked] == INHERITED]
    return classes


def _positions(size: int) -> type:
    """The integer type for positions 0..size: int32 where it holds them (its sums run faster)."""
    return np.int32 if size < 2**31 - 1 else np.int64


def _before(flags: np.ndarray) -> np.ndarray:
    """out[i] = flags[:i].sum(), for i in 0..len(flags)."""
    out = np.zeros(len(flags) + 1, dtype=_positions(len(flags)))
    np.add.accumulate(flags.view(np.uint8), dtype=out.dtype, out=out[1:])
    return out


def span_classes(spans: Sequence[bytes]) -> np.ndarray:
    """``bpe.scripts.class_of_span`` of each (non-empty) byte string, each decoded on its own."""
    return text_span_classes([decode(span)[0] for span in spans])


def document_classes(documents: Sequence[bytes]) -> np.ndarray:
    """int64 [document, class]: how many characters of each class every document holds."""
    batch = _Batch(documents)
    owner = np.repeat(np.arange(len(documents), dtype=np.int64), batch.per_document)
    counts = np.bincount(owner * N_CLASSES + batch.classes, minlength=len(documents) * N_CLASSES)
    return counts.reshape(len(documents), N_CLASSES)


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
    batch = _Batch([data for _, data in documents])
    size = len(names) * N_CLASSES

    counts = np.zeros((len(tokenizers), 4, size), dtype=np.int64)
    datas = [data for _, data in documents]
    for t, tokenizer in enumerate(tokenizers):
        # A tokenizer that normalizes is measured on the text as it sees it (see the module).
        seen, seen_datas = batch, datas
        if tokenizer.normalizes:
            seen_datas = [tokenizer.as_seen(data) for data in datas]
            if seen_datas != datas:
                seen = _Batch(seen_datas)
        if encoded is not None:
            per_doc = encoded[t]
        elif seen.valid:  # the batch's code points, known here, spare the engine its own checks
            per_doc = tokenizer.encode_valid(seen_datas, seen.code_points)
        else:
            per_doc = [tokenizer.encode(data) for data in seen_datas]
        token_sources = np.repeat(doc_sources, [len(d) for d in per_doc]) if len(names) > 1 else None
        counts[t], id_counts = _token_counts(tokenizer, seen, np.concatenate(per_doc, dtype=np.intp),
                                             token_sources, len(names))
        figures.token_counts[t] += id_counts

    words = _word_counts(batch, doc_sources, len(names))
    per_source_docs = np.bincount(doc_sources, minlength=len(names))
    for i, name in enumerate(names):
        figures.counts[name] = counts[:, :, i * N_CLASSES : (i + 1) * N_CLASSES].copy()
        figures.words[name] = words[i]
        figures.documents[name] = int(per_source_docs[i])
    return figures


def _token_counts(
    tokenizer: MeasuredTokenizer, batch: _Batch, ids: np.ndarray, token_sources: np.ndarray | None, n_sources: int
) -> tuple[np.ndarray, np.ndarray]:
    """(int64 [Quantity, source * class], int64 [vocab]): a batch's tokens (``ids``, of the
    sources ``token_sources``, None for one source) per quantity, source and class, and per ID.

    Tokens whose class their ID tells are counted per kind (``MeasuredTokenizer.kinds``)
    and the kinds added up per class; the others are looked at in the text around them.
    """
    size = n_sources * N_CLASSES
    n_kinds = len(tokenizer.kind_classes)
    kinds = tokenizer.kinds[ids]
    around = np.flatnonzero(kinds == n_kinds)  # tokens whose neighbours decide their figures
    if token_sources is not None:
        kinds += token_sources * (n_kinds + 1)
    per_kind = np.bincount(kinds, minlength=n_sources * (n_kinds + 1)).reshape(n_sources, n_kinds + 1)[:, :n_kinds]
    around_lengths = tokenizer.lengths[ids[around]]
    if int((per_kind.sum(axis=0) * tokenizer.kind_lengths).sum() + around_lengths.sum()) != batch.size:
        raise ValueError("the tokens do not spell the documents' bytes")
    counts = np.zeros((4, n_sources, N_CLASSES), dtype=np.int64)
    weights = np.stack([np.ones(n_kinds, dtype=np.int64), tokenizer.kind_lengths, tokenizer.kind_characters])
    by_class = np.eye(N_CLASSES, dtype=np.int64)[tokenizer.kind_classes]  # [kind, class]: 1 at its class
    counts[[Quantity.TOKENS, Quantity.BYTES, Quantity.CHARACTERS]] = (per_kind * weights[:, None, :]) @ by_class
    counts = counts.reshape(4, size)
    if len(around):
        ends = np.cumsum(tokenizer.lengths[ids], dtype=_positions(batch.size))[around]
        keys, characters, fallback = batch.spans(ends - around_lengths, ends)
        if token_sources is not None:
            keys += token_sources[around] * N_CLASSES
        counts[Quantity.TOKENS] += np.bincount(keys, minlength=size)
        counts[Quantity.BYTES] += np.bincount(keys, weights=around_lengths, minlength=size).astype(np.int64)
        counts[Quantity.CHARACTERS] += np.bincount(keys, weights=characters, minlength=size).astype(np.int64)
        counts[Quantity.FALLBACK] += np.bincount(keys, weights=fallback, minlength=size).astype(np.int64)
    return counts, np.bincount(ids, minlength=tokenizer.vocab_size)


def _word_counts(batch: _Batch, doc_sources: np.ndarray, n_sources: int) -> np.ndarray:
    """Words per (source, class): runs of non-whitespace characters within a document."""
    classes = batch.classes
    n = len(classes)
    space = classes == WHITESPACE
    previous_space = np.empty(n, dtype=bool)
    previous_space[:1] = True
    previous_space[1:] = space[:-1]
    word_starts = np.flatnonzero(~space & (previous_space | batch.document_starts))
    keys = classes[word_starts].astype(np.int64)
    # A word that does not start with a writing script takes its first writing
    # character's class, if it has one before the next word's start (from one
    # word's start to the next one's there is the word, then only whitespace).
    late = np.flatnonzero(~_IS_WRITING[keys])
    if len(late):
        # Only the characters from such a word's start to the next word's are looked at.
        starts = word_starts[late]
        lengths = np.append(word_starts, n)[late + 1] - starts
        offsets = np.cumsum(lengths) - lengths  # where each range begins among the looked-at characters
        looked_at = np.arange(int(lengths.sum())) + np.repeat(starts - offsets, lengths)
        writing = np.flatnonzero(_IS_WRITING[classes[looked_at]])
        first = np.searchsorted(writing, offsets)  # each range's first writing character, if in it
        found = np.flatnonzero(first < len(writing))
        found = found[writing[first[found]] < offsets[found] + lengths[found]]
        keys[late[found]] = classes[looked_at[writing[first[found]]]]
    if n_sources > 1:
        keys += np.repeat(doc_sources, batch.per_document)[word_starts] * N_CLASSES
    return np.bincount(keys, minlength=n_sources * N_CLASSES).reshape(n_sources, N_CLASSES).astype(np.int64)
