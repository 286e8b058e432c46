"""``beam-bpe train`` under PortableRunner: the same merges as under DirectRunner.

The job goes to Beam's local job service and runs on SDK workers started by an
EXTERNAL worker pool, each in its own process (tests/support/beam_services.py): the
same path a pipeline takes on Flink, Spark or Dataflow.
"""

import os
import pathlib

from tests.support.beam_services import portable_runner_flags  # noqa: F401  (fixture)
from tests.support.cli import IN_MEMORY, train
from tests.support.corpora import write_stdlib_corpus
from tests.support.outputs import merges, stats, word_counts

VOCAB = 400


def test_portable_runner_gives_the_same_table_and_merges(portable_runner_flags, tmp_path):  # noqa: F811
    corpus = write_stdlib_corpus(tmp_path / "corpus")
    direct, portable = str(tmp_path / "direct"), str(tmp_path / "portable")
    assert train("--input", corpus["one"], "--vocab-size", str(VOCAB), "--output", direct, *IN_MEMORY) == 0
    # Sharded jsonl.gz on the portable side: different files, same documents.
    assert train("--input", corpus["jsonl"], "--vocab-size", str(VOCAB), "--output", portable,
                 *portable_runner_flags) == 0
    assert word_counts(portable) == word_counts(direct)
    # Sorted by word bytes: the same file, byte for byte, whatever the runner and the sharding.
    table = os.path.join("{}", "word_counts.parquet")
    assert pathlib.Path(table.format(portable)).read_bytes() == pathlib.Path(table.format(direct)).read_bytes()
    assert merges(portable) == merges(direct)
    s = stats(portable)
    assert s["runner"] == "PortableRunner" and s["dead_letters"] == 0
    assert os.listdir(os.path.join(portable, "dead_letters"))  # the (empty) shards are there
