"""Which tokens a tokenizer's merges build from which: ``MergeGraph`` (pure, no Beam).

A byte-level BPE vocabulary is a graph: the 256 single-byte tokens are its
roots, and every merge builds one token from two others. Pruning
(``bpe.pruning``) removes tokens no kept token is built from; the report's
vocabulary health (``transforms.report``) lists the tokens no merge path
reaches. Both read the graph from here.

- Ours and Hugging Face's (pair-rank semantics): merge i builds its token from
  the pair it names, at rank i.
- A tiktoken rank file (byte-rank semantics) names no pairs: a token of rank r
  can be built from every split of its bytes into two tokens of lower rank.

Special and added tokens are spelled by their text: they are neither built nor
build anything.
"""

from __future__ import annotations

from typing import Iterable

__all__ = ["MergeGraph"]


class MergeGraph:
    """The tokens of a tokenizer and the merges that build them.

    Args:
      token_bytes: ID -> bytes of the ordinary tokens (``Tokenizer.ordinary_tokens()``).
      merges: (left ID, right ID, built ID) in rank order; for a rank file every
        split of a token into two lower-ranked tokens (``rank_file_merges``).
      spelled: the IDs of special and added tokens (spelled by their text).

    Attributes:
      byte_ids: the IDs of the 256 single-byte tokens.
      built_from: built ID -> the (left, right) pairs of the merges that build it.
    """

    def __init__(self, token_bytes: dict[int, bytes], merges: Iterable[tuple[int, int, int]],
                 spelled: Iterable[int] = ()):
        self.token_bytes = token_bytes
        self.merges = list(merges)
        self.spelled = frozenset(spelled)
        self.byte_ids = frozenset(i for i, data in token_bytes.items() if len(data) == 1 and i not in self.spelled)
        self.built_from: dict[int, list[tuple[int, int]]] = {}
        for left, right, built in self.merges:
            self.built_from.setdefault(built, []).append((left, right))

    @classmethod
    def of(cls, tokenizer) -> "MergeGraph":
        """The graph of a ``bpe.Tokenizer`` of any kind."""
        token_bytes = dict(tokenizer.ordinary_tokens())
        spelled = {*tokenizer.special_tokens.values(), *tokenizer.added_tokens.values()}
        if tokenizer.kind == "tiktoken":
            merges = rank_file_merges(token_bytes)
        else:
            encoder = tokenizer.piece_encoder
            merges = [(left, right, built) for (left, right), built in zip(encoder.merges, encoder.merged)]
        return cls(token_bytes, merges, spelled)

    def reachable(self) -> set[int]:
        """The ordinary tokens some merge path reaches from the single bytes.

        A token is reached when a merge builds it from two reached tokens.
        Merges are followed in rank order, pass after pass until one reaches
        nothing new: one pass where each merge's parts come before it (ours, a
        rank file); in a Hugging Face file a merge may name a token a later
        merge builds, which pair-rank semantics still apply once both exist.
        """
        reached = set(self.byte_ids)
        grown = True
        while grown:
            before = len(reached)
            for left, right, built in self.merges:
                if left in reached and right in reached:
                    reached.add(built)
            grown = len(reached) > before
        return reached

    def unreachable(self) -> list[int]:
        """The ordinary tokens (neither special nor added) no merge path reaches, ascending.

        BPE's merges never produce them from text. (A whole pre-tokenizer piece
        that spells one still gives it where the tokenizer takes whole pieces as
        tokens: tiktoken's rule, Hugging Face's ``ignore_merges``.)
        """
        reached = self.reachable()
        return sorted(i for i in self.token_bytes if i not in reached and i not in self.spelled)


def rank_file_merges(token_bytes: dict[int, bytes]) -> list[tuple[int, int, int]]:
    """Every (left, right, built) where ``built``'s bytes split into two tokens of lower rank,
    by the built token's rank (a rank file's IDs are its ranks)."""
    rank = {data: token_id for token_id, data in token_bytes.items()}
    merges = []
    for token_id in sorted(token_bytes):
        data = token_bytes[token_id]
        for cut in range(1, len(data)):
            left, right = rank.get(data[:cut]), rank.get(data[cut:])
            if left is not None and right is not None and left < token_id and right < token_id:
                merges.append((left, right, token_id))
    return merges
