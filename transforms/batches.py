"""``AddUp``: a CombineFn for accumulators that add themselves up (the report's Figures, TokenUse).

    totals = batches | beam.CombineGlobally(AddUp(functools.partial(TokenUse.empty, vocab_size)))

Each input is an accumulator already (one per batch of documents), so adding an
input and merging two accumulators are the same step: ``a.merge(b)`` adds
``b`` into ``a`` and returns ``a``.
"""

from __future__ import annotations

from typing import Callable

import apache_beam as beam

__all__ = ["AddUp"]


class AddUp(beam.CombineFn):
    """Adds up accumulators: ``empty()`` makes one; ``a.merge(b)`` adds ``b`` into ``a``, returning ``a``.

    Args:
      empty: makes the empty accumulator (picklable: a class method or a ``functools.partial``).
    """

    def __init__(self, empty: Callable):
        self._empty = empty

    def create_accumulator(self):
        return self._empty()

    def add_input(self, accumulator, value):
        return accumulator.merge(value)

    def merge_accumulators(self, accumulators):
        accumulators = iter(accumulators)
        merged = next(accumulators)
        for accumulator in accumulators:
            merged.merge(accumulator)
        return merged

    def extract_output(self, accumulator):
        return accumulator
