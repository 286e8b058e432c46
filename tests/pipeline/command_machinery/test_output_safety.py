"""Output directories: beam-bpe deletes only what it wrote, and one job at a time writes there.

Every directory a job writes into first gets ``.beam-bpe-output.json`` (see
pipeline/command_machinery/outputs.py ``claim``); a directory holding files without it, another
command's output, or an input is refused before anything is touched. The lock
``.beam-bpe.lock`` keeps a second job out and is taken over when stale.
"""

import json
import pathlib
import socket
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import bpe
from pipeline import cli
from tests.support.cli import IN_MEMORY
from tests.support.outputs import read_rows
from tests.support.real_text import multilingual
from tests.support.toy_tokenizers import train_small

REPO = pathlib.Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    tok = train_small(multilingual(1), vocab_size=300)
    return tok.save(str(tmp_path_factory.mktemp("tok")))


def snapshot(root: pathlib.Path) -> dict[str, bytes]:
    """Every file under ``root`` (hidden ones too) with its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def user_corpus(root: pathlib.Path) -> pathlib.Path:
    """A user's directory that looks like encode's output: Parquet parts and dead_letters/."""
    root.mkdir(parents=True)
    for i in range(2):
        pq.write_table(pa.table({"text": [f"document {i} {j}" for j in range(5)]}), root / f"part-0000{i}-of-00002.parquet")
    (root / "dead_letters").mkdir()
    (root / "dead_letters" / "dead_letters-00000-of-00001.jsonl").write_text("my own notes\n")
    return root


def encode(tok_path, inputs, out, *flags, capsys=None) -> tuple[int, list[str]]:
    if capsys:
        capsys.readouterr()
    code = cli.main(["encode", "--tokenizer", tok_path, "--input", *inputs, "--output", str(out), *IN_MEMORY, *flags])
    return code, capsys.readouterr().err.splitlines() if capsys else []


def two_lines(tmp_path: pathlib.Path) -> pathlib.Path:
    """in.txt holding the lines "one" and "two"."""
    text = tmp_path / "in.txt"
    text.write_text("one\ntwo\n")
    return text


def encoded_once(tokenizer, tmp_path: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    """(in.txt, out), out holding one finished encode of in.txt."""
    text = two_lines(tmp_path)
    out = tmp_path / "out"
    assert encode(tokenizer, [str(text)], out)[0] == 0
    return text, out


def test_encode_into_its_own_input_directory_deletes_nothing(tokenizer, tmp_path, capsys):
    corpus = user_corpus(tmp_path / "corpus")
    before = snapshot(corpus)
    code, err = encode(tokenizer, [str(corpus / "*.parquet")], corpus, capsys=capsys)
    assert code == 2
    assert err == [f"beam-bpe encode: error: --output {corpus} holds the input {corpus}/part-00000-of-00002.parquet; "
                   "write the output to another directory (beam-bpe replaces what it writes there)"]
    assert snapshot(corpus) == before


def test_a_directory_of_files_we_did_not_write_is_refused_untouched(tokenizer, tmp_path, capsys):
    theirs = user_corpus(tmp_path / "theirs")
    before = snapshot(theirs)
    text = tmp_path / "in.txt"
    text.write_text("hello world\n")
    code, err = encode(tokenizer, [str(text)], theirs, "--overwrite", capsys=capsys)
    assert code == 2 and len(err) == 1
    assert "is not empty and was not written by beam-bpe (dead_letters, part-00000-of-00002.parquet" in err[0]
    assert snapshot(theirs) == before


def test_a_train_output_is_not_taken_for_an_encode_output(tokenizer, tmp_path, capsys):
    text = tmp_path / "in.txt"
    text.write_text("hello world\nhello there\n")
    out = tmp_path / "tok"
    assert cli.main(["train", "--no-progress", "--input", str(text), "--vocab-size", "260", "--output", str(out),
                     *IN_MEMORY]) == 0
    before = snapshot(out)
    code, err = encode(tokenizer, [str(text)], out, capsys=capsys)
    assert code == 2 and err == [f"beam-bpe encode: error: --output {out} holds the output of beam-bpe train, "
                                 "not of encode; choose another directory"]
    assert snapshot(out) == before


def test_train_refuses_a_non_empty_directory_it_did_not_write(tmp_path, capsys):
    theirs = user_corpus(tmp_path / "theirs")
    (theirs / "word_counts.parquet").write_bytes(b"precious")
    before = snapshot(theirs)
    text = tmp_path / "in.txt"
    text.write_text("hello world\n")
    assert cli.main(["train", "--input", str(text), "--vocab-size", "260", "--output", str(theirs), *IN_MEMORY]) == 2
    assert "was not written by beam-bpe" in capsys.readouterr().err
    assert snapshot(theirs) == before


def test_an_own_output_used_as_input_of_the_next_run_is_refused(tokenizer, tmp_path, capsys):
    _, out = encoded_once(tokenizer, tmp_path)
    before = snapshot(out)
    code, err = encode(tokenizer, [str(out / "part-*.parquet")], out, "--overwrite", capsys=capsys)
    assert code == 2 and "holds the input" in err[0]
    assert snapshot(out) == before


def test_an_empty_or_new_directory_is_claimed_and_rerun(tokenizer, tmp_path):
    text = two_lines(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert encode(tokenizer, [str(text)], empty)[0] == 0
    assert json.loads((empty / ".beam-bpe-output.json").read_text())["command"] == "encode"
    assert not (empty / ".beam-bpe.lock").exists()  # released at the end
    assert encode(tokenizer, [str(text)], empty, "--overwrite")[0] == 0
    assert [tokens for _, tokens in read_rows(empty)] == [bpe.Tokenizer.load(tokenizer).encode(b"one\n"),
                                                          bpe.Tokenizer.load(tokenizer).encode(b"two\n")]


def _lock(out: pathlib.Path, pid: int) -> None:
    (out / ".beam-bpe.lock").write_text(json.dumps(
        {"host": socket.gethostname(), "pid": pid, "command": "encode", "since": "2026-01-01 00:00:00"}))


def test_a_live_lock_refuses_a_second_job_and_a_stale_one_is_taken_over(tokenizer, tmp_path, capsys):
    text, out = encoded_once(tokenizer, tmp_path)
    before = snapshot(out)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # a live process
    try:
        _lock(out, other.pid)
        code, err = encode(tokenizer, [str(text)], out, "--overwrite", capsys=capsys)
        assert code == 2 and len(err) == 1
        assert f"--output {out} is in use by another beam-bpe job (encode, pid {other.pid} on" in err[0]
        assert snapshot(out) == {**before, ".beam-bpe.lock": (out / ".beam-bpe.lock").read_bytes()}
    finally:
        other.kill()
        other.wait()
    code, err = encode(tokenizer, [str(text)], out, "--overwrite", capsys=capsys)  # its owner is gone: stale
    assert code == 0
    assert f"beam-bpe encode: removing the stale lock {out}/.beam-bpe.lock of a job that no longer runs" in err[0]
    assert not (out / ".beam-bpe.lock").exists()


def test_two_concurrent_encodes_into_one_output_leave_one_whole_result(tokenizer, tmp_path):
    lines = [f"line {i} {'x' * (i % 50)}\n".encode() for i in range(3000)]
    text = tmp_path / "in.txt"
    text.write_bytes(b"".join(lines))
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "pipeline.cli", "encode", "--tokenizer", tokenizer, "--input", str(text),
            "--output", str(out), *IN_MEMORY]
    procs = [subprocess.Popen(argv, cwd=REPO, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    for p in procs:
        p.stderr.close()
    assert sorted(code for code, _ in results) == [0, 2], results
    [refused] = [err for code, err in results if code == 2]
    assert "Traceback" not in refused and len([line for line in refused.splitlines() if "error" in line]) == 1
    assert "is in use by another beam-bpe job" in refused or "already holds token shards" in refused
    rows = read_rows(out)
    stats = json.loads((out / "stats.json").read_text())
    assert len(rows) == stats["documents"] == len(lines)
    assert not (out / ".beam-bpe.lock").exists() and not (out / ".staging").exists()
