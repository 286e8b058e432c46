"""Beam's S3 clients, one per filesystem call, share one botocore model loader and keep their own settings."""

from pipeline.runtime import beam_import


def _client(port: int):
    from apache_beam.io.aws.clients.s3 import boto3_client

    return boto3_client.Client({
        "s3_endpoint_url": f"http://127.0.0.1:{port}", "s3_region_name": "us-east-1",
        "s3_access_key_id": f"key-{port}", "s3_secret_access_key": "secret",
    }).client


def test_beams_s3_clients_share_one_model_loader_and_keep_their_own_endpoints_and_keys():
    beam_import.import_beam()
    beam_import.import_beam()  # twice: the loader is shared once, not wrapped again
    a, b = _client(1), _client(2)
    assert a._loader is b._loader
    assert (a.meta.endpoint_url, b.meta.endpoint_url) == ("http://127.0.0.1:1", "http://127.0.0.1:2")
    assert a._request_signer._credentials.access_key == "key-1"
    assert b._request_signer._credentials.access_key == "key-2"
    assert a.meta.service_model.service_name == "s3"


def test_boto3_is_imported_when_beam_makes_its_first_s3_client_not_with_beam():
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from pipeline.runtime import beam_import\n"
        "beam_import.import_beam()\n"
        "from apache_beam.io.filesystems import FileSystems\n"
        "print(type(FileSystems.get_filesystem('s3://bucket/key')).__name__, 'boto3' in sys.modules)\n"
        "from apache_beam.io.aws.clients.s3 import boto3_client\n"
        "client = boto3_client.Client({'s3_endpoint_url': 'http://127.0.0.1:1', 's3_region_name': 'us-east-1',\n"
        "                              's3_access_key_id': 'k', 's3_secret_access_key': 's'}).client\n"
        "print(type(client).__module__, 'boto3' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split("\n")[:2] == ["S3FileSystem False", "botocore.client True"]
