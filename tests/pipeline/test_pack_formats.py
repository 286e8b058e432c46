"""Every output format of ``beam-bpe pack``, read back by an independent reader.

- parquet: Hugging Face ``datasets.load_dataset("parquet", data_files=...)``.
- megatron: a reader written here from the layout Megatron-LM's
  ``megatron/core/datasets/indexed_dataset.py`` reads (``_IndexReader``: header
  ``MMIDIDX\\x00\\x00``, version <Q, dtype code <B, sequence count <Q, document
  count <Q, int32 lengths, int64 byte pointers, int64 document indices).
  megatron-core itself is not used: it imports torch.
- llmc: a reader written here from llm.c's ``dev/data/data_common.py``
  (``write_datafile``: 256 int32 header, magic 20240520, version 1, token
  count; uint16 tokens), as modded-nanogpt's ``_load_data_shard`` reads it.

Each must give the same tokens as the Parquet output of the same run options.
"""

import json
import pathlib
import struct

import numpy as np
import pytest

from tests.support.cli import IN_MEMORY, pack
from tests.support.corpora import write_token_shards
from tests.support.outputs import read_packed_parquet

SEQ_LEN = 48
OPTIONS = ["--seq-len", str(SEQ_LEN), "--seed", "7", "--validation-fraction", "0.2", "--tokens-per-file", "2000",
           *IN_MEMORY]


def docs(n=300, vocab=1000):
    rng = np.random.default_rng(5)
    return [(f"d{i}", rng.integers(0, vocab, rng.integers(0, 120)).tolist()) for i in range(n)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("formats")
    write_token_shards(docs(), root / "shards", shards=3, rows_per_group=40, eos_token_id=3)
    for fmt in ("parquet", "megatron", "llmc"):
        assert pack("--input", str(root / "shards"), "--output", str(root / fmt), "--format", fmt, *OPTIONS) == 0
    return root


def real_token_stream(out, split):
    """The real tokens of a split's Parquet sequences, in order."""
    return [t for ids, real, _, _ in read_packed_parquet(out, split) for t in ids[:real]]


def pieces(out, split):
    """Every piece of a document (its tokens), sequence after sequence."""
    result = []
    for ids, real, starts, _ in read_packed_parquet(out, split):
        ends = starts[1:] + [real]
        result += [ids[a:b] for a, b in zip(starts, ends)]
    return result


def test_parquet_loads_with_hugging_face_datasets(runs, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import datasets

    out = runs / "parquet"
    loaded = datasets.load_dataset(
        "parquet",
        data_files={split: str(out / split / "*.parquet") for split in ("train", "validation")},
        cache_dir=str(tmp_path / "hf-cache"),
    )
    for split in ("train", "validation"):
        rows = read_packed_parquet(out, split)
        assert len(loaded[split]) == len(rows) > 0
        assert loaded[split]["input_ids"] == [ids for ids, _, _, _ in rows]
        assert [sum(m) for m in loaded[split]["loss_mask"]] == [real for _, real, _, _ in rows]
        assert loaded[split]["doc_ids"] == [d for _, _, _, d in rows]
        assert all(len(ids) == SEQ_LEN for ids in loaded[split]["input_ids"])
    # A training loop takes batches as arrays directly.
    batch = loaded["train"].with_format("numpy")[:4]["input_ids"]
    assert batch.shape == (4, SEQ_LEN)
    feature = loaded["train"].features["input_ids"]
    assert feature.length == SEQ_LEN and feature.feature.dtype == "uint16"


def read_megatron(prefix: pathlib.Path):
    """(dtype, entries as token arrays, document indices) of a .bin/.idx pair."""
    index = (prefix.parent / (prefix.name + ".idx")).read_bytes()
    assert index[:9] == b"MMIDIDX\x00\x00"
    (version,) = struct.unpack("<Q", index[9:17])
    (code,) = struct.unpack("<B", index[17:18])
    sequences, documents = struct.unpack("<QQ", index[18:34])
    assert version == 1
    dtype = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64, 7: np.float32,
             8: np.uint16}[code]
    offset = 34
    lengths = np.frombuffer(index, np.int32, sequences, offset)
    pointers = np.frombuffer(index, np.int64, sequences, offset + lengths.nbytes)
    doc_index = np.frombuffer(index, np.int64, documents, offset + lengths.nbytes + pointers.nbytes)
    assert len(index) == offset + lengths.nbytes + pointers.nbytes + doc_index.nbytes
    data = (prefix.parent / (prefix.name + ".bin")).read_bytes()
    entries = [np.frombuffer(data, dtype, int(n), int(p)) for n, p in zip(lengths, pointers)]
    assert sum(e.nbytes for e in entries) == len(data)
    return dtype, entries, doc_index


@pytest.mark.parametrize("split", ["train", "validation"])
def test_megatron_indexed_dataset_holds_the_same_tokens(runs, split):
    files = sorted((runs / "megatron" / split).glob("*.idx"))
    assert len(files) == len(list((runs / "parquet" / split).glob("*.parquet"))) > 0
    stream, entries_all = [], []
    for idx in files:
        dtype, entries, doc_index = read_megatron(idx.with_suffix(""))
        assert dtype == np.uint16  # Megatron's choice for a vocabulary below 65500
        assert doc_index.tolist() == list(range(len(entries) + 1))  # one document per entry
        entries_all += [e.tolist() for e in entries]
        stream += [t for e in entries for t in e.tolist()]
    assert stream == real_token_stream(runs / "parquet", split)
    assert entries_all == pieces(runs / "parquet", split)


def read_llmc(path: pathlib.Path) -> np.ndarray:
    data = path.read_bytes()
    header = np.frombuffer(data, np.int32, 256)
    assert header[0] == 20240520 and header[1] == 1 and not header[3:].any()
    tokens = np.frombuffer(data, np.uint16, offset=256 * 4)
    assert len(tokens) == header[2]
    return tokens


@pytest.mark.parametrize("split", ["train", "validation"])
def test_llmc_files_hold_the_same_tokens(runs, split):
    files = sorted((runs / "llmc" / split).glob("*.bin"))
    assert len(files) > 0
    stream = [t for f in files for t in read_llmc(f).tolist()]
    assert stream == real_token_stream(runs / "parquet", split)


def test_stats_agree_across_formats(runs):
    stats = {fmt: json.loads((runs / fmt / "stats.json").read_text()) for fmt in ("parquet", "megatron", "llmc")}
    for fmt, s in stats.items():
        assert s["format"] == fmt
        assert s["tokens"] == stats["parquet"]["tokens"] == sum(len(t) for _, t in docs())
        assert s["splits"]["validation"]["documents"] == stats["parquet"]["splits"]["validation"]["documents"] > 0
    assert stats["parquet"]["padding_tokens"] > 0 and stats["megatron"]["padding_tokens"] == 0
    assert stats["megatron"]["splits"]["train"]["files"][0].endswith(".bin")
    assert stats["megatron"]["splits"]["train"]["files"][1].endswith(".idx")
