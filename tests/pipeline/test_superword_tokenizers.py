"""A superword tokenizer (``train --superword-transition``) through the other commands: encode
and decode (streaming too) give back the text byte for byte, pack keeps the IDs, prune writes a
smaller tokenizer HF reads alike, and report shows the superword tokens and their share."""

import json
import os
import sys

import pytest
import tokenizers

import bpe
from bpe.superwords.rules import is_superword
from pipeline import cli
from tests.support.cli import IN_MEMORY, pack, report, train
from tests.support.outputs import read_rows, read_packed_parquet, read_report
from tests.support.real_text import MULTILINGUAL_LINES, stdlib_lines

# One document per line, as --format text reads them (a line ends at "\n" only).
TEXT = "".join([line.decode() for line in stdlib_lines()[-200:] if line.strip()] + list(MULTILINGUAL_LINES))
HELD_OUT = [line + "\n" for line in TEXT.split("\n")[:-1]]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("superword_tools")
    (root / "train.txt").write_bytes(b"".join(line for line in stdlib_lines()[:1500] if line.strip()))
    (root / "held_out.txt").write_bytes(TEXT.encode())
    tok = str(root / "tok")
    assert train("--input", str(root / "train.txt"), "--vocab-size", "700", "--superword-transition", "500",
                 "--special-token", "<|endoftext|>", "--output", tok, *IN_MEMORY) == 0
    assert any(is_superword(t) for t in bpe.Tokenizer.load(tok).ordinary_tokens().values())
    return root, tok


@pytest.fixture(scope="module")
def shards(setup):
    root, tok = setup
    out = root / "shards"
    assert cli.main(["encode", "--tokenizer", tok, "--input", str(root / "held_out.txt"), "--output", str(out),
                     "--no-progress", *IN_MEMORY]) == 0
    return out


def test_encode_writes_the_ids_of_the_tokenizer_and_of_hugging_face(setup, shards):
    _, tok = setup
    ours = bpe.Tokenizer.load(tok)
    theirs = tokenizers.Tokenizer.from_file(os.path.join(tok, "tokenizer.json"))
    rows = [tokens for _, tokens in read_rows(shards)]
    assert rows == [ours.encode(line) for line in HELD_OUT]
    assert rows == [theirs.encode(line, add_special_tokens=False).ids for line in HELD_OUT]


def test_decode_and_the_stream_decoder_give_back_the_text(setup, shards, capfdbinary):
    root, tok = setup
    assert cli.main(["decode", "--tokenizer", tok, "--input", str(shards / "part-*.parquet")]) == 0
    assert capfdbinary.readouterr().out == (root / "held_out.txt").read_bytes()
    ours = bpe.Tokenizer.load(tok)
    decoder = ours.stream_decoder()
    text = "".join(decoder.step(i) for line in HELD_OUT for i in ours.encode(line)) + decoder.flush()
    assert text == "".join(HELD_OUT)


def test_pack_keeps_every_id(setup, shards, tmp_path):
    out = tmp_path / "packed"
    assert pack("--input", str(shards / "part-*.parquet"), "--output", str(out), "--seq-len", "64",
                "--validation-fraction", "0") == 0
    packed = [i for ids, real, _, _ in read_packed_parquet(out, "train") for i in ids[:real]]
    eos = bpe.Tokenizer.load(setup[1]).special_tokens["<|endoftext|>"]
    written = [i for _, tokens in read_rows(shards) for i in tokens]
    assert sorted(i for i in packed if i != eos) == sorted(written)


def test_prune_keeps_a_tokenizer_hugging_face_reads_alike(setup, tmp_path):
    root, tok = setup
    out = tmp_path / "pruned"
    assert cli.main(["prune", "--no-progress", "--tokenizer", tok, "--input", str(root / "held_out.txt"),
                     "--vocab-size", "600", "--output", str(out), *IN_MEMORY]) == 0
    pruned = bpe.Tokenizer.load(str(out))
    theirs = tokenizers.Tokenizer.from_file(str(out / "tokenizer.json"))
    assert pruned.vocab_size == 600 and pruned.pattern == bpe.Tokenizer.load(tok).pattern
    for line in HELD_OUT:
        ids = pruned.encode(line)
        assert theirs.encode(line, add_special_tokens=False).ids == ids
        assert pruned.decode(ids) == line


def test_report_shows_the_superword_tokens_and_their_share(setup, tmp_path):
    root, tok = setup
    out = tmp_path / "report"
    assert report("--tokenizer", tok, "--input", str(root / "held_out.txt"), "--output", str(out),
                  "--no-progress", *IN_MEMORY) == 0
    superwords = read_report(out)["tokenizers"][0]["vocabulary"]["superwords"]
    ours = bpe.Tokenizer.load(tok)
    ids = [i for line in HELD_OUT for i in ours.encode(line)]
    used = [i for i in ids if is_superword(ours.token_bytes(i))]
    assert superwords["in_vocabulary"] == sum(map(is_superword, ours.ordinary_tokens().values()))
    assert superwords["produced"] == len(used) > 0
    assert superwords["share_of_tokens"] == pytest.approx(len(used) / len(ids))
    assert superwords["share_of_bytes"] == pytest.approx(
        sum(len(ours.token_bytes(i)) for i in used) / sum(len(ours.token_bytes(i)) for i in ids))
    assert "superword tokens (tokens that bridge a space)" in (out / "index.html").read_text(encoding="utf-8")
