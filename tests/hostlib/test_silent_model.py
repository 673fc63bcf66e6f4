"""The worker's silent rounds against a model of the switch (silent_model.py), under
hypothesis-generated sparsity patterns, with and without loss both ways: every rank's
sum is numpy's, and each rank keeps to its packet budget. Milliseconds per case, so
many patterns and loss draws run; test_silent_switch.py runs the real program."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from silent_model import run_model
from silent_patterns import cases, check_budget, nonzero_blocks, tensors

K = 4


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases, loss=st.sampled_from([0.0, 0.0, 0.1, 0.25]), seed=st.integers(0, 99))
def test_silent_rounds_give_numpy_sums_within_the_packet_budget(case, loss, seed):
    pattern, n, nblocks, slots, tseed = case
    xs = tensors(pattern, n, nblocks, K, tseed)
    res = run_model(xs, slots=slots, loss=loss, seed=seed, k=K)
    want = np.sum([x.astype(np.int64) for x in xs], axis=0)
    for got in res.sums:
        np.testing.assert_array_equal(got, want)
    for x, stats in zip(xs, res.stats):
        check_budget(stats, nonzero_blocks(x, K), min(slots, nblocks), loss == 0.0)
