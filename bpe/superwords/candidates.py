"""Supermerge candidates: the runs of whole tokens in stage-two pieces, counted by frequency.

Stage two (``bpe/superwords/reference.py``) only ever merges two adjacent
*whole* tokens, tokens that spell exactly one pretoken, or tokens merged from
them. A token that is not whole never takes part, so it cuts its piece: the
runs of two or more whole tokens between such cuts are independent, and equal
runs behave alike wherever they occur. Counting each run by the total count of
the pieces it occurs in therefore gives the stage-two loop exactly the pair
counts of the whole documents, in a table far smaller than the documents
(common phrases repeat; a run ends at the first rare word).

Runs are ID strings, one character per token ID (``chr(id)``), the form the
merge loops take.

Two ways to find a piece's runs, one result:

- ``piece_runs`` encodes the whole piece with stage one's merges, as the
  definition says, and compares token spans with pretoken spans. It is exact for
  any encoder, and slow: almost every stage-two piece is new.
- ``StageOneRuns`` (when stage one's merge list is at hand) encodes each pretoken
  once, from a cache, and joins the encodings. That is the whole piece's encoding
  unless some merge joins a token at the end of one pretoken to one at the start
  of the next. Before any such merge, every pretoken evolves as it does alone, so
  the tokens that can meet at a boundary are the nodes of the last token's right
  spine (the token, its right part, that part's right part, ... down to a byte)
  and of the next first token's left spine. When no pair of those is a merge, at
  every boundary, the joined encodings are the piece's, and a token is whole
  exactly when its pretoken encodes to it alone. Where a pair is a merge, the two
  pretokens are encoded together, and the same check runs between such clusters
  until it holds everywhere: the same argument, for clusters.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

from bpe.encoder import PieceEncoder
from bpe.pretokenize import PreTokenizer, to_text
from bpe.reference import check_count, piece_bytes


def piece_runs(piece: bytes, encode: Callable[[bytes], Sequence[int]], pretokenizer: PreTokenizer,
               token_length: Sequence[int]) -> list[str]:
    """The runs of two or more whole tokens in one stage-two piece, as ID strings.

    Args:
      piece: a stage-two piece.
      encode: stage one's encoding of a piece (its merges in pair-rank order over the whole piece).
      pretokenizer: stage one's pre-tokenizer.
      token_length: the length in bytes of every stage-one token, by ID.
    """
    # boundary offset -> its index, so a token is whole when it starts at a
    # boundary and ends at the very next one.
    boundary = {0: 0}
    offset = 0
    for index, pretoken in enumerate(pretokenizer.pieces(piece), 1):
        offset += len(pretoken)
        boundary[offset] = index
    runs = []
    run: list[str] = []
    start = 0
    for token in encode(piece):
        end = start + token_length[token]
        at = boundary.get(start)
        if at is not None and boundary.get(end) == at + 1:
            run.append(chr(token))
        else:
            if len(run) >= 2:
                runs.append("".join(run))
            run = []
        start = end
    if len(run) >= 2:
        runs.append("".join(run))
    return runs


class StageOneRuns:
    """``piece_runs`` for stage one's own merges, from per-pretoken encodings (see the module doc).

    Args:
      merges: stage one's merges (merge ``i`` creates ID ``256 + i``).
      pattern: stage one's pre-tokenizer.
    """

    def __init__(self, merges: Sequence[tuple[int, int]], pattern: str):
        self._encoder = PieceEncoder(merges, cache_size=0)
        self._pretokenizer = PreTokenizer(pattern)
        self._split = self._pretokenizer.split
        self._token_length = [1] * 256
        # Each token's spines, as tuples: (the token, its part on that side, that part's, ...).
        self._left_spine: list[tuple[int, ...]] = [(b,) for b in range(256)]
        self._right_spine: list[tuple[int, ...]] = [(b,) for b in range(256)]
        # left token -> the right tokens it merges with.
        self._partners: dict[int, set[int]] = {}
        for i, (left, right) in enumerate(merges):
            token = 256 + i
            self._token_length.append(self._token_length[left] + self._token_length[right])
            self._left_spine.append((token, *self._left_spine[left]))
            self._right_spine.append((token, *self._right_spine[right]))
            self._partners.setdefault(left, set()).add(right)
        # pretoken -> (its single token or -1, its IDs)
        self._pretokens: dict[str, tuple[int, tuple[int, ...]]] = {}
        # (last token of a pretoken, first token of the next) -> whether no merge can join them
        self._apart_cache: dict[tuple[int, int], bool] = {}

    def __call__(self, piece: bytes) -> list[str]:
        """The runs of ``piece``, as ``piece_runs`` gives them."""
        text, errors = to_text(piece)
        if errors != "strict":  # escaped bytes: a str pretoken would not say which bytes it stands for
            return self._exact(piece)
        pretokens = self._split(text)
        cache = self._pretokens
        entries = []
        for pretoken in pretokens:
            entry = cache.get(pretoken)
            if entry is None:
                ids = tuple(self._encoder.encode_bytes(pretoken.encode("utf-8")))
                entry = cache[pretoken] = (ids[0] if len(ids) == 1 else -1, ids)
            entries.append(entry)
        for before, after in zip(entries, entries[1:]):
            if not self._apart(before[1][-1], after[1][0]):
                return self._clustered(pretokens, entries)
        runs = []
        run: list[str] = []
        for single, _ in entries:
            if single >= 0:
                run.append(chr(single))
            else:
                if len(run) >= 2:
                    runs.append("".join(run))
                run = []
        if len(run) >= 2:
            runs.append("".join(run))
        return runs

    def _apart(self, last: int, first: int) -> bool:
        """``_never_joined``, remembered."""
        key = (last, first)
        separate = self._apart_cache.get(key)
        if separate is None:
            separate = self._apart_cache[key] = self._never_joined(last, first)
        return separate

    def _clustered(self, pretokens: list[str], entries: list) -> list[str]:
        """The runs of a piece where a merge may join two pretokens: neighbours that may be
        joined are encoded together, until no merge can join any two such clusters (the
        argument of the module doc, for clusters). Usually two or three pretokens, not the piece."""
        clusters = [(k, k + 1, list(entry[1])) for k, entry in enumerate(entries)]  # (first, end, IDs)
        joined = True
        while joined:
            joined = False
            kept = [clusters[0]]
            for cluster in clusters[1:]:
                first, _, ids = kept[-1]
                if self._apart(ids[-1], cluster[2][0]):
                    kept.append(cluster)
                else:
                    data = "".join(pretokens[first : cluster[1]]).encode("utf-8")
                    kept[-1] = (first, cluster[1], self._encoder.encode_bytes(data))
                    joined = True
            clusters = kept
        runs = []
        run: list[str] = []
        for first, end, ids in clusters:
            # A token is whole when it starts at a pretoken's start and ends at that pretoken's end.
            end_of = {}
            offset = 0
            for k in range(first, end):
                length = len(pretokens[k].encode("utf-8"))
                end_of[offset] = offset + length
                offset += length
            offset = 0
            for token in ids:
                start = offset
                offset += self._token_length[token]
                if end_of.get(start) == offset:
                    run.append(chr(token))
                else:
                    if len(run) >= 2:
                        runs.append("".join(run))
                    run = []
        if len(run) >= 2:
            runs.append("".join(run))
        return runs

    def _never_joined(self, last: int, first: int) -> bool:
        """Whether no merge joins a token of ``last``'s right spine to one of ``first``'s left spine."""
        left_spine = self._left_spine[first]
        for token in self._right_spine[last]:
            partners = self._partners.get(token)
            if partners is not None and not partners.isdisjoint(left_spine):
                return False
        return True

    def _exact(self, piece: bytes) -> list[str]:
        return piece_runs(piece, self._encoder.encode_bytes, self._pretokenizer, self._token_length)


def count_candidates(piece_counts: Mapping[bytes | str, int], runs_of: Callable[[bytes], list[str]]) -> dict[str, int]:
    """Counts the supermerge candidates of a table of stage-two pieces.

    Args:
      piece_counts: stage-two piece -> count (``rules.STAGE_TWO_PATTERN``'s pieces;
        a str piece is its UTF-8 bytes).
      runs_of: a piece's runs: ``StageOneRuns(merges, pattern)``, or ``piece_runs``
        with an existing tokenizer's encoder when superwords extend it.

    Returns:
      run (ID string) -> total count of the pieces it occurs in, once per occurrence.
    """
    runs: dict[str, int] = {}
    for piece, count in piece_counts.items():
        check_count(piece, count)
        if not count:
            continue
        for run in runs_of(piece_bytes(piece)):
            runs[run] = runs.get(run, 0) + int(count)
    return runs
