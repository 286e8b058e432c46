"""The counters beam-bpe reports: one namespace, ``beam_bpe``, with the step as a prefix.

Every DoFn makes its counters here, and the drivers read them back by the same
names, so a name is spelt once:

    documents = metrics.counter("read", "documents")   # in a DoFn: beam_bpe / read.documents
    counters = metrics.Counters("encode", "documents", "tokens")   # several: counters.tokens.inc(n)
    ...
    totals = committed_counters(result)                # in a driver
    totals.get(metrics.key("read", "documents"))

Steps: ``read`` (ReadDocuments), ``count`` (CountPreTokenTables), ``encode``
(EncodeDocuments), ``shards`` (WriteTokenShards), ``dead_letters``
(WriteDeadLetters), ``decode`` (DecodeShards), ``pack`` (PackSequences,
WriteSequences).
"""

from __future__ import annotations

import apache_beam as beam

__all__ = ["NAMESPACE", "Counters", "counter", "key", "name"]

NAMESPACE = "beam_bpe"


def name(step: str, what: str) -> str:
    """A counter's name within the namespace: ``step.what``."""
    return f"{step}.{what}"


def counter(step: str, what: str):
    """The Beam counter ``beam_bpe / step.what``."""
    return beam.metrics.Metrics.counter(NAMESPACE, name(step, what))


class Counters:
    """The counters of one step, each an attribute named as the counter:
    ``Counters("count", "documents", "bytes").bytes`` is ``counter("count", "bytes")``.

    A DoFn makes them in ``__init__``; they are pickled with it.
    """

    def __init__(self, step: str, *whats: str):
        for what in whats:
            setattr(self, what, counter(step, what))


def key(step: str, what: str) -> tuple[str, str]:
    """The (namespace, name) under which a driver finds the counter's total."""
    return NAMESPACE, name(step, what)
