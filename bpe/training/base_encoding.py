"""The base tokenizer's encoding of many pieces at once: one flat array of IDs and each piece's length.

``train --extend`` starts its merge loop from the base's encoding of every piece
of the word-count table, a million pieces and more. Each piece is encoded by the
base's own rule: for a rank file tiktoken's core, whose rule is the file's by
definition; for any other base the reference encoder (``Tokenizer.piece_encoder``).

For a rank file the pieces go to tiktoken in one call, not one call each (which
makes a Python list and int per ID): the pieces are joined by a separator that
tiktoken takes as a special token, and a pattern that matches the whole text
between two separators makes each piece one piece, which tiktoken encodes as
``encode_single_piece`` does (a whole token is that token, else its rank rule).
The separators in the result mark where each piece ends. A piece that would
break this (one holding the separator, or bytes that are not UTF-8, which
tiktoken takes as str only) is encoded on its own; the number of separators
found is checked against the number of pieces.
"""

from __future__ import annotations

import itertools
from typing import Sequence

import numpy as np

from bpe.tokenizer import Tokenizer

__all__ = ["base_ids"]

# Joins the pieces; tiktoken matches it as a special token (ID: the base's vocab size, no token's).
SEPARATOR = "\x00"
# Between two separators, everything is one piece.
_WHOLE_TEXT = r"[\s\S]+"


def base_ids(base: Tokenizer, pieces: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """(IDs, lengths): the base's IDs of every piece, one after the other (uint32), and how many
    each piece takes (int64), in the order of ``pieces``."""
    core = _tiktoken_core(base)
    if core is None:
        return _one_by_one(base.piece_encoder.encode_bytes, pieces)
    joined = _joined_ids(core, base.vocab_size, pieces)
    if joined is not None:
        return joined
    # Some piece cannot be joined: those go one by one, the rest still in one call.
    alone = np.fromiter(map(_cannot_join, pieces), dtype=bool, count=len(pieces))
    parts = [
        (np.flatnonzero(~alone), _joined_ids(core, base.vocab_size, list(itertools.compress(pieces, ~alone)))),
        (np.flatnonzero(alone), _one_by_one(core.encode_single_piece, list(itertools.compress(pieces, alone)))),
    ]
    return _interleave(len(pieces), parts)


def _tiktoken_core(base: Tokenizer):
    """tiktoken's core for a rank file, with the separator as a special token; None for any other
    base, or without a tiktoken that encodes into a buffer."""
    if base.kind != "tiktoken":
        return None
    import tiktoken

    encoding = tiktoken.Encoding(
        name="beam-bpe-pieces",
        pat_str=_WHOLE_TEXT,
        mergeable_ranks={data: token_id for token_id, data in base.ordinary_tokens().items()},
        special_tokens={SEPARATOR: base.vocab_size},
    )
    core = encoding._core_bpe
    return core if hasattr(core, "encode_to_tiktoken_buffer") else None


def _joined_ids(core, separator_id: int, pieces: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray] | None:
    """The pieces encoded in one call, or None when some piece cannot be joined."""
    if not pieces:
        return _one_by_one(core.encode_single_piece, pieces)
    try:
        text = SEPARATOR.encode("ascii").join(pieces).decode("utf-8")
    except UnicodeDecodeError:
        return None
    ids = np.frombuffer(core.encode_to_tiktoken_buffer(text, {SEPARATOR}), dtype=np.uint32)
    cuts = np.flatnonzero(ids == separator_id)
    if len(cuts) != len(pieces) - 1:  # a piece holds the separator
        return None
    ends = np.append(cuts, len(ids)) - np.arange(len(pieces))
    return np.delete(ids, cuts), np.diff(ends, prepend=0)


def _cannot_join(piece: bytes) -> bool:
    """Whether a piece holds the separator or bytes that are not UTF-8."""
    if SEPARATOR.encode("ascii") in piece:
        return True
    try:
        piece.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def _one_by_one(encode, pieces: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """The pieces encoded one call each."""
    encoded = list(map(encode, pieces))
    lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    ids = np.fromiter(itertools.chain.from_iterable(encoded), dtype=np.uint32, count=int(lengths.sum()))
    return ids, lengths


def _interleave(count: int, parts) -> tuple[np.ndarray, np.ndarray]:
    """Puts the (IDs, lengths) of groups of pieces, each with the pieces' places, back in order."""
    lengths = np.zeros(count, dtype=np.int64)
    for places, (_, part_lengths) in parts:
        lengths[places] = part_lengths
    starts = np.cumsum(lengths) - lengths
    ids = np.empty(int(lengths.sum()), dtype=np.uint32)
    for places, (part_ids, part_lengths) in parts:
        # Each ID moves from its piece's start in the group to its piece's start in the whole.
        ids[np.repeat(starts[places] - (np.cumsum(part_lengths) - part_lengths), part_lengths)
            + np.arange(len(part_ids))] = part_ids
    return ids, lengths
