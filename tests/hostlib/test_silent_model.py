"""The worker's silent rounds against a model of the switch (silent_model.py), under
hypothesis-generated sparsity patterns, with and without loss both ways: every rank's
sum is numpy's, and each rank keeps to its packet budget. Milliseconds per case, so
many patterns and loss draws run; test_silent_switch.py runs the real program."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from p4reduce.job import announce_rounds, closing_rounds
from silent_model import run_model
from silent_patterns import cases, check_budget, nonzero_blocks, tensors

K = 4


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases, loss=st.sampled_from([0.0, 0.0, 0.1, 0.25]), seed=st.integers(0, 99))
def test_silent_rounds_give_numpy_sums_within_the_packet_budget(case, loss, seed):
    """Two calls per rank (the second's tensors another pattern draw): slot versions
    and stray frames of the first call carry over, as in a Worker."""
    pattern, n, nblocks, slots, tseed = case
    first, second = (
        tensors(pattern, n, nblocks, K, tseed),
        tensors(pattern, n, nblocks, K, tseed + 1),
    )
    res = run_model([[a, b] for a, b in zip(first, second)], slots=slots, loss=loss, seed=seed, k=K)
    for call, xs in enumerate((first, second)):
        want = np.sum([x.astype(np.int64) for x in xs], axis=0)
        masks = [x.reshape(-1, K).any(axis=1) for x in xs]
        used = announce_rounds(nblocks, slots, block_values=K)
        closing = closing_rounds(masks, slots, block_values=K)
        for r, x in enumerate(xs):
            np.testing.assert_array_equal(res.sums[r][call], want)
            check_budget(res.stats[r][call], nonzero_blocks(x, K), used, closing, loss == 0)
