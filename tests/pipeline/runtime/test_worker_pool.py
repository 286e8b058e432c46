"""The SDK worker pool for EXTERNAL environments (pipeline.runtime.worker_pool): a job's worker is
the process it kept ready, the next one is made ready after it, and without a ready one (or with
``--spares 0``) a job gets Beam's own start. Jobs reach the pool as Flink's and Spark's do: a
portable job service (Beam's own, embedded) whose environment is EXTERNAL."""

from __future__ import annotations

import gc
import glob
import os
import pathlib
import re
import socket
import subprocess
import sys
import time

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

READY = re.compile(r"Starting worker \S+ in process (\d+), made ready before the job")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(condition, what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"waited {seconds} s for {what}"
        time.sleep(0.1)


def _spares(pool: subprocess.Popen) -> list[int]:
    """The pool's spare processes: its children started with --spare, alive."""
    found = []
    for task in pathlib.Path(f"/proc/{pool.pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            try:
                if b"--spare" in pathlib.Path(f"/proc/{child}/cmdline").read_bytes():
                    found.append(int(child))
            except OSError:
                pass  # it ended meanwhile
    return found


@pytest.fixture
def pool(tmp_path, request):
    """A pool on a free port, its log file, and its process; ended after the test."""
    port, log = _free_port(), tmp_path / "pool.log"
    spares = getattr(request, "param", 1)
    with open(log, "wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "pipeline.runtime.worker_pool", f"--service_port={port}",
                                    f"--spares={spares}"], stdout=out, stderr=subprocess.STDOUT)
    _wait_for(lambda: "listening on port" in log.read_text(errors="replace"), "the pool to listen")
    yield port, log, process
    process.kill()
    process.wait()


def _job_values(port: int, out: pathlib.Path, seen) -> set[int]:
    """Runs a small job on the pool; what ``seen()`` returned where its elements were processed."""
    options = PipelineOptions(["--runner=PortableRunner", "--job_endpoint=embed", "--environment_type=EXTERNAL",
                               f"--environment_config=localhost:{port}"])
    with beam.Pipeline(options=options) as p:
        _ = p | beam.Create(["a", "b", "c"]) | beam.Map(lambda _: str(seen())) | beam.io.WriteToText(str(out))
    return {int(line) for path in glob.glob(f"{out}*") for line in pathlib.Path(path).read_text().split()}


def _job_pids(port: int, out: pathlib.Path) -> set[int]:
    """Runs a small job on the pool; the process IDs its elements were processed in."""
    return _job_values(port, out, os.getpid)


def test_a_job_runs_in_the_process_made_ready_and_the_next_one_is_made_ready(pool, tmp_path):
    port, log, process = pool
    _wait_for(lambda: len(_spares(process)) == 1, "a spare")
    first_spare = _spares(process)[0]
    assert _job_pids(port, tmp_path / "one") == {first_spare}
    assert [int(pid) for pid in READY.findall(log.read_text())] == [first_spare]
    # A new spare is made ready after the first was taken, and the next job runs in it.
    _wait_for(lambda: [pid for pid in _spares(process) if pid != first_spare], "the next spare")
    second_spare = [pid for pid in _spares(process) if pid != first_spare][0]
    assert _job_pids(port, tmp_path / "two") == {second_spare}


@pytest.mark.parametrize("pool", [2], indirect=True)
def test_with_two_spares_a_job_that_follows_at_once_runs_in_one_made_ready_too(pool, tmp_path):
    port, log, process = pool
    _wait_for(lambda: len(_spares(process)) == 2, "two spares")
    ready = set(_spares(process))
    first = _job_pids(port, tmp_path / "one")
    second = _job_pids(port, tmp_path / "two")  # its replacement for the first may still be importing
    assert first | second <= ready and len(first | second) == 2
    assert {int(pid) for pid in READY.findall(log.read_text())} == first | second


def _policies(pid: int) -> set[int]:
    """The scheduling policies of the threads of process ``pid``."""
    return {os.sched_getscheduler(int(thread)) for thread in os.listdir(f"/proc/{pid}/task")}


def _autogroup_nice(pid: int | str = "self") -> int | None:
    """The nice value of the autogroup of process ``pid`` (None: a kernel without autogroups)."""
    try:
        return int(pathlib.Path(f"/proc/{pid}/autogroup").read_text().split("nice")[1])
    except FileNotFoundError:
        return None


def test_a_spare_gets_ready_at_idle_priority_and_runs_its_job_at_normal_priority(pool, tmp_path):
    from pipeline.runtime.worker_pool import idle_priority_is_reversible

    if not idle_priority_is_reversible():
        pytest.skip("this process may not bring a thread back from idle priority (no root, no CAP_SYS_NICE)")
    port, _, process = pool
    _wait_for(lambda: len(_spares(process)) == 1, "a spare")
    spare = _spares(process)[0]
    _wait_for(lambda: _policies(spare) == {os.SCHED_IDLE}, "the spare at idle priority")
    # In an autogroup of its own (setsid; where the kernel has them), weighing least: a spare
    # in the pool's autogroup took CPU from a running job's workers despite its policy.
    assert os.getsid(spare) == spare
    assert _autogroup_nice(spare) in (19, None)
    job = _job_values(port, tmp_path / "one", lambda: os.sched_getscheduler(0) * 100 + (_autogroup_nice() or 0))
    assert job == {os.SCHED_OTHER * 100}


def test_the_pool_brings_a_spare_it_hands_a_job_to_back_to_normal_priority():
    # So a job that takes a spare still importing does not wait for it at idle priority.
    from pipeline.runtime import worker_pool

    if not worker_pool.idle_priority_is_reversible():
        pytest.skip("this process may not bring a thread back from idle priority (no root, no CAP_SYS_NICE)")
    background = ("import sys, threading, time; from pipeline.runtime import worker_pool; "
                  "worker_pool._to_background(); threading.Thread(target=time.sleep, args=(60,)).start(); "
                  "print('ready', flush=True); time.sleep(60)")
    process = subprocess.Popen([sys.executable, "-c", background], stdout=subprocess.PIPE)
    try:
        assert process.stdout.readline() == b"ready\n"
        assert _policies(process.pid) == {os.SCHED_IDLE} and _autogroup_nice(process.pid) in (19, None)
        worker_pool._to_foreground(process.pid)
        assert _policies(process.pid) == {os.SCHED_OTHER} and _autogroup_nice(process.pid) in (0, None)
    finally:
        process.kill()
        process.wait()


def test_a_spares_jobs_do_not_collect_its_start_up_objects_again(pool, tmp_path):
    # Frozen after the imports (pipeline.runtime.worker.start_up): the job's collections skip them.
    port, _, process = pool
    _wait_for(lambda: len(_spares(process)) == 1, "a spare")
    assert min(_job_values(port, tmp_path / "one", gc.get_freeze_count)) > 50_000


@pytest.mark.parametrize("pool", [0], indirect=True)
def test_with_no_spares_it_is_beams_own_pool(pool, tmp_path):
    port, log, process = pool
    pids = _job_pids(port, tmp_path / "one")
    assert len(pids) == 1 and not READY.search(log.read_text()) and "Starting worker with command" in log.read_text()
    assert _spares(process) == []


def test_a_spare_ends_when_its_pool_is_gone(pool):
    _, _, process = pool
    _wait_for(lambda: len(_spares(process)) == 1, "a spare")
    spare = _spares(process)[0]
    process.kill()
    process.wait()
    _wait_for(lambda: not os.path.exists(f"/proc/{spare}") or
              pathlib.Path(f"/proc/{spare}/stat").read_text().split(") ")[1].startswith("Z"), "the spare to end")


def test_beam_bpe_plain_beam_makes_it_beams_own_pool(tmp_path, monkeypatch):
    from pipeline.runtime import worker_pool

    served = []
    monkeypatch.setattr(worker_pool, "_serve", lambda port, spares: served.append((port, spares)))
    worker_pool.main(["--service_port=1"])
    monkeypatch.setenv("BEAM_BPE_PLAIN_BEAM", "1")
    worker_pool.main(["--service_port=2"])
    assert served == [(1, 1), (2, 0)]
