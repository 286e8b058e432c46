"""tokenizer.json: written in the Hugging Face format, read back with validation, local or remote."""

import json
import os
import re
import threading

import pytest

from bpe import pretokenize, tokenizer_file
from bpe.tokenizer import Tokenizer, TokenizerFileError, byte_to_char, check_special_tokens

MERGES = [(ord("h"), ord("e")), (256, ord("l")), (ord("l"), ord("o")), (257, 258)]


def saved(tmp_path, **kwargs):
    tok = Tokenizer(MERGES, special_tokens=["<|endoftext|>", "<|pad|>"], **kwargs)
    return tok, tok.save(str(tmp_path))


def test_save_load_round_trip(tmp_path):
    tok, path = saved(tmp_path, pattern="cl100k")
    assert path == str(tmp_path / "tokenizer.json")
    for source in (str(tmp_path), path):
        back = Tokenizer.load(source)
        assert back.merges == tok.merges
        assert back.pattern == pretokenize.CL100K_PATTERN
        assert back.special_tokens == {"<|endoftext|>": 260, "<|pad|>": 261}
        assert back.vocab_size == tok.vocab_size == 262
        assert back.encode("hello hello") == tok.encode("hello hello") == [259, 32, 259]
    assert len(Tokenizer.load(path).sha256) == 64
    assert not list(tmp_path.glob("*.tmp"))  # written atomically


def test_file_is_hugging_face_format(tmp_path):
    _, path = saved(tmp_path)
    spec = json.load(open(path))
    assert spec["model"]["type"] == "BPE" and spec["model"]["ignore_merges"] is False
    assert spec["model"]["vocab"][byte_to_char()[32]] == 32
    assert spec["model"]["merges"][3] == ["hel", "lo"]
    split, byte_level = spec["pre_tokenizer"]["pretokenizers"]
    assert split["pattern"]["Regex"] == pretokenize.GPT2_PATTERN and byte_level["use_regex"] is False
    assert [t["content"] for t in spec["added_tokens"]] == ["<|endoftext|>", "<|pad|>"]
    tokenizers = pytest.importorskip("tokenizers")
    hf = tokenizers.Tokenizer.from_file(path)
    assert hf.encode("hello hello").ids == [259, 32, 259]
    assert hf.get_vocab_size() == 262


def test_missing_file(tmp_path):
    with pytest.raises(TokenizerFileError, match="tokenizer file not found: .*nope"):
        Tokenizer.load(str(tmp_path / "nope"))
    with pytest.raises(TokenizerFileError, match="not found: .*tokenizer.json"):
        Tokenizer.load(str(tmp_path))  # a directory without tokenizer.json


@pytest.mark.parametrize(
    "tamper, message",
    [
        (lambda text: text[: len(text) // 2], "is not valid JSON"),
        (lambda text: "", "is not valid JSON"),
        (lambda text: "[1, 2]", "expected a JSON object"),
        (lambda text: text.replace('"hel",\n    "lo"', '"hel",\n    "zz"'), "merge 3 names unknown token 'zz'"),
        (lambda text: text.replace('"BPE"', '"WordPiece"'), "model type is 'WordPiece'"),
        (lambda text: text.replace('"Split"', '"Whitespace"'), "pre_tokenizer type 'Whitespace' is not supported"),
        (lambda text: text.replace('"Regex": "', '"Regex": "(', 1), "invalid pre-tokenizer regex"),
        (lambda text: text.replace('"lo": 258', '"lo": 260'), "added token '<|endoftext|>' has ID 260, which the vocab gives to b'lo'"),
        (lambda text: text.replace('"hel",\n    "lo"', '"he",\n    "lo"'), "makes 'helo', which is not in the vocab"),
        (lambda text: text.replace('"model"', '"modell"'), "missing key 'model'"),
    ],
)
def test_tampered_files_give_one_clear_line(tmp_path, tamper, message):
    _, path = saved(tmp_path)
    text = open(path, encoding="utf-8").read()
    open(path, "w", encoding="utf-8").write(tamper(text))
    with pytest.raises(TokenizerFileError, match=message) as info:
        Tokenizer.load(path)
    assert "\n" not in str(info.value)


def test_invalid_constructions():
    with pytest.raises(ValueError, match="does not exist before it"):
        Tokenizer([(256, 97)])
    with pytest.raises(ValueError, match="given twice"):
        Tokenizer([], special_tokens=["<a>", "<a>"])
    with pytest.raises(ValueError, match="non-empty"):
        Tokenizer([], special_tokens=[""])
    with pytest.raises(ValueError, match="invalid pre-tokenizer regex"):
        Tokenizer([], pattern="(unclosed")
    same_bytes = Tokenizer([(97, 98), (256, 99), (98, 99), (97, 258)])  # abc twice
    with pytest.raises(ValueError, match="tokens 257 and 259 have the same bytes"):
        same_bytes.to_json()


def test_custom_pattern_keeps_text_between_matches():
    tok = Tokenizer([], pattern=r"\d+")
    assert tok.pre_tokenizer.pieces("ab12cd3") == [b"ab", b"12", b"cd", b"3"]
    assert tok.decode(tok.encode("ab12cd3 é")) == "ab12cd3 é"


def test_special_token_checks_are_one_function():
    assert check_special_tokens(["<a>", "<b>"]) == ("<a>", "<b>")
    with pytest.raises(ValueError, match=r"^--special-token must not be empty"):
        check_special_tokens(["<a>", ""], name="--special-token")
    with pytest.raises(ValueError, match=r"duplicate special tokens: '<a>' \(--special-token given twice\)"):
        check_special_tokens(["<a>", "<b>", "<a>"], name="--special-token")
    with pytest.raises(ValueError, match="not one string"):
        check_special_tokens("<a>")


def test_hugging_face_rewriting_our_file_still_loads(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    tok, path = saved(tmp_path, pattern="cl100k")
    again = str(tmp_path / "again.json")
    tokenizers.Tokenizer.from_file(path).save(again)
    back = Tokenizer.load(again)
    assert (back.merges, back.pattern, back.special_tokens) == (tok.merges, tok.pattern, tok.special_tokens)


# -- fields beam-bpe does not implement are refused, naming the field -----------------


def _hf_model(path, **options):
    from tokenizers import models

    spec = json.load(open(path, encoding="utf-8"))["model"]
    return models.BPE(vocab=spec["vocab"], merges=[tuple(m) for m in spec["merges"]], **options)


def _hf_pre_tokenizer(split=None, byte_level=None):
    from tokenizers import Regex, pre_tokenizers

    return pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pretokenize.GPT2_PATTERN), **(split or {"behavior": "isolated"})),
        pre_tokenizers.ByteLevel(**{"add_prefix_space": False, "use_regex": False, **(byte_level or {})}),
    ])


def _set(attribute, make):
    def change(hf, path):
        setattr(hf, attribute, make(path))
    return change


HF_CHANGES = {
    "normalizer": (_set("normalizer", lambda p: __import__("tokenizers").normalizers.NFKC()), "normalizer = NFKC is not supported"),
    "Split behavior": (
        _set("pre_tokenizer", lambda p: _hf_pre_tokenizer(split={"behavior": "merged_with_previous"})),
        'Split.behavior = "MergedWithPrevious" is not supported',
    ),
    "Split invert": (
        _set("pre_tokenizer", lambda p: _hf_pre_tokenizer(split={"behavior": "isolated", "invert": True})),
        "Split.invert = true is not supported",
    ),
    "Whitespace pre-tokenizer": (
        _set("pre_tokenizer", lambda p: __import__("tokenizers").pre_tokenizers.Whitespace()),
        "without ByteLevel: not a byte-level BPE tokenizer",
    ),
    "Metaspace pre-tokenizer": (
        _set("pre_tokenizer", lambda p: __import__("tokenizers").pre_tokenizers.Sequence(
            [__import__("tokenizers").pre_tokenizers.Metaspace(), __import__("tokenizers").pre_tokenizers.ByteLevel()])),
        "pre_tokenizer type 'Metaspace' is not supported",
    ),
    "post_processor BERT with a pair template": (
        _set("post_processor", lambda p: __import__("tokenizers").processors.TemplateProcessing(
            single="<|endoftext|> $A <|pad|> <|endoftext|>", special_tokens=[("<|endoftext|>", 260), ("<|pad|>", 261)])),
        "TemplateProcessing.single is not [BOS] $A [EOS]",
    ),
    "dropout": (_set("model", lambda p: _hf_model(p, dropout=0.5)), "model.dropout = 0.5 is not supported"),
    "byte_fallback": (_set("model", lambda p: _hf_model(p, byte_fallback=True)), "model.byte_fallback = true"),
    "end_of_word_suffix": (_set("model", lambda p: _hf_model(p, end_of_word_suffix="</w>")), "model.end_of_word_suffix"),
    "truncation": (lambda hf, p: hf.enable_truncation(8), "truncation = "),
    "padding": (lambda hf, p: hf.enable_padding(), "padding = "),
    "added token that strips": (
        lambda hf, p: hf.add_tokens([__import__("tokenizers").AddedToken("hello", lstrip=True)]),
        "added token 'hello'.lstrip = true is not supported",
    ),
    "WordPiece": (_set("model", lambda p: __import__("tokenizers").models.WordPiece({"a": 0, "[UNK]": 1})),
                  "model type is 'WordPiece': beam-bpe implements only byte-level BPE"),
    "Unigram": (_set("model", lambda p: __import__("tokenizers").models.Unigram([("a", -1.0)])),
                "model type is 'Unigram'"),
    "decoder": (_set("decoder", lambda p: __import__("tokenizers").decoders.Metaspace()), "decoder.type = "),
}


@pytest.mark.parametrize("field", HF_CHANGES)
def test_fields_written_by_hugging_face_that_we_do_not_implement_are_refused(tmp_path, field):
    tokenizers = pytest.importorskip("tokenizers")
    _, path = saved(tmp_path)
    change, message = HF_CHANGES[field]
    hf = tokenizers.Tokenizer.from_file(path)
    change(hf, path)
    changed = str(tmp_path / "changed.json")
    hf.save(changed)
    tokenizers.Tokenizer.from_file(changed)  # a file Hugging Face reads
    with pytest.raises(TokenizerFileError, match=re.escape(message)) as info:
        Tokenizer.load(changed)
    assert "\n" not in str(info.value) and str(info.value).startswith(changed)


def test_refused_fields_would_change_the_ids(tmp_path):
    """Why refusing matters: Hugging Face gives other IDs for these files."""
    tokenizers = pytest.importorskip("tokenizers")
    tok, path = saved(tmp_path)
    for field in ("normalizer", "truncation"):
        hf = tokenizers.Tokenizer.from_file(path)
        HF_CHANGES[field][0](hf, path)
        text = "\ufb01le he\u0301llo \u00b2 " * 5 if field == "normalizer" else "hello " * 5
        assert hf.encode(text).ids != tok.encode(text), field


def test_continuing_subword_prefix_is_refused(tmp_path):
    # Written by hand: Hugging Face cannot build a model with a prefix our merges lack.
    _, path = saved(tmp_path)
    spec = json.load(open(path, encoding="utf-8"))
    spec["model"]["continuing_subword_prefix"] = "##"
    (tmp_path / "prefix.json").write_text(json.dumps(spec), encoding="utf-8")
    with pytest.raises(TokenizerFileError, match='model.continuing_subword_prefix = "##" is not supported'):
        Tokenizer.load(str(tmp_path / "prefix.json"))


def test_unknown_keys_are_refused(tmp_path):
    _, path = saved(tmp_path)
    spec = json.load(open(path, encoding="utf-8"))
    for where, key in ((spec, "extra"), (spec["model"], "future_option"), (spec["pre_tokenizer"]["pretokenizers"][0], "x")):
        where[key] = None
        (tmp_path / "unknown.json").write_text(json.dumps(spec), encoding="utf-8")
        with pytest.raises(TokenizerFileError, match=f"unknown (top-level )?key '{key}'"):
            Tokenizer.load(str(tmp_path / "unknown.json"))
        del where[key]


# -- hostile files: one line, bounded work ---------------------------------------------


def test_deeply_nested_file_is_one_clear_line(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"model": ' + '{"a": ' * 100_000 + "1" + "}" * 100_001)
    with pytest.raises(TokenizerFileError, match="nested too deeply") as info:
        Tokenizer.load(str(path))
    assert "\n" not in str(info.value)
    nested = {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "a"}}]}
    for _ in range(50):
        nested = {"type": "Sequence", "pretokenizers": [nested]}
    _, saved_path = saved(tmp_path / "tok")
    spec = json.load(open(saved_path, encoding="utf-8"))
    spec["pre_tokenizer"] = nested
    path.write_text(json.dumps(spec))
    with pytest.raises(TokenizerFileError, match="nested more than 8 deep"):
        Tokenizer.load(str(path))


def test_huge_file_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "huge.json"
    with open(path, "wb") as f:  # sparse: no disk space used
        f.write(b"{")
        f.truncate(tokenizer_file.MAX_FILE_BYTES + 1)
    with pytest.raises(TokenizerFileError, match="more than a tokenizer file may be") as info:
        Tokenizer.load(str(path))
    assert "\n" not in str(info.value)


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_dev_zero_is_one_clear_line():
    with pytest.raises(TokenizerFileError, match="/dev/zero: expected a JSON object"):
        Tokenizer.load("/dev/zero")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_stream_without_a_size_stops_at_the_cap(tmp_path, monkeypatch):
    monkeypatch.setattr(tokenizer_file.storage, "MAX_FILE_BYTES", 1000)
    fifo = str(tmp_path / "pipe.json")
    os.mkfifo(fifo)

    def write():
        with open(fifo, "wb") as f:
            f.write(b"{" + b" " * 5000)

    writer = threading.Thread(target=write)
    writer.start()
    with pytest.raises(TokenizerFileError, match="more than 1000 bytes"):
        Tokenizer.load(fifo)
    writer.join()


# -- where tokenizers live: file:// and object stores ----------------------------------


def test_file_urls(tmp_path):
    tok = Tokenizer(MERGES, special_tokens=["<|endoftext|>"])
    path = tok.save(f"file://{tmp_path}/dir")
    assert path == f"file://{tmp_path}/dir/tokenizer.json" and (tmp_path / "dir" / "tokenizer.json").exists()
    for source in (f"file://{tmp_path}/dir", path):
        assert Tokenizer.load(source).sha256 == tok.sha256
    with pytest.raises(TokenizerFileError, match="tokenizer file not found"):
        Tokenizer.load(f"file://{tmp_path}/nope.json")


def test_s3_load_and_save_with_the_endpoint_from_the_environment(s3_bucket, monkeypatch, tmp_path):
    client, _ = s3_bucket
    # How a user points boto3 (and so smart_open) at a custom S3 endpoint.
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", client.meta.endpoint_url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    tok, local = saved(tmp_path, pattern="cl100k")
    assert tok.save("s3://corpus/tok/") == "s3://corpus/tok/tokenizer.json"
    assert client.get_object(Bucket="corpus", Key="tok/tokenizer.json")["Body"].read() == open(local, "rb").read()
    for source in ("s3://corpus/tok", "s3://corpus/tok/", "s3://corpus/tok/tokenizer.json"):
        back = Tokenizer.load(source)
        assert back.sha256 == Tokenizer.load(local).sha256
        assert back.encode("hello hello") == [259, 32, 259]
    with pytest.raises(TokenizerFileError, match="cannot read tokenizer file s3://corpus/nope/tokenizer.json: .*NoSuchKey") as info:
        Tokenizer.load("s3://corpus/nope")
    assert "\n" not in str(info.value)


def test_s3_load_and_save_with_a_client(s3_bucket):
    client, _ = s3_bucket
    tok = Tokenizer(MERGES, special_tokens=["<|endoftext|>"])
    params = {"client": client}
    path = tok.save("s3://corpus/other/tok.json", transport_params=params)
    assert path == "s3://corpus/other/tok.json"
    back = Tokenizer.load(path, transport_params=params)
    assert back.sha256 == tok.sha256 and back.merges == tok.merges


def test_our_files_load_as_ours_and_save_byte_identical(tmp_path):
    tok, path = saved(tmp_path, pattern="cl100k")
    back = Tokenizer.load(path)
    assert back.kind == "beam-bpe" and back.eos_token == "<|endoftext|>"
    again = back.save(str(tmp_path / "again"))
    assert open(again, "rb").read() == open(path, "rb").read()
