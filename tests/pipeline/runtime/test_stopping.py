"""Stopping a running job: SIGINT and SIGTERM end it promptly, with one line, and a rerun succeeds;
so does a worker process killed by a signal.

Real subprocesses on the multi-process DirectRunner (several worker processes,
as in real use), stopped while their Beam job runs. Each must exit with
128 + the signal, print one line saying what was kept and what to do, leave
no worker process behind, and leave nothing a rerun does not remove.
"""

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

import bpe
from pipeline.train.resume import COUNT_MARKER_FILE
from tests.support.cli import IN_MEMORY
from tests.support.corpora import write_line_shards
from tests.support.outputs import read_rows
from tests.support.real_text import multilingual
from tests.support.toy_tokenizers import train_small

REPO = pathlib.Path(__file__).resolve().parents[3]
BEAM_BPE = [sys.executable, "-m", "pipeline.cli"]
LINES = 20_000  # enough work that the job still runs when it is stopped
# A hang guard, not a timing assert: a stopped job that does not exit fails the test.
HANG = 60


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return train_small(multilingual(1), vocab_size=400).save(str(tmp_path_factory.mktemp("tok")))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> pathlib.Path:
    root = tmp_path_factory.mktemp("corpus")
    write_line_shards(root, LINES)
    return root


@pytest.fixture(scope="module")
def long_corpus(tmp_path_factory) -> pathlib.Path:
    """Ten times ``corpus``: a count that lasts a few seconds, so a stop lands within it."""
    root = tmp_path_factory.mktemp("long_corpus")
    write_line_shards(root, 10 * LINES)
    return root


def cpu_seconds(pids) -> float:
    """The CPU time the processes have used so far (0 for one that has gone)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                total += sum(int(v) for v in f.read().rsplit(")", 1)[1].split()[11:13])
        except OSError:
            continue
    return total / os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    """The processes below ``pid`` (the runner starts each worker through a shell)."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parents.setdefault(int(f.read().rsplit(")", 1)[1].split()[1]), []).append(int(entry))
            except OSError:
                continue
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def ended(pids, within: float = 10.0) -> bool:
    """Whether every process is gone (or a zombie) within ``within`` seconds: a SIGKILLed
    process takes a moment to end on a loaded machine."""
    deadline = time.monotonic() + within
    while any(alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def stop_while_running(argv, started, signum, whole_group=False, to_a_worker=False, on_start=None):
    """Starts ``argv``, waits until ``started()`` and the workers exist, sends ``signum``
    (to the command, to every process of it, or to one of its workers). ``on_start`` is
    given the command's process ID as it starts.

    Returns (exit code, stderr lines, the worker processes seen).
    """
    proc = subprocess.Popen(argv, cwd=REPO, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    if on_start is not None:
        on_start(proc.pid)
    try:
        deadline = time.monotonic() + 120
        workers = []
        while not (started() and workers):
            assert proc.poll() is None, f"ended before it could be stopped: {proc.stderr.read()}"
            assert time.monotonic() < deadline, "the job did not start"
            workers = descendants(proc.pid)
            time.sleep(0.02)
        if whole_group:
            os.killpg(proc.pid, signum)  # Ctrl-C in a terminal: every process of the job gets it
        elif to_a_worker:
            os.kill(workers[0], signum)  # e.g. the kernel's out-of-memory killer
        else:
            os.kill(proc.pid, signum)
        code = proc.wait(timeout=HANG)
        err = proc.stderr.read().splitlines()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        proc.stderr.close()
    return code, err, workers


def encode_argv(tokenizer, corpus, out, *flags):
    return [*BEAM_BPE, "encode", "--tokenizer", tokenizer, "--input", str(corpus / "in-*.txt"), "--output", str(out),
            "--no-progress", *flags]


@pytest.mark.parametrize("signum, whole_group", [(signal.SIGINT, False), (signal.SIGTERM, False),
                                                 (signal.SIGINT, True)])
def test_a_stopped_encode_exits_at_once_and_a_rerun_completes(tokenizer, corpus, tmp_path, signum, whole_group):
    out = tmp_path / "out"
    code, err, workers = stop_while_running(
        encode_argv(tokenizer, corpus, out, "--direct_num_workers=2"),
        lambda: bool(list(out.glob(".staging/beam-temp-part-*/*"))), signum, whole_group)
    assert code == 128 + signum
    assert err[0].startswith("beam-bpe encode: engine ")  # printed before the job started
    assert err[1:] == [f"beam-bpe encode: stopped by {signal.Signals(signum).name}; nothing of this run is in {out} yet "
                   f"(its leftovers in {out}/.staging are removed by the next run): rerun the same command"]
    assert ended(workers)
    assert not (out / "stats.json").exists() and not (out / ".beam-bpe.lock").exists()

    rerun = subprocess.run(encode_argv(tokenizer, corpus, out, *IN_MEMORY), cwd=REPO, capture_output=True,
                           text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    stats = json.loads((out / "stats.json").read_text())
    assert stats["documents"] == len(read_rows(out)) == LINES
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [".beam-bpe-output.json", "dead_letters", "stats.json", *stats["shards"]])


def test_a_worker_killed_during_encode_ends_it_with_one_line_and_a_rerun_completes(tokenizer, corpus, tmp_path):
    out = tmp_path / "out"
    code, err, workers = stop_while_running(
        encode_argv(tokenizer, corpus, out, "--direct_num_workers=2"),
        lambda: bool(list(out.glob(".staging/beam-temp-part-*/*"))), signal.SIGKILL, to_a_worker=True)
    assert code == 1
    assert err[1:] == [f"beam-bpe encode: a worker process of the job was killed by SIGKILL (the kernel's out-of-memory "
                       "killer sends it when memory runs out (see dmesg); fewer workers (--direct_num_workers) need "
                       f"less); nothing of this run is in {out} yet (its leftovers in {out}/.staging are removed by "
                       "the next run): rerun the same command"]
    assert ended(workers)
    assert not (out / "stats.json").exists() and not (out / ".beam-bpe.lock").exists()

    rerun = subprocess.run(encode_argv(tokenizer, corpus, out, *IN_MEMORY), cwd=REPO, capture_output=True,
                           text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert json.loads((out / "stats.json").read_text())["documents"] == LINES


# A command line whose worker is killed by a signal, as the runner's threads then report it:
# an error logged, or a thread's exception. Whichever comes first must say it in one line.
KILLED_CHILD = """
import logging, os, signal, sys, threading
from pipeline.runtime import stopping
logging.basicConfig()
stopping.watch_workers("pack")
child = os.fork()
if child == 0:
    os.kill(os.getpid(), signal.SIGBUS)
os.waitid(os.P_PID, child, os.WEXITED | os.WNOWAIT)  # ended, not reaped: as the runner's thread finds it
if sys.argv[1] == "log":
    logging.getLogger("apache_beam.runners.worker.data_plane").error("Failed to read inputs in the data plane.")
else:
    threading.Thread(target=lambda: 1 / 0).start()
    threading.Event().wait(30)
print("not reached")
"""


@pytest.mark.parametrize("report", ["log", "thread"])
def test_the_first_report_of_a_killed_worker_is_one_line(report):
    result = subprocess.run([sys.executable, "-c", KILLED_CHILD, report], cwd=REPO, capture_output=True, text=True,
                            timeout=HANG)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        "beam-bpe pack: a worker process of the job was killed by SIGBUS (an input file read memory-mapped was "
        "truncated while the job read it); nothing more was written: rerun the same command (it removes the "
        "leftovers of this run)"]


def test_sigterm_during_the_count_leaves_nothing_a_rerun_keeps(long_corpus, tmp_path):
    out = tmp_path / "tok"
    # A pattern of its own: counted by the regex engine, several times slower than gigatoken's
    # counter, so the count lasts long enough to be stopped on any machine.
    argv = [*BEAM_BPE, "train", "--no-progress", "--input", str(long_corpus / "in-*.txt"), "--vocab-size", "300",
            "--pattern", r"\p{L}+|\p{N}+|[^\s\p{L}\p{N}]+|\s+", "--output", str(out)]
    pid: list[int] = []

    def counting() -> bool:
        # The workers are made before the job and wait idle until it runs: once they have used a
        # second of CPU, the count is under way (a file on disk would appear only at its very end).
        return bool(pid) and cpu_seconds(descendants(pid[0])) > 1.0

    code, err, workers = stop_while_running(
        [*argv, "--direct_num_workers=2"], counting, signal.SIGTERM, on_start=pid.append)
    assert code == 143
    assert err == [f"beam-bpe train: stopped by SIGTERM; no counts are kept in {out} (the next run removes the "
                   "leftovers): rerun the same command, with or without --resume, to count again"]
    assert ended(workers)
    # The stop lands during the count: whatever it left (Beam's temporary files, or a table
    # written just before), never the marker that keeps a count, nor a tokenizer.
    assert not (out / COUNT_MARKER_FILE).exists() and not (out / "tokenizer.json").exists()

    rerun = subprocess.run([*argv, "--resume", *IN_MEMORY], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert f"beam-bpe train: no complete count phase in {out}; counting" in rerun.stderr.splitlines()
    assert not list(out.glob("**/beam-temp-*"))  # Beam's leftovers, removed by the rerun
    assert json.loads((out / "train_stats.json").read_text())["documents"] == 10 * LINES
    assert bpe.Tokenizer.load(str(out)).vocab_size == 300
