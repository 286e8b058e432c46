"""Runtime verification in ``beam-bpe encode``: ``--verify-fraction`` re-encodes a
fixed sample of documents with the reference and fails the job, naming the
document, when an engine gives other IDs."""

from __future__ import annotations

import json

import pytest

import bpe
from bpe import engines
from pipeline import cli
from tests.support.cli import IN_MEMORY
from tests.support.outputs import read_rows
from tests.support.real_text import multilingual
from tests.support.toy_tokenizers import train_small
from transforms.encode import VerificationError, verified

EOS = "<|endoftext|>"
WRONG = "wrong-here"  # the fake engine gets documents holding this word wrong


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    tok = train_small(multilingual(2), vocab_size=600, special_tokens=(EOS,))
    return tok.save(str(tmp_path_factory.mktemp("tok")))


@pytest.fixture
def corpus(tmp_path):
    """40 documents in two files; record 7 of b.jsonl holds WRONG."""
    text = "\n".join(multilingual(2, start=4))
    texts = [text[i * 400 : (i + 1) * 400] for i in range(40)]
    root = tmp_path / "corpus"
    root.mkdir()
    for name, part in [("a.jsonl", texts[:20]), ("b.jsonl", texts[20:40])]:
        lines = [json.dumps({"text": text + (f" {WRONG}" if name == "b.jsonl" and i == 6 else "")}) for i, text in enumerate(part)]
        (root / name).write_text("\n".join(lines) + "\n")
    return root


def encode(tokenizer, corpus, out, *flags) -> int:
    return cli.main(
        ["encode", "--tokenizer", tokenizer, "--input", str(corpus / "*.jsonl"), "--output", str(out), "--id-field", "", *flags, *IN_MEMORY]
    )


class OffByOne:
    """An engine that gives one extra token to documents holding WRONG: a wrong engine."""

    def __init__(self, engine):
        self.engine, self.name, self.proof, self.fallbacks = engine, f"off-by-one {engine.name}", engine.proof, 0
        self.reason = engine.reason

    def encode_array(self, data):
        ids = self.engine.encode_array(data)
        if WRONG.encode() in (data if isinstance(data, bytes) else data.encode()):
            ids.append(1)
        return ids


@pytest.fixture
def wrong_engine(monkeypatch):
    """Every engine built from a proof (the workers' engines: the job runs in this process) is OffByOne."""
    from_proof = engines.from_proof
    monkeypatch.setattr(engines, "from_proof", lambda tok, proof: OffByOne(from_proof(tok, proof)))


def test_the_sample_is_deterministic_and_about_the_fraction():
    keys = [(f"gs://bucket/part-{i % 7}.jsonl.gz", i) for i in range(20000)]
    sample = [k for k in keys if verified(*k, 0.05)]
    assert 800 < len(sample) < 1200
    assert sample == [k for k in keys if verified(*k, 0.05)]  # the same every time
    assert set(sample) <= {k for k in keys if verified(*k, 0.2)}  # a larger fraction keeps the smaller sample
    assert not any(verified(*k, 0.0) for k in keys[:1000]) and all(verified(*k, 1.0) for k in keys[:1000])


def test_a_wrong_engine_fails_the_job_naming_the_document(tokenizer, corpus, tmp_path, wrong_engine):
    with pytest.raises(Exception, match=r"b\.jsonl:7 .*other IDs than the reference encoder, from token \d+") as info:
        encode(tokenizer, corpus, tmp_path / "out", "--verify-fraction", "1")
    assert "VerificationError" in repr(info.value) or isinstance(info.value, VerificationError)
    assert not (tmp_path / "out" / "stats.json").exists()


def test_without_verification_the_wrong_engine_goes_unnoticed(tokenizer, corpus, tmp_path, wrong_engine):
    """What the check above is for: the same job with verification off writes the wrong IDs."""
    out = tmp_path / "out"
    assert encode(tokenizer, corpus, out, "--verify-fraction", "0") == 0
    assert json.loads((out / "stats.json").read_text())["verified_documents"] == 0
    tok = bpe.Tokenizer.load(tokenizer)
    wrong = [row_id for row_id, ids in read_rows(out) if ids != tok.reference.encode(_text(corpus, row_id))]
    assert [row_id.rsplit("/", 1)[-1] for row_id in wrong] == ["b.jsonl:7"]


def _text(corpus, row_id: str) -> str:
    path, record = row_id.rsplit(":", 1)
    return json.loads(open(path).read().splitlines()[int(record) - 1])["text"]


def test_verified_documents_are_counted_in_stats(tokenizer, corpus, tmp_path):
    out = tmp_path / "out"
    assert encode(tokenizer, corpus, out, "--verify-fraction", "0.5") == 0
    stats = json.loads((out / "stats.json").read_text())
    rows = read_rows(out)
    expected = sum(verified(path, int(record), 0.5) for path, record in (r.rsplit(":", 1) for r, _ in rows))
    assert 0 < expected < len(rows) == 40
    assert stats["verified_documents"] == expected
    tok = bpe.Tokenizer.load(tokenizer)
    assert all(ids == tok.reference.encode(_text(corpus, row_id)) for row_id, ids in rows)


def test_the_default_fraction_and_its_range(tokenizer, corpus, tmp_path, capsys):
    assert encode(tokenizer, corpus, tmp_path / "out") == 0
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert stats["verified_documents"] == sum(
        verified(str(corpus / name), record, 0.001) for name in ("a.jsonl", "b.jsonl") for record in range(1, 21)
    )
    for bad in ("1.5", "-0.1", "nan"):
        assert encode(tokenizer, corpus, tmp_path / "bad", "--verify-fraction", bad) == 2
        assert "beam-bpe encode: error: --verify-fraction must be between 0 and 1" in capsys.readouterr().err
