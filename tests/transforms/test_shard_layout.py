"""plan_shards: which runs make which shard, from the runs alone."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transforms.shard_layout import RowGroup, Run, plan_shards


def _run(file, piece, first_record, *tokens):
    return Run(file, piece, first_record, f"/tmp/{file}-{piece}-{first_record}", tuple(RowGroup(t, 10 * t) for t in tokens))


def _stream(plans):
    """Every (run path, row group) the shards hold, in shard order."""
    return [(part.path, number) for plan in plans for part in plan.parts for number in range(part.first, part.stop)]


def _in_input_order(runs):
    ordered = sorted(runs, key=lambda run: (run.file, run.piece, run.first_record))
    return [(run.path, number) for run in ordered for number in range(len(run.row_groups))]


runs_strategy = st.lists(
    st.tuples(st.sampled_from("abc"), st.integers(1, 5), st.integers(0, 2),
              st.lists(st.integers(1, 50), min_size=1, max_size=4)),
    max_size=12, unique_by=lambda r: r[:3],
).map(lambda rows: [_run(f, p, i, *t) for f, p, i, t in rows])


@settings(max_examples=200, deadline=None)
@given(runs_strategy, st.integers(0, 7), st.integers(1, 80), st.randoms())
def test_shards_hold_every_row_group_once_in_input_order_whatever_the_runs_order(runs, num_shards, small, rnd):
    plans = plan_shards(runs, num_shards, small)
    shuffled = list(runs)
    rnd.shuffle(shuffled)
    assert plan_shards(shuffled, num_shards, small) == plans
    assert _stream(plans) == _in_input_order(runs)
    assert [plan.index for plan in plans] == list(range(len(plans)))
    assert all(plan.count == len(plans) for plan in plans)
    assert len(plans) == (num_shards or len(plans)) and plans
    # Footer totals add up, shard by shard.
    by_path = {run.path: run for run in runs}
    for plan in plans:
        assert plan.input_bytes == sum(10 * by_path[p.path].row_groups[n].tokens
                                       for p in plan.parts for n in range(p.first, p.stop))


def test_big_runs_are_shards_of_their_own_and_small_neighbours_are_combined():
    runs = [_run("a", 1, 0, 60, 40), _run("b", 1, 0, 5), _run("c", 1, 0, 5), _run("d", 1, 0, 50), _run("e", 1, 0, 3)]
    plans = plan_shards(runs, 0, small_tokens=50)
    assert [[part.path for part in plan.parts] for plan in plans] == [
        ["/tmp/a-1-0"], ["/tmp/b-1-0", "/tmp/c-1-0"], ["/tmp/d-1-0"], ["/tmp/e-1-0"]]
    assert [plan.whole_run for plan in plans] == ["/tmp/a-1-0", None, "/tmp/d-1-0", "/tmp/e-1-0"]


def test_a_number_of_shards_deals_row_groups_by_where_they_start():
    runs = [_run("a", 1, 0, 10, 10, 10, 10), _run("b", 1, 0, 10, 10, 10, 10)]
    plans = plan_shards(runs, 4, small_tokens=1)
    assert [[tuple(part) for part in plan.parts] for plan in plans] == [
        [("/tmp/a-1-0", 0, 2)], [("/tmp/a-1-0", 2, 4)], [("/tmp/b-1-0", 0, 2)], [("/tmp/b-1-0", 2, 4)]]
    assert all(plan.whole_run is None for plan in plans)
    # More shards than row groups: the rest are empty, still numbered.
    plans = plan_shards([_run("a", 1, 0, 10)], 3, small_tokens=1)
    assert [len(plan.parts) for plan in plans] == [1, 0, 0]
    assert plans[0].whole_run == "/tmp/a-1-0"


def test_no_rows_make_one_empty_shard():
    assert [(plan.index, plan.count, plan.parts) for plan in plan_shards([], 0, 10)] == [(0, 1, ())]
    assert len(plan_shards([], 2, 10)) == 2


def test_two_runs_claiming_one_place_are_an_error_and_runs_without_a_place_are_kept():
    with pytest.raises(ValueError, match="same place"):
        plan_shards([_run("a", 1, 0, 5), Run("a", 1, 0, "/tmp/other", (RowGroup(5, 5),))], 0, 10)
    unplaced = [Run("", 0, 0, f"/tmp/{name}", (RowGroup(5, 5),)) for name in "zyx"]
    random.shuffle(unplaced)
    plans = plan_shards(unplaced, 0, 1)
    assert [plan.parts[0].path for plan in plans] == ["/tmp/x", "/tmp/y", "/tmp/z"]
