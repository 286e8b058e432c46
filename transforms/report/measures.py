"""Putting a report job's pieces together: the sample's parts and the merged measures.

Pure (numpy, no Beam). ``MeasureTokenizers`` (``measure_tokenizers``) cuts the
merged sample into ``SamplePart``s (``sample_parts``) that workers segment, and
writes its result as named pieces; the driver turns the pieces into one dict of
measures after the job with ``combine_measures``: the parts' segmentation tables
add up (``segmentation_tables``), and each part's visualizer tokens and check
texts go to their places.
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Sequence

import numpy as np

from bpe.scripts import SCRIPTS
from bpe.tokenizer import Tokenizer
from transforms.report.figures import Figures
from transforms.report.sample import SEGMENTATION_FIELDS

__all__ = [
    "SAMPLE_PART_BYTES", "SamplePart", "sample_parts", "combine_measures", "segmentation_tables", "figures_to_json",
]

# The sample is segmented in parts of about this many bytes per tokenizer (parts spread over
# the workers; each call's arrays take several times its bytes).
SAMPLE_PART_BYTES = 1 << 17


class SamplePart(NamedTuple):
    """Some of the sample's documents, to be segmented by one tokenizer.

    Attributes:
      tokenizer: the tokenizer's index.
      index: the part's number among that tokenizer's parts (0, 1, ...).
      documents: the documents' prefixes (``figures.sample_prefix``).
      shown: per document, its place among the visualizer's documents, or -1.
    """

    tokenizer: int
    index: int
    documents: list[bytes]
    shown: list[int]


def sample_parts(figures: Figures, tokenizers: int, shown: Sequence[int] = ()) -> list[SamplePart]:
    """The sample's documents (their prefixes) in parts of about SAMPLE_PART_BYTES, once per
    tokenizer, each document in one part per tokenizer; ``shown`` are the indices in the sample
    of the visualizer's documents, in its order. Each tokenizer has a part 0, if need be empty."""
    place = {i: p for p, i in enumerate(shown)}
    parts: list[list[int]] = []
    part: list[int] = []
    size = 0
    for i, (*_, prefix, _) in enumerate(figures.sample):
        if part and size + len(prefix) > SAMPLE_PART_BYTES:
            parts.append(part)
            part, size = [], 0
        part.append(i)
        size += len(prefix)
    parts.append(part)
    return [
        SamplePart(t, k, [figures.sample[i][4] for i in indices], [place.get(i, -1) for i in indices])
        for t in range(tokenizers) for k, indices in enumerate(parts)
    ]


def combine_measures(pieces: dict[str, dict], tokenizers: Sequence[Tokenizer], check_texts: Sequence[str],
                     per_tokenizer: Callable | None = None) -> dict:
    """The pieces the job wrote (by name) -> the measures (see ``MeasureTokenizers``, which
    took the same ``check_texts`` and ``per_tokenizer``).

    No documents: no pieces; the measures are those of no documents, and the check
    texts are encoded here, and ``per_tokenizer`` called here.
    """
    vocab_sizes = [tokenizer.vocab_size for tokenizer in tokenizers]
    measures = pieces.get("figures") or {**figures_to_json(Figures.empty(vocab_sizes)), "visualizer": []}
    parts = [value for name, value in sorted(pieces.items()) if name.startswith("part-")]
    measures["segmentation"] = segmentation_tables(
        len(tokenizers), [(part["tokenizer"], np.array(part["segmentation"], dtype=np.int64)) for part in parts]
    ).tolist()
    for doc in measures["visualizer"]:
        doc["tokens"] = [None] * len(tokenizers)
    checks: list[list[tuple[int, str, list[int]]]] = [[] for _ in tokenizers]
    values = [None] * len(tokenizers)  # of per_tokenizer, from each tokenizer's part 0
    for part in parts:
        t = part["tokenizer"]
        for place, tokens in part["visualizer"]:
            measures["visualizer"][place]["tokens"][t] = tokens
        checks[t] += [tuple(check) for check in part["checks"]]
        values[t] = part.get("per_tokenizer", values[t])
    if not parts:
        checks = [[(-1, text, tokenizer.encode(text)) for text in check_texts] for tokenizer in tokenizers]
        if per_tokenizer is not None:
            values = [per_tokenizer(tokenizer) for tokenizer in tokenizers]
    if per_tokenizer is not None:
        measures["per_tokenizer"] = values
    # The fixed texts first, in their order, then the visualizer's documents in theirs.
    measures["checks"] = [
        [{"text": text, "ids": ids} for _, text, ids in sorted(mine, key=lambda check: check[0])] for mine in checks
    ]
    return measures


def segmentation_tables(tokenizers: int, segmented: Sequence[tuple[int, np.ndarray]]) -> np.ndarray:
    """int64 [tokenizer, class, SEGMENTATION_FIELDS]: the sum of each tokenizer's part tables."""
    tables = np.zeros((tokenizers, len(SCRIPTS), len(SEGMENTATION_FIELDS)), dtype=np.int64)
    for t, table in segmented:
        tables[t] += table
    return tables


def figures_to_json(figures: Figures) -> dict:
    """Figures as plain JSON values (the sample is summarised by its size)."""
    return {
        "classes": list(SCRIPTS),
        "quantities": ["tokens", "bytes", "characters", "fallback_tokens"],
        "segmentation_fields": list(SEGMENTATION_FIELDS),
        "sources": {
            source: {
                "documents": figures.documents[source],
                "counts": figures.counts[source].tolist(),
                "words": figures.words[source].tolist(),
            }
            for source in sorted(figures.counts)
        },
        "token_counts": [counts.tolist() for counts in figures.token_counts],
        "sample_documents": len(figures.sample),
    }
