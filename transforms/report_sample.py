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

from bpe.scripts import SCRIPTS, WRITING, class_of_span, classify
from bpe.segmentation import Vocabulary
from transforms.report_figures import MeasuredTokenizer, decode

__all__ = ["SEGMENTATION_FIELDS", "Segmenter", "visualizer_documents"]

# Columns of a segmentation table, per class.
SEGMENTATION_FIELDS = ("pieces", "bytes", "bpe", "greedy", "fewest")
# The visualizer shows this many sample documents per script, of at most this many bytes each.
DOCUMENTS_PER_SCRIPT = 2
VISUALIZER_BYTES = 1200


class Segmenter:
    """Counts a tokenizer's pieces three ways, remembering pieces it has seen.

    Args:
      tokenizer: the tokenizer, as the measures use it.
    """

    def __init__(self, tokenizer: MeasuredTokenizer):
        self.tokenizer = tokenizer
        tok = tokenizer.tokenizer
        self.vocabulary = Vocabulary([tok.token_bytes(i) for i in range(256 + len(tok.merges))])
        self._seen: dict[bytes, tuple[int, int, int]] = {}

    def count(self, documents: Sequence[bytes]) -> np.ndarray:
        """int64 [class, SEGMENTATION_FIELDS] over the documents' pieces."""
        table = np.zeros((len(SCRIPTS), len(SEGMENTATION_FIELDS)), dtype=np.int64)
        pre = self.tokenizer.tokenizer.pre_tokenizer
        for data in documents:
            ids = self.tokenizer.encode(data)
            lengths = self.tokenizer.lengths[ids]
            position = 0
            for piece in pre.pieces(data):
                bpe = 0
                covered = 0
                while covered < len(piece):  # tokens never cross pieces
                    covered += int(lengths[position])
                    position += 1
                    bpe += 1
                script, greedy, fewest = self._piece(piece)
                table[script] += (1, len(piece), bpe, greedy, fewest)
        return table

    def _piece(self, piece: bytes) -> tuple[int, int, int]:
        found = self._seen.get(piece)
        if found is None:
            script = class_of_span(classify(decode(piece)[0]))
            greedy, fewest = self.vocabulary.both(piece)
            found = (script, len(greedy), len(fewest))
            self._seen[piece] = found
        return found


def dominant_class(data: bytes) -> int:
    """The writing script with the most characters in the document, else its most frequent class."""
    classes = classify(decode(data)[0])
    counts = np.bincount(np.array(classes, dtype=np.int64), minlength=len(SCRIPTS)) if classes else np.zeros(len(SCRIPTS))
    writing = [(counts[i], -i) for i in WRITING if counts[i]]
    if writing:
        return -max(writing)[1]
    return int(np.argmax(counts))


def visualizer_documents(
    sample: Sequence[tuple[bytes, str, str, int, bytes, int]], tokenizers: Sequence[MeasuredTokenizer]
) -> list[dict]:
    """Up to DOCUMENTS_PER_SCRIPT sample documents per dominant script, each tokenized by every tokenizer.

    Each shows the tokens of its sample prefix (``report_figures.sample_prefix``)
    that end within its first VISUALIZER_BYTES bytes (per tokenizer).
    """
    chosen: dict[int, list] = {}
    for _, source, file, record, data, length in sample:
        picked = chosen.setdefault(dominant_class(data), [])
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
