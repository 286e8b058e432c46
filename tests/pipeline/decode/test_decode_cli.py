"""``beam-bpe decode --stream`` through a real pipe: live output, whole characters, errors."""

import json
import os
import pathlib
import random
import select
import subprocess
import sys
import time

import pytest

import bpe
from pipeline import cli
from pipeline.decode import command as decode
from tests.support.real_text import multilingual
from tests.support.toy_tokenizers import train_small

BEAM_BPE = [sys.executable, "-m", "pipeline.cli", "decode"]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    tok = train_small(multilingual(1), vocab_size=500)
    path = tok.save(str(tmp_path_factory.mktemp("tok")))
    return bpe.Tokenizer.load(path), path


def start(tok_path, *flags):
    return subprocess.Popen(
        [*BEAM_BPE, "--tokenizer", tok_path, "--stream", *flags],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=str(pathlib.Path(__file__).resolve().parents[3]),
    )


def read_available(fd, timeout):
    """Whatever the process has written within ``timeout`` seconds."""
    out = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        out += chunk
        if out:
            deadline = min(deadline, time.monotonic() + 0.05)
    return out


def test_stream_decodes_live_in_random_chunks_without_splitting_characters(tokenizer):
    tok, path = tokenizer
    rng = random.Random(4)
    text = "".join(multilingual(1, start=2))[:20000] + " 😀👍🏽 €uro 漢字"
    ids = tok.encode(text)
    stream = " ".join(map(str, ids)).encode() + b"\n"
    proc = start(path)
    out = b""
    pos = 0
    pieces_seen_before_end = 0
    while pos < len(stream):
        # Random cut points split IDs ("12" + "34") and multi-byte characters alike.
        step = rng.randint(1, 4000)
        proc.stdin.write(stream[pos : pos + step])
        proc.stdin.flush()
        pos += step
        if rng.random() < 0.3:
            # The first text may wait for the process to start (a busy machine); after
            # that, text arrives within moments of its IDs.
            short_wait = pieces_seen_before_end or pos < 1000  # 1000 bytes of IDs hold whole characters
            got = read_available(proc.stdout.fileno(), 2.0 if short_wait else 60.0)
            if got:
                pieces_seen_before_end += 1
                got.decode("utf-8")  # never half a character: strict decoding succeeds
            out += got
    proc.stdin.close()
    out += proc.stdout.read()
    assert proc.wait(timeout=30) == 0, proc.stderr.read()
    assert pieces_seen_before_end >= 3  # output appeared before the end of input
    assert out.decode("utf-8") == text  # nothing added, nothing lost


def test_stream_matches_the_stream_decoder_on_random_ids(tokenizer, tmp_path):
    tok, path = tokenizer
    rng = random.Random(5)
    ids = [rng.randrange(tok.vocab_size) for _ in range(3000)]
    dec = tok.stream_decoder()
    expected = "".join(dec.step(i) for i in ids) + dec.flush()
    result = subprocess.run(
        [*BEAM_BPE, "--tokenizer", path, "--stream"],
        input="\n".join(map(str, ids)).encode(),
        capture_output=True,
        cwd=str(pathlib.Path(__file__).resolve().parents[3]),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode("utf-8") == expected


@pytest.fixture
def run_stream(monkeypatch):
    """Runs ``decode --stream`` in-process with ``data`` on a pipe as stdin."""

    def run(tok_path, data: bytes, *flags):
        r, w = os.pipe()
        os.write(w, data)
        os.close(w)
        with os.fdopen(r, "rb") as stdin:
            monkeypatch.setattr(sys, "stdin", stdin)
            return cli.main(["decode", "--tokenizer", tok_path, "--stream", *flags])

    return run


def test_incomplete_tail_becomes_replacement_or_strict_error(tokenizer, capfdbinary, run_stream):
    tok, path = tokenizer
    euro = list("€".encode())  # three byte tokens; send only the first two
    data = f"104 105 {euro[0]} {euro[1]}".encode()
    assert run_stream(path, data) == 0
    assert capfdbinary.readouterr().out == "hi\ufffd".encode()
    assert run_stream(path, data, "--strict") == 2
    captured = capfdbinary.readouterr()
    assert captured.out == b"hi"
    assert b"position 2" in captured.err and b"incomplete UTF-8" in captured.err


def test_strict_names_an_invalid_byte_mid_stream(tokenizer, capfdbinary, run_stream):
    _, path = tokenizer
    assert run_stream(path, b"104 255 105") == 0
    assert capfdbinary.readouterr().out == "h\ufffdi".encode()
    assert run_stream(path, b"104 255 105", "--strict") == 2
    captured = capfdbinary.readouterr()
    assert captured.out == b"h"
    assert b"invalid UTF-8 in the bytes of the token at position 1" in captured.err


@pytest.mark.parametrize(
    "data, before, message",
    [
        (b"104 105 abc 106", b"hi", "token 'abc' at position 2 is not a non-negative integer ID"),
        (b"104 -1", b"h", "token '-1' at position 1 is not"),
        (b"104 1_0", b"h", "token '1_0' at position 1 is not"),
        (b"104 105 99999", b"hi", "token ID 99999 at position 2 is out of range: the vocabulary has 500 tokens"),
    ],
)
def test_bad_tokens_are_named_with_their_position(tokenizer, capfdbinary, run_stream, data, before, message):
    _, path = tokenizer
    assert run_stream(path, data) == 2
    captured = capfdbinary.readouterr()
    assert captured.out == before  # the text before the bad token was written
    err = captured.err.decode()
    assert message in err and err.count("\n") == 1


def test_empty_input_writes_nothing(tokenizer, capfdbinary, run_stream):
    _, path = tokenizer
    assert run_stream(path, b"  \n ") == 0
    assert capfdbinary.readouterr().out == b""


class _Sink:
    """A binary output that keeps only a hash and a length, like a pipe to another process."""

    def __init__(self):
        import hashlib

        self.hash, self.size = hashlib.sha256(), 0

    def write(self, data: bytes) -> int:
        self.hash.update(data)
        self.size += len(data)
        return len(data)

    def flush(self):
        pass


def test_a_huge_document_decodes_in_bounded_python_memory(tokenizer, tmp_path):
    """One row of about 2 million tokens: decoded in slices, never as one Python list."""
    import hashlib
    import tracemalloc

    import pyarrow as pa
    import pyarrow.parquet as pq

    from pipeline.decode import command as decode
    from tests.support.cli import IN_MEMORY

    tok, path = tokenizer
    text = "".join(multilingual(3)).encode("utf-8")
    text = (text * (5_000_000 // len(text) + 1))[:5_000_000].decode("utf-8", "ignore")
    pq.write_table(pa.table({"text": [text], "id": ["huge"]}), tmp_path / "doc.parquet")
    out = tmp_path / "shards"
    assert cli.main(["encode", "--tokenizer", path, "--input", str(tmp_path / "doc.parquet"), "--output", str(out),
                     "--append-eos", *IN_MEMORY]) == 0
    tokens = pq.read_table(out / "part-00000-of-00001.parquet").column("tokens")[0].values
    assert len(tokens) > 1_000_000

    sink = _Sink()
    tracemalloc.start()
    try:
        assert decode.decode_shards(tok, [str(out / "part-*.parquet")], sink) == 1
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert sink.hash.hexdigest() == hashlib.sha256(text.encode("utf-8")).hexdigest()  # exact, EOS removed
    # A list of the document's IDs alone would be 8 bytes per token; its bytes 5 MB.
    assert peak < 4 * len(tokens), peak


def test_a_huge_stream_decodes_in_bounded_python_memory(tokenizer, tmp_path):
    """About 2 million IDs on one line: read, parsed and decoded a read at a time."""
    import hashlib
    import tracemalloc

    from pipeline.decode import command as decode

    tok, _ = tokenizer
    text = "".join(multilingual(3)).encode("utf-8")
    text = (text * (5_000_000 // len(text) + 1))[:5_000_000].decode("utf-8", "ignore").encode("utf-8")
    ids = tok.encode(text)
    (tmp_path / "ids").write_bytes(" ".join(map(str, ids)).encode())
    del ids
    sink = _Sink()
    fd = os.open(tmp_path / "ids", os.O_RDONLY)
    tracemalloc.start()
    try:
        decode.decode_stream(tok, fd, sink)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        os.close(fd)
    assert sink.hash.hexdigest() == hashlib.sha256(text).hexdigest()
    assert peak < 4_000_000, peak  # the document is 5 MB, its IDs as a list far more


def test_a_directory_input_reads_only_its_shards(tokenizer, tmp_path, capfdbinary):
    """``--input SHARDS_DIR/`` (or without the slash) decodes the token shards in it, as the
    glob of them does, never beam-bpe's own files beside them (.beam-bpe-output.json,
    stats.json, dead_letters/)."""
    from tests.support.cli import IN_MEMORY

    _, path = tokenizer
    (tmp_path / "corpus.txt").write_text("".join(f"line {i} {text[:40]}\n" for i, text in enumerate(multilingual(1))))
    out = tmp_path / "shards"
    assert cli.main(["encode", "--tokenizer", path, "--input", str(tmp_path / "corpus.txt"), "--output", str(out),
                     "--num-shards", "2", "--no-progress", *IN_MEMORY]) == 0
    assert (out / ".beam-bpe-output.json").exists()
    assert cli.main(["decode", "--tokenizer", path, "--input", str(out / "part-*.parquet")]) == 0
    expected = capfdbinary.readouterr().out
    assert expected == (tmp_path / "corpus.txt").read_bytes()
    for directory in (f"{out}/", str(out)):
        assert cli.main(["decode", "--tokenizer", path, "--input", directory]) == 0
        assert capfdbinary.readouterr().out == expected


def test_decode_input_jsonl_writes_one_object_per_document(tokenizer, tmp_path, capfdbinary, monkeypatch):
    """--jsonl: one {"id", "text"} per line, in shard order; invalid UTF-8 becomes U+FFFD
    as the stream decoder renders it, and the EOS that encode added is not in the text."""
    import json

    from tests.support.corpora import write_token_shards

    tok_eos = train_small(multilingual(1), vocab_size=501, special_tokens=("<|endoftext|>",))
    tok_path = tok_eos.save(str(tmp_path / "tok"))
    eos = tok_eos.special_tokens["<|endoftext|>"]
    documents = {
        "plain": "naïve café ✓\nsecond line\n".encode(),
        "invalid": b"caf\xe9 \xff\xfe then \xe2\x82",  # a bad byte, two, and a cut-off character
        "empty": b"",
        'quote "and" \\ newline\n': "tab\there \"quoted\" \u2028 \x00".encode(),
    }
    rows = [(doc_id, [*tok_eos.encode(data), eos]) for doc_id, data in documents.items()]
    write_token_shards(rows[:2], tmp_path / "shards", sha256=tok_eos.sha256, vocab_size=tok_eos.vocab_size,
                       eos_token_id=eos)
    write_token_shards(rows[2:], tmp_path / "shards2", sha256=tok_eos.sha256, vocab_size=tok_eos.vocab_size,
                       eos_token_id=eos)
    shards = [str(tmp_path / "shards" / "*.parquet"), str(tmp_path / "shards2" / "*.parquet")]
    assert cli.main(["decode", "--tokenizer", tok_path, "--input", *shards, "--jsonl"]) == 0
    out = capfdbinary.readouterr().out
    assert out.endswith(b"\n") and out.count(b"\n") == len(documents)  # newlines inside texts are escaped
    lines = [json.loads(line) for line in out.decode("utf-8").split("\n")[:-1]]  # not splitlines: U+2028
    assert lines == [{"id": doc_id, "text": data.decode("utf-8", "replace")} for doc_id, data in documents.items()]
    assert lines[1]["text"] == "caf\ufffd \ufffd\ufffd then \ufffd"
    streamed = tok_eos.stream_decoder()
    assert lines[1]["text"] == streamed.feed(rows[1][1][:-1]) + streamed.flush()
    monkeypatch.setattr(decode, "DECODE_IDS", 1)  # a document decoded a token at a time: the same line
    assert cli.main(["decode", "--tokenizer", tok_path, "--input", *shards, "--jsonl"]) == 0
    assert capfdbinary.readouterr().out == out

    assert cli.main(["decode", "--tokenizer", tok_path, "--input", shards[0], "--id", "plain", "--jsonl"]) == 0
    assert capfdbinary.readouterr().out == (json.dumps({"id": "plain", "text": documents["plain"].decode()},
                                                       ensure_ascii=False) + "\n").encode()


def test_decode_id_says_when_it_names_several_documents(tokenizer, tmp_path, capfdbinary):
    from tests.support.corpora import write_token_shards

    tok, tok_path = tokenizer
    rows = [("0", tok.encode("first file")), ("1", tok.encode("other")), ("0", tok.encode("second file"))]
    write_token_shards(rows, tmp_path / "shards", shards=2, sha256=tok.sha256, vocab_size=tok.vocab_size)
    assert cli.main(["decode", "--tokenizer", tok_path, "--input", str(tmp_path / "shards"), "--id", "0"]) == 0
    captured = capfdbinary.readouterr()
    assert captured.out == b"first filesecond file"
    assert captured.err.decode().splitlines() == [
        "beam-bpe decode: id '0' names 2 documents; all are written, in shard order"]
    assert cli.main(["decode", "--tokenizer", tok_path, "--input", str(tmp_path / "shards"), "--id", "1"]) == 0
    captured = capfdbinary.readouterr()
    assert captured.out == b"other" and captured.err == b""


def test_jsonl_goes_with_input(tokenizer, capsys):
    _, path = tokenizer
    assert cli.main(["decode", "--tokenizer", path, "--stream", "--jsonl"]) == 2
    assert "--jsonl goes with --input" in capsys.readouterr().err


def test_an_id_that_is_not_unicode_never_shares_a_valid_ids_documents(tokenizer, tmp_path, capfdbinary):
    """The JSON id "\\ud800" (a lone surrogate) and the literal id \\xed\\xa0\\x80 once came out
    as the same stored id, so ``decode --id`` returned both: now the first is a dead letter
    with its reason, and the valid id keeps its one document, spelled as it was."""
    from tests.support.cli import IN_MEMORY

    _, tok_path = tokenizer
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_bytes(b'{"id": "\\ud800", "text": "lone surrogate"}\n'
                       b'{"id": "\\\\xed\\\\xa0\\\\x80", "text": "literal backslashes"}\n'
                       b'{"id": "a\\\\\\\\b", "text": "a backslash"}\n')
    shards = tmp_path / "shards"
    assert cli.main(["encode", "--tokenizer", tok_path, "--input", str(corpus), "--output", str(shards),
                     *IN_MEMORY]) == 0
    capfdbinary.readouterr()
    dead = [json.loads(line) for f in (shards / "dead_letters").glob("*.jsonl") for line in f.read_text().splitlines()]
    assert [(d["record"], d["reason"].split(":")[0]) for d in dead] == [
        (1, "id field 'id' is not valid Unicode (a lone surrogate, ed a0 80 at byte 0)")]
    assert cli.main(["decode", "--tokenizer", tok_path, "--input", str(shards), "--id", "\\xed\\xa0\\x80"]) == 0
    captured = capfdbinary.readouterr()
    assert captured.out == b"literal backslashes" and captured.err == b""
    assert cli.main(["decode", "--tokenizer", tok_path, "--input", str(shards), "--id", "a\\\\b"]) == 0
    assert capfdbinary.readouterr().out == b"a backslash"
    assert cli.main(["decode", "--tokenizer", tok_path, "--input", str(shards), "--id", "\ud800"]) == 2
    assert "is not valid Unicode" in capfdbinary.readouterr().err.decode()
