"""Job incarnations (epochs) and slots that lost a job's state (docs/protocol.md §7-8)."""

from __future__ import annotations

import numpy as np
import pytest

from hostlib import protocol as p
from hostlib.protocol import Flag, MsgType
from p4reduce.wire import RoundMode

BLOCK_VALUES = p.BLOCK_VALUES


def test_a_deleted_incarnation_cannot_touch_the_next_one(switch):
    """Same job id, ports, MACs, IPs and ranks; only the epoch differs. Frames of the old
    incarnation (a worker that kept retransmitting) are unadmitted; the new one sums
    exactly."""
    old = switch.add_job(job=36, n=2, slot_count=1, epoch=5)
    for rank in range(2):
        old.send(rank, MsgType.ANNOUNCE, next_block=0)
    old.results()
    old.remove()
    new = switch.add_job(job=36, n=2, slot_count=1, epoch=6)
    before = switch.switch_stats()["drops_unadmitted"]
    stale = old.frame(
        0,
        MsgType.DATA,
        version=1,
        block=0,
        values=np.full(BLOCK_VALUES, 1000),
        flags=Flag.RETRANSMIT,
    )
    new.send_frame(0, stale)
    new.assert_silent()
    assert switch.switch_stats()["drops_unadmitted"] == before + 1
    for rank in range(2):
        new.send(rank, MsgType.ANNOUNCE, next_block=0)
    new.results()
    new.send_frame(0, stale)  # again, mid-round
    x = np.arange(BLOCK_VALUES)
    res = new.round(1, 0, {0: x, 1: 2 * x}, {0: (p.END_OF_STREAM, 0), 1: (p.END_OF_STREAM, 0)})
    for r in res.values():
        assert np.array_equal(r.values, 3 * x) and r.header.epoch == 6
    assert switch.switch_stats()["drops_unadmitted"] == before + 2


def test_a_slot_that_lost_the_jobs_state_answers_state_lost_to_every_rank(switch):
    """After the pipeline is pushed again (as after a switch restart) and the job
    reinstalled, a rank that already had results (CONTINUED) finds a slot that forgot the
    job: the switch answers STATE_LOST and keeps answering it to every rank of that
    incarnation, even one whose packet does not say CONTINUED; a new incarnation on the
    same slot starts clean."""
    job = switch.add_job(job=37, n=2, slot_count=1, epoch=9)
    for rank in range(2):
        job.send(rank, MsgType.ANNOUNCE, next_block=0)
    job.results()
    switch.lose_state(reinstall=False)
    job = switch.add_job(job=37, n=2, slot_count=1, epoch=9)
    job.send(0, MsgType.SKIP, version=1, block=0, next_block=p.END_OF_STREAM, flags=Flag.CONTINUED)
    lost = job.result(0)
    assert lost is not None and lost.header.flags & Flag.STATE_LOST
    assert lost.header.msg_type == MsgType.RESULT and lost.values is None
    assert (lost.header.slot, lost.header.block, lost.header.epoch) == (0, 0, 9)
    job.send(1, MsgType.ANNOUNCE, next_block=0)  # no CONTINUED: still lost
    lost = job.result(1)
    assert lost is not None and lost.header.flags & Flag.STATE_LOST
    job.assert_silent()
    assert job.stats()["state_lost"] == 2
    job.remove()
    fresh = switch.add_job(job=37, n=2, slot_count=1, epoch=10)
    for rank in range(2):
        fresh.send(rank, MsgType.ANNOUNCE, next_block=3)
    for r in fresh.results().values():
        assert not r.header.flags & Flag.STATE_LOST and r.header.next_block == 3


def test_a_slot_rebuilt_after_a_restart_by_a_rank_without_results_is_lost(switch):
    """Rank 1 lost the announce round's result; the switch restarts. Rank 1's resent
    ANNOUNCE (not CONTINUED: it had no result there) rebuilds the slot, but rank 0 had the
    result: its CONTINUED packet finds no round of the slot complete, which proves the
    slot forgot the job. It and every later packet of the job get STATE_LOST -- rank 1's
    too, which would otherwise wait forever for rank 0's ANNOUNCE."""
    job = switch.add_job(job=39, n=2, slot_count=1, epoch=9)
    for rank in range(2):
        job.send(rank, MsgType.ANNOUNCE, next_block=0)
    job.results()  # rank 1's copy is taken as lost
    switch.lose_state(reinstall=False)
    job = switch.add_job(job=39, n=2, slot_count=1, epoch=9)
    job.send(1, MsgType.ANNOUNCE, next_block=0, flags=Flag.RETRANSMIT)
    job.assert_silent()  # a first round, waiting for rank 0
    job.send(0, MsgType.SKIP, version=1, block=0, next_block=p.END_OF_STREAM, flags=Flag.CONTINUED)
    lost = job.result(0)
    assert lost is not None and lost.header.flags & Flag.STATE_LOST
    job.send(1, MsgType.ANNOUNCE, next_block=0, flags=Flag.RETRANSMIT)
    lost = job.result(1)
    assert lost is not None and lost.header.flags & Flag.STATE_LOST
    job.assert_silent()
    assert job.stats()["state_lost"] == 2


def test_a_lost_slot_makes_every_slot_of_the_incarnation_answer_state_lost(switch):
    """Once a slot of an incarnation is found lost, every packet of that incarnation gets
    STATE_LOST, on every slot: here rank 1's first ANNOUNCE on a slot the job had not used
    yet (not CONTINUED), which would otherwise open a round for rank 0, which stopped at
    its own STATE_LOST. A new incarnation of the job is not affected."""
    job = switch.add_job(job=40, n=2, slot_count=2, epoch=9)
    for rank in range(2):
        job.send(rank, MsgType.ANNOUNCE, slot=0, next_block=0)
    job.results()
    switch.lose_state(reinstall=False)
    job = switch.add_job(job=40, n=2, slot_count=2, epoch=9)
    job.send(
        0,
        MsgType.SKIP,
        slot=0,
        version=1,
        block=0,
        next_block=p.END_OF_STREAM,
        flags=Flag.CONTINUED,
    )
    lost = job.result(0)
    assert lost is not None and lost.header.flags & Flag.STATE_LOST
    job.send(1, MsgType.ANNOUNCE, slot=1, next_block=1)
    lost = job.result(1)
    assert lost is not None and lost.header.flags & Flag.STATE_LOST
    assert lost.header.slot == 1
    job.assert_silent()
    job.remove()
    fresh = switch.add_job(job=40, n=2, slot_count=2, epoch=10)
    for rank in range(2):
        fresh.send(rank, MsgType.ANNOUNCE, slot=1, next_block=1)
    for r in fresh.results().values():
        assert not r.header.flags & Flag.STATE_LOST and r.header.next_block == 1


@pytest.mark.parametrize("round_mode", [RoundMode.EVERY_RANK, RoundMode.SILENT])
def test_an_incarnation_restored_as_lost_answers_state_lost_to_every_packet(switch, round_mode):
    """After the switch lost its pipeline the controller admits the job again as lost
    (admit_lost; JobManager.reinstall_all does the same). Rank 1 lost its copy of the
    announce round's result: its resent ANNOUNCE (not CONTINUED) would rebuild the slot
    and wait there for rank 0, which had moved on; here it gets STATE_LOST. So do a first
    ANNOUNCE on a slot the job had not used and a DATA, which adds nothing. A new
    incarnation on the same slots runs as before."""
    silent = Flag.SILENT if round_mode == RoundMode.SILENT else 0
    job = switch.add_job(job=41, n=2, slot_count=2, epoch=9, round_mode=round_mode)
    for rank in range(2):
        job.send(rank, MsgType.ANNOUNCE, slot=0, next_block=0)
    job.results()  # rank 1's copy is taken as lost
    switch.lose_state()  # the job comes back lost
    sends = [
        (1, dict(msg_type=MsgType.ANNOUNCE, slot=0, next_block=0, flags=Flag.RETRANSMIT)),
        (0, dict(msg_type=MsgType.ANNOUNCE, slot=1, next_block=1)),
        (0, dict(msg_type=MsgType.DATA, slot=0, version=1, block=0,
                 values=np.full(BLOCK_VALUES, 5), next_block=p.END_OF_STREAM,
                 flags=Flag.CONTINUED)),
    ]  # fmt: skip
    for rank, kw in sends:
        msg_type = kw.pop("msg_type")
        job.send(rank, msg_type, **kw)
        lost = job.result(rank)
        assert lost is not None, (rank, msg_type)
        assert lost.header.msg_type == MsgType.RESULT and lost.values is None
        assert lost.header.flags & Flag.STATE_LOST and lost.header.flags & Flag.SILENT == silent
        assert (lost.header.slot, lost.header.epoch) == (kw["slot"], 9)
        job.assert_silent()
    assert job.stats()["state_lost"] == 3 and job.stats()["rounds_completed"] == 0
    job.remove()
    fresh = switch.add_job(job=41, n=2, slot_count=2, epoch=10, round_mode=round_mode)
    for rank in range(2):
        fresh.send(rank, MsgType.ANNOUNCE, slot=0, next_block=3)
    for r in fresh.results().values():
        assert not r.header.flags & Flag.STATE_LOST and r.header.next_block == 3


def test_fingerprint_range_reaches_every_rank(switch):
    """Ranks announce what they reduce; the announce round's result carries the minimum and
    maximum, to every rank and in cached copies."""
    job = switch.add_job(job=38, n=3, slot_count=1)
    fps = {
        0: p.fingerprint(np.float32, 1000),
        1: p.fingerprint(np.int32, 1000),
        2: p.fingerprint(np.float32, 1000),
    }
    for rank in range(3):
        job.send(rank, MsgType.ANNOUNCE, next_block=0, fingerprint=fps[rank])
    want = (min(fps.values()), max(fps.values()))
    for r in job.results().values():
        assert r.fingerprint == want
        assert r.header.next_block == p.END_OF_STREAM  # the call ends on every rank
    job.send(2, MsgType.ANNOUNCE, next_block=0, fingerprint=fps[2], flags=Flag.RETRANSMIT)
    cached = job.result(2)
    assert cached.header.flags & Flag.CACHED and cached.fingerprint == want
    # the next call's announce round, in version 1: it takes the ended call's winner
    for rank in range(3):
        job.send(
            rank,
            MsgType.ANNOUNCE,
            version=1,
            next_block=0,
            fingerprint=fps[0],
            flags=Flag.CONTINUED,
        )
    for r in job.results().values():
        assert r.fingerprint == (fps[0], fps[0]) and r.header.next_block == 0
