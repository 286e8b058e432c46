"""``beam-bpe pack`` and PackSequences on real Beam runners, read back from the Parquet written.

Every run is compared with tests.support.reference_packer.reference_pack (a plain single-process
packer), so every token of the input is accounted for in the right place; the
same documents as 1 or 8 shards, on 1 or 2 workers, give the same files.
"""

import json
import os
import pathlib

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import bpe
from tests.support.cli import IN_MEMORY, encode_and_pack, pack
from tests.support.corpora import write_token_shards
from tests.support.outputs import read_packed_parquet
from tests.support.real_text import stdlib_lines
from tests.support.reference_packer import document_keys, reference_pack, reference_validation
from tests.support.toy_tokenizers import train_small

TWO_WORKERS = ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]


def random_docs(n=400, seed=0, vocab=1000):
    rng = np.random.default_rng(seed)
    lengths = rng.geometric(1 / 40, n)
    lengths[::37] = 0  # empty documents are counted, and hold no token
    lengths[5] = 300  # longer than a sequence
    return [(f"doc-{i % 390}", rng.integers(0, vocab, size).tolist()) for i, size in enumerate(lengths)]


@pytest.fixture(scope="module")
def docs():
    return random_docs()


@pytest.fixture(scope="module")
def shards(tmp_path_factory, docs):
    root = tmp_path_factory.mktemp("shards")
    write_token_shards(docs, root / "one", shards=1, rows_per_group=1000)
    write_token_shards(docs, root / "eight", shards=8, rows_per_group=13)  # row groups cut documents' order too
    return root


def packed_splits(out):
    return {split: read_packed_parquet(out, split) for split in ("train", "validation")}


def stats(out):
    return json.loads((pathlib.Path(out) / "stats.json").read_text())


@pytest.fixture(scope="module")
def split_run(tmp_path_factory, shards):
    out = tmp_path_factory.mktemp("packed") / "one"
    assert pack("--input", str(shards / "one"), "--seq-len", "64", "--output", str(out), "--seed", "3",
                "--validation-fraction", "0.1", "--tokens-per-file", "1000", *IN_MEMORY) == 0
    return out


def test_split_documents_equal_the_reference(split_run, docs):
    validation = reference_validation(docs, 0.1)
    assert validation and len(validation) < len(docs) / 4
    expected = reference_pack(docs, 64, seed=3, validation=validation)
    assert packed_splits(split_run) == expected


def test_stats_account_for_every_token(split_run, docs):
    s = stats(split_run)
    tokens_in = sum(len(t) for _, t in docs)
    assert s["input"] == {"documents": len(docs), "tokens": tokens_in}
    assert s["tokens"] + s["dropped_tokens"] == tokens_in and s["dropped_tokens"] == 0
    validation = reference_validation(docs, 0.1)
    assert s["splits"]["validation"]["documents"] == sum(key in validation for key in document_keys(docs))
    assert s["documents"] == len(docs)
    for split, rows in packed_splits(split_run).items():
        assert s["splits"][split]["sequences"] == len(rows)
        assert s["splits"][split]["tokens"] == sum(real for _, real, _, _ in rows)
        assert s["splits"][split]["padding_tokens"] == sum(64 - real for _, real, _, _ in rows) < 64
    assert len(s["splits"]["train"]["files"]) == -(-s["splits"]["train"]["sequences"] // (1000 // 64)) > 1
    assert s["tokenizer_sha256"] == "0" * 64 and s["vocab_size"] == 1000
    assert s["repeated_ids"] == 10  # ids doc-0 .. doc-9 name two documents each


def test_eight_shards_on_two_workers_write_the_same_files(split_run, shards, tmp_path):
    out = tmp_path / "eight"
    assert pack("--input", str(shards / "eight" / "part-*.parquet"), "--seq-len", "64", "--output", str(out),
                "--seed", "3", "--validation-fraction", "0.1", "--tokens-per-file", "1000", *TWO_WORKERS) == 0
    assert packed_splits(out) == packed_splits(split_run)
    for split in ("train", "validation"):
        names = sorted(p.name for p in (split_run / split).iterdir())
        assert names == sorted(p.name for p in (out / split).iterdir())
        for name in names:  # the same rows in the same files
            assert pq.read_table(out / split / name).equals(pq.read_table(split_run / split / name))


def test_read_batches_stream_a_row_group(shards, docs):
    from transforms.pack.input_shards import Unit, read_batches

    unit = Unit(0, next((shards / "one").glob("*.parquet")).as_posix(), 0)
    whole = list(read_batches(unit, batch_tokens=1 << 30))
    batches = list(read_batches(unit, batch_tokens=50))
    assert len(whole) == 1 and len(batches) > 10
    assert [i for ids, _, _ in batches for i in ids] == whole[0][0] == [i for i, _ in docs]
    assert np.concatenate([lengths for _, lengths, _ in batches]).tolist() == [len(t) for _, t in docs]
    assert np.concatenate([tokens for _, _, tokens in batches]).tolist() == [x for _, t in docs for x in t]


def test_small_batches_and_row_groups_give_the_same_files(split_run, shards, tmp_path, docs, monkeypatch):
    """Units read in batches of a few tokens and output files of many row groups:
    the same sequences, split or whole documents."""
    from transforms.pack import input_shards as pack_input, sequence_formats

    monkeypatch.setattr(pack_input, "BATCH_TOKENS", 50)
    monkeypatch.setattr(sequence_formats, "ROW_GROUP_TOKENS", 200)
    out = tmp_path / "split"
    assert pack("--input", str(shards / "one"), "--seq-len", "64", "--output", str(out), "--seed", "3",
                "--validation-fraction", "0.1", "--tokens-per-file", "1000", *IN_MEMORY) == 0
    assert packed_splits(out) == packed_splits(split_run)
    assert pq.ParquetFile(next((out / "train").glob("*.parquet"))).metadata.num_row_groups > 1
    out = tmp_path / "whole"
    assert pack("--input", str(shards / "one"), "--seq-len", "50", "--output", str(out), "--no-split-documents",
                "--validation-documents", "20", "--window-tokens", "2000", "--pad-id", "999", *IN_MEMORY) == 0
    validation = reference_validation(docs, documents=20)
    assert packed_splits(out) == reference_pack(docs, 50, split_documents=False, pad_id=999, validation=validation,
                                                window_tokens=2000)


def test_another_seed_shuffles_differently_with_the_same_split(split_run, shards, tmp_path, docs):
    out = tmp_path / "seed"
    assert pack("--input", str(shards / "one"), "--seq-len", "64", "--output", str(out), "--seed", "4",
                "--validation-fraction", "0.1", "--tokens-per-file", "1000", *IN_MEMORY) == 0
    a, b = packed_splits(split_run), packed_splits(out)
    assert a["train"] != b["train"] and sorted(map(str, a["train"])) == sorted(map(str, b["train"]))
    assert {i for _, _, _, ids in b["validation"] for i in ids} <= {i for i, _ in reference_validation(docs, 0.1)}


@pytest.mark.parametrize("workers", [IN_MEMORY, TWO_WORKERS], ids=["in_memory", "two_workers"])
def test_whole_documents_equal_the_reference(shards, tmp_path, docs, workers):
    out = tmp_path / "whole"
    assert pack("--input", str(shards / "eight"), "--seq-len", "50", "--output", str(out), "--no-split-documents",
                "--validation-documents", "20", "--window-tokens", "2000", "--pad-id", "999", "--targets",
                *workers) == 0
    validation = reference_validation(docs, documents=20)
    expected = reference_pack(docs, 51, split_documents=False, pad_id=999, validation=validation, window_tokens=2000)
    assert packed_splits(out) == expected
    s = stats(out)
    assert s["sequence_length"] == 51 and s["splits"]["validation"]["documents"] == 20
    assert s["tokens"] == sum(len(t) for _, t in docs) and s["padding_tokens"] > 0
    # A document is cut only when it is longer than a sequence.
    pieces = [i for rows in expected.values() for _, _, _, ids in rows for i in ids]
    unique = {i for i, _ in docs if sum(j == i for j, _ in docs) == 1}
    cut = {i for i in pieces if pieces.count(i) > 1} & unique
    assert cut and cut <= {i for i, t in docs if len(t) > 51}


def test_validation_documents_hold_out_exactly_n_where_ids_repeat_across_files(tmp_path):
    # Each file numbers its documents from 0, as many corpora do: 40 ids, each in 3 files.
    rng = np.random.default_rng(7)
    docs = [(str(i), rng.integers(0, 1000, 20).tolist()) for _ in range(3) for i in range(40)]
    write_token_shards(docs, tmp_path / "in", shards=3, rows_per_group=7)
    out = tmp_path / "out"
    assert pack("--input", str(tmp_path / "in"), "--seq-len", "20", "--output", str(out),
                "--validation-documents", "10", *IN_MEMORY) == 0
    splits = packed_splits(out)
    # A sequence of 20 tokens is one whole document: every document in exactly one split.
    assert len(splits["validation"]) == 10 and len(splits["train"]) == 110
    assert sorted(seq for rows in splits.values() for seq, _, _, _ in rows) == sorted(t for _, t in docs)
    assert splits == reference_pack(docs, 20, validation=reference_validation(docs, documents=10))
    s = stats(out)
    assert (s["splits"]["validation"]["documents"], s["splits"]["train"]["documents"]) == (10, 110)
    assert s["repeated_ids"] == 80


def test_every_record_with_the_same_id_splits_as_asked(tmp_path):
    rng = np.random.default_rng(8)
    docs = [("same", rng.integers(0, 1000, 10).tolist()) for _ in range(60)]
    write_token_shards(docs, tmp_path / "in", shards=2, rows_per_group=9)
    for option, value in (("--validation-documents", "7"), ("--validation-fraction", "0.3")):
        out = tmp_path / option
        assert pack("--input", str(tmp_path / "in"), "--seq-len", "10", "--output", str(out), option, value,
                    *IN_MEMORY) == 0
        splits, s = packed_splits(out), stats(out)
        validation = (reference_validation(docs, documents=7) if option == "--validation-documents"
                      else reference_validation(docs, 0.3))
        assert splits == reference_pack(docs, 10, validation=validation)
        held_out = s["splits"]["validation"]["documents"]
        assert held_out == len(validation) == len(splits["validation"]) and s["repeated_ids"] == 59
        assert held_out == 7 if option == "--validation-documents" else 5 < held_out < 30


def test_drop_remainder_counts_the_dropped_tokens(shards, tmp_path, docs):
    out = tmp_path / "drop"
    assert pack("--input", str(shards / "one"), "--seq-len", "64", "--output", str(out), "--drop-remainder",
                *IN_MEMORY) == 0
    total = sum(len(t) for _, t in docs)
    s = stats(out)
    assert s["dropped_tokens"] == total % 64 > 0 and s["tokens"] == total - total % 64
    assert s["padding_tokens"] == 0 and s["splits"]["validation"]["sequences"] == 0
    assert packed_splits(out) == reference_pack(docs, 64, drop_remainder=True)
    assert "loss_mask" not in pq.read_schema(next((out / "train").glob("*.parquet"))).names


def test_encode_then_pack_gives_back_the_text(tmp_path):
    """The whole path on real text: beam-bpe encode --append-eos, then pack; the
    sequences, in stream order, decode to the documents separated by EOS."""
    from pipeline import cli

    lines = stdlib_lines()[:600]
    tok = train_small([line.decode() for line in lines], vocab_size=500)
    tok_path = tok.save(str(tmp_path / "tok"))
    (tmp_path / "corpus.txt").write_bytes(b"".join(lines))
    assert cli.main(["encode", "--tokenizer", tok_path, "--input", str(tmp_path / "corpus.txt"), "--output",
                     str(tmp_path / "shards"), "--append-eos", "--num-shards", "3", *IN_MEMORY]) == 0
    out = tmp_path / "packed"
    assert pack("--input", str(tmp_path / "shards"), "--seq-len", "128", "--output", str(out), *IN_MEMORY) == 0
    encoded, packed = json.loads((tmp_path / "shards" / "stats.json").read_text()), stats(out)
    assert packed["tokens"] == encoded["tokens"] and packed["documents"] == encoded["documents"]
    assert packed["tokenizer_sha256"] == bpe.Tokenizer.load(tok_path).sha256
    eos = tok.special_tokens["<|endoftext|>"]
    assert packed["pad_id"] == packed["eos_token_id"] == eos
    # Undo the shuffle: sequence k of the stream is at position Permutation(k).
    from transforms.pack.sequence_order import Permutation

    rows = read_packed_parquet(out, "train")
    positions = Permutation(len(rows), 0, "train")(np.arange(len(rows)))
    stream = [t for k in range(len(rows)) for t in rows[positions[k]][0][: rows[positions[k]][1]]]
    assert tok.decode_bytes([t for t in stream if t != eos]) == b"".join(lines)
    assert stream.count(eos) == len(lines)


def test_encode_with_pack_equals_encode_then_pack(tmp_path):
    from pipeline import cli

    lines = stdlib_lines()[:400]
    tok_path = train_small([line.decode() for line in lines], vocab_size=450).save(str(tmp_path / "tok"))
    (tmp_path / "corpus.txt").write_bytes(b"".join(lines) + b"\n")
    (tmp_path / "bad.jsonl").write_bytes(b'{"text": "fine"}\n{not json\n')
    encode_argv = ["--tokenizer", tok_path, "--input", str(tmp_path / "corpus.txt"), "--input",
                   str(tmp_path / "bad.jsonl"), "--append-eos", *IN_MEMORY]
    pack_argv = ["--seed", "2", "--validation-fraction", "0.1", "--targets", *IN_MEMORY]
    assert cli.main(["encode", *encode_argv, "--output", str(tmp_path / "shards")]) == 0
    assert pack("--input", str(tmp_path / "shards"), "--seq-len", "64", "--output", str(tmp_path / "two"),
                *pack_argv) == 0
    one = tmp_path / "one"
    assert encode_and_pack(*encode_argv, "--output", str(one), "--pack", "64", *pack_argv) == 0
    assert packed_splits(one) == packed_splits(tmp_path / "two")
    both, separate = stats(one), stats(tmp_path / "two")
    assert both.pop("encode")["dead_letters"] == 1
    assert both == separate
    assert sorted(os.listdir(one)) == [".beam-bpe-output.json", "dead_letters", "stats.json", "train", "validation"]
    letters = [json.loads(line) for p in (one / "dead_letters").iterdir() for line in p.read_text().splitlines()]
    assert [(pathlib.Path(d["file"]).name, d["record"]) for d in letters] == [("bad.jsonl", 2)]
    assert encode_and_pack(*encode_argv, "--output", str(one), "--pack", "64", *pack_argv) == 2  # complete
    assert encode_and_pack(*encode_argv, "--output", str(one), "--pack", "64", "--strict", "--overwrite",
                           *pack_argv) == 2


# ---------------------------------------------------------------- user mistakes and crash safety


def test_a_sequence_longer_than_the_corpus_is_refused_before_the_job(tmp_path, capsys):
    docs = [("a", list(range(12))), ("b", list(range(8)))]  # 20 tokens
    paths = write_token_shards(docs, tmp_path / "in")
    argv = ["--input", paths[0], "--output", str(tmp_path / "out"), *IN_MEMORY]
    assert pack(*argv, "--seq-len", "21") == 2
    assert capsys.readouterr().err.strip() == (
        "beam-bpe pack: error: --seq-len 21 is longer than the 20 tokens of the shards: every sequence would be "
        "mostly padding; choose at most 20")
    assert pack(*argv, "--seq-len", "20", "--targets") == 2  # 21 tokens a sequence
    assert "choose at most 19 with --targets" in capsys.readouterr().err
    assert pack(*argv, "--seq-len", "10000000000", "--format", "llmc") == 2  # about 18.6 GiB of padding
    assert capsys.readouterr().err.strip() == (
        "beam-bpe pack: error: --seq-len 10000000000 is more than the 2147483647 tokens a sequence can hold")
    assert not (tmp_path / "out").exists()
    assert pack(*argv, "--seq-len", "20") == 0
    assert packed_splits(tmp_path / "out") == reference_pack(docs, 20)


def test_encode_with_pack_refuses_a_sequence_no_format_holds(tmp_path, capsys):
    lines = stdlib_lines()[:20]
    tok_path = train_small([line.decode() for line in lines], vocab_size=300).save(str(tmp_path / "tok"))
    (tmp_path / "corpus.txt").write_bytes(b"".join(lines))
    assert encode_and_pack("--tokenizer", tok_path, "--input", str(tmp_path / "corpus.txt"), "--output",
                           str(tmp_path / "out"), "--pack", "10000000000", *IN_MEMORY) == 2
    assert capsys.readouterr().err.strip() == ("beam-bpe encode: error: --pack 10000000000 is more than the "
                                               "2147483647 tokens a sequence can hold")
    assert not (tmp_path / "out").exists()


def test_encode_with_pack_refuses_more_validation_documents_than_it_read(tmp_path, capsys):
    lines = stdlib_lines()[:20]
    tok_path = train_small([line.decode() for line in lines], vocab_size=300).save(str(tmp_path / "tok"))
    (tmp_path / "corpus.txt").write_bytes(b"".join(lines))
    out = tmp_path / "out"
    assert encode_and_pack("--tokenizer", tok_path, "--input", str(tmp_path / "corpus.txt"), "--output", str(out),
                           "--pack", "64", "--validation-documents", "50", *IN_MEMORY) == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == ("beam-bpe encode: error: --validation-documents 50 leaves no training documents "
                                    "(the shards hold 20)") and "Traceback" not in err
    assert sorted(os.listdir(out)) == [".beam-bpe-output.json"]  # no .staging/, no result


def test_user_mistakes_are_one_line_errors(shards, tmp_path, capsys):
    other = write_token_shards(random_docs(10), tmp_path / "other", sha256="1" * 64)
    base = ["--seq-len", "8", "--output", str(tmp_path / "out"), *IN_MEMORY]
    cases = [
        (["--input", str(shards / "one"), "--input", other[0]], "different tokenizers"),
        (["--input", str(tmp_path / "nothing-*.parquet")], "matches no files"),
        (["--input", str(shards / "one"), "--no-split-documents", "--drop-remainder"], "--drop-remainder"),
        (["--input", str(shards / "one"), "--validation-fraction", "1.5"], "--validation-fraction"),
        (["--input", str(shards / "one"), "--validation-documents", "400"], "leaves no training documents"),
        (["--input", str(shards / "one"), "--format", "tfrecord"], "unknown format"),
        (["--input", str(shards / "one"), "--pad-id", "70000"], "--pad-id 70000 is not a token ID of the tokenizer"),
        (["--input", str(shards / "one"), "--pad-id", "1000"], "(vocab_size 1000)"),
        (["--input", str(shards / "one"), "--pad-id", "-2"], "--pad-id must be 0 or more"),
        (["--input", str(shards / "one"), "--format", "llmc", "--pad-id", "0"], "llmc files hold no padding"),
        (["--input", str(shards / "one"), "--format", "megatron", "--pad-id", "0"], "--seq-len: megatron output is "
         "whole documents"),
    ]
    for argv, message in cases:
        assert pack(*argv, *base) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("beam-bpe pack: error: ") and message in err[0], err
    huge = write_token_shards(random_docs(10), tmp_path / "huge", vocab_size=2**32)
    assert pack("--input", huge[0], "--format", "megatron", "--output", str(tmp_path / "out"), *IN_MEMORY) == 2
    assert "megatron files hold int32 tokens" in capsys.readouterr().err
    big = write_token_shards(random_docs(10), tmp_path / "big", vocab_size=100_000)
    not_shard = tmp_path / "plain.parquet"
    pq.write_table(pq.read_table(big[0]).drop(["tokens"]), not_shard)
    assert pack("--input", str(not_shard), *base) == 2
    assert "not a token shard" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_complete_result_is_replaced_only_with_overwrite(shards, tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["--input", str(shards / "one"), "--seq-len", "32", "--output", str(out), *IN_MEMORY]
    assert pack(*argv) == 0
    first = packed_splits(out)
    assert pack(*argv) == 2 and "--overwrite" in capsys.readouterr().err
    # Leftovers of a crashed run (no stats.json) are removed on rerun.
    (out / "stats.json").unlink()
    (out / ".staging" / "train").mkdir(parents=True)
    (out / ".staging" / "train" / "part-00009-of-00010.parquet").write_bytes(b"partial")
    (out / "train" / "part-00099-of-00100.parquet").write_bytes(b"stale")
    assert pack(*argv) == 0
    assert "leftovers" in capsys.readouterr().err
    assert packed_splits(out) == first and not (out / ".staging").exists()
    assert pack(*argv, "--overwrite", "--seed", "1") == 0
    assert packed_splits(out) != first and sorted(os.listdir(out)) == [".beam-bpe-output.json", "stats.json", "train"]  # no validation sequences


def test_shards_written_by_other_tools(tmp_path, capsys):
    """Columns in another order, an extra column, no Parquet statistics: the same sequences."""
    import pyarrow as pa

    from transforms.shards import TokenRow, rows_to_table, shard_schema

    docs = random_docs(60, seed=2)
    table = rows_to_table([TokenRow(i, t) for i, t in docs], shard_schema("f" * 64, 1000))
    other = pa.table({"tokens": table.column("tokens"), "lang": pa.array(["en"] * len(docs)),
                      "id": table.column("id")}).replace_schema_metadata(table.schema.metadata)
    (tmp_path / "in").mkdir()
    pq.write_table(other, tmp_path / "in" / "part-00000-of-00001.parquet", write_statistics=False, row_group_size=7)
    out = tmp_path / "out"
    assert pack("--input", str(tmp_path / "in"), "--seq-len", "32", "--output", str(out), *IN_MEMORY) == 0
    assert packed_splits(out) == reference_pack(docs, 32)
    assert stats(out)["input"]["tokens"] == sum(len(t) for _, t in docs)
    no_ids = other.set_column(2, "id", pa.array([None] + [f"x{i}" for i in range(len(docs) - 1)]))
    pq.write_table(no_ids, tmp_path / "no-ids.parquet")
    assert pack("--input", str(tmp_path / "no-ids.parquet"), "--seq-len", "32", "--output", str(tmp_path / "o2"),
                *IN_MEMORY) == 2
    assert "without an id" in capsys.readouterr().err


def _foreign_shard(directory, ids, tokens, metadata=None, id_type=None, token_type=None, statistics=True):
    """A shard another tool wrote: int64 token lists by default, the footer holding only ``metadata``."""
    directory.mkdir(parents=True, exist_ok=True)
    table = pa.table({"id": pa.array(ids, id_type or pa.string()),
                      "tokens": pa.array(tokens, pa.list_(token_type or pa.int64()))})
    table = table.replace_schema_metadata({b"tokenizer_sha256": b"e" * 64, **(metadata or {})})
    path = directory / "part-00000-of-00001.parquet"
    pq.write_table(table, path, write_statistics=statistics)
    return path


@pytest.mark.parametrize("statistics", [True, False])
def test_token_ids_past_uint16_are_packed_into_uint32_without_wrapping(tmp_path, statistics):
    docs = [("a", [1, 70_000, 5]), ("b", [65_536, 2])]
    _foreign_shard(tmp_path / "in", [d for d, _ in docs], [t for _, t in docs], statistics=statistics)
    out = tmp_path / "out"
    assert pack("--input", str(tmp_path / "in"), "--seq-len", "4", "--output", str(out), *IN_MEMORY) == 0
    assert packed_splits(out) == reference_pack(docs, 4)
    [file] = (out / "train").glob("*.parquet")
    assert str(pq.read_schema(file).field("input_ids").type.value_type) == "uint32"
    assert stats(out)["vocab_size"] == 70_001  # no vocab_size in the footer: the largest ID + 1
    assert pq.read_schema(file).metadata[b"vocab_size"] == b"70001"


@pytest.mark.parametrize("tokens, metadata, message", [
    ([[1, 2], [-3, 4]], {}, "negative token ID -3"),
    ([[1, 2], [1000, 4]], {b"vocab_size": b"1000"}, "token ID 1000, not below the vocab_size 1000"),
    ([[1, 2], [2**32, 4]], {}, "does not fit uint32"),
    ([[1, None], [3, 4]], {b"vocab_size": b"1000"}, "null"),
    ([[1, 2], [3, 4]], {b"vocab_size": b"many"}, "vocab_size"),
])
def test_token_ids_that_do_not_fit_are_one_line(tmp_path, capsys, tokens, metadata, message):
    path = _foreign_shard(tmp_path / "in", ["a", "b"], tokens, metadata)
    out = tmp_path / "out"
    assert pack("--input", str(path), "--seq-len", "8", "--output", str(out), *IN_MEMORY) == 2
    [error] = capsys.readouterr().err.strip().splitlines()
    assert error.startswith(f"beam-bpe pack: error: {path}") and message in error, error


def test_an_id_column_that_is_not_text_is_one_line(tmp_path, capsys):
    path = _foreign_shard(tmp_path / "in", [1, 2], [[1, 2], [3]], id_type=pa.int64())
    assert pack("--input", str(path), "--seq-len", "8", "--output", str(tmp_path / "out"), *IN_MEMORY) == 2
    [error] = capsys.readouterr().err.strip().splitlines()
    assert error == f"beam-bpe pack: error: {path}: column id has type int64; a token shard's ids are strings"
    assert not (tmp_path / "out").exists()
