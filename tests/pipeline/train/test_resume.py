"""``beam-bpe train --resume``: a run stopped during the merges continues where it stopped.

The interrupted runs are real subprocesses (``python -m pipeline.cli train``),
stopped with a real signal while they merge; the resumed run must write exactly
the bytes of an uninterrupted run. The count-phase tests run the real Beam job
in-process.
"""

import json
import os
import pathlib
import random
import shlex
import shutil
import signal
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import bpe
from tests.support.cli import IN_MEMORY, train as train_in_process
from tests.support.interruptible import lowest_priority_and_default_sigint

ROOT = str(pathlib.Path(__file__).resolve().parents[3])
# Enough merges to be stopped in the middle, few enough for CI.
VOCAB = 6000
CHECKPOINT = "merges.checkpoint.json"


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> str:
    """A word-count table of ~50,000 made-up words with English-like letter frequencies
    (made here, so it records no pattern: the runs pass --trust-word-counts)."""
    rng = random.Random(5)
    letters = b"etaoinshrdlucmfwypvbgkqjxz"
    weights = [1 / (i + 1) for i in range(len(letters))]
    counts: dict[bytes, int] = {}
    for _ in range(60000):
        word = bytes(rng.choices(letters, weights, k=rng.randint(2, 12)))
        counts[word] = counts.get(word, 0) + rng.randint(1, 50)
    path = str(tmp_path_factory.mktemp("table") / "word_counts.parquet")
    pq.write_table(pa.table({"word": pa.array(list(counts), pa.binary()), "count": list(counts.values())}), path)
    return path


def command(table: str, output: str, *flags: str) -> list[str]:
    return [
        sys.executable, "-m", "pipeline.cli", "train", "--word-counts", table, "--trust-word-counts", "--output", output,
        "--no-progress", "--checkpoint-every", "0.2", *flags,
    ]


def run(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)


def read_bytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def checkpoint_merges(output: str) -> list | None:
    """The checkpoint's merges; None while there is no (whole) checkpoint."""
    try:
        with open(os.path.join(output, CHECKPOINT), encoding="utf-8") as f:
            return json.load(f)["merges"]
    except (OSError, ValueError):
        return None


def stop_during_merges(argv: list[str], output: str, sig: signal.Signals) -> tuple[subprocess.CompletedProcess, list]:
    """Starts a training run, sends ``sig`` once it has saved some merges, waits for it.

    Returns:
      (the finished process, the merges in the checkpoint it leaves).
    """
    # The pure-Python merge loop, slow enough to be stopped mid-way on this small table; which
    # loop runs never changes the merges (tests/bpe/training/test_merge_loop.py stops the C loop itself).
    # At the lowest priority: on a busy machine (a test run beside a cluster) the loop must not
    # finish while this process waits for a core to see the checkpoint and send the signal.
    process = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True, env={**os.environ, "BEAM_BPE_PURE_PYTHON": "1"},
                               preexec_fn=lowest_priority_and_default_sigint)
    deadline = time.monotonic() + 60
    # Merges in the checkpoint: the merge loop is running (the first checkpoint,
    # written as merging starts, is empty).
    while not checkpoint_merges(output):
        assert process.poll() is None, f"finished before it could be stopped: {process.communicate()}"
        assert time.monotonic() < deadline, "no checkpoint within 60 s"
        time.sleep(0.01)
    process.send_signal(sig)
    stdout, stderr = process.communicate(timeout=60)
    assert "learned" not in stdout, "the run finished before the signal arrived: make the table larger"
    return subprocess.CompletedProcess(argv, process.returncode, stdout, stderr), checkpoint_merges(output)


@pytest.fixture(scope="module")
def uninterrupted_dir(table, tmp_path_factory) -> str:
    """The output directory of a run that nothing stopped."""
    output = str(tmp_path_factory.mktemp("uninterrupted"))
    result = run(command(table, output, "--vocab-size", str(VOCAB)))
    assert result.returncode == 0, result.stderr
    assert not os.path.exists(os.path.join(output, CHECKPOINT))
    return output


@pytest.fixture(scope="module")
def uninterrupted(uninterrupted_dir) -> bytes:
    """tokenizer.json of a run that nothing stopped."""
    return read_bytes(os.path.join(uninterrupted_dir, "tokenizer.json"))


@pytest.mark.parametrize("sig, exit_code", [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGKILL, -9)])
def test_stopped_during_merges_and_resumed_gives_the_same_tokenizer(
    sig, exit_code, table, uninterrupted, uninterrupted_dir, tmp_path
):
    output = str(tmp_path / "out")
    argv = command(table, output, "--vocab-size", str(VOCAB))
    stopped, saved = stop_during_merges(argv, output, sig)
    assert stopped.returncode == exit_code, stopped.stderr
    assert not os.path.exists(os.path.join(output, "tokenizer.json"))
    # The checkpoint is a prefix of the uninterrupted run's merges.
    final = [list(m) for m in bpe.Tokenizer.load(uninterrupted_dir).merges]
    assert 0 < len(saved) < len(final) and final[: len(saved)] == saved

    resumed = run(argv + ["--resume"])
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming after {len(saved):,} merges" in resumed.stderr
    assert read_bytes(os.path.join(output, "tokenizer.json")) == uninterrupted
    # Done: the checkpoint is gone and no temporary file is left behind.
    assert sorted(os.listdir(output)) == [".beam-bpe-output.json", "tokenizer.json", "train_stats.json"]
    with open(os.path.join(output, "train_stats.json"), encoding="utf-8") as f:
        assert json.load(f)["resumed_from_merges"] == len(saved)


def test_sigint_says_where_the_checkpoint_is_and_how_to_resume(table, uninterrupted, tmp_path):
    output = str(tmp_path / "out")
    argv = command(table, output, "--vocab-size", str(VOCAB))
    stopped, saved = stop_during_merges(argv, output, signal.SIGINT)
    assert stopped.returncode == 130
    last_line = stopped.stderr.strip().splitlines()[-1]
    checkpoint = os.path.join(output, CHECKPOINT)
    assert last_line == (
        f"beam-bpe train: interrupted (SIGINT); {len(saved):,} merges are saved in {checkpoint}. "
        f"To resume: {shlex.join(argv + ['--resume'])}"
    )
    assert "Traceback" not in stopped.stderr
    # The printed command is the one to paste: run it as printed.
    resumed = run(shlex.split(last_line.split("To resume: ", 1)[1]))
    assert resumed.returncode == 0, resumed.stderr
    assert read_bytes(os.path.join(output, "tokenizer.json")) == uninterrupted


# --- What --resume accepts and refuses ----------------------------------------


@pytest.fixture(scope="module")
def stopped_smaller_run(table, tmp_path_factory) -> str:
    """An output directory of a run with a smaller vocab size, stopped by SIGINT during the merges."""
    output = str(tmp_path_factory.mktemp("stopped") / "out")
    stopped, _ = stop_during_merges(command(table, output, "--vocab-size", str(VOCAB - 1000)), output, signal.SIGINT)
    assert stopped.returncode == 130, stopped.stderr
    return output


@pytest.fixture
def stopped(stopped_smaller_run, tmp_path) -> str:
    """A copy of ``stopped_smaller_run`` to resume (resuming removes the checkpoint)."""
    return shutil.copytree(stopped_smaller_run, tmp_path / "out")


def test_resume_with_a_larger_vocab_size_continues_the_same_merges(table, stopped, uninterrupted):
    # The first N merges of any run on the table are the same, so a checkpoint
    # made for a smaller vocabulary is a valid start for a larger one.
    assert train_in_process("--word-counts", table, "--trust-word-counts", "--output", str(stopped), "--vocab-size", str(VOCAB),
                            "--resume") == 0
    assert read_bytes(os.path.join(stopped, "tokenizer.json")) == uninterrupted


def test_resume_with_a_vocab_size_below_the_checkpoint_gives_its_prefix(table, stopped, uninterrupted_dir):
    assert len(checkpoint_merges(stopped)) > 44
    assert train_in_process("--word-counts", table, "--trust-word-counts", "--output", str(stopped), "--vocab-size", "300", "--resume") == 0
    assert bpe.Tokenizer.load(str(stopped)).merges == bpe.Tokenizer.load(uninterrupted_dir).merges[:44]


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--min-frequency", "3"], "was made with --min-frequency 2, not 3"),
        (["--pattern", "cl100k"], "was made with --pattern gpt2, not cl100k"),
    ],
)
def test_resume_with_changed_settings_is_refused(table, stopped, flags, message, capsys):
    before = read_bytes(os.path.join(stopped, CHECKPOINT))
    code = train_in_process("--word-counts", table, "--trust-word-counts", "--output", str(stopped), "--vocab-size", str(VOCAB),
                            "--resume", *flags)
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("beam-bpe train: error: cannot --resume: ") and message in err
    assert "run without --resume to start over" in err
    assert read_bytes(os.path.join(stopped, CHECKPOINT)) == before  # left as it was


def test_resume_from_another_table_is_refused(table, stopped, tmp_path, capsys):
    other = str(tmp_path / "other.parquet")
    pq.write_table(pa.table({"word": pa.array([b"hello", b"world"], pa.binary()), "count": [5, 3]}), other)
    code = train_in_process("--word-counts", other, "--trust-word-counts", "--output", str(stopped), "--vocab-size", str(VOCAB), "--resume")
    assert code == 2
    assert "was made with another word-count table" in capsys.readouterr().err



def test_resume_never_replaces_a_finished_tokenizer_of_other_settings(table, uninterrupted_dir, tmp_path, capsys):
    # The checkpoint is gone once a run finishes; its settings are in train_stats.json.
    output = tmp_path / "done"
    shutil.copytree(uninterrupted_dir, output)
    before = read_bytes(str(output / "tokenizer.json"))
    for flags, what in ((["--vocab-size", "5000"], "--vocab-size was 6000, now 5000"),
                        (["--vocab-size", str(VOCAB), "--min-frequency", "3"], "--min-frequency was 2, now 3")):
        capsys.readouterr()
        assert train_in_process("--word-counts", table, "--trust-word-counts", "--output", str(output),
                                "--resume", *flags) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and what in err[0] and "--overwrite" in err[0]
        assert read_bytes(str(output / "tokenizer.json")) == before

@pytest.mark.parametrize("damage", ["truncated", "impossible merge"])
def test_damaged_checkpoint_is_refused_with_one_line(table, stopped, damage, capsys):
    path = os.path.join(stopped, CHECKPOINT)
    text = read_bytes(path)
    if damage == "truncated":
        text = text[: len(text) // 2]
    else:
        data = json.loads(text)
        data["merges"][0] = [97, 300]  # ID 300 does not exist before merge 0
        text = json.dumps(data).encode()
    with open(path, "wb") as f:
        f.write(text)
    code = train_in_process("--word-counts", table, "--trust-word-counts", "--output", str(stopped), "--vocab-size", str(VOCAB), "--resume")
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"beam-bpe train: error: cannot --resume: {path} is damaged")


# --- The count phase and its completion marker ---------------------------------


@pytest.fixture
def corpus(tmp_path) -> str:
    path = tmp_path / "corpus.txt"
    with open(os.path.join(ROOT, "bpe", "training", "trainer.py"), "rb") as f:
        path.write_bytes(f.read())
    return str(path)


def test_completed_count_phase_is_marked_and_not_rerun(corpus, tmp_path, capsys):
    output = str(tmp_path / "out")
    args = ["--input", corpus, "--vocab-size", "400", "--output", output, *IN_MEMORY]
    assert train_in_process(*args) == 0
    capsys.readouterr()
    table = os.path.join(output, "word_counts.parquet")
    with open(os.path.join(output, "word_counts.complete"), encoding="utf-8") as f:
        marker = json.load(f)
    assert marker["table"]["rows"] == pq.read_metadata(table).num_rows
    assert marker["table"]["bytes"] == os.path.getsize(table)
    first_tokenizer = read_bytes(os.path.join(output, "tokenizer.json"))
    with open(os.path.join(output, "train_stats.json"), encoding="utf-8") as f:
        first_stats = json.load(f)
    table_mtime = os.stat(table).st_mtime_ns

    assert train_in_process(*args, "--resume") == 0
    captured = capsys.readouterr()
    assert "the count phase is complete" in captured.err
    assert "no checkpoint" in captured.err and "starting the merges from zero" in captured.err
    assert os.stat(table).st_mtime_ns == table_mtime  # Beam did not write it again
    assert read_bytes(os.path.join(output, "tokenizer.json")) == first_tokenizer
    with open(os.path.join(output, "train_stats.json"), encoding="utf-8") as f:
        stats = json.load(f)
    # The count phase's numbers come from the marker.
    for key in ("documents", "bytes", "pieces", "unique_pieces", "runner", "dead_letters"):
        assert stats[key] == first_stats[key], key
    assert "counted" in captured.err  # the summary still reports the count (on stderr, as every summary)


def test_count_phase_without_marker_is_counted_again(corpus, tmp_path, capsys):
    output = str(tmp_path / "out")
    args = ["--input", corpus, "--vocab-size", "300", "--output", output, *IN_MEMORY]
    assert train_in_process(*args) == 0
    os.remove(os.path.join(output, "word_counts.complete"))  # as if stopped before the marker
    capsys.readouterr()
    assert train_in_process(*args, "--resume") == 0
    assert "no complete count phase" in capsys.readouterr().err
    assert os.path.exists(os.path.join(output, "word_counts.complete"))


def test_count_phase_with_other_settings_is_refused(corpus, tmp_path, capsys):
    output = str(tmp_path / "out")
    args = ["--input", corpus, "--vocab-size", "300", "--output", output, *IN_MEMORY]
    assert train_in_process(*args) == 0
    capsys.readouterr()
    assert train_in_process(*args, "--resume", "--min-word-count", "2") == 2
    assert capsys.readouterr().err.strip() == (
        f"beam-bpe train: error: cannot --resume: the count phase in {output} was run with other settings "
        "(--min-word-count was 1, now 2); run without --resume to start over"
    )


def test_checkpoint_every_must_be_a_number(table, tmp_path, capsys):
    for value in ("soon", "-1", "nan"):
        code = train_in_process("--word-counts", table, "--trust-word-counts", "--output", str(tmp_path), "--vocab-size", "300",
                                "--checkpoint-every", value)
        assert code == 2
        assert "--checkpoint-every must be a number of seconds" in capsys.readouterr().err


def test_an_input_rewritten_under_the_same_name_is_not_resumed_on_old_counts(corpus, tmp_path, capsys):
    output = str(tmp_path / "out")
    args = ["--input", corpus, "--vocab-size", "300", "--output", output, *IN_MEMORY]
    assert train_in_process(*args) == 0
    with open(corpus, "rb") as f:
        data = f.read()
    stat = os.stat(corpus)
    with open(corpus, "wb") as f:  # same name, same size, other words
        f.write(data.swapcase())
    os.utime(corpus, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    capsys.readouterr()
    assert train_in_process(*args, "--resume") == 2
    assert capsys.readouterr().err.strip() == (
        f"beam-bpe train: error: cannot --resume: {corpus} changed since the count (size {stat.st_size} -> "
        f"{stat.st_size}, modified {stat.st_mtime_ns} -> {stat.st_mtime_ns + 10**9}); "
        "run without --resume to count the corpus again"
    )
    assert train_in_process(*args, "--overwrite") == 0  # counting again: the new words
    with open(os.path.join(output, "train_stats.json"), encoding="utf-8") as f:
        assert json.load(f)["resumed_from_merges"] == 0
    table = pq.read_table(os.path.join(output, "word_counts.parquet"))
    assert any(b"IMPORT" in word for word in table.column("word").to_pylist())


@pytest.mark.parametrize("edit", [
    lambda m: {**m, "settings": ["not", "an", "object"]},
    lambda m: {**m, "stats": {**m["stats"], "documents": "many"}},
    lambda m: {**m, "stats": {k: v for k, v in m["stats"].items() if k != "seconds"}},
    lambda m: {k: v for k, v in m.items() if k != "inputs"},
    lambda m: {**m, "table": None},
])
def test_a_hand_edited_count_marker_means_counting_again(corpus, tmp_path, capsys, edit):
    output = str(tmp_path / "out")
    args = ["--input", corpus, "--vocab-size", "300", "--output", output, *IN_MEMORY]
    assert train_in_process(*args) == 0
    path = os.path.join(output, "word_counts.complete")
    with open(path, encoding="utf-8") as f:
        marker = json.load(f)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(edit(marker), f)
    capsys.readouterr()
    assert train_in_process(*args, "--resume") == 0
    assert f"beam-bpe train: {path} is damaged (" in capsys.readouterr().err
    with open(path, encoding="utf-8") as f:
        again = json.load(f)  # written anew by the recount
    assert again["settings"] == marker["settings"] and again["stats"]["documents"] == marker["stats"]["documents"]
