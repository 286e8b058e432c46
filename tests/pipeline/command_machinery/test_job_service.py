"""What beam-bpe asks of a job service (pipeline/command_machinery/job_service.py): the options it advertises are
accepted as Beam's PortableRunner accepts them, a flag nobody knows is still refused, and a
cancel reaches a Flink cluster. Against stand-ins: a gRPC job service that only describes its
options, and an HTTP server that answers as Flink's REST API does."""

from __future__ import annotations

import concurrent.futures
import http.server
import json
import socket
import threading

import pytest

from pipeline import cli
from pipeline.command_machinery import job_service
from pipeline.command_machinery.errors import UserError
from pipeline.command_machinery.runners import check_beam_args, pipeline_options

ADVERTISED = {  # what Beam's Flink job server advertises, in part
    "number_of_execution_retries": "INTEGER",
    "object_reuse": "BOOLEAN",
    "flink_conf_dir": "STRING",
}


@pytest.fixture(scope="module")
def job_endpoint():
    grpc = pytest.importorskip("grpc")
    from apache_beam.portability.api import beam_job_api_pb2, beam_job_api_pb2_grpc

    class Describing(beam_job_api_pb2_grpc.JobServiceServicer):
        def DescribePipelineOptions(self, request, context):  # noqa: N802 - the gRPC method's name
            kinds = beam_job_api_pb2.PipelineOptionType.Enum
            return beam_job_api_pb2.DescribePipelineOptionsResponse(options=[
                beam_job_api_pb2.PipelineOptionDescriptor(name=name, type=kinds.Value(kind), default_value="")
                for name, kind in ADVERTISED.items()])

    server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=2))
    beam_job_api_pb2_grpc.add_JobServiceServicer_to_server(Describing(), server)
    port = server.add_insecure_port("localhost:0")
    server.start()
    yield f"localhost:{port}"
    server.stop(None)


def portable(endpoint: str) -> list[str]:
    return ["--runner=PortableRunner", f"--job_endpoint={endpoint}", "--environment_type=EXTERNAL",
            "--environment_config=localhost:50000"]


def test_the_job_service_lists_its_options(job_endpoint):
    assert {o.name: o.type for o in job_service.advertised_options(job_endpoint)} == ADVERTISED


def test_options_the_job_service_advertises_pass_through(job_endpoint):
    check_beam_args([*portable(job_endpoint), "--number_of_execution_retries=10", "--object_reuse",
                     "--flink_conf_dir=/etc/flink"])


def test_a_flag_nobody_knows_is_still_one_line_and_exit_2(job_endpoint, tmp_path, capsys):
    (tmp_path / "in.txt").write_text("a document\n")
    out = tmp_path / "out"
    argv = ["train", "--input", str(tmp_path / "in.txt"), "--vocab-size", "260", "--output", str(out),
            *portable(job_endpoint), "--number_of_execution_retriez=10"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == ["beam-bpe train: error: unknown flag --number_of_execution_retriez: did you mean "
                   "--number_of_execution_retries?"]
    assert not out.exists()
    with pytest.raises(UserError, match=r"unknown flag --no_such_option \(neither a flag of beam-bpe nor a Beam "
                                        r"pipeline option nor one the job service advertises\)"):
        check_beam_args([*portable(job_endpoint), "--no_such_option=1"])


def test_a_job_service_that_does_not_answer_is_one_line():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("localhost", 0))
        port = s.getsockname()[1]
    with pytest.raises(UserError, match=f"cannot ask the job service at localhost:{port} which options it knows"):
        check_beam_args([*portable(f"localhost:{port}"), "--job_server_timeout=1", "--number_of_execution_retries=1"])


def test_direct_runner_flags_never_ask_a_job_service():
    with pytest.raises(UserError, match=r"unknown flag --number_of_execution_retries \(neither a flag of beam-bpe "
                                        r"nor a Beam pipeline option\)$"):
        check_beam_args(["--number_of_execution_retries=1"])


class _FlinkRest(http.server.BaseHTTPRequestHandler):
    """Flink's REST API for one running job, named as the test says; records a cancel."""

    jobs: dict = {}

    def _answer(self, body: dict, status: int = 200) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):  # noqa: N802 - http.server's name
        if self.path == "/jobs/overview":
            self._answer({"jobs": [{"jid": jid, "name": job["name"], "state": job["state"]}
                                   for jid, job in self.jobs.items()]})
        else:
            self._answer({"state": self.jobs[self.path.split("/")[2]]["state"]})

    def do_PATCH(self):  # noqa: N802
        jid = self.path.split("/")[2].split("?")[0]
        assert self.path.endswith("?mode=cancel")
        self.jobs[jid]["state"] = "CANCELED"
        self._answer({}, status=202)

    def log_message(self, *args):
        pass


def test_a_cancel_reaches_the_flink_job_by_its_name():
    _FlinkRest.jobs = {"a" * 32: {"name": "beam-bpe-mine", "state": "RUNNING"},
                       "b" * 32: {"name": "someone-else", "state": "RUNNING"}}
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FlinkRest)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    cancelled = []

    class Result:  # what PortableRunner's run() returns, as far as a cancel goes
        def cancel(self):
            cancelled.append(True)

    try:
        options = pipeline_options(["--runner=PortableRunner", "--job_endpoint=localhost:1", "--job_name=beam-bpe-mine",
                                    f"--flink_master=127.0.0.1:{server.server_port}"])
        job_service.cancel(Result(), options)
    finally:
        server.shutdown()
    assert cancelled == [True]
    assert {jid: job["state"] for jid, job in _FlinkRest.jobs.items()} == {"a" * 32: "CANCELED", "b" * 32: "RUNNING"}


def test_a_portable_job_gets_a_name_of_its_own_and_a_given_one_stays():
    from apache_beam.options.pipeline_options import GoogleCloudOptions

    named = pipeline_options(["--runner=PortableRunner", "--job_endpoint=localhost:1"])
    assert named.view_as(GoogleCloudOptions).job_name.startswith("beam-bpe-")
    given = pipeline_options(["--runner=PortableRunner", "--job_endpoint=localhost:1", "--job_name=mine"])
    assert given.view_as(GoogleCloudOptions).job_name == "mine"
    assert pipeline_options([]).view_as(GoogleCloudOptions).job_name is None


def test_an_interrupt_while_waiting_for_a_job_elsewhere_cancels_it(capsys):
    from apache_beam.runners.portability.portable_runner import PipelineResult

    from pipeline.runtime import cancel_on_stop

    cancelled = []
    elsewhere = PipelineResult(None, "job", iter(()), iter(()))
    with pytest.raises(KeyboardInterrupt), cancel_on_stop(elsewhere, lambda: cancelled.append("job")):
        raise KeyboardInterrupt
    assert cancelled == ["job"]
    assert capsys.readouterr().err == "beam-bpe: interrupted, and the job was cancelled\n"

    class HereResult:  # a DirectRunner job: it ends with this process
        pass

    with pytest.raises(KeyboardInterrupt), cancel_on_stop(HereResult(), lambda: cancelled.append("here")):
        raise KeyboardInterrupt
    assert cancelled == ["job"]


JAVA_FAILURE = """Pipeline beam-bpe-x failed in state FAILED: org.apache.flink.runtime.client.JobExecutionException: \
Job execution failed.
\tat org.apache.flink.runtime.jobmaster.JobResult.toJobExecutionResult(JobResult.java:144)
Caused by: org.apache.flink.runtime.JobException: Recovery is suppressed by FixedDelayRestartBackoffTimeStrategy
\tat org.apache.flink.runtime.executiongraph.failover.ExecutionFailureHandler.handleFailure(ExecutionFailureHandler.java:180)
Caused by: java.util.concurrent.TimeoutException: Heartbeat of TaskManager with id 10.79.1.4:41234-abc timed out.
\t... 30 more
"""


def test_a_job_failed_on_a_cluster_is_one_line_with_its_root_cause_and_where_to_look():
    options = pipeline_options(["--runner=PortableRunner", "--flink_master=10.0.0.2:8081"])
    failed = job_service.failure(RuntimeError(JAVA_FAILURE), options)
    line = str(failed)
    assert "\n" not in line
    assert "java.util.concurrent.TimeoutException: Heartbeat of TaskManager with id 10.79.1.4:41234-abc timed out." \
        in line
    assert "http://10.0.0.2:8081" in line and "nothing was marked complete" in line
    # Without a Caused by: the first line; without --flink_master: the runner's logs.
    plain = str(job_service.failure(RuntimeError("Pipeline x failed in state FAILED: out of slots\nmore"),
                                    pipeline_options(["--runner=PortableRunner"])))
    assert "out of slots" in plain and "more" not in plain and "the runner's logs" in plain


def test_a_failed_cluster_job_ends_the_command_with_one_line_and_exit_1(monkeypatch, capsys, tmp_path):
    """Through the CLI: a PortableRunner job whose wait raises as Beam's does when the cluster fails it."""
    from apache_beam.options.pipeline_options import StandardOptions
    from apache_beam.runners.portability.portable_runner import PortableRunner

    class FailedResult:
        def wait_until_finish(self, duration=None):
            raise RuntimeError(JAVA_FAILURE)

    def run_pipeline(self, pipeline, options):
        options.view_as(StandardOptions).runner = None  # as Beam's own does, so the job server never sees it
        return FailedResult()

    monkeypatch.setattr(PortableRunner, "run_pipeline", run_pipeline)
    corpus = tmp_path / "in.txt"
    corpus.write_text("some text to count\n")
    code = cli.main(["train", "--input", str(corpus), "--vocab-size", "260", "--output", str(tmp_path / "tok"),
                     "--runner=PortableRunner", "--job_endpoint=localhost:1"])
    err = capsys.readouterr().err
    assert code == 1
    assert "beam-bpe train: error: the job failed on the cluster: java.util.concurrent.TimeoutException" in err
    assert "Traceback" not in err
    assert not (tmp_path / "tok" / "tokenizer.json").exists()
