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
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

from bpe.pretokenize import PreTokenizer
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


def count_candidates(piece_counts: Mapping[bytes | str, int], encode: Callable[[bytes], Sequence[int]],
                     token_length: Sequence[int], pattern: str) -> dict[str, int]:
    """Counts the supermerge candidates of a table of stage-two pieces.

    Args:
      piece_counts: stage-two piece -> count (``rules.STAGE_TWO_PATTERN``'s pieces;
        a str piece is its UTF-8 bytes).
      encode: stage one's encoding of a piece: ``PieceEncoder(merges).encode_bytes``,
        or an existing tokenizer's ``piece_encoder.encode_bytes`` when superwords
        extend it.
      token_length: the length in bytes of every token ``encode`` gives, by ID.
      pattern: stage one's pre-tokenizer (the existing tokenizer's, when extending).

    Returns:
      run (ID string) -> total count of the pieces it occurs in, once per occurrence.
    """
    pretokenizer = PreTokenizer(pattern)
    runs: dict[str, int] = {}
    for piece, count in piece_counts.items():
        check_count(piece, count)
        if not count:
            continue
        for run in piece_runs(piece_bytes(piece), encode, pretokenizer, token_length):
            runs[run] = runs.get(run, 0) + int(count)
    return runs
