"""OrdinaryRuns: the runs of text a Hugging Face tokenizer pre-tokenizes, as bytes, in any Beam job."""

import json

import apache_beam as beam
from apache_beam.testing.util import assert_that, equal_to

import bpe
from transforms.ordinary_runs import OrdinaryRuns, ordinary_runs


def _tokenizer_file(tmp_path):
    spec = json.loads(bpe.train({b"ab": 5}, 257).to_json())
    spec["normalizer"] = {"type": "NFC"}
    spec["added_tokens"] = [{"id": 257, "content": "<x>", "single_word": False, "lstrip": False,
                             "rstrip": False, "normalized": False, "special": False}]
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    return str(path)


def test_runs_are_normalized_between_added_tokens_and_keep_invalid_bytes(tmp_path):
    tok = bpe.Tokenizer.load(_tokenizer_file(tmp_path))
    assert ordinary_runs(tok, "cafe\u0301<x>ab<x>") == ["café".encode(), b"ab"]
    assert ordinary_runs(tok, b"\xff<x>\xfe ") == [b"\xff", b"\xfe "]


def test_the_transform_gives_every_documents_runs(tmp_path):
    path = _tokenizer_file(tmp_path)
    with beam.Pipeline() as pipeline:
        runs = pipeline | beam.Create([b"a<x>b", "c<x><x>d\u0301"]) | OrdinaryRuns(path)
        assert_that(runs, equal_to([b"a", b"b", b"c", "d\u0301".encode()]))
