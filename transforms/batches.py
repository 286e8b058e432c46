"""Documents in batches of a fixed size, and the figures of the batches added up.

    batches = documents | "Batch" >> fixed_batches(64)                  # 64 documents a batch
    batches = documents | "Batch" >> fixed_batches(1 << 18, document_size)  # about 256 kB of text a batch
    totals = figures | beam.CombineGlobally(AddUp(functools.partial(TokenUse.empty, vocab_size)))

``fixed_batches``: the steps that run a tokenizer over documents (encode, token
use, the report's measures) take them in batches of one size (min == max), so
Beam never resizes them on the fly, and without Beam's batch-size metrics.

``AddUp``: a CombineFn for accumulators that add themselves up (the report's
Figures, TokenUse). Each input is an accumulator already (one per batch of
documents), so adding an input and merging two accumulators are the same step:
``a.merge(b)`` adds ``b`` into ``a`` and returns ``a``.
"""

from __future__ import annotations

from typing import Callable

import apache_beam as beam

__all__ = ["AddUp", "document_size", "fixed_batches"]


def document_size(document) -> int:
    """A document's size in a batch by bytes: its bytes, and one so an empty document counts."""
    return len(document.data) + 1


def fixed_batches(size: int, element_size_fn: Callable | None = None) -> beam.BatchElements:
    """Batches of ``size`` elements, or of about ``size`` by ``element_size_fn`` (e.g. ``document_size``)."""
    sized = {} if element_size_fn is None else {"element_size_fn": element_size_fn}
    return beam.BatchElements(min_batch_size=size, max_batch_size=size, record_metrics=False, **sized)


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
