"""What beam-bpe asks of the job service a portable job goes to (Flink's, Spark's, Beam's own).

    options = advertised_options("localhost:8099")   # the pipeline options the job service knows
    cancel(result, options)                           # a stop: the job cancelled on its runner
    raise failure(error, options)                     # a failed job as one line (errors.JobFailed)

Beam's PortableRunner accepts every option the job service advertises
(``DescribePipelineOptions``), so beam-bpe does too (``pipeline.command_machinery.runners.check_beam_args``).

Cancelling: Beam's Flink job server (2.70) answers a cancel by dropping its own wait for the
job, and the job goes on running on the cluster. So when the options name the cluster
(``--flink_master``), the job is also cancelled through Flink's REST API, found by its name
(the Beam job name, which beam-bpe sets when the user does not: ``pipeline.command_machinery.runners``).
"""

from __future__ import annotations

import dataclasses
import json
import time
import urllib.parse
import urllib.request

from pipeline.command_machinery.errors import JobFailed

__all__ = ["AdvertisedOption", "advertised_options", "cancel", "failure"]

_FLINK_TERMINAL = {"FINISHED", "FAILED", "CANCELED", "SUSPENDED"}
_FLINK_CANCEL_WAIT = 15.0  # seconds to wait for Flink to confirm the cancel
_MAX_REASON = 300  # characters of the runner's reason in the one line of a failed job


@dataclasses.dataclass(frozen=True)
class AdvertisedOption:
    """One pipeline option a job service knows: ``--NAME``, its type and its default."""

    name: str
    type: str  # STRING, BOOLEAN, INTEGER, NUMBER, ARRAY, OBJECT
    default: str


def advertised_options(endpoint: str, timeout: float = 30.0) -> list[AdvertisedOption]:
    """The options the job service at ``endpoint`` advertises.

    Raises:
      grpc.RpcError: the job service cannot be reached.
    """
    import grpc
    from apache_beam.portability.api import beam_job_api_pb2, beam_job_api_pb2_grpc

    with grpc.insecure_channel(endpoint) as channel:
        grpc.channel_ready_future(channel).result(timeout=timeout)
        answer = beam_job_api_pb2_grpc.JobServiceStub(channel).DescribePipelineOptions(
            beam_job_api_pb2.DescribePipelineOptionsRequest(), timeout=timeout)
    kinds = beam_job_api_pb2.PipelineOptionType.Enum
    return [AdvertisedOption(o.name, kinds.Name(o.type), o.default_value) for o in answer.options]


def _flink_rest(options) -> str | None:
    """Flink's REST address from ``--flink_master``, or None (not set, or "[auto]", "[local]")."""
    from apache_beam.options.pipeline_options import FlinkRunnerOptions

    master = options.view_as(FlinkRunnerOptions).flink_master
    if not master or master.startswith("["):
        return None
    return (master if "://" in master else f"http://{master}").rstrip("/")


def _flink(rest: str, path: str, method: str = "GET") -> dict:
    with urllib.request.urlopen(urllib.request.Request(rest + path, method=method), timeout=5) as answer:
        body = answer.read()
    return json.loads(body) if body else {}


def _cancel_on_flink(rest: str, job_name: str) -> None:
    """Cancels every unfinished Flink job named ``job_name`` and waits until Flink has."""
    jobs = [job["jid"] for job in _flink(rest, "/jobs/overview")["jobs"]
            if job["name"] == job_name and job["state"] not in _FLINK_TERMINAL]
    for jid in jobs:
        _flink(rest, f"/jobs/{urllib.parse.quote(jid)}?mode=cancel", method="PATCH")
    deadline = time.monotonic() + _FLINK_CANCEL_WAIT
    while jobs and time.monotonic() < deadline:
        jobs = [jid for jid in jobs if _flink(rest, f"/jobs/{jid}")["state"] not in _FLINK_TERMINAL]
        time.sleep(0.2)
    if jobs:
        raise TimeoutError(f"Flink did not cancel job {jobs[0]} within {_FLINK_CANCEL_WAIT:.0f} s")


def cancel(result, options) -> None:
    """Cancels the job of ``result`` (what PortableRunner's ``run()`` returned) on its runner.

    Args:
      result: the running job's result.
      options: the job's pipeline options.

    Raises:
      Exception: the job service or the cluster did not take the cancel.
    """
    from apache_beam.options.pipeline_options import GoogleCloudOptions

    try:
        result.cancel()  # the job service's own cancel
    finally:
        rest = _flink_rest(options)
        job_name = options.view_as(GoogleCloudOptions).job_name
        if rest and job_name:
            _cancel_on_flink(rest, job_name)


def failure(error: Exception, options) -> JobFailed:
    """A failed job's one line, from what waiting for it raised: the job service's state and
    the runner's root cause (a Java stack trace's last "Caused by:"), and where the rest is.

    Args:
      error: what the result's ``wait_until_finish()`` raised.
      options: the job's pipeline options.
    """
    import grpc

    if isinstance(error, grpc.RpcError):
        code = error.code().name if callable(getattr(error, "code", None)) else "error"
        return JobFailed(f"lost the job service ({code}) while the job ran; the job may still run on the "
                         "cluster: check it there before running the command again")
    text = str(error)
    causes = [line.strip()[len("Caused by:"):].strip() for line in text.splitlines()
              if line.strip().startswith("Caused by:")]
    reason = causes[-1] if causes else next((line.strip() for line in text.splitlines() if line.strip()),
                                             type(error).__name__)
    if len(reason) > _MAX_REASON:
        reason = reason[: _MAX_REASON - 3] + "..."
    rest = _flink_rest(options)
    where = f"Flink's web UI at {rest}" if rest else "the runner's logs"
    return JobFailed(f"the job failed on the cluster: {reason} (the whole story: {where}); nothing was marked "
                     "complete, and the same command runs it again")
