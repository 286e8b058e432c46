"""The switch of the start-up machinery (pipeline.runtime.facade): with BEAM_BPE_PLAIN_BEAM=1 a
command runs on plain Beam, and train and encode write the same outputs as with the machinery on.

Real command lines (``python -m pipeline.cli``, as a user runs them), on the multi-process
DirectRunner: with the machinery on they fork warm workers and end with ``os._exit``; with it
off they run Beam's own FnApiRunner and workers.
"""

import json
import os
import pathlib
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from pipeline.runtime import PLAIN_BEAM_VARIABLE
from tests.support.corpora import write_stdlib_corpus
from tests.support.outputs import read_rows, word_counts

ROOT = str(pathlib.Path(__file__).resolve().parents[3])
WORKERS = ("--direct_running_mode=multi_processing", "--direct_num_workers=2")


def _beam_bpe(plain: bool, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": ROOT}
    env.pop(PLAIN_BEAM_VARIABLE, None)
    if plain:
        env[PLAIN_BEAM_VARIABLE] = "1"
    proc = subprocess.run([sys.executable, "-m", "pipeline.cli", *argv, "--no-progress", *WORKERS], env=env,
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """train then encode, each once with the machinery on and once with it off: {plain: (train dir, encode dir)}."""
    root = tmp_path_factory.mktemp("plain_beam")
    corpus = write_stdlib_corpus(root / "corpus")
    outputs = {}
    for plain in (False, True):
        trained, encoded = root / f"train-{plain}", root / f"encode-{plain}"
        _beam_bpe(plain, "train", "--input", corpus["jsonl"], "--vocab-size", "400", "--special-token",
                  "<|endoftext|>", "--output", str(trained))
        _beam_bpe(plain, "encode", "--tokenizer", str(root / "train-False"), "--input", corpus["jsonl"],
                  "--output", str(encoded), "--append-eos", "--num-shards", "3", "--verify-fraction", "0.05")
        outputs[plain] = (trained, encoded)
    return outputs


def test_train_writes_the_same_word_counts_and_tokenizer_on_plain_beam(runs):
    (on, _), (plain, _) = runs[False], runs[True]
    # The table's rows, in any order (the sink's shards may come in another order from run to run).
    assert pq.read_schema(plain / "word_counts.parquet").equals(pq.read_schema(on / "word_counts.parquet"))
    counts_on = word_counts(on)
    assert counts_on and word_counts(plain) == counts_on
    assert (plain / "tokenizer.json").read_bytes() == (on / "tokenizer.json").read_bytes()


def test_encode_writes_the_same_shard_rows_on_plain_beam(runs):
    (_, on), (_, plain) = runs[False], runs[True]
    # Every row, by its id (Beam's sink spreads the rows over the shards at random, on any runner).
    rows_on = sorted(read_rows(on))
    assert rows_on and all(tokens for _, tokens in rows_on)
    assert sorted(read_rows(plain)) == rows_on
    assert json.loads((plain / "stats.json").read_bytes()) == json.loads((on / "stats.json").read_bytes())


def test_the_switch_reads_the_environment(monkeypatch):
    from pipeline import runtime

    monkeypatch.delenv(PLAIN_BEAM_VARIABLE, raising=False)
    assert runtime.is_on()
    for value, on in (("1", False), ("yes", False), ("0", True), ("", True)):
        monkeypatch.setenv(PLAIN_BEAM_VARIABLE, value)
        assert runtime.is_on() is on, value


def test_plain_beam_runs_beams_own_runner_and_workers(monkeypatch):
    from apache_beam.runners.portability.fn_api_runner import fn_runner

    from pipeline import runtime
    from pipeline.command_machinery.runners import pipeline_options

    options = pipeline_options(list(WORKERS))
    monkeypatch.setenv(PLAIN_BEAM_VARIABLE, "1")
    plain = runtime.new_pipeline(options).runner
    assert type(plain) is fn_runner.FnApiRunner and not hasattr(plain, "watch_counters")
    monkeypatch.delenv(PLAIN_BEAM_VARIABLE)
    ours = runtime.new_pipeline(options).runner
    assert type(ours) is not fn_runner.FnApiRunner and isinstance(ours, fn_runner.FnApiRunner)
    assert hasattr(ours, "watch_counters")
