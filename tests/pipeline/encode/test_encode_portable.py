"""``beam-bpe encode`` on PortableRunner (job service + EXTERNAL workers) gives the DirectRunner's rows."""

import gzip
import json
from collections import Counter

import pyarrow.parquet as pq

import bpe
from bpe.pretokenize import PreTokenizer
from pipeline import cli
from tests.support.beam_services import portable_runner_flags  # noqa: F401  (the fixture)
from tests.support.real_text import multilingual


def rows(out):
    table = pq.read_table(sorted(out.glob("part-*.parquet")))
    return sorted(zip(table.column("id").to_pylist(), table.column("tokens").to_pylist()))


def test_portable_runner_gives_the_same_shards(tmp_path, portable_runner_flags):  # noqa: F811
    counts = Counter()
    pre = PreTokenizer("gpt2")
    docs = multilingual(1)
    for doc in docs:
        counts.update(pre.split(doc))
    tok_path = bpe.train(counts, vocab_size=400, special_tokens=("<|endoftext|>",)).save(str(tmp_path / "tok"))
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for shard in range(2):
        lines = "".join(json.dumps({"text": t}) + "\n" for t in docs[shard::2]) + "[1, 2]\n"
        (corpus / f"part-{shard}.jsonl.gz").write_bytes(gzip.compress(lines.encode()))
    (corpus / "raw.txt").write_bytes(b"caf\xe9 \xff\nline two\n")
    common = ["encode", "--tokenizer", tok_path, "--input", str(corpus / "*"), "--append-eos"]
    direct, portable = tmp_path / "direct", tmp_path / "portable"
    assert cli.main([*common, "--output", str(direct), "--direct_running_mode=in_memory", "--direct_num_workers=1"]) == 0
    assert cli.main([*common, "--output", str(portable), *portable_runner_flags]) == 0
    assert rows(portable) == rows(direct)
    stats = [json.loads((out / "stats.json").read_text()) for out in (direct, portable)]
    for s in stats:
        del s["shards"]  # the runner picks the shard count
    assert stats[0] == stats[1]
    assert stats[1]["dead_letters"] == 2 and stats[1]["documents"] == len(docs) + 2
