"""The leaf and spine roles on two levels of real switches, frame by frame: the in-process
fabric (a spine, two leaves), programmed by the fabric controller; each rank's frames are
built from its descriptor and sent into its leaf's port. A link end that loses every
frame makes each loss between the levels; the ranks' retransmissions repair it."""

from __future__ import annotations

import random

import numpy as np
import pytest

from controlplane.config import parse
from controlplane.fabric import FabricController
from controlplane.stats import job_stats
from hostlib import protocol as p
from hostlib.protocol import END_OF_STREAM as END, Flag, Header, MsgType
from p4reduce.job import JobConfig, load_descriptor

from .conftest import UPLINK, fabric_config
from .test_fabric_inprocess import ranks

K = p.BLOCK_VALUES
FP = p.fingerprint(np.int32, 4 * K)


class Rank:
    """One rank as the test drives it: its descriptor, its leaf and port."""

    def __init__(self, fab, desc: dict, port: int):
        self.cfg: JobConfig = load_descriptor(desc)
        self.leaf = fab.switch({"10.0.0.240": "l1", "10.0.0.241": "l2"}[self.cfg.switch.ip])
        self.port = port

    def send(self, msg_type: MsgType, values=None, flags: int = 0, slot: int = 0, **kw) -> None:
        header = Header.make(
            msg_type,
            job=self.cfg.job,
            rank=self.cfg.rank_on_wire,
            epoch=self.cfg.epoch,
            flags=flags,
            slot=slot,
            **kw,
        )
        ep = self.cfg.to_switch()
        if values is not None:
            frame = p.build_frame(ep, header, np.asarray(values, np.int64))
        else:
            fp = (FP, FP) if msg_type == MsgType.ANNOUNCE else None
            frame = p.build_frame(ep, header, fingerprint=fp)
        self.leaf.send(self.port, frame)

    def received(self) -> list[p.Frame]:
        return [p.parse_frame(f) for f in self.leaf.recv_all(self.port)]


def lose(fab, end: tuple[str, int] | None) -> None:
    """Every frame sent out of link end `end` is lost (None: no loss anywhere)."""
    with fab.wiring.lock:
        fab.wiring.loss = (
            {} if end is None else {(fab.switch(end[0]), end[1]): (1.0, random.Random(1))}
        )


@pytest.fixture
def job_ranks(inprocess_fabric, tmp_path):
    """Job 9: ranks 0, 1 on l1 and 2, 3 on l2, announced (the winner block 0)."""
    fab = inprocess_fabric
    ctl = FabricController(parse(fabric_config(fab, tmp_path)))
    try:
        ctl.up(retries=3)
        workers = ranks(2)  # l1 ports 1, 2 then l2 ports 1, 2
        job = ctl.jobs.create(9, workers, slots=2, encoding="lanes", round_mode="every_rank")
        rs = [Rank(fab, d, w.port) for d, w in zip(job.descriptors(ctl.jobs.switch), workers)]
        for r in rs:
            r.send(MsgType.ANNOUNCE, next_block=0)
        for r in rs:
            (res,) = r.received()
            assert res.header.msg_type == MsgType.RESULT and res.header.next_block == 0
            assert res.header.rank == r.cfg.rank_on_wire and res.fingerprint == (FP, FP)
        yield fab, ctl, rs
    finally:
        ctl.close()


def data_round(rs, values, version=1, block=0, only=None, flags=0) -> None:
    for i, r in enumerate(rs):
        if only is None or i in only:
            r.send(
                MsgType.DATA, values[i], flags, slot_version=version, block=block, next_block=END
            )


def test_a_round_crosses_both_levels_once_per_link(job_ranks):
    fab, ctl, rs = job_ranks
    before = fab.link_counts()
    x = [np.arange(K) * (i + 1) for i in range(4)]
    data_round(rs, x)
    for r in rs:
        (res,) = r.received()
        assert np.array_equal(res.values, sum(x)) and res.header.next_block == END
        assert not res.header.flags & Flag.REPAIRED  # no resend reached it
    after = fab.link_counts()
    for end in [("l1", UPLINK), ("l2", UPLINK), ("s", 1), ("s", 2)]:
        assert after[end].frames - before[end].frames == 1, end  # one partial, one result


def test_a_lost_partial_is_repaired(job_ranks):
    fab, _, rs = job_ranks
    x = [np.full(K, i + 1) for i in range(4)]
    lose(fab, ("l1", UPLINK))
    data_round(rs, x)
    assert all(not r.received() for r in rs)
    lose(fab, None)
    rs[1].send(MsgType.DATA, x[1], Flag.RETRANSMIT, slot_version=1, block=0, next_block=END)
    for r in rs:
        (res,) = r.received()
        assert np.array_equal(res.values, np.full(K, 10))
        # the partial sent again completed the spine's round: every rank's copy, through
        # either leaf, says the round lived through a repair (docs/fabric.md)
        assert res.header.flags & Flag.REPAIRED


def test_a_lost_result_is_repaired_from_the_spines_cache(job_ranks):
    fab, _, rs = job_ranks
    x = [np.full(K, i + 1) for i in range(4)]
    lose(fab, ("s", 2))  # the spine's port towards l2
    data_round(rs, x)
    assert [len(r.received()) for r in rs] == [1, 1, 0, 0]
    lose(fab, None)
    rs[3].send(MsgType.DATA, x[3], Flag.RETRANSMIT, slot_version=1, block=0, next_block=END)
    for r in rs[2:]:
        (res,) = r.received()
        assert np.array_equal(res.values, np.full(K, 10)) and res.header.flags & Flag.CACHED


def test_the_spines_status_reaches_every_rank_of_a_complete_leaf(job_ranks):
    """l1's ranks have contributed, l2's not: a retransmission of an l1 rank sends l1's
    partial up again, the spine (waiting for l2) answers with its STATUS, and l1 relays
    it to both its ranks (RELAYED, the spine's bitmap: l1 only); nothing reaches l2's."""
    fab, _, rs = job_ranks
    x = [np.full(K, i + 1) for i in range(4)]
    data_round(rs, x, only=(0, 1))
    assert all(not r.received() for r in rs)
    rs[0].send(MsgType.DATA, x[0], Flag.RETRANSMIT, slot_version=1, block=0, next_block=END)
    for r in rs[:2]:
        (status,) = r.received()
        assert status.header.msg_type == MsgType.STATUS and status.header.flags & Flag.RELAYED
        assert status.contributors == 0b01 and status.header.rank == r.cfg.rank_on_wire
    assert all(not r.received() for r in rs[2:])
    data_round(rs, x, only=(2, 3))
    for r in rs:
        (res,) = r.received()
        assert np.array_equal(res.values, np.full(K, 10))


def test_a_restarted_spine_answers_state_lost_to_every_rank(job_ranks):
    fab, ctl, rs = job_ranks
    fab.switch("s").restart()
    assert ctl.ensure() == ["s"]  # the spine's part restored from its state file
    x = [np.ones(K)] * 4
    data_round(rs, x, flags=Flag.CONTINUED)
    for r in rs:
        (res,) = r.received()
        assert res.header.flags & Flag.STATE_LOST, r.cfg.rank


def test_a_job_the_spine_lost_is_lost_at_every_leaf_too(job_ranks):
    """After the spine's restore the controller marks the job lost on the leaves too
    (FabricController.spread_lost): rank 0 alone sends its next round, which its leaf
    would hold for rank 1, and meets STATE_LOST at once from its own leaf, without a
    frame on any uplink (one job-wide answer per packet would flood every leaf)."""
    fab, ctl, rs = job_ranks
    fab.switch("s").restart()
    assert ctl.ensure() == ["s"]
    lost = {n: [(j.job, j.lost) for j in c.jobs.jobs()] for n, c in ctl.controllers.items()}
    assert lost == {n: [(9, True)] for n in ("s", "l1", "l2")}, lost
    before = fab.link_counts()
    data_round(rs, [np.ones(K)] * 4, only=(0,), flags=Flag.CONTINUED)
    (res,) = rs[0].received()
    assert res.header.flags & Flag.STATE_LOST and res.header.rank == rs[0].cfg.rank_on_wire
    assert all(not r.received() for r in rs[1:])
    after = fab.link_counts()
    for end in [("l1", UPLINK), ("l2", UPLINK), ("s", 1), ("s", 2)]:
        assert after[end].frames == before[end].frames, end


def test_a_restarted_leaf_makes_every_rank_fail_at_its_next_packet(job_ranks):
    """l1 restarts and comes back lost, and the controller marks the job lost on the
    spine and l2 too: each rank's next packet is answered STATE_LOST by its own leaf,
    l2's ranks' as well (whose leaf and spine kept running), instead of their waiting for
    l1's partial."""
    fab, ctl, rs = job_ranks
    fab.switch("l1").restart()
    assert ctl.ensure() == ["l1"]
    data_round(rs, [np.ones(K)] * 4, flags=Flag.CONTINUED)
    for r in rs:
        (res,) = r.received()
        assert res.header.flags & Flag.STATE_LOST, r.cfg.rank


PROBE = Flag.RETRANSMIT | Flag.CONTINUED | Flag.PROBE  # hostlib's state probe


def test_a_restarted_spine_fails_ranks_that_had_no_result_at_once(job_ranks):
    """The spine's result of slot 1's first round reached l1's ranks, not l2, and the
    spine restarted. l2's ranks resend that round (not CONTINUED: they had no result
    there); restored as a live job, the spine would rebuild its slot and hold them for l1,
    whose ranks have moved on. Restored as lost, and the job marked lost on the leaves
    too, each resend is answered STATE_LOST, and so is any packet of l1's ranks."""
    fab, ctl, rs = job_ranks
    lose(fab, ("s", 2))  # the spine's port towards l2
    for r in rs:
        r.send(MsgType.ANNOUNCE, next_block=0, slot=1)
    assert [len(r.received()) for r in rs] == [1, 1, 0, 0]
    lose(fab, None)
    fab.switch("s").restart()
    assert ctl.ensure() == ["s"]
    for r in rs[2:]:
        r.send(MsgType.ANNOUNCE, next_block=0, slot=1, flags=Flag.RETRANSMIT)
    for r in rs[2:]:
        (res,) = r.received()
        assert res.header.flags & Flag.STATE_LOST, r.cfg.rank
    assert all(not r.received() for r in rs[:2])
    data_round(rs, [np.ones(K)] * 4, only=(0, 1), flags=Flag.CONTINUED)  # slot 0's next
    for r in rs[:2]:
        (res,) = r.received()
        assert res.header.flags & Flag.STATE_LOST, r.cfg.rank


def test_a_state_probe_to_a_live_spine_changes_nothing(job_ranks):
    """A state probe into a round its leaf holds the result of goes up once; the spine
    answers from its cache, and the leaf, holding that result, ends the answer: no rank
    hears of it, and the slot's next round sums as ever."""
    fab, _, rs = job_ranks
    before = fab.link_counts()
    rs[2].send(MsgType.ANNOUNCE, next_block=0, flags=PROBE)
    assert all(not r.received() for r in rs)
    after = fab.link_counts()
    for end in [("l2", UPLINK), ("s", 2)]:
        assert after[end].frames - before[end].frames == 1, end
    for end in [("l1", UPLINK), ("s", 1)]:
        assert after[end].frames == before[end].frames, end
    x = [np.arange(K) * (i + 1) for i in range(4)]
    data_round(rs, x)
    for r in rs:
        (res,) = r.received()
        assert np.array_equal(res.values, sum(x))


@pytest.mark.parametrize(
    "encoding",
    [
        "lanes",
        "packed",
    ],
)
def test_the_spines_status_is_relayed_in_either_encoding(inprocess_fabric, tmp_path, encoding):
    """The relayed STATUS of an announce round (no values: either encoding's frames are
    the same but for FLAG_PACKED): l1's ranks announce, l2's do not, l1's rank 0 asks
    again, and both of l1's ranks hear the spine's STATUS."""
    fab = inprocess_fabric
    ctl = FabricController(parse(fabric_config(fab, tmp_path)))
    try:
        ctl.up(retries=3)
        workers = ranks(2)
        job = ctl.jobs.create(11, workers, slots=2, encoding=encoding, round_mode="every_rank")
        rs = [Rank(fab, d, w.port) for d, w in zip(job.descriptors(ctl.jobs.switch), workers)]
        packed = Flag.PACKED if encoding == "packed" else 0
        for r in rs[:2]:
            r.send(MsgType.ANNOUNCE, next_block=0, flags=packed)
        assert all(not r.received() for r in rs)
        rs[0].send(MsgType.ANNOUNCE, next_block=0, flags=packed | Flag.RETRANSMIT)
        for r in rs[:2]:
            (status,) = r.received()
            assert status.header.msg_type == MsgType.STATUS and status.header.flags & Flag.RELAYED
    finally:
        ctl.close()


def test_a_fabric_loss_rate_hits_each_link_once(job_ranks):
    """`set_loss` on a fabric job: the leaves lose result copies to their ranks (egress),
    the spine's results to the leaves are lost only as they enter a leaf (ingress), never
    also as they leave the spine (that doubled each downlink's rate)."""
    fab, ctl, rs = job_ranks
    job_id = rs[0].cfg.job
    ctl.jobs.set_loss(job_id, ingress=0.0, egress=0.99, seed=5)
    data_round(rs, [np.full(K, i + 1) for i in range(4)])
    counts = {
        name: job_stats(c.conn, c.jobs.table.jobs[job_id].job_index)
        for name, c in ctl.controllers.items()
    }
    assert counts["s"]["simulated_drops_egress"] == 0
    assert counts["s"]["rounds_completed"] >= 2  # the announce round and this one
    for leaf in ("l1", "l2"):
        assert counts[leaf]["simulated_drops_egress"] >= 1, counts[leaf]
