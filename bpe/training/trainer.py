"""Byte-level BPE training: the merge loop over a word-count table, driven from Python.

The result is defined by ``bpe.reference.train_bytes`` (recount every pair, take
the best). The loop itself comes in two twins that learn exactly those merges
without recounting: a C extension (``bpe.training._merges``, built from
``bpe/training/_merges.c`` when a compiler is at hand) and pure Python
(``bpe.training.merge_loop``), which documents the algorithm and runs whenever the C loop
is missing, cannot hold the table's counts, or is switched off with the
environment variable ``BEAM_BPE_PURE_PYTHON=1``. Which one runs never changes
the result.

This module loads the table, replays a checkpoint, and drives the loop a few
merges at a time, so that progress, checkpoints and Ctrl-C are handled here,
between merges, whichever loop runs.

Tie-break (contract): highest count, then the greatest (left_bytes, right_bytes),
so the result never depends on the order of the table. ``tie_break="hf"``
orders ties as Hugging Face tokenizers' trainer does (see ``bpe/reference.py``),
for users who check against it.

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
import sys
import time
from typing import Callable, Mapping, Sequence

from bpe.decoder import vocabulary_bytes
from bpe.encoder import PieceEncoder
from bpe.training.merge_loop import MergeLoop as PythonMergeLoop
from bpe.training.parity_loop import ParityMergeLoop
from bpe.training.sources import is_by_source, load_sources
from bpe.pretokenize import compile_pattern, resolve_pattern
from bpe.reference import TIE_BREAKS, check_count, hf_byte_ranks, piece_bytes
from bpe.tokenizer import Tokenizer, check_special_tokens
from bpe.tokenizer_file.render import special_token_clash
from bpe.training import extension
from bpe.training.compiled import compiled_merges as _merges  # None: the pure-Python twins run

Pair = tuple[int, int]

# Token IDs live in str characters, so the largest usable ID is chr's limit.
MAX_TOKEN_ID = sys.maxunicode


def _load_table(word_counts: Mapping[bytes | str, int]) -> tuple[list[bytes], list[int]]:
    """The table as parallel lists (words as bytes, counts).

    A str piece is taken as its UTF-8 bytes and pieces with equal bytes add up.
    Pieces that cannot hold a pair (shorter than 2 bytes) or never occur (count
    0) are dropped: they cannot change any pair count. A table keyed by bytes
    alone has unique keys already, so its keys are used as they are, not copied.

    The words come sorted: words with a common prefix share their first pairs,
    so the words one merge visits then lie closer together in memory, and the
    merge loop, which mostly waits for memory, runs faster. The result never
    depends on the order.
    """
    for word, count in word_counts.items():
        check_count(word, count)
    if all(type(word) is bytes for word in word_counts):
        words = sorted(word for word, count in word_counts.items() if len(word) >= 2 and count > 0)
        return words, [int(word_counts[word]) for word in words]
    totals: dict[bytes, int] = {}
    for word, count in word_counts.items():
        word = piece_bytes(word)
        if len(word) >= 2 and count > 0:
            totals[word] = totals.get(word, 0) + int(count)
    words = sorted(totals)
    return words, [totals[word] for word in words]


def _load_any_table(word_counts: Mapping, min_frequency: int, weights: Mapping | None, parity: bool):
    """(words, counts, min_frequency, sources) of a plain table or a table by source.

    A table by source is weighted (``bpe.training.sources``): its counts and
    ``min_frequency`` carry the weights' scale. ``sources`` is None, or with
    ``parity`` (each word's source index, each source's bytes).
    """
    by_source = is_by_source(word_counts) or (not word_counts and (weights is not None or parity))
    if not by_source:
        if weights is not None or parity:
            raise ValueError("weights and parity need a table by source: {source name: {piece: count}}")
        return (*_load_table(word_counts), min_frequency, None)
    table = load_sources(word_counts, weights)
    if parity:
        return table.words, table.counts, min_frequency * table.scale, (table.sources, table.source_bytes)
    return (*table.summed(), min_frequency * table.scale, None)


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
    token_bytes = vocabulary_bytes()
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
    tie_break: str = "bytes",
    weights: Mapping[str, object] | None = None,
    parity: bool = False,
    global_merges: int = 0,
) -> list[Pair]:
    """Learns byte-level BPE merges from a word-count table.

    Args:
      word_counts: piece -> count, as produced by pre-tokenizing a corpus. A str
        piece is taken as its UTF-8 bytes. Or a table by source: source name ->
        {piece: count} (``bpe.training.sources``), which ``weights`` and
        ``parity`` need.
      num_merges: how many merges to learn at most.
      min_frequency: stop as soon as the best pair occurs fewer times than this.
      progress: show a progress bar; None shows it when stderr is a terminal.
      resume_from: merges already learned from the same table with the same
        ``min_frequency`` and ``tie_break`` (a checkpoint). Training continues
        after them; the result is the same as without interruption. Longer
        than ``num_merges``: its first ``num_merges`` are the result.
      checkpoint: called with the merges so far (a new list, a prefix of the
        result) about every ``checkpoint_every`` seconds, once more if a
        KeyboardInterrupt stops training (which is then re-raised), and with
        the result at the end.
      checkpoint_every: seconds between checkpoints while merging.
      tie_break: "bytes" (ties to the greatest byte pair, the contract) or
        "hf" (HF tokenizers' order).
      weights: source name -> weight (a decimal with up to three places; 1 where
        not given). A weight multiplies its source's counts exactly, and
        ``min_frequency`` applies to the weighted counts (see
        ``bpe.training.sources``).
      parity: parity-aware training: the worst-compressed source picks each
        merge (``bpe.reference.train_parity``).
      global_merges: with ``parity``, how many merges come first by plain
        training's rule on the weighted sum of the sources (the hybrid variant
        of parity-aware training): more costs less overall compression, fewer
        gives the sources closer compression.

    Returns:
      The merges in learned order as (left_id, right_id); merge ``i`` creates ID
      ``256 + i``. Identical to ``bpe.reference.train_bytes`` (to
      ``bpe.reference.train_parity`` with ``parity``).

    Raises:
      ValueError: a negative count, too many merges, an unknown tie-break, or a
        ``resume_from`` that training cannot have produced (an ID used before
        it exists, bytes spelled twice).
    """
    _check_merge_arguments(num_merges, tie_break, parity, global_merges)
    merges = check_merges(resume_from)
    words, counts, min_frequency, sources = _load_any_table(word_counts, min_frequency, weights, parity)
    if merges and len(merges) < num_merges:
        _replay(words, merges)
    first = min(global_merges, num_merges)
    if len(merges) < first:
        merges, words = _plain_merges_first(words, counts, merges, first, min_frequency, tie_break, progress,
                                            checkpoint, checkpoint_every)
        if len(merges) < first:
            return merges  # no pair reaches min_frequency over all sources, so none does in one
    token_bytes = vocabulary_bytes(merges)
    return _run_loop(lambda: _new_loop(words, counts, token_bytes, min_frequency, tie_break, sources), merges,
                     num_merges, progress, checkpoint, checkpoint_every)


def _check_merge_arguments(num_merges: int, tie_break: str, parity: bool, global_merges: int) -> None:
    """``train_merges``'s arguments that need no table: the merges fit in the token IDs, a known
    tie-break, and ``global_merges`` a count that goes with ``parity``."""
    if 256 + num_merges - 1 > MAX_TOKEN_ID:
        raise ValueError(f"num_merges={num_merges} is too large: token IDs are limited to {MAX_TOKEN_ID}")
    if tie_break not in TIE_BREAKS:
        raise ValueError(f"tie_break must be one of {', '.join(TIE_BREAKS)}, not {tie_break!r}")
    if isinstance(global_merges, bool) or not isinstance(global_merges, int) or global_merges < 0:
        raise ValueError(f"global_merges must be an integer of at least 0, got {global_merges!r}")
    if global_merges and not parity:
        raise ValueError("global_merges is the hybrid variant of parity-aware training: it needs parity=True")


def _plain_merges_first(words: list, counts: list[int], merges: list[Pair], first: int, min_frequency: int,
                        tie_break: str, progress: bool | None, checkpoint: Callable[[list[Pair]], None] | None,
                        checkpoint_every: float) -> tuple[list[Pair], list]:
    """The hybrid variant's first ``first`` merges, by the plain loop on the same words (a piece in
    several sources is several words, whose pairs add up to the summed table's); returns the
    merges and the words as the plain loop left them, on which the parity-aware loop continues
    as it would from a checkpoint (see ``_learn_merges``)."""
    plain = []
    token_bytes = vocabulary_bytes(merges)

    def plain_loop():
        plain.append(_new_loop(words, counts, token_bytes, min_frequency, tie_break))
        return plain[-1]

    merges = _run_loop(plain_loop, merges, first, progress, checkpoint, checkpoint_every)
    return merges, (plain[-1].current_words() if len(merges) >= first else words)


def extend_merges(
    table: extension.BaseTable,
    base: Tokenizer,
    num_merges: int,
    min_frequency: int = 2,
    progress: bool | None = None,
    resume_from: Sequence[Pair] = (),
    checkpoint: Callable[[list[Pair]], None] | None = None,
    checkpoint_every: float = 30.0,
) -> list[Pair]:
    """Learns new merges on top of an existing tokenizer (see ``bpe.training.extension``).

    The merge loop of ``train_merges``, started from the base's encoding of each
    piece (``table``) with every base token's bytes taken: identical to
    ``bpe.reference.extend_bytes``. ``resume_from``, ``checkpoint`` and
    ``checkpoint_every`` work as in ``train_merges``, with new merges.

    Args:
      table: the word-count table as ``base`` encodes it.
      base: the tokenizer being extended.
      num_merges: how many new merges to learn at most.
      min_frequency: stop as soon as the best pair occurs fewer times than this.
      progress: show a progress bar; None shows it when stderr is a terminal.

    Returns:
      The new merges in learned order as (left_id, right_id); merge ``i`` creates
      ID ``base.vocab_size + i``.

    Raises:
      ValueError: too many merges, or a ``resume_from`` no extension of ``base`` can produce.
    """
    first_id = base.vocab_size
    if first_id + num_merges - 1 > MAX_TOKEN_ID:
        raise ValueError(f"{num_merges} new tokens after ID {first_id - 1} is too many: token IDs are limited to "
                         f"{MAX_TOKEN_ID}")
    merges = extension.check_extension_merges(base, resume_from)
    words = list(table.words)
    if merges and len(merges) < num_merges:
        extension.replay(words, merges, first_id)
    token_bytes = extension.spelled_bytes(base)
    for left, right in merges:
        token_bytes.append(token_bytes[left] + token_bytes[right])
    return _run_loop(lambda: _new_loop(words, list(table.counts), token_bytes, min_frequency, "bytes"), merges,
                     num_merges, progress, checkpoint, checkpoint_every)


def _run_loop(
    new_loop: Callable[[], object],
    merges: list[Pair],
    num_merges: int,
    progress: bool | None,
    checkpoint: Callable[[list[Pair]], None] | None,
    checkpoint_every: float,
) -> list[Pair]:
    """Runs the merge loop ``new_loop()`` makes (over words with ``merges`` replayed on them
    already, and the bytes of every ID that exists) until ``num_merges``; returns ``merges``,
    appended to. Checkpoints as ``train_merges`` says."""
    if len(merges) >= num_merges:
        # Training only ever appends: the first num_merges of a longer run are
        # this run's result, and there is nothing left to learn.
        merges = merges[:num_merges]
        if checkpoint is not None:
            checkpoint(list(merges))
        return merges
    # The Python loop allocates millions of small lists and tuples but never a
    # reference cycle, and Python's cyclic GC would walk all of them again and
    # again: pause it while training.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        _learn_merges(new_loop(), merges, num_merges, progress, checkpoint, checkpoint_every)
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


# How many merges the loop learns between two returns to Python (progress bar,
# clock, signals): rare enough to cost nothing, often enough to be on time.
_CLOCK_EVERY = 64


def _replay(words: list, merges: list[Pair]) -> None:
    """Applies ``merges`` in learned order to every word, in place (bytes in, ID strings out).

    Training applies merge ``i`` to every word before it learns merge ``i + 1``.
    Per word, that is the encoder's pair-rank rule (repeatedly merge the
    adjacent pair learned first): merge ``i``'s pair cannot reappear after it
    was applied, because its tokens are older than ``256 + i`` and later merges
    only create newer ones. Encoding word by word costs time per word rather
    than per word and merge, so resuming after many merges stays cheap.
    """
    encoder = PieceEncoder(merges, cache_size=0)
    for i, word in enumerate(words):
        words[i] = "".join(map(chr, encoder.encode_bytes(word)))


def _new_loop(words: list, counts: list[int], token_bytes: list[bytes], min_frequency: int, tie_break: str,
              sources: tuple[list[int], list[int]] | None = None):
    """The C merge loop if it is built and can hold the table's counts, else the Python one
    (``words`` is consumed: the loop holds them in its own form).

    The C loop keeps a word's count in 64 bits and a pair's in 128: a table whose
    largest count times its number of symbols could exceed that runs in Python,
    which has no limit. With ``sources`` (parity-aware training: each word's
    source, each source's bytes) it compares bytes-per-token ratios by
    multiplying a source's bytes with another's tokens: each source's bytes
    must stay below 2**63.
    """
    ranks = None
    if tie_break == "hf":
        ranks = hf_byte_ranks() + list(range(256, len(token_bytes)))
    min_frequency = max(1, min_frequency)
    largest = max(counts, default=0)
    fits = largest < 2**64 and min_frequency < 2**63 and largest * sum(map(len, words)) < 2**126
    if sources is not None:
        fits = fits and max(sources[1], default=0) < 2**63
        if _merges is not None and fits:
            loop = _merges.MergeLoop(words, counts, token_bytes, min_frequency, ranks, *sources)
        else:
            loop = ParityMergeLoop(words, counts, token_bytes, min_frequency, ranks, *sources)
    elif _merges is not None and fits:
        loop = _merges.MergeLoop(words, counts, token_bytes, min_frequency, ranks)
    else:
        loop = PythonMergeLoop(words, counts, token_bytes, min_frequency, ranks)
    words.clear()
    return loop


def _learn_merges(
    loop,
    merges: list[Pair],
    num_merges: int,
    progress: bool | None,
    checkpoint: Callable[[list[Pair]], None] | None,
    checkpoint_every: float,
) -> None:
    """Drives the merge loop of ``train_merges``, made over the loaded table with the merges of
    a checkpoint replayed on it and the bytes of every ID.

    Appends to ``merges``, which may start with the merges of a checkpoint.
    Resuming gives the same merges as an uninterrupted run because the loop's
    next choice depends only on (a) the words with the merges so far applied
    and (b) the set of existing tokens' bytes: it takes the pair with the
    highest count in those words, ties by the tie-break, among pairs that reach
    ``min_frequency`` and do not spell existing bytes. Both are rebuilt by
    the caller from the checkpoint: (a) by replaying the merges on the loaded
    words, (b) from the merges themselves. The pair counts are then recounted from the
    words, so they are the true counts, which an uninterrupted run also keeps.
    The pairs it has forgotten by then (below ``min_frequency``, or refused by
    the duplicate-bytes rule) come back in the recount but change nothing: a
    forgotten count was already below ``min_frequency`` and only falls further
    (both its tokens exist), so it is dropped again; a duplicate spelling stays
    a duplicate and is dropped again when it surfaces.
    """
    bar = None
    if _show_progress(progress):
        from tqdm import tqdm  # only for a terminal

        bar = tqdm(total=num_merges, initial=len(merges), desc="merges", unit="merge")
    next_checkpoint = time.monotonic() + checkpoint_every
    more = True
    while more and len(merges) < num_merges:
        before = len(merges)
        more = loop.learn(merges, min(num_merges, (before // _CLOCK_EVERY + 1) * _CLOCK_EVERY))
        if bar is not None:
            bar.update(len(merges) - before)
        if checkpoint is not None and more and time.monotonic() >= next_checkpoint:
            checkpoint(list(merges))
            next_checkpoint = time.monotonic() + checkpoint_every
    if bar is not None:
        bar.close()


def vocab_size_problem(vocab_size: int, special_tokens: int) -> str | None:
    """What is wrong with a vocabulary size that leaves no room for the 256 byte tokens and
    ``special_tokens`` special tokens (to follow the size's name in a message), or None."""
    minimum = 256 + special_tokens
    if vocab_size < minimum:
        return f"is too small: it must be at least {minimum} (256 byte tokens + {special_tokens} special tokens)"
    return None


def train(
    word_counts: Mapping[bytes | str, int],
    vocab_size: int,
    pattern: str | None = None,
    special_tokens: Sequence[str] = (),
    min_frequency: int = 2,
    progress: bool | None = None,
    resume_from: Sequence[Pair] = (),
    checkpoint: Callable[[list[Pair]], None] | None = None,
    checkpoint_every: float = 30.0,
    tie_break: str = "bytes",
    weights: Mapping[str, object] | None = None,
    parity: bool = False,
    global_merges: int = 0,
    extend: Tokenizer | None = None,
) -> Tokenizer:
    """Trains a byte-level BPE tokenizer from a word-count table.

    Args:
      word_counts: pre-token piece -> count (bytes, or str taken as UTF-8), as
        counted with the same ``pattern``; or a table by source, source name ->
        {piece: count}, for ``weights`` and ``parity``.
      vocab_size: 256 byte tokens + merges + special tokens. Training may stop
        earlier (fewer merges) when no pair reaches ``min_frequency``.
      pattern: the pre-tokenizer: a preset name (see ``bpe.PRESETS``) or a regex;
        None is ``gpt2`` (or the base's, with ``extend``).
      special_tokens: strings that get their own IDs after the merges.
      min_frequency: a pair must occur at least this often to be merged.
      progress: show a progress bar; None shows it when stderr is a terminal.
      resume_from: merges of an interrupted run on the same table with the same
        ``min_frequency`` and ``tie_break``; training continues after them (see
        ``train_merges``).
      checkpoint: called with the merges so far while training, when a
        KeyboardInterrupt stops it, and at the end (see ``train_merges``).
      checkpoint_every: seconds between checkpoints.
      tie_break: "bytes" (the contract: ties to the greatest byte pair) or "hf":
        with ``pattern="hf-bytelevel"``, the merges of HF tokenizers'
        ``BpeTrainer`` (ByteLevel pre-tokenizer without a prefix space, the 256
        bytes as initial alphabet) for the same text, vocab size, special tokens
        and min_frequency, in the same order, as long as HF never learns two
        merges that spell the same bytes (it gives both one ID; here the second
        is skipped, the duplicate-bytes rule).
      weights: source name -> weight, exact to three decimal places (see
        ``train_merges``); 1 where not given.
      parity: parity-aware training (see ``train_merges``).
      global_merges: with ``parity``, how many merges come first by plain
        training's rule (the hybrid variant, see ``train_merges``).
      extend: a tokenizer to extend (``bpe.training.extension``): its tokens keep
        their IDs and the new merges, learned on its encoding of the pieces, take
        the IDs after its largest; ``vocab_size`` is then the extended
        tokenizer's (the base's ``vocab_size`` + the new tokens), ``word_counts``
        are counted with the base's pre-tokenizer, ``special_tokens`` are the
        base's (none may be given), ``tie_break`` is "bytes", and
        ``resume_from``/``checkpoint`` hold the new merges.

    Returns:
      A ``bpe.tokenizer.Tokenizer``.

    Raises:
      ValueError: a bad argument, or a special token that an ordinary token of
        the result spells (``special_token_clash``), which Hugging Face
        tokenizers would read with another ID. A one-byte special token is
        refused before training; a longer one once the merges are known (they
        have been handed to ``checkpoint``).
    """
    if extend is not None:
        if weights or parity or global_merges or is_by_source(word_counts):
            raise ValueError("an extension trains on one plain table: weights, parity and tables by source "
                             "do not apply to it")
        return _extend(word_counts, vocab_size, pattern, special_tokens, min_frequency, progress, resume_from,
                       checkpoint, checkpoint_every, tie_break, extend)
    pattern = "gpt2" if pattern is None else pattern
    special_tokens = _checked_plain_arguments(vocab_size, pattern, special_tokens)
    merges = train_merges(
        word_counts, vocab_size - 256 - len(special_tokens), min_frequency=min_frequency, progress=progress,
        resume_from=resume_from, checkpoint=checkpoint, checkpoint_every=checkpoint_every, tie_break=tie_break,
        weights=weights, parity=parity, global_merges=global_merges,
    )
    _refuse_special_token_clash(special_tokens, merges)
    return Tokenizer(merges, pattern=pattern, special_tokens=special_tokens)


def _checked_plain_arguments(vocab_size: int, pattern: str, special_tokens: Sequence[str]) -> tuple[str, ...]:
    """``train``'s checks before training (without ``extend``): the special tokens (returned as
    checked), a vocabulary size with room for them, a pattern that compiles, and no special
    token that a byte token spells."""
    special_tokens = check_special_tokens(special_tokens)
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int):
        raise ValueError(f"vocab_size must be an integer, got {vocab_size!r}")
    problem = vocab_size_problem(vocab_size, len(special_tokens))
    if problem:
        raise ValueError(f"vocab_size={vocab_size} {problem}")
    compile_pattern(pattern)
    _refuse_special_token_clash(special_tokens, ())
    return special_tokens


def _refuse_special_token_clash(special_tokens: Sequence[str], merges: Sequence[Pair]) -> None:
    """Raises ValueError when an ordinary token of ``merges`` spells a special token."""
    clash = special_token_clash(special_tokens, vocabulary_bytes(merges))
    if clash:
        raise ValueError(clash)


def _extend(word_counts, vocab_size, pattern, special_tokens, min_frequency, progress, resume_from, checkpoint,
            checkpoint_every, tie_break, base: Tokenizer) -> Tokenizer:
    """``train(..., extend=base)``: the arguments checked, the new merges learned, the extended tokenizer."""
    if not isinstance(base, Tokenizer):
        raise ValueError(f"extend must be a bpe.Tokenizer, got {type(base).__name__}")
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size <= base.vocab_size:
        raise ValueError(f"vocab_size={vocab_size!r} must be an integer above the base's vocab_size "
                         f"{base.vocab_size}: the new tokens take the IDs after the base's")
    if special_tokens:
        raise ValueError("an extension keeps the base's special tokens; special_tokens must be empty")
    if tie_break != "bytes":
        raise ValueError('an extension breaks ties by bytes; tie_break must be "bytes"')
    if pattern is not None and resolve_pattern(pattern) != base.pattern:
        raise ValueError("an extension pre-tokenizes with the base's pattern; leave pattern out")
    table = extension.BaseTable(base, word_counts)
    merges = extend_merges(table, base, vocab_size - base.vocab_size, min_frequency=min_frequency,
                           progress=progress, resume_from=resume_from, checkpoint=checkpoint,
                           checkpoint_every=checkpoint_every)
    return extension.extended_tokenizer(base, merges)
