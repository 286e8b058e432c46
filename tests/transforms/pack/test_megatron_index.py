"""Megatron's ``.idx`` as ``megatron_index.write_index`` streams it: checked against
megatron-core's own ``_IndexReader`` and a reader written from the layout, with
synthetic lengths whose byte pointers pass 2^31 and 2^32 (no token is written: the
index holds only lengths and pointers)."""

import io
import struct

import numpy as np
import pytest

from tests.support.loader_libraries import megatron_indexed_dataset
from transforms.pack.megatron_index import index_entries, megatron_dtype, write_index


def parse(index: bytes):
    """(dtype code, lengths, pointers, document indices), from the layout."""
    assert index[:9] == b"MMIDIDX\x00\x00" and struct.unpack("<Q", index[9:17]) == (1,)
    code = index[17]
    entries, documents = struct.unpack("<QQ", index[18:34])
    lengths = np.frombuffer(index, np.int32, entries, 34)
    pointers = np.frombuffer(index, np.int64, entries, 34 + 4 * entries)
    doc_index = np.frombuffer(index, np.int64, documents, 34 + 12 * entries)
    assert len(index) == 34 + 12 * entries + 8 * documents
    return code, lengths, pointers, doc_index


# Three chunks of lengths; with int32 tokens the byte pointers pass 2^31 and 2^32 early.
CHUNKS = [np.array([2**30, 2**30 - 1]), np.array([], np.int64), np.array([2**31 - 1, 0, 5, 2**30])]


@pytest.mark.parametrize("dtype, code", [(np.uint16, 8), (np.int32, 4)])
def test_pointers_are_int64_running_sums_past_2_to_the_31(dtype, code, tmp_path, monkeypatch):
    out = io.BytesIO()
    write_index(out, dtype, 6, lambda: iter(CHUNKS))
    index = out.getvalue()
    got_code, lengths, pointers, doc_index = parse(index)
    every = np.concatenate(CHUNKS)
    size = np.dtype(dtype).itemsize
    expected = [sum(int(n) for n in every[:i]) * size for i in range(len(every))]
    assert got_code == code and lengths.tolist() == every.tolist()
    assert pointers.tolist() == expected and max(expected) > 2**32
    assert doc_index.tolist() == list(range(7))  # one document per entry
    assert index_entries(index[:34]) == (np.dtype(dtype), 6)

    # megatron-core's own reader of the index agrees.
    megatron_indexed_dataset(monkeypatch)
    from megatron.core.datasets.indexed_dataset import _IndexReader

    path = tmp_path / "big.idx"
    path.write_bytes(index)
    reader = _IndexReader(str(path), multimodal=False)
    assert reader.dtype == dtype and len(reader) == 6
    assert reader.sequence_lengths.tolist() == every.tolist()
    assert reader.sequence_pointers.tolist() == expected
    assert reader.document_indices.tolist() == list(range(7))
    assert reader[5] == (expected[5], 2**30, None)


def test_lengths_that_do_not_match_the_count_or_an_int32_are_refused():
    with pytest.raises(ValueError, match="declared with 3 entries"):
        write_index(io.BytesIO(), np.uint16, 3, lambda: iter([np.array([1, 2])]))
    with pytest.raises(ValueError, match="length must be in"):
        write_index(io.BytesIO(), np.uint16, 1, lambda: iter([np.array([2**31])]))


def test_the_token_dtype_is_the_one_megatron_picks(monkeypatch):
    megatron_indexed_dataset(monkeypatch)
    from megatron.core.datasets.indexed_dataset import DType

    for vocab in (256, 50257, 65499, 65500, 65536, 100_277, 2**31):
        assert megatron_dtype(vocab) == np.dtype(DType.optimal_dtype(vocab)), vocab
