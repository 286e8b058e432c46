"""Byte-level BPE training: the fast merge loop over a word-count table.

The result is defined by ``bpe.reference.train_bytes`` (recount every pair, take
the best); this module computes exactly the same merges without recounting:

* Every word is a ``str`` whose characters are token IDs (``chr(id)``). Merging a
  pair is then ``word.replace(pair, new)``, which runs in C, scans left to right
  and does not overlap: exactly BPE's rule. A str also stores one or two bytes per
  symbol, far less than a list of ints.
* A pair is the 2-character string of its two IDs; it doubles as the dict key.
* ``pairs`` maps each pair to its total count and the words it occurs in. After
  a merge only the words that held the pair are touched, and only the pairs
  next to each merge site change.
* A heap with lazy invalidation picks the best pair: an entry whose count is out
  of date is re-pushed with the current count when it surfaces.
* A pair whose count falls below ``min_frequency`` can never be merged (a pair
  only gains occurrences while its younger token is being created), so it is
  forgotten at once: no count, no index, and its heap entry is dropped when it
  surfaces. This keeps memory to the pairs that still matter.

Tie-break (contract): highest count, then the greatest (left_bytes, right_bytes).
The heap is a min-heap, so its key is ``(-count, inverted bytes)``, where the
inverted string sorts in the opposite order of the byte pair (see
``_inverted``). Hence the result never depends on the order of the table.

Duplicate-bytes rule (project decision, same as the reference): a pair whose
concatenated bytes already exist as a token is never chosen; the next best pair
is taken instead. tokenizer.json (HF's vocab is a dict keyed by the token's
string) and tiktoken (ranks keyed by bytes) cannot hold two IDs with the same
bytes.

Resuming: training can start from a checkpoint (the merges learned so far) and
hand out checkpoints while it runs; see ``train_merges``' ``resume_from`` and
``checkpoint``. A resumed run learns exactly the merges of an uninterrupted one
(the argument is at ``_learn_merges``).
"""

from __future__ import annotations

import gc
import heapq
import sys
import time
from typing import Callable, Mapping, Sequence

from bpe.encoder import PieceEncoder

Pair = tuple[int, int]

# Token IDs live in str characters, so the largest usable ID is chr's limit.
MAX_TOKEN_ID = sys.maxunicode

# _inverted maps byte b to chr(256 - b) and ends every token with chr(257), which
# is above every mapped byte. Comparing inverted strings then reverses the order
# of the byte strings, including "a prefix sorts first": b"a" < b"ab", while
# [159, 257] > [159, 158, 257]. The terminator also makes the concatenation of
# two inverted tokens compare like the (left, right) tuple.
_INVERT = {b: chr(256 - b) for b in range(256)}
_TERMINATOR = chr(257)


def _inverted(token: bytes) -> str:
    """A string that sorts in the reverse order of ``token``'s bytes."""
    return token.decode("latin-1").translate(_INVERT) + _TERMINATOR


def _load_table(word_counts: Mapping[bytes | str, int]) -> tuple[list[str], list[int]]:
    """The table as parallel lists (words as ID strings, counts).

    A str piece is taken as its UTF-8 bytes and pieces with equal bytes add up.
    Pieces that cannot hold a pair (shorter than 2 bytes) or never occur (count
    0) are dropped: they cannot change any pair count.

    The words come sorted: words with a common prefix share their first pairs,
    so the words one merge visits then lie closer together in memory, and the
    merge loop, which mostly waits for memory, runs 3-5% faster (measured on the
    50 MB benchmark table). The result never depends on the order.
    """
    totals: dict[str, int] = {}
    for word, count in word_counts.items():
        if count < 0:
            raise ValueError(f"negative count {count} for piece {word!r}")
        if isinstance(word, str):
            word = word.encode("utf-8", "surrogatepass")
        # latin-1 turns byte b into chr(b): the ID string of the word's bytes.
        key = bytes(word).decode("latin-1")
        if len(key) >= 2 and count > 0:
            totals[key] = totals.get(key, 0) + int(count)
    words = sorted(totals)
    return words, [totals[word] for word in words]


def check_merges(resume_from: Sequence[Pair]) -> list[Pair]:
    """Checks that a list of merges (e.g. a checkpoint) can come from training.

    A list of merges from a real run uses only IDs that exist before it (merge
    ``i`` joins IDs below ``256 + i``) and never spells the same bytes twice
    (the duplicate-bytes rule). Anything else did not come from training, and
    replaying it would give a table no run can reach.

    Args:
      resume_from: (left_id, right_id) pairs, tuples or lists, in learned order.

    Returns:
      The merges as a new list of tuples.

    Raises:
      ValueError: naming the first merge that breaks a rule.
    """
    merges: list[Pair] = []
    token_bytes = [bytes([b]) for b in range(256)]
    spelled = set(token_bytes)
    for i, pair in enumerate(resume_from):
        try:
            left, right = pair
        except (TypeError, ValueError):
            left = right = None
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in (left, right)):
            raise ValueError(f"resume_from[{i}] must be a pair of token IDs, not {pair!r}")
        new_id = 256 + i
        if new_id > MAX_TOKEN_ID:
            raise ValueError(f"resume_from has {len(resume_from)} merges: token IDs are limited to {MAX_TOKEN_ID}")
        if not (0 <= left < new_id and 0 <= right < new_id):
            raise ValueError(
                f"resume_from[{i}] = ({left}, {right}) uses an ID that does not exist yet: "
                f"merge {i} can only join IDs 0..{new_id - 1}"
            )
        new_bytes = token_bytes[left] + token_bytes[right]
        if new_bytes in spelled:
            raise ValueError(
                f"resume_from[{i}] = ({left}, {right}) spells {new_bytes!r}, which an earlier token "
                "already spells: training never learns that"
            )
        token_bytes.append(new_bytes)
        spelled.add(new_bytes)
        merges.append((left, right))
    return merges


def _show_progress(progress: bool | None) -> bool:
    if progress is not None:
        return progress
    return sys.stderr is not None and sys.stderr.isatty()


def train_merges(
    word_counts: Mapping[bytes | str, int],
    num_merges: int,
    min_frequency: int = 2,
    progress: bool | None = None,
    resume_from: Sequence[Pair] = (),
    checkpoint: Callable[[list[Pair]], None] | None = None,
    checkpoint_every: float = 30.0,
) -> list[Pair]:
    """Learns byte-level BPE merges from a word-count table.

    Args:
      word_counts: piece -> count, as produced by pre-tokenizing a corpus. A str
        piece is taken as its UTF-8 bytes.
      num_merges: how many merges to learn at most.
      min_frequency: stop as soon as the best pair occurs fewer times than this.
      progress: show a progress bar; None shows it when stderr is a terminal.
      resume_from: merges already learned from the same table with the same
        ``min_frequency`` (a checkpoint). Training continues after them; the
        result is the same as without interruption. Longer than ``num_merges``:
        its first ``num_merges`` are the result.
      checkpoint: called with the merges so far (a new list, a prefix of the
        result) about every ``checkpoint_every`` seconds, once more if a
        KeyboardInterrupt stops training (which is then re-raised), and with
        the result at the end.
      checkpoint_every: seconds between checkpoints while merging.

    Returns:
      The merges in learned order as (left_id, right_id); merge ``i`` creates ID
      ``256 + i``. Identical to ``bpe.reference.train_bytes``.

    Raises:
      ValueError: a negative count, too many merges, or a ``resume_from`` that
        training cannot have produced (an ID used before it exists, bytes spelled
        twice).
    """
    if 256 + num_merges - 1 > MAX_TOKEN_ID:
        raise ValueError(f"num_merges={num_merges} is too large: token IDs are limited to {MAX_TOKEN_ID}")
    merges = check_merges(resume_from)
    words, counts = _load_table(word_counts)
    if len(merges) >= num_merges:
        # Training only ever appends: the first num_merges of a longer run are
        # this run's result, and there is nothing left to learn.
        merges = merges[:num_merges]
        if checkpoint is not None:
            checkpoint(list(merges))
        return merges
    # The loop allocates millions of small lists and tuples but never a
    # reference cycle, and Python's cyclic GC would walk all of them again and
    # again (about 20% of the time on a large table): pause it while training.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        _learn_merges(words, counts, merges, num_merges, min_frequency, progress, checkpoint, checkpoint_every)
        if checkpoint is not None:
            checkpoint(list(merges))
    except KeyboardInterrupt:
        # Every merge in the list is final the moment it is appended, so
        # whatever the interrupted loop was doing, the list is a valid prefix.
        if checkpoint is not None:
            checkpoint(list(merges))
        raise
    finally:
        if gc_was_enabled:
            gc.enable()
    return merges


# How many merges pass between two looks at the clock for checkpoint_every:
# rare enough to cost nothing in the hot loop, often enough to be on time
# (even the slowest first merges of a large table take milliseconds each).
_CLOCK_EVERY = 64


def _replay(words: list[str], merges: list[Pair]) -> None:
    """Applies ``merges`` in learned order to every word (in place).

    Training applies merge ``i`` to every word before it learns merge ``i + 1``.
    Per word, that is the encoder's pair-rank rule (repeatedly merge the
    adjacent pair learned first): merge ``i``'s pair cannot reappear after it
    was applied, because its tokens are older than ``256 + i`` and later merges
    only create newer ones. Encoding word by word costs time per word rather
    than per word and merge, so resuming after 50,000 merges stays cheap.
    """
    encoder = PieceEncoder(merges, cache_size=0)
    for i, word in enumerate(words):
        # A loaded word is chr(byte) per byte: latin-1 gives its bytes back.
        words[i] = "".join(map(chr, encoder.encode_bytes(word.encode("latin-1"))))


def _learn_merges(
    words: list[str],
    counts: list[int],
    merges: list[Pair],
    num_merges: int,
    min_frequency: int,
    progress: bool | None,
    checkpoint: Callable[[list[Pair]], None] | None,
    checkpoint_every: float,
) -> None:
    """The merge loop of ``train_merges`` over the loaded table (modified in place).

    Appends to ``merges``, which may start with the merges of a checkpoint.
    Resuming gives the same merges as an uninterrupted run because the loop's
    next choice depends only on (a) the words with the merges so far applied
    and (b) the set of existing tokens' bytes: it takes the pair with the
    highest count in those words, ties by bytes, among pairs that reach
    ``min_frequency`` and do not spell existing bytes. Both are rebuilt here
    from the checkpoint: (a) by replaying the merges on the loaded words, (b)
    from the merges themselves. The pair counts are then recounted from the
    words, so they are the true counts, which an uninterrupted run also keeps.
    The pairs it has forgotten by then (below ``min_frequency``, or refused by
    the duplicate-bytes rule) come back in the recount but change nothing: a
    forgotten count was already below ``min_frequency`` and only falls further
    (both its tokens exist), so it is dropped again below; a duplicate spelling
    stays a duplicate and is dropped again when it surfaces.
    """
    if merges:
        _replay(words, merges)

    # pairs: pair -> [count, index of a word holding it, index, ...]. One list per
    # pair keeps the count and the index together: one dict lookup updates both.
    # Each word is listed once per pair: an index is only ever appended while
    # that word is being processed, so a repeat is always the last element.
    pairs: dict[str, list[int]] = {}
    get = pairs.get
    for i, word in enumerate(words):
        count = counts[i]
        for j in range(len(word) - 1):
            pair = word[j : j + 2]
            entry = get(pair)
            if entry is None:
                pairs[pair] = [count, i]
            else:
                entry[0] += count
                if entry[-1] != i:
                    entry.append(i)

    # A pair below min_frequency can never be merged: a pair only gains
    # occurrences while its younger token is being created. Such pairs are
    # forgotten (their heap entries are dropped when they surface), which saves
    # much of the memory. ``pairs`` holds exactly the live pairs.
    min_frequency = max(1, min_frequency)
    for pair in [pair for pair, entry in pairs.items() if entry[0] < min_frequency]:
        del pairs[pair]

    token_bytes = [bytes([b]) for b in range(256)]  # ID -> the bytes it spells
    for left, right in merges:
        token_bytes.append(token_bytes[left] + token_bytes[right])
    inverted = [_inverted(t) for t in token_bytes]  # ID -> its reversed-order key
    existing = set(token_bytes)
    heap = [(-entry[0], inverted[ord(pair[0])] + inverted[ord(pair[1])], pair) for pair, entry in pairs.items()]
    heapq.heapify(heap)
    heappush, heappop = heapq.heappush, heapq.heappop

    bar = None
    if _show_progress(progress):
        from tqdm import tqdm

        bar = tqdm(total=num_merges, initial=len(merges), desc="merges", unit="merge")

    next_checkpoint = time.monotonic() + checkpoint_every
    while len(merges) < num_merges and heap:
        neg_count, key, pair = heappop(heap)
        entry = get(pair)
        if entry is None:
            continue  # forgotten
        if entry[0] != -neg_count:
            # Out of date: the count went down since the push; back it goes
            # with its current count.
            heappush(heap, (-entry[0], key, pair))
            continue
        left, right = ord(pair[0]), ord(pair[1])
        new_bytes = token_bytes[left] + token_bytes[right]
        if new_bytes in existing:
            # The duplicate-bytes rule: never chosen, so forget the pair.
            del pairs[pair]
            continue

        new_id = 256 + len(merges)
        merges.append((left, right))
        token_bytes.append(new_bytes)
        inverted.append(_inverted(new_bytes))
        existing.add(new_bytes)
        for new_pair in _apply_merge(pair, chr(new_id), words, counts, pairs, min_frequency):
            count = pairs[new_pair][0]
            if count >= min_frequency:
                a, b = new_pair
                heappush(heap, (-count, inverted[ord(a)] + inverted[ord(b)], new_pair))
            else:
                del pairs[new_pair]
        if len(heap) > 2 * len(pairs) + 1000:
            # Mostly entries of forgotten pairs: rebuild from the live ones.
            heap = [(-pairs[pair][0], key, pair) for _, key, pair in heap if pair in pairs]
            heapq.heapify(heap)
        if bar is not None:
            bar.update(1)
        if checkpoint is not None and not len(merges) % _CLOCK_EVERY and time.monotonic() >= next_checkpoint:
            checkpoint(list(merges))
            next_checkpoint = time.monotonic() + checkpoint_every
    if bar is not None:
        bar.close()


def _apply_merge(
    pair: str,
    new: str,
    words: list[str],
    counts: list[int],
    pairs: dict[str, list[int]],
    min_frequency: int,
) -> list[str]:
    """Merges ``pair`` into the token ``new`` in every word that holds it.

    Updates ``pairs`` (counts and word indices) around each merge site and
    returns the pairs that did not exist before (they all contain ``new``). A
    pair whose count falls below ``min_frequency`` is forgotten.

    After ``replace``, each ``new`` at position k in the new word stands where
    ``a b`` stood. Its left neighbour L lost the pair (L, a) and gained (L, new);
    if L is itself a ``new`` the lost pair was (b, a). Its right neighbour R lost
    (b, R) and gained (new, R); when R is a ``new``, that boundary is the next
    site's left side, so it is counted there once.
    """
    a, b = pair[0], pair[1]
    created: list[str] = []
    get = pairs.get
    indices = iter(pairs.pop(pair))
    next(indices)  # the count
    for i in indices:
        word = words[i]
        merged = word.replace(pair, new)
        length = len(merged)
        sites = len(word) - length  # each site shortened the word by one
        if not sites:
            continue  # the pair left this word through an earlier merge
        words[i] = merged
        count = counts[i]
        last = length - 1
        k = -1
        # The left and right neighbour updates below are the same steps mirrored;
        # they stay inlined because this loop runs once per merge site (millions
        # of times), where a function call per site is a large share of the work.
        while sites:
            k = merged.find(new, k + 1)
            sites -= 1
            if k:
                neighbour = merged[k - 1]
                lost = (b if neighbour == new else neighbour) + a
                entry = get(lost)
                if entry is not None:  # else already forgotten
                    entry[0] -= count
                    if entry[0] < min_frequency:
                        del pairs[lost]
                gained = neighbour + new
                entry = get(gained)
                if entry is None:
                    pairs[gained] = [count, i]
                    created.append(gained)
                else:
                    entry[0] += count
                    if entry[-1] != i:
                        entry.append(i)
            if k < last:
                neighbour = merged[k + 1]
                if neighbour != new:
                    lost = b + neighbour
                    entry = get(lost)
                    if entry is not None:
                        entry[0] -= count
                        if entry[0] < min_frequency:
                            del pairs[lost]
                    gained = new + neighbour
                    entry = get(gained)
                    if entry is None:
                        pairs[gained] = [count, i]
                        created.append(gained)
                    else:
                        entry[0] += count
                        if entry[-1] != i:
                            entry.append(i)
    return created


def train(
    word_counts: Mapping[bytes | str, int],
    vocab_size: int,
    pattern: str = "gpt2",
    special_tokens: Sequence[str] = (),
    min_frequency: int = 2,
    progress: bool | None = None,
    resume_from: Sequence[Pair] = (),
    checkpoint: Callable[[list[Pair]], None] | None = None,
    checkpoint_every: float = 30.0,
):
    """Trains a byte-level BPE tokenizer from a word-count table.

    Args:
      word_counts: pre-token piece -> count (bytes, or str taken as UTF-8), as
        counted with the same ``pattern``.
      vocab_size: 256 byte tokens + merges + special tokens. Training may stop
        earlier (fewer merges) when no pair reaches ``min_frequency``.
      pattern: the pre-tokenizer: a preset name (gpt2, cl100k, o200k) or a regex.
      special_tokens: strings that get their own IDs after the merges.
      min_frequency: a pair must occur at least this often to be merged.
      progress: show a progress bar; None shows it when stderr is a terminal.
      resume_from: merges of an interrupted run on the same table with the same
        ``min_frequency``; training continues after them (see ``train_merges``).
      checkpoint: called with the merges so far while training, when a
        KeyboardInterrupt stops it, and at the end (see ``train_merges``).
      checkpoint_every: seconds between checkpoints.

    Returns:
      A ``bpe.tokenizer.Tokenizer``.
    """
    from bpe.pretokenize import compile_pattern
    from bpe.tokenizer import Tokenizer  # imported here: the tokenizer imports nothing of ours

    special_tokens = tuple(special_tokens)
    for token in special_tokens:
        if not isinstance(token, str) or not token:
            raise ValueError(f"special tokens must be non-empty strings, got {token!r}")
    duplicates = sorted({t for t in special_tokens if special_tokens.count(t) > 1})
    if duplicates:
        raise ValueError(f"duplicate special tokens: {', '.join(map(repr, duplicates))}")
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int):
        raise ValueError(f"vocab_size must be an integer, got {vocab_size!r}")
    minimum = 256 + len(special_tokens)
    if vocab_size < minimum:
        raise ValueError(
            f"vocab_size={vocab_size} is too small: it must be at least {minimum} "
            f"(256 byte tokens + {len(special_tokens)} special tokens)"
        )
    compile_pattern(pattern)
    for word, count in word_counts.items():
        if count < 0:
            raise ValueError(f"negative count {count} for piece {word!r}")

    merges = train_merges(
        word_counts,
        vocab_size - minimum,
        min_frequency=min_frequency,
        progress=progress,
        resume_from=resume_from,
        checkpoint=checkpoint,
        checkpoint_every=checkpoint_every,
    )
    return Tokenizer(merges, pattern=pattern, special_tokens=special_tokens)
