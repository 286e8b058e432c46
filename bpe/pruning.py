"""Pruning a byte-level BPE tokenizer to fewer tokens: ``prune`` (pure, no Beam).

    pruned = prune(tokenizer, counts, vocab_size)   # counts[i]: how often ID i was produced
    pruned.tokenizer, pruned.id_map, pruned.removed

The rule. Tokens are removed one at a time, least used first, until
``vocab_size`` tokens remain (counted as training counts them: every token,
special and added tokens included). Only a *leaf* may go: a token that is
neither a single byte, nor special, nor added, and that no kept token is built
from (``bpe.merge_graph``). Removing a leaf can make its parts leaves, which
then compete by their own counts. Ties: among equal counts the token with the
highest ID goes first (for ours, the merge learned last). The counts are the
base tokenizer's, taken once; a removed token's uses are not moved to its parts.

What encoding becomes. A removed token takes its merges with it; every other
merge keeps its rank (ours: renumbered, in the same order; Hugging Face: the
same lines in ``merges``). So the pruned tokenizer encodes any text exactly as
the base does with the removed tokens' merges skipped: where the base made a
removed token, the pruned one keeps its two parts, and later merges then apply
to them as they would to any two tokens side by side (which may join a part to
a neighbour instead). With ``ignore_merges`` a piece spelling a removed token
is merged like any other piece.

Why it stays lossless and a valid BPE. Every single byte stays, so any bytes
can still be spelled; every kept merge names two kept tokens (the leaf rule),
so the merge list is well formed; every merge still joins two tokens into the
token that spells their concatenation, so decoding the IDs gives the bytes
encoded: ``decode_bytes(encode(x)) == x``.

IDs. The kept tokens are renumbered compactly in the base's order: old ID i
becomes the number of kept IDs below it; ``id_map[i]`` is that, or None for a
removed token (and for an ID the base does not use). Ours stay ours (bytes
0..255, merges from 256, special tokens where they were among them); a Hugging
Face file keeps everything but the IDs, the removed vocab entries and their
merges.

A tiktoken rank file is refused: its tokens are built by byte ranks, not named
merges, so removing one can change how others are reached; pruning its
``tokenizer.json`` form (``Tokenizer.save``) prunes named merges instead.
"""

from __future__ import annotations

import dataclasses
import heapq
import json
from typing import Mapping, Sequence

from bpe.merge_graph import MergeGraph

__all__ = ["PruneError", "Pruned", "check_prunable", "prune", "protected_count", "removal_order", "token_count"]


class PruneError(ValueError):
    """A pruning that cannot be done: one line naming why."""


@dataclasses.dataclass(frozen=True)
class Pruned:
    """The result of ``prune``.

    Attributes:
      tokenizer: the pruned ``bpe.Tokenizer``.
      id_map: entry i is the new ID of old ID i, or None if it was removed (or unused).
      removed: the removed old IDs, in the order they were removed.
    """

    tokenizer: object
    id_map: list[int | None]
    removed: list[int]


def token_count(tokenizer) -> int:
    """How many tokens the tokenizer has: ordinary, special and added (IDs may have gaps)."""
    return len({*tokenizer.ordinary_ids(), *tokenizer.special_tokens.values(), *tokenizer.added_tokens.values()})


def protected_count(tokenizer) -> int:
    """How many tokens pruning never removes: the single bytes, special and added tokens."""
    return len(MergeGraph.of(tokenizer).byte_ids | {*tokenizer.special_tokens.values(), *tokenizer.added_tokens.values()})


def check_prunable(tokenizer, vocab_size: int) -> None:
    """Raises PruneError unless ``tokenizer`` can be pruned to ``vocab_size`` tokens."""
    if tokenizer.kind == "tiktoken":
        raise PruneError("a tiktoken rank file cannot be pruned: its tokens are built by byte ranks, not named "
                         "merges; save it as a tokenizer.json (Tokenizer.save) and prune that")
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int):
        raise PruneError(f"vocab_size must be an integer, not {vocab_size!r}")
    size, floor = token_count(tokenizer), protected_count(tokenizer)
    if vocab_size >= size:
        raise PruneError(f"vocab size {vocab_size:,} is not below the tokenizer's {size:,} tokens: nothing to prune")
    if vocab_size < floor:
        raise PruneError(f"vocab size {vocab_size:,} is below the {floor:,} tokens pruning keeps (the 256 single "
                         "bytes, special and added tokens)")


def removal_order(graph: MergeGraph, counts: Sequence[int] | Mapping[int, int], removals: int) -> list[int]:
    """The ``removals`` tokens to remove, in order: each time the least-used leaf (see the module).

    Raises:
      PruneError: a negative count, or fewer tokens can be removed than asked (cannot happen while
        ``removals`` leaves the protected tokens: the graph has no cycles, as a
        token is longer than each of its parts).
    """
    values = counts.values() if isinstance(counts, Mapping) else counts
    if len(values) and min(values) < 0:
        raise PruneError(f"a token has a negative count, {min(values)}: counts are how often each ID was produced")

    def count(token_id: int) -> int:
        if isinstance(counts, Mapping):
            return int(counts.get(token_id, 0))
        return int(counts[token_id]) if token_id < len(counts) else 0

    users: dict[int, int] = {token_id: 0 for token_id in graph.token_bytes}
    for left, right, _ in graph.merges:
        users[left] += 1
        users[right] += 1
    removable = set(graph.token_bytes) - graph.byte_ids - graph.spelled
    leaves = [(count(t), -t) for t in removable if users[t] == 0]
    heapq.heapify(leaves)
    removed: list[int] = []
    while len(removed) < removals:
        if not leaves:
            raise PruneError(f"only {len(removed):,} tokens can be removed, not {removals:,}")
        _, negative = heapq.heappop(leaves)
        token_id = -negative
        removed.append(token_id)
        for left, right in graph.built_from.get(token_id, ()):
            for part in (left, right):
                users[part] -= 1
                if users[part] == 0 and part in removable:
                    heapq.heappush(leaves, (count(part), -part))
    return removed


def prune(tokenizer, counts: Sequence[int] | Mapping[int, int], vocab_size: int) -> Pruned:
    """Removes the least-used leaf tokens of ``tokenizer`` until ``vocab_size`` tokens remain.

    Args:
      tokenizer: a ``bpe.Tokenizer``, ours or a Hugging Face tokenizer.json's.
      counts: how often each ID was produced on a corpus: a sequence indexed
        by ID or a mapping ID -> count; a missing ID counts 0.
      vocab_size: how many tokens remain, special and added tokens included.

    Raises:
      PruneError: a rank file, or ``vocab_size`` not below the tokenizer's size
        or below the tokens pruning keeps.
    """
    check_prunable(tokenizer, vocab_size)
    graph = MergeGraph.of(tokenizer)
    removed = removal_order(graph, counts, token_count(tokenizer) - vocab_size)
    gone = set(removed)
    used = {*tokenizer.ordinary_ids(), *tokenizer.special_tokens.values(), *tokenizer.added_tokens.values()}
    id_map: list[int | None] = [None] * tokenizer.vocab_size
    for new_id, old_id in enumerate(sorted(used - gone)):
        id_map[old_id] = new_id
    if tokenizer.kind == "beam-bpe":
        pruned = _prune_ours(tokenizer, graph, id_map)
    else:
        pruned = _prune_file(tokenizer, graph, id_map)
    _check(tokenizer, pruned, id_map, vocab_size)
    return Pruned(pruned, id_map, removed)


def _kept_merges(graph: MergeGraph, id_map: list[int | None]) -> list[bool]:
    """Per merge, in rank order, whether it stays: its token does; then so do its parts (the leaf rule)."""
    kept = []
    for left, right, built in graph.merges:
        keep = id_map[built] is not None
        if keep and (id_map[left] is None or id_map[right] is None):
            raise AssertionError(f"kept token {built} is built from a removed one")
        kept.append(keep)
    return kept


def _prune_ours(tokenizer, graph: MergeGraph, id_map: list[int | None]):
    """Ours without the removed merges: the kept ones renumbered, in their order."""
    merges = [(id_map[left], id_map[right])
              for (left, right, _), keep in zip(graph.merges, _kept_merges(graph, id_map)) if keep]
    specials = {text: id_map[token_id] for text, token_id in tokenizer.special_tokens.items()}
    pruned = type(tokenizer)(merges, pattern=tokenizer.pattern, special_tokens=specials)
    pruned.keep_roles(tokenizer.roles)  # special tokens are never removed: every role stays
    return pruned


def _prune_file(tokenizer, graph: MergeGraph, id_map: list[int | None]):
    """A Hugging Face tokenizer.json without the removed vocab entries and their merges, renumbered."""
    spec = json.loads(tokenizer.to_json())
    model = spec["model"]
    model["vocab"] = {name: id_map[i] for name, i in model["vocab"].items() if id_map[i] is not None}
    model["merges"] = [line for line, keep in zip(model["merges"], _kept_merges(graph, id_map)) if keep]
    for token in spec.get("added_tokens") or ():
        token["id"] = id_map[token["id"]]
    if spec.get("post_processor") is not None:
        _renumber_processor(spec["post_processor"], id_map)
    text = json.dumps(spec, ensure_ascii=False, indent=2)
    pruned = type(tokenizer).from_json(text.encode("utf-8"), source="the pruned tokenizer")
    pruned.keep_roles(tokenizer.roles)  # special tokens are never removed: every role stays
    return pruned


def _renumber_processor(processor: dict, id_map: list[int | None]) -> None:
    """Renumbers the special tokens a post-processor adds (the kinds ``bpe.tokenizer_file`` reads)."""
    for inner in processor.get("processors") or ():
        _renumber_processor(inner, id_map)
    for entry in (processor.get("special_tokens") or {}).values():
        entry["ids"] = [id_map[i] for i in entry["ids"]]
    for name in ("cls", "sep"):
        if name in processor:
            processor[name] = [processor[name][0], id_map[processor[name][1]]]


def _check(base, pruned, id_map: list[int | None], vocab_size: int) -> None:
    """Every kept token spells the same bytes (special and added tokens the same text) under its new ID."""
    if token_count(pruned) != vocab_size:
        raise AssertionError(f"pruned to {token_count(pruned)} tokens, not {vocab_size}")
    for old_id, new_id in enumerate(id_map):
        if new_id is not None and pruned.token_bytes(new_id) != base.token_bytes(old_id):
            raise AssertionError(f"token {old_id} -> {new_id} changed its bytes")
    renumbered = {text: id_map[i] for text, i in base.special_tokens.items()}
    if renumbered != pruned.special_tokens or {t: id_map[i] for t, i in base.added_tokens.items()} != pruned.added_tokens:
        raise AssertionError("special or added tokens changed")
