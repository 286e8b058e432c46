"""``beam-bpe pack --source NAME=SHARD_GLOB`` with token budgets: a mixture of named sources.

Every run is compared with tests.support.reference_packer.reference_mixture (a
plain single-process mixture, then the plain packer), so every token of every
source is accounted for in the right place; the same documents as 1 or 8
shards per source, on 1 or 2 workers, give the same files, byte for byte.
"""

import collections
import json
import pathlib

import numpy as np
import pytest

from tests.support.cli import IN_MEMORY, pack
from tests.support.corpora import write_token_shards
from tests.support.outputs import read_packed_parquet
from tests.support.reference_packer import document_keys, reference_mixture, reference_pack
from transforms.pack.sequence_order import id_hashes

TWO_WORKERS = ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]
BUDGETS = {"code": 2600, "web": 4000, "wiki": 3300}  # about 2.6, 0.5 and 3.3 epochs
SEED, FRACTION = 5, 0.1


def source_docs(n, seed):
    rng = np.random.default_rng(seed)
    lengths = rng.geometric(1 / 30, n)
    lengths[::29] = 0  # empty documents are counted, and hold no token
    # The same ids in every source: a document's key is unique within the job, its packed id names the source.
    return [(f"doc-{i}", rng.integers(0, 1000, size).tolist()) for i, size in enumerate(lengths)]


@pytest.fixture(scope="module")
def sources():
    return {"web": source_docs(280, 1), "code": source_docs(36, 2), "wiki": source_docs(33, 3)}


@pytest.fixture(scope="module")
def shards(tmp_path_factory, sources):
    root = tmp_path_factory.mktemp("sources")
    for name, docs in sources.items():
        write_token_shards(docs, root / "one" / name, shards=1)
        write_token_shards(docs, root / "eight" / name, shards=8, rows_per_group=7)
    return root


def mixture_flags(root, budgets=BUDGETS):
    flags = []
    for name in sorted(budgets):
        flags += ["--source", f"{name}={root / name}", "--source-tokens", f"{name}={budgets[name]}"]
    return flags


def run_mixture(root, out, *extra):
    assert pack(*mixture_flags(root), "--seq-len", "64", "--output", str(out), "--seed", str(SEED),
                "--validation-fraction", str(FRACTION), "--tokens-per-file", "1000", *extra) == 0
    return out


def read_json(out, name):
    return json.loads((pathlib.Path(out) / name).read_text())


@pytest.fixture(scope="module")
def mixed(tmp_path_factory, shards):
    return run_mixture(shards / "one", tmp_path_factory.mktemp("mixed") / "one", *IN_MEMORY)


def test_the_mixture_equals_the_reference(mixed, sources):
    train, validation = reference_mixture(sources, BUDGETS, SEED, FRACTION)
    expected_train = reference_pack(train, 64, seed=SEED)["train"]
    expected_validation = reference_pack(validation, 64, seed=SEED,
                                         validation=set(document_keys(validation)))["validation"]
    assert read_packed_parquet(mixed, "train") == expected_train
    assert read_packed_parquet(mixed, "validation") == expected_validation


def piece_tokens(out, split):
    """{SOURCE:ID: tokens of all its pieces} of a split."""
    tokens = collections.Counter()
    for _, real, starts, ids in read_packed_parquet(out, split):
        for start, end, doc_id in zip(starts, [*starts[1:], real], ids):
            tokens[doc_id] += end - start
    return tokens


def test_every_token_is_accounted_for_per_source_and_budgets_are_met(mixed, sources):
    mixture, stats = read_json(mixed, "mixture.json"), read_json(mixed, "stats.json")
    assert mixture["seed"] == SEED and sorted(mixture["sources"]) == sorted(BUDGETS)
    train, held_out = piece_tokens(mixed, "train"), piece_tokens(mixed, "validation")
    assert not set(train) & set(held_out)  # no document in both splits
    lengths = {f"{name}:{i}": len(t) for name, docs in sources.items() for i, t in docs}
    for name, entry in mixture["sources"].items():
        docs = sources[name]
        in_train = {doc_id: n for doc_id, n in train.items() if doc_id.startswith(f"{name}:")}
        assert sum(in_train.values()) == entry["train"]["tokens"]
        assert sum(n for d, n in held_out.items() if d.startswith(f"{name}:")) == entry["held_out"]["tokens"]
        assert entry["available"] == {"documents": len(docs), "tokens": sum(len(t) for _, t in docs)}
        # The budget, to within one document.
        assert BUDGETS[name] <= entry["train"]["tokens"] < BUDGETS[name] + max(len(t) for _, t in docs)
        assert entry["epochs"] == pytest.approx(entry["train"]["tokens"] / entry["train_available"]["tokens"])
        # Repeats are whole documents: each document's tokens, a whole number of times.
        full = entry["train"]["full_passes"]
        for doc_id, n in in_train.items():
            assert n in (full * lengths[doc_id], (full + 1) * lengths[doc_id]), doc_id
    for key in ("documents", "tokens"):
        assert sum(s["train"][key] + s["held_out"][key] for s in mixture["sources"].values()) == stats[key] + (
            stats["dropped_tokens"] if key == "tokens" else 0)
    assert sum(s["train"]["tokens"] for s in mixture["sources"].values()) == stats["splits"]["train"]["tokens"]
    assert stats["mixture"] == "mixture.json"
    assert stats["input"] == {"documents": sum(len(d) for d in sources.values()),
                              "tokens": sum(len(t) for d in sources.values() for _, t in d)}


def test_eight_shards_per_source_on_two_workers_write_the_same_bytes(mixed, shards, tmp_path):
    other = run_mixture(shards / "eight", tmp_path / "eight", *TWO_WORKERS)
    names = sorted(str(p.relative_to(mixed)) for p in mixed.rglob("*") if p.is_file() and p.name != "stats.json")
    assert names == sorted(str(p.relative_to(other)) for p in other.rglob("*") if p.is_file() and p.name != "stats.json")
    assert "mixture.json" in names and any(n.startswith("train/") for n in names)
    for name in names:
        assert (mixed / name).read_bytes() == (other / name).read_bytes(), name


@pytest.mark.parametrize("workers", [IN_MEMORY, TWO_WORKERS])
def test_whole_documents_equal_the_reference(shards, tmp_path, sources, workers):
    out = run_mixture(shards / "eight", tmp_path / "whole", "--no-split-documents", "--window-tokens", "500",
                      *workers)
    train, validation = reference_mixture(sources, BUDGETS, SEED, FRACTION)
    assert read_packed_parquet(out, "train") == reference_pack(train, 64, split_documents=False, seed=SEED,
                                                               window_tokens=500)["train"]
    assert read_packed_parquet(out, "validation") == reference_pack(
        validation, 64, split_documents=False, seed=SEED, validation=set(document_keys(validation)),
        window_tokens=500)["validation"]


def test_weights_share_the_total_tokens(shards, tmp_path, sources):
    out = tmp_path / "weighted"
    flags = [f for name in sorted(sources) for f in ("--source", f"{name}={shards / 'one' / name}")]
    assert pack(*flags, "--source-weight", "web=0.5", "--source-weight", "code=0.3", "--source-weight", "wiki=0.2",
                "--total-tokens", "9000", "--seq-len", "64", "--output", str(out), *IN_MEMORY) == 0
    mixture = read_json(out, "mixture.json")
    assert {name: s["budget"] for name, s in mixture["sources"].items()} == {"web": 4500, "code": 2700, "wiki": 1800}
    assert {name: s["weight"] for name, s in mixture["sources"].items()} == {"web": 0.5, "code": 0.3, "wiki": 0.2}
    train, _ = reference_mixture(sources, {"web": 4500, "code": 2700, "wiki": 1800})
    assert read_packed_parquet(out, "train") == reference_pack(train, 64)["train"]


def test_a_source_the_validation_split_empties_is_an_error_after_the_job(shards, tmp_path, capsys):
    # One document whose key falls into a validation fraction of 0.5.
    doc_id = next(f"lone-{i}" for i in range(100) if int(id_hashes([f"lone-{i}"])[0]) < 2**63)
    write_token_shards([(doc_id, [1, 2, 3])], tmp_path / "lone")
    out = tmp_path / "out"
    assert pack("--source", f"web={shards / 'one' / 'web'}", "--source", f"lone={tmp_path / 'lone'}",
                "--source-tokens", "web=100", "--source-tokens", "lone=10", "--validation-fraction", "0.5",
                "--seq-len", "8", "--output", str(out), *IN_MEMORY) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "--source lone: the validation split holds all its 1 documents" in err[-1]
    assert not (out / "stats.json").exists() and not (out / "train").exists()


def test_mistakes_in_sources_and_budgets_are_one_line_errors(shards, tmp_path, capsys):
    one = shards / "one"
    other = write_token_shards([("x", [1, 2])], tmp_path / "other", sha256="1" * 64)
    empty = write_token_shards([("x", [])], tmp_path / "empty")
    web, code = f"web={one / 'web'}", f"code={one / 'code'}"
    base = ["--seq-len", "8", "--output", str(tmp_path / "out"), *IN_MEMORY]
    cases = [
        ([], "give the inputs: --input GLOB, or --source NAME=GLOB"),
        (["--input", str(one / "web"), "--source", web, "--source-tokens", "web=5"], "not both"),
        (["--input", str(one / "web"), "--source-tokens", "web=5"], "--source-tokens needs named sources"),
        (["--input", str(one / "web"), "--total-tokens", "5"], "--total-tokens needs named sources"),
        (["--source", web], "--source needs budgets"),
        (["--source", web, "--source-tokens", "wbe=5"], "no --source is named wbe"),
        (["--source", web, "--source", code, "--source-tokens", "web=5"], "no budget for source code"),
        (["--source", web, "--source-tokens", "web=0"], "at least 1"),
        (["--source", web, "--source-tokens", "web=1.5"], "is not a budget"),
        (["--source", web, "--source-tokens", "web"], "expected NAME=VALUE"),
        (["--source", web, "--source", web, "--source-tokens", "web=5"], "names source web twice"),
        (["--source", "a b=" + str(one / "web"), "--source-tokens", "a b=5"], "a source name is"),
        (["--source", web, "--source-tokens", "web=5", "--source-weight", "web=1", "--total-tokens", "9"],
         "not both"),
        (["--source", web, "--source-weight", "web=1"], "--source-weight needs --total-tokens"),
        (["--source", web, "--source-weight", "web=-1", "--total-tokens", "9"], "is not a weight"),
        (["--source", web, "--source", code, "--source-weight", "web=1", "--source-weight", "code=0.0001",
          "--total-tokens", "100"], "--source-weight code: its share of --total-tokens 100 is 0 tokens"),
        (["--source", web, "--source", f"code={tmp_path / 'nothing-*.parquet'}", "--source-tokens", "web=5",
          "--source-tokens", "code=5"], "--source code=" + str(tmp_path / "nothing-*.parquet") + " matches no files"),
        (["--source", web, "--source", f"code={one / 'web'}", "--source-tokens", "web=5", "--source-tokens",
          "code=5"], "both hold"),
        (["--source", web, "--source", f"code={other[0]}", "--source-tokens", "web=5", "--source-tokens", "code=5"],
         "different tokenizers"),
        (["--source", web, "--source", f"code={empty[0]}", "--source-tokens", "web=5", "--source-tokens", "code=5"],
         "--source code: its shards hold no tokens"),
    ]
    for argv, message in cases:
        assert pack(*argv, *base) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("beam-bpe pack: error: ") and message in err[0], (argv, err)
    assert not (tmp_path / "out").exists()


def test_encode_with_pack_and_sources_equals_encode_then_pack_of_the_sources(tmp_path):
    from pipeline import cli
    from tests.support.cli import encode_and_pack
    from tests.support.real_text import stdlib_lines
    from tests.support.toy_tokenizers import train_small

    lines = stdlib_lines()[:600]
    tok_path = train_small([line.decode() for line in lines], vocab_size=450).save(str(tmp_path / "tok"))
    parts = {"web": lines[:300], "code": lines[300:500], "wiki": lines[500:]}
    for name, part in parts.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "corpus.txt").write_bytes(b"".join(part))
    (tmp_path / "code" / "bad.jsonl").write_bytes(b'{"text": "fine"}\n{not json\n')
    common = ["--tokenizer", tok_path, "--append-eos", *IN_MEMORY]
    budgets = ["--source-tokens", "web=3000", "--source-tokens", "code=9000", "--source-tokens", "wiki=2500"]
    pack_argv = ["--seed", "2", "--validation-fraction", "0.1", *budgets, *IN_MEMORY]
    for name in parts:
        assert cli.main(["encode", *common, "--input", str(tmp_path / name / "*"),
                         "--output", str(tmp_path / f"shards-{name}")]) == 0
    two = tmp_path / "two"
    assert pack(*[f for name in parts for f in ("--source", f"{name}={tmp_path / f'shards-{name}'}")],
                "--seq-len", "64", "--output", str(two), *pack_argv) == 0
    one = tmp_path / "one"
    assert encode_and_pack(*common, *[f for name in parts for f in ("--source", f"{name}={tmp_path / name / '*'}")],
                           "--output", str(one), "--pack", "64", *pack_argv) == 0
    for split in ("train", "validation"):
        assert read_packed_parquet(one, split) == read_packed_parquet(two, split)
    assert read_json(one, "mixture.json") == read_json(two, "mixture.json")
    both, separate = read_json(one, "stats.json"), read_json(two, "stats.json")
    encoded = both.pop("encode")
    assert {name: s["dead_letters"] for name, s in encoded["sources"].items()} == {"code": 1, "web": 0, "wiki": 0}
    assert both == separate
    letters = {p.name: p.read_text().splitlines() for p in (one / "dead_letters").iterdir()}
    assert sorted(letters) == [f"dead_letters-{name}-00000-of-00001.jsonl" for name in ("code", "web", "wiki")]
    assert [json.loads(line)["record"] for line in letters["dead_letters-code-00000-of-00001.jsonl"]] == [2]


def test_encode_takes_sources_only_with_pack_and_needs_some_input(tmp_path, capsys):
    from pipeline import cli
    from tests.support.toy_tokenizers import train_small

    tok_path = train_small(["a few words of text"] * 3, vocab_size=270).save(str(tmp_path / "tok"))
    (tmp_path / "corpus.txt").write_text("one\ntwo\n")
    base = ["encode", "--tokenizer", tok_path, "--output", str(tmp_path / "out"), *IN_MEMORY]
    web = f"web={tmp_path / 'corpus.txt'}"
    cases = [
        (["--source", web], "--source applies only with --pack N"),
        (["--input", str(tmp_path / "corpus.txt"), "--total-tokens", "5"], "--total-tokens applies only with --pack N"),
        ([], "the following arguments are required: --input"),
        (["--pack", "8"], "the following arguments are required: --input (or, with --pack, --source NAME=GLOB ...)"),
        (["--pack", "8", "--input", str(tmp_path / "corpus.txt"), "--source", web, "--source-tokens", "web=4"],
         "give --input or --source NAME=GLOB, not both"),
        (["--pack", "8", "--source", web], "--source needs budgets"),
        (["--pack", "8", "--source", web, "--source", f"code={tmp_path / 'corpus.txt'}", "--source-tokens", "web=4",
          "--source-tokens", "code=4"], "both hold"),
        (["--pack", "8", "--source", web, "--source", f"code={tmp_path / 'none-*.txt'}", "--source-tokens", "web=4",
          "--source-tokens", "code=4"], "no file matches"),
    ]
    for argv, message in cases:
        assert cli.main([*base, *argv]) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert err[-1].startswith("beam-bpe encode: error: ") and message in err[-1], (argv, err)
    assert not (tmp_path / "out" / "stats.json").exists()


def test_budgets_of_whole_passes_draw_nothing_and_are_met_exactly(mixed, shards, tmp_path):
    available = {name: s["train_available"]["tokens"] for name, s in read_json(mixed, "mixture.json")["sources"].items()}
    budgets = {"code": 2 * available["code"], "web": available["web"], "wiki": 3 * available["wiki"]}
    out = tmp_path / "whole-passes"
    assert pack(*mixture_flags(shards / "one", budgets), "--seq-len", "64", "--output", str(out), "--seed", str(SEED),
                "--validation-fraction", str(FRACTION), *TWO_WORKERS) == 0
    mixture = read_json(out, "mixture.json")["sources"]
    assert {name: (s["train"]["tokens"], s["epochs"], s["train"]["full_passes"]) for name, s in mixture.items()} == {
        "code": (budgets["code"], 2.0, 2), "web": (budgets["web"], 1.0, 1), "wiki": (budgets["wiki"], 3.0, 3)}


def test_megatron_holds_the_mixtures_documents_whole_whatever_the_shards_and_workers(shards, tmp_path, sources,
                                                                                      monkeypatch):
    """--format megatron writes the mixture's documents (repeats included) whole, one entry each,
    read back by megatron-core's IndexedDataset; 8 shards on two workers write the same bytes."""
    from tests.support.loader_libraries import megatron_indexed_dataset

    runs = {"one": (shards / "one", IN_MEMORY), "eight": (shards / "eight", TWO_WORKERS)}
    for name, (root, workers) in runs.items():
        assert pack(*mixture_flags(root), "--format", "megatron", "--output", str(tmp_path / name), "--seed",
                    str(SEED), "--validation-fraction", str(FRACTION), *workers) == 0
    for name in ("train.bin", "train.idx", "validation.bin", "validation.idx", "mixture.json"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "eight" / name).read_bytes(), name
    IndexedDataset = megatron_indexed_dataset(monkeypatch)
    train, validation = reference_mixture(sources, BUDGETS, SEED, FRACTION)
    for split, docs in (("train", train), ("validation", validation)):
        dataset = IndexedDataset(str(tmp_path / "one" / split))
        assert sorted(tuple(int(t) for t in dataset[i]) for i in range(len(dataset))) == sorted(
            tuple(tokens) for _, tokens in docs)
    mixture = read_json(tmp_path / "one", "mixture.json")
    assert sum(s["train"]["documents"] for s in mixture["sources"].values()) == len(train)
