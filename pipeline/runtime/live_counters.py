"""The user counters of a running FnApiRunner job, read from its workers as the job goes.

    read = pipeline.runner.watch_counters()    # pipeline.runtime.runner's FnApiRunner
    counters = read()                          # {(namespace, name): total} so far

The FnApiRunner reports metrics only when the job ends. ``LiveCounters`` wraps
each worker's control connection (``control_conn``, a private name of Beam's;
``pipeline.runtime.beam_internals``) to know every bundle from the moment it is
sent, and asks a running bundle's worker for its progress as Beam's own
progress requests do. The display of the numbers is ``pipeline.command_machinery.progress``'s.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import threading

from apache_beam.metrics import monitoring_infos
from apache_beam.portability.api import beam_fn_api_pb2

__all__ = ["LiveCounters", "user_counters"]


class LiveCounters:
    """The user counters of a running FnApiRunner job, as far as its bundles have got.

    The FnApiRunner reports metrics only when the job ends, and a stage runs as
    one bundle per worker. So every bundle is watched from the moment it is
    sent to its worker: while it runs, ``read`` asks the worker for its progress
    (a ``ProcessBundleProgressRequest``, as Beam's own progress requests are
    made; the answer holds the bundle's counters so far), and when it ends its
    final counters are kept. Works for in-process and subprocess workers alike.
    """

    _TIMEOUT = 5.0  # seconds to wait for a worker's answer

    def __init__(self):
        self._lock = threading.Lock()
        self._running: dict[str, _Bundle] = {}  # by instruction id
        self._finished: dict[tuple[str, str], int] = {}  # the counters of the bundles that ended
        self._requests = itertools.count()

    def watch(self, handler) -> None:
        """Watches the bundles sent to a worker from now on."""
        if not isinstance(handler.control_conn, _WatchedControl):
            handler.control_conn = _WatchedControl(handler.control_conn, self)

    def started(self, bundle: "_Bundle") -> None:
        with self._lock:
            self._running[bundle.instruction_id] = bundle

    def read(self) -> dict[tuple[str, str], int]:
        """The counters so far as {(namespace, name): total}: finished bundles' plus running ones'."""
        with self._lock:
            running = list(self._running.values())
        for bundle in running:
            if bundle.future is not None and bundle.future.is_done():
                self._finish(bundle)
            else:
                bundle.update(self._ask_progress(bundle))
        with self._lock:
            totals = dict(self._finished)
            for bundle in self._running.values():
                for key, value in bundle.counters.items():
                    totals[key] = totals.get(key, 0) + value
        return totals

    def _finish(self, bundle: "_Bundle") -> None:
        with contextlib.suppress(Exception):  # a failed bundle: the job reports it; keep what was seen
            bundle.update(user_counters(bundle.future.get(self._TIMEOUT).process_bundle.monitoring_infos))
        with self._lock:
            if self._running.pop(bundle.instruction_id, None) is not None:
                for key, value in bundle.counters.items():
                    self._finished[key] = self._finished.get(key, 0) + value

    def _ask_progress(self, bundle: "_Bundle") -> dict[tuple[str, str], int]:
        request = beam_fn_api_pb2.InstructionRequest(
            instruction_id=f"beam_bpe_progress_{next(self._requests)}",
            process_bundle_progress=beam_fn_api_pb2.ProcessBundleProgressRequest(
                instruction_id=bundle.instruction_id),
        )
        try:
            response = bundle.control.push(request).get(self._TIMEOUT)
        except Exception:  # noqa: BLE001 - a busy or ending worker: no news this time
            return {}
        return {} if response.error else user_counters(response.process_bundle_progress.monitoring_infos)


@dataclasses.dataclass
class _Bundle:
    """One bundle being run: its worker's control connection, its answer once sent, its counters so far."""

    instruction_id: str
    control: object
    future: object = None
    counters: dict = dataclasses.field(default_factory=dict)

    def update(self, counters: dict[tuple[str, str], int]) -> None:
        # Counters only grow; a progress answer just after the bundle ended is empty.
        for key, value in counters.items():
            self.counters[key] = max(value, self.counters.get(key, 0))


class _WatchedControl:
    """A worker's control connection that tells ``LiveCounters`` of each bundle it starts.

    An in-process worker runs the bundle inside ``push``, so the bundle is
    known as running before the call, and its answer after it.
    """

    def __init__(self, control, live: LiveCounters):
        self._control = control
        self._live = live

    def push(self, request):
        if request.WhichOneof("request") != "process_bundle":
            return self._control.push(request)
        bundle = _Bundle(request.instruction_id, self._control)
        self._live.started(bundle)
        bundle.future = self._control.push(request)
        return bundle.future

    def __getattr__(self, name):
        return getattr(self._control, name)


def user_counters(infos) -> dict[tuple[str, str], int]:
    """The user counters among Fn API monitoring infos, as {(namespace, name): total}."""
    totals: dict[tuple[str, str], int] = {}
    for info in infos:
        if monitoring_infos.is_user_monitoring_info(info) and monitoring_infos.is_counter(info):
            key = tuple(monitoring_infos.parse_namespace_and_name(info))
            totals[key] = totals.get(key, 0) + monitoring_infos.extract_counter_value(info)
    return totals
