"""The FnApiRunner a DirectRunner job of beam-bpe runs on: Beam's, or ours with warm workers.

    pipeline = new_pipeline(options, warm=True)    # through pipeline.runtime.facade

Beam's default DirectRunner becomes Beam's FnApiRunner (``pipeline.command_machinery.runners``
says why), configured as the DirectRunner configures it: the pipeline options
are passed to the SDK workers (log level, our flags), as in
``SwitchingDirectRunner``. Any other runner is Beam's, untouched.

Warm (the start-up machinery on): the runner is ``_FnApiRunner``, a subclass of
Beam's whose worker processes start as ``python -m pipeline.runtime.worker``
(Beam's worker, quiet on the terminal and quick to exit; see there), and a job
takes the ones the command started at its beginning
(``pipeline.runtime.warm_workers``) before it starts any. It also lets the
progress display watch the counters of the running job
(``watch_counters``; ``pipeline.runtime.live_counters``). Every private name of
Beam used here is listed in ``pipeline.runtime.beam_internals``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from typing import Callable

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.portability import python_urns
from apache_beam.runners.portability import local_job_service
from apache_beam.runners.portability.fn_api_runner import fn_runner, worker_handlers

from pipeline.command_machinery.runners import runs_on_fn_api_runner
from pipeline.runtime import stopping, warm_workers
from pipeline.runtime.live_counters import LiveCounters

__all__ = ["new_pipeline"]


def new_pipeline(options: PipelineOptions, warm: bool) -> beam.Pipeline:
    """A Pipeline for the options; Beam's default DirectRunner becomes an FnApiRunner:
    ``_FnApiRunner`` when ``warm``, else Beam's own."""
    if not runs_on_fn_api_runner(options):
        return beam.Pipeline(options=options)
    from apache_beam.portability.api import beam_provision_api_pb2
    from apache_beam.runners.portability.portable_runner import JobServiceHandle

    provision_info = fn_runner.ExtendedProvisionInfo(
        beam_provision_api_pb2.ProvisionInfo(
            pipeline_options=JobServiceHandle.encode_pipeline_options(options.get_all_options())
        )
    )
    runner = (_FnApiRunner if warm else fn_runner.FnApiRunner)(provision_info=provision_info)
    return beam.Pipeline(runner=runner, options=options)


class _FnApiRunner(fn_runner.FnApiRunner):
    """Beam's FnApiRunner, starting its worker processes with ``pipeline.runtime.worker``,
    and telling its ``LiveCounters`` (once ``watch_counters`` made them) of every worker a
    stage runs on, so that the counters of the running job can be read."""

    # Formed as Beam forms its own worker command, so it runs wherever Beam's would.
    WORKER_COMMAND = f"{sys.executable} -m pipeline.runtime.worker"

    live: LiveCounters | None = None

    def watch_counters(self) -> Callable[[], dict[tuple[str, str], int]]:
        """Watches the workers of the stages run from now on; returns what reads the job's
        user counters so far, as {(namespace, name): total} (``pipeline.command_machinery.progress``)."""
        self.live = LiveCounters()
        return self.live.read

    def _get_bundle_manager(self, bundle_context_manager):
        if self.live is not None:
            for handler in bundle_context_manager.worker_handlers:  # the stage's bundles run on these
                self.live.watch(handler)
        return super()._get_bundle_manager(bundle_context_manager)

    def run_via_runner_api(self, pipeline_proto, options):
        # multi_processing mode names Beam's worker module as the command of the
        # job's subprocess environment; ours runs the same worker, warm when one waits.
        for environment in pipeline_proto.components.environments.values():
            if environment.urn == python_urns.SUBPROCESS_SDK:
                environment.urn = _WARM_SUBPROCESS_URN
                environment.payload = self.WORKER_COMMAND.encode("utf-8")
        return super().run_via_runner_api(pipeline_proto, options)


# Beam's subprocess environment, whose workers come from pipeline.runtime.warm_workers first.
_WARM_SUBPROCESS_URN = "beam_bpe:env:warm_subprocess:v1"


class _WarmSdkWorker(local_job_service.SubprocessSdkWorker):
    """Beam's ``SubprocessSdkWorker``, whose process is a warm worker when one is left."""

    def run(self):
        # Beam's SubprocessSdkWorker.run, but for where the process comes from.
        import grpc
        from apache_beam.portability.api import beam_fn_api_pb2_grpc, endpoints_pb2
        from apache_beam.utils import thread_pool_executor
        from google.protobuf import json_format, text_format

        options = [("grpc.http2.max_pings_without_data", 0), ("grpc.http2.max_ping_strikes", 0)]
        logging_server = grpc.server(thread_pool_executor.shared_unbounded_instance(), options=options)
        logging_port = logging_server.add_insecure_port("[::]:0")
        logging_server.start()
        beam_fn_api_pb2_grpc.add_BeamFnLoggingServicer_to_server(
            local_job_service.BeamFnLoggingServicer(), logging_server
        )
        environment = dict(
            os.environ,
            CONTROL_API_SERVICE_DESCRIPTOR=text_format.MessageToString(
                endpoints_pb2.ApiServiceDescriptor(url=self._control_address)
            ),
            LOGGING_API_SERVICE_DESCRIPTOR=text_format.MessageToString(
                endpoints_pb2.ApiServiceDescriptor(url=f"localhost:{logging_port}")
            ),
            PIPELINE_OPTIONS=json_format.MessageToJson(self._provision_info.provision_info.pipeline_options),
        )
        if self._worker_id:
            environment["WORKER_ID"] = self._worker_id
        with worker_handlers.SUBPROCESS_LOCK:
            process = warm_workers.take(environment) or subprocess.Popen(
                self._worker_command_line, shell=True, env=environment
            )
        try:
            stopping.wait_for_worker(process.pid)  # a worker killed by a signal: one line, on the command line
            process.wait()
            if process.returncode:
                raise RuntimeError(f"Worker subprocess exited with return code {process.returncode}")
        finally:
            if process.poll() is None:
                process.kill()
            logging_server.stop(0)


@worker_handlers.WorkerHandler.register_environment(_WARM_SUBPROCESS_URN, bytes)
class _WarmSubprocessWorkerHandler(worker_handlers.SubprocessSdkWorkerHandler):
    """Beam's handler of subprocess workers, with ``_WarmSdkWorker`` as the worker."""

    def start_worker(self):
        self.worker = _WarmSdkWorker(self._worker_command_line, self.control_address, self.provision_info,
                                     self.worker_id)
        self.worker_thread = threading.Thread(name="run_worker", target=self.worker.run)
        self.worker_thread.start()
