"""Shared fixtures: a corpus directory, a local S3 bucket, and a proof cache of the run."""

import urllib.request

import pytest

from tests.support.corpora import Corpus


@pytest.fixture
def corpus(tmp_path) -> Corpus:
    """A Corpus writing into a fresh directory."""
    return Corpus(tmp_path / "corpus")


@pytest.fixture
def s3_bucket():
    """A bucket on a real moto S3 server on 127.0.0.1; yields (boto3 client, Beam options)."""
    boto3 = pytest.importorskip("boto3")
    server_module = pytest.importorskip("moto.server")
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    client = boto3.client(
        "s3", endpoint_url=endpoint, region_name="us-east-1",
        aws_access_key_id="testing", aws_secret_access_key="testing",
    )
    client.create_bucket(Bucket="corpus")
    options = [
        f"--s3_endpoint_url={endpoint}", "--s3_region_name=us-east-1",
        "--s3_access_key_id=testing", "--s3_secret_access_key=testing",
    ]
    try:
        yield client, options
    finally:
        # moto keeps its buckets per process, not per server: empty them for the next test.
        urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST")).close()
        server.stop()


@pytest.fixture(autouse=True, scope="session")
def _proof_cache_of_this_run(tmp_path_factory):
    """Engine proofs (bpe.proof_cache) go to a directory of this test run, never the user's cache;
    the CLI subprocesses the tests start inherit it."""
    import os

    from bpe.proof_cache import CACHE_VARIABLE

    previous = os.environ.get(CACHE_VARIABLE)
    os.environ[CACHE_VARIABLE] = str(tmp_path_factory.mktemp("beam-bpe-cache"))
    yield
    if previous is None:
        os.environ.pop(CACHE_VARIABLE, None)
    else:
        os.environ[CACHE_VARIABLE] = previous


# The cluster tests' fixtures (tests/cluster/), for them and for the README's cluster section.
pytest_plugins = ["tests.cluster.fixtures"]
