"""Duplicates, retransmissions and cached results (SwitchML-style recovery, in band)."""

from __future__ import annotations

import numpy as np

from hostlib import protocol as p
from hostlib.protocol import END_OF_STREAM as END, Flag, MsgType

BLOCK_VALUES = p.BLOCK_VALUES


def _announce(job, n, next_block=0):
    for rank in range(n):
        job.send(rank, MsgType.ANNOUNCE, next_block=next_block)
    return job.results()


def test_duplicate_before_completion_is_not_double_counted(switch):
    job = switch.add_job(job=20, n=3)
    _announce(job, 3)
    x = np.arange(BLOCK_VALUES) + 100
    job.send(0, MsgType.DATA, version=1, block=0, values=x)
    job.send(0, MsgType.DATA, version=1, block=0, values=x, flags=Flag.RETRANSMIT)
    status = job.result(0)  # the switch says whom the round waits for
    assert status is not None and status.header.msg_type == MsgType.STATUS
    assert (status.header.slot, status.header.slot_version, status.header.block) == (0, 1, 0)
    assert status.contributors == 0b001 and status.values is None
    job.send(1, MsgType.DATA, version=1, block=0, values=x * 2)
    job.assert_silent(0.3)  # not complete: 2 of 3 ranks
    job.send(2, MsgType.SKIP, version=1, block=0)
    for res in job.results().values():
        assert np.array_equal(res.values, x * 3)  # x once, not twice
    stats = job.stats()
    assert stats["duplicates"] == 1 and stats["rounds_completed"] == 2


def test_retransmission_after_completion_gets_the_cached_result_by_unicast(switch):
    job = switch.add_job(job=21, n=2)
    _announce(job, 2)
    a, b = np.arange(BLOCK_VALUES), np.arange(BLOCK_VALUES) * 10
    job.round(1, 0, {0: a, 1: b}, {0: (5, 0), 1: (END, 0)})
    # rank 1 lost its copy: it sends the same packet again
    job.send(1, MsgType.DATA, version=1, block=0, values=b, next_block=END, flags=Flag.RETRANSMIT)
    res = job.result(1)
    assert res is not None and res.header.flags & Flag.CACHED
    assert np.array_equal(res.values, a + b) and res.header.next_block == 5
    assert res.header.rank == 1 and res.dst_ip == p.ip_bytes(job.by_rank[1].ip)
    assert job.result(0, timeout=0.4) is None  # unicast: rank 0 gets nothing
    # a SKIP retransmission to a completed round also gets the values back
    job.send(1, MsgType.SKIP, version=1, block=0, next_block=END, flags=Flag.RETRANSMIT)
    res = job.result(1)
    assert res is not None and np.array_equal(res.values, a + b)
    assert job.stats()["retransmissions_served"] == 2


def test_cached_announce_result_is_header_only(switch):
    job = switch.add_job(job=22, n=2)
    _announce(job, 2, next_block=3)
    job.send(0, MsgType.ANNOUNCE, next_block=3, flags=Flag.RETRANSMIT)
    res = job.result(0)
    assert res is not None and res.values is None and res.header.next_block == 3
    assert res.header.flags & Flag.CACHED


def test_cached_result_survives_while_the_next_round_runs(switch):
    """Rank 0 moved on to round 2 (other version); rank 1 still asks for round 1."""
    job = switch.add_job(job=23, n=2)
    _announce(job, 2)
    a, b = np.full(BLOCK_VALUES, 3), np.full(BLOCK_VALUES, 4)
    job.round(1, 0, {0: a, 1: b}, {0: (1, 0), 1: (1, 0)})
    job.send(0, MsgType.DATA, version=0, block=1, values=a * 10, next_block=END)
    job.send(1, MsgType.DATA, version=1, block=0, values=b, next_block=1, flags=Flag.RETRANSMIT)
    res = job.result(1)
    assert res is not None and res.header.slot_version == 1
    assert np.array_equal(res.values, a + b)
    job.send(1, MsgType.DATA, version=0, block=1, values=b * 10, next_block=END)
    for r in job.results().values():
        assert np.array_equal(r.values, (a + b) * 10) and r.header.block == 1


def _repaired(results: dict) -> set[int]:
    """The ranks whose RESULT the switch flagged REPAIRED."""
    return {r for r, res in results.items() if res.header.flags & Flag.REPAIRED}


def test_a_round_that_lived_through_a_retransmission_is_flagged_repaired(switch):
    """The RESULT of a round that a retransmission completed, or that followed a rank's
    request for the round before (a lost RESULT: that rank's packet of this round is
    late), or that a rank asked about while it waited, carries REPAIRED on every copy:
    the workers leave its time out of their timers. A clean round's does not, nor does
    the round after a flagged one."""
    job = switch.add_job(job=24, n=2)
    assert _repaired(_announce(job, 2)) == set()
    a, b = np.full(BLOCK_VALUES, 3), np.full(BLOCK_VALUES, 4)
    assert _repaired(job.round(1, 0, {0: a, 1: b}, {0: (1, 0), 1: (1, 0)})) == set()
    # round of block 1: rank 1's DATA was lost; its resend completes the round
    job.send(0, MsgType.DATA, version=0, block=1, values=a, next_block=2)
    job.send(1, MsgType.DATA, version=0, block=1, values=b, next_block=2, flags=Flag.RETRANSMIT)
    assert _repaired(job.results()) == {0, 1}
    # rank 1 lost that RESULT and asks again (a cached copy: no round-time there), so its
    # DATA of block 2 comes late and completes the round
    job.send(0, MsgType.DATA, version=1, block=2, values=a, next_block=3)
    job.send(1, MsgType.DATA, version=0, block=1, values=b, next_block=2, flags=Flag.RETRANSMIT)
    cached = job.result(1)
    assert cached is not None and cached.header.flags & Flag.CACHED
    job.send(1, MsgType.DATA, version=1, block=2, values=b, next_block=3)
    assert _repaired(job.results()) == {0, 1}
    # round of block 3: rank 0 asks while it waits for rank 1 (a STATUS)
    job.send(0, MsgType.DATA, version=0, block=3, values=a, next_block=4)
    job.send(0, MsgType.DATA, version=0, block=3, values=a, next_block=4, flags=Flag.RETRANSMIT)
    status = job.result(0)
    assert status is not None and status.header.msg_type == MsgType.STATUS
    job.send(1, MsgType.DATA, version=0, block=3, values=b, next_block=4)
    assert _repaired(job.results()) == {0, 1}
    assert _repaired(job.round(1, 4, {0: a, 1: b}, {0: (END, 0), 1: (END, 0)})) == set()
