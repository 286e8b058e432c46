"""``beam-bpe encode`` end to end: real text -> shards -> every document back, exactly."""

import gzip
import json

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import bpe
from pipeline import cli
from tests.support.cli import IN_MEMORY
from tests.support.outputs import read_rows
from tests.support.real_text import multilingual
from tests.support.toy_tokenizers import train_small
from transforms.shards import EOS_KEY, SHA256_KEY

EOS = "<|endoftext|>"


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    tok = train_small(multilingual(2), vocab_size=600, special_tokens=(EOS, "<|pad|>"))
    path = tok.save(str(tmp_path_factory.mktemp("tok")))
    return bpe.Tokenizer.load(path), path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Real text as 3 jsonl.gz shards (with ids), a text file with invalid UTF-8, and a bad line."""
    root = tmp_path_factory.mktemp("corpus")
    docs = multilingual(2, start=3)
    expected = {}
    for shard in range(3):
        lines = []
        for i, text in enumerate(docs[shard::3]):
            doc_id = f"s{shard}-{i}"
            lines.append(json.dumps({"text": text, "id": doc_id}))
            expected[doc_id] = text.encode("utf-8")
        if shard == 0:
            lines.append("{not json")  # record len(lines) of this file: a dead letter
        (root / f"part-{shard}.jsonl.gz").write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    raw = [b"plain line\n", b"caf\xe9 latin-1 \xff\xfe\n", b"cut \xe2\x82\n", b"\n", b"no newline at end \xf0\x9f"]
    (root / "raw.txt").write_bytes(b"".join(raw))
    for record, line in enumerate(raw, start=1):
        expected[f"{root / 'raw.txt'}:{record}"] = line
    return root, expected


def encode(*argv: str) -> int:
    return cli.main(["encode", *argv, *IN_MEMORY])


@pytest.fixture(scope="module")
def encoded(tmp_path_factory, tokenizer, corpus):
    tok, tok_path = tokenizer
    root, _ = corpus
    out = tmp_path_factory.mktemp("out") / "shards"
    assert encode(
        "--tokenizer", tok_path, "--input", str(root / "*.jsonl.gz"), "--input", str(root / "raw.txt"),
        "--output", str(out), "--id-field", "id", "--append-eos", "--num-shards", "2",
    ) == 0
    return out


def test_every_row_decodes_to_the_original_bytes(encoded, tokenizer, corpus):
    tok, _ = tokenizer
    _, expected = corpus
    eos = tok.special_tokens[EOS]
    rows = read_rows(encoded)
    assert sorted(row_id for row_id, _ in rows) == sorted(expected)
    for row_id, tokens in rows:
        assert tokens[-1] == eos
        assert tok.decode_bytes(tokens[:-1]) == expected[row_id]
        assert tokens[:-1] == tok.encode(expected[row_id])


def test_stats_match_the_shards(encoded, tokenizer, corpus):
    tok, _ = tokenizer
    _, expected = corpus
    stats = json.loads((encoded / "stats.json").read_text())
    rows = read_rows(encoded)
    assert stats["documents"] == len(rows) == len(expected)
    assert stats["tokens"] == sum(len(t) for _, t in rows)
    assert stats["input_bytes"] == sum(map(len, expected.values()))
    assert stats["bytes_per_token"] == pytest.approx(stats["input_bytes"] / stats["tokens"])
    assert stats["dead_letters"] == 1
    assert stats["records_read"] == len(expected) + 1
    assert stats["tokenizer_sha256"] == tok.sha256
    assert stats["shards"] == ["part-00000-of-00002.parquet", "part-00001-of-00002.parquet"]
    [dead] = [json.loads(line) for f in (encoded / "dead_letters").glob("*.jsonl") for line in f.read_text().splitlines()]
    assert dead["file"].endswith("part-0.jsonl.gz") and "malformed JSON" in dead["reason"]
    assert not list(encoded.glob("_input_bytes*"))


def test_shards_are_self_describing_and_readable_by_common_tools(encoded, tokenizer):
    tok, _ = tokenizer
    schema = pq.read_schema(next(encoded.glob("part-*.parquet")))
    assert schema.field("tokens").type == pa.list_(pa.uint16())
    assert schema.metadata[SHA256_KEY].decode() == tok.sha256
    assert int(schema.metadata[EOS_KEY]) == tok.special_tokens[EOS]
    rows = read_rows(encoded)
    dataset = ds.dataset(str(encoded), format="parquet", exclude_invalid_files=True)
    assert dataset.count_rows() == len(rows)
    glob = str(encoded / "part-*.parquet")
    count, total = duckdb.sql(f"SELECT count(*), sum(len(tokens)) FROM read_parquet('{glob}')").fetchall()[0]
    assert (count, total) == (len(rows), sum(len(t) for _, t in rows))


def test_decode_cli_prints_documents_exactly(encoded, tokenizer, corpus, capfdbinary):
    _, tok_path = tokenizer
    _, expected = corpus
    glob = str(encoded / "part-*.parquet")
    assert cli.main(["decode", "--tokenizer", tok_path, "--input", glob, "--id", "s1-0"]) == 0
    assert capfdbinary.readouterr().out == expected["s1-0"]
    assert cli.main(["decode", "--tokenizer", tok_path, "--input", glob]) == 0
    out = capfdbinary.readouterr().out
    assert len(out) == sum(map(len, expected.values()))
    assert sorted(expected.values(), key=len)[-1] in out


def test_decode_cli_refuses_shards_of_another_tokenizer(encoded, tmp_path, capsys):
    other = bpe.Tokenizer([(104, 105)], special_tokens=(EOS,)).save(str(tmp_path))
    assert cli.main(["decode", "--tokenizer", other, "--input", str(encoded / "part-*.parquet")]) == 2
    assert "was written by tokenizer" in capsys.readouterr().err


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--tokenizer", "/nonexistent/tok.json"], "not found"),
        (["--input", "/nonexistent/*.txt"], "no file matches"),
        (["--format", "csv"], "unknown --format"),
        (["--append-eos", "--eos-token", "<|nope|>"], "not a special token"),
        (["--runner", "DaskRunner"], "DaskRunner"),
    ],
)
def test_user_mistakes_fail_before_the_job(tmp_path, tokenizer, corpus, capsys, extra, message):
    _, tok_path = tokenizer
    root, _ = corpus
    argv = {"--tokenizer": tok_path, "--input": str(root / "raw.txt"), "--output": str(tmp_path / "out")}
    flags = []
    for flag, value in argv.items():
        if flag not in extra:
            flags += [flag, value]
    assert encode(*flags, *extra) == 2
    err = capsys.readouterr().err
    assert err.startswith("beam-bpe encode: error: ") and message in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_append_eos_without_special_tokens_fails(tmp_path, corpus, capsys):
    root, _ = corpus
    plain = bpe.Tokenizer([(104, 105)]).save(str(tmp_path / "tok"))
    assert encode("--tokenizer", plain, "--input", str(root / "raw.txt"), "--output", str(tmp_path / "o"), "--append-eos") == 2
    assert "no special tokens" in capsys.readouterr().err


def test_strict_fails_on_dead_letters_and_empty_output_dir_is_required(tmp_path, tokenizer, corpus, capsys):
    _, tok_path = tokenizer
    root, _ = corpus
    out = str(tmp_path / "out")
    args = ["--tokenizer", tok_path, "--input", str(root / "part-0.jsonl.gz"), "--output", out]
    assert encode(*args, "--strict") == 2
    assert "1 input records could not be read" in capsys.readouterr().err
    assert json.loads((tmp_path / "out" / "stats.json").read_text())["dead_letters"] == 1
    assert encode(*args) == 2
    assert "already holds token shards" in capsys.readouterr().err


def _ids_by_text(out, tok) -> dict[bytes, str]:
    return {tok.decode_bytes(tokens): doc_id for doc_id, tokens in read_rows(out)}


def test_ids_come_from_the_id_field_by_default_jsonl(tmp_path, tokenizer):
    tok, tok_path = tokenizer
    path = tmp_path / "docs.jsonl"
    path.write_text(
        json.dumps({"text": "with an id", "id": "doc-7"}) + "\n"
        + json.dumps({"text": "without one"}) + "\n"
        + json.dumps({"text": "a number", "id": 12}) + "\n",
        encoding="utf-8",
    )
    out = tmp_path / "out"
    assert encode("--tokenizer", tok_path, "--input", str(path), "--output", str(out)) == 0
    assert _ids_by_text(out, tok) == {b"with an id": "doc-7", b"without one": f"{path}:2", b"a number": "12"}
    off = tmp_path / "off"
    assert encode("--tokenizer", tok_path, "--input", str(path), "--output", str(off), "--id-field", "") == 0
    assert _ids_by_text(off, tok) == {b"with an id": f"{path}:1", b"without one": f"{path}:2", b"a number": f"{path}:3"}


def test_ids_come_from_the_id_field_by_default_parquet(tmp_path, tokenizer):
    tok, tok_path = tokenizer
    with_ids = tmp_path / "with_ids.parquet"
    pq.write_table(pa.table({"text": ["first", "second"], "id": ["a", None]}), with_ids)
    without = tmp_path / "without.parquet"
    pq.write_table(pa.table({"text": ["third"], "key": ["k"]}), without)
    out = tmp_path / "out"
    assert encode("--tokenizer", tok_path, "--input", str(tmp_path / "*.parquet"), "--output", str(out)) == 0
    # A null id is no id: the row gets <file>:<row number>, as does every row of a file without the column.
    assert _ids_by_text(out, tok) == {b"first": "a", b"second": f"{with_ids}:2", b"third": f"{without}:1"}
    keyed = tmp_path / "keyed"
    assert encode("--tokenizer", tok_path, "--input", str(without), "--output", str(keyed), "--id-field", "key") == 0
    assert _ids_by_text(keyed, tok) == {b"third": "k"}
    off = tmp_path / "off"
    assert encode("--tokenizer", tok_path, "--input", str(with_ids), "--output", str(off), "--id-field", "") == 0
    assert _ids_by_text(off, tok) == {b"first": f"{with_ids}:1", b"second": f"{with_ids}:2"}


def test_an_input_file_whose_name_is_not_utf8_is_refused_before_the_job(tokenizer, tmp_path, capsys):
    """Its records' ids <file>:<record number> would not be valid Unicode: the shards' string
    column cannot hold them, and any other spelling could be another record's id."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "good.txt").write_bytes(b"fine\n")
    with open(bytes(folder) + b"/bad\xff.txt", "wb") as f:
        f.write(b"hello\n")
    out = tmp_path / "out"
    assert cli.main(["encode", "--tokenizer", tokenizer[1], "--input", str(folder / "*.txt"), "--output", str(out),
                     *IN_MEMORY]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad\\udcff.txt': its name is not valid UTF-8" in err
    assert not out.exists()
