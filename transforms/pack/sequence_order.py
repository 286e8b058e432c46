"""Which split a document goes to, and where a sequence goes: pure functions, no Beam.

- The validation split is chosen by a stable hash of each document's key
  (``ValidationRule``): its id and its occurrence, the number of documents
  before it with the same id (shards in name order, rows in order;
  ``Occurrences``). Keys are unique within a job, so a number of documents
  means that many even where ids repeat, and the split depends on the ids and
  the input files alone: not on the sharding or the run. A document whose id
  occurs once has occurrence 0 and the hash of its id alone.
- The shuffle is a seeded bijection of sequence indices (``Permutation``),
  computed per index, so every worker places its own sequences and the
  positions still form one permutation of all of them.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Iterable, Sequence, Tuple

import numpy as np

__all__ = [
    "SPLITS", "Key", "Occurrences", "ValidationRule", "Permutation", "id_hashes", "keys_at_most", "smallest_keys",
    "split_masks", "splitmix64",
]

SPLITS = ("train", "validation")
_U64 = np.uint64


def id_hashes(ids: Iterable[str], occurrences: Iterable[int] | None = None) -> np.ndarray:
    """A stable 64-bit hash of every document's key: BLAKE2b of its id's UTF-8 bytes,
    salted with its occurrence (an occurrence of 0 is BLAKE2b's unsalted hash)."""
    ids = list(ids)
    occurrences = [0] * len(ids) if occurrences is None else [int(k) for k in occurrences]
    return np.array(
        [int.from_bytes(hashlib.blake2b(i.encode("utf-8", "surrogatepass"), digest_size=8,
                                        salt=k.to_bytes(16, "little")).digest(), "big")
         for i, k in zip(ids, occurrences)],
        dtype=_U64,
    )


class Occurrences:
    """The occurrence of each document of one unit, read in row order.

    ``earlier`` holds, for each id that names several documents of the job, how
    many of them come before the unit; every other id occurs once (occurrence 0).
    """

    def __init__(self, earlier: dict[str, int] | None = None):
        self._next = dict(earlier or {})

    def __call__(self, ids: Sequence[str]) -> np.ndarray:
        if not self._next:
            return np.zeros(len(ids), np.int64)
        occurrences = np.zeros(len(ids), np.int64)
        for row, doc_id in enumerate(ids):
            k = self._next.get(doc_id)
            if k is not None:
                occurrences[row] = k
                self._next[doc_id] = k + 1
        return occurrences


Key = Tuple[int, str, int]  # (hash, id, occurrence): unique within a job


@dataclasses.dataclass(frozen=True)
class ValidationRule:
    """Which documents form the validation split: those whose key's hash is below
    ``hash_below`` (a fraction of the hash space), or whose (hash, id, occurrence)
    is at most ``last`` (the N-th smallest key, for a number of documents)."""

    hash_below: int = 0
    last: Key | None = None

    @classmethod
    def fraction(cls, fraction: float) -> "ValidationRule":
        return cls(hash_below=min(int(fraction * 2**64), 2**64 - 1) if fraction > 0 else 0)

    def is_validation(self, ids: Sequence[str], hashes: np.ndarray,
                      occurrences: np.ndarray | None = None) -> np.ndarray:
        chosen = hashes < _U64(self.hash_below) if self.hash_below else np.zeros(len(hashes), bool)
        if self.last is not None:
            chosen |= keys_at_most(ids, hashes, occurrences, self.last)
        return chosen


def keys_at_most(ids: Sequence[str], hashes: np.ndarray, occurrences: np.ndarray | None, last: Key) -> np.ndarray:
    """Which documents' (hash, id, occurrence) keys are at most ``last``."""
    last_hash, last_id, last_occurrence = last
    chosen = hashes < _U64(last_hash)
    for i in np.flatnonzero(hashes == _U64(last_hash)):
        occurrence = 0 if occurrences is None else int(occurrences[i])
        chosen[i] = (ids[i], occurrence) <= (last_id, last_occurrence)
    return chosen


def smallest_keys(ids: Sequence[str], hashes: np.ndarray, n: int, occurrences: np.ndarray | None = None) -> list[Key]:
    """The n smallest (hash, id, occurrence) keys among these documents."""
    if n <= 0 or not len(hashes):
        return []
    if occurrences is None:
        occurrences = np.zeros(len(hashes), np.int64)
    candidates = np.argsort(hashes, kind="stable")[:n]
    # Documents whose hash equals the n-th smallest may still win on their id.
    candidates = np.union1d(candidates, np.flatnonzero(hashes == hashes[candidates[-1]]))
    return sorted((int(hashes[i]), ids[i], int(occurrences[i])) for i in candidates)[:n]


def split_masks(ids: Sequence[str], rule: ValidationRule | None, occurrences: np.ndarray | None = None,
                hashes: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """For each split, which of these documents belong to it (``hashes``: their
    keys' ``id_hashes``, when already computed)."""
    if rule is None:
        return {"train": np.ones(len(ids), bool), "validation": np.zeros(len(ids), bool)}
    validation = rule.is_validation(ids, id_hashes(ids, occurrences) if hashes is None else hashes, occurrences)
    return {"train": ~validation, "validation": validation}


def splitmix64(z: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser: a bijective 64-bit mixer (wrapping uint64 arithmetic)."""
    with np.errstate(over="ignore"):
        z = (z ^ (z >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> _U64(27))) * _U64(0x94D049BB133111EB)
        return z ^ (z >> _U64(31))


class Permutation:
    """A seeded bijection of [0, size), computed per index without a table.

    A balanced Feistel network on the smallest even number of bits that covers
    ``size``, with cycle walking (an index that maps outside [0, size) is mapped
    again until it lands inside), so any set of indices can be placed on any
    worker and the positions still form a permutation.
    """

    ROUNDS = 6

    def __init__(self, size: int, seed: int, name: str = ""):
        self.size = size
        bits = max(2, (max(size, 1) - 1).bit_length())
        self._half = _U64((bits + 1) // 2)
        self._mask = _U64((1 << int(self._half)) - 1)
        digest = hashlib.blake2b(f"{seed}:{name}".encode(), digest_size=8 * self.ROUNDS).digest()
        self._keys = [_U64(int.from_bytes(digest[8 * r: 8 * r + 8], "little")) for r in range(self.ROUNDS)]

    def _round(self, x: np.ndarray, key) -> np.ndarray:
        return splitmix64(x + key) & self._mask

    def _encrypt(self, x: np.ndarray) -> np.ndarray:
        left, right = x >> self._half, x & self._mask
        for key in self._keys:
            left, right = right, left ^ self._round(right, key)
        return (left << self._half) | right

    def __call__(self, indices: np.ndarray) -> np.ndarray:
        x = np.asarray(indices, dtype=_U64)
        if len(x) and int(x.max()) >= self.size:
            raise ValueError(f"index out of range [0, {self.size})")
        with np.errstate(over="ignore"):
            y = self._encrypt(x)
            outside = np.flatnonzero(y >= _U64(self.size))
            while len(outside):
                y[outside] = self._encrypt(y[outside])
                outside = outside[y[outside] >= _U64(self.size)]
        return y.astype(np.int64)
