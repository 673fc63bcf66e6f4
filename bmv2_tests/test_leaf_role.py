"""The leaf and spine roles (docs/fabric.md), packet by packet, on every switch kind.

The switch under test is a **leaf**: a job of three ranks (ports 1-3) with an uplink entry
(port 9, towards a spine this test plays: it reads what the leaf sends up and sends the
spine's RESULTs down). Each loss between the levels is made by not delivering a frame,
and repaired by the ranks' ordinary retransmissions. The **spine** role is an ordinary
job whose ranks are leaves: what it adds for them (a partial's overflow and fingerprint
range) is checked on the same switch, and a two-switch run in one process
(InProcessFabric) closes the loop.
"""

from __future__ import annotations

import numpy as np

from hostlib import protocol as p
from hostlib.protocol import END_OF_STREAM as END, Flag, Header, MsgType
from p4net import harness
from p4net.harness import FINGERPRINT as FP, worker_address
from p4reduce import wire
from p4reduce.job import Job, Uplink

K = p.BLOCK_VALUES
UPLINK_PORT = 9
SPINE, LEAF_RANK = harness.SPINE, harness.LEAF_RANK  # the spine this test plays


def leaf_spec(
    job: int,
    n: int = 3,
    encoding: str = "lanes",
    job_ranks: int = 8,
    lost: bool = False,
    round_mode: str = "every_rank",
    block_values: int = K,
) -> Job:
    """A leaf's part of a job of `job_ranks` ranks: `n` of them here, on ports 1..n
    (`lost`: admitted lost, admit_lost)."""
    return Job(
        job=job,
        job_index=job % 64,
        slot_base=0,
        slot_count=4,
        epoch=3,
        workers=[worker_address(r, r + 1) for r in range(n)],
        encoding=encoding,
        round_mode=round_mode,
        block_values=block_values,
        uplink=Uplink(UPLINK_PORT, SPINE.mac, SPINE.ip, LEAF_RANK),
        ranks_in_job=[2 * r for r in range(n)],
        job_ranks=job_ranks,
        lost=lost,
    )


def adopted(switch, spec: Job) -> harness.TestJob:
    switch.jobs.adopt(spec)
    return harness.TestJob(switch, spec)


def leaf_job(switch, job: int, **kw) -> harness.TestJob:
    """The leaf's part (leaf_spec's) installed on `switch`."""
    return adopted(switch, leaf_spec(job, **kw))


def up(job: harness.TestJob, timeout: float = 3.0) -> p.Frame | None:
    """The next frame the leaf sends up its uplink, parsed."""
    raw = job.switch.proc.recv(UPLINK_PORT, timeout)
    return None if raw is None else job.parse(raw)


def down(job: harness.TestJob, msg_flags: int = 0, **kw) -> None:
    """The spine's RESULT (or `msg_type`) to the leaf (`kw`: header fields, values,
    fingerprint or contributors: TestJob.spine_frame)."""
    job.switch.proc.send(UPLINK_PORT, job.spine_frame(msg_flags, **kw))


def announce(job: harness.TestJob, nexts=(4, 2, 9)) -> p.Frame:
    """Every rank announces; the leaf's partial (its minimum) goes up, nothing to ranks."""
    for rank, nb in enumerate(nexts):
        job.send(rank, MsgType.ANNOUNCE, next_block=nb)
    partial = up(job)
    assert partial is not None, "the leaf sent nothing up"
    job.assert_silent()
    return partial


def spine_announce_result(job: harness.TestJob, winner: int = 1) -> dict[int, p.Frame]:
    down(job, slot=0, slot_version=0, next_block=winner, fingerprint=(FP, FP))
    return job.results()


def test_partial_goes_up_and_the_spines_result_comes_down(switch):
    job = leaf_job(switch, 60)
    partial = announce(job)
    h = partial.header
    assert (h.msg_type, h.rank, h.next_block, h.epoch) == (MsgType.ANNOUNCE, LEAF_RANK, 2, 3)
    assert partial.fingerprint == (FP, FP)
    assert partial.dst_ip == p.ip_bytes(SPINE.ip) and partial.dst_mac == p.mac_bytes(SPINE.mac)
    assert partial.src_ip == p.ip_bytes(switch.address.ip)
    # the spine's winner (another leaf's block 1) is the job's: every rank gets it
    for rank, res in spine_announce_result(job, winner=1).items():
        assert res.header.msg_type == MsgType.RESULT and res.header.next_block == 1
        assert res.header.rank == rank and res.fingerprint == (FP, FP)
    # a data round of the job's winner: the leaf's sum goes up as one DATA
    a, b = np.arange(K), np.full(K, 7)
    job.send(0, MsgType.DATA, version=1, block=1, values=a, next_block=5)
    job.send(1, MsgType.DATA, version=1, block=1, values=b, next_block=3)
    job.send(2, MsgType.SKIP, version=1, block=1, next_block=END)
    partial = up(job)
    assert partial is not None and partial.header.msg_type == MsgType.DATA
    assert np.array_equal(partial.values, a + b) and partial.header.next_block == 3
    assert partial.header.block == 1 and partial.header.rank == LEAF_RANK
    job.assert_silent()
    # the spine's sum (this leaf's and the others') is what the ranks get, and keep
    total = a + b + 1000
    down(job, slot=0, slot_version=1, block=1, next_block=2, values=total)
    for res in job.results().values():
        assert np.array_equal(res.values, total) and res.header.next_block == 2
    job.send(2, MsgType.SKIP, version=1, block=1, next_block=END, flags=Flag.RETRANSMIT)
    cached = job.result(2)
    assert cached is not None and cached.header.flags & Flag.CACHED
    assert np.array_equal(cached.values, total) and cached.header.next_block == 2
    assert up(job, 0.3) is None  # held: nothing goes up again
    # the next round's winner is the spine's (2), not the leaf's minimum (3)
    job.send(0, MsgType.DATA, version=0, block=2, values=a, next_block=END)
    job.send(1, MsgType.SKIP, version=0, block=2, next_block=END)
    job.send(2, MsgType.SKIP, version=0, block=2, next_block=END)
    partial = up(job)
    assert partial is not None and partial.header.block == 2
    assert job.stats()["rounds_completed"] == 3 and job.stats()["stale"] == 0


def test_a_lost_partial_is_sent_again_on_a_ranks_retransmission(switch):
    job = leaf_job(switch, 61)
    first = announce(job)  # ... and "lost" on the way up: the spine never saw it
    job.send(1, MsgType.ANNOUNCE, next_block=2, flags=Flag.RETRANSMIT)
    again = up(job)
    assert again is not None and again.header.flags & Flag.RETRANSMIT
    assert again.header[:2] == first.header[:2] and again.header.next_block == 2
    assert again.fingerprint == first.fingerprint
    assert job.result(1, 0.3) is None  # the rank waits for the spine's result
    assert len(spine_announce_result(job)) == 3


def test_a_lost_result_is_repaired_by_the_spines_cached_answer(switch):
    job = leaf_job(switch, 62)
    announce(job)
    spine_announce_result(job)
    x = np.arange(K) - 20
    for rank in range(3):
        job.send(rank, MsgType.DATA, version=1, block=1, values=x, next_block=END)
    partial = up(job)
    assert partial is not None
    # the spine's result to this leaf is lost: a rank retransmits, the partial goes up
    # again, and the spine's cached answer (unicast, FLAG_CACHED) is stored and passed on
    job.send(0, MsgType.DATA, version=1, block=1, values=x, next_block=END, flags=Flag.RETRANSMIT)
    again = up(job)
    assert again is not None and np.array_equal(again.values, 3 * x)
    down(job, Flag.CACHED, slot=0, slot_version=1, block=1, next_block=END, values=6 * x)
    for res in job.results().values():
        assert np.array_equal(res.values, 6 * x)
    # a late copy of the same result changes nothing and reaches no rank
    down(job, slot=0, slot_version=1, block=1, next_block=END, values=7 * x)
    job.assert_silent()
    job.send(2, MsgType.DATA, version=1, block=1, values=x, next_block=END, flags=Flag.RETRANSMIT)
    cached = job.result(2)
    assert cached is not None and np.array_equal(cached.values, 6 * x)


def test_a_lost_copy_to_a_rank_is_served_from_the_leaf(switch):
    job = leaf_job(switch, 63)
    announce(job)
    spine_announce_result(job, winner=4)
    job.send(1, MsgType.ANNOUNCE, next_block=2, flags=Flag.RETRANSMIT)
    cached = job.result(1)
    assert cached is not None and cached.header.flags & Flag.CACHED
    assert cached.header.next_block == 4 and cached.fingerprint == (FP, FP)
    assert up(job, 0.3) is None


def test_a_state_probe_goes_up_though_the_leaf_holds_the_result(switch):
    """A rank's state probe (FLAG_PROBE; the second line, for a job a spine that lost it
    admitted as live) into a round whose result the leaf holds is the spine's question,
    not the leaf's: it goes up as the leaf's partial (CONTINUED, as
    the rank sent it; FLAG_PROBE stays below) and the rank gets no cached answer. The
    spine's cached answer ends at the leaf, which holds it; its STATE_LOST reaches every
    rank."""
    job = leaf_job(switch, 64)
    announce(job)
    spine_announce_result(job, winner=4)
    probe = Flag.RETRANSMIT | Flag.CONTINUED | Flag.PROBE
    job.send(1, MsgType.ANNOUNCE, next_block=2, flags=probe)
    partial = up(job)
    assert partial is not None and partial.header.msg_type == MsgType.ANNOUNCE
    h = partial.header
    assert h.flags == Flag.RETRANSMIT | Flag.CONTINUED and h.rank == LEAF_RANK
    job.assert_silent()
    down(job, Flag.CACHED, slot=0, slot_version=0, next_block=4, fingerprint=(FP, FP))
    job.assert_silent()
    job.send(2, MsgType.ANNOUNCE, next_block=9, flags=probe)
    assert up(job) is not None
    down(job, Flag.STATE_LOST, slot=0, slot_version=0)
    results = job.results()
    assert len(results) == 3 and all(r.header.flags & Flag.STATE_LOST for r in results.values())


def test_the_status_of_an_incomplete_round_reaches_every_rank_of_the_leaf(switch):
    """A rank's retransmission into a round incomplete here gets the leaf's STATUS, and so
    does every other rank of the leaf, each copy addressed to it: those that contributed
    learn that the round waits, the one whose packet is missing (rank 1) learns it from
    the bitmap and sends again at once. Its packet then completes the round."""
    job = leaf_job(switch, 44)
    job.send(0, MsgType.ANNOUNCE, next_block=1)
    job.send(2, MsgType.ANNOUNCE, next_block=1)
    job.send(2, MsgType.ANNOUNCE, next_block=1, flags=Flag.RETRANSMIT)
    statuses = job.results()
    assert sorted(statuses) == [0, 1, 2]
    for rank, f in statuses.items():
        assert f.header.msg_type == MsgType.STATUS
        assert f.header.rank == rank and f.contributors == 0b101  # by index on the leaf
        assert not f.header.flags & Flag.RELAYED  # the leaf's own
        assert (f.header.slot, f.header.block) == (0, END)
    assert up(job, 0.3) is None
    job.send(1, MsgType.ANNOUNCE, next_block=1, flags=Flag.RETRANSMIT)
    partial = up(job)
    assert partial is not None and partial.header.msg_type == MsgType.ANNOUNCE
    job.assert_silent()


def test_the_spines_status_reaches_every_rank_of_the_leaf(switch):
    """A rank's retransmission into a round complete here sends the partial up again; the
    spine, still waiting for another leaf, answers with its STATUS, which the leaf relays
    to every one of its ranks (flagged RELAYED, the spine's bitmap of leaves): each learns
    the round waits above its leaf. The spine's RESULT then completes the round as ever."""
    job = leaf_job(switch, 46)
    partial = announce(job)
    job.send(1, MsgType.ANNOUNCE, next_block=2, flags=Flag.RETRANSMIT)
    again = up(job)
    assert again is not None and again.header.flags & Flag.RETRANSMIT
    job.assert_silent()
    h = partial.header
    down(
        job,
        msg_type=MsgType.STATUS,
        slot=h.slot,
        slot_version=h.slot_version,
        block=h.block,
        contributors=0b101,  # the spine heard leaves 0 and 2, not this one's partial
    )
    statuses = job.results()
    assert sorted(statuses) == [0, 1, 2]
    for rank, f in statuses.items():
        assert f.header.msg_type == MsgType.STATUS and f.header.flags & Flag.RELAYED
        assert f.header.rank == rank and f.contributors == 0b101
        assert (f.header.slot, f.header.block) == (h.slot, h.block)
    assert up(job, 0.3) is None
    results = spine_announce_result(job)
    assert sorted(results) == [0, 1, 2]
    assert all(f.header.msg_type == MsgType.RESULT for f in results.values())


def test_the_spines_state_lost_reaches_every_rank(switch):
    job = leaf_job(switch, 45)
    announce(job)
    down(job, Flag.STATE_LOST, slot=0, slot_version=0)
    for res in job.results().values():
        assert res.header.flags & Flag.STATE_LOST and res.values is None


def test_the_spines_state_lost_leaves_the_job_lost_at_the_leaf(switch):
    """A rank that missed the spine's STATE_LOST (its copy lost, or its call over) and
    starts its next call must not wait at its leaf for ranks that stopped: the STATE_LOST
    passing the leaf marked the job lost there too, so the rank's announce on another
    slot goes up flagged STATE_LOST at once (for the spine to tell every leaf) and no rank
    is held."""
    job = leaf_job(switch, 48)
    for slot in (0, 1):  # a call's announce rounds on both slots, complete at both levels
        for rank in range(3):
            job.send(rank, MsgType.ANNOUNCE, slot=slot, next_block=END)
        assert up(job) is not None
        down(job, slot=slot, slot_version=0, next_block=END, fingerprint=(FP, FP))
        assert len(job.results()) == 3
    down(job, Flag.STATE_LOST, slot=0, slot_version=0)
    assert len(job.results()) == 3
    # the next call's announce on slot 1 (its round 1), where the leaf's state is whole
    job.send(2, MsgType.ANNOUNCE, slot=1, version=1, next_block=END, flags=Flag.CONTINUED)
    lost = up(job)
    assert lost is not None and lost.header.flags & Flag.STATE_LOST
    assert lost.header.slot == 1 and lost.header.rank == LEAF_RANK
    job.assert_silent()


def test_results_not_from_the_uplink_are_malformed(switch):
    job = leaf_job(switch, 46)
    announce(job)
    stats = switch.switch_stats()
    # a rank's own RESULT (admitted by its entry: not from the uplink)
    job.send_frame(0, _as_result(job.frame(0, MsgType.ANNOUNCE)))
    # the spine's addresses on a rank's port: no admission entry has them there
    ep = p.Endpoints(SPINE.mac, switch.address.mac, SPINE.ip, switch.address.ip, 0x5030, 0x5030)
    header = Header.make(MsgType.RESULT, job=46, slot=0, rank=LEAF_RANK, epoch=3, next_block=1)
    switch.proc.send(1, p.build_frame(ep, header, fingerprint=(FP, FP)))
    job.assert_silent()
    now = switch.switch_stats()
    assert now["drops_malformed"] == stats["drops_malformed"] + 1
    assert now["drops_unadmitted"] == stats["drops_unadmitted"] + 1
    # another epoch's RESULT from the spine is not admitted
    before = now["drops_unadmitted"]
    down(job, slot=0, slot_version=0, next_block=1, fingerprint=(FP, FP), epoch=2)
    job.assert_silent()
    assert switch.switch_stats()["drops_unadmitted"] == before + 1


def _as_result(frame: bytes) -> bytes:
    out = bytearray(frame)
    out[p.P4R_OFFSET] = (p.PROTOCOL_VERSION << 4) | MsgType.RESULT
    return bytes(out)


def test_a_packed_leaf_adds_the_whole_jobs_bias(switch):
    """Every switch of the job carries the bias of all N ranks: a SKIP adds B(N)."""
    job = leaf_job(switch, 47, encoding="packed", job_ranks=8)
    bias = wire.packed_bias(8)
    for rank in range(3):
        job.send(rank, MsgType.ANNOUNCE, next_block=0, flags=Flag.PACKED)
    assert up(job) is not None
    down(job, Flag.PACKED, slot=0, slot_version=0, next_block=0, fingerprint=(FP, FP))
    job.results()
    q = np.full(K, 5, np.int64)
    job.send(0, MsgType.DATA, version=1, block=0, values=q + bias, flags=Flag.PACKED)
    job.send(1, MsgType.SKIP, version=1, block=0, flags=Flag.PACKED)
    job.send(2, MsgType.SKIP, version=1, block=0, flags=Flag.PACKED)
    partial = up(job)
    assert partial is not None and partial.header.flags & Flag.PACKED
    assert np.array_equal(partial.values.astype(np.int64) & 0xFFFFFFFF, q + 3 * bias)


def test_the_spine_role_takes_the_leaves_overflow_and_fingerprint_ranges(switch):
    """The spine's job: its ranks are leaves; a partial's OVERFLOW is the round's, and
    the fingerprint range is the minimum of the minima and the maximum of the maxima."""
    job = switch.add_job(job=48, n=2)
    for rank, fp in ((0, (5, 9)), (1, (3, 6))):
        frame = _announce_range(job, rank, fp)
        job.send_frame(rank, frame)
    for res in job.results().values():
        assert res.fingerprint == (3, 9) and res.header.next_block == END  # ranges differ
    job2 = switch.add_job(job=49, n=2, job_index=1, slot_base=4)
    for rank in range(2):
        job2.send(rank, MsgType.ANNOUNCE, next_block=0)
    job2.results()
    x = np.ones(K)
    job2.send(0, MsgType.DATA, version=1, block=0, values=x, flags=Flag.OVERFLOW)
    job2.send(1, MsgType.DATA, version=1, block=0, values=x)
    for res in job2.results().values():
        assert res.header.flags & Flag.OVERFLOW and np.array_equal(res.values, 2 * x)


def _announce_range(job: harness.TestJob, rank: int, fp: tuple[int, int]) -> bytes:
    header = Header.make(MsgType.ANNOUNCE, job=job.params.job, slot=0, rank=rank, epoch=1)
    return p.build_frame(job.endpoints(rank), header, fingerprint=fp)


def test_a_restarted_leaf_sends_state_lost_up_and_the_spine_tells_every_leaf(switch):
    """A rank's CONTINUED packet on a slot this leaf never held (it restarted): the leaf
    sends it up flagged STATE_LOST instead of answering the rank alone. As a spine, the
    switch marks the slot lost and multicasts STATE_LOST to all its leaves."""
    job = leaf_job(switch, 50)
    job.send(1, MsgType.DATA, version=1, block=0, values=np.ones(K), flags=Flag.CONTINUED)
    lost = up(job)
    assert lost is not None and lost.header.flags & Flag.STATE_LOST
    assert lost.header.rank == LEAF_RANK and lost.header.msg_type == MsgType.DATA
    job.assert_silent()
    spine = switch.add_job(job=51, n=3, job_index=5, slot_base=8)
    for rank in range(3):
        spine.send(rank, MsgType.ANNOUNCE, next_block=0)
    spine.results()
    spine.send(2, MsgType.DATA, version=1, block=0, values=np.ones(K), flags=Flag.STATE_LOST)
    for res in spine.results().values():
        assert res.header.flags & Flag.STATE_LOST


def test_a_leaf_whose_job_is_admitted_lost_answers_its_rank_itself(switch):
    """The controller marks a job lost on every switch of it (FabricController
    .spread_lost), so a leaf that admits it lost answers each packet STATE_LOST to its
    sender, a first ANNOUNCE as a CONTINUED DATA, and sends nothing up: one job-wide
    answer through the spine per packet would reach every rank of every leaf."""
    job = leaf_job(switch, 53, lost=True)
    job.send(1, MsgType.ANNOUNCE, next_block=0)
    job.send(0, MsgType.DATA, version=1, block=0, values=np.ones(K), flags=Flag.CONTINUED)
    for rank in (1, 0):
        res = job.result(rank)
        assert res is not None and res.header.flags & Flag.STATE_LOST, rank
        assert res.header.msg_type == MsgType.RESULT and res.values is None
    assert up(job, 0.5) is None
    job.assert_silent()
    assert job.stats()["state_lost"] == 2
