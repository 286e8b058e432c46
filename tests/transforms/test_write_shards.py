"""WriteTokenShards on two workers: the same bytes on every run, rows in input order,
whatever the number of shards."""

import hashlib
import json
import pathlib

import pyarrow.parquet as pq
import pytest
from apache_beam.testing.test_pipeline import TestPipeline

import bpe
from tests.support.real_text import multilingual
from tests.support.toy_tokenizers import train_small
from transforms.encode import EncodeDocuments
from transforms.read import ReadDocuments
from transforms.shards import INPUT_BYTES_KEY
from transforms.write_shards import WriteTokenShards

TWO_WORKERS = ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Three JSON Lines files; the biggest is read in several pieces (split_bytes below)."""
    root = tmp_path_factory.mktemp("corpus")
    texts = multilingual(3)
    tok = train_small(texts[:20], vocab_size=400)
    path = tok.save(str(root / "tok"))
    order = []
    for name, part in (("b.jsonl", texts[:30]), ("a.jsonl", texts[30:36]), ("c.jsonl", texts[36:40])):
        lines = [json.dumps({"text": text, "id": f"{name}-{i}"}) for i, text in enumerate(part)]
        (root / name).write_text("\n".join(lines) + "\n")
        order.append((name, len(part)))
    expected = [f"{name}-{i}" for name, count in sorted(order) for i in range(count)]
    return root, bpe.Tokenizer.load(path), path, expected


def _write(corpus, out, **shard_args):
    root, tok, path, _ = corpus
    with TestPipeline(argv=TWO_WORKERS) as p:
        documents = (p | ReadDocuments([str(root / "*.jsonl")], id_field="id", split_bytes=4000)).documents
        rows = documents | EncodeDocuments(path, tok.prove())
        _ = rows | WriteTokenShards(str(out), tok.sha256, tok.vocab_size, row_group_tokens=200, run_tokens=900,
                                    small_shard_tokens=1500, **shard_args)
    files = sorted(pathlib.Path(out).iterdir())
    return files, {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in files}


def _ids(files):
    return [i for f in files for i in pq.read_table(f).column("id").to_pylist()]


def test_reruns_write_the_same_bytes_with_rows_in_input_order(corpus, tmp_path):
    _, tok, _, expected = corpus
    files, first = _write(corpus, tmp_path / "one")
    assert len(files) > 2 and [f.name for f in files] == [f"part-{i:05d}-of-{len(files):05d}.parquet"
                                                        for i in range(len(files))]
    assert _ids(files) == expected
    # Runs of a split file are cut at 900 tokens, row groups at 200; small runs are combined.
    groups = [pq.ParquetFile(f).metadata.num_row_groups for f in files]
    assert max(groups) > 1
    for run in ("two", "three"):
        assert _write(corpus, tmp_path / run)[1] == first
    assert sum(int(pq.ParquetFile(f).metadata.metadata[INPUT_BYTES_KEY]) for f in files) == sum(
        len(json.loads(line)["text"].encode()) for f in corpus[0].glob("*.jsonl")
        for line in f.read_text().split("\n") if line)
    assert not [p for p in tmp_path.glob("*/beam-temp-*")]


@pytest.mark.parametrize("num_shards", [1, 4, 40])
def test_a_number_of_shards_keeps_the_input_order(corpus, tmp_path, num_shards):
    files, hashes = _write(corpus, tmp_path / "out", num_shards=num_shards)
    assert [f.name for f in files] == [f"part-{i:05d}-of-{num_shards:05d}.parquet" for i in range(num_shards)]
    assert _ids(files) == corpus[3]
    assert _write(corpus, tmp_path / "again", num_shards=num_shards)[1] == hashes
