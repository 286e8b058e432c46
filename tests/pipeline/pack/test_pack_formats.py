"""Every output format of ``beam-bpe pack``, read back by its loader's own library and by
an independent reader written here from the format's layout.

- parquet: Hugging Face ``datasets.load_dataset("parquet", data_files=...)``.
- megatron: megatron-core's own ``IndexedDataset`` (imported without PyTorch:
  ``tests.support.loader_libraries`` says how), and a reader written here from
  the layout ``megatron/core/datasets/indexed_dataset.py`` writes
  (``_IndexWriter``: header ``MMIDIDX\\x00\\x00``, version <Q, dtype code <B,
  sequence count <Q, document count <Q, int32 lengths, int64 byte pointers,
  int64 document indices). Whole documents, one entry each, shuffled.
- mds: mosaicml-streaming's own ``StreamingDataset`` (the same way), and a
  reader written here from ``MDSWriter``'s layout.
- llmc: a reader written here from llm.c's ``dev/data/data_common.py``
  (``write_datafile``: 256 int32 header, magic, version, token count; tokens:
  magic 20240520, version 1, uint16, or magic 20240801, version 7, uint32), as
  modded-nanogpt's ``_load_data_shard`` reads it.

The sequence formats must give the same sequences as the Parquet output of the
same run options; Megatron the input's documents, each whole.
"""

import json
import pathlib
import struct

import numpy as np
import pytest

from tests.support.cli import IN_MEMORY, pack
from tests.support.corpora import write_token_shards
from tests.support.loader_libraries import megatron_indexed_dataset, streaming_dataset
from tests.support.outputs import read_packed_parquet
from tests.support.reference_packer import reference_validation
from transforms.pack.sequence_order import Permutation

SEQ_LEN = 48
COMMON = ["--seed", "7", "--validation-fraction", "0.2", "--tokens-per-file", "2000", *IN_MEMORY]
OPTIONS = ["--seq-len", str(SEQ_LEN), *COMMON]
FORMATS = ("parquet", "megatron", "llmc", "mds")


def docs(n=300, vocab=1000):
    rng = np.random.default_rng(5)
    return [(f"d{i}", rng.integers(0, vocab, rng.integers(0, 120)).tolist()) for i in range(n)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("formats")
    write_token_shards(docs(), root / "shards", shards=3, rows_per_group=40, eos_token_id=3)
    for fmt in FORMATS:
        options = COMMON if fmt == "megatron" else OPTIONS  # Megatron packs at training time: no --seq-len
        assert pack("--input", str(root / "shards"), "--output", str(root / fmt), "--format", fmt, *options) == 0
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
    """(dtype, entries as token arrays, document indices) of a .bin/.idx pair, read from the layout."""
    index = pathlib.Path(f"{prefix}.idx").read_bytes()
    dtype, lengths, pointers, doc_index = parse_megatron_index(index)
    data = pathlib.Path(f"{prefix}.bin").read_bytes()
    entries = [np.frombuffer(data, dtype, int(n), int(p)) for n, p in zip(lengths, pointers)]
    assert sum(e.nbytes for e in entries) == len(data)
    return dtype, entries, doc_index


def parse_megatron_index(index: bytes):
    """(dtype, lengths, byte pointers, document indices) of a Megatron .idx."""
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
    return dtype, lengths, pointers, doc_index


def split_documents(split):
    """[tokens] of the documents of a split, in input order (the split computed plainly
    from its definition, ``reference_validation``), empty documents included."""
    validation = {doc_id for doc_id, _ in reference_validation(docs(), fraction=0.2)}
    return [tokens for doc_id, tokens in docs() if (doc_id in validation) == (split == "validation")]


@pytest.mark.parametrize("split", ["train", "validation"])
def test_megatron_is_whole_documents_shuffled_read_back_by_megatron_core(runs, split, monkeypatch):
    IndexedDataset = megatron_indexed_dataset(monkeypatch)
    prefix = runs / "megatron" / split
    dataset = IndexedDataset(str(prefix))
    entries = [dataset[i].tolist() for i in range(len(dataset))]
    dtype, independent, doc_index = read_megatron(prefix)
    assert entries == [e.tolist() for e in independent]  # megatron-core and the layout agree
    assert dtype == np.uint16 and dataset[0].dtype == np.uint16  # Megatron's choice below 65500 IDs
    assert doc_index.tolist() == list(range(len(entries) + 1)) == dataset.document_indices.tolist()

    # One entry per document of the split, whole (as encoded), none dropped, none twice.
    in_order = split_documents(split)
    assert len(entries) == len(in_order) > 0
    assert split == "validation" or [] in in_order  # empty documents too: nothing dropped
    assert sorted(map(tuple, entries)) == sorted(map(tuple, in_order))
    # In the shuffled order: document k of the split (in input order) at position Permutation(k).
    positions = Permutation(len(in_order), 7, f"documents/{split}")(np.arange(len(in_order)))
    assert [entries[p] for p in positions] == in_order
    assert entries != in_order


def test_megatron_order_is_the_same_whatever_the_shards_and_workers(runs, tmp_path):
    """The document order depends on the documents and the seed, not on how they are
    sharded nor on the workers; another seed gives another order."""
    write_token_shards(docs(), tmp_path / "eight", shards=8, rows_per_group=7, eos_token_id=3)
    out = tmp_path / "out"
    assert pack("--input", str(tmp_path / "eight"), "--output", str(out), "--format", "megatron", "--seed", "7",
                "--validation-fraction", "0.2", "--tokens-per-file", "500", "--direct_running_mode=multi_processing",
                "--direct_num_workers=2") == 0
    for name in ("train.bin", "train.idx", "validation.bin", "validation.idx"):
        assert (out / name).read_bytes() == (runs / "megatron" / name).read_bytes(), name
    other = tmp_path / "seed"
    assert pack("--input", str(tmp_path / "eight"), "--output", str(other), "--format", "megatron", "--seed", "8",
                "--validation-fraction", "0.2", *IN_MEMORY) == 0
    assert (other / "train.idx").read_bytes() != (out / "train.idx").read_bytes()
    assert sorted(e.tobytes() for e in read_megatron(other / "train")[1]) == sorted(
        e.tobytes() for e in read_megatron(out / "train")[1])


def test_megatron_written_in_small_chunks_is_the_same_bytes(runs, tmp_path, monkeypatch):
    """A part's tokens go from the spill to its file a chunk at a time, and the join copies
    the parts in pieces: chunks and pieces that cut documents anywhere change no byte."""
    from transforms.pack import megatron_documents

    monkeypatch.setattr(megatron_documents, "CHUNK_TOKENS", 7)
    monkeypatch.setattr(megatron_documents, "_COPY_BYTES", 5)
    out = tmp_path / "out"
    assert pack("--input", str(runs / "shards"), "--output", str(out), "--format", "megatron", *COMMON) == 0
    for name in ("train.bin", "train.idx", "validation.bin", "validation.idx"):
        assert (out / name).read_bytes() == (runs / "megatron" / name).read_bytes(), name


def test_megatron_picks_int32_tokens_for_a_large_vocabulary(tmp_path, monkeypatch):
    IndexedDataset = megatron_indexed_dataset(monkeypatch)
    rng = np.random.default_rng(2)
    large = [(f"d{i}", rng.integers(0, 70_000, rng.integers(1, 50)).tolist()) for i in range(40)]
    write_token_shards(large, tmp_path / "shards", vocab_size=70_000)
    assert pack("--input", str(tmp_path / "shards"), "--output", str(tmp_path / "out"), "--format", "megatron",
                *IN_MEMORY) == 0
    dtype, entries, _ = read_megatron(tmp_path / "out" / "train")
    dataset = IndexedDataset(str(tmp_path / "out" / "train"))
    assert dtype == np.int32 and dataset[0].dtype == np.int32
    assert sorted(map(tuple, (e.tolist() for e in entries))) == sorted(tuple(t) for _, t in large)
    assert not (tmp_path / "out" / "validation.idx").exists()  # a split without documents has no files


def read_llmc(path: pathlib.Path, magic=20240520, version=1, dtype=np.uint16) -> np.ndarray:
    data = path.read_bytes()
    header = np.frombuffer(data, np.int32, 256)
    assert header[0] == magic and header[1] == version and not header[3:].any()
    tokens = np.frombuffer(data, dtype, offset=256 * 4)
    assert len(tokens) == header[2]
    return tokens


@pytest.mark.parametrize("split", ["train", "validation"])
def test_llmc_files_hold_the_same_tokens(runs, split):
    files = sorted((runs / "llmc" / split).glob("*.bin"))
    assert len(files) > 0
    stream = [t for f in files for t in read_llmc(f).tolist()]
    assert stream == real_token_stream(runs / "parquet", split)


def test_llmc_uses_the_uint32_header_above_65536_ids_and_splits_files_before_its_limit(tmp_path, monkeypatch):
    """Magic 20240801, version 7, uint32 tokens for a vocabulary over 65,536; a file
    never holds more tokens than its header can count (the limit made small here)."""
    from transforms.pack import sequence_formats

    rng = np.random.default_rng(3)
    large = [(f"d{i}", rng.integers(0, 100_000, rng.integers(1, 90)).tolist()) for i in range(60)]
    write_token_shards(large, tmp_path / "shards", vocab_size=100_000)
    monkeypatch.setitem(sequence_formats.FILE_TOKEN_LIMITS, "llmc", 100)
    for fmt in ("parquet", "llmc"):
        assert pack("--input", str(tmp_path / "shards"), "--output", str(tmp_path / fmt), "--format", fmt,
                    "--seq-len", "16", "--tokens-per-file", str(1 << 40), *IN_MEMORY) == 0
    files = sorted((tmp_path / "llmc" / "train").glob("*.bin"))
    streams = [read_llmc(f, 20240801, 7, np.uint32) for f in files]
    assert len(files) > 1 and all(len(s) <= 100 for s in streams)
    assert [t for s in streams for t in s.tolist()] == real_token_stream(tmp_path / "parquet", "train")
    assert max(t for s in streams for t in s.tolist()) >= 1 << 16


def read_mds(directory: pathlib.Path):
    """[{column: value}] of a split's MDS dataset, read from the layout: index.json lists
    the shards; a shard is its sample count, uint32 offsets, its JSON config and the
    samples; a sample is the uint32 sizes of its variable columns, then every column."""
    index = json.loads((directory / "index.json").read_text())
    assert index["version"] == 2
    samples = []
    for shard in index["shards"]:
        data = (directory / shard["raw_data"]["basename"]).read_bytes()
        assert len(data) == shard["raw_data"]["bytes"] and shard["format"] == "mds" and shard["compression"] is None
        (count,) = struct.unpack("<I", data[:4])
        offsets = struct.unpack(f"<{count + 1}I", data[4: 8 + 4 * count])
        assert count == shard["samples"] and offsets[-1] == len(data)
        names, encodings, sizes = shard["column_names"], shard["column_encodings"], shard["column_sizes"]
        for begin, end in zip(offsets, offsets[1:]):
            variable = [n for n, size in zip(names, sizes) if size is None]
            var_sizes = dict(zip(variable, struct.unpack(f"<{len(variable)}I", data[begin: begin + 4 * len(variable)])))
            at, sample = begin + 4 * len(variable), {}
            for name, encoding, size in zip(names, encodings, sizes):
                size = var_sizes[name] if size is None else size
                raw = data[at: at + size]
                if encoding == "json":
                    sample[name] = json.loads(raw)
                else:
                    _, dtype, shape = encoding.split(":")
                    sample[name] = np.frombuffer(raw, dtype).reshape(int(shape)).tolist()
                at += size
            assert at == end
            samples.append(sample)
    return samples


@pytest.mark.parametrize("split", ["train", "validation"])
def test_mds_holds_the_parquet_sequences_read_back_by_streaming(runs, split, monkeypatch, tmp_path):
    parquet = read_packed_parquet(runs / "parquet", split)
    independent = read_mds(runs / "mds" / split)
    assert [(s["input_ids"], sum(s["loss_mask"]), s["doc_starts"], s["doc_ids"]) for s in independent] == parquet

    StreamingDataset = streaming_dataset(monkeypatch)
    monkeypatch.chdir(tmp_path)
    dataset = StreamingDataset(local=str(runs / "mds" / split), shuffle=False, batch_size=1)
    assert len(dataset) == len(parquet) > 0
    by_index = [dataset[i] for i in range(len(dataset))]
    assert [(s["input_ids"].tolist(), int(s["loss_mask"].sum()), s["doc_starts"], s["doc_ids"])
            for s in by_index] == parquet
    assert by_index[0]["input_ids"].dtype == np.uint16 and by_index[0]["input_ids"].shape == (SEQ_LEN,)
    assert sorted(s["input_ids"].tolist() for s in dataset) == sorted(ids for ids, _, _, _ in parquet)


def test_stats_agree_across_formats(runs):
    stats = {fmt: json.loads((runs / fmt / "stats.json").read_text()) for fmt in FORMATS}
    for fmt, s in stats.items():
        assert s["format"] == fmt
        assert s["tokens"] == stats["parquet"]["tokens"] == sum(len(t) for _, t in docs())
        assert s["dropped_tokens"] == 0
        assert s["splits"]["validation"]["documents"] == stats["parquet"]["splits"]["validation"]["documents"] > 0
    assert stats["parquet"]["padding_tokens"] > 0 and stats["megatron"]["padding_tokens"] == 0
    assert stats["mds"]["padding_tokens"] == stats["parquet"]["padding_tokens"]
    assert stats["mds"]["sequences"] == stats["parquet"]["sequences"]
    assert stats["megatron"]["sequences"] == stats["megatron"]["documents"] == len(docs())  # an entry per document
    assert stats["megatron"]["seq_len"] is None
    assert stats["megatron"]["splits"]["train"]["files"] == ["train.bin", "train.idx"]
    assert stats["mds"]["splits"]["train"]["files"][-1] == "train/index.json"
    assert sorted(p.name for p in (runs / "megatron").iterdir() if not p.name.startswith(".")) == [
        "stats.json", "train.bin", "train.idx", "validation.bin", "validation.idx"]


@pytest.mark.parametrize("flags", [
    ["--seq-len", "48"], ["--targets"], ["--drop-remainder"], ["--no-split-documents"], ["--window-tokens", "100"],
    ["--pad-id", "0"],
])
def test_megatron_refuses_the_options_of_sequences_in_one_line(runs, tmp_path, capsys, flags):
    out = tmp_path / "out"
    assert pack("--input", str(runs / "shards"), "--output", str(out), "--format", "megatron", *flags, *IN_MEMORY) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"beam-bpe pack: error: {flags[0]}"), err
    assert not out.exists()


@pytest.mark.parametrize("fmt", ["parquet", "llmc", "mds"])
def test_the_sequence_formats_need_a_sequence_length(runs, tmp_path, capsys, fmt):
    assert pack("--input", str(runs / "shards"), "--output", str(tmp_path / "out"), "--format", fmt, *IN_MEMORY) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"beam-bpe pack: error: --seq-len N is required with --format {fmt} (sequences of N tokens); "
                   "only --format megatron writes whole documents"]


def test_encode_with_pack_format_megatron_equals_encode_then_pack(tmp_path, capsys):
    from pipeline import cli
    from tests.support.real_text import stdlib_lines
    from tests.support.toy_tokenizers import train_small

    lines = stdlib_lines()[:300]
    tok_path = train_small([line.decode() for line in lines], vocab_size=420).save(str(tmp_path / "tok"))
    (tmp_path / "corpus.txt").write_bytes(b"".join(lines))
    encode_argv = ["--tokenizer", tok_path, "--input", str(tmp_path / "corpus.txt"), "--append-eos", *IN_MEMORY]
    options = ["--seed", "3", "--validation-documents", "20", *IN_MEMORY]
    assert cli.main(["encode", *encode_argv, "--output", str(tmp_path / "shards")]) == 0
    assert pack("--input", str(tmp_path / "shards"), "--format", "megatron", "--output", str(tmp_path / "two"),
                *options) == 0
    one = tmp_path / "one"
    assert cli.main(["encode", *encode_argv, "--output", str(one), "--pack-format", "megatron", *options]) == 0
    for name in ("train.bin", "train.idx", "validation.bin", "validation.idx"):
        assert (one / name).read_bytes() == (tmp_path / "two" / name).read_bytes(), name
    _, entries, _ = read_megatron(one / "train")
    assert len(entries) == len(lines) - 20 and all(e[-1] == entries[0][-1] for e in entries)  # each ends in EOS
    capsys.readouterr()
    assert cli.main(["encode", *encode_argv, "--output", str(tmp_path / "three"), "--pack-format", "megatron",
                     "--pack", "64"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith(
        "beam-bpe encode: error: --pack: megatron output is whole documents")


def test_mds_refuses_a_sequence_no_shard_can_hold_before_the_job(runs, tmp_path, capsys):
    """An MDS shard's offsets are uint32 bytes: a sequence of 2^31 - 2 uint16 tokens (6 GiB
    with its loss mask) cannot be written; one line, before the job."""
    from transforms.pack.sequence_formats import check_format

    check_format("mds", 1000, 100_000_000)  # 300 MB: fits
    with pytest.raises(ValueError, match="does not fit an MDS shard"):
        check_format("mds", 100_000, 900_000_000)  # 4.5 GB with uint32 tokens
    assert pack("--input", str(runs / "shards"), "--output", str(tmp_path / "out"), "--format", "mds",
                "--seq-len", str(2**31 - 2), *IN_MEMORY) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "does not fit an MDS shard" in err[0], err
