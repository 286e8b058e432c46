"""Beam's local job service and an EXTERNAL SDK worker pool, as a pytest fixture.

Runs pipelines the way Flink, Spark or Dataflow do: submitted by
``PortableRunner`` to a job service, executed by SDK workers in other
processes that share nothing with the test but the pipeline proto and the
files. Use it in a test module with

    from tests.support.beam_services import portable_runner_flags  # noqa: F401  (the fixture)

    def test_x(portable_runner_flags):
        main([..., *portable_runner_flags])

One job service and one worker pool serve the whole test session.
Both listen on localhost; note that Beam's worker pool binds its port on all
interfaces (``[::]``), which Beam does not let us change from the command line.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time

import pytest

__all__ = ["portable_runner_flags", "start_services"]

_STARTUP_SECONDS = 90


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(port: int, process: subprocess.Popen, log_path: str, deadline: float) -> None:
    while time.monotonic() < deadline:
        if process.poll() is not None:
            with open(log_path, errors="replace") as f:
                raise RuntimeError(f"{process.args[2]} exited with {process.returncode}:\n{f.read()[-3000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise TimeoutError(f"{process.args[2]} did not listen on port {port} within {_STARTUP_SECONDS} s")


def start_services(log_dir: str) -> tuple[list[str], list[subprocess.Popen]]:
    """Starts the job service and the worker pool; returns (Beam flags, processes).

    The worker pool starts each SDK worker as ``python`` from PATH, so this
    interpreter's bin directory goes first on PATH: the workers then import the
    same Beam and the same beam-bpe as the test.
    """
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    job_port, pool_port = _free_port(), _free_port()
    commands = [
        ([sys.executable, "-m", "apache_beam.runners.portability.local_job_service_main",
          f"--port={job_port}"], job_port),
        ([sys.executable, "-m", "apache_beam.runners.worker.worker_pool_main",
          f"--service_port={pool_port}"], pool_port),
    ]
    processes = []
    deadline = time.monotonic() + _STARTUP_SECONDS
    try:
        for command, port in commands:
            log_path = os.path.join(log_dir, command[2].rsplit(".", 1)[-1] + ".log")
            with open(log_path, "wb") as log:
                processes.append(subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT))
            _wait_for_port(port, processes[-1], log_path, deadline)
    except BaseException:
        stop_services(processes)
        raise
    flags = [
        "--runner=PortableRunner",
        f"--job_endpoint=localhost:{job_port}",
        "--environment_type=EXTERNAL",
        f"--environment_config=localhost:{pool_port}",
    ]
    return flags, processes


def stop_services(processes: list[subprocess.Popen]) -> None:
    """Stops the processes start_services started (and only those)."""
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="session")
def portable_runner_flags():
    """Beam flags that run a pipeline on PortableRunner against local services."""
    with tempfile.TemporaryDirectory(prefix="beam-services-") as log_dir:
        flags, processes = start_services(log_dir)
        try:
            yield flags
        finally:
            stop_services(processes)
