"""The element coders: exact round trips, and size estimates that never encode."""

import pickle

import apache_beam as beam
import pyarrow as pa
import pytest

from transforms.coders import TableCoder
from transforms.read import Document, DocumentCoder
from transforms.shards import TokenRow, TokenRowCoder


def _elements():
    table = pa.table({"id": ["a", "b"], "tokens": pa.array([[1, 2], [3]], pa.list_(pa.uint16()))})
    return [
        (DocumentCoder(), Document("f.jsonl", 7, b"caf\xc3\xa9 \xff", "x"), 7 + 7 + 16),
        (TokenRowCoder(), TokenRow("f.jsonl:7", [256, 257, 3]), 2 * 3 + 9),
        (TableCoder(), table, table.nbytes),
    ]


@pytest.mark.parametrize("coder, value, size", _elements())
def test_round_trip_and_size_without_encoding(coder, value, size, monkeypatch):
    encoded = coder.encode(value)
    decoded = coder.decode(encoded)
    assert decoded.equals(value) if isinstance(value, pa.Table) else decoded == value

    def no_pickling(*args, **kwargs):
        raise AssertionError("estimate_size encoded the value")

    monkeypatch.setattr(pickle, "dumps", no_pickling)
    assert coder.estimate_size(value) == size
    assert coder.get_impl().estimate_size(value) == size


def test_registered_for_their_types():
    assert isinstance(beam.coders.registry.get_coder(Document), DocumentCoder)
    assert isinstance(beam.coders.registry.get_coder(TokenRow), TokenRowCoder)
    assert isinstance(beam.coders.registry.get_coder(pa.Table), TableCoder)
