"""Extending an existing tokenizer with new merges: the pure parts of ``train --extend``.

An extension keeps every token of its base (ordinary, added and special) with
its ID and bytes, and appends merges: new token ``i`` gets ID ``first_id + i``,
``first_id`` being the base's largest ID + 1 (after its special and reserved
tokens). Its semantics (contract): a piece is encoded by the base, then the new
merges are replayed on the base's IDs in learned order (pair-rank, as our own
merges are). Expanding every new token into the two tokens it joins,
recursively (``expand``), gives the base's IDs exactly.

Learning the new merges is training (``bpe.reference.extend_bytes`` defines
it; ``bpe.training.trainer.extend_merges`` runs the merge loop): the words are
the base's encoding of each piece of the word-count table (``BaseTable``), the
pairs are counted on them, ties go to the greatest (left_bytes, right_bytes).
Duplicate-bytes rule: a pair whose bytes equal any existing token's (a base
token's, an earlier new token's, or the text of an added or special token as
tokenizer.json names it) is never chosen. Such a pair joins two tokens that the
base left apart in some context; merging them into the existing token would
break the expansion, and a second token with the same bytes cannot exist in
tokenizer.json or a rank file.

Files (``extended_tokenizer``): the base's tokenizer.json with the new tokens
added to its vocab and the new merges after its own. Hugging Face's merge-rank
rule on that file is the extension's semantics exactly when it is the base's
own rule on the base's file: the base's merges all rank below the new ones and
no new merge recreates a pair of base tokens, so the base finishes first and
the new merges follow in order. With ``ignore_merges`` a piece that is a whole
token is that token; ``extended_tokenizer`` checks that each new token's own
bytes encode to it. A rank-file base is written by ``Tokenizer.to_json``, which
refuses a file it cannot write exactly; ``rank_file`` also writes the extension
as a rank file where tiktoken's own rule gives the same IDs, proven by
``bpe.engines.rank_proof``.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import operator
from typing import Mapping, Sequence

import numpy as np

from bpe import tokenizer_export
from bpe.engines.rank_proof import rank_mismatch
from bpe.reference import check_count, piece_bytes
from bpe.tokenizer import Tokenizer
from bpe.tokenizer_file import byte_to_char, tiktoken_file, token_bytes_of
from bpe.training.base_encoding import base_ids

from bpe.training.compiled import compiled_merges as _merges  # None: replay in Python

__all__ = ["BaseTable", "check_extension_merges", "expand", "extended_tokenizer", "rank_file", "replay",
           "spelled_bytes"]

Pair = tuple[int, int]


def spelled_bytes(base: Tokenizer) -> list[bytes]:
    """The bytes every existing ID spells, by ID up to the base's largest: an ordinary
    token's bytes; for an added or special token, the bytes tokenizer.json would name
    like its text (no new token may spell them); b"" for a gap."""
    spelled = [b""] * base.vocab_size
    for token_id, data in base.ordinary_tokens().items():
        spelled[token_id] = data
    for text, token_id in {**base.added_tokens, **base.special_tokens}.items():
        spelled[token_id] = token_bytes_of(text) or b""
    return spelled


class BaseTable:
    """A word-count table as the base tokenizer encodes it: the words the merge loop starts from.

    Args:
      base: the tokenizer being extended.
      word_counts: piece -> count (bytes, or str taken as UTF-8), counted with the
        base's pre-tokenizer; pieces with equal bytes add up.

    Attributes:
      words: each piece of two or more base tokens as a str of IDs (``chr(id)``),
        sorted by the piece's bytes; ``counts`` beside them.
      pieces: occurrences of all pieces (single-token ones included).
      tokens: the base's tokens over all pieces (each piece times its count).

    The base's IDs of every piece come as one flat array (``base_ids``), which
    becomes one str cut into the words: no Python step per ID.
    """

    def __init__(self, base: Tokenizer, word_counts: Mapping[bytes | str, int]):
        totals = _piece_totals(word_counts)
        pieces = sorted(word for word, count in totals.items() if count and word)
        counts = list(map(totals.__getitem__, pieces))
        ids, lengths = base_ids(base, pieces)
        self.pieces = sum(counts)
        self.tokens = sum(map(operator.mul, counts, lengths.tolist()))
        # One str of every ID (UTF-32 holds any ID up to sys.maxunicode, surrogates kept), cut into words.
        text = ids.astype("<u4").tobytes().decode("utf-32-le", "surrogatepass")
        ends = np.cumsum(lengths)
        kept = lengths > 1
        self.words: list[str] = [text[start:end] for start, end in zip((ends - lengths)[kept].tolist(), ends[kept].tolist())]
        self.counts: list[int] = list(itertools.compress(counts, kept.tolist()))

    def tokens_after(self, merges: Sequence[Pair], first_id: int) -> int:
        """The tokens over all pieces once the new ``merges`` are replayed on the base's encoding
        (``replay``; in C where the merge loop is built: ``_merges.replay_lengths``, its twin)."""
        if getattr(_merges, "replay_lengths", None) is not None:
            lengths = _merges.replay_lengths(self.words, [(int(left), int(right)) for left, right in merges], first_id)
        else:
            words = list(self.words)
            replay(words, merges, first_id)
            lengths = map(len, words)
        return self.tokens - sum(count * (len(old) - new) for old, new, count in zip(self.words, lengths, self.counts))


def _piece_totals(word_counts: Mapping[bytes | str, int]) -> Mapping[bytes, int]:
    """The table checked (``check_count``) and keyed by bytes, pieces with equal bytes added up.

    A table of bytes and plain ints (what counting gives) passes ``check_count``
    exactly when no count is negative, which one pass over the counts checks; any
    other goes through ``check_count`` entry by entry, for its message.
    """
    plain = set(map(type, word_counts)) <= {bytes} and set(map(type, word_counts.values())) <= {int}
    if not (plain and min(word_counts.values(), default=0) >= 0):
        for word, count in word_counts.items():
            check_count(word, count)
    if plain:
        return word_counts  # unique keys already
    totals: dict[bytes, int] = {}
    for word, count in word_counts.items():
        word = piece_bytes(word)
        totals[word] = totals.get(word, 0) + int(count)
    return totals


def replay(words: list[str], merges: Sequence[Pair], first_id: int) -> None:
    """Replays new merges, in learned order, on words given as str of IDs (in place).

    Per word it merges every occurrence of the adjacent pair learned first, left
    to right (``str.replace``), until none is a merge: the same as applying each
    merge to every word in turn, because a merge only makes a new token, which
    only later merges join.
    """
    if not merges:
        return
    rank = {chr(left) + chr(right): i for i, (left, right) in enumerate(merges)}
    made = [chr(first_id + i) for i in range(len(merges))]
    pairs = list(rank)
    get = rank.get
    for index, word in enumerate(words):
        while len(word) > 1:
            ranks = [found for j in range(len(word) - 1) if (found := get(word[j:j + 2])) is not None]
            if not ranks:
                break
            best = min(ranks)
            word = word.replace(pairs[best], made[best])
        words[index] = word


def check_extension_merges(base: Tokenizer, merges: Sequence) -> list[Pair]:
    """Checks that new merges (e.g. a checkpoint) can come from extending ``base``.

    Merge ``i`` joins two tokens with bytes (ordinary base tokens or earlier new
    ones, never an added or special token or a gap) and spells bytes no existing
    token spells (the duplicate-bytes rule).

    Returns:
      The merges as a list of tuples.

    Raises:
      ValueError: naming the first merge that breaks a rule.
    """
    token_bytes = spelled_bytes(base)
    first_id = len(token_bytes)
    ordinary = set(base.ordinary_tokens())
    existing = set(token_bytes)
    checked: list[Pair] = []
    for i, pair in enumerate(merges):
        try:
            left, right = pair
        except (TypeError, ValueError):
            left = right = None
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in (left, right)):
            raise ValueError(f"new merge {i} must be a pair of token IDs, not {pair!r}")
        for x in (left, right):
            if not (x in ordinary or first_id <= x < first_id + i):
                raise ValueError(f"new merge {i} = ({left}, {right}) uses ID {x}, which is no ordinary token of the "
                                 f"base and no earlier new token")
        data = token_bytes[left] + token_bytes[right]
        if data in existing:
            raise ValueError(f"new merge {i} = ({left}, {right}) spells {data!r}, which a token already spells")
        token_bytes.append(data)
        existing.add(data)
        checked.append((left, right))
    return checked


def expand(ids: Sequence[int], merges: Sequence[Pair], first_id: int) -> list[int]:
    """The IDs with every new token replaced by the two it joins, recursively: the base's IDs."""
    out: list[int] = []
    stack = list(reversed(ids))
    while stack:
        token_id = stack.pop()
        if token_id >= first_id:
            left, right = merges[token_id - first_id]
            stack += (right, left)
        else:
            out.append(token_id)
    return out


def extended_tokenizer(base: Tokenizer, merges: Sequence[Pair]) -> Tokenizer:
    """The base with the new merges: a Tokenizer whose file Hugging Face reads with the same IDs.

    One of ours without special tokens stays ours (its new merges continue its
    own: ID ``256 + len(merges)`` onwards). Any other base becomes its
    tokenizer.json (``Tokenizer.to_json``, exact for the base or refusing with
    the reason) with the new tokens and merges appended (see the module), and
    keeps the base's roles (BOS, EOS, pad: ``Tokenizer.roles``). One of ours with
    special tokens is such a file, and still ours (``kind == "beam-bpe"``, with its
    engines): its special tokens sit between the base's merges and the new ones,
    a layout of ours (``bpe.tokenizer.merge_ids``).

    Raises:
      ValueError: the base has no exact tokenizer.json (``Tokenizer.to_json``
        says why), or with ``ignore_merges`` a new token's own bytes would not
        encode to it.
    """
    merges = [(int(left), int(right)) for left, right in merges]
    first_id = base.vocab_size
    if base.kind == "beam-bpe" and not base.special_tokens:
        return Tokenizer([*base.merges, *merges], pattern=base.pattern)
    spec = _file_object(base)
    model = spec["model"]
    names = {token_id: name for name, token_id in model["vocab"].items()}
    strings = bool(model["merges"]) and isinstance(model["merges"][0], str)
    to_char = byte_to_char()
    token_bytes = spelled_bytes(base)
    for i, (left, right) in enumerate(merges):
        data = token_bytes[left] + token_bytes[right]
        token_bytes.append(data)
        name = "".join(to_char[b] for b in data)
        names[first_id + i] = name
        model["vocab"][name] = first_id + i
        model["merges"].append(f"{names[left]} {names[right]}" if strings else [names[left], names[right]])
    # Hugging Face numbers an added token the vocab does not hold from the vocab's size on:
    # with new tokens after them, the vocab must hold every added and special token.
    for text, token_id in {**base.added_tokens, **base.special_tokens}.items():
        model["vocab"].setdefault(text, token_id)
    extended = Tokenizer.from_json(json.dumps(spec, ensure_ascii=False))
    # Every role of the base (ours' EOS, a preset's) stays; the file cannot declare those its
    # post-processor does not, so they go beside it (``Tokenizer.roles_config``).
    extended.keep_roles(base.roles)
    if model.get("ignore_merges"):
        _check_whole_tokens(base, merges, first_id, token_bytes)
    return extended


def _file_object(base: Tokenizer) -> dict:
    """The base's tokenizer.json as its JSON object (``Tokenizer.to_json``); a rank file's built as
    an object (``rank_file_object``: derived and proven as ``to_json`` does), not written and read."""
    if base.kind == "tiktoken":
        return tokenizer_export.rank_file_object(base.ordinary_tokens(), base.pattern, base.special_tokens)
    return json.loads(base.to_json())


def _check_whole_tokens(base: Tokenizer, merges: list[Pair], first_id: int, token_bytes: list[bytes]) -> None:
    """With ``ignore_merges`` Hugging Face encodes a piece that is a whole token as that token:
    each new token's bytes must encode to it by the extension's rule too (they do, as the
    base's encoding of a substring is the one in its context: this checks it)."""
    words = ["".join(map(chr, base.piece_encoder.encode_bytes(token_bytes[first_id + i]))) for i in range(len(merges))]
    replay(words, merges, first_id)
    for i, word in enumerate(words):
        if word != chr(first_id + i):
            raise ValueError(f"new token {first_id + i} ({token_bytes[first_id + i]!r}) does not encode to itself, "
                             "which the base's ignore_merges would make it: no exact tokenizer.json")


def rank_file(base: Tokenizer, merges: Sequence[Pair]) -> tuple[str | None, str]:
    """(the extension as a tiktoken rank file, "") when tiktoken's rule on it gives the
    extension's IDs, else (None, why not). For a rank-file base only.

    Proof, as ``bpe.engines.rank_proof.rank_file_mismatch`` makes it: the merges
    derived from the extended ranks (the two parts tiktoken ends each token's bytes
    as, with the lower ranks only) must be the base's own followed by exactly the
    new ones, and ``rank_mismatch`` must find no text on which replaying them pair
    by pair differs from tiktoken's rule.
    """
    if base.kind != "tiktoken":
        return None, "the base is not a rank file"
    tokens = dict(base.ordinary_tokens())
    first_id = base.vocab_size
    for i, (left, right) in enumerate(merges):
        tokens[first_id + i] = tokens[left] + tokens[right]
    ranks = {data: token_id for token_id, data in tokens.items()}
    try:
        derived = tiktoken_file.derive_merges(ranks)
    except ValueError as e:
        return None, f"tiktoken's rule would give other IDs: {e}"
    new = [tuple(pair) for pair in merges]
    if derived[len(derived) - len(new):] != new:
        first = next(i for i, (a, b) in enumerate(zip(derived[len(derived) - len(new):], new)) if a != b)
        return None, (f"tiktoken's rule would build new token {first_id + first} from other parts than "
                      f"the merge it was learned as")
    # Renumbered into our contract (byte b is ID b, longer tokens 256, 257, ... in rank order).
    ours = {token_id: data[0] for token_id, data in tokens.items() if len(data) == 1}
    ours.update((token_id, 256 + i) for i, token_id in enumerate(sorted(t for t, d in tokens.items() if len(d) > 1)))
    mismatch = rank_mismatch(_Merges([(ours[left], ours[right]) for left, right in derived]))
    if mismatch:
        return None, f"tiktoken's rule would give other IDs: {mismatch}"
    return tiktoken_file.render(ranks), ""


@dataclasses.dataclass(frozen=True)
class _Merges:
    """A merge list in our contract: what ``rank_mismatch`` reads of a tokenizer."""

    merges: list[Pair]
