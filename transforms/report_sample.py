"""The report's figures on the sample: BPE against other segmentations, and the visualizer's documents.

Pure (no Beam). The sample holds the first bytes of each sampled document
(``report_figures.sample_prefix``), measured as documents of their own. For
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
from bpe.scripts import SCRIPTS, WRITING
from bpe.segmentation import Vocabulary
from transforms.report_figures import N_CLASSES, document_classes
from transforms.report_tokens import MeasuredTokenizer, text_span_classes

__all__ = ["SEGMENTATION_FIELDS", "Segmenter", "visualizer_documents"]

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
        tok = tokenizer.tokenizer
        ordinary = tok.ordinary_tokens()
        self.vocabulary = Vocabulary(
            [ordinary[i] if i in ordinary else tok.token_bytes(i) for i in range(256 + len(tok.merges))]
        )

    def count(self, documents: Sequence[bytes]) -> np.ndarray:
        """int64 [class, SEGMENTATION_FIELDS] over the documents' pieces.

        Each distinct piece is segmented once, and all of them together
        (``Vocabulary.counts``); BPE's tokens of a piece are those of the
        document's IDs that end within it (tokens never cross pieces).
        """
        split = self.tokenizer.tokenizer.pre_tokenizer.split
        pieces: list[str] = []  # every document's pieces, one after the other
        ids = [np.zeros(0, dtype=np.uint32)]
        for data in documents:
            pieces += split(to_text(data)[0])
            ids.append(self.tokenizer.encode(data))
        # A piece's bytes are its text's: lone surrogates stand for invalid bytes (surrogateescape).
        index: dict[str, int] = {}
        which = np.array([index.setdefault(piece, len(index)) for piece in pieces], dtype=np.int64)
        unique = [piece.encode("utf-8", "surrogateescape") for piece in index]
        lengths = np.array([len(piece) for piece in unique], dtype=np.int64)
        token_ends = np.cumsum(self.tokenizer.lengths[np.concatenate(ids, dtype=np.intp)], dtype=np.int64)
        piece_ends = np.cumsum(lengths[which])
        within = np.searchsorted(token_ends, piece_ends, side="right")
        if len(piece_ends) and not np.array_equal(token_ends[within - 1], piece_ends):
            raise ValueError("a token crosses a pre-token piece")
        bpe = np.diff(within, prepend=0)
        greedy, fewest = self.vocabulary.counts(unique)
        script = text_span_classes(list(index))[which]
        columns = (np.ones(len(which), dtype=np.int64), lengths[which], bpe, greedy[which], fewest[which])
        return np.stack(
            [np.bincount(script, weights=column, minlength=N_CLASSES) for column in columns], axis=1
        ).astype(np.int64)


def dominant_classes(documents: Sequence[bytes]) -> list[int]:
    """Per document: the writing script with the most characters, else its most frequent class
    (the lowest class index on ties)."""
    counts = document_classes(documents)
    writing = counts[:, _WRITING]
    return [
        _WRITING[int(np.argmax(w))] if w.max(initial=0) > 0 else int(np.argmax(c))
        for w, c in zip(writing, counts)
    ]


def visualizer_documents(
    sample: Sequence[tuple[bytes, str, str, int, bytes, int]], tokenizers: Sequence[MeasuredTokenizer]
) -> list[dict]:
    """Up to DOCUMENTS_PER_SCRIPT sample documents per dominant script, each tokenized by every tokenizer.

    Each shows the tokens of its sample prefix (``report_figures.sample_prefix``)
    that end within its first VISUALIZER_BYTES bytes (per tokenizer).
    """
    chosen: dict[int, list] = {}
    for script, (_, source, file, record, data, length) in zip(dominant_classes([s[4] for s in sample]), sample):
        picked = chosen.setdefault(script, [])
        if len(picked) < DOCUMENTS_PER_SCRIPT and data:
            picked.append((source, file, record, data, length))
    out = []
    for script in sorted(chosen):
        for source, file, record, data, length in chosen[script]:
            tokens = []
            for tokenizer in tokenizers:
                ids = tokenizer.encode(data)
                ends = np.cumsum(tokenizer.lengths[ids])
                tokens.append(ids[ends <= VISUALIZER_BYTES].tolist())
            out.append(
                {"script": SCRIPTS[script], "source": source, "file": file, "record": record,
                 "bytes": length, "tokens": tokens}
            )
    return out
