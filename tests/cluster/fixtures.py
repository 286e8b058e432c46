"""Pytest fixtures for the cluster tests: one cluster per pytest run.

    flink_cluster   `python -m tests.cluster up --engine flink` once, `down` after the last test
    spark_cluster   the same with Spark
    beam_bpe(...)   a beam-bpe command in its own process; (exit code, stderr)

The tests that use them are marked ``cluster`` (deselect with ``-m 'not cluster'``) and form one
xdist group (``--dist loadgroup``), so one worker runs them all, one after the other, on one
cluster. The state directory is BEAM_BPE_CLUSTER_DIR, by default /var/tmp/beam-bpe-cluster: what
it installs (Flink, Spark, the job-server jars) stays there for the next run. Without root
(network namespaces need it) the tests are skipped.
"""

from __future__ import annotations

import fcntl
import json
import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
STATE_DIR = os.environ.get("BEAM_BPE_CLUSTER_DIR", "/var/tmp/beam-bpe-cluster")
MARKS = [pytest.mark.cluster, pytest.mark.xdist_group("cluster")]
BEAM_BPE = str(pathlib.Path(sys.executable).with_name("beam-bpe"))


def cluster(*args: str) -> dict | None:
    """Runs ``python -m tests.cluster ARGS --state-dir STATE_DIR``; what `up` printed last."""
    done = subprocess.run([sys.executable, "-m", "tests.cluster", *args, "--state-dir", STATE_DIR], cwd=REPO,
                          capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, f"tests.cluster {' '.join(args)} failed:\n{done.stderr[-4000:]}"
    lines = done.stdout.strip().splitlines()
    return json.loads(lines[-1]) if lines else None


def beam_bpe(*argv: str, cwd: pathlib.Path | None = None) -> tuple[int, str]:
    """``beam-bpe ARGV`` in a process of its own; (exit code, stderr)."""
    done = subprocess.run([BEAM_BPE, *argv], cwd=cwd, capture_output=True, text=True, timeout=900)
    return done.returncode, done.stderr


@pytest.fixture(scope="session")
def _one_worker_at_a_time():
    """Holds STATE_DIR's test lock for the whole pytest worker: should xdist hand cluster tests to
    two workers (``--dist loadgroup`` was seen to), the second waits until the first has run its
    share and taken the clusters down, instead of sharing or stopping them under it."""
    if os.geteuid() != 0:
        pytest.skip("the cluster tests need root: each host gets its own network namespace")
    os.makedirs(STATE_DIR, exist_ok=True)
    with open(os.path.join(STATE_DIR, ".tests.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _cluster_of_the_run(engine: str):
    description = cluster("up", "--engine", engine, "--taskmanagers", "2" if engine == "flink" else "1")
    yield description
    cluster("down", "--engine", engine)


@pytest.fixture(scope="session")
def flink_cluster(_one_worker_at_a_time):
    """The Flink cluster of the pytest run: `up`'s description (beam_args, shared_dir, rest)."""
    yield from _cluster_of_the_run("flink")


@pytest.fixture(scope="session")
def spark_cluster(_one_worker_at_a_time):
    """The Spark cluster of the pytest run."""
    yield from _cluster_of_the_run("spark")


@pytest.fixture
def flink(flink_cluster):
    """The run's Flink cluster, brought back first if a test took a worker or all of it down."""
    return cluster("up", "--engine", "flink", "--taskmanagers", "2")


@pytest.fixture
def spark(spark_cluster):
    return cluster("up", "--engine", "spark", "--taskmanagers", "1")
