"""The packing algorithm (transforms/pack/packing_algorithm.py, transforms/pack/sequence_order.py) against a plain single-process packer.

The distributed flow is replayed in-process: documents cut into arbitrary units,
each unit counted, cut or windowed on its own with only the offsets the first
pass gives it, the pieces grouped by output file and assembled. The result must
equal tests.support.reference_packer.reference_pack whatever the units.
"""

import collections
import hashlib

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.reference_packer import document_keys, reference_pack, reference_validation
from transforms.pack import packing_algorithm as packing
from transforms.pack.packing_algorithm import (
    Layout, Offsets, Pieces, UnitDocuments, assemble, best_fit, cut_stream, pack_window, plan_splits, read_runs,
    split_by_file, window_of,
)
from transforms.pack.sequence_order import (
    Occurrences, Permutation, ValidationRule, id_hashes, smallest_keys, split_masks,
)


def distributed_pack(docs, units, layout, rule, pad_id=0):
    """transforms.pack's steps, run in-process on ``units`` (lists of documents):
    each unit's tokens of a split set aside as a stream, pieces referring to them."""
    streams, documents = {}, []
    totals, seen = collections.Counter(i for i, _ in docs), collections.Counter()
    for key, unit in enumerate(units):
        lengths = {split: np.zeros(0, np.int64) for split in ("train", "validation")}
        ids = {split: pa.array([], pa.string()) for split in ("train", "validation")}
        # Each unit knows only how many documents of each repeated id come before it.
        earlier = {i: seen[i] for i, _ in unit if totals[i] > 1}
        seen.update(i for i, _ in unit)
        for split, split_lengths, tokens, split_ids in unit_splits(unit, rule, earlier):
            lengths[split], ids[split], streams[split, key] = split_lengths, split_ids, tokens
        documents.append(UnitDocuments((0, key), lengths, ids))
    offsets = Offsets.from_counts(reversed([(d.key, d.counts()) for d in documents]))  # arrival order must not matter
    by_file = collections.defaultdict(list)
    if layout.split_documents:
        plans = plan_splits(offsets, layout)
        for d in documents:
            for split in ("train", "validation"):
                pieces = cut_stream(d.lengths[split], d.ids[split], offsets.starts[d.key][split], plans[split],
                                    offsets.source(d.key))
                for file, part in split_by_file(pieces, plans[split]).items():
                    by_file[split, file].append(part)
    else:
        windows = collections.defaultdict(list)
        for d in documents:
            for split in ("train", "validation"):
                lengths = d.lengths[split]
                within = np.cumsum(lengths) - lengths
                w = window_of(offsets.starts[d.key][split] + within, layout)
                for window in np.unique(w):
                    m = w == window
                    windows[split, int(window)].append((lengths[m], d.ids[split].filter(m),
                                                        np.full(m.sum(), offsets.source(d.key)), within[m]))
        packed, totals = {}, collections.Counter()
        for (split, window), batches in sorted(windows.items()):
            lengths, ids, sources, starts = (np.concatenate([b[0] for b in batches]),
                                             pa.concat_arrays([b[1] for b in batches]),
                                             np.concatenate([b[2] for b in batches]),
                                             np.concatenate([b[3] for b in batches]))
            kept = lengths > 0
            pieces, bins = pack_window(lengths[kept], ids.filter(kept), layout.length, sources[kept], starts[kept])
            packed[split, window] = (pieces, totals[split])
            totals[split] += bins
        plans = plan_splits(offsets, layout, dict(totals))
        for (split, window), (pieces, first) in packed.items():
            pieces.sequence = pieces.sequence + first
            for file, part in split_by_file(pieces, plans[split]).items():
                by_file[split, file].append(part)
    result = {}
    for split, plan in plans.items():
        def read(source, offset, out, split=split):
            out[:] = streams[split, offsets.keys[source][1]][offset: offset + len(out)]

        blocks = [assemble(Pieces.concat(by_file[split, f]), plan, f, pad_id, np.uint32, read)
                  for f in range(plan.files)]
        result[split] = [sequence for block in blocks for sequence in block_sequences(block)]
    return result, plans


def unit_splits(unit, rule, earlier):
    ids = [i for i, _ in unit]
    lengths = np.array([len(t) for _, t in unit], dtype=np.int64)
    tokens = np.array([x for _, t in unit for x in t], dtype=np.uint32)
    for split, mask in split_masks(ids, rule, Occurrences(earlier)(ids)).items():
        if mask.any():
            yield split, lengths[mask], tokens[np.repeat(mask, lengths)], pa.array(ids, pa.string()).filter(mask)


def block_sequences(block):
    for r in range(block.rows):
        lo, hi = block.doc_offsets[r], block.doc_offsets[r + 1]
        yield (block.input_ids[r].tolist(), int(block.real[r]), block.doc_starts[lo:hi].tolist(),
               block.doc_ids[lo:hi].to_pylist())


def cut_into_units(docs, cuts):
    bounds = sorted({0, len(docs), *(c % (len(docs) + 1) for c in cuts)})
    return [docs[a:b] for a, b in zip(bounds, bounds[1:])]


documents = st.lists(
    st.tuples(st.sampled_from([f"doc{i}" for i in range(40)]), st.lists(st.integers(0, 999), max_size=40)),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(
    docs=documents,
    cuts=st.lists(st.integers(0, 100), max_size=6),
    length=st.integers(1, 17),
    split_documents=st.booleans(),
    drop_remainder=st.booleans(),
    fraction=st.sampled_from([0.0, 0.3]),
    seed=st.integers(0, 3),
    per_file=st.integers(1, 5),
    window_tokens=st.sampled_from([7, 50, 1 << 20]),
)
def test_distributed_packing_equals_the_reference(docs, cuts, length, split_documents, drop_remainder, fraction,
                                                  seed, per_file, window_tokens):
    drop_remainder = drop_remainder and split_documents
    layout = Layout(length, split_documents, drop_remainder, per_file, window_tokens, seed)
    rule = ValidationRule.fraction(fraction) if fraction else None
    validation = reference_validation(docs, fraction) if fraction else set()
    expected = reference_pack(docs, length, split_documents, drop_remainder, 7, seed, validation, window_tokens)
    got, plans = distributed_pack(docs, cut_into_units(docs, cuts), layout, rule, pad_id=7)
    assert got == expected
    # Every token accounted for: real tokens out + dropped = tokens in, per split.
    for split, plan in plans.items():
        tokens_in = sum(len(t) for (_, t), key in zip(docs, document_keys(docs))
                        if (key in validation) == (split == "validation"))
        assert sum(real for _, real, _, _ in got[split]) + plan.dropped_tokens == tokens_in == plan.tokens
        assert plan.padding_tokens == sum(length - real for _, real, _, _ in got[split])


def test_the_units_do_not_change_the_result():
    rng = np.random.default_rng(1)
    docs = [(f"d{i}", rng.integers(0, 50, rng.integers(0, 30)).tolist()) for i in range(200)]
    for split_documents in (True, False):
        layout = Layout(16, split_documents, per_file=7, window_tokens=300, seed=5)
        rule = ValidationRule.fraction(0.2)
        one, _ = distributed_pack(docs, [docs], layout, rule)
        many, _ = distributed_pack(docs, cut_into_units(docs, range(3, 200, 9)), layout, rule)
        assert one == many and one["validation"]


@pytest.mark.parametrize("size", [0, 1, 2, 3, 4, 5, 100, 1000, 4097])
def test_permutation_is_a_bijection(size):
    positions = Permutation(size, seed=3, name="train")(np.arange(size))
    assert sorted(positions.tolist()) == list(range(size))
    # Any subset, in any order, maps to the same positions.
    subset = np.arange(size)[::-3]
    assert Permutation(size, 3, "train")(subset).tolist() == positions[subset].tolist()


def test_permutation_depends_on_seed_and_name():
    base = Permutation(1000, 0, "train")(np.arange(1000))
    assert (base != np.arange(1000)).mean() > 0.9
    assert (Permutation(1000, 1, "train")(np.arange(1000)) != base).mean() > 0.9
    assert (Permutation(1000, 0, "validation")(np.arange(1000)) != base).mean() > 0.9
    with pytest.raises(ValueError):
        Permutation(10, 0)(np.array([10]))


@settings(max_examples=200, deadline=None)
@given(sizes=st.lists(st.integers(1, 12), max_size=30))
def test_best_fit_matches_a_plain_best_fit_decreasing(sizes):
    bins, positions, count = best_fit(sizes, 12)
    expected, used = {}, []
    for i in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        fits = [b for b in range(len(used)) if 12 - used[b] >= sizes[i]]
        b = min(fits, key=lambda b: (12 - used[b], b)) if fits else len(used)
        if b == len(used):
            used.append(0)
        expected[i] = (b, used[b])
        used[b] += sizes[i]
    assert [(int(b), int(p)) for b, p in zip(bins, positions)] == [expected[i] for i in range(len(sizes))]
    assert count == len(used)


@settings(max_examples=100, deadline=None)
@given(ids=st.lists(st.text(max_size=5), max_size=50), n=st.integers(1, 10))
def test_validation_documents_are_the_n_smallest_hashes(ids, n):
    docs = [(i, []) for i in ids]
    occurrences = np.array([k for _, k in document_keys(docs)], np.int64)
    hashes = id_hashes(ids, occurrences)
    half = len(ids) // 2
    # Local n-smallest lists merge into the global one, as Top.Smallest does.
    local = smallest_keys(ids[:half], hashes[:half], n, occurrences[:half]) + smallest_keys(
        ids[half:], hashes[half:], n, occurrences[half:])
    keys = sorted(local)[:n]
    if not ids:
        assert keys == []
        return
    rule = ValidationRule(last=keys[-1])
    chosen = rule.is_validation(ids, hashes, occurrences)
    # Exactly n documents whatever the ids repeat: keys are unique.
    assert chosen.sum() == min(n, len(ids))
    assert {key for key, c in zip(document_keys(docs), chosen) if c} == reference_validation(
        docs, documents=min(n, len(ids)))


def test_validation_fraction_is_about_the_fraction_and_stable():
    ids = [f"doc-{i}" for i in range(20000)]
    chosen = ValidationRule.fraction(0.1).is_validation(ids, id_hashes(ids))
    assert 0.09 < chosen.mean() < 0.11
    assert {(i, 0) for i, c in zip(ids, chosen) if c} == reference_validation([(i, []) for i in ids], 0.1)


def test_a_repeated_id_splits_by_its_occurrence():
    ids = ["same"] * 2000
    occurrences = Occurrences({"same": 0})(ids[:700])
    occurrences = np.concatenate([occurrences, Occurrences({"same": 700})(ids[700:])])
    assert occurrences.tolist() == list(range(2000))
    chosen = ValidationRule.fraction(0.1).is_validation(ids, id_hashes(ids, occurrences), occurrences)
    assert 0.07 < chosen.mean() < 0.13
    # The first occurrence keeps the hash of the id alone: unique ids split as they always did.
    assert id_hashes(["same"], [0])[0] == id_hashes(["same"])[0] == int.from_bytes(
        hashlib.blake2b(b"same", digest_size=8).digest(), "big")
    assert Occurrences({})(["a", "a"]).tolist() == [0, 0]  # ids not named as repeated are taken as unique


def test_assemble_refuses_pieces_that_do_not_tile():
    layout = Layout(4)
    plan = packing.SplitPlan("train", 1, 8, 2, 0, layout)
    stream = np.arange(8, dtype=np.uint32)

    def read(source, offset, out):
        out[:] = stream[offset: offset + len(out)]

    def pieces(sequence, position, length, offset):
        n = len(sequence)
        return Pieces(np.array(sequence), np.array(position), np.array(length), np.zeros(n, np.int64),
                      np.array(offset), pa.array(["a"] * n))

    good = pieces([0, 1], [0, 0], [4, 4], [0, 4])
    assert assemble(good, plan, 0, 0, np.uint32, read).input_ids.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    with pytest.raises(RuntimeError, match="tile"):
        assemble(pieces([0, 1], [0, 1], [4, 3], [0, 4]), plan, 0, 0, np.uint32, read)  # a gap
    with pytest.raises(RuntimeError, match="tile"):
        assemble(pieces([0], [0], [4], [0]), plan, 0, 0, np.uint32, read)  # a row missing


def test_read_runs_merge_only_what_follows_in_stream_and_file():
    # Three pieces of stream 0 that follow each other in the stream and in the file,
    # one of stream 1, and one of stream 0 that follows in the stream but not in the file.
    sequence, position = np.array([0, 0, 1, 1, 3]), np.array([0, 2, 0, 3, 0])
    length, source, offset = np.array([2, 2, 3, 1, 4]), np.array([0, 0, 0, 1, 0]), np.array([10, 12, 14, 0, 17])
    pieces = Pieces(sequence, position, length, source, offset, pa.array(list("abcde")))
    assert list(read_runs(pieces, 4)) == [(0, 10, 0, 7), (0, 17, 12, 4), (1, 0, 7, 1)]


def test_layout_refuses_drop_remainder_with_whole_documents():
    with pytest.raises(ValueError, match="drop_remainder"):
        Layout(8, split_documents=False, drop_remainder=True)
