"""Rounds, sums, next block and exponent: what every worker gets back from the switch."""

from __future__ import annotations

import numpy as np
import pytest

from hostlib import protocol as p
from hostlib.protocol import END_OF_STREAM as END, Flag, MsgType

BLOCK_VALUES = p.BLOCK_VALUES


def _checksum_ok(frame: bytes) -> bool:
    return p.ipv4_checksum(frame[14:34]) == 0


@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_dense_round_is_exact_and_reaches_every_rank(switch, n):
    job = switch.add_job(job=10 + n, n=n, slot_count=2)
    rng = np.random.default_rng(n)
    for rank in range(n):
        job.send(rank, MsgType.ANNOUNCE, slot=1, version=0, next_block=1, next_exponent=0)
    announced = job.results()
    for rank, res in announced.items():
        assert res.header.msg_type == MsgType.RESULT and res.values is None
        assert (res.header.next_block, res.header.rank, res.header.slot) == (1, rank, 1)
    blocks = {r: rng.integers(-(2**31) // n, 2**31 // n, BLOCK_VALUES) for r in range(n)}
    results = job.round(1, 1, blocks, {r: (END, 0) for r in range(n)}, slot=1)
    expected = sum(blocks.values())
    for rank, res in results.items():
        w = job.by_rank[rank]
        assert np.array_equal(res.values, expected.astype(np.int32))
        assert res.header.block == 1 and res.header.next_block == END
        assert res.header.slot_version == 1 and res.header.flags == 0
        assert res.dst_ip == p.ip_bytes(w.ip) and res.dst_port == w.udp_port
        assert res.src_ip == p.ip_bytes("10.0.0.254") and res.src_port == p.UDP_PORT_BASE
    job.assert_silent()
    stats = job.stats()
    assert stats["rounds_completed"] == 2 and stats["aggregated"] == 2 * n


def test_results_carry_a_correct_ipv4_checksum(switch):
    job = switch.add_job(job=1, n=2)
    for rank in range(2):
        job.send(rank, MsgType.ANNOUNCE, next_block=0)
    for rank in range(2):
        frame = switch.proc.recv(job.by_rank[rank].port)
        assert frame is not None and _checksum_ok(frame)
        assert len(frame) == p.FRAME_BYTES_WITH_FINGERPRINT
    for rank in range(2):
        job.send(rank, MsgType.DATA, version=1, block=0, values=np.full(BLOCK_VALUES, rank + 1))
    for rank in range(2):
        frame = switch.proc.recv(job.by_rank[rank].port)
        assert frame is not None and _checksum_ok(frame)
        assert len(frame) == p.FRAME_BYTES_WITH_VALUES


def test_sparse_rounds_choose_minimum_block_and_maximum_exponent(switch):
    """Rank 0 has blocks {0, 2}, rank 1 {2, 3}, rank 2 none (all zero)."""
    job = switch.add_job(job=2, n=3)
    a0, a2 = np.arange(BLOCK_VALUES) + 1, np.arange(BLOCK_VALUES) * -3
    b2, b3 = np.full(BLOCK_VALUES, 7), np.arange(BLOCK_VALUES) ** 2
    job.send(0, MsgType.ANNOUNCE, next_block=0, next_exponent=130)
    job.send(1, MsgType.ANNOUNCE, next_block=2, next_exponent=131)
    job.send(2, MsgType.ANNOUNCE, next_block=END, next_exponent=0)
    for res in job.results().values():
        assert (res.header.next_block, res.header.next_exponent) == (0, 130)
        assert res.values is None
    # round 1, block 0: only rank 0 has data; the round is completed by a SKIP
    res = job.round(1, 0, {0: a0, 1: None, 2: None}, {0: (2, 129), 1: (2, 131), 2: (END, 0)})
    for r in res.values():
        assert np.array_equal(r.values, a0) and r.header.block == 0
        assert (r.header.next_block, r.header.next_exponent) == (2, 131)
    # round 2, block 2: ranks 0 and 1 overlap; a SKIP arrives first
    for rank, kind, values, nb, ne in [
        (2, MsgType.SKIP, None, END, 0),
        (0, MsgType.DATA, a2, END, 0),
        (1, MsgType.DATA, b2, 3, 128),
    ]:
        job.send(rank, kind, version=0, block=2, next_block=nb, next_exponent=ne, values=values)
    for r in job.results().values():
        assert np.array_equal(r.values, a2 + b2)
        assert (r.header.next_block, r.header.next_exponent) == (3, 128)
    # round 3, block 3: the last block ends the stream
    res = job.round(1, 3, {0: None, 1: b3, 2: None}, {0: (END, 0), 1: (END, 0), 2: (END, 0)})
    for r in res.values():
        assert np.array_equal(r.values, b3)
        assert (r.header.next_block, r.header.next_exponent) == (END, 0)
    job.assert_silent()


def test_all_zero_round_of_skips_gives_zeros(switch):
    """A round whose every contribution is a SKIP (first contributor zeroes the values)."""
    job = switch.add_job(job=3, n=2)
    for rank in range(2):
        job.send(rank, MsgType.ANNOUNCE, next_block=0)
    job.results()
    for rank in range(2):  # leave non-zero sums in version 0 ...
        job.send(
            rank, MsgType.DATA, version=1, block=0, next_block=1, values=np.full(BLOCK_VALUES, 5)
        )
    job.results()
    res = job.round(0, 1, {0: None, 1: None}, {0: (END, 0), 1: (END, 0)})
    for r in res.values():  # ... and a round of skips still sums to zero
        assert np.array_equal(r.values, np.zeros(BLOCK_VALUES)) and r.header.flags == 0


def test_slot_reuse_over_many_rounds_alternates_versions(switch):
    job = switch.add_job(job=4, n=2, slot_count=1)
    rng = np.random.default_rng(4)
    for rank in range(2):
        job.send(rank, MsgType.ANNOUNCE, next_block=0)
    job.results()
    for rnd in range(1, 21):
        blocks = {r: rng.integers(-1000, 1000, BLOCK_VALUES) for r in range(2)}
        nxt = rnd if rnd < 20 else END
        res = job.round(rnd % 2, rnd - 1, blocks, {0: (nxt, 0), 1: (nxt, 0)})
        for r in res.values():
            assert np.array_equal(r.values, blocks[0] + blocks[1]), f"round {rnd}"
            assert r.header.slot_version == rnd % 2 and r.header.block == rnd - 1
    assert job.stats()["rounds_completed"] == 21


def test_int32_overflow_is_flagged_not_hidden(switch):
    job = switch.add_job(job=5, n=2)
    for rank in range(2):
        job.send(rank, MsgType.ANNOUNCE, next_block=0)
    job.results()
    big = np.zeros(BLOCK_VALUES, dtype=np.int64)
    big[3] = 2**31 - 1
    one = np.zeros(BLOCK_VALUES, dtype=np.int64)
    one[3] = 1
    res = job.round(1, 0, {0: big, 1: one}, {0: (1, 0), 1: (1, 0)})
    for r in res.values():
        assert r.header.flags & Flag.OVERFLOW
        assert r.values[3] == -(2**31)  # wrapped, and the flag says so
    neg = np.zeros(BLOCK_VALUES, dtype=np.int64)
    neg[0], neg[1] = -(2**31), -5
    fine = np.zeros(BLOCK_VALUES, dtype=np.int64)
    fine[0], fine[1] = 7, -(2**31) + 5
    res = job.round(0, 1, {0: neg, 1: fine}, {0: (END, 0), 1: (END, 0)})
    for r in res.values():
        assert not r.header.flags & Flag.OVERFLOW
        assert r.values[0] == -(2**31) + 7 and r.values[1] == -(2**31)
    assert job.stats()["overflows"] == 1
