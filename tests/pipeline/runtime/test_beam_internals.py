"""The private names of Apache Beam that beam-bpe relies on (pipeline.runtime.beam_internals):
each one is still where the list says, with the attributes beam-bpe reads and, for a
function beam-bpe keeps a copy of, the same code. A failure names the symbol that moved.

Run this first when trying another Beam version (setup.py bounds the range).
"""

import pytest

from pipeline.runtime import beam_internals
from pipeline.runtime.beam_internals import BEAM_PRIVATE_NAMES, BeamName


@pytest.mark.parametrize("entry", BEAM_PRIVATE_NAMES, ids=str)
def test_each_private_beam_name_is_where_beam_bpe_expects_it(entry):
    problem = beam_internals._problem(entry, deep=True)
    assert problem is None, f"Beam changed a name beam-bpe relies on: {problem}"


def test_the_list_names_the_machinerys_main_hooks():
    named = {str(entry) for entry in BEAM_PRIVATE_NAMES}
    for symbol in (
        "apache_beam.runners.portability.fn_api_runner.fn_runner.FnApiRunner",
        "apache_beam.runners.portability.local_job_service.SubprocessSdkWorker.run",
        "apache_beam.runners.portability.fn_api_runner.worker_handlers.WorkerHandler",
        "apache_beam.io.aws.clients.s3.boto3_client.boto3",
        "apache_beam.runners.worker.sdk_worker_main.main",
    ):
        assert symbol in named
    worker_handler = next(e for e in BEAM_PRIVATE_NAMES if e.name == "WorkerHandler")
    assert "control_conn" in worker_handler.attributes


def test_the_runtime_reads_its_beam_module_names_from_the_list():
    from pipeline.runtime import beam_import, s3_sessions

    assert beam_internals.S3_CLIENT_BOTO3 in BEAM_PRIVATE_NAMES and beam_internals.BIGQUERY in BEAM_PRIVATE_NAMES
    assert s3_sessions._BEAM_CLIENT_MODULE == beam_internals.S3_CLIENT_BOTO3.module
    assert beam_internals.BIGQUERY.module in beam_import._KEPT_OUT


@pytest.mark.parametrize("entry, says", [
    (BeamName("apache_beam.runners.portability.fn_api_runner.fn_runner", "FnApiRunner.gone_method", "a test"),
     "fn_runner.FnApiRunner.gone_method is gone"),
    (BeamName("apache_beam.no_such_module", "Thing", "a test"), "apache_beam.no_such_module.Thing is gone"),
    (BeamName("apache_beam.runners.portability.fn_api_runner.worker_handlers", "WorkerHandler", "a test",
              attributes=("no_such_attribute",)), "WorkerHandler no longer has no_such_attribute"),
    (BeamName("apache_beam.runners.portability.local_job_service", "SubprocessSdkWorker.run", "a test",
              source_sha256="0" * 64), "SubprocessSdkWorker.run changed"),
])
def test_a_moved_name_fails_with_its_name_and_use(entry, says, monkeypatch):
    assert says in beam_internals._problem(entry, deep=True)
    monkeypatch.setattr(beam_internals, "BEAM_PRIVATE_NAMES", (*BEAM_PRIVATE_NAMES, entry))
    found = beam_internals.problems(deep=True)
    assert len(found) == 1 and says in found[0] and "a test" in found[0]


def test_a_job_on_the_machinery_refuses_a_beam_without_a_name(monkeypatch):
    from pipeline import runtime
    from pipeline.command_machinery.runners import pipeline_options
    from pipeline.runtime import PLAIN_BEAM_VARIABLE

    monkeypatch.delenv(PLAIN_BEAM_VARIABLE, raising=False)
    gone = BeamName("apache_beam.runners.portability.fn_api_runner.fn_runner", "FnApiRunner.gone", "a test")
    monkeypatch.setattr(beam_internals, "BEAM_PRIVATE_NAMES", (*BEAM_PRIVATE_NAMES, gone))
    beam_internals.require.cache_clear()
    try:
        with pytest.raises(beam_internals.BeamInternalsChanged, match=r"(?s)FnApiRunner\.gone is gone.*BEAM_BPE_PLAIN_BEAM=1"):
            runtime.new_pipeline(pipeline_options([]))
        monkeypatch.setenv(PLAIN_BEAM_VARIABLE, "1")
        assert runtime.new_pipeline(pipeline_options([])) is not None  # plain Beam does not need it
    finally:
        beam_internals.require.cache_clear()
