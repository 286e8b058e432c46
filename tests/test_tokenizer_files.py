"""tokenizer.json: written in the Hugging Face format, read back with validation."""

import json

import pytest

from bpe import pretokenize
from bpe.tokenizer import Tokenizer, TokenizerFileError, byte_to_char

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
        (lambda text: text.replace('"Split"', '"Whitespace"'), "no Split pre-tokenizer"),
        (lambda text: text.replace('"Regex": "', '"Regex": "(', 1), "invalid pre-tokenizer regex"),
        (lambda text: text.replace('"lo": 258', '"lo": 999'), "merge 2 .* must create ID 258"),
        (lambda text: text.replace('"id": 261', '"id": 300'), "has ID 300, expected 261"),
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
