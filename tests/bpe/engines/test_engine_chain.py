"""The chain of engines behind ``Tokenizer.encode``: which engines it holds and
why, where a text goes when an engine declines it, the proof a worker trusts,
``BEAM_BPE_ENGINES``, and the whole encode test suite once more with the
accelerators switched off.

Every comparison is against the pure-Python reference (``tokenizer.reference``),
never an engine against itself.
"""

from __future__ import annotations

import functools
import importlib
import os
import pathlib
import pickle
import subprocess
import sys
from collections import Counter

import pytest

import bpe
from bpe import engines
from bpe.engines import rank_proof
from bpe.accelerators import ADAPTERS
from tests.support.real_text import multilingual

EOT = "<|endoftext|>"
# A letter of recent Unicode versions every accelerator's tables lack (ARMENIAN
# LEFT HALF RING, in the gaps of gigatoken and of the PCRE2 engines): accelerators decline texts holding it.
DECLINED = "ab \u0558 cd"
HARD = [DECLINED, b"caf\xc3\xa9 \xff\xfe broken \xe2\x82", "lone \udc80 surrogate", "", b"", f"a{EOT}b", "\r\n \t x"]


def installed(name: str) -> bool:
    """Whether the accelerator ``name`` builds at all here (package installed, tested version)."""
    from bpe.accelerators.unicode_gaps import installed_version

    return installed_version({"splintr": "splintr-rs"}.get(name, name)) is not None


def accelerators_on() -> bool:
    return engines.allowed_engines()[0] == "gigatoken" and installed("gigatoken")


@functools.lru_cache(maxsize=None)
def trained(pattern: str = "gpt2") -> bpe.Tokenizer:
    pre = bpe.PreTokenizer(pattern)
    counts: Counter = Counter()
    for doc in multilingual(2):
        counts.update(pre.pieces(doc))
    tok = bpe.train(counts, vocab_size=1500, pattern=pattern, special_tokens=[EOT], progress=False)
    return bpe.Tokenizer.from_json(tok.to_json())


def fresh(pattern: str = "gpt2") -> bpe.Tokenizer:
    """A new Tokenizer object for the trained merges: its engine is not decided yet."""
    return bpe.Tokenizer.from_json(trained(pattern).to_json())


def texts() -> list:
    return multilingual(2, start=6) + HARD


def assert_reference_ids(tok: bpe.Tokenizer, engine=None):
    engine = engine or tok.engine
    reference = tok.reference
    for text in texts():
        assert engine.encode(text) == reference.encode(text), text[:60]
        assert engine.encode_array(text).tolist() == reference.encode(text), text[:60]
        assert engine.encode_array(text).typecode == "I"


def test_the_configured_chain_encodes_like_the_reference():
    """Runs in both configurations: with the accelerators (this process) and without them
    (``test_the_suite_passes_with_the_accelerators_switched_off``)."""
    tok = fresh()
    if accelerators_on():
        assert tok.prove().engines == ("gigatoken", "tiktoken", "python"), tok.engine.reason
    else:
        assert tok.engine.name == "tiktoken" and tok.prove().engines == ("tiktoken", "python"), tok.engine.reason
    assert_reference_ids(tok)
    assert tok.encode_batch(texts()) == [tok.reference.encode(t) for t in texts()]


@pytest.mark.parametrize("pattern", ["gpt2", "cl100k", "o200k"])
@pytest.mark.parametrize("head", ADAPTERS)
def test_each_accelerator_heads_the_chain_when_the_faster_ones_are_off(monkeypatch, head, pattern):
    if not installed(head):
        pytest.skip(f"{head} is not installed")
    faster = ADAPTERS[: ADAPTERS.index(head)]
    monkeypatch.setenv(engines.ENGINES_VARIABLE, ",".join(n for n in engines.ENGINES if n not in faster))
    tok = fresh(pattern)
    proof = tok.prove()
    assert proof.engines == (head, "tiktoken", "python"), proof.reason
    assert [name for name, _ in proof.rejected] == list(faster)
    assert all("switched off by BEAM_BPE_ENGINES" in why for _, why in proof.rejected)
    assert_reference_ids(tok)
    for text in multilingual(1, start=9):
        with_specials = f"{text[:200]}{EOT}{text[200:400]}"
        assert tok.encode(with_specials, "all") == tok.encode(with_specials, "all", engine=tok.reference)


def test_declined_texts_go_down_the_chain(monkeypatch):
    if not accelerators_on():
        pytest.skip("the accelerators are switched off")
    tok = fresh()
    engine = tok.engine
    assert engine.encode(DECLINED) == tok.reference.encode(DECLINED)
    # tiktoken's Unicode tables lack it too (in its gaps): the reference took it.
    assert engine.declined == 1 and engine.next.fallbacks == 1 and engine.fallbacks == 2
    assert engine.encode(b"\xff") == [0xFF] and engine.fallbacks == 3  # tiktoken hands it on to the reference
    # An accelerator that declines everything leaves every ID to the engines below.
    monkeypatch.setattr(engine, "accelerator", type("DeclinesAll", (), {"encode": lambda self, text: None})())
    assert_reference_ids(tok, engine)


class PanicException(BaseException):
    """What a Rust accelerator raises when it panics (pyo3's ``PanicException`` is a BaseException)."""


class Panics:
    """An accelerator that panics on texts holding "boom", as a Rust library's assertion does."""

    def __init__(self, accelerator):
        self.accelerator = accelerator
        self.guard = accelerator.guard

    def encode(self, text):
        if "boom" in text:
            raise PanicException("assertion `left == right` failed")
        return self.accelerator.encode(text)

    def encode_utf8(self, data, text):
        if b"boom" in data:
            raise PanicException("assertion `left == right` failed")
        return self.accelerator.encode_utf8(data, text)


def test_a_text_an_accelerator_fails_on_goes_down_the_chain_and_is_counted(monkeypatch):
    """A panic (a BaseException) or any error of the accelerator on a text: that text goes to
    the next engine, counted in ``failed`` and ``fallbacks``; the chain never crashes."""
    if not accelerators_on():
        pytest.skip("the accelerators are switched off")
    tok = fresh()
    engine = tok.engine
    monkeypatch.setattr(engine, "accelerator", Panics(engine.accelerator))
    texts = ["a boom here", b"bytes boom", "caf\u00e9 boom", "no trouble"]
    for text in texts:
        assert engine.encode(text) == tok.reference.encode(text)
        assert engine.encode_array(text).tolist() == tok.reference.encode(text)
    assert engine.encode_taken("utf-8 boom".encode()).tolist() == tok.reference.encode("utf-8 boom")
    assert engine.failed == 7 and engine.fallbacks == 7
    monkeypatch.setattr(engine.accelerator, "encode", lambda text: 1 / 0)  # an ordinary error alike
    monkeypatch.setattr(engine.accelerator, "encode_utf8", lambda data, text: 1 / 0)
    assert engine.encode("anything") == tok.reference.encode("anything") and engine.failed == 8
    monkeypatch.setattr(engine.accelerator, "encode", lambda text: (_ for _ in ()).throw(KeyboardInterrupt()))
    monkeypatch.setattr(engine.accelerator, "encode_utf8", lambda data, text: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):  # an interrupt is not the accelerator's failure
        engine.encode("stop")


def test_a_chain_without_tiktoken_where_only_tiktoken_would_differ():
    """merges b+c, a+b, ab+c: "abc" is token 258 but the merges give [a, bc]; tiktoken
    (rank of the joined bytes) would give [abc] and is refused, the pair-rank accelerator is not."""
    tok = bpe.Tokenizer([(98, 99), (97, 98), (257, 99)])
    proof = tok.prove()
    assert "tiktoken" in dict(proof.rejected) and "258" in dict(proof.rejected)["tiktoken"]
    assert proof.engines[-1] == "python" and "tiktoken" not in proof.engines
    if accelerators_on():
        assert proof.engines == ("gigatoken", "python")
    for text in ["abc", "xabcabc", "ab \u0558 abc", b"abc\xff"]:
        assert tok.encode(text) == tok.reference.encode(text)
    assert tok.encode("abc") == [97, 256]


def test_workers_rebuild_the_chain_from_the_proof_without_the_vocabulary_proofs(monkeypatch):
    driver = fresh()
    proof = driver.prove()
    assert len(pickle.dumps(proof)) < 1000
    calls = []
    original = rank_proof.rank_mismatch
    monkeypatch.setattr(rank_proof, "rank_mismatch", lambda t: calls.append(t) or original(t))
    worker = fresh()
    engine = worker.use_proof(pickle.loads(pickle.dumps(proof)))
    assert calls == [] and engine.name == proof.engine and engine.proof == proof
    assert_reference_ids(worker)
    with pytest.raises(engines.ProofMismatch, match="engine proof is for tokenizer"):
        bpe.Tokenizer([(97, 98)]).use_proof(proof)


def test_a_splintr_chain_is_rebuilt_without_its_rank_proof(monkeypatch):
    if not installed("splintr"):
        pytest.skip("splintr is not installed")
    monkeypatch.setenv(engines.ENGINES_VARIABLE, "splintr,tiktoken")
    proof = fresh().prove()
    assert proof.engine == "splintr", proof.reason
    calls = []
    monkeypatch.setattr(rank_proof, "rank_mismatch", lambda t: calls.append(t))
    worker = fresh()
    assert worker.use_proof(proof).name == "splintr" and calls == []
    assert_reference_ids(worker)


def test_a_worker_without_the_accelerator_continues_with_the_next_engine(monkeypatch):
    if not accelerators_on():
        pytest.skip("the accelerators are switched off")
    proof = fresh().prove()
    gigatoken = importlib.import_module("bpe.accelerators.gigatoken")
    monkeypatch.setattr(gigatoken, "preset_spelling", lambda *_: (None, "gigatoken is not installed"))
    worker = fresh()
    engine = worker.use_proof(proof)
    assert engine.name == "tiktoken" and engine.proof.engines == ("tiktoken", "python")
    assert "not gigatoken: gigatoken is not installed" in engine.reason
    assert_reference_ids(worker)


def test_the_environment_variable(monkeypatch):
    monkeypatch.setenv(engines.ENGINES_VARIABLE, "python")
    tok = fresh()
    assert tok.engine.name == "python" and tok.prove().engines == ("python",)
    assert [name for name, _ in tok.prove().rejected] == list(engines.ENGINES[:-1])
    assert_reference_ids(tok)
    monkeypatch.setenv(engines.ENGINES_VARIABLE, "tiktoken, nope")
    with pytest.raises(ValueError, match=r"BEAM_BPE_ENGINES names unknown engines \['nope'\]"):
        fresh().engine
    monkeypatch.setenv(engines.ENGINES_VARIABLE, "")
    assert engines.allowed_engines() == engines.ENGINES


def test_a_proof_naming_an_unknown_engine_is_refused():
    tok = fresh()
    proof = engines.EngineProof(tok.sha256, "gigatoken", chain=("gigatoken", "turbo", "python"))
    with pytest.raises(engines.ProofMismatch, match="'turbo'"):
        tok.use_proof(proof)


def test_allowed_specials_split_out_then_the_chain_encodes_the_rest():
    tok = fresh()
    eot = tok.special_tokens[EOT]
    for data in [f"x{EOT}y \u0558{EOT}", f"{EOT}".encode() + b"\xff\xfe" + f"caf\u00e9{EOT}".encode(), f"\udc80{EOT}z"]:
        ids = tok.encode(data, allowed_special="all")
        assert ids == tok.encode(data, allowed_special="all", engine=tok.reference)
        assert ids.count(eot) == 2 - ("\udc80" in str(data))
        assert tok.decode_bytes(ids) == (data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass"))


@pytest.mark.skipif(
    os.environ.get(engines.ENGINES_VARIABLE) is not None, reason="runs once, from the default configuration"
)
def test_the_suite_passes_with_the_accelerators_switched_off():
    """The encode/decode property tests and the fuzz tests, and this module, in a
    process with only the required engines (tiktoken's and the reference)."""
    env = dict(os.environ, **{engines.ENGINES_VARIABLE: "tiktoken,python"})
    modules = ["tests/bpe/test_encode_decode.py", "tests/bpe/test_fuzz.py", "tests/bpe/engines/test_engine_chain.py", "tests/transforms/test_encode.py"]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *modules],
        env=env, cwd=str(pathlib.Path(__file__).resolve().parents[3]), capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and " failed" not in result.stdout


def test_what_the_first_accelerator_declines_the_others_decline_too():
    """Why the chain holds one accelerator: the code points gigatoken's tables lack,
    the PCRE2 engines (fastokens, splintr) lack as well (their gaps for the installed versions)."""
    from bpe.accelerators.unicode_guard import parse_ranges

    def points(name):
        if not installed(name):
            pytest.skip(f"{name} is not installed")
        engine, why = importlib.import_module(f"bpe.accelerators.{name}").build(trained("gpt2"))
        assert engine is not None, why
        return {c for first, last in parse_ranges(engine.guard.ranges) for c in range(first, last + 1)}

    assert points("gigatoken") <= points("fastokens")
    assert points("gigatoken") <= points("splintr")


def test_bytes_go_to_an_accelerator_as_they_are_and_are_guarded_alike():
    if not accelerators_on():
        pytest.skip("the accelerators are switched off")
    tok = fresh()
    engine = tok.engine
    assert hasattr(engine.accelerator, "encode_utf8")
    for text in ["plain ASCII text, 123\n", "Ünïcödé façade 漢字 😀", *multilingual(1, start=3)]:
        assert engine.encode_array(text.encode("utf-8")) == engine.encode_array(text)
        assert engine.encode(text.encode("utf-8")) == tok.reference.encode(text)
    assert engine.declined == 0
    assert engine.encode(DECLINED.encode("utf-8")) == tok.reference.encode(DECLINED)
    assert engine.declined == 1  # the guard holds for bytes too
    assert engine.encode(b"caf\xc3\xa9 \xff") == tok.reference.encode(b"caf\xc3\xa9 \xff")  # invalid: down the chain


@pytest.mark.parametrize("pattern", ["gpt2", "cl100k"])
def test_building_the_engines_leaves_the_decoder_unmade(pattern):
    """A worker that only encodes never makes the decoder's tables (token_bytes would)."""
    proof = fresh(pattern).engine.proof
    for tok, make in [(fresh(pattern), lambda t: t.engine), (fresh(pattern), lambda t: t.use_proof(proof))]:
        engine = make(tok)
        assert engine.encode("décodé? 漢字") == tok.reference.encode("décodé? 漢字")
        assert tok._decoder_made is None
