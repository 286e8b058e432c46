"""tiktoken rank files (``*.tiktoken``): one ``base64(token bytes) rank`` per line.

A rank file holds only the mergeable tokens; the pattern and the special tokens
come from the caller or from a preset (``bpe.presets``). tiktoken's semantics
are the file's: a token's rank is its ID, and encoding merges the adjacent pair
whose concatenated bytes have the lowest rank (``bpe.encoder.RankEncoder``).
``exact_merges`` turns a rank file into the merge list under which Hugging
Face's pair-rank BPE gives the same IDs (``own_run``: tiktoken's rule on one
token's bytes).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import re
from typing import Mapping

__all__ = ["ExactMerges", "RankFile", "derive_merges", "exact_merges", "looks_like_rank_file", "own_run", "parse", "render"]

# Above every rank: the rank of a pair whose joined bytes are no token.
_NO_RANK = 1 << 62
# The first line of a rank file: base64, one space, a decimal rank.
_FIRST_LINE = re.compile(rb"\A[A-Za-z0-9+/=]+ [0-9]+\r?\n?\Z")


def looks_like_rank_file(start: bytes) -> bool:
    """Whether the first bytes of a file can begin a rank file."""
    first_line = start.split(b"\n", 1)[0] + b"\n"
    return bool(_FIRST_LINE.match(first_line))


@dataclasses.dataclass(frozen=True)
class RankFile:
    """A parsed rank file.

    Attributes:
      ranks: token bytes -> rank (its ID).
    """

    ranks: dict[bytes, int]


def parse(data: bytes, source: str) -> RankFile:
    """Parses and validates a rank file.

    Every single byte must be a token (or some input could not be encoded), and
    ranks and tokens must be unique.

    Raises:
      ValueError: one line naming the file, the line and the problem.
    """
    fields = data.split()
    try:
        if len(fields) % 2:
            raise ValueError
        tokens = [binascii.a2b_base64(t, strict_mode=True) for t in fields[0::2]]
        rank_list = list(map(int, fields[1::2]))
    except (ValueError, binascii.Error):
        raise ValueError(_first_problem(data, source)) from None
    ranks = dict(zip(tokens, rank_list))
    if len(ranks) != len(tokens) or len(set(rank_list)) != len(rank_list) or b"" in ranks or min(rank_list, default=0) < 0:
        raise ValueError(_first_problem(data, source))
    missing = [b for b in range(256) if bytes([b]) not in ranks]
    if missing:
        shown = ", ".join(f"0x{b:02x}" for b in missing[:8]) + (" ..." if len(missing) > 8 else "")
        raise ValueError(
            f"{source}: {len(missing)} single bytes are not tokens ({shown}), so not every input can be encoded"
        )
    return RankFile(ranks)


def _first_problem(data: bytes, source: str) -> str:
    """The first line of a rank file that is not ``base64-token rank`` with a new token and rank."""
    tokens: dict[bytes, int] = {}
    ranks: dict[int, int] = {}
    for number, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            token_b64, rank_text = line.split()
            token = binascii.a2b_base64(token_b64, strict_mode=True)
            rank = int(rank_text)
            if rank < 0:
                raise ValueError
        except (ValueError, binascii.Error):
            return f"{source}, line {number}: expected 'base64-token rank', found {line[:60]!r}"
        if not token:
            return f"{source}, line {number}: empty token"
        if token in tokens:
            return f"{source}, line {number}: token {token!r} listed twice (line {tokens[token]})"
        if rank in ranks:
            return f"{source}, line {number}: rank {rank} given to two tokens (line {ranks[rank]})"
        tokens[token], ranks[rank] = number, number
    return f"{source}: not a tiktoken rank file"


def render(ranks: dict[bytes, int]) -> str:
    """The rank file text of ``ranks`` (token bytes -> rank), in rank order."""
    return "".join(
        f"{base64.b64encode(token).decode('ascii')} {rank}\n" for token, rank in sorted(ranks.items(), key=lambda t: t[1])
    )


def is_extension_of(ranks: Mapping[bytes, int], count: int, sha256: str) -> bool:
    """Whether the ``count`` lowest ranks are exactly the rank file whose SHA-256 is
    ``sha256`` (as ``render`` writes it: a published file's own bytes) and every
    other rank comes after them: the file extends that one with new tokens."""
    first = {token: rank for token, rank in ranks.items() if rank < count}
    if len(first) != count:
        return False
    return hashlib.sha256(render(first).encode("ascii")).hexdigest() == sha256


def derive_merges(ranks: dict[bytes, int]) -> list[tuple[int, int]]:
    """Merges (left ID, right ID), one per token, in rank order of the token each makes:
    the two parts tiktoken ends with on the token's own bytes using only lower ranks.

    This is the merge list a loader that builds every token from two lower-ranked
    parts makes (gigatoken's); ``exact_merges`` is the one that reproduces
    tiktoken's IDs for every rank file.

    Raises:
      ValueError: a token that tiktoken never builds from two lower-ranked parts (its
        bytes end as more than two lower-ranked parts), which such a list cannot hold.
    """
    merges = []
    for token, rank in sorted(ranks.items(), key=lambda t: t[1]):
        if len(token) == 1:
            continue
        parts, _ = own_run(token, ranks, limit=rank)
        if len(parts) != 2:
            raise ValueError(f"token of rank {rank} ({token!r}) is not built from two tokens of lower rank")
        merges.append((ranks[parts[0]], ranks[parts[1]]))
    return merges


@dataclasses.dataclass(frozen=True)
class ExactMerges:
    """A rank file as a Hugging Face BPE model that gives tiktoken's IDs.

    Attributes:
      merges: (left ID, right ID) in rank order of the token each makes, at most one
        per token: the last step of tiktoken's own run on the token's bytes.
      ignore_merges: whether the model must emit a piece that is a whole token
        directly (HF's ``ignore_merges``): needed exactly when some token is
        ``whole_only``.
      whole_only: the IDs of the tokens of two or more bytes that tiktoken makes only
        from a whole piece: their own run ends in several parts, so no merge makes them.
    """

    merges: list[tuple[int, int]]
    ignore_merges: bool
    whole_only: tuple[int, ...]


def exact_merges(ranks: Mapping[bytes, int]) -> ExactMerges:
    """The merges under which Hugging Face's pair-rank BPE gives tiktoken's IDs
    (``bpe.engines.rank_proof.rank_export_mismatch`` gives the argument and checks it).

    Each token of two or more bytes is run through tiktoken's rule on its own
    bytes, with every rank and without the whole-piece rule (``own_run``): where
    the run ends as the token, its last step is the token's merge; where it ends
    in several parts, the token has none and is made only as a whole piece.
    """
    merges, whole_only = [], []
    for token, rank in sorted(ranks.items(), key=lambda t: t[1]):
        if len(token) == 1:
            continue
        parts, last = own_run(token, ranks)
        if len(parts) == 1:
            merges.append((ranks[last[0]], ranks[last[1]]))
        else:
            whole_only.append(rank)
    return ExactMerges(merges, bool(whole_only), tuple(whole_only))


def own_run(data: bytes, ranks: Mapping[bytes, int], limit: int | None = None
            ) -> tuple[list[bytes], tuple[bytes, bytes] | None]:
    """tiktoken's merging of ``data`` from its single bytes, without the whole-piece rule:
    (the parts it ends with, the last pair it joined or None).

    Each step joins the leftmost adjacent pair whose joined bytes have the lowest
    rank; ``limit``: only ranks below it count (default: every rank).
    """
    get = ranks.get
    top = _NO_RANK if limit is None else limit

    def rank_of(joined: bytes) -> int:
        rank = get(joined)
        return rank if rank is not None and rank < top else _NO_RANK

    parts = [data[i:i + 1] for i in range(len(data))]
    # pair[i]: the rank of parts i and i + 1 joined; only the two beside a join change.
    pair = [rank_of(data[i:i + 2]) for i in range(len(data) - 1)]
    last = None
    while pair and (best := min(pair)) != _NO_RANK:
        i = pair.index(best)
        last = (parts[i], parts[i + 1])
        parts[i:i + 2] = [parts[i] + parts[i + 1]]
        del pair[i]
        if i > 0:
            pair[i - 1] = rank_of(parts[i - 1] + parts[i])
        if i < len(pair):
            pair[i] = rank_of(parts[i] + parts[i + 1])
    return parts, last
