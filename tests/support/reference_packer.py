"""A plain single-process packer, written from the definition of ``beam-bpe pack``:
the result every packing run is compared with."""

from __future__ import annotations

import hashlib

import numpy as np

from transforms.pack.sequence_order import Permutation

__all__ = ["document_keys", "key_hash", "plain_draw", "reference_mixture", "reference_pack", "reference_validation"]

MASK = 2**64 - 1


def document_keys(docs):
    """(id, occurrence) of each document, in order: occurrence counts the earlier documents with its id."""
    seen = {}
    keys = []
    for doc_id, _ in docs:
        keys.append((doc_id, seen.get(doc_id, 0)))
        seen[doc_id] = seen.get(doc_id, 0) + 1
    return keys


def key_hash(doc_key) -> int:
    """The 64-bit hash of an (id, occurrence) key: BLAKE2b of the id, salted with the occurrence."""
    doc_id, occurrence = doc_key
    salt = b"" if occurrence == 0 else occurrence.to_bytes(16, "little")
    return int.from_bytes(hashlib.blake2b(doc_id.encode("utf-8"), digest_size=8, salt=salt).digest(), "big")


def plain_draw(hashed: int, seed: int, name: str, repeat: int) -> int:
    """A document's draw in a repeat of a mixture, from its definition: SplitMix64's finaliser
    of its key's hash XOR a BLAKE2b salt of (seed, source, repeat), in Python integers."""
    z = hashed ^ int.from_bytes(hashlib.blake2b(f"{seed}:{name}:{repeat}".encode(), digest_size=8).digest(), "little")
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def reference_mixture(sources, budgets, seed=0, fraction=0.0):
    """(training stream, validation stream) of a mixture, as (SOURCE:ID, tokens) documents:
    the validation split by key over all sources (in name order); per source, full
    passes over its training documents, then those drawn while the tokens before
    them are below the rest; the stream repeat after repeat, sources in name order,
    documents in input order."""
    names = sorted(sources)
    docs = [doc for name in names for doc in sources[name]]
    keys = document_keys(docs)
    held = reference_validation(docs, fraction)
    owner = [name for name in names for _ in sources[name]]
    repeats = {}
    for name in names:
        train = [d for d in range(len(docs)) if owner[d] == name and keys[d] not in held]
        tokens = sum(len(docs[d][1]) for d in train)
        full, rest = divmod(budgets[name], tokens)
        chosen = {r: set(train) for r in range(full)}
        if rest:
            order = sorted(train, key=lambda d: (plain_draw(key_hash(keys[d]), seed, name, full), *keys[d]))
            taken, chosen[full] = 0, set()
            for d in order:
                if taken >= rest:
                    break
                chosen[full].add(d)
                taken += len(docs[d][1])
        repeats[name] = chosen
    train = [(f"{owner[d]}:{docs[d][0]}", docs[d][1]) for r in range(max(len(c) for c in repeats.values()))
             for name in names for d in sorted(repeats[name].get(r, ()))]
    validation = [(f"{owner[d]}:{doc_id}", tokens) for d, (doc_id, tokens) in enumerate(docs) if keys[d] in held]
    return train, validation


def reference_validation(docs, fraction=0.0, documents=0):
    """The (id, occurrence) keys of the validation split, computed plainly from the definition."""

    def key(doc_key):
        return key_hash(doc_key), *doc_key

    keys = document_keys(docs)
    if documents:
        last = sorted(key(k) for k in keys)[documents - 1]
        return {k for k in keys if key(k) <= last}
    return {k for k in keys if key(k)[0] < fraction * 2**64}


def reference_pack(docs, length, split_documents=True, drop_remainder=False, pad_id=0, seed=0,
                   validation=(), window_tokens=1 << 22):
    """A plain single-process packer: {split: [(input_ids, real, doc_starts, doc_ids)] in output order}.

    Documents in order, each split's stream cut every ``length`` tokens (or whole
    documents best-fit within windows of the stream), the tail padded or
    dropped, the sequences in the order of the seeded permutation.
    """
    result = {}
    for split in ("train", "validation"):
        chosen = [(i, list(t)) for (i, t), key in zip(docs, document_keys(docs))
                  if (key in validation) == (split == "validation")]
        sequences = (_reference_stream(chosen, length, drop_remainder, pad_id) if split_documents
                     else _reference_best_fit(chosen, length, pad_id, window_tokens))
        positions = Permutation(len(sequences), seed, split)(np.arange(len(sequences)))
        result[split] = [sequences[i] for i in np.argsort(positions)]
    return result


def _reference_stream(docs, length, drop_remainder, pad_id):
    stream, owner = [], []
    for number, (_, tokens) in enumerate(docs):
        stream += tokens
        owner += [number] * len(tokens)
    sequences = []
    for k in range(0, len(stream), length):
        chunk = stream[k: k + length]
        if len(chunk) < length and drop_remainder:
            break
        starts = [j for j in range(len(chunk)) if j == 0 or owner[k + j] != owner[k + j - 1]]
        ids = [docs[owner[k + j]][0] for j in starts]
        sequences.append((chunk + [pad_id] * (length - len(chunk)), len(chunk), starts, ids))
    return sequences


def _reference_best_fit(docs, length, pad_id, window_tokens):
    windows, position = {}, 0
    for doc_id, tokens in docs:
        if tokens:
            windows.setdefault(position // window_tokens, []).append((doc_id, tokens))
        position += len(tokens)
    sequences = []
    for window in sorted(windows):
        pieces = [(doc_id, tokens[i: i + length]) for doc_id, tokens in windows[window]
                  for i in range(0, len(tokens), length)]
        order = sorted(range(len(pieces)), key=lambda p: (-len(pieces[p][1]), p))
        bins = []  # lists of pieces
        for p in order:
            size = len(pieces[p][1])
            fits = [b for b in range(len(bins)) if length - sum(len(t) for _, t in bins[b]) >= size]
            if fits:
                best = min(fits, key=lambda b: (length - sum(len(t) for _, t in bins[b]), b))
                bins[best].append(pieces[p])
            else:
                bins.append([pieces[p]])
        for content in bins:
            tokens = [t for _, piece in content for t in piece]
            starts = [sum(len(t) for _, t in content[:j]) for j in range(len(content))]
            sequences.append((tokens + [pad_id] * (length - len(tokens)), len(tokens), starts,
                              [doc_id for doc_id, _ in content]))
    return sequences
