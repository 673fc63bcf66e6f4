"""The packed value encoding (docs/protocol.md section 10): a packed job's DATA lanes carry
q + bias, the switch adds the block as one word, a SKIP adds the bias in every
lane, and every round's lanes come back as sum(q) + N * bias. Frames are built here by
hand, biased with the specification's bias (packed_bias, below), not the worker's code.
"""

from __future__ import annotations

import numpy as np
import pytest

from hostlib import protocol as p
from hostlib.protocol import END_OF_STREAM as END, Flag, MsgType


def packed_bias(n: int) -> int:
    """floor((2^31 - 1) / N): written out here, not imported, so the tests check the
    controller's and the worker's value against the specification (protocol.md 10)."""
    return ((1 << 31) - 1) // n


BLOCK_VALUES = p.BLOCK_VALUES
PACKED = p.Encoding.PACKED


def _lanes(frame) -> np.ndarray:
    """A result's lanes as the unsigned 32-bit words the switch summed."""
    return frame.values.view(np.uint32).astype(np.int64)


def _announce(job, n: int, next_block: int = 0, slot: int = 0) -> None:
    for rank in range(n):
        job.send(rank, MsgType.ANNOUNCE, slot=slot, next_block=next_block, flags=Flag.PACKED)
    for res in job.results().values():
        assert res.header.flags == Flag.PACKED and res.header.next_block == next_block


@pytest.mark.parametrize("n", [1, 2, 3, 8])
def test_dense_round_sums_biased_lanes_exactly(switch, n):
    job = switch.add_job(job=20 + n, n=n, encoding=PACKED)
    bias = packed_bias(n)
    _announce(job, n)
    rng = np.random.default_rng(n)
    q = {r: rng.integers(-bias, bias + 1, BLOCK_VALUES) for r in range(n)}
    q[0][:2] = bias, -bias  # the extremes of the quantized range
    res = job.round(
        1, 0, {r: q[r] + bias for r in range(n)}, {r: (END, 0) for r in range(n)}, flags=Flag.PACKED
    )
    exact = sum(q.values())
    for rank, r in res.items():
        assert r.header.msg_type == MsgType.RESULT and r.header.flags == Flag.PACKED
        assert r.header.rank == rank and r.header.block == 0
        assert np.array_equal(_lanes(r) - n * bias, exact)
    job.assert_silent()
    assert job.stats()["rounds_completed"] == 2 and job.stats()["overflows"] == 0


@pytest.mark.parametrize("skips", [(0,), (2,), (0, 2), (1, 2), (0, 1, 2)])
def test_skip_contributes_the_bias_wherever_it_comes(switch, skips):
    """A SKIP first (it stores the bias), in the middle, last (it completes the round and
    carries the sum), or every rank: the lanes are always sum(q) + N * bias."""
    n = 3
    job = switch.add_job(job=30, n=n, encoding=PACKED)
    bias = packed_bias(n)
    _announce(job, n)
    rng = np.random.default_rng(len(skips))
    q = {
        r: (
            np.zeros(BLOCK_VALUES, np.int64)
            if r in skips
            else rng.integers(-bias, bias + 1, BLOCK_VALUES)
        )
        for r in range(n)
    }
    res = job.round(
        1,
        0,
        {r: None if r in skips else q[r] + bias for r in range(n)},
        {r: (END, 0) for r in range(n)},
        flags=Flag.PACKED,
    )
    for r in res.values():
        assert r.values is not None, "the round's result carries the lanes even after SKIPs"
        assert np.array_equal(_lanes(r) - n * bias, sum(q.values()))


@pytest.mark.parametrize("n", [1, 2, 5, 32])
def test_largest_lanes_do_not_carry_into_their_neighbours(switch, n):
    """Every rank sends 2 * bias (q = +bias) in even lanes and 0 (q = -bias) in odd lanes:
    the even lanes sum to 2 * N * bias, the largest a lane can hold (2^32 - 2 for N = 1),
    and the odd lanes next to them must stay exactly 0."""
    # 32 ranks share the suite's 8 host ports (admission tells them apart by rank)
    job = switch.add_job(job=40, n=n, encoding=PACKED, ports=[1 + r % 8 for r in range(n)])
    bias = packed_bias(n)
    assert 2 * n * bias < 2**32
    _announce(job, n)
    top = np.where(np.arange(BLOCK_VALUES) % 2 == 0, 2 * bias, 0)
    res = job.round(
        1, 0, {r: top for r in range(n)}, {r: (END, 0) for r in range(n)}, flags=Flag.PACKED
    )
    for r in res.values():
        lanes = _lanes(r)
        assert (lanes[0::2] == 2 * n * bias).all() and (lanes[1::2] == 0).all()


def test_retransmission_of_a_completed_round_gets_the_packed_sum(switch):
    n = 2
    job = switch.add_job(job=50, n=n, encoding=PACKED)
    bias = packed_bias(n)
    _announce(job, n)
    vals = {0: np.arange(BLOCK_VALUES) + bias, 1: None}
    first = job.round(1, 0, vals, {0: (END, 0), 1: (END, 0)}, flags=Flag.PACKED)
    job.send(
        0,
        MsgType.DATA,
        version=1,
        block=0,
        next_block=END,
        values=vals[0],
        flags=Flag.PACKED | Flag.RETRANSMIT,
    )
    cached = job.result(0)
    assert cached.header.flags == Flag.PACKED | Flag.CACHED
    assert np.array_equal(_lanes(cached), _lanes(first[0]))
    assert np.array_equal(_lanes(cached) - n * bias, np.arange(BLOCK_VALUES))
    assert job.stats()["retransmissions_served"] == 1


def test_a_packet_of_the_other_encoding_is_dropped_and_counted(switch):
    """A packed job refuses a lanes packet and a lanes job a packed one: either would be
    added with the wrong arithmetic. The slot is untouched, so the round completes right."""
    packed = switch.add_job(job=60, n=2, encoding=PACKED, job_index=1, ports=[1, 2])
    lanes = switch.add_job(job=61, n=2, job_index=2, ports=[3, 4], slot_base=4)
    bias = packed_bias(2)
    _announce(packed, 2)
    for rank in range(2):
        lanes.send(rank, MsgType.ANNOUNCE, next_block=0)
    lanes.results()

    packed.send(
        0, MsgType.DATA, version=1, block=0, next_block=END, values=np.full(BLOCK_VALUES, 7)
    )  # no FLAG_PACKED
    lanes.send(
        0,
        MsgType.DATA,
        version=1,
        block=0,
        next_block=END,
        values=np.full(BLOCK_VALUES, 7),
        flags=Flag.PACKED,
    )
    packed.assert_silent()
    lanes.assert_silent()
    assert packed.stats()["wrong_encoding"] == 1 and lanes.stats()["wrong_encoding"] == 1
    assert packed.stats()["aggregated"] == 2  # the announces only

    res = packed.round(
        1,
        0,
        {0: np.full(BLOCK_VALUES, 5 + bias), 1: np.full(BLOCK_VALUES, -2 + bias)},
        {0: (END, 0), 1: (END, 0)},
        flags=Flag.PACKED,
    )
    for r in res.values():
        assert (_lanes(r) - 2 * bias == 3).all()
    res = lanes.round(
        1,
        0,
        {0: np.full(BLOCK_VALUES, 5), 1: np.full(BLOCK_VALUES, -2)},
        {0: (END, 0), 1: (END, 0)},
    )
    for r in res.values():
        assert r.header.flags == 0 and (r.values == 3).all()
