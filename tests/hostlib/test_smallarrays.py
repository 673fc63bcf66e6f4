"""hostlib.smallarrays gives numpy's result on both sides of its size threshold, and
`selection` picks what its mask keeps."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from hostlib import smallarrays as sa

SIZES = st.integers(1, 2 * sa.SMALL_REDUCE + 3)


@given(SIZES, st.integers(0, 2**31))
def test_reductions_equal_numpys(n, seed):
    rng = np.random.default_rng(seed)
    ints = rng.integers(-(2**40), 2**40, n)
    floats = rng.standard_normal(n)
    assert sa.total(ints) == int(ints.sum())
    assert sa.largest(floats) == float(floats.max())
    assert sa.least(floats) == float(floats.min())


@given(SIZES, st.integers(0, 2**31))
def test_increasing_is_what_unique_leaves_unchanged(n, seed):
    rng = np.random.default_rng(seed)
    for x in (np.sort(rng.choice(4 * n, n, replace=False)), rng.integers(0, n, n)):
        unchanged = np.array_equal(np.unique(x), x)
        assert sa.increasing(x) == unchanged


@given(SIZES, st.integers(0, 2**31))
def test_once_each_is_uniques_first_indices_when_unique_keeps_every_row(n, seed):
    rng = np.random.default_rng(seed)
    for x in (rng.choice(4 * n, n, replace=False), np.sort(rng.choice(4 * n, n, replace=False))):
        x[rng.integers(0, n)] = x[rng.integers(0, n)] if rng.random() < 0.5 else x[0]
        _, first = np.unique(x, return_index=True)
        order = sa.once_each(x)
        if first.size < x.size:
            assert order is None
        else:
            assert np.array_equal(np.arange(x.size)[order], first)


@given(st.integers(0, 2 * sa.SMALL_REDUCE + 3), st.integers(0, 2**31))
def test_tally_adds_the_bincount(n, seed):
    rng = np.random.default_rng(seed)
    kinds = rng.integers(0, 8, n)
    counts = rng.integers(0, 100, 8)
    expected = counts + np.bincount(kinds, minlength=8)
    sa.tally(counts, kinds)
    assert np.array_equal(counts, expected)


@given(st.lists(st.booleans(), min_size=0, max_size=40))
def test_selection_picks_the_rows_the_mask_keeps(bits):
    mask = np.array(bits, bool)
    x = np.arange(mask.size) * 3
    kept, rows = sa.selection(mask)
    assert kept == int(mask.sum())
    assert np.array_equal(x[rows], x[mask])


@given(SIZES, st.integers(0, 2**31))
def test_consecutive_is_a_run_one_apart(n, seed):
    rng = np.random.default_rng(seed)
    start = int(rng.integers(0, 100))
    run = np.arange(start, start + n)
    swapped = run.copy()
    swapped[[0, -1]] = swapped[[-1, 0]]
    shuffled = rng.permutation(run)
    inner = run.copy()  # its ends a run's, its middle reversed (not increasing from 4 on)
    inner[1:-1] = run[1:-1][::-1]
    for x in (run, swapped, shuffled, inner, np.sort(rng.choice(2 * n, n, replace=False))):
        one_apart = np.array_equal(x, np.arange(x[0], x[0] + n))
        got = sa.consecutive(x)
        assert (got is not None) == one_apart
        if one_apart:
            assert np.array_equal(np.arange(1000)[got], x)
    assert sa.consecutive(run[:0]) is None
