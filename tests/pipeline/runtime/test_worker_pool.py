"""The SDK worker pool for EXTERNAL environments (pipeline.runtime.worker_pool): a job's worker is
a copy of the template process the pool keeps ready, and without a template (or with ``--plain``)
a job gets Beam's own start. Jobs reach the pool as Flink's and Spark's do: a portable job service
(Beam's own, embedded) whose environment is EXTERNAL."""

from __future__ import annotations

import ast
import gc
import glob
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import time

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

COPIED = re.compile(r"Starting worker \S+ in process (\d+), a copy of the ready template")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(condition, what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"waited {seconds} s for {what}"
        time.sleep(0.1)


def _templates(pool: subprocess.Popen) -> list[int]:
    """The pool's template processes: its children started with --template, alive."""
    found = []
    for task in pathlib.Path(f"/proc/{pool.pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            try:
                if b"--template" in pathlib.Path(f"/proc/{child}/cmdline").read_bytes():
                    found.append(int(child))
            except OSError:
                pass  # it ended meanwhile
    return found


def _children_cpu_seconds(pid: int) -> float:
    """The CPU time of process ``pid``'s reaped children (cutime + cstime)."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


def _ended(pid: int) -> bool:
    try:
        return pathlib.Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except FileNotFoundError:
        return True


@pytest.fixture
def pool(tmp_path, request):
    """A pool on a free port (with the extra flags ``param``), its log file, and its process;
    ended after the test."""
    port, log = _free_port(), tmp_path / "pool.log"
    flags = getattr(request, "param", [])
    with open(log, "wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "pipeline.runtime.worker_pool", f"--service_port={port}",
                                    *flags], stdout=out, stderr=subprocess.STDOUT)
    _wait_for(lambda: "listening on port" in log.read_text(errors="replace"), "the pool to listen")
    yield port, log, process
    process.kill()
    process.wait()


def _job_values(port: int, out: pathlib.Path, seen) -> set:
    """Runs a small job on the pool; what ``seen()`` (a Python literal) returned where its elements
    were processed."""
    options = PipelineOptions(["--runner=PortableRunner", "--job_endpoint=embed", "--environment_type=EXTERNAL",
                               f"--environment_config=localhost:{port}"])
    with beam.Pipeline(options=options) as p:
        _ = p | beam.Create(["a", "b", "c"]) | beam.Map(lambda _: repr(seen())) | beam.io.WriteToText(str(out))
    return {ast.literal_eval(line) for path in glob.glob(f"{out}*") for line in pathlib.Path(path).read_text().splitlines()}


def _job_pids(port: int, out: pathlib.Path) -> set[int]:
    """Runs a small job on the pool; the process IDs its elements were processed in."""
    return _job_values(port, out, os.getpid)


def test_each_job_runs_in_a_copy_of_the_template(pool, tmp_path):
    port, log, process = pool
    _wait_for(lambda: len(_templates(process)) == 1, "the template")
    template = _templates(process)[0]
    first = _job_values(port, tmp_path / "one", lambda: (os.getpid(), os.getppid()))
    second = _job_values(port, tmp_path / "two", lambda: (os.getpid(), os.getppid()))
    assert len(first) == len(second) == 1 and first != second
    (first_pid, first_parent), (second_pid, second_parent) = first.pop(), second.pop()
    assert first_parent == second_parent == template
    assert [int(pid) for pid in COPIED.findall(log.read_text())] == [first_pid, second_pid]
    # A copy ends with its job, and the template reaps it, so its CPU time counts in the template's
    # children's (an ignored SIGCHLD would reap it too, and lose that); the template stays.
    _wait_for(lambda: not os.path.exists(f"/proc/{first_pid}") and not os.path.exists(f"/proc/{second_pid}"),
              "the copies to end and be reaped")
    assert _templates(process) == [template]
    assert _children_cpu_seconds(template) > 0


def test_the_template_has_no_thread_but_those_numpy_and_pyarrow_start(pool, tmp_path):
    # A copy of a process has only the thread that made it: sound only if the others can be left
    # behind. OpenBLAS's (numpy) and jemalloc's (pyarrow) have fork handlers; gRPC's, or a thread
    # an import started, would not.
    port, _, process = pool
    _job_values(port, tmp_path / "one", os.getpid)  # the template is ready once it has made a copy
    # The same libraries in a process that has made a copy as well (OpenBLAS's threads wait for its next call).
    libraries = ("import os, numpy, pyarrow\nif os.fork() == 0: os._exit(0)\nos.wait()\n"
                 "print(len(os.listdir('/proc/self/task')))")
    expected = subprocess.run([sys.executable, "-c", libraries], capture_output=True, text=True, check=True).stdout
    assert len(os.listdir(f"/proc/{_templates(process)[0]}/task")) == int(expected)


def test_a_copys_job_does_not_collect_the_templates_start_up_objects_again(pool, tmp_path):
    # Frozen after the imports (pipeline.runtime.worker.start_up): the job's collections skip them.
    port, _, _ = pool
    assert min(_job_values(port, tmp_path / "one", gc.get_freeze_count)) > 50_000


def test_a_copys_bundles_sample_their_steps_times_often_so_their_ends_do_not_wait(pool, tmp_path):
    # Beam's sampler wakes every 200 ms, and each bundle's end waits for it (pipeline.runtime.worker).
    from apache_beam.runners.worker import statesampler

    from pipeline.runtime.worker import SAMPLING_PERIOD_MS

    port, _, _ = pool
    period = _job_values(port, tmp_path / "one", lambda: statesampler.get_current_tracker().sampling_period_ms)
    assert period == {SAMPLING_PERIOD_MS} and SAMPLING_PERIOD_MS < statesampler.DEFAULT_SAMPLING_PERIOD_MS


def test_a_template_that_died_is_replaced_and_meanwhile_a_job_gets_beams_start(pool, tmp_path):
    port, log, process = pool
    _wait_for(lambda: len(_templates(process)) == 1, "the template")
    dead = _templates(process)[0]
    os.kill(dead, signal.SIGKILL)
    _wait_for(lambda: _ended(dead), "the template to end")
    assert len(_job_pids(port, tmp_path / "one")) == 1
    assert "Starting worker with command" in log.read_text() and not COPIED.search(log.read_text())
    assert "the template process ended" in log.read_text()
    _wait_for(lambda: [pid for pid in _templates(process) if pid != dead], "a new template")
    new = [pid for pid in _templates(process) if pid != dead][0]
    assert _job_values(port, tmp_path / "two", os.getppid) == {new}


def test_the_pool_follows_a_copy_it_did_not_start_by_its_pidfd():
    # How Beam's pool stops a worker (terminate, then wait with a timeout), on a process that is not its child.
    from pipeline.runtime.worker_pool import _Copy

    sleeper = subprocess.Popen(["sleep", "60"])
    copy = _Copy(sleeper.pid)
    with pytest.raises(subprocess.TimeoutExpired):
        copy.wait(timeout=0.1)
    copy.terminate()
    assert copy.wait(timeout=10) == 0 and copy.wait(timeout=0) == 0  # ended: no wait the second time
    assert sleeper.wait(timeout=10) == -signal.SIGTERM
    copy.kill()  # after its end: nothing to do, no error


@pytest.mark.parametrize("pool", [["--plain"]], indirect=True)
def test_plain_is_beams_own_pool(pool, tmp_path):
    port, log, process = pool
    pids = _job_pids(port, tmp_path / "one")
    assert len(pids) == 1 and not COPIED.search(log.read_text()) and "Starting worker with command" in log.read_text()
    assert _templates(process) == []


def test_the_template_ends_when_its_pool_is_gone(pool):
    _, _, process = pool
    _wait_for(lambda: len(_templates(process)) == 1, "the template")
    template = _templates(process)[0]
    process.kill()
    process.wait()
    _wait_for(lambda: _ended(template), "the template to end")


def test_beam_bpe_plain_beam_makes_it_beams_own_pool(tmp_path, monkeypatch):
    from pipeline.runtime import worker_pool

    served = []
    monkeypatch.setattr(worker_pool, "_serve", lambda port, plain: served.append((port, plain)))
    worker_pool.main(["--service_port=1"])
    worker_pool.main(["--service_port=2", "--plain"])
    monkeypatch.setenv("BEAM_BPE_PLAIN_BEAM", "1")
    worker_pool.main(["--service_port=3"])
    assert served == [(1, False), (2, True), (3, True)]
