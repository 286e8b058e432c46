"""Superword training from count tables: stage one on the pieces, stage two on the candidates.

Learns exactly the merges of ``bpe.superwords.reference.train`` without holding
a document: stage one is ordinary training (``trainer.train_merges``) on the
table of pieces; stage two runs the merge loop on the supermerge candidates
(``bpe.superwords.candidates``) that the table of stage-two pieces yields once
the stage-one merges are known. Both tables come from one pass over the corpus.

Stage two refuses the tokens ``bpe.superwords.rules.refused`` names, on top of
the duplicate-bytes rule: its loop treats a refused token as one that exists
already, so the pair is dropped when it surfaces and the next best is taken,
as the reference does.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

from bpe.decoder import vocabulary_bytes
from bpe.pretokenize import compile_pattern
from bpe.superwords.candidates import count_candidates
from bpe.superwords.rules import STAGE_TWO_PATTERN, refused
from bpe.tokenizer import Tokenizer, check_special_tokens
from bpe.tokenizer_file.render import special_token_clash
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
    stage_one: Sequence[Pair],
    pattern: str,
    num_merges: int,
    min_frequency: int = 2,
    progress: bool | None = None,
    checkpoint: Callable[[list[Pair]], None] | None = None,
    checkpoint_every: float = 30.0,
) -> list[Pair]:
    """Learns stage two's merges after ``stage_one``.

    Args:
      superword_counts: stage-two piece -> count, counted with ``rules.STAGE_TWO_PATTERN``.
      stage_one: the stage-one merges.
      pattern: stage one's pre-tokenizer (which tokens are whole).
      num_merges: how many stage-two merges to learn at most.
      min_frequency: stop as soon as the best pair occurs fewer times than this.
      progress, checkpoint, checkpoint_every: as for ``trainer.train_merges``; a
        checkpoint holds the stage-one merges followed by the stage-two ones.

    Returns:
      All merges: ``stage_one`` followed by the new ones.
    """
    merges = list(stage_one)
    runs = count_candidates(superword_counts, merges, pattern)
    token_bytes = vocabulary_bytes(merges)
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
    merges = superword_merges(superword_counts, stage_one, pattern,
                              vocab_size - len(special_tokens) - 256 - len(stage_one),
                              min_frequency=min_frequency, progress=progress, checkpoint=checkpoint,
                              checkpoint_every=checkpoint_every)
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
