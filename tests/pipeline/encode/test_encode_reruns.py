"""Identical ``encode`` runs on two workers write byte-identical outputs, and the sequences
``pack`` makes depend on the data and the seed alone: not on the run, the shard layout, or
whether pack ran inside ``encode --pack``."""

import hashlib
import json
import pathlib

import pytest

from pipeline import cli
from tests.support.cli import encode_and_pack, pack
from tests.support.outputs import read_packed_parquet
from tests.support.real_text import multilingual
from tests.support.toy_tokenizers import train_small

TWO_WORKERS = ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]
PACK = ["--seed", "5", "--validation-fraction", "0.2", "--targets"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Five JSON Lines files of real text, each with one line that is not JSON (a dead letter)."""
    root = tmp_path_factory.mktemp("corpus")
    texts = multilingual(4)
    tok_path = train_small(texts[:20], vocab_size=450).save(str(root / "tok"))
    for shard in range(5):
        lines = [json.dumps({"text": text}) for text in texts[shard::5]]
        lines.insert(2, "{not json")
        (root / f"part{shard}.jsonl").write_text("\n".join(lines) + "\n")
    return ["--tokenizer", tok_path, "--input", str(root / "part*.jsonl"), "--append-eos"]


def _hashes(directory: pathlib.Path) -> dict[str, str]:
    return {str(f.relative_to(directory)): hashlib.sha256(f.read_bytes()).hexdigest()
            for f in sorted(directory.rglob("*")) if f.is_file()}


def _sequences(directory: pathlib.Path):
    return {split: read_packed_parquet(directory, split) for split in ("train", "validation")}


def test_reruns_on_two_workers_write_identical_files(corpus, tmp_path):
    runs = []
    for run in range(3):
        out = tmp_path / f"run{run}"
        assert cli.main(["encode", *corpus, "--output", str(out), *TWO_WORKERS]) == 0
        runs.append(_hashes(out))
    assert runs[0] == runs[1] == runs[2]
    assert "dead_letters/dead_letters-00000-of-00001.jsonl" in runs[0]
    letters = (tmp_path / "run0" / "dead_letters" / "dead_letters-00000-of-00001.jsonl").read_text().splitlines()
    assert [(pathlib.Path(json.loads(line)["file"]).name, json.loads(line)["record"]) for line in letters] == [
        (f"part{shard}.jsonl", 3) for shard in range(5)]


def test_pack_gives_the_same_sequences_whatever_the_shard_layout_or_the_run(corpus, tmp_path):
    layouts = {"data": [], "three": ["--num-shards", "3"], "eleven": ["--num-shards", "11"]}
    packed = {}
    for name, flags in layouts.items():
        assert cli.main(["encode", *corpus, "--output", str(tmp_path / name), *flags, *TWO_WORKERS]) == 0
        assert pack("--input", str(tmp_path / name), "--seq-len", "48", "--output", str(tmp_path / f"{name}-packed"),
                    *PACK, *TWO_WORKERS) == 0
        packed[name] = _sequences(tmp_path / f"{name}-packed")
    assert len(list((tmp_path / "eleven").glob("part-*.parquet"))) == 11
    assert packed["data"] == packed["three"] == packed["eleven"]
    assert len(packed["data"]["train"]) > 5 and packed["data"]["validation"]
    # encode --pack: the same sequences, on two workers.
    assert encode_and_pack(*corpus, "--output", str(tmp_path / "both"), "--pack", "48", *PACK, *TWO_WORKERS) == 0
    assert _sequences(tmp_path / "both") == packed["data"]
