"""Beam's SDK worker pool for EXTERNAL environments (Flink, Spark), with workers that start ready.

    python -m pipeline.runtime.worker_pool --service_port=50000   # on each worker host

Jobs reach it as they reach Beam's own pool (``python -m apache_beam.runners.worker.worker_pool_main``):
``--environment_type=EXTERNAL --environment_config=localhost:50000``. Beam's pool starts a new
Python process for each worker a job asks for, and the job's first stage waits while that
process imports Beam, pyarrow and beam-bpe's transforms: about half a second of wall time and
0.55 CPU-seconds in every job, however small. This pool starts one process when it starts, the
template, which imports all of that once and then only waits. Each worker a job asks for is a
copy of the template (``os.fork``): it starts with everything imported, in a few milliseconds,
and shares the template's memory until it writes to it. The copy runs Beam's worker for the job
exactly as Beam's pool would have (``SdkHarness(...).run()``).

The template starts no thread, so a copy of it is sound: gRPC, which Beam's worker uses, is only
imported there, never started (the threads numpy's and pyarrow's imports start stay behind, as
their fork handlers expect). The template reaps its copies as they end, so their CPU time is
counted in its children's, as any parent's; the pool follows each copy through a pidfd, which
names that process and no later one with its number. When the template has died, the request
goes to Beam's pool as usual while a new template starts, so the pool changes when workers
start, never what they do.

A template whose pool has gone sees its input end and exits. ``--plain`` is Beam's pool, and so
is the default when ``BEAM_BPE_PLAIN_BEAM`` turns beam-bpe's start-up machinery off.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
import traceback

__all__ = ["main"]

_LOGGER = logging.getLogger(__name__)
_MODULE = "pipeline.runtime.worker_pool"  # not __name__: that is "__main__" in the pool itself
_TEMPLATE_FLAG = "--template"  # python -m pipeline.runtime.worker_pool --template: the template process
# How long a request waits for the template's copy: its start-up (imports) at most, on a busy host.
_COPY_SECONDS = 60.0


class _Template:
    """The template process, and the copies it makes for the pool (one request at a time)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._process = self._start()
        atexit.register(lambda: self._process.kill())  # the one running then, a replacement or not

    @staticmethod
    def _start() -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", _MODULE, _TEMPLATE_FLAG],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def copy(self, job: dict) -> _Copy | None:
        """A copy of the template running Beam's worker for ``job``; None when the template has
        died (a new one is started for the next request)."""
        with self._lock:
            process = self._process
            line = b""
            try:
                process.stdin.write(json.dumps(job).encode() + b"\n")
                process.stdin.flush()
                if select.select([process.stdout], [], [], _COPY_SECONDS)[0]:
                    line = process.stdout.readline()
            except OSError:  # it had died: its input is closed
                pass
            if not line:
                process.kill()
                process.wait()
                print(f"beam-bpe worker pool: the template process ended ({process.returncode}); starting "
                      "another, and this worker the usual way", file=sys.stderr, flush=True)
                self._process = self._start()
                return None
            return _Copy(int(line))


class _Copy:
    """A worker forked by the template, with the part of ``subprocess.Popen`` Beam's pool uses
    to stop it (``terminate``, ``kill``, ``wait``). It is the template's child, not the pool's:
    the pool follows it through a pidfd, and learns that it has ended but not how."""

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode: int | None = None
        try:
            self._pidfd: int | None = os.pidfd_open(pid)
        except ProcessLookupError:  # it has ended already
            self._pidfd = None
            self.returncode = 0

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not select.select([self._pidfd], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(f"worker process {self.pid}", timeout)
            self._ended()
        return self.returncode

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def _signal(self, number: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._pidfd, number)

    def _ended(self) -> None:
        os.close(self._pidfd)
        self.returncode = 0  # ended; how, only its parent (the template) could tell


def _pool_class():
    """The pool: Beam's own, with ``StartWorker`` asking the template for a copy first."""
    from apache_beam.portability.api import beam_fn_api_pb2
    from apache_beam.runners.worker.worker_pool_main import BeamFnExternalWorkerPoolServicer

    class ForkingWorkerPool(BeamFnExternalWorkerPoolServicer):
        def __init__(self, **kwargs):
            super().__init__(use_process=True, **kwargs)
            self._template = _Template()

        def StartWorker(self, request, context):  # noqa: N802 - the gRPC method's name
            job = {"control": request.control_endpoint.url, "worker_id": request.worker_id,
                   "state_cache_size": self._state_cache_size,
                   "data_buffer_time_limit_ms": self._data_buffer_time_limit_ms}
            copy = self._template.copy(job)
            if copy is None:
                return super().StartWorker(request, context)
            self._worker_processes[request.worker_id] = copy
            _LOGGER.info("Starting worker %s in process %d, a copy of the ready template", request.worker_id,
                         copy.pid)
            return beam_fn_api_pb2.StartWorkerResponse()

    return ForkingWorkerPool


def _serve(port: int, plain: bool) -> None:
    import grpc
    from apache_beam.portability.api import beam_fn_api_pb2_grpc
    from apache_beam.runners.worker.worker_pool_main import BeamFnExternalWorkerPoolServicer
    from apache_beam.utils import thread_pool_executor

    # The same server Beam's pool makes: keepalive pings without data are never refused.
    server = grpc.server(thread_pool_executor.shared_unbounded_instance(),
                         options=[("grpc.http2.max_pings_without_data", 0), ("grpc.http2.max_ping_strikes", 0)])
    if plain:
        pool = BeamFnExternalWorkerPoolServicer(use_process=True, state_cache_size=0, data_buffer_time_limit_ms=-1)
    else:
        pool = _pool_class()(state_cache_size=0, data_buffer_time_limit_ms=-1)
    beam_fn_api_pb2_grpc.add_BeamFnExternalWorkerPoolServicer_to_server(pool, server)
    server.add_insecure_port(f"[::]:{port}")
    server.start()
    logging.getLogger().setLevel(logging.INFO)  # as Beam's pool: each worker started and stopped, in its log
    how = "Beam's own worker start" if plain else "workers copied from a ready template"
    print(f"beam-bpe worker pool: listening on port {port}, {how}", file=sys.stderr, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop(0)


def _run_template() -> None:
    """The template: imports what a job's workers need, then makes a copy of itself for each
    job line on its input, answering with the copy's process ID; exits when its input ends."""
    from pipeline.runtime import worker

    def prepare() -> None:
        worker.settle()  # before Beam is imported
        from pipeline.cli import WORKER_MODULES

        worker.import_ahead(sorted({module for modules in WORKER_MODULES.values() for module in modules}))

    worker.start_up(prepare)  # what the imports made is frozen, as in any beam-bpe worker
    signal.signal(signal.SIGCHLD, _reap_copies)
    jobs, answers = sys.stdin.buffer, sys.stdout.buffer
    for line in iter(jobs.readline, b""):
        job = json.loads(line)
        sys.stderr.flush()  # or the copy would write what is still buffered again
        pid = os.fork()
        if pid == 0:
            _run_copy(job)
        answers.write(b"%d\n" % pid)
        answers.flush()


def _reap_copies(unused_signal, unused_frame) -> None:
    """Reaps every copy that has ended. Not ``SIGCHLD`` ignored: the kernel would reap them as
    well, but their CPU time would then be counted nowhere (not in the template's children's)."""
    with contextlib.suppress(ChildProcessError):  # no copy left
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def _run_copy(job: dict) -> None:
    """A copy of the template: runs Beam's worker for ``job`` and exits, never returning."""
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # its own children are its to wait for, not the template's
        nothing = os.open(os.devnull, os.O_RDWR)
        os.dup2(nothing, 0)  # not the template's requests
        os.dup2(nothing, 1)  # not the template's answers
        from apache_beam.runners.worker.sdk_worker import SdkHarness

        SdkHarness(job["control"], worker_id=job["worker_id"], state_cache_size=job["state_cache_size"],
                   data_buffer_time_limit_ms=job["data_buffer_time_limit_ms"]).run()
        sys.stderr.flush()
        os._exit(0)  # the job has ended: nothing is left to free but memory
    except BaseException:  # noqa: BLE001 - a copy must never go back to the template's loop
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)


def main(argv: list[str] | None = None) -> None:
    """``python -m pipeline.runtime.worker_pool --service_port=PORT [--plain]``."""
    argv = sys.argv[1:] if argv is None else argv
    if argv == [_TEMPLATE_FLAG]:
        _run_template()
        return
    parser = argparse.ArgumentParser(prog=f"python -m {_MODULE}", description=__doc__.splitlines()[0])
    parser.add_argument("--service_port", type=int, required=True, help="the port jobs' runners ask for workers on")
    parser.add_argument("--plain", action="store_true",
                        help="Beam's own pool: a new process for each worker, which imports Beam itself (the "
                             "default with BEAM_BPE_PLAIN_BEAM)")
    args = parser.parse_args(argv)
    from pipeline.runtime.facade import is_on

    _serve(args.service_port, args.plain or not is_on())


if __name__ == "__main__":
    main()
