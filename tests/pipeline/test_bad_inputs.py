"""The bad-input matrix: every kind of bad input ends in a correct result, or in one
clear error line and a non-zero exit, never in a traceback or a lost record.

Where each case is tested (cases tested elsewhere are not repeated here):

=========================================================  ===========================================================
case                                                       test
=========================================================  ===========================================================
invalid UTF-8 / NUL in text, jsonl, parquet: read exactly  test_read.py::test_jsonl_keeps_invalid_utf8_and_nul_byte_exact,
                                                           test_read.py::test_parquet_string_column_with_invalid_utf8_stays_exact
... lossless through train counts and encode -> decode     test_invalid_utf8_nul_and_empty_documents_are_lossless
empty files and empty documents                            test_read.py::test_empty_files_give_nothing,
                                                           test_invalid_utf8_nul_and_empty_documents_are_lossless
50 MB single-line document                                  test_huge_single_line_documents_round_trip
... and 5 MB without whitespace (one 5 MB pre-token)
malformed JSON, missing / non-string text (file, line)     test_read.py::test_jsonl_bad_records_become_dead_letters,
                                                           test_bad_records_are_dead_letters_and_totals_add_up
truncated .gz, corrupt .zst: dead letter naming the file   test_read.py::test_truncated_compressed_files_keep_what_was_read,
                                                           test_read.py::test_corrupt_compressed_files_are_dead_letters,
                                                           test_bad_records_are_dead_letters_and_totals_add_up
... --strict fails                                         test_strict_fails_on_unreadable_compressed_files (encode, train),
                                                           test_train_cli.py::test_strict_fails_on_a_malformed_jsonl_line
glob matching nothing                                      test_train_cli.py::test_user_errors_exit_2_with_one_line,
                                                           test_encode_cli.py::test_user_mistakes_fail_before_the_job,
                                                           test_user_errors_give_one_line["decode: glob matches nothing"]
unreadable file (broken symlink, FIFO, socket, no access)  test_read_inputs.py::test_unreadable_matches_are_dead_letters,
                                                           test_bad_records_are_dead_letters_and_totals_add_up,
                                                           test_user_errors_give_one_line["decode: shard is a directory"]
Parquet file without the text column                       test_read.py::test_parquet_row_groups_nulls_ids_and_binary,
                                                           test_bad_records_are_dead_letters_and_totals_add_up
vocab size below 256 + specials                            test_train_cli.py::test_user_errors_exit_2_with_one_line
duplicate special tokens                                   test_train_cli.py::test_user_errors_exit_2_with_one_line
empty special token                                        test_user_errors_give_one_line["train: empty special token"]
invalid regex                                              test_train_cli.py::test_user_errors_exit_2_with_one_line
tampered / truncated tokenizer.json (library)              test_tokenizer_files.py::test_tampered_files_give_one_clear_line
... through encode and decode                              test_user_errors_give_one_line["encode|decode: ... tokenizer"]
decode of out-of-range / non-integer IDs (stream)          test_decode_cli.py::test_bad_tokens_are_named_with_their_position
... in shards                                              test_user_errors_give_one_line["decode: shard ..."]
stdin closed mid-character in stream decode (--strict)     test_decode_cli.py::test_incomplete_tail_becomes_replacement_or_strict_error
=========================================================  ===========================================================
"""

import gzip
import json
import os
import pathlib
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import bpe
from pipeline import cli
from tests.support.cli import IN_MEMORY
from tests.support.outputs import read_rows, word_counts
from tests.support.real_text import multilingual
from tests.support.toy_tokenizers import plain_count, train_small
from transforms.shards import shard_schema

REPO = pathlib.Path(__file__).resolve().parents[2]
BEAM_BPE = [sys.executable, "-m", "pipeline.cli"]
MB = 1_000_000
# The single-line document's size in MB. BEAM_BPE_HUGE_LINE_MB overrides it
# (e.g. smaller on a slow machine).
HUGE_LINE_MB = int(os.environ.get("BEAM_BPE_HUGE_LINE_MB", "50"))


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    # Enough merges that the huge document has far fewer tokens than bytes (memory, time).
    tok = train_small(multilingual(2), vocab_size=2000)
    path = tok.save(str(tmp_path_factory.mktemp("tok")))
    return bpe.Tokenizer.load(path), path


def one_error_line(stderr: str, command: str) -> str:
    """The single ``beam-bpe COMMAND: error: ...`` line of stderr, which must end it."""
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith(f"beam-bpe {command}: error: ")]
    assert len(errors) == 1 and errors[0] == lines[-1], stderr
    return errors[0]


def dead_letters(out: pathlib.Path) -> list[tuple[str, int, str]]:
    rows = []
    for path in sorted((out / "dead_letters").glob("*.jsonl")):
        rows += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return sorted((os.path.basename(r["file"]), r["record"], r["reason"]) for r in rows)


def test_invalid_utf8_nul_and_empty_documents_are_lossless(tokenizer, corpus, tmp_path, capfdbinary):
    tok, tok_path = tokenizer
    # file -> its documents, by record number.
    expected = {
        "bytes.txt": [b"caf\xe9 \x00 nul \xff\xfe\n", b"\n", b"\x00\x00\x00\n", b"cut \xe2\x82"],
        # Raw invalid bytes inside a JSON string stay as they are; \u0000 is a NUL.
        "bytes.jsonl": [b"na\xefve \xc3 \x00x", b"", b"\x00"],
        "bytes.parquet": [b"\xff\x00raw", b"", b"ok \xc3\xa9"],
    }
    corpus.write("bytes.txt", b"".join(expected["bytes.txt"]))
    corpus.write("bytes.jsonl", b'{"text": "na\xefve \xc3 \\u0000x"}\n{"text": ""}\n{"text": "\\u0000"}\n')
    corpus.parquet("bytes.parquet", {"text": pa.array(expected["bytes.parquet"], pa.binary())})
    corpus.write("empty.txt", b"")
    corpus.write("empty.jsonl.gz", b"")
    documents = [doc for docs in expected.values() for doc in docs]
    inputs = ["--input", corpus.path("*")]

    out = tmp_path / "train"
    assert cli.main(["train", "--no-progress", *inputs, "--vocab-size", "300", "--min-frequency", "1",
                     "--output", str(out), *IN_MEMORY]) == 0
    assert word_counts(out) == plain_count(documents)

    out = tmp_path / "encode"
    assert cli.main(["encode", "--tokenizer", tok_path, *inputs, "--output", str(out), *IN_MEMORY]) == 0
    rows = read_rows(out)
    by_id = {f"{corpus.path(name)}:{i}": doc for name, docs in expected.items() for i, doc in enumerate(docs, 1)}
    assert {row_id: tok.decode_bytes(tokens) for row_id, tokens in rows} == by_id
    assert sum(1 for _, tokens in rows if not tokens) == 2  # the empty documents are rows too
    stats = json.loads((out / "stats.json").read_text())
    assert stats["documents"] == stats["records_read"] == len(documents) and stats["dead_letters"] == 0
    assert stats["input_bytes"] == sum(map(len, documents))
    capfdbinary.readouterr()
    assert cli.main(["decode", "--tokenizer", tok_path, "--input", str(out / "part-*.parquet")]) == 0
    assert capfdbinary.readouterr().out == b"".join(by_id[row_id] for row_id, _ in rows)


def test_huge_single_line_documents_round_trip(tokenizer, corpus, tmp_path):
    """HUGE_LINE_MB (50) of real text on one line, and a 5 MB single pre-token (letters only)."""
    tok, tok_path = tokenizer
    text = " ".join(" ".join(multilingual(2)).split()).encode()
    line = (text * (HUGE_LINE_MB * MB // len(text) + 1))[: HUGE_LINE_MB * MB]
    letters = "".join(c for c in text.decode() if c.isalpha()).encode()
    piece = (letters * (5 * MB // len(letters) + 1))[: 5 * MB].decode("utf-8", "ignore").encode()
    assert len(tok.pre_tokenizer.pieces(piece)) == 1
    corpus.write("line.txt", line)
    corpus.write("piece.txt", piece)
    out = tmp_path / "out"
    started = time.monotonic()
    result = subprocess.run(
        [*BEAM_BPE, "encode", "--tokenizer", tok_path, "--input", corpus.path("*.txt"), "--output", str(out), *IN_MEMORY],
        capture_output=True, text=True, cwd=REPO, timeout=600,
    )
    assert result.returncode == 0, result.stderr
    # A generous bound: valid UTF-8 goes through tiktoken's core; the pure-Python
    # encoder on a single huge piece would take far longer.
    assert time.monotonic() - started < 120
    table = pq.read_table(sorted(out.glob("part-*.parquet")))
    tokens = table.column("tokens")
    # Through numpy: 20M Python ints at once would double the memory.
    docs = {row_id: tok.decode_bytes(tokens[i].values.to_numpy().tolist())
            for i, row_id in enumerate(table.column("id").to_pylist())}
    assert docs.keys() == {corpus.path("line.txt") + ":1", corpus.path("piece.txt") + ":1"}
    assert docs[corpus.path("line.txt") + ":1"] == line and docs[corpus.path("piece.txt") + ":1"] == piece
    stats = json.loads((out / "stats.json").read_text())
    assert stats["documents"] == 2 and stats["input_bytes"] == len(line) + len(piece)
    assert stats["tokens"] == pc.sum(pc.list_value_length(tokens)).as_py()


@pytest.fixture
def bad_corpus(corpus):
    """Good records between bad ones of every kind; returns the corpus and the expected dead letters."""
    corpus.write("good.txt", b"one\ntwo\n")
    corpus.write(
        "records.jsonl",
        b'{"text": "fine"}\n'  # 1
        b"{not json\n"  # 2
        b'{"body": "no text"}\n'  # 3
        b'{"text": 7}\n'  # 4
        b'{"text": ["a"]}\n'  # 5
        b'{"text": "also fine"}\n',  # 6
    )
    corpus.write_raw("cut.txt.gz", gzip.compress(b"kept\n" + os.urandom(4000).hex().encode() + b"\n")[:60])
    corpus.write_raw("corrupt.txt.zst", b"this is not zstd\n" * 4)
    corpus.parquet("no_text.parquet", {"body": ["x", "y"]})
    # Unreadable, even for root: a broken symbolic link the glob matches.
    os.symlink(corpus.path("gone.txt"), corpus.path("dangling.txt"))
    expected_dead = [
        ("corrupt.txt.zst", -1, "ZstdError"),
        ("cut.txt.gz", -1, "EOFError"),
        ("dangling.txt", -1, "cannot stat file (a symbolic link to"),
        ("no_text.parquet", -1, "no column 'text'"),
        ("records.jsonl", 2, "malformed JSON"),
        ("records.jsonl", 3, "missing field 'text'"),
        ("records.jsonl", 4, "field 'text' is a number"),
        ("records.jsonl", 5, "field 'text' is an array"),
    ]
    return corpus, expected_dead


def test_bad_records_are_dead_letters_and_totals_add_up(tokenizer, bad_corpus, tmp_path):
    tok, tok_path = tokenizer
    corpus, expected_dead = bad_corpus
    out = tmp_path / "out"
    inputs = ["--input", corpus.path("*.*")]
    assert cli.main(["encode", "--tokenizer", tok_path, *inputs, "--output", str(out), *IN_MEMORY]) == 0
    letters = dead_letters(out)
    assert [letter[:2] for letter in letters] == [want[:2] for want in expected_dead]
    for (_, _, reason), (_, _, want) in zip(letters, expected_dead):
        assert want in reason
    rows = read_rows(out)
    # The truncated gzip keeps the line before the cut, as train does.
    assert sorted(tok.decode_bytes(t) for _, t in rows) == sorted([b"one\n", b"two\n", b"fine", b"also fine", b"kept\n"])
    stats = json.loads((out / "stats.json").read_text())
    assert stats["dead_letters"] == len(expected_dead) and stats["documents"] == len(rows)
    assert stats["records_read"] == stats["documents"] + stats["dead_letters"]


def test_strict_fails_on_unreadable_compressed_files(tokenizer, corpus, tmp_path, capfd):
    _, tok_path = tokenizer
    corpus.write("good.txt", b"fine\n")
    corpus.write_raw("cut.txt.gz", gzip.compress(b"x" * 5000 + b"\n")[:40])
    corpus.write_raw("corrupt.txt.zst", b"this is not zstd\n" * 4)
    # encode through a real process: exit 2, one line, the dead letters kept for inspection.
    out = tmp_path / "encoded"
    result = subprocess.run(
        [*BEAM_BPE, "encode", "--tokenizer", tok_path, "--input", corpus.path("*"), "--output", str(out),
         "--strict", *IN_MEMORY],
        capture_output=True, text=True, cwd=REPO, timeout=300,
    )
    assert result.returncode == 2
    assert "2 input records could not be read" in one_error_line(result.stderr, "encode")
    assert [letter[:2] for letter in dead_letters(out)] == [("corrupt.txt.zst", -1), ("cut.txt.gz", -1)]
    # train (in-process): lists the files, then one error line.
    out = tmp_path / "trained"
    assert cli.main(["train", "--no-progress", "--input", corpus.path("*"), "--vocab-size", "260",
                     "--output", str(out), "--strict", *IN_MEMORY]) != 0
    captured = capfd.readouterr()
    assert "(--strict)" in one_error_line(captured.err, "train")
    assert "cut.txt.gz" in captured.err and "corrupt.txt.zst" in captured.err
    assert not (out / "tokenizer.json").exists()


def _shard(path: pathlib.Path, tok, tokens_type, rows) -> str:
    """A shard claiming to come from ``tok`` whose tokens column is ``tokens_type``."""
    metadata = shard_schema(tok.sha256, tok.vocab_size).metadata
    schema = pa.schema([("id", pa.string()), ("tokens", tokens_type)], metadata=metadata)
    pq.write_table(pa.table({"id": [r[0] for r in rows], "tokens": [r[1] for r in rows]}, schema=schema), path)
    return str(path)


USER_ERRORS = [
    "train: empty special token", "encode: truncated tokenizer", "encode: tampered tokenizer",
    "decode: truncated tokenizer", "decode: tampered tokenizer (stream)", "decode: glob matches nothing",
    "decode: shard is a directory", "decode: shard is a broken symlink", "decode: shard is not parquet", "decode: shard ID out of range",
    "decode: shard IDs not integers", "decode: shard IDs signed", "encode: output is a file",
]


def _user_errors(tmp_path: pathlib.Path, tok, tok_path: str) -> dict:
    text = tmp_path / "in.txt"
    text.write_bytes(b"hello\n")
    good = open(tok_path, encoding="utf-8").read()
    truncated = tmp_path / "truncated.json"
    truncated.write_text(good[: len(good) // 3], encoding="utf-8")
    tampered = tmp_path / "tampered.json"
    spec = json.loads(good)
    spec["model"]["merges"][5] = [spec["model"]["merges"][5][0], "no such token"]
    tampered.write_text(json.dumps(spec), encoding="utf-8")
    (tmp_path / "dir.parquet").mkdir()
    os.symlink(tmp_path / "gone.parquet", tmp_path / "dangling.parquet")
    encode = ["encode", "--input", str(text), "--output", str(tmp_path / "out")]
    shards = tmp_path / "shards"
    shards.mkdir()
    return {
        "train: empty special token": (
            ["train", "--input", str(text), "--vocab-size", "300", "--output", str(tmp_path / "t"),
             "--special-token", ""], "--special-token must not be empty"),
        "encode: truncated tokenizer": ([*encode, "--tokenizer", str(truncated)], "is not valid JSON"),
        "encode: tampered tokenizer": ([*encode, "--tokenizer", str(tampered)], "names unknown token"),
        "decode: truncated tokenizer": (
            ["decode", "--tokenizer", str(truncated), "--input", str(text)], "is not valid JSON"),
        "decode: tampered tokenizer (stream)": (
            ["decode", "--tokenizer", str(tampered), "--stream"], "names unknown token"),
        "decode: glob matches nothing": (
            ["decode", "--tokenizer", tok_path, "--input", str(tmp_path / "none-*.parquet")], "no file matches"),
        "decode: shard is a directory": (
            ["decode", "--tokenizer", tok_path, "--input", str(tmp_path / "dir.parquet")],
            f"no file matches {tmp_path / 'dir.parquet'}"),
        "decode: shard is a broken symlink": (
            ["decode", "--tokenizer", tok_path, "--input", str(tmp_path / "dangling.parquet")],
            "cannot read"),
        "decode: shard is not parquet": (
            ["decode", "--tokenizer", tok_path, "--input", str(text)], "is not a Parquet file"),
        "decode: shard ID out of range": (
            ["decode", "--tokenizer", tok_path, "--input",
             _shard(shards / "range.parquet", tok, pa.list_(pa.uint16()), [("a", [104]), ("b", [104, 65000])])],
            "range.parquet, row 2 (id 'b'): token ID 65000 is out of range: the vocabulary has 2000 tokens"),
        "decode: shard IDs not integers": (
            ["decode", "--tokenizer", tok_path, "--input",
             _shard(shards / "strings.parquet", tok, pa.list_(pa.string()), [("a", ["104"])])],
            "is not a token shard: column tokens has type list<element: string>"),
        "decode: shard IDs signed": (
            ["decode", "--tokenizer", tok_path, "--input",
             _shard(shards / "negative.parquet", tok, pa.list_(pa.int64()), [("a", [-1])])],
            "column tokens has type list<element: int64>, expected a list of uint16 or uint32"),
        "encode: output is a file": (
            ["encode", "--tokenizer", tok_path, "--input", str(text), "--output", str(text)],
            "exists and is not a directory"),
    }


@pytest.mark.parametrize("case", USER_ERRORS)
def test_user_errors_give_one_line(case, tokenizer, tmp_path, capfd):
    tok, tok_path = tokenizer
    cases = _user_errors(tmp_path, tok, tok_path)
    assert sorted(cases) == sorted(USER_ERRORS)
    argv, message = cases[case]
    assert cli.main([*argv, *IN_MEMORY] if argv[0] != "decode" else argv) == 2
    error = one_error_line(capfd.readouterr().err, argv[0])
    assert message in error, error
