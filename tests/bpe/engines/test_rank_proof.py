"""The proof that tiktoken's rule (rank of the joined bytes) gives our IDs for a vocabulary
(``bpe.engines.rank_proof.rank_mismatch``), against brute force on arbitrary merge lists: where it
passes, tiktoken's own encoder equals the reference on every piece tried; its spine test
says exactly which tokens replay to themselves; and no foreign pair survives it."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bpe
from bpe import reference
from bpe.engines import rank_proof
from bpe.decoder import vocabulary_bytes
from tests.support.toy_tokenizers import untrained_merges

tiktoken = pytest.importorskip("tiktoken")


merge_lists = st.builds(
    untrained_merges, st.randoms(use_true_random=False), st.sampled_from([b"ab", b"abc", b"a\x00b", "é中".encode()]),
    st.integers(0, 60),
)


@settings(max_examples=400, deadline=None)
@given(merges=merge_lists, data=st.data())
def test_where_the_proof_passes_tiktoken_gives_the_references_ids(merges, data):
    tok = bpe.Tokenizer(merges)
    if rank_proof.rank_mismatch(tok) is not None:
        return
    token_bytes = vocabulary_bytes(merges)
    ranks = {b: i for i, b in enumerate(token_bytes)}
    enc = tiktoken.Encoding("proof", pat_str=r"[\s\S]+", mergeable_ranks=ranks, special_tokens={})
    alphabet = sorted({b for t in token_bytes[256:] for b in t} or {97})
    pieces = data.draw(st.lists(st.lists(st.sampled_from(alphabet), min_size=1, max_size=60).map(bytes), max_size=8))
    for piece in pieces + token_bytes[256:]:
        assert enc._encode_single_piece(piece) == reference.encode_bytes(piece, merges), piece


@settings(max_examples=400, deadline=None)
@given(merges=merge_lists.filter(bool))
def test_the_spine_test_finds_exactly_the_tokens_that_do_not_replay_to_themselves(merges):
    """By induction in ID order: a token whose two parts replay to themselves replays to
    itself exactly when no merge joins across their cut first."""
    import numpy as np

    token_bytes = vocabulary_bytes(merges)
    replays = [reference.encode_bytes(token_bytes[256 + r], merges) == [256 + r] for r in range(len(merges))]
    table = rank_proof._MergeTable(merges)
    crossed = rank_proof._crossings(table, table.left, table.right, limit=np.arange(len(merges)))
    for r, (left, right) in enumerate(merges):
        if all(replays[part - 256] for part in (left, right) if part >= 256):
            assert bool(crossed[r]) != replays[r], (r, merges)


@settings(max_examples=300, deadline=None)
@given(merges=merge_lists.filter(bool))
def test_when_every_token_replays_to_itself_no_foreign_pair_can_meet(merges):
    """Step 2 of the proof: every pair of tokens that spells a token other than by its
    merge is split by a merge across its cut (the window test, run on the foreign pairs)."""
    import numpy as np

    if rank_proof.rank_mismatch(bpe.Tokenizer(merges)) is not None:
        return
    token_bytes = vocabulary_bytes(merges)
    ids = {b: i for i, b in enumerate(token_bytes)}
    foreign = [(ids[t[:k]], ids[t[k:]]) for r, t in enumerate(token_bytes[256:])
               for k in range(1, len(t)) if t[:k] in ids and t[k:] in ids and (ids[t[:k]], ids[t[k:]]) != merges[r]]
    if not foreign:
        return
    lefts, rights = (np.array(column) for column in zip(*foreign))
    table = rank_proof._MergeTable(merges)
    assert rank_proof._crossings(table, lefts, rights, limit=np.full(len(foreign), len(merges))).all()


def test_the_proof_names_the_token_that_would_differ():
    tok = bpe.Tokenizer([(98, 99), (97, 98), (257, 99)])  # "abc": ours [97, 256], tiktoken [258]
    assert rank_proof.rank_mismatch(tok).startswith("token 258's own bytes do not encode to it")
    assert rank_proof.rank_mismatch(bpe.Tokenizer([(97, 98), (256, 99), (97, 98)])) == "tokens 256 and 258 have the same bytes"
    assert rank_proof.rank_mismatch(bpe.Tokenizer([])) is None
