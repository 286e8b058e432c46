"""beam-bpe on a Spark standalone cluster (a master and a worker, each in its own network
namespace): train, encode, pack and report write DirectRunner's files."""

from __future__ import annotations

import pathlib
import shutil
import uuid

import pytest

from tests.cluster.fixtures import MARKS, beam_bpe
from tests.cluster.outputs import same_files, same_training, write_corpus

pytestmark = MARKS

VOCAB = "600"


@pytest.fixture(scope="module")
def work(spark_cluster):
    """A directory on the cluster's shared storage with the input and DirectRunner's outputs."""
    root = pathlib.Path(spark_cluster["shared_dir"]) / f"test-{uuid.uuid4().hex[:8]}"
    small = write_corpus(root / "small", 1)
    for name, argv in {
        "tok": ["train", "--input", f"{small}/*.jsonl", "--vocab-size", VOCAB],
        "enc": ["encode", "--tokenizer", str(root / "direct-tok"), "--input", f"{small}/*.jsonl"],
        "pack": ["pack", "--input", str(root / "direct-enc"), "--seq-len", "512", "--seed", "3",
                 "--validation-fraction", "0.1"],
        "report": ["report", "--tokenizer", str(root / "direct-tok"), "--input", f"{small}/*.jsonl"],
    }.items():
        code, err = beam_bpe(*argv, "--output", str(root / f"direct-{name}"))
        assert code == 0, err
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_train_on_spark_gives_directrunners_tokenizer_and_word_counts(spark, work):
    out = work / "spark-tok"
    code, err = beam_bpe("train", "--input", f"{work}/small/*.jsonl", "--vocab-size", VOCAB, "--output", str(out),
                         *spark["beam_args"])
    assert code == 0, err
    same_training(out, work / "direct-tok")


def test_encode_on_spark_gives_directrunners_shards_and_stats(spark, work):
    out = work / "spark-enc"
    code, err = beam_bpe("encode", "--tokenizer", str(work / "direct-tok"), "--input", f"{work}/small/*.jsonl",
                         "--output", str(out), *spark["beam_args"])
    assert code == 0, err
    same_files(out, work / "direct-enc")


def test_pack_on_spark_gives_directrunners_sequences_in_order(spark, work):
    out = work / "spark-pack"
    code, err = beam_bpe("pack", "--input", str(work / "direct-enc"), "--seq-len", "512", "--seed", "3",
                         "--validation-fraction", "0.1", "--output", str(out), *spark["beam_args"])
    assert code == 0, err
    same_files(out, work / "direct-pack")


def test_report_on_spark_gives_directrunners_numbers(spark, work):
    out = work / "spark-report"
    code, err = beam_bpe("report", "--tokenizer", str(work / "direct-tok"), "--input", f"{work}/small/*.jsonl",
                         "--output", str(out), *spark["beam_args"])
    assert code == 0, err
    assert (out / "report.json").read_bytes() == (work / "direct-report" / "report.json").read_bytes()
