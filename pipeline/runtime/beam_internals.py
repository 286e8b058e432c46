"""Every name inside Apache Beam that beam-bpe relies on and Beam does not promise to keep.

    BEAM_PRIVATE_NAMES        # the list: module, name, the instance attributes read, what for
    require()                 # raises BeamInternalsChanged naming each one that is gone
    problems(deep=True)       # the same as lines; deep: also the attributes and the copied code

The start-up machinery (``pipeline.runtime``) subclasses Beam's FnApiRunner and worker pool,
keeps a copy of ``SubprocessSdkWorker.run``, watches a worker's
``control_conn``, swaps the ``boto3`` of Beam's S3 client and keeps modules out
while Beam is imported; the checks of Beam's flags (``pipeline.command_machinery.runners``) and
the progress display (``pipeline.command_machinery.progress``) read a few private names too. None
of these is Beam's public API, so a new Beam release may move any of them. This
list is the one place that says which: the runtime checks it before it runs a
job with its own runner (``require``, names only), and ``tests/pipeline/runtime/test_beam_internals.py``
checks every entry deeply, so a Beam that moved one fails with the entry's name
and use instead of somewhere inside a job.

``setup.py`` bounds apache-beam to the versions this list was checked against;
to widen the bound, install the new Beam and run that test (a changed copied
function shows its new SHA-256: compare the code, update the copy, then the hash).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib
import inspect

__all__ = ["BEAM_PRIVATE_NAMES", "BIGQUERY", "S3_CLIENT_BOTO3", "BeamInternalsChanged", "BeamName", "problems", "require"]


@dataclasses.dataclass(frozen=True)
class BeamName:
    """One name inside Beam that beam-bpe relies on.

    Attributes:
      module: the module's dotted path.
      name: the attribute's path in the module ("FnApiRunner._get_bundle_manager");
        "" for the module itself.
      use: where beam-bpe uses it, and how.
      attributes: attributes of the class's instances that beam-bpe reads or sets
        (assigned in the class's code, or on the class).
      source_sha256: the SHA-256 of the function's source, for a function whose
        code beam-bpe keeps a copy of or relies on line by line.
    """

    module: str
    name: str
    use: str
    attributes: tuple[str, ...] = ()
    source_sha256: str | None = None

    def __str__(self) -> str:
        return f"{self.module}.{self.name}" if self.name else self.module


_FN_RUNNER = "apache_beam.runners.portability.fn_api_runner.fn_runner"
_WORKER_HANDLERS = "apache_beam.runners.portability.fn_api_runner.worker_handlers"
_EXECUTION = "apache_beam.runners.portability.fn_api_runner.execution"
_LOCAL_JOB_SERVICE = "apache_beam.runners.portability.local_job_service"
_PORTABLE_RUNNER = "apache_beam.runners.portability.portable_runner"
_MONITORING_INFOS = "apache_beam.metrics.monitoring_infos"

# Named here too: the modules that use them read their module paths from these.
S3_CLIENT_BOTO3 = BeamName("apache_beam.io.aws.clients.s3.boto3_client", "boto3",
                           "runtime.s3_sessions: swapped for one that shares botocore's model loader")
BIGQUERY = BeamName("apache_beam.io.gcp.bigquery", "", "runtime.beam_import: kept out while Beam is imported")

BEAM_PRIVATE_NAMES: tuple[BeamName, ...] = (
    # pipeline.runtime.runner: the FnApiRunner whose workers come from pipeline.runtime.warm_workers.
    BeamName(_FN_RUNNER, "FnApiRunner", "runtime.runner: subclassed as _FnApiRunner; Beam's own in plain mode"),
    BeamName(_FN_RUNNER, "FnApiRunner._get_bundle_manager", "runtime.runner: overridden to watch a stage's workers"),
    BeamName(_FN_RUNNER, "FnApiRunner.run_via_runner_api", "runtime.runner: overridden to name the warm environment"),
    BeamName(_FN_RUNNER, "ExtendedProvisionInfo", "runtime.runner: the workers' pipeline options, as DirectRunner"),
    BeamName(_PORTABLE_RUNNER, "JobServiceHandle.encode_pipeline_options",
             "runtime.runner: the workers' pipeline options, as DirectRunner gives them"),
    BeamName("apache_beam.portability.python_urns", "SUBPROCESS_SDK",
             "runtime.runner: the environment multi_processing mode runs, renamed to the warm one"),
    BeamName(_LOCAL_JOB_SERVICE, "SubprocessSdkWorker", "runtime.runner: subclassed as _WarmSdkWorker",
             attributes=("_worker_command_line", "_control_address", "_provision_info", "_worker_id")),
    BeamName(_LOCAL_JOB_SERVICE, "SubprocessSdkWorker.run", "runtime.runner: _WarmSdkWorker.run is a copy of it",
             source_sha256="e6aa3e5430e191ab290e42adc5ffc7fdfc1e0a77bf1b94daacad97b19a06b94e"),
    BeamName(_LOCAL_JOB_SERVICE, "BeamFnLoggingServicer", "runtime.runner: the copied run's logging service"),
    BeamName("apache_beam.utils.thread_pool_executor", "shared_unbounded_instance",
             "runtime.runner: the copied run's gRPC thread pool"),
    BeamName(_WORKER_HANDLERS, "SUBPROCESS_LOCK", "runtime.runner: held while a worker process starts, as Beam does"),
    BeamName(_WORKER_HANDLERS, "WorkerHandler.register_environment",
             "runtime.runner: registers the handler of the warm environment"),
    BeamName(_WORKER_HANDLERS, "SubprocessSdkWorkerHandler", "runtime.runner: subclassed as _WarmSubprocessWorkerHandler",
             attributes=("_worker_command_line", "control_address", "provision_info", "worker_id", "worker",
                         "worker_thread")),
    BeamName(_WORKER_HANDLERS, "SubprocessSdkWorkerHandler.start_worker",
             "runtime.runner: _WarmSubprocessWorkerHandler.start_worker is a copy of it, with another worker class",
             source_sha256="eb622509cbc26327cc69492be2f946b557c41bc108f62fdc3363f5a4990be752"),
    BeamName(_EXECUTION, "BundleContextManager.worker_handlers", "runtime.runner: the workers a stage runs on"),
    # pipeline.runtime.live_counters: the counters of a running job.
    BeamName(_WORKER_HANDLERS, "WorkerHandler", "runtime.live_counters: its control_conn is wrapped",
             attributes=("control_conn",)),
    BeamName(_WORKER_HANDLERS, "ControlConnection.push", "runtime.live_counters: bundles and progress requests"),
    BeamName(_WORKER_HANDLERS, "EmbeddedWorkerHandler.push", "runtime.live_counters: an in-process worker's push"),
    BeamName(_WORKER_HANDLERS, "ControlFuture.is_done", "runtime.live_counters: whether a bundle has ended"),
    BeamName(_WORKER_HANDLERS, "ControlFuture.get", "runtime.live_counters: a bundle's or a progress request's answer"),
    BeamName(_MONITORING_INFOS, "is_user_monitoring_info", "runtime.live_counters: the user counters"),
    BeamName(_MONITORING_INFOS, "is_counter", "runtime.live_counters: the user counters"),
    BeamName(_MONITORING_INFOS, "parse_namespace_and_name", "runtime.live_counters: a counter's key"),
    BeamName(_MONITORING_INFOS, "extract_counter_value", "runtime.live_counters: a counter's value"),
    # pipeline.runtime.worker_pool: Beam's worker pool for EXTERNAL environments, workers copied from a template.
    BeamName("apache_beam.runners.worker.worker_pool_main", "BeamFnExternalWorkerPoolServicer",
             "runtime.worker_pool: subclassed; a copy's worker is registered (and stopped) as Beam's are",
             attributes=("_worker_processes", "_state_cache_size", "_data_buffer_time_limit_ms")),
    BeamName("apache_beam.runners.worker.sdk_worker", "SdkHarness", "runtime.worker_pool: a copy runs it, as Beam's pool"),
    # pipeline.runtime.worker, beam_import, s3_sessions.
    BeamName("apache_beam.runners.worker.sdk_worker_main", "main", "runtime.worker: runs Beam's worker"),
    BeamName("apache_beam.runners.worker.statesampler", "StateSampler",
             "runtime.worker: subclassed with a shorter sampling period and put in its place, where the bundle "
             "processors make theirs", attributes=("sampling_period_ms",)),
    S3_CLIENT_BOTO3,
    BIGQUERY,
    # pipeline.command_machinery.runners and pipeline.command_machinery.progress (not start-up machinery, but private all the same).
    BeamName("apache_beam.options.pipeline_options", "_BeamArgumentParser",
             "runners.check_beam_args: Beam's parser of pipeline options"),
    BeamName("apache_beam.options.pipeline_options", "PipelineOptions._add_argparse_args",
             "runners.check_beam_args: how Beam collects its options"),
    BeamName("apache_beam.runners.runner", "_RUNNER_MAP", "runners.check_beam_args: the runners Beam knows"),
    BeamName(_LOCAL_JOB_SERVICE, "", "runners.pipeline_options: its logger is quietened"),
    BeamName(_PORTABLE_RUNNER, "PipelineResult", "progress: a portable job's metrics are asked for again",
             attributes=("_metrics",)),
)


class BeamInternalsChanged(RuntimeError):
    """The installed Beam lacks a name beam-bpe relies on (``BEAM_PRIVATE_NAMES``)."""


def _resolve(entry: BeamName):
    value = importlib.import_module(entry.module)
    for part in filter(None, entry.name.split(".")):
        value = getattr(value, part)
    return value


def _has_attribute(cls: type, attribute: str) -> bool:
    """Whether instances of ``cls`` have ``attribute``: on the class, or assigned in the code
    of the class or of one of its bases."""
    if hasattr(cls, attribute):
        return True
    for klass in cls.__mro__[:-1]:
        try:
            source = inspect.getsource(klass)
        except (OSError, TypeError):
            continue
        if f"self.{attribute} =" in source or f"self.{attribute}:" in source:
            return True
    return False


def _problem(entry: BeamName, deep: bool) -> str | None:
    """What is wrong with one entry in the installed Beam; None when nothing is."""
    try:
        value = _resolve(entry)
    except (ImportError, AttributeError) as e:
        return f"{entry} is gone ({type(e).__name__}: {e}); used by {entry.use}"
    if not deep:
        return None
    missing = [name for name in entry.attributes if not _has_attribute(value, name)]
    if missing:
        return f"{entry} no longer has {', '.join(missing)}; used by {entry.use}"
    if entry.source_sha256 is not None:
        found = hashlib.sha256(inspect.getsource(value).encode("utf-8")).hexdigest()
        if found != entry.source_sha256:
            return (f"{entry} changed (its source's SHA-256 is {found}, beam-bpe's copy was made from "
                    f"{entry.source_sha256}); used by {entry.use}")
    return None


def problems(deep: bool = False) -> list[str]:
    """One line per entry of ``BEAM_PRIVATE_NAMES`` that the installed Beam does not match.

    Args:
      deep: also check each entry's instance attributes and the code of the copied functions.
    """
    return [line for entry in BEAM_PRIVATE_NAMES if (line := _problem(entry, deep)) is not None]


@functools.lru_cache(maxsize=None)
def require(way_out: str = "") -> None:
    """Raises ``BeamInternalsChanged`` when a name of ``BEAM_PRIVATE_NAMES`` is gone (checked
    once per process, names only).

    Args:
      way_out: the end of the message: how to run without the names.

    Raises:
      BeamInternalsChanged: naming each name that is gone and its use.
    """
    import apache_beam

    found = problems()
    if found:
        raise BeamInternalsChanged(
            f"apache-beam {apache_beam.__version__} lacks names beam-bpe relies on "
            "(pipeline.runtime.beam_internals):\n  " + "\n  ".join(found)
            + "\nInstall an apache-beam version that setup.py names" + (f", or {way_out}" if way_out else "")
        )
