"""The report's figures on the sample: BPE against other segmentations, and the visualizer's documents.

Pure (no Beam). The sample holds the first bytes of each sampled document
(``figures.sample_prefix``), measured as documents of their own. For
every pre-token piece of a sample document and every
tokenizer: BPE's token count, greedy longest match's and the fewest possible
(``bpe.segmentation``), all with the tokenizer's own vocabulary (special
tokens left out) and its own pieces. A piece's script is
``bpe.scripts.class_of_span`` of its characters, as for tokens.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from bpe.pretokenize import to_text
from bpe.scripts import WRITING
from bpe.segmentation import Vocabulary
from transforms.report.figures import N_CLASSES, document_classes
from transforms.report.tokens import MeasuredTokenizer, text_span_classes

__all__ = ["SEGMENTATION_FIELDS", "Segmenter", "visualizer_picks", "visualizer_tokens"]

# Columns of a segmentation table, per class.
SEGMENTATION_FIELDS = ("pieces", "bytes", "bpe", "greedy", "fewest")
# The visualizer shows this many sample documents per script, of at most this many bytes each.
DOCUMENTS_PER_SCRIPT = 2
VISUALIZER_BYTES = 1200
_WRITING = sorted(WRITING)


class Segmenter:
    """Counts a tokenizer's pieces three ways.

    Args:
      tokenizer: the tokenizer, as the measures use it.
    """

    def __init__(self, tokenizer: MeasuredTokenizer):
        self.tokenizer = tokenizer
        # The ordinary tokens under their own IDs: a rank file's or a Hugging Face file's
        # need not be the bytes as 0..255 and merges after them, nor leave no gaps.
        # A Hugging Face file's vocabulary lists its special and added tokens too: text is never
        # spelled with them.
        tok = tokenizer.tokenizer
        spelled = {*tok.special_tokens.values(), *tok.added_tokens.values()}
        self.vocabulary = Vocabulary({i: data for i, data in tok.ordinary_tokens().items() if i not in spelled})
        # The reference's split: pieces, and the IDs of the Hugging Face added tokens it matches
        # in the text (each one token whichever way a piece is spelled).
        self._split = tokenizer.tokenizer.reference_parts()[0]
        self._added = {token_id: text for text, token_id in tokenizer.tokenizer.added_tokens.items()}

    def count(self, documents: Sequence[bytes]) -> np.ndarray:
        """int64 [class, SEGMENTATION_FIELDS] over the documents' pieces (``segment``'s table)."""
        return self.segment(documents)[0]

    def segment(self, documents: Sequence[bytes]) -> tuple[np.ndarray, list[np.ndarray]]:
        """(int64 [class, SEGMENTATION_FIELDS] over the documents' pieces, each document's BPE IDs).

        Each distinct piece is segmented once, and all of them together
        (``Vocabulary.counts``); BPE's tokens of a piece are those of the
        document's IDs that end within it (tokens never cross pieces). An added
        token the text holds is a piece of one token all three ways.
        """
        pieces: list[str] = []  # every document's pieces, one after the other
        added: set[str] = set()  # the pieces that are added tokens
        documents = [self.tokenizer.as_seen(data) for data in documents]  # normalized where it normalizes
        ids = [self.tokenizer.encode(data) for data in documents]
        for data in documents:
            for piece in self._split(to_text(data)[0]):
                if type(piece) is int:
                    piece = self._added[piece]
                    added.add(piece)
                pieces.append(piece)
        # A piece's bytes are its text's: lone surrogates stand for invalid bytes (surrogateescape).
        distinct = list(dict.fromkeys(pieces))
        index = dict(zip(distinct, range(len(distinct))))
        which = np.fromiter(map(index.__getitem__, pieces), dtype=np.int64, count=len(pieces))
        unique = [piece.encode("utf-8", "surrogateescape") for piece in distinct]
        lengths = np.array([len(piece) for piece in unique], dtype=np.int64)
        token_ends = np.cumsum(self.tokenizer.lengths[np.concatenate([np.zeros(0, np.uint32), *ids], dtype=np.intp)],
                               dtype=np.int64)
        piece_ends = np.cumsum(lengths[which])
        within = np.searchsorted(token_ends, piece_ends, side="right")
        if len(piece_ends) and not np.array_equal(token_ends[within - 1], piece_ends):
            raise ValueError("a token crosses a pre-token piece")
        bpe = np.diff(within, prepend=0)
        spelled = [i for i, piece in enumerate(distinct) if piece not in added]
        greedy = np.ones(len(distinct), dtype=np.int64)
        fewest = np.ones(len(distinct), dtype=np.int64)
        greedy[spelled], fewest[spelled] = self.vocabulary.counts([unique[i] for i in spelled])
        script = text_span_classes(distinct)[which]
        columns = (np.ones(len(which), dtype=np.int64), lengths[which], bpe, greedy[which], fewest[which])
        table = np.stack(
            [np.bincount(script, weights=column, minlength=N_CLASSES) for column in columns], axis=1
        ).astype(np.int64)
        return table, ids


def dominant_classes(documents: Sequence[bytes]) -> list[int]:
    """Per document: the writing script with the most characters, else its most frequent class
    (the lowest class index on ties)."""
    counts = document_classes(documents)
    writing = counts[:, _WRITING]
    return [
        _WRITING[int(np.argmax(w))] if w.max(initial=0) > 0 else int(np.argmax(c))
        for w, c in zip(writing, counts)
    ]


def visualizer_picks(sample: Sequence[tuple[bytes, str, str, int, bytes, int]]) -> list[tuple[int, int]]:
    """The visualizer's documents: up to DOCUMENTS_PER_SCRIPT non-empty sample documents per
    dominant script, as (index in the sample, script), by script, then in sample order."""
    chosen: dict[int, list[int]] = {}
    for i, (script, entry) in enumerate(zip(dominant_classes([s[4] for s in sample]), sample)):
        picked = chosen.setdefault(script, [])
        if len(picked) < DOCUMENTS_PER_SCRIPT and entry[4]:
            picked.append(i)
    return [(i, script) for script in sorted(chosen) for i in chosen[script]]


def visualizer_tokens(tokenizer: MeasuredTokenizer, ids: np.ndarray) -> list[int]:
    """The visualizer's tokens of a sample document whose IDs are ``ids``: those that end
    within its first VISUALIZER_BYTES bytes."""
    ends = np.cumsum(tokenizer.lengths[ids.astype(np.intp, copy=False)])
    return ids[ends <= VISUALIZER_BYTES].tolist()
