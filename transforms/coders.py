"""A coder for the elements our pipelines pass around, with a cheap size estimate.

Beam's workers estimate the size of sampled elements for their metrics by
encoding them, and they sample often (most documents of a small job). With
the default coder that means pickling documents, token rows and Arrow tables
only to take their length. Subclasses of ``SizedPickleCoder`` encode the same
way (pickle, fast for these types) but estimate an element's size from
lengths they already know.

Each element type registers its coder beside its definition
(``beam.coders.registry.register_coder(Document, DocumentCoder)``); a
PCollection uses it when its element type is declared
(``.with_output_types(Document)``).
"""

from __future__ import annotations

import pickle

import apache_beam as beam
import pyarrow as pa

__all__ = ["SizedPickleCoder", "TableCoder"]


class SizedPickleCoder(beam.coders.Coder):
    """Pickles values of ``value_type``; ``estimate_size`` must not encode them."""

    value_type: type = object

    def encode(self, value) -> bytes:
        return pickle.dumps(value, pickle.HIGHEST_PROTOCOL)

    def decode(self, encoded: bytes):
        return pickle.loads(encoded)

    def estimate_size(self, value) -> int:
        raise NotImplementedError

    def is_deterministic(self) -> bool:
        return False

    def to_type_hint(self):
        return self.value_type


class TableCoder(SizedPickleCoder):
    """Arrow tables (pickled as Arrow IPC buffers); size: the buffers' bytes."""

    value_type = pa.Table

    def estimate_size(self, table: pa.Table) -> int:
        return table.nbytes


beam.coders.registry.register_coder(pa.Table, TableCoder)
