"""Pre-tokenization: the exact public patterns, lossless on any bytes, specials only when allowed."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpe import pretokenize
from bpe.pretokenize import PreTokenizer, compile_pattern

tiktoken_ext = pytest.importorskip("tiktoken_ext.openai_public")


def tiktoken_pattern(name: str, monkeypatch) -> str:
    # The constructors download their ranks; the patterns are all we want.
    monkeypatch.setattr(tiktoken_ext, "load_tiktoken_bpe", lambda *a, **k: {})
    monkeypatch.setattr(tiktoken_ext, "data_gym_to_mergeable_bpe_ranks", lambda *a, **k: {})
    return getattr(tiktoken_ext, name)()["pat_str"]


@pytest.mark.parametrize("preset, encoding", [("gpt2", "r50k_base"), ("cl100k", "cl100k_base"), ("o200k", "o200k_base")])
def test_presets_are_tiktokens_patterns(preset, encoding, monkeypatch):
    assert pretokenize.PRESETS[preset] == tiktoken_pattern(encoding, monkeypatch)


def test_gpt2_pieces():
    pieces = PreTokenizer("gpt2").pieces("Hello world's  123 ünïcode!!\n\n  x")
    assert pieces == [
        b"Hello", b" world", b"'s", b" ", b" 123", b" \xc3\xbcn\xc3\xafcode", b"!!", b"\n\n ", b" x",
    ]


def test_invalid_regex_is_a_clear_error():
    with pytest.raises(ValueError, match=r"invalid pre-tokenizer regex '\(\[a-z\]': "):
        compile_pattern("([a-z]")
    with pytest.raises(ValueError, match="empty"):
        compile_pattern("")


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=300), pattern=st.sampled_from(["gpt2", "cl100k", "o200k", r"\d+|\s"]))
def test_pieces_of_any_bytes_join_to_the_input(data, pattern):
    pieces = PreTokenizer(pattern).pieces(data)
    assert b"".join(pieces) == data
    assert all(pieces)


@settings(max_examples=200, deadline=None)
@given(text=st.text(st.characters(blacklist_categories=["Cs"]), max_size=200))
def test_str_and_its_utf8_bytes_split_alike(text):
    pre = PreTokenizer("cl100k")
    assert pre.pieces(text) == pre.pieces(text.encode("utf-8"))


def test_invalid_utf8_keeps_its_bytes_in_place():
    data = b"abc\xff\xfedef \xe4\xb8 ok"
    pieces = PreTokenizer("gpt2").pieces(data)
    assert b"".join(pieces) == data
    assert b" ok" in pieces  # valid text around bad bytes splits as usual


def test_special_tokens_split_out_longest_first_only_when_allowed():
    pre = PreTokenizer("gpt2")
    text = "a<|endoftext|>b<|end|>"
    assert list(pre.segments(text)) == [(text, False)]
    assert list(pre.segments(text, ["<|end|>", "<|endoftext|>"])) == [
        ("a", False), ("<|endoftext|>", True), ("b", False), ("<|end|>", True),
    ]
    assert list(pre.segments(text, ["<|end|>"])) == [("a<|endoftext|>b", False), ("<|end|>", True)]
