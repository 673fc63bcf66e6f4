"""Silent rounds across two levels (docs/fabric.md, "Silent rounds on a fabric"), packet by
packet, on every switch kind.

The switch under test is a **leaf** of a silent job: three ranks (ports 1-3) that send only
for their own non-zero blocks, and an uplink (port 9) to a spine this test plays. The leaf
sends the spine one partial in every round: its ranks' sum when some of them took part,
else an empty one it makes from the spine's RESULT of the round before. Each loss between
the levels is made by not delivering a frame, and repaired by a rank's query or
retransmission. The **spine**'s part (its rounds wait for every leaf) is checked on the
same switch.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from hostlib import protocol as p
from hostlib.protocol import END_OF_STREAM as END, Flag, MsgType
from p4net import harness
from p4net.harness import FINGERPRINT as FP
from p4reduce import wire

from .test_leaf_role import (
    LEAF_RANK,
    SPINE,
    UPLINK_PORT,
    adopted,
    down,
    leaf_job,
    leaf_spec,
    up,
)

K = p.BLOCK_VALUES
JOB_RANKS = 8  # the whole job's: the packed bias's N


def silent_leaf(switch, job: int, encoding: str = "lanes") -> harness.TestJob:
    """A leaf's part of a silent job of JOB_RANKS ranks: three of them here."""
    return leaf_job(switch, job, encoding=encoding, job_ranks=JOB_RANKS, round_mode="silent")


def nothing_up(job: harness.TestJob) -> None:
    got = up(job, timeout=0.4)
    assert got is None, f"the leaf sent {got.header} up"


def spine_result(job, version: int, block: int, next_block: int, **kw) -> dict[int, p.Frame]:
    """The spine's RESULT (flagged SILENT) to the leaf; what each rank then gets."""
    flags = kw.pop("msg_flags", 0) | Flag.SILENT
    down(
        job, msg_flags=flags, slot=0, slot_version=version, block=block, next_block=next_block, **kw
    )
    return job.results()


def announce_round(job, nexts=(4, 2, 9), winner: int = 2) -> p.Frame:
    """Every rank announces; the leaf's partial (its minimum) goes up; the spine names
    `winner`, which every rank gets. Returns the partial."""
    for rank, nb in enumerate(nexts):
        job.send(rank, MsgType.ANNOUNCE, next_block=nb)
    partial = up(job)
    assert partial is not None, "the leaf sent nothing up"
    job.assert_silent()
    for res in spine_result(job, 0, END, winner, fingerprint=(FP, FP)).values():
        assert res.header.next_block == winner and res.fingerprint == (FP, FP)
    return partial


def test_the_leaf_sends_a_partial_every_round_and_its_ranks_only_their_blocks(switch):
    job = silent_leaf(switch, 70)
    partial = announce_round(job)
    h = partial.header
    assert (h.msg_type, h.rank, h.next_block) == (MsgType.ANNOUNCE, LEAF_RANK, 2)
    assert h.flags & Flag.SILENT and partial.fingerprint == (FP, FP)
    nothing_up(job)  # rank 1 has the winner's block: no empty partial
    # block 2: rank 1 alone sends, and the leaf's part is done
    a = np.arange(K)
    job.send(1, MsgType.DATA, version=1, block=2, values=a, next_block=7)
    partial = up(job)
    assert partial is not None
    h = partial.header
    assert (h.msg_type, h.slot_version, h.block, h.next_block) == (MsgType.DATA, 1, 2, 4)
    assert not h.flags & Flag.COVERED  # ranks 0 and 2 took no part
    assert np.array_equal(partial.values, a)
    job.assert_silent()
    # the spine's winner is another leaf's block 3, which none of these ranks has: the
    # leaf's partial of that round leaves at once, empty, announcing the leaf's minimum
    s = np.full(K, 5)
    for rank, res in spine_result(job, 1, 2, 3, values=s).items():
        assert res.header.msg_type == MsgType.RESULT and res.header.rank == rank
        assert np.array_equal(res.values, s)
    empty = up(job)
    assert empty is not None, "no empty partial"
    h = empty.header
    assert (h.msg_type, h.slot_version, h.block, h.next_block, h.rank) == (
        MsgType.DATA,
        0,
        3,
        4,
        LEAF_RANK,
    )
    assert h.flags & Flag.SILENT and h.flags & Flag.CONTINUED
    assert empty.dst_ip == p.ip_bytes(SPINE.ip) and empty.src_ip == p.ip_bytes(switch.address.ip)
    assert np.array_equal(empty.values, np.zeros(K))
    # block 3's result names block 4: rank 0 is expected, and its DATA completes the round
    spine_result(job, 0, 3, 4, values=s)
    nothing_up(job)
    job.send(0, MsgType.DATA, version=1, block=4, values=a, next_block=END)
    partial = up(job)
    assert partial is not None and partial.header.next_block == 7
    assert partial.header.block == 4 and np.array_equal(partial.values, a)


def test_a_packed_leaf_carries_every_one_of_its_ranks_bias(switch):
    """The whole job's bias in every round: a partial adds the bias of its ranks outside
    the round, an empty partial all three of theirs."""
    job = silent_leaf(switch, 71, encoding="packed")
    bias = wire.packed_bias(JOB_RANKS)
    for rank, nb in enumerate((4, 2, 9)):
        job.send(rank, MsgType.ANNOUNCE, next_block=nb, flags=Flag.PACKED)
    assert up(job) is not None
    spine_result(job, 0, END, 2, fingerprint=(FP, FP), msg_flags=Flag.PACKED)
    q = np.arange(K) - 20
    job.send(1, MsgType.DATA, version=1, block=2, values=q + bias, next_block=7, flags=Flag.PACKED)
    partial = up(job)
    assert partial is not None
    assert np.array_equal(partial.values.astype(np.int64) & 0xFFFFFFFF, q + 3 * bias)
    spine_result(job, 1, 2, 3, values=np.full(K, 8 * bias), msg_flags=Flag.PACKED)
    empty = up(job)
    assert empty is not None and empty.header.flags & Flag.PACKED
    assert np.array_equal(empty.values.astype(np.int64), np.full(K, 3 * bias))


def test_a_lost_partial_goes_up_again_on_a_silent_ranks_query(switch):
    job = silent_leaf(switch, 72)
    announce_round(job)
    a = np.arange(K)
    job.send(1, MsgType.DATA, version=1, block=2, values=a, next_block=7)
    assert up(job) is not None  # ... and lost on the way to the spine
    # rank 0, which sat the round out, asks for its result: the partial goes up again
    job.send(0, MsgType.SKIP, version=1, block=2, next_block=4, flags=Flag.RETRANSMIT)
    again = up(job)
    assert again is not None, "the query sent nothing up"
    h = again.header
    assert (h.msg_type, h.block, h.next_block, h.rank) == (MsgType.DATA, 2, 4, LEAF_RANK)
    assert h.flags & Flag.RETRANSMIT and np.array_equal(again.values, a)
    job.assert_silent()
    # the spine's answer is stored and goes to every rank
    s = np.full(K, 11)
    got = spine_result(job, 1, 2, 3, values=s, msg_flags=Flag.CACHED)
    assert all(np.array_equal(r.values, s) for r in got.values())
    assert up(job) is not None  # the empty partial of block 3
    # another answer of the spine's cache (to a REWIND request the leaf sent up, say) is
    # passed on as it is, and changes nothing here
    for res in spine_result(job, 1, 2, 3, values=s, msg_flags=Flag.CACHED).values():
        assert res.header.flags & Flag.CACHED and res.header.block == 2
    nothing_up(job)
    # the result is the leaf's now: a rank's query gets it from the leaf
    job.send(2, MsgType.SKIP, version=1, block=2, next_block=9, flags=Flag.RETRANSMIT)
    res = job.result(2)
    assert res is not None and res.header.flags & Flag.CACHED
    assert res.header.block == 2 and np.array_equal(res.values, s)


def test_a_lost_empty_partial_goes_up_again(switch):
    job = silent_leaf(switch, 73)
    announce_round(job, nexts=(6, 5, 9), winner=1)  # another leaf's block 1
    first = up(job)
    assert first is not None and first.header.block == 1 and first.header.next_block == 5
    # ... lost: a rank waiting for block 1's result asks the leaf
    job.send(0, MsgType.SKIP, version=1, block=1, next_block=6, flags=Flag.RETRANSMIT)
    again = up(job)
    assert again is not None, "the query sent nothing up"
    h = again.header
    assert (h.msg_type, h.slot_version, h.block, h.next_block) == (MsgType.DATA, 1, 1, 5)
    assert h.flags & Flag.RETRANSMIT and np.array_equal(again.values, np.zeros(K))
    job.assert_silent()


def data_and_its_copy(job, rank: int, next_block: int) -> None:
    """Rank `rank`'s DATA of block 2 (version 1), then the same again, RETRANSMIT."""
    for flags in (0, Flag.RETRANSMIT):
        job.send(
            rank,
            MsgType.DATA,
            version=1,
            block=2,
            values=np.arange(K),
            next_block=next_block,
            flags=flags,
        )


def test_the_spines_status_reaches_the_leafs_ranks(switch):
    job = silent_leaf(switch, 74)
    announce_round(job)
    data_and_its_copy(job, 1, next_block=7)
    assert up(job) is not None and up(job) is not None  # the partial, and again
    down(
        job,
        msg_type=MsgType.STATUS,
        msg_flags=Flag.SILENT,
        slot=0,
        slot_version=1,
        block=2,
        contributors=0b01,
    )
    for res in job.results().values():
        assert res.header.msg_type == MsgType.STATUS and res.header.flags & Flag.RELAYED
    nothing_up(job)


def test_the_leafs_own_status_reaches_the_asker_and_the_ranks_its_round_expects(switch):
    """In silent rounds the leaf's STATUS goes to the asker and to the ranks its round
    expects: each whose packet it holds stops asking, one whose packet was lost learns it
    at once (the bitmap lacks it). Not to a rank that sits the round out: it may have
    missed the rounds since its last packet and must not take another round's STATUS for
    its own."""
    job = silent_leaf(switch, 78)
    announce_round(job, nexts=(2, 2, 9))  # ranks 0 and 1 in block 2's round, not rank 2
    data_and_its_copy(job, 0, next_block=9)
    for rank in (0, 1):
        status = job.result(rank)
        assert status is not None and status.header.msg_type == MsgType.STATUS
        assert (status.header.rank, status.header.block) == (rank, 2)
        assert status.contributors == 0b101  # rank 0, and rank 2 (not in the round)
    job.assert_silent()
    nothing_up(job)
    # rank 2's query into the round: the asker gets the STATUS, and so do the round's
    job.send(2, MsgType.SKIP, version=1, block=2, next_block=9, flags=Flag.RETRANSMIT)
    for rank, status in job.results().items():
        assert status.header.msg_type == MsgType.STATUS and status.header.rank == rank
        assert status.contributors == 0b101
    job.assert_silent()
    nothing_up(job)


def request_goes_up(job, rank: int, version: int, block: int, next_block: int) -> None:
    """Rank `rank`'s REWIND request goes up as the leaf's, from the leaf's address, and
    no rank gets anything from the leaf."""
    job.send(rank, MsgType.REWIND, version=version, block=block, next_block=next_block)
    relayed = up(job)
    assert relayed is not None, "the request was not sent up"
    h = relayed.header
    assert (h.msg_type, h.rank, h.block, h.next_block) == (
        MsgType.REWIND,
        LEAF_RANK,
        block,
        next_block,
    )
    assert relayed.src_ip == p.ip_bytes(job.switch.address.ip)
    job.assert_silent()


def test_a_ranks_rewind_request_goes_up_as_the_leafs(switch):
    job = silent_leaf(switch, 75)
    announce_round(job)
    request_goes_up(job, 2, version=1, block=2, next_block=0)
    # the spine applies it: its REWIND is the round's result, and the next round is a
    # rewind round every rank of the leaf announces in
    job.send(1, MsgType.DATA, version=1, block=2, values=np.arange(K), next_block=7)
    assert up(job) is not None
    for res in spine_result(job, 1, 2, 0, values=np.ones(K), msg_type=MsgType.REWIND).values():
        assert res.header.msg_type == MsgType.REWIND and res.header.next_block == 0
    nothing_up(job)  # every rank is in a rewind round
    for rank, nb in enumerate((4, 2, 9)):
        job.send(rank, MsgType.ANNOUNCE, version=0, block=0, next_block=nb, flags=Flag.CONTINUED)
        if rank < 2:
            nothing_up(job)
    partial = up(job)
    assert partial is not None and partial.header.msg_type == MsgType.ANNOUNCE
    assert (partial.header.block, partial.header.next_block) == (0, 2)


def test_a_rewind_request_from_a_round_its_sender_joined_goes_up_unanswered_here(switch):
    """A rank asking for a rewind with its round's version, its bit set in that round's
    half (it announced there, the spine's result is held): the request goes up as the
    leaf's, and the leaf answers nothing itself -- its cached answer would carry the
    request's block and nobody's winner (a rank whose links were slow met one in
    Mininet: a RESULT naming block 0 on another block's slot)."""
    job = silent_leaf(switch, 79)
    announce_round(job)
    request_goes_up(job, 0, version=0, block=3, next_block=3)


def test_a_closing_round_goes_up_once_every_rank_closed_with_the_rewind_it_took(switch):
    job = silent_leaf(switch, 76)
    announce_round(job, nexts=(2, 2, END))
    job.send(0, MsgType.DATA, version=1, block=2, values=np.arange(K), next_block=END)
    job.send(1, MsgType.DATA, version=1, block=2, values=np.arange(K), next_block=END)
    assert up(job) is not None
    spine_result(job, 1, 2, END, values=np.ones(K))  # the job's last block: a closing round
    nothing_up(job)
    job.send(0, MsgType.SKIP, version=0, block=END, next_block=END)
    job.send(1, MsgType.REWIND, version=0, block=END, next_block=2)
    nothing_up(job)
    job.send(2, MsgType.SKIP, version=0, block=END, next_block=END)
    closing = up(job)
    assert closing is not None
    h = closing.header
    assert (h.msg_type, h.slot_version, h.block, h.next_block) == (MsgType.REWIND, 0, END, 2)
    # a rank's copy of its closing SKIP sends the same partial up again
    job.send(2, MsgType.SKIP, version=0, block=END, next_block=END, flags=Flag.RETRANSMIT)
    again = up(job)
    assert again is not None and again.header.msg_type == MsgType.REWIND
    assert again.header.next_block == 2 and again.header.flags & Flag.RETRANSMIT


def spine(switch, job: int, leaves: int = 3) -> harness.TestJob:
    """A spine's part of a silent job: its ranks are `leaves` leaves (no uplink; it
    counts every rank of the job)."""
    leaf = leaf_spec(job, n=leaves, job_ranks=4 * leaves, round_mode="silent")
    return adopted(switch, dataclasses.replace(leaf, uplink=None, ranks_in_job=None))


def test_a_silent_spines_rounds_wait_for_every_leaf(switch):
    """A one-switch silent round takes the ranks at the winner only; a spine's waits for
    every leaf, whose empty partials join it."""
    job = spine(switch, 77)
    for leaf, nb in enumerate((2, 5, 9)):
        job.send(leaf, MsgType.ANNOUNCE, next_block=nb)
    for res in job.results().values():
        assert res.header.next_block == 2
    a = np.arange(K)
    job.send(0, MsgType.DATA, version=1, block=2, values=a, next_block=5)
    job.assert_silent()  # leaves 1 and 2 are still to come
    job.send(1, MsgType.DATA, version=1, block=2, values=np.zeros(K), next_block=5)
    job.assert_silent()
    job.send(2, MsgType.DATA, version=1, block=2, values=np.zeros(K), next_block=9)
    for res in job.results().values():
        h = res.header
        assert (h.msg_type, h.block, h.next_block) == (MsgType.RESULT, 2, 5)
        assert np.array_equal(res.values, a)
    # the same job on one switch: the round at block 2 is rank 0's alone
    alone = switch.add_job(job=78, n=3, slot_base=8, job_index=9, round_mode=wire.RoundMode.SILENT)
    for rank, nb in enumerate((2, 5, 9)):
        alone.send(rank, MsgType.ANNOUNCE, next_block=nb)
    alone.results()
    alone.send(0, MsgType.DATA, version=1, block=2, values=a, next_block=5)
    assert all(r.header.block == 2 for r in alone.results().values())


# Above SKIP_GROWS_TO_VALUES values per block a leaf's empty partial after an announce or
# rewind round cannot grow from a RESULT holding the fingerprint range alone (simple_switch
# gives a received frame 512 bytes of room): the ranks' ANNOUNCEs carry a block after the
# range (p4reduce.wire.announce_carries_block), and so do the partials and RESULTs made
# from them.
WIDE = 2 * wire.SKIP_GROWS_TO_VALUES
WITH_BLOCK = wire.frame_bytes_with_fingerprint_and_block(WIDE)  # bytes of such a frame


def wide_leaf(switch, job: int) -> harness.TestJob:
    return adopted(
        switch,
        leaf_spec(job, job_ranks=JOB_RANKS, round_mode="silent", block_values=WIDE),
    )


def raw_up(job: harness.TestJob) -> tuple[p.Frame, int]:
    """The next frame the leaf sends up, parsed, and its length in bytes."""
    raw = job.switch.proc.recv(UPLINK_PORT, 3.0)
    assert raw is not None, "the leaf sent nothing up"
    return job.parse(raw), len(raw)


def raw_results(job: harness.TestJob) -> dict[int, tuple[p.Frame, int]]:
    """The next frame to each rank, parsed, and its length in bytes."""
    out = {}
    for w in job.workers:
        raw = job.switch.proc.recv(w.port, 3.0)
        assert raw is not None, f"rank {w.rank} got nothing"
        out[w.rank] = job.parse(raw), len(raw)
    return out


def wide_spine_result(job, version: int, block: int, next_block: int, **kw) -> None:
    """The spine's RESULT of an announce or rewind round, the range and a block; each
    rank gets it with the block."""
    flags = kw.pop("msg_flags", 0) | Flag.SILENT
    down(
        job,
        msg_flags=flags,
        slot=0,
        slot_version=version,
        block=block,
        next_block=next_block,
        fingerprint=(FP, FP),
        values=np.zeros(WIDE),
        **kw,
    )
    for res, length in raw_results(job).values():
        assert res.header.next_block == next_block and res.fingerprint == (FP, FP)
        assert length == WITH_BLOCK


def test_above_128_values_an_empty_partial_follows_an_announce_round(switch):
    job = wide_leaf(switch, 80)
    assert job.job.announce_block
    for rank, nb in enumerate((6, 5, 9)):
        job.send(rank, MsgType.ANNOUNCE, next_block=nb)
    partial, length = raw_up(job)
    assert partial.header.msg_type == MsgType.ANNOUNCE and partial.fingerprint == (FP, FP)
    assert length == WITH_BLOCK
    job.assert_silent()
    # the spine names another leaf's block 1: the leaf's empty partial of block 1 leaves
    # at once, made from the RESULT's copy towards the spine
    wide_spine_result(job, 0, END, 1)
    empty, length = raw_up(job)
    h = empty.header
    assert (h.msg_type, h.slot_version, h.block, h.next_block) == (MsgType.DATA, 1, 1, 5)
    assert length == wire.frame_bytes_with_values(WIDE)
    assert np.array_equal(empty.values, np.zeros(WIDE))


def test_above_128_values_an_empty_partial_follows_a_rewind_round(switch):
    job = wide_leaf(switch, 81)
    for rank, nb in enumerate((4, 2, 9)):
        job.send(rank, MsgType.ANNOUNCE, next_block=nb)
    raw_up(job)
    wide_spine_result(job, 0, END, 2)
    job.send(1, MsgType.DATA, version=1, block=2, values=np.arange(WIDE), next_block=7)
    raw_up(job)
    # the spine's REWIND to block 0: every rank announces again, with a block
    spine_result(job, 1, 2, 0, values=np.ones(WIDE), msg_type=MsgType.REWIND)
    for rank, nb in enumerate((4, 2, 9)):
        job.send(rank, MsgType.ANNOUNCE, version=0, block=0, next_block=nb, flags=Flag.CONTINUED)
    partial, length = raw_up(job)
    assert (partial.header.block, partial.header.next_block) == (0, 2)
    assert length == WITH_BLOCK
    # the rewind round's RESULT names another leaf's block 1: the empty partial follows
    wide_spine_result(job, 0, 0, 1)
    empty, _ = raw_up(job)
    assert (empty.header.msg_type, empty.header.slot_version, empty.header.block) == (
        MsgType.DATA,
        1,
        1,
    )
    assert np.array_equal(empty.values, np.zeros(WIDE))


def test_above_128_values_an_announce_without_its_block_is_malformed_at_a_leaf(switch):
    """Taken, it could complete the leaf's announce round and so make the spine's RESULT
    one no leaf can make an empty partial from."""
    job = wide_leaf(switch, 82)
    before = switch.switch_stats()["drops_malformed"]
    job.send(0, MsgType.ANNOUNCE, next_block=4, pad_skip=False)
    job.send(1, MsgType.ANNOUNCE, next_block=2)
    job.send(2, MsgType.ANNOUNCE, next_block=9)
    nothing_up(job)  # rank 0's announcement is missing
    assert switch.switch_stats()["drops_malformed"] == before + 1
    job.send(0, MsgType.ANNOUNCE, next_block=4)
    _, length = raw_up(job)
    assert length == WITH_BLOCK


def test_above_128_values_a_spine_answers_a_repeated_announce_partial_with_its_block(switch):
    """A leaf that lost the announce round's RESULT sends its partial again; the spine's
    cached answer keeps the partial's block, so the leaf can still make its empty partial
    from it."""
    leaf = leaf_spec(83, n=3, job_ranks=12, round_mode="silent", block_values=WIDE)
    job = adopted(switch, dataclasses.replace(leaf, uplink=None, ranks_in_job=None))
    assert job.job.announce_block
    for leaf_rank, nb in enumerate((2, 5, 9)):
        job.send(leaf_rank, MsgType.ANNOUNCE, next_block=nb)
    for res, length in raw_results(job).values():
        assert res.header.next_block == 2 and length == WITH_BLOCK
    job.send(1, MsgType.ANNOUNCE, next_block=5, flags=Flag.RETRANSMIT)
    raw = switch.proc.recv(job.by_rank[1].port, 3.0)
    assert raw is not None, "no cached answer"
    again = job.parse(raw)
    assert again.header.flags & Flag.CACHED and again.header.next_block == 2
    assert len(raw) == WITH_BLOCK


def test_above_128_values_a_spine_takes_a_leafs_header_only_closing_rewind(switch):
    """A leaf's closing partial is made from its ranks' closing SKIPs, header only at
    every size; where one of them asked for a rewind it leaves as a REWIND of block
    END_OF_STREAM, as short. The spine takes it into its closing round (a closing round
    sums nothing), as it takes a header-only closing SKIP, and applies the rewind."""
    leaf = leaf_spec(84, n=3, job_ranks=12, round_mode="silent", block_values=WIDE)
    job = adopted(switch, dataclasses.replace(leaf, uplink=None, ranks_in_job=None))
    for leaf_rank in range(3):
        job.send(leaf_rank, MsgType.ANNOUNCE, next_block=2)
    raw_results(job)
    for leaf_rank in range(3):
        job.send(leaf_rank, MsgType.DATA, version=1, block=2, values=np.ones(WIDE), next_block=END)
    for res in job.results().values():
        assert (res.header.block, res.header.next_block) == (2, END)
    job.send(0, MsgType.SKIP, block=END, pad_skip=False)
    job.send(1, MsgType.REWIND, block=END, next_block=2, pad_skip=False)
    job.assert_silent()
    job.send(2, MsgType.SKIP, block=END, pad_skip=False)
    for res in job.results().values():
        h = res.header
        assert (h.msg_type, h.block, h.next_block) == (MsgType.REWIND, END, 2)
        assert res.values is None and res.fingerprint is None
