"""A job's block size (docs/protocol.md sections 1, 2 and 10): a job carries K values per
DATA (one of the v1model program's sizes), and every round behaves at K as at 64: DATA
and SKIP rounds, a SKIP that completes a round, retransmissions into an incomplete round
(STATUS) and a completed one (the cached RESULT), both encodings -- packed (one wide add,
bias removal, the largest lanes that must not carry) and lanes (int32 added lane by lane,
overflow flagged) --, a DATA of another job's size dropped and counted, a DATA whose
length is no size malformed, and jobs of different sizes side by side on one switch.
Frames of K values are built and parsed by hostlib's codec (hostlib.protocol)."""

from __future__ import annotations

import numpy as np
import pytest

from hostlib import protocol as p
from hostlib.protocol import END_OF_STREAM as END, Flag, MsgType
from p4reduce import wire
from p4reduce.target import V1MODEL_BLOCK_SIZES

# the default size, a small and the four largest: each a separate register and header
SIZES = (64, 256, 2048, 4096, 8192, 16000)
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
PACKED = p.Encoding.PACKED


def packed_bias(n: int) -> int:
    """floor((2^31 - 1) / N), written out (protocol.md section 10), not imported."""
    return INT32_MAX // n


def _lanes(frame) -> np.ndarray:
    """A result's lanes as the unsigned 32-bit words the switch summed."""
    return frame.values.view(np.uint32).astype(np.int64)


def _announce(job, n: int, flags: int = 0) -> None:
    for rank in range(n):
        job.send(rank, MsgType.ANNOUNCE, next_block=0, flags=flags)
    for res in job.results().values():
        assert res.header.next_block == 0 and res.values is None


def _int32(x: np.ndarray) -> np.ndarray:
    """int32 wrap-around of exact sums."""
    return ((x + 2**31) % 2**32 - 2**31).astype(np.int32)


@pytest.mark.parametrize("k", SIZES)
def test_lanes_rounds_at_every_size(switch, k):
    """A lanes job of K values: a round with a SKIP in the middle; a round a SKIP starts
    (zeros) and a SKIP completes (the sums read back); a retransmission into an
    incomplete round gets the STATUS, one into the completed round the cached RESULT of K
    values; int32 extremes that do not overflow are exact in every lane, and one
    overflowed lane flags the round."""
    n = 3
    job = switch.add_job(job=100 + k % 97, n=n, block_values=k)
    rng = np.random.default_rng(k)
    _announce(job, n)

    # round 1 (block 0): DATA, SKIP, DATA, with every sign and the int32 extremes
    a = rng.integers(INT32_MIN // 2, INT32_MAX // 2, k)
    c = rng.integers(INT32_MIN // 2, INT32_MAX // 2, k)
    a[:4], c[:4] = [INT32_MAX, INT32_MIN, -1, INT32_MAX], [-1, INT32_MAX, -1, INT32_MIN]
    res = job.round(1, 0, {0: a, 1: None, 2: c}, {r: (1, 128) for r in range(n)})
    for r in res.values():
        assert len(r.values) == k and r.header.flags == 0
        assert np.array_equal(r.values, _int32(a + c)), "no carry between lanes"

    # round 2 (block 1): a SKIP first stores zeros, a SKIP completes the round
    b = rng.integers(INT32_MIN, INT32_MAX, k)
    res = job.round(0, 1, {0: None, 1: b, 2: None}, {r: (2, 128) for r in range(n)})
    for r in res.values():
        assert np.array_equal(r.values, b) and r.header.block == 1

    # round 3 (block 2): rank 0 retransmits before the round completes, then after
    d = np.full(k, 5)
    job.send(0, MsgType.DATA, version=1, block=2, next_block=END, values=d)
    job.send(0, MsgType.DATA, version=1, block=2, next_block=END, values=d, flags=Flag.RETRANSMIT)
    status = job.result(0)
    assert status.header.msg_type == MsgType.STATUS and status.contributors == 0b001
    job.send(1, MsgType.SKIP, version=1, block=2, next_block=END)
    e = np.where(np.arange(k) == k - 1, INT32_MAX, -7)
    job.send(2, MsgType.DATA, version=1, block=2, next_block=END, values=e)  # last lane: 5 + MAX
    done = job.results()
    for r in done.values():  # (rank 0's resend reached the round: REPAIRED)
        assert r.header.flags == Flag.OVERFLOW | Flag.REPAIRED
        assert np.array_equal(r.values[:-1], np.full(k - 1, -2)), "only the last lane overflowed"
    job.send(0, MsgType.DATA, version=1, block=2, next_block=END, values=d, flags=Flag.RETRANSMIT)
    cached = job.result(0)
    assert cached.header.flags == Flag.CACHED | Flag.OVERFLOW
    assert np.array_equal(cached.values, done[0].values)
    job.assert_silent()
    stats = job.stats()
    assert stats["rounds_completed"] == 4 and stats["overflows"] == 1
    assert stats["duplicates"] == 1 and stats["retransmissions_served"] == 1


@pytest.mark.parametrize("k", SIZES)
def test_packed_rounds_at_every_size(switch, k):
    """A packed job of K values, N = 5 ranks: SKIPs first, in the middle and last, every
    round's lanes are sum(q) + N * bias; the largest lanes (every rank 2 * bias, i.e.
    q = +bias) next to the smallest (0) neither carry nor borrow; a retransmission into
    the incomplete round gets the STATUS, one into the completed round the same K lanes."""
    n = 5
    job = switch.add_job(job=200 + k % 97, n=n, encoding=PACKED, block_values=k)
    bias = packed_bias(n)
    _announce(job, n, Flag.PACKED)
    rng = np.random.default_rng(k + 1)
    q = {r: rng.integers(-bias, bias + 1, k) for r in (1, 3)}
    blocks = {r: (q[r] + bias if r in q else None) for r in range(n)}  # ranks 0, 2, 4 SKIP
    res = job.round(1, 0, blocks, {r: (1, 128) for r in range(n)}, flags=Flag.PACKED)
    for r in res.values():
        assert r.header.flags == Flag.PACKED and len(r.values) == k
        assert np.array_equal(_lanes(r) - n * bias, q[1] + q[3])

    top = np.where(np.arange(k) % 2 == 0, 2 * bias, 0)
    for flags in (Flag.PACKED, Flag.PACKED | Flag.RETRANSMIT):  # into the incomplete round
        job.send(0, MsgType.DATA, version=0, block=1, next_block=END, values=top, flags=flags)
    status = job.result(0)
    assert status.header.msg_type == MsgType.STATUS and status.contributors == 0b00001
    others = {r: top for r in range(1, n)}
    res = job.round(0, 1, others, {r: (END, 0) for r in range(n)}, flags=Flag.PACKED)
    for r in res.values():
        lanes = _lanes(r)
        assert (lanes[0::2] == 2 * n * bias).all() and (lanes[1::2] == 0).all()
    job.send(
        4, MsgType.DATA, version=0, block=1, next_block=END, values=top,
        flags=Flag.PACKED | Flag.RETRANSMIT,
    )  # fmt: skip
    cached = job.result(4)
    assert cached.header.flags == Flag.PACKED | Flag.CACHED
    assert np.array_equal(_lanes(cached), _lanes(res[4]))
    assert job.stats()["overflows"] == 0


@pytest.mark.parametrize("job_size,sent_size", [(64, 4096), (2048, 256), (16000, 8192)])
def test_a_data_of_another_size_is_dropped_and_counted(switch, job_size, sent_size):
    """A DATA whose values are not its job's size would be added into the wrong register:
    dropped, counted as wrong_encoding, the slot untouched (the round then completes
    right)."""
    job = switch.add_job(job=300, n=2, block_values=job_size)
    _announce(job, 2)
    job.send(0, MsgType.DATA, version=1, block=0, next_block=END, values=np.ones(sent_size))
    job.assert_silent()
    assert job.stats()["wrong_encoding"] == 1 and job.stats()["aggregated"] == 2
    res = job.round(
        1, 0, {0: np.full(job_size, 4), 1: np.full(job_size, -1)}, {0: (END, 0), 1: (END, 0)}
    )
    for r in res.values():
        assert len(r.values) == job_size and (r.values == 3).all()


@pytest.mark.parametrize("k", [128, 256])
def test_a_skip_comes_with_room_for_its_result(switch, k):
    """A completing SKIP becomes the RESULT, and simple_switch lets a frame grow by 512
    bytes only: up to SKIP_GROWS_TO_VALUES (128) a SKIP is header only; above, it carries
    a block of its job's size (contents ignored: a SKIP adds zeros) and a header-only one
    is dropped and counted. Either way the switch keeps running and the round completes."""
    job = switch.add_job(job=302, n=2, block_values=k)
    _announce(job, 2)
    job.send(0, MsgType.SKIP, version=1, block=0, next_block=END, pad_skip=False)
    if wire.skip_carries_values(k):
        job.assert_silent()
        assert job.stats()["wrong_encoding"] == 1
        job.send(0, MsgType.SKIP, version=1, block=0, next_block=END, values=np.full(k, 9))
    job.send(1, MsgType.SKIP, version=1, block=0, next_block=END)  # completes: k zeros
    for r in job.results().values():
        assert len(r.values) == k and not r.values.any()
    assert job.stats()["wrong_encoding"] == (1 if k > wire.SKIP_GROWS_TO_VALUES else 0)


@pytest.mark.parametrize("values", [1, 63, 100, 4095, 8191, 15999])
def test_a_data_whose_length_is_no_size_is_malformed(switch, values):
    assert values not in V1MODEL_BLOCK_SIZES
    job = switch.add_job(job=301, n=1, block_values=64)
    before = switch.switch_stats()["drops_malformed"]
    job.send(0, MsgType.DATA, version=1, block=0, values=np.ones(values))
    job.assert_silent()
    assert switch.switch_stats()["drops_malformed"] == before + 1
    assert job.stats()["wrong_encoding"] == 0


def test_jobs_of_different_sizes_side_by_side(switch):
    """Four jobs on one switch -- 64-value lanes, 256-value packed, 4096-value lanes,
    8192-value packed -- their rounds interleaved packet by packet: each gets its own sums
    at its own size."""
    specs = [(64, p.Encoding.LANES), (256, PACKED), (4096, p.Encoding.LANES), (8192, PACKED)]
    jobs = [
        switch.add_job(
            job=400 + i,
            n=2,
            job_index=i,
            slot_base=4 * i,
            ports=[1 + 2 * i, 2 + 2 * i],
            encoding=enc,
            block_values=k,
        )  # fmt: skip
        for i, (k, enc) in enumerate(specs)
    ]
    flags = [Flag.PACKED if enc == PACKED else 0 for _, enc in specs]
    for rank in range(2):
        for job, f in zip(jobs, flags):
            job.send(rank, MsgType.ANNOUNCE, next_block=0, flags=f)
    for job in jobs:
        job.results()
    bias = packed_bias(2)
    sent = {}
    for rank in range(2):
        for i, ((k, enc), job, f) in enumerate(zip(specs, jobs, flags)):
            v = np.arange(k) * (rank + 1) + i
            sent[i, rank] = v
            job.send(rank, MsgType.DATA, version=1, block=0, next_block=END,
                     values=v + (bias if enc == PACKED else 0), flags=f)  # fmt: skip
    for i, ((k, enc), job) in enumerate(zip(specs, jobs)):
        for r in job.results().values():
            got = _lanes(r) - 2 * bias if enc == PACKED else r.values
            assert len(got) == k and np.array_equal(got, sent[i, 0] + sent[i, 1]), (k, enc)
        job.assert_silent()
