"""Engine proofs kept between runs (bpe/proof_cache.py): reused only when everything
they depend on is the same, re-made when anything differs or the cache is damaged."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

import bpe
from bpe import engines, proof_cache
from tests.support.cli import IN_MEMORY
from tests.support.toy_tokenizers import train_small

REPO = pathlib.Path(__file__).resolve().parents[3]

DOCS = ["the cat sat on the mat\n", "hello world, 123 élan\n"] * 20


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(proof_cache.CACHE_VARIABLE, str(tmp_path / "cache"))
    return tmp_path / "cache" / "proofs"


@pytest.fixture
def tokenizer():
    return bpe.Tokenizer.from_json(train_small(DOCS).to_json())


def fresh(tokenizer):
    return bpe.Tokenizer.from_json(tokenizer.to_json())


def count_choices(monkeypatch) -> list:
    made = []
    choose = engines.choose
    monkeypatch.setattr(engines, "choose", lambda tok: made.append(tok.sha256) or choose(tok))
    return made


def test_a_second_run_takes_the_proof_from_the_cache(cache, tokenizer, monkeypatch):
    made = count_choices(monkeypatch)
    first = proof_cache.proven(fresh(tokenizer))
    second = proof_cache.proven(fresh(tokenizer))
    assert first == second == fresh(tokenizer).prove()
    assert len(made) == 2  # the first proven() and the explicit prove(); the second proven() read the file
    assert len(list(cache.glob("*.json"))) == 1
    assert fresh(tokenizer).use_proof(second).encode("the cat") == tokenizer.reference.encode("the cat")


def test_anything_the_proof_depends_on_changes_the_key(cache, tokenizer, monkeypatch):
    proof_cache.proven(fresh(tokenizer))
    other = bpe.Tokenizer.from_json(train_small(DOCS, special_tokens=("<|other|>",)).to_json())
    assert other.sha256 != tokenizer.sha256
    proof_cache.proven(other)
    monkeypatch.setenv(engines.ENGINES_VARIABLE, "tiktoken,python")
    switched = proof_cache.proven(fresh(tokenizer))
    assert switched.engines == ("tiktoken", "python")
    monkeypatch.setattr(proof_cache, "_code_sha256", lambda: "edited")
    proof_cache.proven(fresh(tokenizer))
    monkeypatch.setattr(proof_cache, "_version", lambda name: "9.9")
    proof_cache.proven(fresh(tokenizer))
    assert len(list(cache.glob("*.json"))) == 5


@pytest.mark.parametrize("damage", ["", "{not json", '{"engine": "gigatoken"}', "ENGINE", "SHA"])
def test_a_damaged_or_foreign_entry_is_proven_again(cache, tokenizer, monkeypatch, damage):
    proof_cache.proven(fresh(tokenizer))
    [path] = cache.glob("*.json")
    data = json.loads(path.read_text())
    if damage == "ENGINE":
        damage = json.dumps({**data, "engine": "made-up", "chain": ["made-up", "python"]})
    elif damage == "SHA":
        damage = json.dumps({**data, "tokenizer_sha256": "0" * 64})
    path.write_text(damage)
    made = count_choices(monkeypatch)
    assert proof_cache.proven(fresh(tokenizer)) == fresh(tokenizer).prove()
    assert len(made) == 2
    assert json.loads(path.read_text()) == data  # rewritten whole


def test_an_unwritable_cache_is_no_cache(tmp_path, tokenizer, monkeypatch):
    blocked = tmp_path / "file-not-directory"
    blocked.write_text("")
    monkeypatch.setenv(proof_cache.CACHE_VARIABLE, str(blocked))
    assert proof_cache.proven(fresh(tokenizer)) == fresh(tokenizer).prove()
    assert blocked.read_text() == "" and os.listdir(tmp_path) == ["file-not-directory"]


def test_the_default_directory_is_the_users_cache(monkeypatch, tmp_path):
    monkeypatch.delenv(proof_cache.CACHE_VARIABLE, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert proof_cache.cache_directory() == tmp_path / "beam-bpe"


def test_beam_bpe_encode_writes_the_proof_and_reuses_it(cache, tokenizer, tmp_path):
    path = tokenizer.save(str(tmp_path / "tok"))
    text = tmp_path / "in.txt"
    text.write_text("".join(DOCS))
    env = {**os.environ}
    outputs = []
    for run in range(2):
        out = tmp_path / f"out{run}"
        done = subprocess.run([sys.executable, "-m", "pipeline.cli", "encode", "--tokenizer", path, "--input",
                               str(text), "--output", str(out), *IN_MEMORY], cwd=REPO, env=env, capture_output=True)
        assert done.returncode == 0, done.stderr.decode()
        outputs.append(json.loads((out / "stats.json").read_text()))
        assert len(list(cache.glob("*.json"))) == 1
    for stats in outputs:
        stats.pop("shards", None)
    assert outputs[0] == outputs[1]
