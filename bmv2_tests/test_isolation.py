"""Admission, slot ranges, jobs side by side and a new job on a deleted job's slots."""

from __future__ import annotations

import numpy as np

from hostlib import protocol as p
from hostlib.protocol import END_OF_STREAM as END, Flag, MsgType

from p4net.harness import host_mac

BLOCK_VALUES = p.BLOCK_VALUES


def test_two_jobs_on_disjoint_slots_do_not_cross_talk(switch):
    a = switch.add_job(job=30, n=2, ports=[1, 2], slot_base=0, slot_count=2, job_index=0)
    b = switch.add_job(
        job=31, n=3, ports=[3, 4, 5], slot_base=2, slot_count=2, job_index=1, epoch=2
    )
    for rank in range(3):
        if rank < 2:
            a.send(rank, MsgType.ANNOUNCE, next_block=0)
        b.send(rank, MsgType.ANNOUNCE, next_block=0)
    a.results(), b.results()
    xa, xb = np.arange(BLOCK_VALUES), np.arange(BLOCK_VALUES) * -7
    a.send(0, MsgType.DATA, version=1, block=0, values=xa)
    b.send(0, MsgType.DATA, version=1, block=0, values=xb)
    b.send(1, MsgType.DATA, version=1, block=0, values=xb)
    a.send(1, MsgType.DATA, version=1, block=0, values=xa)
    b.send(2, MsgType.DATA, version=1, block=0, values=xb)
    for r in a.results().values():
        assert np.array_equal(r.values, 2 * xa) and r.header.job == 30
    for r in b.results().values():
        assert np.array_equal(r.values, 3 * xb) and r.header.job == 31
    a.assert_silent(), b.assert_silent()
    assert a.stats()["rounds_completed"] == 2 and b.stats()["rounds_completed"] == 2


def test_new_job_on_a_deleted_jobs_slots_starts_clean(switch):
    old = switch.add_job(job=32, n=2, slot_count=1, epoch=7)
    for rank in range(2):
        old.send(rank, MsgType.ANNOUNCE, next_block=0)
    old.results()
    old.send(0, MsgType.DATA, version=1, block=0, values=np.full(BLOCK_VALUES, 999))  # half a round
    old.send(0, MsgType.ANNOUNCE, next_block=0)  # a copy of its announce: answered, no bit
    assert old.result(0).header.flags & Flag.CACHED
    old.remove()
    new = switch.add_job(job=32, n=2, slot_count=1, epoch=8)
    for rank in range(2):
        new.send(rank, MsgType.ANNOUNCE, next_block=4, next_exponent=1)
    for r in new.results().values():
        assert (r.header.next_block, r.header.next_exponent) == (4, 1)
    x = np.arange(BLOCK_VALUES)
    res = new.round(1, 4, {0: None, 1: x}, {0: (END, 0), 1: (END, 0)})
    for r in res.values():
        assert np.array_equal(r.values, x)
    new.assert_silent()


def test_unadmitted_senders_are_dropped_and_counted(switch):
    job = switch.add_job(job=33, n=2)
    before = switch.switch_stats()["drops_unadmitted"]
    good = job.frame(0, MsgType.ANNOUNCE, next_block=0)
    switch.proc.send(3, good)  # right frame, wrong port
    wrong_mac = p.mac_bytes(host_mac(9))
    switch.proc.send(1, good[:6] + wrong_mac + good[12:])  # wrong source MAC
    job.send(0, MsgType.ANNOUNCE, next_block=0, job=34)  # unknown job
    rank5 = job.frame(0, MsgType.ANNOUNCE, next_block=0)
    rank5 = rank5[: p.P4R_OFFSET + 6] + bytes([5]) + rank5[p.P4R_OFFSET + 7 :]
    switch.proc.send(1, rank5)  # rank not in the job
    job.assert_silent()
    assert switch.switch_stats()["drops_unadmitted"] == before + 4
    assert job.stats()["aggregated"] == 0


def test_slot_outside_the_jobs_range_is_dropped(switch):
    job = switch.add_job(job=35, n=2, slot_base=8, slot_count=4)
    job.send(0, MsgType.ANNOUNCE, slot=4, next_block=0)
    job.send(1, MsgType.ANNOUNCE, slot=4, next_block=0)
    job.assert_silent()
    stats = job.stats()
    assert stats["slot_out_of_range"] == 2 and stats["aggregated"] == 0
