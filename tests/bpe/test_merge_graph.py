"""bpe.merge_graph: which tokens a merge path reaches, for each kind of tokenizer."""

from __future__ import annotations

import base64

import bpe
from bpe.merge_graph import MergeGraph


def rank_file(tokens: list[bytes]) -> bpe.Tokenizer:
    """A rank file of the 256 bytes and then ``tokens``, in that rank order."""
    every = [bytes([b]) for b in range(256)] + tokens
    data = b"".join(base64.b64encode(t) + b" %d\n" % rank for rank, t in enumerate(every))
    return bpe.Tokenizer.from_tiktoken(data, pattern="gpt2")


def test_a_rank_file_token_that_is_no_two_lower_ranked_tokens_joined_is_unreachable():
    # "abc" (257) splits as a|bc and ab|c; bc (258) ranks after it, ab (256) before: reachable.
    # "xyz" (260): x|yz and xy|z, neither yz nor xy is a token: unreachable, and so is "xyzw" built on it.
    tok = rank_file([b"ab", b"abc", b"bc", b"xyz", b"xyzw"])
    assert [tok.token_bytes(i) for i in MergeGraph.of(tok).unreachable()] == [b"xyz", b"xyzw"]


def test_ours_reach_every_merge_and_special_tokens_are_not_listed():
    tok = bpe.Tokenizer([(97, 98), (256, 99)], special_tokens=["<s>"])
    assert MergeGraph.of(tok).unreachable() == []
    assert MergeGraph.of(tok).built_from == {256: [(97, 98)], 257: [(256, 99)]}


def test_a_merge_naming_a_token_a_later_merge_builds_still_reaches_it():
    # As in a Hugging Face file: merge 0 joins ab+c, merge 1 builds ab; pair ranks still apply merge 0.
    graph = MergeGraph({**{b: bytes([b]) for b in range(256)}, 300: b"abc", 301: b"ab", 302: b"zz"},
                       [(301, 99, 300), (97, 98, 301)])
    assert graph.unreachable() == [302]
