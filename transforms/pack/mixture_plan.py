"""Token-budgeted mixtures of named sources: which training documents go into the stream, how often. Pure, no Beam.

A mixture packs several named sources (each a set of token shards) with a
budget of training tokens per source. The validation split is decided first,
by document key, exactly as without a mixture (``sequence_order``): a source's
held-out documents go into the validation stream once, with no budget. Of the
rest, the source's training documents (``tokens`` of them), the budget takes:

- ``full = budget // tokens`` full passes: repeats 0 .. full - 1 hold every
  training document of the source;
- then ``rest = budget - full * tokens`` tokens drawn in repeat ``full``: the
  documents in the order of their draw, a hash of (seed, source, document
  key, repeat) (``draws``), each taken while the tokens drawn before it are
  fewer than ``rest``. So the source's training tokens are the budget, or
  more by less than the last document drawn, and an epoch factor of 2.6 is
  two full passes and 60% of a third. A source larger than its budget is
  subsampled the same way (``full`` is 0).

The draw order is exact however the documents are spread: each unit counts
the tokens of its documents per bucket of draws (the top ``BUCKET_BITS`` bits,
``BucketCounts``); the sums give the bucket in which the draw crosses
``rest`` (``find_crossing``); only that bucket's documents are gathered and
sorted (``draw_last``), which gives the largest key drawn
(``SourcePlan.last``). A document is drawn when its (draw, id, occurrence) is
at most that key (``SourcePlan.chosen``).

Stream order: the training stream of a mixture holds repeat 0 of every
source, then repeat 1, and so on; within a repeat, the sources in name order,
and within a source, its documents in input order (shards sorted by name,
rows in order) — every repeat's chosen documents in the order of the input,
not of their draws. A stream unit is (repeat, file, row group), so the order
depends on the documents and their order alone, not on the sharding, the
workers or the runner. The validation stream holds the held-out documents of
every source once, in input order.
"""

from __future__ import annotations

import dataclasses
import hashlib
from fractions import Fraction
from typing import Iterable, Mapping, Sequence

import numpy as np

from transforms.pack.sequence_order import Key, keys_at_most, splitmix64

__all__ = [
    "BUCKET_BITS", "FILES_PER_SOURCE", "MixtureSpec", "SourceCounts", "SourcePlan", "Crossing", "weighted_budgets", "draws",
    "plan_source", "buckets_of", "BucketCounts", "find_crossing", "draw_last", "plan_mixture_json",
]

# Draws are counted in 2**BUCKET_BITS buckets, so the documents gathered on one
# worker to find the exact end of a draw are about 1/65536 of a source's.
BUCKET_BITS = 16
# Input files are numbered source by source: file k of source s is s * FILES_PER_SOURCE + k,
# so any worker knows a unit's source from its key alone.
FILES_PER_SOURCE = 1 << 20


@dataclasses.dataclass(frozen=True)
class MixtureSpec:
    """What the user asked for: the sources in name order, each with its budget
    of training tokens, and the seed of the draws.

    Attributes:
      names: the sources' names, sorted.
      budgets: training tokens per source.
      seed: the seed of the draws.
      weights: the weights the budgets came from, when given (for mixture.json).
    """

    names: tuple[str, ...]
    budgets: tuple[int, ...]
    seed: int = 0
    weights: tuple[float, ...] | None = None

    def __post_init__(self):
        if list(self.names) != sorted(set(self.names)):
            raise ValueError("source names must be unique and in sorted order")
        if len(self.budgets) != len(self.names):
            raise ValueError("one budget per source")
        if any(b < 1 for b in self.budgets):
            raise ValueError("every source needs a budget of at least one token")

    def source_of(self, file: int) -> int:
        """The source (its index in ``names``) of input file number ``file``."""
        return file // FILES_PER_SOURCE


@dataclasses.dataclass(frozen=True)
class SourceCounts:
    """Documents and tokens of one source (or one unit of it), per split."""

    documents: dict[str, int]
    tokens: dict[str, int]

    def __add__(self, other: "SourceCounts") -> "SourceCounts":
        return SourceCounts({s: n + other.documents[s] for s, n in self.documents.items()},
                            {s: n + other.tokens[s] for s, n in self.tokens.items()})

    def __radd__(self, other):  # sum() starts from 0
        return self if other == 0 else NotImplemented


def weighted_budgets(weights: Mapping[str, Fraction], total: int) -> dict[str, int]:
    """Budgets in proportion to the weights that add up to ``total`` exactly: each
    the floor of its share, the tokens left over one each to the largest
    remainders (ties: the first name)."""
    whole = sum(weights.values())
    shares = {name: Fraction(total) * weight / whole for name, weight in weights.items()}
    budgets = {name: int(share) for name, share in shares.items()}
    left = total - sum(budgets.values())
    for name in sorted(shares, key=lambda n: (-(shares[n] - budgets[n]), n))[:left]:
        budgets[name] += 1
    return budgets


def _salt(seed: int, name: str, repeat: int) -> np.uint64:
    digest = hashlib.blake2b(f"{seed}:{name}:{repeat}".encode(), digest_size=8).digest()
    return np.uint64(int.from_bytes(digest, "little"))


def draws(key_hashes: np.ndarray, seed: int, name: str, repeat: int) -> np.ndarray:
    """The draw of every document of source ``name`` in ``repeat``: a 64-bit hash
    of (seed, source, document key, repeat), from the keys' ``id_hashes``."""
    return splitmix64(np.asarray(key_hashes, np.uint64) ^ _salt(seed, name, repeat))


@dataclasses.dataclass(frozen=True)
class SourcePlan:
    """How one source enters the training stream.

    Attributes:
      name, budget: the source and its budget of training tokens.
      documents, tokens: its training documents and tokens (after the validation split).
      held_out: its validation split, as (documents, tokens).
      full: full passes over its training documents.
      rest: tokens drawn in repeat ``full`` (0: none).
      last: the largest (draw, id, occurrence) key drawn in repeat ``full`` (None: none).
      drawn: the documents and tokens drawn in repeat ``full``.
    """

    name: str
    budget: int
    documents: int
    tokens: int
    held_out: tuple[int, int] = (0, 0)
    full: int = 0
    rest: int = 0
    last: Key | None = None
    drawn: tuple[int, int] = (0, 0)

    @property
    def repeats(self) -> int:
        """How many repeats hold documents of the source."""
        return self.full + (self.last is not None)

    @property
    def train_documents(self) -> int:
        return self.full * self.documents + self.drawn[0]

    @property
    def train_tokens(self) -> int:
        return self.full * self.tokens + self.drawn[1]

    def chosen(self, repeat: int, draws_of_repeat: np.ndarray, ids: Sequence[str],
               occurrences: np.ndarray) -> np.ndarray:
        """Which of these training documents (their draws in ``repeat``) the repeat holds."""
        if repeat < self.full:
            return np.ones(len(ids), bool)
        if repeat > self.full or self.last is None:
            return np.zeros(len(ids), bool)
        return keys_at_most(ids, draws_of_repeat, occurrences, self.last)


def plan_source(name: str, budget: int, counts: SourceCounts) -> SourcePlan:
    """The passes of a source before its draw (``rest`` still to draw)."""
    documents, tokens = counts.documents["train"], counts.tokens["train"]
    full, rest = divmod(budget, tokens) if tokens else (0, budget)
    held_out = (counts.documents["validation"], counts.tokens["validation"])
    return SourcePlan(name, budget, documents, tokens, held_out, full, rest)


def buckets_of(draws_of_repeat: np.ndarray, bits: int = BUCKET_BITS) -> np.ndarray:
    """The bucket of each draw: its top ``bits`` bits."""
    return (np.asarray(draws_of_repeat, np.uint64) >> np.uint64(64 - bits)).astype(np.int64)


@dataclasses.dataclass(frozen=True)
class BucketCounts:
    """The tokens and documents of some documents per bucket of their draws
    (buckets sorted, each once): one small element per unit, merged by ``add``."""

    buckets: np.ndarray
    tokens: np.ndarray
    documents: np.ndarray

    @classmethod
    def of(cls, draws_of_repeat: np.ndarray, lengths: np.ndarray, bits: int = BUCKET_BITS) -> "BucketCounts":
        """The counts of these documents, by their ``buckets_of``."""
        buckets = buckets_of(draws_of_repeat, bits)
        return cls._summed(buckets, np.asarray(lengths, np.int64), np.ones(len(buckets), np.int64))

    @classmethod
    def _summed(cls, buckets: np.ndarray, tokens: np.ndarray, documents: np.ndarray) -> "BucketCounts":
        found, inverse = np.unique(buckets, return_inverse=True)
        return cls(found, np.bincount(inverse, weights=tokens, minlength=len(found)).astype(np.int64),
                   np.bincount(inverse, weights=documents, minlength=len(found)).astype(np.int64))

    @classmethod
    def add(cls, parts: Iterable["BucketCounts"]) -> "BucketCounts":
        parts = list(parts)
        if not parts:
            return cls(*(np.zeros(0, np.int64) for _ in range(3)))
        return cls._summed(*(np.concatenate([getattr(p, name) for p in parts])
                             for name in ("buckets", "tokens", "documents")))


@dataclasses.dataclass(frozen=True)
class Crossing:
    """The bucket of draws in which a source's draw reaches its ``rest``, and the
    tokens and documents of the buckets before it (all drawn)."""

    bucket: int
    tokens_before: int
    documents_before: int


def find_crossing(counts: BucketCounts, rest: int) -> Crossing | None:
    """The crossing of a draw of ``rest`` tokens; None when nothing is drawn
    (``rest`` 0) or the buckets hold fewer tokens."""
    if not rest:
        return None
    through = np.cumsum(counts.tokens)
    crossed = int(np.searchsorted(through, rest))  # the first bucket whose running tokens reach rest
    if crossed == len(through):
        return None
    return Crossing(int(counts.buckets[crossed]), int(through[crossed] - counts.tokens[crossed]),
                    int(counts.documents[:crossed].sum()))


def draw_last(plan: SourcePlan, crossing: Crossing,
              candidates: Iterable[tuple[int, str, int, int]]) -> SourcePlan:
    """The plan with its draw: ``candidates`` are the (draw, id, occurrence, tokens)
    of the documents in the crossing's bucket; in draw order, each is drawn while
    the tokens drawn before it are fewer than ``plan.rest``."""
    tokens, documents, last = crossing.tokens_before, crossing.documents_before, None
    for draw, doc_id, occurrence, length in sorted(candidates):
        if tokens >= plan.rest:
            break
        tokens, documents, last = tokens + length, documents + 1, (draw, doc_id, occurrence)
    if last is None:
        raise RuntimeError(f"source {plan.name}: the draw's bucket {crossing.bucket} holds none of its tokens")
    return dataclasses.replace(plan, last=last, drawn=(documents, tokens))


def plan_mixture_json(spec: MixtureSpec, plans: Mapping[str, SourcePlan]) -> dict:
    """mixture.json: the seed and, per source, its budget, what it holds, what
    the training split took (repeats counted) and what was held out."""
    sources = {}
    for index, name in enumerate(spec.names):
        plan = plans[name]
        held_documents, held_tokens = plan.held_out
        sources[name] = {
            "budget": plan.budget,
            **({"weight": spec.weights[index]} if spec.weights else {}),
            "available": {"documents": plan.documents + held_documents, "tokens": plan.tokens + held_tokens},
            "train_available": {"documents": plan.documents, "tokens": plan.tokens},
            "train": {"documents": plan.train_documents, "tokens": plan.train_tokens, "full_passes": plan.full},
            "held_out": {"documents": held_documents, "tokens": held_tokens},
            "epochs": round(plan.train_tokens / plan.tokens, 6) if plan.tokens else 0.0,
        }
    return {"seed": spec.seed, "sources": sources}
