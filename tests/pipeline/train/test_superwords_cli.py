"""``beam-bpe train --superword-transition T`` and ``--extend BASE --superword-merges K`` end to end: the count job's stage-two table is
exact (with one worker or two), the merges are the whole-document reference's, tokenizer.json
gives the same IDs in Hugging Face tokenizers on held-out text and decodes losslessly, --resume,
--word-counts, and the flags that do not go together."""

import argparse
import json
import os
import shutil

import pyarrow.parquet as pq
import pytest
import tokenizers
import transformers

import bpe
from bpe.superwords import reference
from bpe.superwords.rules import STAGE_TWO_PATTERN, is_superword
from bpe.training import extension
from pipeline.train.resume import Checkpoint, fingerprint
from tests.support.cli import IN_MEMORY, train
from tests.support.outputs import stats
from tests.support.real_text import MULTILINGUAL_LINES, stdlib_lines
from tests.support.toy_tokenizers import plain_count

VOCAB, TRANSITION = 380, 330
SPECIAL = "<|endoftext|>"


def lines():
    """Prose and code lines: docstrings repeat phrases ("of the", "If the"), enough to join."""
    return [line for line in stdlib_lines() if line.strip()][:400] + [s.encode() for s in MULTILINGUAL_LINES]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "docs.txt"
    path.write_bytes(b"".join(lines()))
    return str(path)


@pytest.fixture(scope="module")
def trained(corpus, tmp_path_factory):
    output = str(tmp_path_factory.mktemp("superwords"))
    assert train("--input", corpus, "--vocab-size", str(VOCAB), "--superword-transition", str(TRANSITION),
                 "--special-token", SPECIAL, "--output", output, *IN_MEMORY) == 0
    return output


def table(path):
    rows = pq.read_table(path).to_pydict()
    assert len(set(rows["word"])) == len(rows["word"])
    return dict(zip(rows["word"], rows["count"]))


def test_the_stage_two_table_is_exact(corpus, trained):
    expected = plain_count(lines(), STAGE_TWO_PATTERN)
    assert table(os.path.join(trained, "superword_counts.parquet")) == expected


def test_two_workers_count_the_same_table(corpus, trained, tmp_path):
    output = str(tmp_path / "out")
    assert train("--input", corpus, "--vocab-size", str(VOCAB), "--superword-transition", str(TRANSITION),
                 "--special-token", SPECIAL, "--output", output,
                 "--direct_running_mode=multi_threading", "--direct_num_workers=2") == 0
    for name in ("superword_counts.parquet", "word_counts.parquet"):
        # Byte for byte: each table is sorted by word bytes by its one writer, whatever order
        # the workers finish their partitions in.
        with open(os.path.join(output, name), "rb") as a, open(os.path.join(trained, name), "rb") as b:
            assert a.read() == b.read(), name
        words = pq.read_table(os.path.join(output, name), columns=["word"]).column("word").to_pylist()
        assert words == sorted(words)
    with open(os.path.join(output, "tokenizer.json"), "rb") as a, open(os.path.join(trained, "tokenizer.json"), "rb") as b:
        assert a.read() == b.read()


def test_merges_are_the_reference_over_whole_documents(trained):
    tok = bpe.Tokenizer.load(trained)
    assert tok.merges == reference.train(lines(), TRANSITION, VOCAB - 1)
    assert tok.vocab_size == VOCAB
    superwords = [t for t in range(TRANSITION, VOCAB - 1) if is_superword(tok.token_bytes(t))]
    assert len(superwords) > 10
    assert stats(trained)["merges"] == VOCAB - 257


def held_out():
    return [line.decode() for line in stdlib_lines()[-300:]] + list(MULTILINGUAL_LINES) + [
        "by the way, of the 1234 things::: we   said  ", "é\u0301 \r\n\n  tabs\there"]


def test_hugging_face_gives_the_same_ids_and_decoding_is_lossless(trained):
    ours = bpe.Tokenizer.load(trained)
    theirs = tokenizers.Tokenizer.from_file(os.path.join(trained, "tokenizer.json"))
    fast = transformers.PreTrainedTokenizerFast(tokenizer_file=os.path.join(trained, "tokenizer.json"))
    for text in held_out():
        ids = ours.encode(text)
        assert theirs.encode(text, add_special_tokens=False).ids == ids
        assert fast.encode(text, add_special_tokens=False) == ids
        assert ids == reference.encode(text, ours.merges)
        assert ours.decode(ids) == text
    # SuperBPE's released files pre-tokenize the same way: one Split with the stage-two regex, then ByteLevel.
    with open(os.path.join(trained, "tokenizer.json"), encoding="utf-8") as f:
        split, byte_level = json.load(f)["pre_tokenizer"]["pretokenizers"]
    assert split["pattern"]["Regex"] == STAGE_TWO_PATTERN and split["behavior"] == "Isolated"
    assert byte_level["type"] == "ByteLevel" and not byte_level["use_regex"]


def test_word_counts_trains_from_both_tables(trained, tmp_path):
    output = str(tmp_path / "again")
    assert train("--word-counts", os.path.join(trained, "word_counts.parquet"), "--vocab-size", str(VOCAB),
                 "--superword-transition", str(TRANSITION), "--special-token", SPECIAL, "--output", output) == 0
    assert bpe.Tokenizer.load(output).merges == bpe.Tokenizer.load(trained).merges


def checkpointed(trained, tmp_path, transition, merges):
    """A copy of the count of ``trained`` with a checkpoint of ``merges`` made with ``transition``."""
    output = tmp_path / "resumed"
    output.mkdir()
    for name in ("word_counts.parquet", "superword_counts.parquet", "word_counts.complete", ".beam-bpe-output.json"):
        shutil.copy(os.path.join(trained, name), output / name)
    args = argparse.Namespace(min_frequency=2, pattern="gpt2", tie_break="bytes", vocab_size=VOCAB, parity=False,
                              global_merges=None, special_token=[SPECIAL], source_weight=[], source_field=None,
                              superword_transition=transition)
    Checkpoint(str(output), fingerprint(str(output / "word_counts.parquet")), args).save([list(m) for m in merges])
    return str(output)


def test_resume_continues_without_counting_again(corpus, trained, tmp_path, capsys):
    merges = bpe.Tokenizer.load(trained).merges
    output = checkpointed(trained, tmp_path, TRANSITION, merges[:40])
    capsys.readouterr()
    assert train("--input", corpus, "--vocab-size", str(VOCAB), "--superword-transition", str(TRANSITION),
                 "--special-token", SPECIAL, "--output", output, "--resume", *IN_MEMORY) == 0
    err = capsys.readouterr().err
    assert "not counting again" in err and "resuming after 40 merges" in err
    assert bpe.Tokenizer.load(output).merges == merges


def test_resume_refuses_a_checkpoint_of_another_transition(corpus, trained, tmp_path, capsys):
    output = checkpointed(trained, tmp_path, TRANSITION + 10, [])
    assert train("--input", corpus, "--vocab-size", str(VOCAB), "--superword-transition", str(TRANSITION),
                 "--special-token", SPECIAL, "--output", output, "--resume", *IN_MEMORY) == 2
    assert "cannot --resume" in capsys.readouterr().err


@pytest.mark.parametrize("flags, message", [
    (["--parity"], "--parity does not go with --superword-transition"),
    (["--tie-break", "hf"], "--tie-break hf does not go with --superword-transition"),
    (["--superword-transition", "100"], "must lie between 256"),
])
def test_flags_that_do_not_go_together_are_one_line(flags, message, corpus, tmp_path, capsys):
    argv = ["--input", corpus, "--vocab-size", str(VOCAB), "--output", str(tmp_path / "x")]
    if "--superword-transition" not in flags:
        argv += ["--superword-transition", str(TRANSITION)]
    assert train(*argv, *flags) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


# --- train --extend BASE --superword-merges K ---------------------------------------------------


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """Ours with a special token, trained on other text: the new IDs come after it."""
    output = tmp_path_factory.mktemp("base")
    docs = [line for line in stdlib_lines()[400:1400] if line.strip()]
    return bpe.train(plain_count(docs), 600, special_tokens=["<|endoftext|>"]).save(str(output))


def test_superword_merges_extend_a_base_keeping_its_ids(corpus, base, tmp_path, capsys):
    output = str(tmp_path / "extended")
    assert train("--extend", base, "--superword-merges", "30", "--input", corpus, "--output", output,
                 *IN_MEMORY) == 0
    assert "new tokens; the counted pieces take" in capsys.readouterr().err
    base_tok, extended = bpe.Tokenizer.load(base), bpe.Tokenizer.load(output)
    first = base_tok.vocab_size
    expected = reference.extend(lines(), base_tok.piece_encoder.encode_bytes, extension.spelled_bytes(base_tok),
                                base_tok.pattern, 30)
    assert extended.merges[-30:] == expected and extended.vocab_size == first + 30
    assert extended.special_tokens == base_tok.special_tokens
    assert all(extended.token_bytes(i) == data for i, data in base_tok.ordinary_tokens().items())
    theirs = tokenizers.Tokenizer.from_file(os.path.join(output, "tokenizer.json"))
    for text in held_out():
        ids = extended.encode(text)
        assert theirs.encode(text, add_special_tokens=False).ids == ids
        assert extended.decode(ids) == text
        assert extended.decode_bytes(extension.expand(ids, expected, first)) == text.encode()
    data = stats(output)
    assert data["merges"] == 30 and data["tokens_after"] < data["tokens_before"]


@pytest.mark.parametrize("flags, message", [
    (["--new-tokens", "5"], "--new-tokens does not go with --superword-merges"),
    (["--superword-transition", "300"], "do not go together"),
])
def test_superword_merges_refuses_what_does_not_go_with_it(flags, message, corpus, base, tmp_path, capsys):
    assert train("--extend", base, "--superword-merges", "30", "--input", corpus, "--output", str(tmp_path / "x"),
                 *flags) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_superword_merges_needs_extend(corpus, tmp_path, capsys):
    assert train("--superword-merges", "30", "--vocab-size", "400", "--input", corpus, "--output",
                 str(tmp_path / "x")) == 2
    assert "--superword-merges goes with --extend" in capsys.readouterr().err


def test_the_stats_count_the_documents_once(trained):
    """The stage-two count reads the same documents; its counters are its own, not added to train's."""
    data = stats(trained)
    text = b"".join(lines())
    assert data["documents"] == text.count(b"\n") and data["bytes"] == len(text)
