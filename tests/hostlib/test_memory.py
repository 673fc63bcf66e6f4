"""What a call holds in memory besides its input: its output and a few bytes per block.

Counted with tracemalloc, which sees every buffer numpy allocates: deterministic (no
resident-set sizes, no timing), so it holds on a loaded machine. The figures for real
processes (peak RSS / tensor bytes) are bench/memory.py's (docs/benchmarks.md).
"""

from __future__ import annotations

import tracemalloc
from typing import Callable

import numpy as np
import pytest

from hostlib import Worker
from hostlib import numerics as nm
from hostlib import protocol as p
from p4net.harness import SwitchSession


def traced_peak(fn: Callable[[], object]) -> int:
    """Bytes allocated at the peak of fn() beyond what was allocated before."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        fn()
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def tensor(size: int, dtype: str) -> np.ndarray:
    return (np.arange(size) % 1999 - 999).astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
@pytest.mark.parametrize("size", [4_000_000, 4_000_000 - 5])
def test_a_payload_costs_a_few_bytes_per_block_not_a_tensor(dtype, size):
    """Blocks are views of the tensor, scans go in chunks, int32 halves are split per sent
    batch: a quarter of the tensor bounds it (it took 1x the tensor for floats, 3x for
    int32 halves, and a padded copy when the length is no multiple of 64)."""
    x = tensor(size, dtype)
    for encoding in p.Encoding:
        peak = traced_peak(lambda e=encoding: nm.make_payload(x, 2, e))
        assert peak <= 0.25 * x.nbytes, (encoding, peak / x.nbytes)


@pytest.fixture(scope="module")
def one_rank():
    with SwitchSession.inprocess() as sw:
        job = sw.create_job(1, 64, encoding="packed")
        with Worker(
            sw.descriptors(job)[0], transport=sw.transport(job.workers[0].port), timeout=0.05
        ) as w:
            yield w


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_a_call_holds_its_output_and_no_other_copy_of_the_tensor(one_rank, dtype, monkeypatch):
    """A call through the real P4 program (in-process softswitch, one rank): what it
    allocates grows with the tensor by the output's bytes only. Two sizes, so that the
    set-up's constant (frames, the switch's queue) cancels, both far larger than a scan's
    chunk and a store's rows (made small here to keep the call short). Before, the int32
    sums, their float64 dequantization and the halves' int64 join came on top: 5x, 8x."""
    monkeypatch.setattr(nm, "CHUNK_VALUES", 64 * 64)
    monkeypatch.setattr(nm, "STORE_VALUES", 16 * 64)
    small, large = tensor(16_384, dtype), tensor(81_920, dtype)
    for x in (small, large):  # exact results: the output is the sum
        assert np.array_equal(one_rank.allreduce(x), x)
    grow = traced_peak(lambda: one_rank.allreduce(large)) - traced_peak(
        lambda: one_rank.allreduce(small)
    )
    # 1.3, not 1.0: the in-process switch is traced too, and the larger call keeps more
    # slots' packets in flight (16 slots against 80); any second copy of the tensor
    # would add a whole 1.0
    assert grow <= 1.3 * (large.nbytes - small.nbytes), grow / (large.nbytes - small.nbytes)
