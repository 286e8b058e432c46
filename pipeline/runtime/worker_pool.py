"""Beam's SDK worker pool for EXTERNAL environments (Flink, Spark), with a worker ready before a job asks.

    python -m pipeline.runtime.worker_pool --service_port=50000   # on each worker host

Jobs reach it as they reach Beam's own pool (``python -m apache_beam.runners.worker.worker_pool_main``):
``--environment_type=EXTERNAL --environment_config=localhost:50000``. Beam's pool starts a new
Python process for each worker a job asks for, and the job's first stage waits while that
process imports Beam, pyarrow and beam-bpe's transforms: about a second of CPU and of wall time
in every job, however small. This pool keeps one process ready instead (``--spares``), with all
of that imported (a "spare"). A job's request hands the spare its addresses, one line of JSON on
its input, and the spare runs Beam's worker for the job exactly as Beam's pool would have
(``SdkHarness(...).run()``).

The next spare starts as soon as one is taken, and does its imports at the operating system's
idle priority (``SCHED_IDLE``): on a busy host it gets only the CPU that jobs leave unused, so
making it ready does not compete with the job that took the last one, however soon after the
job's start it begins. That takes an autogroup of its own as well (``setsid``): where Linux
groups processes into autogroups, one for each ``setsid`` (the default on most distributions), it
shares CPU between the groups first and only then between a group's threads by their policy, so
a spare at idle priority in the pool's autogroup took as much CPU as a group of its own, about 1
CPU-second of a 240 MB encode on a 2-core host while the job's workers waited. In its own
autogroup the spare gets the lowest weight (nice 19). It comes back to normal priority the
moment a job takes it, set there by the pool, so a job that takes a spare still importing does
not wait for it at idle priority. Where the pool may not bring a process back from idle priority
(no root, no CAP_SYS_NICE), the spare imports at normal priority and starts a few seconds after
the last one was taken (``_REFILL_DELAY``), once the job's own start-up is past. When no spare is ready (a second
worker at once, a spare that died), the request goes to Beam's pool as usual, so the pool
changes when workers start, never what they do.

A spare whose pool has gone sees its input end and exits. ``--spares 0`` is Beam's pool, and so
is the default when ``BEAM_BPE_PLAIN_BEAM`` turns beam-bpe's start-up machinery off.
"""

from __future__ import annotations

import argparse
import atexit
import errno
import json
import logging
import os
import select
import subprocess
import sys
import threading
import time

__all__ = ["main"]

_LOGGER = logging.getLogger(__name__)
_MODULE = "pipeline.runtime.worker_pool"  # not __name__: that is "__main__" in the pool itself
_SPARE_FLAG = "--spare"  # python -m pipeline.runtime.worker_pool --spare: a spare worker process
_REFILL_DELAY = 2.0  # seconds from taking a spare to starting the next, when spares cannot import at idle priority


def _pool_class():
    """The pool: Beam's own, with ``StartWorker`` handing the request to a spare first."""
    from apache_beam.portability.api import beam_fn_api_pb2
    from apache_beam.runners.worker.worker_pool_main import BeamFnExternalWorkerPoolServicer

    class WarmWorkerPool(BeamFnExternalWorkerPoolServicer):
        def __init__(self, spares: int, **kwargs):
            super().__init__(use_process=True, **kwargs)
            self._wanted = spares
            self._spares: list[subprocess.Popen] = []
            self._lock = threading.Lock()
            self._idle = idle_priority_is_reversible()
            self._refill_delay = 0.0 if self._idle else _REFILL_DELAY
            atexit.register(self._end_spares)
            self._fill()

        def _fill(self) -> None:
            with self._lock:
                self._spares = [spare for spare in self._spares if spare.poll() is None]
                while len(self._spares) < self._wanted:
                    self._spares.append(subprocess.Popen(
                        [sys.executable, "-m", _MODULE, _SPARE_FLAG], stdin=subprocess.PIPE,
                        stdout=subprocess.DEVNULL))

        def _take(self) -> subprocess.Popen | None:
            with self._lock:
                while self._spares:
                    spare = self._spares.pop(0)
                    if spare.poll() is None:
                        return spare
            return None

        def _end_spares(self) -> None:
            for spare in self._spares:
                spare.kill()

        def StartWorker(self, request, context):  # noqa: N802 - the gRPC method's name
            spare = self._take()
            if spare is None:
                return super().StartWorker(request, context)
            job = {"control": request.control_endpoint.url, "worker_id": request.worker_id,
                   "state_cache_size": self._state_cache_size,
                   "data_buffer_time_limit_ms": self._data_buffer_time_limit_ms}
            try:
                spare.stdin.write(json.dumps(job).encode() + b"\n")
                spare.stdin.close()
            except OSError:  # it died between the check and the write: start one the usual way
                return super().StartWorker(request, context)
            if self._idle:  # a spare still importing goes on at normal priority at once
                _to_foreground(spare.pid)
            self._worker_processes[request.worker_id] = spare
            _LOGGER.info("Starting worker %s in process %d, made ready before the job", request.worker_id, spare.pid)
            refill = threading.Timer(self._refill_delay, self._fill)
            refill.daemon = True
            refill.start()
            return beam_fn_api_pb2.StartWorkerResponse()

    return WarmWorkerPool


def idle_priority_is_reversible() -> bool:
    """Whether a thread of this process may go to idle priority and come back (root or CAP_SYS_NICE)."""
    allowed = []

    def probe() -> None:  # on a thread of its own, which ends at whatever priority it is left
        thread = threading.get_native_id()
        try:
            os.sched_setscheduler(thread, os.SCHED_IDLE, os.sched_param(0))
            os.sched_setscheduler(thread, os.SCHED_OTHER, os.sched_param(0))
            allowed.append(True)
        except (OSError, AttributeError):  # refused, or not Linux
            allowed.append(False)

    prober = threading.Thread(target=probe)
    prober.start()
    prober.join()
    return allowed[0]


def _to_background() -> None:
    """This process to idle priority, in an autogroup of its own (``setsid``) at the lowest weight."""
    os.setsid()  # a spare is never a process group leader, so this cannot fail
    _set_autogroup_nice(19)
    _set_priority(os.SCHED_IDLE)


def _to_foreground(pid: int | str = "self") -> None:
    """Process ``pid`` back to normal priority, its autogroup's weight as well: done by the pool
    when it hands a job to a spare, and by the spare when it reads the job (for any thread
    started in between)."""
    _set_autogroup_nice(0, pid)
    _set_priority(os.SCHED_OTHER, pid)


def _set_autogroup_nice(nice: int, pid: int | str = "self") -> None:
    """The weight of process ``pid``'s autogroup, where the kernel has autogroups (otherwise nothing
    to do). Without CAP_SYS_ADMIN the kernel takes one change a tenth of a second at most, machine-wide
    (EAGAIN), so a refused change is tried again for a second. A change still refused costs speed
    only, so it is said in the pool's log and the worker goes on."""
    for _ in range(100):
        try:
            with open(f"/proc/{pid}/autogroup", "w") as autogroup:
                autogroup.write(str(nice))
            return
        except FileNotFoundError:  # a kernel without autogroups, or a process that has ended
            return
        except OSError as e:
            if e.errno != errno.EAGAIN:
                break
            time.sleep(0.01)
    print(f"beam-bpe worker pool: could not set the autogroup of process {pid} to nice {nice}",
          file=sys.stderr, flush=True)


def _set_priority(policy: int, pid: int | str = "self") -> None:
    """Every thread of process ``pid`` to ``policy`` (a thread an import started inherits its starter's)."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:  # the process has ended
        return
    for thread in threads:
        try:
            os.sched_setscheduler(int(thread), policy, os.sched_param(0))
        except ProcessLookupError:  # it ended meanwhile
            pass


def _serve(port: int, spares: int) -> None:
    import grpc
    from apache_beam.portability.api import beam_fn_api_pb2_grpc
    from apache_beam.utils import thread_pool_executor

    # The same server Beam's pool makes: keepalive pings without data are never refused.
    server = grpc.server(thread_pool_executor.shared_unbounded_instance(),
                         options=[("grpc.http2.max_pings_without_data", 0), ("grpc.http2.max_ping_strikes", 0)])
    pool = _pool_class()(spares, state_cache_size=0, data_buffer_time_limit_ms=-1)
    beam_fn_api_pb2_grpc.add_BeamFnExternalWorkerPoolServicer_to_server(pool, server)
    server.add_insecure_port(f"[::]:{port}")
    server.start()
    logging.getLogger().setLevel(logging.INFO)  # as Beam's pool: each worker started and stopped, in its log
    print(f"beam-bpe worker pool: listening on port {port}, keeping {spares} worker process(es) ready",
          file=sys.stderr, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop(0)


def _run_spare() -> None:
    """A spare: imports what a job's workers need, waits for its job, runs Beam's worker for it."""
    idle = idle_priority_is_reversible()
    if idle:
        _to_background()
        if select.select([sys.stdin.buffer], [], [], 0)[0]:  # taken (or ended) before that
            _to_foreground()
    from pipeline.runtime import worker

    def prepare() -> None:
        worker.settle()  # before Beam is imported
        from pipeline.cli import WORKER_MODULES

        worker.import_ahead(sorted({module for modules in WORKER_MODULES.values() for module in modules}))

    worker.start_up(prepare)  # what the imports made is frozen, as in any beam-bpe worker
    from apache_beam.runners.worker.sdk_worker import SdkHarness

    line = sys.stdin.buffer.readline()
    if not line:  # the pool ended before a job came
        os._exit(0)
    if idle:
        _to_foreground()
    job = json.loads(line)
    SdkHarness(job["control"], worker_id=job["worker_id"], state_cache_size=job["state_cache_size"],
               data_buffer_time_limit_ms=job["data_buffer_time_limit_ms"]).run()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # the job has ended: nothing is left to free but memory


def main(argv: list[str] | None = None) -> None:
    """``python -m pipeline.runtime.worker_pool --service_port=PORT [--spares N]``."""
    argv = sys.argv[1:] if argv is None else argv
    if argv == [_SPARE_FLAG]:
        _run_spare()
        return
    parser = argparse.ArgumentParser(prog=f"python -m {_MODULE}", description=__doc__.splitlines()[0])
    parser.add_argument("--service_port", type=int, required=True, help="the port jobs' runners ask for workers on")
    from pipeline.runtime.facade import is_on

    parser.add_argument("--spares", type=int, default=1 if is_on() else 0,
                        help="worker processes kept ready, about 135 MB each (0: Beam's own pool; the default "
                             "with BEAM_BPE_PLAIN_BEAM)")
    args = parser.parse_args(argv)
    if args.spares < 0:
        parser.error("--spares must be 0 or more")
    _serve(args.service_port, args.spares)


if __name__ == "__main__":
    main()
