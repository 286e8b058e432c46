"""Superword training from count tables: stage one on the pieces, stage two on the candidates.

Learns exactly the merges of ``bpe.superwords.reference.train`` without holding
a document: stage one is ordinary training (``trainer.train_merges``) on the
table of pieces; stage two runs the merge loop on the supermerge candidates
(``bpe.superwords.candidates``) that the table of stage-two pieces yields once
the stage-one merges are known. Both tables come from one pass over the corpus.

Stage two refuses the tokens ``bpe.superwords.rules.refused`` names, on top of
the duplicate-bytes rule: its loop treats a refused token as one that exists
already, so the pair is dropped when it surfaces and the next best is taken,
as the reference does. That rule lives in the pure-Python merge loop only (the
C loop knows existing bytes alone); stage two's table of candidates is small,
and its few thousand merges take seconds there.

``extend_superwords`` runs stage two on an existing tokenizer instead of stage
one (``train --extend BASE --superword-merges K``).
"""

from __future__ import annotations

import functools
import json
from typing import Callable, Mapping, Sequence

from bpe.decoder import vocabulary_bytes
from bpe.pretokenize import PreTokenizer, compile_pattern
from bpe.superwords.candidates import StageOneRuns, count_candidates, piece_runs
from bpe.superwords.rules import STAGE_TWO_PATTERN, refused
from bpe.tokenizer import Tokenizer, check_special_tokens
from bpe.tokenizer_file.render import special_token_clash
from bpe.training import extension
from bpe.training.merge_loop import MergeLoop
from bpe.training.trainer import _run_loop, train_merges, vocab_size_problem

Pair = tuple[int, int]


class _ExistingOrRefused(set):
    """The bytes of every token, which also answers yes for every token stage two refuses."""

    def __contains__(self, token) -> bool:
        return set.__contains__(self, token) or refused(token)


class SuperwordMergeLoop(MergeLoop):
    """The Python merge loop over supermerge candidates, refusing ``rules.refused`` tokens
    (arguments: ``merge_loop.LoopState``'s)."""

    def __init__(self, words: list, counts: Sequence[int], token_bytes: Sequence[bytes], min_frequency: int):
        super().__init__(words, counts, token_bytes, min_frequency)
        self.existing = _ExistingOrRefused(self.existing)


def superword_merges(
    superword_counts: Mapping[bytes | str, int],
    runs_of: Callable[[bytes], list[str]],
    token_bytes: Sequence[bytes],
    num_merges: int,
    min_frequency: int = 2,
    progress: bool | None = None,
    checkpoint: Callable[[list[Pair]], None] | None = None,
    checkpoint_every: float = 30.0,
    merges: Sequence[Pair] = (),
) -> list[Pair]:
    """Learns stage two's merges on top of the tokens that exist (stage one's, or an existing tokenizer's).

    Args:
      superword_counts: stage-two piece -> count, counted with ``rules.STAGE_TWO_PATTERN``.
      runs_of: a stage-two piece's supermerge candidates with the existing tokens
        (``bpe.superwords.candidates``).
      token_bytes: the bytes of every existing ID (``extension.spelled_bytes`` for a
        tokenizer with gaps or special tokens); new IDs follow from ``len(token_bytes)``.
      num_merges: how many stage-two merges to learn at most.
      min_frequency: stop as soon as the best pair occurs fewer times than this.
      progress, checkpoint, checkpoint_every: as for ``trainer.train_merges``; a
        checkpoint holds ``merges`` followed by the stage-two ones.
      merges: the merges learned before (stage one's), kept at the head of the result.

    Returns:
      ``merges`` followed by the new ones.
    """
    merges = list(merges)
    runs = count_candidates(superword_counts, runs_of)
    words, counts = list(runs), list(runs.values())
    del runs

    def new_loop():
        loop = SuperwordMergeLoop(words, counts, token_bytes, max(1, min_frequency))
        words.clear()
        return loop

    return _run_loop(new_loop, merges, len(merges) + num_merges, progress, checkpoint, checkpoint_every)


def train_superwords(
    word_counts: Mapping[bytes | str, int],
    superword_counts: Mapping[bytes | str, int],
    vocab_size: int,
    transition: int,
    pattern: str | None = None,
    special_tokens: Sequence[str] = (),
    min_frequency: int = 2,
    progress: bool | None = None,
    resume_from: Sequence[Pair] = (),
    checkpoint: Callable[[list[Pair]], None] | None = None,
    checkpoint_every: float = 30.0,
) -> Tokenizer:
    """Trains a superword tokenizer from the two count tables of one corpus.

    Args:
      word_counts: pre-token piece -> count, counted with ``pattern``.
      superword_counts: stage-two piece -> count, counted with ``rules.STAGE_TWO_PATTERN``.
      vocab_size: 256 byte tokens + merges + special tokens.
      transition: the vocabulary size (without special tokens) at which stage one
        ends and stage two starts: stage one learns ``transition - 256`` merges.
      pattern: stage one's pre-tokenizer, a preset name or a regex; None is ``gpt2``.
        The tokenizer itself pre-tokenizes with the stage-two pattern.
      special_tokens: strings that get their own IDs after the merges.
      min_frequency: in both stages, a pair must occur at least this often.
      progress: show a progress bar; None shows it when stderr is a terminal.
      resume_from: merges of an interrupted run on the same tables: stage one
        continues after them; stage two, which takes seconds, is learned again.
      checkpoint: called with the merges so far (see ``trainer.train_merges``).
      checkpoint_every: seconds between checkpoints.

    Returns:
      A ``bpe.Tokenizer`` whose merges equal ``bpe.superwords.reference.train``'s.

    Raises:
      ValueError: a bad argument, or a special token an ordinary token spells.
    """
    pattern = "gpt2" if pattern is None else pattern
    special_tokens = check_special_tokens(special_tokens)
    problem = transition_problem(vocab_size, transition, len(special_tokens))
    if problem:
        raise ValueError(problem)
    compile_pattern(pattern)
    clash = special_token_clash(special_tokens, vocabulary_bytes())
    if clash:
        raise ValueError(clash)
    stage_one_merges = transition - 256
    stage_one = train_merges(word_counts, stage_one_merges, min_frequency=min_frequency, progress=progress,
                             resume_from=list(resume_from)[:stage_one_merges], checkpoint=checkpoint,
                             checkpoint_every=checkpoint_every)
    # Stage one may stop early (no pair reaches min_frequency): stage two fills the rest.
    merges = superword_merges(superword_counts, StageOneRuns(stage_one, pattern), vocabulary_bytes(stage_one),
                              vocab_size - len(special_tokens) - 256 - len(stage_one),
                              min_frequency=min_frequency, progress=progress, checkpoint=checkpoint,
                              checkpoint_every=checkpoint_every, merges=stage_one)
    clash = special_token_clash(special_tokens, vocabulary_bytes(merges))
    if clash:
        raise ValueError(clash)
    return Tokenizer(merges, pattern=STAGE_TWO_PATTERN, special_tokens=special_tokens)


def transition_problem(vocab_size: int, transition: int, special_tokens: int) -> str | None:
    """What is wrong with a vocabulary size and transition (one line), or None."""
    for name, value in (("vocab_size", vocab_size), ("transition", transition)):
        if isinstance(value, bool) or not isinstance(value, int):
            return f"{name} must be an integer, got {value!r}"
    problem = vocab_size_problem(vocab_size, special_tokens)
    if problem:
        return f"vocab_size={vocab_size} {problem}"
    if not 256 <= transition <= vocab_size - special_tokens:
        return (f"the superword transition {transition} must lie between 256 and the vocabulary size without "
                f"special tokens ({vocab_size - special_tokens})")
    return None


def extend_superwords(
    base: Tokenizer,
    superword_counts: Mapping[bytes | str, int],
    num_merges: int,
    min_frequency: int = 2,
    progress: bool | None = None,
    checkpoint: Callable[[list[Pair]], None] | None = None,
    checkpoint_every: float = 30.0,
) -> Tokenizer:
    """Adds superword merges to an existing tokenizer: stage two with the base as stage one.

    Every base token (ordinary, special) keeps its ID and bytes; the new tokens take
    the IDs after the base's largest, in learned order (the contract of
    ``bpe.training.extension``). The extended tokenizer pre-tokenizes with the
    stage-two regex instead of the base's pattern, so the base's merges now run
    over stage-two pieces: where one of them joins the end of one base piece to
    the start of the next (a whitespace token and the space before a word, say),
    the base's tokens of that text change; elsewhere they are the base's, and
    expanding the new tokens (``extension.expand``) gives them back.

    Args:
      base: the tokenizer to extend; one that normalizes text or matches added
        tokens inside it is refused (its pieces are not plain regex pieces).
      superword_counts: stage-two piece -> count, counted with ``rules.STAGE_TWO_PATTERN``.
      num_merges: how many superword merges to learn at most.
      min_frequency, progress, checkpoint, checkpoint_every: as for ``superword_merges``.

    Returns:
      The extended tokenizer; its new merges are ``merges[-k:]``, k the number learned.

    Raises:
      ValueError: a base that cannot be extended with superwords, or whose extension has
        no exact tokenizer.json.
    """
    problem = superword_base_problem(base)
    if problem:
        raise ValueError(problem)
    token_bytes = extension.spelled_bytes(base)
    runs_of = functools.partial(piece_runs, encode=base.piece_encoder.encode_bytes,
                                pretokenizer=PreTokenizer(base.pattern), token_length=list(map(len, token_bytes)))
    merges = superword_merges(superword_counts, runs_of, token_bytes, num_merges, min_frequency=min_frequency,
                              progress=progress, checkpoint=checkpoint, checkpoint_every=checkpoint_every)
    return superword_extension(base, merges)


def superword_base_problem(base: Tokenizer) -> str | None:
    """Why ``base`` cannot take superword merges (one line), or None."""
    if base.pattern is None:
        return "its pre-tokenizer is a chain of steps, not one regex"
    if base.normalizer is not None or base.added_tokens:
        return "it normalizes text or matches added tokens inside it, which stage two's pieces would cut"
    return None


def superword_extension(base: Tokenizer, merges: Sequence[Pair]) -> Tokenizer:
    """The base with the new ``merges``, pre-tokenizing with the stage-two regex."""
    if base.kind == "beam-bpe" and not base.special_tokens:
        return Tokenizer([*base.merges, *merges], pattern=STAGE_TWO_PATTERN)
    spec = json.loads(extension.extended_tokenizer(base, merges).to_json())
    # The stage-two pre-tokenizer exactly as our own files write it.
    spec["pre_tokenizer"] = json.loads(Tokenizer([], pattern=STAGE_TWO_PATTERN).to_json())["pre_tokenizer"]
    return Tokenizer.from_json(json.dumps(spec, ensure_ascii=False))
