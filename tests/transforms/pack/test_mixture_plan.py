"""The plan of a token-budgeted mixture (transforms/pack/mixture_plan.py) against a plain one.

The distributed draw (token sums per bucket of draws in arbitrary units, the
crossing bucket, its documents sorted) must choose exactly the documents a
plain sort of all of them by (draw, id, occurrence) chooses, and the budget is
met to within one document.
"""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.reference_packer import plain_draw
from transforms.pack.mixture_plan import (
    BucketCounts, FILES_PER_SOURCE, MixtureSpec, SourceCounts, draw_last, draws, find_crossing, plan_mixture_json, plan_source,
    weighted_budgets,
)
from transforms.pack.sequence_order import id_hashes

def plain_chosen(docs, budget, seed=0, name="web"):
    """{repeat: indices of the documents it holds}: full passes, then the documents
    in (draw, id, occurrence) order while the tokens before each are below the rest."""
    tokens = sum(length for _, _, length in docs)
    full, rest = divmod(budget, tokens)
    chosen = {r: list(range(len(docs))) for r in range(full)}
    if rest:
        hashes = id_hashes([i for i, _, _ in docs], [o for _, o, _ in docs])
        order = sorted(range(len(docs)), key=lambda d: (plain_draw(int(hashes[d]), seed, name, full), docs[d][0],
                                                         docs[d][1]))
        taken, drawn = 0, []
        for d in order:
            if taken >= rest:
                break
            drawn.append(d)
            taken += docs[d][2]
        chosen[full] = sorted(drawn)
    return chosen


def distributed_plan(docs, budget, cuts, bits, seed=0, name="web"):
    """The plan as the Beam part computes it: each unit counts its buckets on its
    own, and only the crossing bucket's documents are gathered."""
    counts = SourceCounts({"train": len(docs), "validation": 0},
                          {"train": sum(length for _, _, length in docs), "validation": 0})
    plan = plan_source(name, budget, counts)
    bounds = sorted({0, len(docs), *(c % (len(docs) + 1) for c in cuts)})
    units = [docs[a:b] for a, b in zip(bounds, bounds[1:])]
    unit_draws = [draws(id_hashes([i for i, _, _ in u], [o for _, o, _ in u]), seed, name, plan.full) for u in units]
    buckets = BucketCounts.add(BucketCounts.of(d, np.array([length for _, _, length in unit], np.int64), bits)
                               for unit, d in zip(units, unit_draws))
    crossing = find_crossing(buckets, plan.rest)
    if crossing is None:
        return plan, unit_draws
    candidates = [(int(d[j]), unit[j][0], unit[j][1], unit[j][2])
                  for unit, d in zip(units, unit_draws) for j in range(len(unit))
                  if int(d[j]) >> (64 - bits) == crossing.bucket]
    return draw_last(plan, crossing, candidates), unit_draws


source_docs = st.lists(st.tuples(st.sampled_from([f"d{i}" for i in range(30)]), st.integers(0, 60)), min_size=1,
                       max_size=60).map(
    lambda docs: [(i, sum(1 for j, _ in docs[:k] if j == i), length) for k, (i, length) in enumerate(docs)])


@settings(max_examples=200, deadline=None)
@given(docs=source_docs, epochs=st.floats(0.01, 3.5), cuts=st.lists(st.integers(0, 80), max_size=5),
       bits=st.sampled_from([1, 3, 16]), seed=st.integers(0, 2))
def test_the_distributed_draw_chooses_what_a_plain_sort_chooses(docs, epochs, cuts, bits, seed):
    tokens = sum(length for _, _, length in docs)
    if not tokens:
        return
    budget = max(1, int(tokens * epochs))
    plan, unit_draws = distributed_plan(docs, budget, cuts, bits, seed)
    all_draws = np.concatenate(unit_draws)
    ids, occurrences = [i for i, _, _ in docs], np.array([o for _, o, _ in docs])
    chosen = {r: np.flatnonzero(plan.chosen(r, all_draws, ids, occurrences)).tolist() for r in range(plan.repeats + 1)}
    expected = plain_chosen(docs, budget, seed)
    assert {r: c for r, c in chosen.items() if c or r in expected} == expected
    taken = sum(docs[d][2] for r in chosen for d in chosen[r])
    assert taken == plan.train_tokens
    assert sum(len(c) for c in chosen.values()) == plan.train_documents
    # The budget, to within one document: at least it, and less than one document more.
    assert budget <= taken < budget + max(length for _, _, length in docs)


def test_a_repeat_is_a_new_draw_and_the_seed_another():
    hashes = id_hashes([f"doc{i}" for i in range(200)])
    first, second = draws(hashes, 0, "web", 0), draws(hashes, 0, "web", 1)
    assert not np.array_equal(np.argsort(first), np.argsort(second))
    assert not np.array_equal(first, draws(hashes, 1, "web", 0))
    assert not np.array_equal(first, draws(hashes, 0, "code", 0))
    assert np.array_equal(first, draws(hashes, 0, "web", 0))
    assert [int(d) for d in first[:5]] == [plain_draw(int(h), 0, "web", 0) for h in hashes[:5]]


@pytest.mark.parametrize("bits", [1, 16])
def test_epochs_of_two_point_six_are_two_full_passes_and_sixty_percent_of_a_third(bits):
    docs = [(f"doc{i}", 0, 10) for i in range(100)]  # 1000 tokens in documents of 10
    plan, _ = distributed_plan(docs, 2600, [7, 50], bits)
    assert (plan.full, plan.rest, plan.drawn, plan.train_tokens) == (2, 600, (60, 600), 2600)
    mixture = plan_mixture_json(MixtureSpec(("web",), (2600,)), {"web": plan})
    assert mixture["sources"]["web"]["epochs"] == 2.6
    assert mixture["sources"]["web"]["train"] == {"documents": 260, "tokens": 2600, "full_passes": 2}


@settings(max_examples=200, deadline=None)
@given(weights=st.lists(st.integers(1, 1000), min_size=1, max_size=6), total=st.integers(1, 10**12))
def test_weighted_budgets_add_up_to_the_total_in_proportion(weights, total):
    named = {f"s{i}": Fraction(w) for i, w in enumerate(weights)}
    budgets = weighted_budgets(named, total)
    assert sum(budgets.values()) == total
    for name, weight in named.items():
        assert abs(budgets[name] - total * weight / sum(named.values())) < 1


def test_weighted_budgets_of_decimal_weights_are_exact():
    assert weighted_budgets({"a": Fraction("0.7"), "b": Fraction("0.2"), "c": Fraction("0.1")}, 1000) == {
        "a": 700, "b": 200, "c": 100}
    assert weighted_budgets({"a": Fraction(1), "b": Fraction(1), "c": Fraction(1)}, 10) == {"a": 4, "b": 3, "c": 3}


def test_the_spec_knows_each_files_source_and_refuses_what_cannot_be_met():
    spec = MixtureSpec(("code", "web", "wiki"), (5, 6, 7))
    files = [0, 1, FILES_PER_SOURCE, 2 * FILES_PER_SOURCE, 2 * FILES_PER_SOURCE + 7]
    assert [spec.source_of(f) for f in files] == [0, 0, 1, 2, 2]
    with pytest.raises(ValueError):
        MixtureSpec(("web", "code"), (1, 1))  # not in name order
    with pytest.raises(ValueError):
        MixtureSpec(("code", "web"), (0, 1))  # a budget of 0


def test_a_source_without_training_tokens_draws_nothing():
    plan = plan_source("web", 100, SourceCounts({"train": 0, "validation": 3}, {"train": 0, "validation": 40}))
    assert (plan.full, plan.rest, plan.repeats, plan.train_tokens) == (0, 100, 0, 0)
    assert find_crossing(BucketCounts.add([]), plan.rest) is None
    assert not plan.chosen(0, np.zeros(0, np.uint64), [], np.zeros(0, np.int64)).any()
