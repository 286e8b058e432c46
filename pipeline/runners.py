"""Beam pipeline options for our drivers: runner defaults, refusals, metrics.

Shared by ``beam-bpe train`` and ``beam-bpe encode``:

    check_beam_args(beam_args, our_flags)      # UserError for any argument Beam would drop
    options = pipeline_options(beam_args)      # checks again; UserError for a refused runner
    pipeline = new_pipeline(options)           # DirectRunner = Beam's FnApiRunner
    ...
    result = pipeline.run(); result.wait_until_finish()
    counters = committed_counters(result)      # {(namespace, name): value}

DirectRunner (the default) is made to use every local core: unless the user's
own flags say otherwise, it runs ``--direct_running_mode=multi_processing``
with ``--direct_num_workers=0`` (one SDK worker process per core), and its
workers log warnings only, so the command's output stays readable. Any flag the
user gives wins, because Beam takes the last value of a repeated flag and ours
come first.

DirectRunner jobs run on Beam's FnApiRunner, always. Beam's DirectRunner may
first try Prism, a Go binary it downloads from GitHub when the job starts, and
fall back to the FnApiRunner only when that fails (e.g. offline). Prism ignores
the flags above, and the FnApiRunner is what our tests run, so a job behaves the
same online and offline and never downloads anything. ``--runner=PrismRunner``
still gets Prism. The FnApiRunner's worker processes start as
``python -m pipeline.worker``: Beam's worker, quiet on the terminal and quick to
exit (see there); a job takes the ones the command started at its beginning
(``pipeline.warm_workers``) before it starts any.
"""

from __future__ import annotations

import difflib
import logging
import os
import subprocess
import sys
import threading
import weakref
from typing import Sequence

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions, _BeamArgumentParser
from apache_beam.portability import python_urns
from apache_beam.runners.portability import local_job_service
from apache_beam.runners.portability.fn_api_runner import fn_runner, worker_handlers

from pipeline import warm_workers
from pipeline.errors import UserError

__all__ = [
    "DIRECT_DEFAULTS", "check_beam_args", "committed_counters", "describe_runner", "is_direct", "new_pipeline",
    "pipeline_options",
]

DIRECT_DEFAULTS = (
    "--direct_running_mode=multi_processing",
    "--direct_num_workers=0",  # 0 = one worker per CPU core
    "--default_sdk_harness_log_level=WARNING",
)

_DIRECT_NAMES = {"directrunner", "direct", "switchingdirectrunner", "fnapirunner", "bundlebaseddirectrunner"}
# The names that mean "Beam's default DirectRunner", which would try Prism first.
_SWITCHING_NAMES = {"directrunner", "direct", "switchingdirectrunner"}


def _runner_name(options: PipelineOptions) -> str:
    runner = options.view_as(StandardOptions).runner
    if runner is None:
        return "DirectRunner"
    # --runner may also name a class path (a.b.DaskRunner) or an instance.
    return runner if isinstance(runner, str) else type(runner).__name__


def _runner_key(options: PipelineOptions) -> str:
    # --runner may also name a class path (a.b.DirectRunner): compare the class name.
    return _runner_name(options).rsplit(".", 1)[-1].lower()


def is_direct(options: PipelineOptions) -> bool:
    """Whether the options select Beam's DirectRunner (also when --runner is absent)."""
    return _runner_key(options) in _DIRECT_NAMES


class _OptionsParser(_BeamArgumentParser):
    """Beam's own parser of pipeline options, failing with one line instead of exiting."""

    def error(self, message):
        raise UserError(f"Beam pipeline option: {message}")


def _check_runner(options: PipelineOptions) -> None:
    """Refuses a --runner Beam does not know, and DaskRunner; importing the
    runner registers its own options."""
    from apache_beam.runners.runner import _RUNNER_MAP, create_runner

    name = _runner_name(options)
    if "dask" in name.lower():
        raise UserError(
            f"--runner {name} is not supported: Beam's DaskRunner silently drops elements of "
            "multi-branch pipelines and file sinks; use DirectRunner, or Flink/Spark/Dataflow (see configs/)"
        )
    if is_direct(options) or "." in name:
        return  # a class path: Beam imports it when the job starts
    try:
        create_runner(name)
    except ValueError:
        known = sorted(path.rsplit(".", 1)[-1] for path in _RUNNER_MAP.values())
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"did you mean --runner={close[0]}? " if close else ""
        raise UserError(f"unknown --runner {name}: {hint}(known: {', '.join(known)})") from None
    except Exception as e:  # noqa: BLE001 - e.g. a runner whose extra packages are not installed
        raise UserError(f"cannot use --runner {name}: {str(e).splitlines()[0] if str(e) else type(e).__name__}") \
            from None


def _all_option_classes() -> list[type]:
    classes, todo = {}, list(PipelineOptions.__subclasses__())
    while todo:
        cls = todo.pop()
        classes.setdefault(f"{cls.__module__}.{cls.__qualname__}", cls)
        todo.extend(cls.__subclasses__())
    return list(classes.values())


def check_beam_args(beam_args: Sequence[str], our_flags: Sequence[str] = ()) -> None:
    """Refuses every argument Beam would discard: each must be a pipeline option
    of Beam (or of the chosen runner) with a valid value.

    Beam itself only logs "Discarding unparseable args" and runs without them,
    so a misspelt flag, one of ours spelt with underscores, or the second file
    of an unquoted glob would be silently dropped.

    Args:
      beam_args: the arguments our parser did not take.
      our_flags: the command's own flags (``--vocab-size``), for "did you mean".

    Raises:
      UserError: the first argument Beam does not know, with the closest
        known flag.
    """
    options = PipelineOptions(list(beam_args))
    _check_runner(options)
    parser = _OptionsParser(allow_abbrev=False)
    beam_flags = []
    for cls in _all_option_classes():
        try:
            cls._add_argparse_args(parser)  # noqa: SLF001 - how Beam itself collects its options
        except Exception:  # noqa: BLE001 - a flag two classes define: the first definition stands
            continue
    for action in parser._actions:  # noqa: SLF001
        beam_flags.extend(s for s in action.option_strings if s.startswith("--"))
    _, unknown = parser.parse_known_args(list(beam_args))
    if not unknown:
        return
    arg = unknown[0]
    if not arg.startswith("-"):
        raise UserError(f"unexpected argument {arg!r} (a path for --input? several paths go after one --input; "
                        "quote a glob to let beam-bpe expand it)")
    name = arg.split("=", 1)[0]
    ours = {flag.replace("_", "-"): flag for flag in our_flags}
    if name.replace("_", "-") in ours:
        suggestion = ours[name.replace("_", "-")]
    else:
        close = difflib.get_close_matches(name, [*our_flags, *beam_flags], n=1, cutoff=0.75)
        suggestion = close[0] if close else None
    hint = f": did you mean {suggestion}?" if suggestion else " (neither a flag of beam-bpe nor a Beam pipeline option)"
    raise UserError(f"unknown flag {name}{hint}")


def pipeline_options(beam_args: Sequence[str]) -> PipelineOptions:
    """Builds PipelineOptions from Beam flags, with our DirectRunner defaults, and
    gives them to Beam's FileSystems for the driver's own reads and writes.

    Args:
      beam_args: Beam's own flags as the user gave them (``--runner=...``).

    Raises:
      UserError: an argument Beam does not know (``check_beam_args``), or
        Beam's DaskRunner, which silently drops the elements of multi-branch
        pipelines and of file sinks: our jobs are both.
    """
    beam_args = list(beam_args)
    options = _Options(beam_args)
    check_beam_args(beam_args)
    if is_direct(options):
        # In multi_processing mode the runner re-logs every worker warning
        # (e.g. about options only the driver knows) as its own; keep errors.
        logging.getLogger("apache_beam.runners.portability.local_job_service").setLevel(logging.ERROR)
        options = _Options([*DIRECT_DEFAULTS, *beam_args])
    # The driver's own file access before the job (matching inputs, checking the
    # output, reading a tokenizer) uses the same file-system options (S3
    # endpoint, credentials) as the job will.
    FileSystems.set_options(options)
    return options


# Each _Options' views, made once per options class (weakly held: they go with their options).
_views: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class _Options(PipelineOptions):
    """Beam's PipelineOptions, with one view per options class, made when first asked.

    Building a pipeline asks the options for a view hundreds of times, and Beam
    parses the flags again for each new view. A view keeps no value of its own
    (reading and setting go to the options it came from, and the flags never
    change), so the first view of a class serves every later request. Kept
    outside the object, so what pickles is unchanged.
    """

    def view_as(self, cls):
        views = _views.setdefault(self, {})
        if cls not in views:
            views[cls] = super().view_as(cls)
        return views[cls]


def new_pipeline(options: PipelineOptions) -> beam.Pipeline:
    """A Pipeline for the options; Beam's default DirectRunner becomes its FnApiRunner.

    Configured as the DirectRunner configures it: the pipeline options are passed
    to the SDK workers (log level, our flags), as in ``SwitchingDirectRunner``.
    Worker processes start as ``python -m pipeline.worker`` (Beam's worker, quiet
    on the terminal and quick to exit; see there).
    """
    if _runner_key(options) not in _SWITCHING_NAMES:
        return beam.Pipeline(options=options)
    from apache_beam.portability.api import beam_provision_api_pb2
    from apache_beam.runners.portability.portable_runner import JobServiceHandle

    provision_info = fn_runner.ExtendedProvisionInfo(
        beam_provision_api_pb2.ProvisionInfo(
            pipeline_options=JobServiceHandle.encode_pipeline_options(options.get_all_options())
        )
    )
    return beam.Pipeline(runner=_FnApiRunner(provision_info=provision_info), options=options)


class _FnApiRunner(fn_runner.FnApiRunner):
    """Beam's FnApiRunner, starting its worker processes with ``pipeline.worker``,
    and telling ``live`` (when set: ``pipeline.progress.LiveCounters``) of every
    worker a stage runs on, so that the counters of the running job can be read."""

    # Formed as Beam forms its own worker command, so it runs wherever Beam's would.
    WORKER_COMMAND = f"{sys.executable} -m pipeline.worker"

    live = None

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


# Beam's subprocess environment, whose workers come from pipeline.warm_workers first.
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


def describe_runner(options: PipelineOptions) -> str:
    """A short description for summaries, e.g. "DirectRunner (multi_processing, 2 workers)"."""
    name = _runner_name(options)
    if not is_direct(options):
        return name
    direct = options.view_as(DirectOptions)
    workers = direct.direct_num_workers
    if workers == 0:
        import multiprocessing

        workers = multiprocessing.cpu_count()
    mode = direct.direct_running_mode
    return f"DirectRunner ({mode}, {workers} worker{'s' if workers != 1 else ''})"


def committed_counters(result) -> dict[tuple[str, str], int]:
    """The job's committed counters as {(namespace, name): total}; {} if unavailable.

    Some runners report no metrics (or only attempted ones). Callers use them
    for reporting; correctness comes from the job's output files.
    """
    try:
        counters = result.metrics().query()["counters"]
    except Exception:  # noqa: BLE001 - a runner without metrics support: report none
        return {}
    totals: dict[tuple[str, str], int] = {}
    for counter in counters:
        value = counter.committed
        if value is None:
            value = counter.attempted
        if value is None:
            continue
        key = (counter.key.metric.namespace, counter.key.metric.name)
        # The same counter appears once per step that updates it: add them up.
        totals[key] = totals.get(key, 0) + value
    return totals


# Beam's S3 flags and the boto3 client arguments they stand for.
_S3_CLIENT_ARGUMENTS = {
    "s3_endpoint_url": "endpoint_url",
    "s3_region_name": "region_name",
    "s3_access_key_id": "aws_access_key_id",
    "s3_secret_access_key": "aws_secret_access_key",
    "s3_session_token": "aws_session_token",
    "s3_verify": "verify",
}


def tokenizer_transport(options: PipelineOptions) -> dict | None:
    """smart_open's transport parameters for tokenizer paths, from Beam's own S3 flags.

    Tokenizer files are read by the library layer (``bpe.Tokenizer.load``, through
    smart_open), the corpus by Beam's FileSystems: the S3 endpoint and
    credentials given as Beam flags must reach both. None when no S3 flag is
    set (boto3 then finds its configuration as usual).
    """
    given = options.get_all_options()
    client = {argument: given[flag] for flag, argument in _S3_CLIENT_ARGUMENTS.items() if given.get(flag) is not None}
    return {"client_kwargs": {"S3.Client": client}} if client else None
