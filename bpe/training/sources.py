"""Word counts by source (a language, a domain, a set of files) and their weights.

A table by source maps each source's name to its own {piece: count} table.
Training takes it in two ways (``bpe.train(..., weights=..., parity=...)``):

* weighted: each source's counts are multiplied by its weight and the tables
  are added up; ordinary training runs on the sum.
* parity-aware: the merge loop keeps the sources apart (see
  ``bpe.reference.train_parity``); the weights multiply each source's counts.

Weights are exact. A weight is a decimal with at most three places (``3``,
``0.5``, ``1.25``), held as an integer number of thousandths. The counts are
scaled by one integer factor, the smallest that makes every weighted count an
integer: ``scale = 1000 / gcd(1000, every weight in thousandths)``. A source
then counts ``count * weight * scale``, an integer, and ``min_frequency`` is
compared as ``min_frequency * scale``: a pair is merged only if its weighted
count reaches ``min_frequency`` exactly. Ties are unchanged (one factor for all
counts keeps their order). With whole weights the scale is 1, so a weight of 3
gives exactly the counts, and the merges, of that source's text three times.
"""

from __future__ import annotations

import decimal
import math
from typing import Mapping, Sequence

from bpe.reference import check_count, piece_bytes

__all__ = [
    "MILLI", "SourceTable", "format_weight", "is_by_source", "load_sources", "parse_weight", "scale_of",
    "weighted_table",
]

MILLI = 1000  # weights are held in thousandths
MAX_WEIGHT = 1_000_000


def parse_weight(weight: object) -> int:
    """A weight in thousandths: an int, or a decimal (str, float or Decimal) with at most three places.

    Raises:
      ValueError: not a number, not positive, above ``MAX_WEIGHT``, or finer than a thousandth.
    """
    if isinstance(weight, bool):
        raise ValueError(f"weight {weight!r} is not a number")
    try:
        value = decimal.Decimal(str(weight).strip())
    except decimal.InvalidOperation:
        raise ValueError(f"weight {weight!r} is not a number") from None
    if not value.is_finite() or value <= 0:
        raise ValueError(f"weight {weight!r} must be a positive number")
    if value > MAX_WEIGHT:
        raise ValueError(f"weight {weight!r} is above the largest weight, {MAX_WEIGHT:,}")
    milli = value * MILLI
    if milli != milli.to_integral_value():
        raise ValueError(f"weight {weight!r} has more than three decimal places")
    return int(milli)


def scale_of(milli_weights: Sequence[int]) -> int:
    """The smallest factor that makes ``count * weight`` an integer for every weight (in thousandths)."""
    return MILLI // math.gcd(MILLI, *milli_weights)


def is_by_source(word_counts: Mapping) -> bool:
    """Whether a table maps source names to tables (else it maps pieces to counts).

    Its first value decides (a plain table may hold millions): a table that mixes
    the two fails when it is loaded, on the first value of the other kind.
    """
    first = next(iter(word_counts.values()), None)
    return isinstance(first, Mapping)


class SourceTable:
    """A table by source, loaded for the merge loop: one word per (source, piece).

    Attributes:
      names: the source names, sorted; a source's index is its place here.
      words: piece bytes per word, sorted by (piece, source); pieces of one byte
        or more with a count above 0 (a one-byte piece holds no pair but counts
        in its source's compression).
      sources: the source index of each word.
      counts: each word's weighted count, ``count * weight * scale``.
      source_bytes: each source's weighted bytes, ``sum(count * len(piece))``.
      scale: the factor every weighted count carries (see the module doc).
    """

    def __init__(self, names, words, sources, counts, source_bytes, scale):
        self.names, self.words, self.sources, self.counts = names, words, sources, counts
        self.source_bytes, self.scale = source_bytes, scale

    def summed(self) -> tuple[list[bytes], list[int]]:
        """The weighted counts added up over the sources, pieces of two bytes or more, sorted."""
        totals: dict[bytes, int] = {}
        for word, count in zip(self.words, self.counts):
            if len(word) >= 2:
                totals[word] = totals.get(word, 0) + count
        words = sorted(totals)
        return words, [totals[word] for word in words]


def load_sources(
    word_counts: Mapping[str, Mapping[bytes | str, int]], weights: Mapping[str, object] | None = None
) -> SourceTable:
    """Loads a table by source with its weights (1 where a source has none).

    Raises:
      ValueError: a bad weight, a weight for a source the table does not have,
        or a source whose value is not a table.
    """
    weights = dict(weights or {})
    unknown = sorted(set(weights) - set(word_counts))
    if unknown:
        raise ValueError(f"weights name sources the table does not have: {', '.join(map(repr, unknown))}")
    names = sorted(word_counts)
    milli = {}
    for name in names:
        if not isinstance(word_counts[name], Mapping):
            raise ValueError(f"source {name!r} must map pieces to counts, not {type(word_counts[name]).__name__}")
        try:
            milli[name] = parse_weight(weights.get(name, 1))
        except ValueError as e:
            raise ValueError(f"source {name!r}: {e}") from None
    scale = scale_of(list(milli.values()))
    rows: dict[tuple[bytes, int], int] = {}
    for index, name in enumerate(names):
        factor = milli[name] * scale // MILLI
        for word, count in word_counts[name].items():
            check_count(word, count)
            word = piece_bytes(word)
            if word and count > 0:
                rows[word, index] = rows.get((word, index), 0) + int(count) * factor
    keys = sorted(rows)
    source_bytes = [0] * len(names)
    for word, index in keys:
        source_bytes[index] += len(word) * rows[word, index]
    return SourceTable(
        names, [word for word, _ in keys], [index for _, index in keys], [rows[key] for key in keys],
        source_bytes, scale,
    )


def weighted_table(
    word_counts: Mapping[str, Mapping[bytes | str, int]], weights: Mapping[str, object] | None = None
) -> tuple[dict[bytes, int], int]:
    """The weighted sum of a table by source, and its scale (see the module doc)."""
    table = load_sources(word_counts, weights)
    totals: dict[bytes, int] = {}
    for word, count in zip(table.words, table.counts):
        totals[word] = totals.get(word, 0) + count
    return totals, table.scale


def format_weight(milli: int) -> str:
    """A weight in thousandths as its shortest decimal: 3000 -> "3", 1250 -> "1.25"."""
    whole, part = divmod(milli, MILLI)
    return str(whole) if not part else f"{whole}.{part:03d}".rstrip("0")
