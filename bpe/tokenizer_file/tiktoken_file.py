"""tiktoken rank files (``*.tiktoken``): one ``base64(token bytes) rank`` per line.

A rank file holds only the mergeable tokens; the pattern and the special tokens
come from the caller or from a preset (``bpe.presets``). tiktoken's semantics
are the file's: a token's rank is its ID, and encoding merges the adjacent pair
whose concatenated bytes have the lowest rank (``bpe.encoder.RankEncoder``).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import re

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


def derive_merges(ranks: dict[bytes, int]) -> list[tuple[int, int]]:
    """Merges (left ID, right ID), in rank order of the token each makes, under which
    pair-rank semantics (Hugging Face's) give tiktoken's IDs.

    A token's merge is the last step tiktoken takes on the token's own bytes when
    only lower ranks exist: the two parts it ends with.

    Raises:
      ValueError: a token that tiktoken never builds from two parts (its bytes
        end as more than two lower-ranked parts), which a merge list cannot hold.
    """
    merges = []
    for token, rank in sorted(ranks.items(), key=lambda t: t[1]):
        if len(token) == 1:
            continue
        parts = _merge_below(token, ranks, rank)
        if len(parts) != 2:
            raise ValueError(f"token of rank {rank} ({token!r}) is not built from two tokens of lower rank")
        merges.append((ranks[parts[0]], ranks[parts[1]]))
    return merges


def _merge_below(data: bytes, ranks: dict[bytes, int], limit: int) -> list[bytes]:
    """tiktoken's merging of ``data`` using only ranks below ``limit``."""
    parts = [data[i:i + 1] for i in range(len(data))]
    while len(parts) > 1:
        best, at = limit, -1
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1], limit)
            if rank < best:
                best, at = rank, i
        if at < 0:
            break
        parts[at:at + 2] = [parts[at] + parts[at + 1]]
    return parts
