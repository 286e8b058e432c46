"""The spilled token streams of packing (transforms/pack/spill.py), and what the jobs do with them.

A unit's tokens of each split are written once, in stream order, and read
back by offset; ``beam-bpe pack`` reads every row group of its input once and
leaves no spilled stream behind; ``beam-bpe encode --pack`` is one Beam job.
"""

import collections
import json
import os

import numpy as np
import pytest

from tests.support.cli import IN_MEMORY, encode_and_pack, pack
from tests.support.corpora import write_token_shards
from tests.support.real_text import stdlib_lines
from tests.support.reference_packer import reference_validation
from tests.support.toy_tokenizers import train_small
from transforms.pack.input_shards import Unit
from transforms.pack.sequence_order import ValidationRule
from transforms.pack.spill import SpillReader, spill_path, spill_unit


def random_docs(n=120, seed=4, vocab=1000):
    rng = np.random.default_rng(seed)
    return [(f"doc-{i}", rng.integers(0, vocab, rng.integers(0, 60)).tolist()) for i in range(n)]


def test_a_unit_spills_each_split_as_one_stream_in_order(tmp_path, monkeypatch):
    from transforms.pack import input_shards as pack_input

    monkeypatch.setattr(pack_input, "BATCH_TOKENS", 40)  # many batches per unit, appended to one stream
    docs = random_docs()
    path = write_token_shards(docs, tmp_path / "in", rows_per_group=len(docs))[0]
    rule = ValidationRule.fraction(0.3)
    validation = reference_validation(docs, 0.3)
    documents = spill_unit(Unit(0, path, 0), rule, str(tmp_path / "spill"), np.uint16)
    for split in ("train", "validation"):
        chosen = [(i, t) for i, t in docs if ((i, 0) in validation) == (split == "validation")]
        assert documents.ids[split].to_pylist() == [i for i, _ in chosen]
        assert documents.lengths[split].tolist() == [len(t) for _, t in chosen]
        stream = np.fromfile(spill_path(str(tmp_path / "spill"), split, (0, 0)), np.uint16)
        assert stream.tolist() == [x for _, t in chosen for x in t]
    assert documents.counts().tokens == {s: int(documents.lengths[s].sum()) for s in ("train", "validation")}
    assert sorted(os.listdir(tmp_path / "spill")) == ["train-00000-00000.tokens", "validation-00000-00000.tokens"]


def test_a_retried_spill_writes_the_same_stream(tmp_path):
    docs = random_docs(30)
    path = write_token_shards(docs, tmp_path / "in")[0]
    directory = str(tmp_path / "spill")
    spill_unit(Unit(3, path, 0), None, directory, np.uint32)
    first = (tmp_path / "spill" / "train-00003-00000.tokens").read_bytes()
    spill_unit(Unit(3, path, 0), None, directory, np.uint32)
    assert (tmp_path / "spill" / "train-00003-00000.tokens").read_bytes() == first
    assert os.listdir(tmp_path / "spill") == ["train-00003-00000.tokens"]  # no temporary file left
    assert np.frombuffer(first, np.uint32).tolist() == [x for _, t in docs for x in t]


def test_the_reader_reads_ranges_and_refuses_a_short_stream(tmp_path):
    tokens = np.arange(1000, dtype=np.uint16)
    path = str(tmp_path / "s.tokens")
    tokens.tofile(path)
    reader = SpillReader(np.uint16)
    out = np.zeros(10, np.uint16)
    for offset in (0, 500, 990, 3):  # any order: the file stays open
        reader.read_into(path, offset, out)
        assert out.tolist() == list(range(offset, offset + 10))
    with pytest.raises(RuntimeError, match="shorter"):
        reader.read_into(path, 995, out)
    reader.close()


@pytest.mark.parametrize("chunk", [1, 3, 7, 64, 10_000])
def test_the_reader_gives_reads_back_to_back_in_chunks_of_a_fixed_size(tmp_path, chunk):
    """Reads of any size, from several streams, in any order: the chunks joined are the
    reads joined, every chunk but the last is full, and none is larger."""
    paths = []
    for n, size in enumerate((50, 1, 300)):
        paths.append(str(tmp_path / f"{n}.tokens"))
        (np.arange(size, dtype=np.uint32) + 1000 * n).tofile(paths[-1])
    reads = [(paths[2], 17, 200), (paths[0], 0, 50), (paths[1], 0, 1), (paths[2], 0, 3), (paths[0], 49, 1),
             (paths[2], 250, 50)]
    expected = np.concatenate([np.fromfile(p, np.uint32)[o: o + s] for p, o, s in reads])
    reader = SpillReader(np.uint32)
    chunks = [c.copy() for c in reader.chunks(iter(reads), chunk)]  # each chunk is valid until the next
    reader.close()
    assert np.array_equal(np.concatenate(chunks), expected)
    assert all(len(c) == chunk for c in chunks[:-1]) and 0 < len(chunks[-1]) <= chunk
    assert list(SpillReader(np.uint32).chunks(iter([]), chunk)) == []


def test_pack_reads_every_row_group_once_and_leaves_no_spill(tmp_path, monkeypatch):
    from transforms.pack import spill as pack_spill
    from transforms.pack import shard_units

    reads = collections.Counter()
    real_read = pack_spill.read_batches

    def counted(unit, *args):
        reads[unit.key] += 1
        return real_read(unit, *args)

    monkeypatch.setattr(pack_spill, "read_batches", counted)  # the in-memory runner runs the DoFns here
    docs = random_docs(200)
    paths = write_token_shards(docs, tmp_path / "in", shards=3, rows_per_group=20)
    units = [unit.key for unit in shard_units(paths)]
    assert len(units) > 3
    out = tmp_path / "out"
    for options in (["--validation-fraction", "0.2"], ["--no-split-documents", "--validation-documents", "5"]):
        reads.clear()
        assert pack("--input", str(tmp_path / "in"), "--seq-len", "32", "--output", str(out), "--overwrite",
                    *options, *IN_MEMORY) == 0
        assert sorted(reads) == units and set(reads.values()) == {1}, reads
        assert not (out / ".staging").exists()
        stats = json.loads((out / "stats.json").read_text())
        assert stats["tokens"] == sum(len(t) for _, t in docs)


def test_encode_with_pack_is_one_beam_job(tmp_path, monkeypatch):
    import apache_beam as beam

    jobs = []
    real_run = beam.Pipeline.run

    def counted(self, *args, **kwargs):
        jobs.append(self)
        return real_run(self, *args, **kwargs)

    monkeypatch.setattr(beam.Pipeline, "run", counted)
    lines = stdlib_lines()[:200]
    tok_path = train_small([line.decode() for line in lines], vocab_size=400).save(str(tmp_path / "tok"))
    (tmp_path / "corpus.txt").write_bytes(b"".join(lines))
    out = tmp_path / "packed"
    assert encode_and_pack("--tokenizer", tok_path, "--input", str(tmp_path / "corpus.txt"), "--append-eos",
                           "--output", str(out), "--pack", "32", *IN_MEMORY) == 0
    assert len(jobs) == 1
    stats = json.loads((out / "stats.json").read_text())
    assert stats["tokens"] == stats["encode"]["tokens"] and stats["documents"] == len(lines)
    assert sorted(os.listdir(out)) == [".beam-bpe-output.json", "dead_letters", "stats.json", "train"]


@pytest.mark.parametrize("whole", [False, True], ids=["split", "whole"])
def test_ids_past_uint16_spill_and_pack_whole(tmp_path, whole):
    """A vocabulary past 65536 IDs: the streams hold uint32 tokens, read back exactly."""
    from tests.support.outputs import read_packed_parquet
    from tests.support.reference_packer import reference_pack

    rng = np.random.default_rng(9)
    docs = [(f"d{i}", rng.integers(60_000, 100_000, rng.integers(1, 50)).tolist()) for i in range(80)]
    write_token_shards(docs, tmp_path / "in", shards=2, rows_per_group=15, vocab_size=100_000)
    out = tmp_path / "out"
    options = ["--no-split-documents", "--window-tokens", "300"] if whole else []
    assert pack("--input", str(tmp_path / "in"), "--seq-len", "24", "--output", str(out), "--seed", "5",
                "--validation-fraction", "0.2", *options, *IN_MEMORY) == 0
    expected = reference_pack(docs, 24, split_documents=not whole, seed=5, validation=reference_validation(docs, 0.2),
                              window_tokens=300)
    assert {s: read_packed_parquet(out, s) for s in ("train", "validation")} == expected
    assert max(t for rows in expected.values() for ids, *_ in rows for t in ids) > 65535
