"""Crash-safe ``beam-bpe encode`` reruns, with real subprocesses and SIGKILL.

stats.json is the completion marker (see pipeline/encode.py): a directory
without it is an incomplete run, whose leftovers a rerun removes; a directory
with it is refused unless --overwrite.
"""

import errno
import json
import os
import pathlib
import random
import signal
import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest

import bpe
from pipeline import cli
from tests.support.cli import IN_MEMORY
from tests.support.corpora import write_line_shards
from tests.support.outputs import read_rows
from tests.support.real_text import multilingual
from tests.support.toy_tokenizers import train_small

REPO = pathlib.Path(__file__).resolve().parents[2]
BEAM_BPE = [sys.executable, "-m", "pipeline.cli"]
# Real lines: enough work that the killed job is still running while its shard
# temp files exist, which the poll below catches.
KILLED_LINES = 20_000


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    tok = train_small(multilingual(1), vocab_size=400)
    path = tok.save(str(tmp_path_factory.mktemp("tok")))
    return bpe.Tokenizer.load(path), path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[pathlib.Path, list[bytes]]:
    """Text shards of real lines; returns the directory and every document (line)."""
    root = tmp_path_factory.mktemp("corpus")
    lines = write_line_shards(root, KILLED_LINES)
    return root, lines


def encode_argv(tok_path, root, out, *flags):
    return [*BEAM_BPE, "encode", "--tokenizer", tok_path, "--input", str(root / "in-*.txt"), "--output", str(out), *flags]


def run(argv) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=300)


def assert_exactly_the_corpus(out: pathlib.Path, tok, lines):
    """One complete, correct result: every line once, stats agree, nothing else in the directory."""
    stats = json.loads((out / "stats.json").read_text())
    rows = read_rows(out)
    # Row ids are "<file>:<line>": a duplicated or lost row shows as a set difference.
    assert len(rows) == len({row_id for row_id, _ in rows}) == len(lines) == stats["documents"]
    assert stats["records_read"] == len(lines) and stats["dead_letters"] == 0
    assert stats["tokens"] == sum(len(tokens) for _, tokens in rows)
    assert sorted(tok.decode_bytes(tokens) for _, tokens in rows) == sorted(lines)
    assert sorted(p.name for p in out.glob("part-*")) == stats["shards"]
    # No staging dir, Beam temp dirs, _input_bytes or .stats.json.tmp left behind.
    assert sorted(p.name for p in out.iterdir()) == sorted([".beam-bpe-output.json", "dead_letters", "stats.json", *stats["shards"]])
    assert [p.name for p in (out / "dead_letters").iterdir()] == ["dead_letters-00000-of-00001.jsonl"]


def test_sigkilled_encode_then_rerun_gives_one_complete_result(tokenizer, corpus, tmp_path):
    tok, tok_path = tokenizer
    root, lines = corpus
    out = tmp_path / "out"
    # Several worker processes, as in real use: kill the whole process group.
    # Automatic sharding: bundles write their temp files while the job still runs.
    proc = subprocess.Popen(
        encode_argv(tok_path, root, out, "--direct_num_workers=2"),
        cwd=REPO, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    try:
        # Kill once a shard's temporary file is being written inside the staging dir.
        deadline = time.monotonic() + 120
        while not list(out.glob(".staging/beam-temp-part-*/*")):
            assert proc.poll() is None, f"encode ended before it could be killed: {proc.stderr.read()}"
            assert time.monotonic() < deadline, "no temporary shard appeared"
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    assert not (out / "stats.json").exists() and (out / ".staging").exists()
    assert not list(out.glob("part-*"))  # shards appear only when complete

    # Also plant shards of an older run that died while publishing (other count:
    # part-*-of-00003), which must not survive either.
    (out / "part-00002-of-00003.parquet").write_bytes(b"stale shard")

    result = run(encode_argv(tok_path, root, out, *IN_MEMORY, "--num-shards=2"))
    assert result.returncode == 0, result.stderr
    [notice] = [line for line in result.stderr.splitlines() if "leftovers" in line]
    assert "removing leftovers of a previous run that did not complete" in notice and ".staging" in notice
    assert_exactly_the_corpus(out, tok, lines)


def test_crash_after_shards_moved_but_before_stats_json(tokenizer, tmp_path, capsys):
    """The last window: shards and dead letters in place, stats.json not yet written."""
    tok, tok_path = tokenizer
    root = tmp_path / "in"
    root.mkdir()
    lines = [b"first line\n", b"second \xff line\n", b"third\n"]
    (root / "in-0.txt").write_bytes(b"".join(lines))
    out = tmp_path / "out"
    argv = ["encode", "--tokenizer", tok_path, "--input", str(root / "in-*.txt"), "--output", str(out), *IN_MEMORY]
    assert cli.main([*argv, "--num-shards=3"]) == 0
    (out / "stats.json").rename(out / ".stats.json.tmp")  # written, not yet renamed: a crash here
    (out / "beam-temp-part-0123").mkdir()  # and a Beam temp dir of an older, unstaged run
    capsys.readouterr()
    assert cli.main([*argv, "--num-shards=1"]) == 0
    assert "removing leftovers" in capsys.readouterr().err
    assert_exactly_the_corpus(out, tok, lines)


def test_complete_result_is_refused_without_overwrite_and_replaced_with_it(tokenizer, tmp_path):
    tok, tok_path = tokenizer
    root = tmp_path / "in"
    root.mkdir()
    (root / "in-0.txt").write_bytes(b"old document\n" * 3)
    out = tmp_path / "out"
    assert cli.main(encode_argv(tok_path, root, out, *IN_MEMORY, "--num-shards=3")[len(BEAM_BPE):]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}

    new_lines = [b"new document\n", b"another \x00 one\n"]
    (root / "in-0.txt").write_bytes(b"".join(new_lines))
    refused = run(encode_argv(tok_path, root, out, *IN_MEMORY))
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    [error] = [line for line in refused.stderr.splitlines() if "error" in line]
    assert error == (
        f"beam-bpe encode: error: {out} already holds token shards of a complete run (stats.json); "
        "pass --overwrite to replace them, or choose another --output"
    )
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before  # untouched

    replaced = run(encode_argv(tok_path, root, out, *IN_MEMORY, "--overwrite"))
    assert replaced.returncode == 0, replaced.stderr
    assert "leftovers" not in replaced.stderr  # a complete result is replaced, not "cleaned up"
    assert_exactly_the_corpus(out, tok, new_lines)
    assert len(list(out.glob("part-*"))) == 1  # none of the old three shards survive
    assert pq.read_schema(out / "part-00000-of-00001.parquet").metadata[b"tokenizer_sha256"].decode() == tok.sha256


def test_help_documents_the_completion_marker(capsys):
    with pytest.raises(SystemExit):
        cli.main(["encode", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "stats.json is written last as the completion marker" in text and "--overwrite" in text


def _small_corpus(root: pathlib.Path, lines: int = 300) -> str:
    root.mkdir(parents=True, exist_ok=True)
    (root / "in.txt").write_text("".join(f"line {i}: {multilingual(1)[i % 5][:60]}\n" for i in range(lines)))
    return str(root / "in.txt")


@pytest.mark.parametrize("command", ["encode", "pack"])
@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT], ids=["ENOSPC", "EDQUOT"])
def test_a_full_disk_ends_in_one_line_and_the_rerun_cleans_up(tokenizer, tmp_path, capsys, monkeypatch, command, code):
    tok, tok_path = tokenizer
    corpus = _small_corpus(tmp_path / "in")
    shards = tmp_path / "shards"
    assert cli.main(["encode", "--tokenizer", tok_path, "--input", corpus, "--output", str(shards), *IN_MEMORY]) == 0
    out = tmp_path / "out"
    argv = {
        "encode": ["encode", "--tokenizer", tok_path, "--input", corpus, "--output", str(out), *IN_MEMORY],
        "pack": ["pack", "--input", str(shards), "--seq-len", "16", "--output", str(out), *IN_MEMORY],
    }[command]

    def disk_full(*args, **kwargs):
        raise OSError(code, os.strerror(code))

    capsys.readouterr()
    with monkeypatch.context() as patched:
        patched.setattr(pq.ParquetWriter, "write_table", disk_full)
        exit_code = cli.main(argv)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith(f"beam-bpe {command}: engine")]
    assert exit_code == 1 and len(lines) == 1, err
    what = "no space left on device" if code == errno.ENOSPC else "disk quota exceeded"
    assert lines[0].startswith(f"beam-bpe {command}: error: {what} while writing {out}: "), lines[0]
    assert lines[0].endswith("; nothing was marked complete; free space and rerun the same command"), lines[0]
    assert not (out / "stats.json").exists()

    assert cli.main(argv) == 0  # space again: the rerun removes the leftovers and completes
    assert "removing leftovers of a previous run" in capsys.readouterr().err
    assert (out / "stats.json").exists() and not (out / ".staging").exists()


def test_a_full_tmpfs_ends_encode_in_one_line(tokenizer, tmp_path):
    """A real full disk, in a real process: 2 MB of text into a 256 kB tmpfs (needs root; skipped elsewhere)."""
    _, tok_path = tokenizer
    rng = random.Random(28)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "in-0.txt").write_text("".join(
        " ".join(f"w{rng.randrange(10**6)}" for _ in range(16)) + "\n" for _ in range(20_000)))
    mount = tmp_path / "small"
    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)],
                                           capture_output=True).returncode != 0:
        pytest.skip("needs root to mount a tmpfs")
    try:
        done = run(encode_argv(tok_path, tmp_path / "in", mount / "out", "--no-progress"))
        lines = [line for line in done.stderr.splitlines() if not line.startswith("beam-bpe encode: engine")]
        assert done.returncode == 1 and len(lines) == 1, done.stderr[-3000:]
        assert lines[0].startswith(f"beam-bpe encode: error: no space left on device while writing {mount / 'out'}: ")
        assert not (mount / "out" / "stats.json").exists()
    finally:
        subprocess.run(["umount", str(mount)], check=True)
