"""The demo's result check (mininet/demo.py `check`, used by `make run`, the system tests and
the benchmark) against docs/protocol.md section 10 at magnitudes where the bound's relative
form no longer holds: a correct float64 sum of tiny values must pass, a wrong one fail."""

from __future__ import annotations

import numpy as np
import pytest

import p4net.demo
from hostlib import numerics as nm


def switch_sum(inputs: list[np.ndarray]) -> np.ndarray:
    """What the workers get back: section 10's quantize / int32 sum / dequantize."""
    n = len(inputs)
    blocks = [nm.to_blocks(x.astype(np.float64)) for x in inputs]
    exps = np.max([nm.block_exponents(b) for b in blocks], axis=0)
    total = np.sum([nm.quantize(b, exps, n).astype(np.int64) for b in blocks], axis=0)
    out = nm.dequantize(total.astype(np.int32), exps, n).reshape(-1)[: inputs[0].size]
    return out.astype(inputs[0].dtype)


@pytest.mark.parametrize("scale", [1e-45, 1e-100, 1e-300, 5e-324])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_correct_sum_of_tiny_values_passes(scale, dtype):
    rng = np.random.default_rng(4)
    inputs = [(rng.standard_normal(640) * scale).astype(dtype) for _ in range(3)]
    assert p4net.demo.check(switch_sum(inputs), inputs, dtype)


@pytest.mark.parametrize("scale", [1e-300, 1e-20, 1.0, 1e30])
def test_wrong_sum_fails(scale):
    rng = np.random.default_rng(5)
    inputs = [rng.standard_normal(640) * scale for _ in range(3)]
    result = switch_sum(inputs)
    result[77] += 1e-6 * scale if scale > 1e-290 else 1e-40  # beyond the bound
    assert not p4net.demo.check(result, inputs, "float64")
    # a rank's outcome names the wrong block (element 77 is in block 1 of 64 values)
    assert p4net.demo.wrong_blocks(result, inputs, "float64").tolist() == [1]
