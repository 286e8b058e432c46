"""The rank proof: whether tiktoken's rank-of-bytes merging gives our IDs for a vocabulary.

tiktoken, and the accelerators that merge as it does (``bpe.accelerators.splintr``),
join the adjacent pair whose concatenated bytes have the lowest rank; ours
replays the merge pairs in learned order. ``rank_mismatch`` finds whether any
text could be encoded differently by the two rules, in O(vocabulary), with the
argument in its docstring. It is the one check both ``bpe.engines.tiktoken_check``
and the accelerators run before they use such an engine.

``rank_file_mismatch`` runs the same proof the other way round, for a tiktoken
rank file: whether merging the pairs each token is built from (a merge list
derived from the file) gives tiktoken's IDs, which an accelerator that loads a
rank file as such a list must before it is used (``bpe.accelerators.gigatoken``).

``rank_export_mismatch`` proves the export of a rank file: that Hugging Face's
pair-rank BPE, with a given merge list and ``ignore_merges``, gives tiktoken's
IDs on every text (``bpe.tokenizer_export`` writes a tokenizer.json only where
it does).
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

from bpe.decoder import vocabulary_bytes
from bpe.tokenizer_file.tiktoken_file import derive_merges, own_run

__all__ = ["contract_merges", "rank_export_mismatch", "rank_file_mismatch", "rank_mismatch"]


def rank_mismatch(tokenizer) -> str | None:
    """Why tiktoken could encode some text differently from our encoder, or None.

    ``tokenizer``: anything with ``merges`` (ours, or ``tiktoken_check``'s renumbering of a
    Hugging Face file's merges).

    Both encoders return a piece that is a whole token as that token. Otherwise
    tiktoken repeatedly merges the adjacent pair whose *concatenated bytes* have
    the lowest rank (our ID), while ours replays the merge *pairs* in learned
    order. They can differ only where two adjacent tokens (a, b) spell a token T
    whose own merge is some other pair (a "foreign" pair): tiktoken joins them,
    ours never does. The proof, with t(x) = the merge step that creates token x
    (-1 for bytes):

    The cut fact. Put a piece ending in token a's bytes before one starting
    with token b's, and let each replay on its own. Until a merge joins tokens
    across the cut, the token ending at the cut is an element of a's right spine
    (a, right(a), right(right(a)), ...) and the token starting there one of b's
    left spine; spine elements x and y stand side by side during the steps after
    both exist and before their parents. So the first merge across the cut is a
    merge (x, y) of such elements at a step s inside that window:
    t(x), t(y) < s < t(parent of x) and s <= t(parent of y) (a and b themselves
    have no parent). When y's parent is made at step s itself, that is the same
    merge (c, c) on a run c c c; merging left to right, x takes y first.
    ``_crossings`` looks for such a merge for every merge (a, b) at once.

    1. Token bytes are unique, and every token T = merge (a, b) at step r, replayed
       as one piece, gives T (both encoders return whole-token pieces directly).
       By induction in ID order: a and b replay to themselves, so the piece
       becomes [a, b] and then [T] exactly when no merge joins across the cut
       before step r; one that does leaves no boundary where a and b meet.
    2. Then no foreign pair (a, b) of a token T is ever adjacent in our encoder.
       The piece of T's bytes is a's then b's and replays to [T], not [a, b]
       ((a, b) is no merge: its bytes are T's, which only T's merge makes), so a
       merge joins across their cut: by the cut fact, one of their spines'
       elements, inside the window. Wherever a and b would meet, that merge
       joins across their cut first (tokens are never split again).
    """
    merges, merged_ids = contract_merges(tokenizer)
    rank: dict[bytes, int] = {}
    for token_id, data in enumerate(vocabulary_bytes(merges)):
        if data in rank:
            return f"tokens {rank[data]} and {token_id} have the same bytes"
        rank[data] = token_id
    if not merges:
        return None
    import numpy as np  # only for the proof: a vocabulary's worth of spine pairs at once

    table = _MergeTable(merges)
    crossed = _crossings(table, table.left, table.right, limit=np.arange(len(merges)))
    if crossed.any():
        token_id = merged_ids[int(np.flatnonzero(crossed)[0])]
        return (f"token {token_id}'s own bytes do not encode to it by replaying the merges "
                f"(tiktoken gives the token itself)")
    return None


def contract_merges(tokenizer) -> tuple[list[tuple[int, int]], list[int]]:
    """(the merges renumbered so that merge i makes 256 + i, the ID each makes in the tokenizer).

    One of ours whose special tokens sit between its merges (an extension) makes
    increasing IDs with gaps: renumbered, tiktoken's order of ranks is the same,
    so the proof below holds for its own IDs. Anything else with ``merges`` (ours
    without gaps, a renumbered view) is taken as it is.
    """
    merges = tokenizer.merges
    encoder = getattr(tokenizer, "piece_encoder", None)
    merged = list(encoder.merged) if encoder is not None else list(range(256, 256 + len(merges)))
    if merged == list(range(256, 256 + len(merges))):
        return merges, merged
    if any(b <= a for a, b in zip(merged, merged[1:])) or list(encoder.byte_ids) != list(range(256)):
        raise ValueError("contract_merges takes merges that create increasing IDs from single bytes 0..255")
    compact = {token_id: 256 + i for i, token_id in enumerate(merged)}
    return [(compact.get(left, left), compact.get(right, right)) for left, right in merges], merged


def rank_file_mismatch(tokens: Mapping[int, bytes]) -> str | None:
    """Why merging a rank file's tokens by the two parts each is built from could encode some
    text differently from tiktoken, or None.

    ``tokens``: the file's rank (ID) -> token bytes. A token's parts are the two
    it ends as when tiktoken merges its own bytes with the lower ranks only
    (``tiktoken_file.derive_merges``); a file holding a token that ends as one
    part or more than two is a mismatch, naming the token (tiktoken encodes it,
    a merge list cannot make it). Otherwise the merges, renumbered into our
    contract (byte b is ID b; the longer tokens take 256, 257, ... in rank order,
    which keeps tiktoken's order of their ranks and so its IDs up to the
    renumbering), go through ``rank_mismatch``: None means that replaying them
    pair by pair gives tiktoken's IDs on every text. O(vocabulary).
    """
    ranks = {data: rank for rank, data in tokens.items()}
    try:
        merges = derive_merges(ranks)
    except ValueError as e:
        return str(e)
    longer = sorted(rank for rank, data in tokens.items() if len(data) > 1)
    ours = {rank: data[0] for rank, data in tokens.items() if len(data) == 1}
    ours.update((rank, 256 + i) for i, rank in enumerate(longer))
    mismatch = rank_mismatch(_Merges([(ours[left], ours[right]) for left, right in merges]))
    if mismatch:
        return f"merging the pairs the tokens are built from is not tiktoken's rule here: {mismatch}"
    return None


def rank_export_mismatch(tokens: Mapping[int, bytes], merges: Sequence[tuple[int, int]],
                         ignore_merges: bool) -> str | None:
    """Why Hugging Face's BPE with ``merges`` (pair-rank semantics) could encode some piece
    of text differently from tiktoken with the rank file ``tokens``, or None.

    ``tokens``: the file's rank (ID) -> token bytes; ``merges``: (left ID, right ID),
    each making the token of their joined bytes; ``ignore_merges``: a piece that is
    a whole token is that token (HF's flag). The two rules:

    - tiktoken: a piece that is a token is that token; else, from the single bytes,
      repeatedly join the adjacent pair whose joined bytes have the lowest rank,
      the leftmost of equal ones (pairs that spell the same token tie).
    - Hugging Face: (with ``ignore_merges``) a piece that is a token is that token;
      else repeatedly join the adjacent pair listed first in ``merges``, the
      leftmost occurrence of that pair (its heap orders by (list position, place);
      a pair's entry is taken only while the pair still makes the same token, and
      a place's pair spells that token once at most, as parts only grow).

    A token's own run is tiktoken's rule on its bytes without the whole-piece rule
    (``own_run``). The checks:

    (a) every merge joins two tokens into a token, and the tokens the merges make
        rise strictly in rank: one merge per token, listed in rank order;
    (b) a token of two or more bytes whose own run ends as the token has exactly
        its run's last step as its merge; any other has no merge, and then
        ``ignore_merges`` is on. O(total token bytes x token length).

    Where every token of two or more bytes has a merge and each merge joins tokens
    of lower rank than the one it makes, (b) is not needed when ``rank_mismatch``,
    O(vocabulary), proves the merges instead: renumbered into our contract (byte b
    is ID b, the longer tokens 256, 257, ... in rank order, as
    ``rank_file_mismatch`` does) they are then a merge list that makes every
    token, and replaying it pair by pair (Hugging Face's rule, with or without
    ``ignore_merges``: every token replays to itself) gives tiktoken's IDs on
    every text. Only where that proof finds a mismatch does (b) decide.

    Where (a) and (b) hold, the two rules give the same IDs on every piece:

    1. Inside a run. In tiktoken's run on any piece, a part that spans a token T's
       bytes is made by T's own run's last step. Until T's part exists, every part
       inside its span was made inside it (parts only grow), and the joins inside
       the span are exactly T's own run, in order: a join inside is the lowest rank
       of the whole piece, so the lowest inside and the leftmost inside of its
       rank, which is the own run's next step; joins outside change no pair inside.
       The join that makes T's part is then the last step of T's own run.
    2. A whole piece that is a token: tiktoken gives that token; HF, with
       ``ignore_merges``, too; without it (no token lacks a merge, by (b)) HF's run
       is tiktoken's run without the whole-piece rule (3), that is the token's own
       run, which by (b) ends as the token.
    3. Any other piece: the two runs take the same step from the same parts, by
       induction. tiktoken joins the leftmost pair (x, y) of lowest rank, making
       T; by 1, (x, y) is T's merge, so HF has it. HF's first listed pair present
       is one of the lowest rank (by (a), list order is rank order, and every
       listed pair present spells a token, of rank >= T's); the only listed pair
       spelling T is (x, y), and its leftmost place is tiktoken's. Both stop
       together: a pair HF lists is one tiktoken can join, and a pair tiktoken
       would join is, by 1, listed.

    Several merges for one token are never needed: tiktoken makes a token from
    one pair only (1). A list that holds another pair spelling T (a foreign pair)
    could only add joins tiktoken never makes, where both splits of T meet, e.g.
    the overlapping splits (ab, a) and (a, ba) of "aba" in the parts ab, a, ba.
    """
    by_bytes = {data: rank for rank, data in tokens.items()}
    if len(by_bytes) != len(tokens):
        return "two tokens have the same bytes"
    made, mismatch = _merges_in_rank_order(tokens, by_bytes, merges)
    if mismatch is not None:
        return mismatch
    if _replay_is_tiktoken(tokens, merges, made):
        return None
    return _own_run_mismatch(tokens, by_bytes, made, ignore_merges)


def _merges_in_rank_order(tokens: Mapping[int, bytes], by_bytes: Mapping[bytes, int],
                          merges: Sequence[tuple[int, int]]) -> tuple[dict[int, tuple[int, int]], str | None]:
    """Check (a) of ``rank_export_mismatch``: token ID -> the merge that makes it, and why the
    merges are not one merge per token, listed in rank order (None when they are)."""
    made: dict[int, tuple[int, int]] = {}
    previous = -1
    for i, (left, right) in enumerate(merges):
        if left not in tokens or right not in tokens:
            return made, f"merge {i} ({left}, {right}) names an ID that is not a token"
        made_id = by_bytes.get(tokens[left] + tokens[right])
        if made_id is None:
            return made, f"merge {i} ({left}, {right}) makes {tokens[left] + tokens[right]!r}, which is not a token"
        if made_id <= previous:
            return made, f"merge {i} makes token {made_id}, not after the token {previous} the merge before it makes"
        made[made_id], previous = (left, right), made_id
    return made, None


def _own_run_mismatch(tokens: Mapping[int, bytes], by_bytes: Mapping[bytes, int],
                      made: Mapping[int, tuple[int, int]], ignore_merges: bool) -> str | None:
    """Check (b) of ``rank_export_mismatch``: the first token whose merge is not its own
    run's last step (or that needs ``ignore_merges`` without it), or None."""
    for rank in sorted(tokens):
        data = tokens[rank]
        if len(data) < 2:
            continue
        parts, last = own_run(data, by_bytes)
        if len(parts) == 1:
            expected = (by_bytes[last[0]], by_bytes[last[1]])
            if made.get(rank) != expected:
                return (f"token {rank} ({data!r}) is made by tiktoken from {last[0]!r} + {last[1]!r} "
                        f"(tokens {expected[0]}, {expected[1]}), but its merge is {made.get(rank)}")
        elif rank in made:
            return f"token {rank} ({data!r}) has a merge, but tiktoken never joins it inside a piece"
        elif not ignore_merges:
            return (f"token {rank} ({data!r}) is made by tiktoken only as a whole piece "
                    "(its own bytes end as several parts), which needs ignore_merges")
    return None


def _replay_is_tiktoken(tokens: Mapping[int, bytes], merges: Sequence[tuple[int, int]],
                        made: Mapping[int, tuple[int, int]]) -> bool:
    """Whether ``rank_mismatch`` proves that replaying ``merges`` (checked by (a) of
    ``rank_export_mismatch``: one per token made, in rank order) gives tiktoken's IDs: every
    token of two or more bytes has a merge, each joining tokens of lower rank."""
    longer = sorted(rank for rank, data in tokens.items() if len(data) > 1)
    if len(made) != len(longer):
        return False
    ours = {rank: data[0] for rank, data in tokens.items() if len(data) == 1}
    ours.update((rank, 256 + i) for i, rank in enumerate(longer))
    renumbered = [(ours[left], ours[right]) for left, right in merges]
    if any(left >= 256 + i or right >= 256 + i for i, (left, right) in enumerate(renumbered)):
        return False
    return rank_mismatch(_Merges(renumbered)) is None


@dataclasses.dataclass(frozen=True)
class _Merges:
    """A merge list in our contract: what ``rank_mismatch`` reads of a tokenizer."""

    merges: list[tuple[int, int]]


class _MergeTable:
    """The merges as arrays: each token's children and creation step, and a sorted
    index from a pair (left * base + right) to the first step that merges it."""

    def __init__(self, merges: list[tuple[int, int]]):
        import numpy as np

        pairs = np.array(merges, dtype=np.int64)
        self.left, self.right = pairs[:, 0], pairs[:, 1]
        count = len(merges)
        self.base = 256 + count + 1
        # For every ID: its children (-1 for bytes) and the step that creates it (-1 for bytes).
        self.children = np.full((256 + count, 2), -1, dtype=np.int64)
        self.children[256:] = pairs
        self.created = np.arange(-256, count, dtype=np.int64)
        self.created[:256] = -1
        keys, first = np.unique(self.left * self.base + self.right, return_index=True)
        self.keys, self.steps = keys, first.astype(np.int64)

    def step_of(self, x, y):
        """The step merging (x, y) for each pair of the arrays, or -1."""
        import numpy as np

        keys = x * self.base + y
        at = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        return np.where(self.keys[at] == keys, self.steps[at], -1)

    def spine(self, tokens, side: int):
        """[(elements, until)] level by level down the ``side`` (0 left, 1 right) spine of
        each token: -1 past its byte; ``until`` is the step that makes the element's parent."""
        import numpy as np

        levels = [(tokens, np.full(len(tokens), np.iinfo(np.int64).max))]
        while True:
            above = levels[-1][0]
            below = np.where(above >= 256, self.children[np.maximum(above, 0), side], -1)
            if not (below >= 0).any():
                return levels
            levels.append((below, np.where(below >= 0, self.created[np.maximum(above, 0)], -1)))


def _crossings(table: _MergeTable, lefts, rights, limit):
    """For each (a, b) = (lefts[i], rights[i]): whether a merge joins across the cut
    between a's bytes and b's at a step below ``limit[i]`` (see ``rank_mismatch``)."""
    import numpy as np

    crossed = np.zeros(len(lefts), dtype=bool)
    created = table.created
    right_spines = table.spine(rights, side=0)
    for xs, x_until in table.spine(lefts, side=1):
        for ys, y_until in right_spines:
            at = np.flatnonzero((xs >= 0) & (ys >= 0) & ~crossed)
            if not len(at):
                continue
            x, y = xs[at], ys[at]
            step = table.step_of(x, y)
            inside = ((step >= 0) & (np.maximum(created[x], created[y]) < step) & (step < x_until[at])
                      & (step <= y_until[at]) & (step < limit[at]))
            crossed[at[inside]] = True
    return crossed
