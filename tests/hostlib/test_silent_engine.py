"""The worker's silent rounds, driven by crafted RESULT and REWIND packets.

Rank 0 of a 2-rank silent job with 4 slots; its tensor has 12 blocks of which 1, 4 and 9
are non-zero (slot s owns blocks s, s+4, s+8). The crafted results play a switch whose
other rank has blocks 2, 6 and 10 (slot 2) besides. Every packet the engine emits is
decoded with the reference codec (protocol.parse_frame): the tests check bytes.
"""

from __future__ import annotations

import numpy as np
import pytest

from hostlib import protocol as p
from hostlib.engine import new_engine
from hostlib.numerics import make_payload
from hostlib.silent import QUERIES_BEFORE_REWIND, IncompleteSum, SilentEngine
from hostlib.timers import EngineParams
from hostlib_helpers import decode, descriptor, engine_tensor
from p4reduce.job import load_descriptor

EOS = p.END_OF_STREAM
T0 = 100.0
PARAMS = EngineParams(timeout=0.005, max_timeout=0.02, double_after=2, deadline=5.0)
FP = p.fingerprint(np.int32, 12 * 64)
R, DATA, SKIP, ANN, RW = (
    p.MsgType.RESULT,
    p.MsgType.DATA,
    p.MsgType.SKIP,
    p.MsgType.ANNOUNCE,
    p.MsgType.REWIND,
)


ENDED = int(p.Flag.ENDED)


def make_engine(slot_count: int = 4) -> SilentEngine:
    cfg = load_descriptor(descriptor(0, 2, slot_count=slot_count, round_mode="silent"))
    eng = new_engine(cfg, make_payload(engine_tensor(), 2), T0, PARAMS)
    assert isinstance(eng, SilentEngine)
    return eng


def feed(e, slot, version, block, nxt, *, msg=R, values=None, fp=None, now=T0, flags=0):
    """One packet from the switch; announce-like results carry the fingerprint range."""
    h = p.Header.make(
        msg,
        job=7,
        slot=slot,
        rank=0,
        slot_version=version,
        flags=int(p.Flag.SILENT) | flags,
        block=block,
        next_block=nxt,
    )
    e.on_result(h, values, now, fingerprint=fp)


def sent(e, now=T0):
    return [
        (f.header.msg_type, f.header.slot_version, f.header.block, f.header.next_block, f)
        for f in decode(e.packets_to_send(now, expire=False))
    ]


def only(e, slot, now=T0):
    out = [x[:4] for x in sent(e, now) if x[4].header.slot == slot]
    return out


def closes_slot_2_with_every_sum(e, version):
    """The closing round's RESULT (in `version`) ends slot 2, whose blocks 2, 6 and 10
    the crafted results summed to 2, 6 and 10 in every value."""
    feed(e, 2, version, EOS, EOS)
    assert not e.active[2]
    out = e.output.finish().reshape(12, 64)
    assert (out[2] == 2).all() and (out[6] == 6).all() and (out[10] == 10).all()


def test_every_packet_is_flagged_silent_and_announces_each_slot():
    e = make_engine()
    frames = decode(e.packets_to_send(T0, expire=False))
    assert [f.header.slot for f in frames] == [0, 1, 2, 3]
    assert all(f.header.flags & p.Flag.SILENT for f in frames)
    assert [f.header.next_block for f in frames] == [4, 1, EOS, EOS]


def test_a_slot_costs_an_announce_its_data_and_a_closing_skip():
    e = make_engine()
    sent(e)
    feed(e, 1, 0, EOS, 1, fp=(FP, FP))
    assert only(e, 1) == [(DATA, 1, 1, 9)]
    # the other rank's block 5 is zero here: rank 0 is silent for it (its kept frame is a
    # query), then sends block 9 when the RESULT of block 5 names it
    feed(e, 1, 1, 1, 5, values=np.full(64, 3, np.int32))
    assert only(e, 1) == []
    feed(e, 1, 0, 5, 9, values=np.full(64, 7, np.int32))
    assert only(e, 1) == [(DATA, 1, 9, EOS)]
    feed(e, 1, 1, 9, EOS, values=np.full(64, 11, np.int32))
    assert only(e, 1) == [(SKIP, 0, EOS, EOS)]
    assert e.active[1]
    feed(e, 1, 0, EOS, EOS)  # the closing RESULT: the slot is done
    assert not e.active[1] and e.cover[1] == EOS
    out = e.output.finish().reshape(12, 64)
    assert (out[1] == 3).all() and (out[5] == 7).all() and (out[9] == 11).all()
    assert e.stats.sent_counts() == {"ANNOUNCE": 4, "DATA": 2, "SKIP": 1}


def test_a_slot_no_rank_has_a_block_in_ends_at_its_announce():
    """Every rank announced END_OF_STREAM on slot 3, so its announce round's RESULT names
    END_OF_STREAM: that ends the slot (every rank took part: nothing to close), in the
    announce round's version, with nothing more sent; a rewind round that names it does
    not (its closing round follows)."""
    e = make_engine()
    sent(e)
    feed(e, 3, 0, EOS, EOS, fp=(FP, FP), flags=ENDED)
    assert not e.active[3] and e.cover[3] == EOS and e.slot_version[3] == 0
    assert only(e, 3) == []
    feed(e, 2, 0, EOS, 2, fp=(FP, FP))
    feed(e, 2, 1, 2, 6, values=np.full(64, 2, np.int32), msg=RW)  # rewind to 6
    assert only(e, 2) == [(p.MsgType.ANNOUNCE, 0, 6, EOS)]
    feed(e, 2, 0, 6, EOS, fp=(FP, FP))  # the rewind round names END_OF_STREAM
    assert e.active[2] and only(e, 2) == [(SKIP, 1, EOS, EOS)]
    assert e.stats.sent_counts() == {"ANNOUNCE": 5, "SKIP": 1}


def test_a_data_round_flagged_ended_ends_the_slot_and_data_says_covered():
    """A DATA goes out flagged COVERED when the rank holds every earlier sum of the slot
    (its coverage reached the block); a RESULT naming END_OF_STREAM that the switch
    flagged ENDED (its round expected every rank, each COVERED) ends the slot, its sums
    stored, with no closing SKIP. After a gap the DATA is not COVERED."""
    covered = int(p.Flag.COVERED)
    e = make_engine()
    sent(e)
    feed(e, 1, 0, EOS, 1, fp=(FP, FP))
    [(msg, _, blk, _, f)] = [x for x in sent(e) if x[4].header.slot == 1]
    assert (msg, blk) == (DATA, 1) and f.header.flags & covered
    feed(e, 1, 1, 1, 5, values=np.full(64, 3, np.int32))
    feed(e, 1, 0, 5, 9, values=np.full(64, 7, np.int32))
    [(msg, _, blk, _, f)] = [x for x in sent(e) if x[4].header.slot == 1]
    assert (msg, blk) == (DATA, 9) and f.header.flags & covered
    feed(e, 1, 1, 9, EOS, values=np.full(64, 11, np.int32), flags=ENDED)
    assert not e.active[1] and e.slot_version[1] == 1 and only(e, 1) == []
    out = e.output.finish().reshape(12, 64)
    assert (out[1] == 3).all() and (out[5] == 7).all() and (out[9] == 11).all()
    assert e.stats.sent_counts() == {"ANNOUNCE": 4, "DATA": 2}
    gap = make_engine()
    sent(gap)
    feed(gap, 1, 0, EOS, 1, fp=(FP, FP))
    sent(gap)
    feed(gap, 1, 0, 5, 9, values=np.full(64, 7, np.int32))  # the RESULT of block 1 lost
    data = [x[4] for x in sent(gap) if x[4].header.slot == 1 and x[0] == DATA]
    assert [f.header.block for f in data] == [9] and not data[0].header.flags & covered


def test_a_gap_in_the_chain_rewinds_and_nothing_is_missing():
    """Rank 0 is silent on slot 2 (the other rank has 2, 6, 10). It misses the RESULT of
    block 6: the RESULT of block 10 is a gap, so its closing packet is a REWIND(P=6); the
    switch answers with a REWIND, rank 0 announces from 6 and re-runs the rest."""
    e = make_engine()
    sent(e)
    feed(e, 2, 0, EOS, 2, fp=(FP, FP))
    assert only(e, 2) == []
    feed(e, 2, 1, 2, 6, values=np.full(64, 2, np.int32))
    # (the RESULT of block 6, version 0, is lost)
    feed(e, 2, 1, 10, EOS, values=np.full(64, 10, np.int32))
    assert only(e, 2) == [(RW, 0, EOS, 6)]
    assert e.stats.rewind_requests == 1
    feed(e, 2, 0, EOS, 6, msg=RW)  # the closing round completed as a REWIND to 6
    assert only(e, 2) == [(ANN, 1, 6, EOS)]
    feed(e, 2, 1, 6, 6, fp=(FP, FP))  # the rewind round: every rank's first block >= 6
    feed(e, 2, 0, 6, 10, values=np.full(64, 6, np.int32))
    feed(e, 2, 1, 10, EOS, values=np.full(64, 10, np.int32))
    assert only(e, 2) == [(SKIP, 0, EOS, EOS)]
    closes_slot_2_with_every_sum(e, 0)
    assert e.stats.rewinds == 1


def test_a_lost_copy_of_a_re_run_round_this_rank_holds_is_no_gap():
    """Rank 0, silent on slot 2, holds the sums of blocks 2, 6 and 10 when another rank's
    rewind to block 2 re-runs the slot. It loses the re-run's RESULT of block 2: the
    RESULT of block 6 comes next, and every block from its coverage (2) through 6 has its
    sum stored, so it goes on -- no REWIND request, which would re-run the slot again for
    every rank -- and closes the slot with every sum."""
    e = make_engine()
    sent(e)
    feed(e, 2, 0, EOS, 2, fp=(FP, FP))
    feed(e, 2, 1, 2, 6, values=np.full(64, 2, np.int32))
    feed(e, 2, 0, 6, 10, values=np.full(64, 6, np.int32))
    feed(e, 2, 1, 10, 2, msg=RW, values=np.full(64, 10, np.int32))  # block 10, rewind to 2
    assert only(e, 2) == [(ANN, 0, 2, EOS)]
    feed(e, 2, 0, 2, 2, fp=(FP, FP))  # the rewind round: coverage back to block 2
    # (the re-run's RESULT of block 2, version 1, is lost)
    feed(e, 2, 0, 6, 10, values=np.full(64, 6, np.int32))
    feed(e, 2, 1, 10, EOS, values=np.full(64, 10, np.int32))
    assert only(e, 2) == [(SKIP, 0, EOS, EOS)]
    assert e.stats.rewind_requests == 0
    closes_slot_2_with_every_sum(e, 0)


def test_a_re_run_round_before_the_coverage_is_no_gap():
    """Rank 0 holds the sums of blocks 2 and 6 of slot 2 (coverage: block 10) when a REWIND
    to block 2 comes (as the RESULT of block 6), and loses the rewind round's RESULT,
    which would have brought its coverage back to block 2: the re-run's rounds of blocks
    2 and 6 are before its coverage and tell it nothing it lacks, so it follows them
    without asking for a rewind, takes block 10's sum and closes the slot."""
    e = make_engine()
    sent(e)
    feed(e, 2, 0, EOS, 2, fp=(FP, FP))
    feed(e, 2, 1, 2, 6, values=np.full(64, 2, np.int32))
    feed(e, 2, 0, 6, 2, msg=RW, values=np.full(64, 6, np.int32))  # block 6, rewind to 2
    assert only(e, 2) == [(ANN, 1, 2, EOS)]
    # (the rewind round's RESULT, version 1, is lost)
    feed(e, 2, 0, 2, 6, values=np.full(64, 2, np.int32))
    feed(e, 2, 1, 6, 10, values=np.full(64, 6, np.int32))
    assert e.stats.rewind_requests == 0
    feed(e, 2, 0, 10, EOS, values=np.full(64, 10, np.int32))
    assert only(e, 2) == [(SKIP, 1, EOS, EOS)]
    assert e.stats.rewind_requests == 0
    closes_slot_2_with_every_sum(e, 1)


def test_a_lost_copy_of_a_round_whose_sum_this_rank_lacks_is_a_gap_after_a_rewind():
    """The same re-run, but rank 0 never had block 6's sum (it lost that RESULT before
    the rewind, and the rewind came before its own request): the re-run's RESULT of
    block 6 lost too, the RESULT of block 10 is a gap (block 6 unknown), and its closing
    packet asks for a rewind to block 6."""
    e = make_engine()
    sent(e)
    feed(e, 2, 0, EOS, 2, fp=(FP, FP))
    feed(e, 2, 1, 2, 6, values=np.full(64, 2, np.int32))
    # (the RESULT of block 6, version 0, is lost; the switch's REWIND to 2 comes next)
    feed(e, 2, 1, 10, 2, msg=RW, values=np.full(64, 10, np.int32))
    sent(e)
    feed(e, 2, 0, 2, 2, fp=(FP, FP))
    feed(e, 2, 1, 2, 6, values=np.full(64, 2, np.int32))
    # (the re-run's RESULT of block 6 is lost as well)
    feed(e, 2, 1, 10, EOS, values=np.full(64, 10, np.int32))
    assert only(e, 2) == [(RW, 0, EOS, 6)]


def test_a_rewind_re_runs_blocks_already_stored_without_storing_them_twice():
    """Another rank's rewind to block 1 after rank 0 stored blocks 1 and 5: rank 0 goes
    back (its cursor to block 1: it sends DATA(1) again) and stores from block 9 on only.
    (The re-run's sums differ here so that a second store would show.)"""
    e = make_engine()
    sent(e)
    feed(e, 1, 0, EOS, 1, fp=(FP, FP))
    feed(e, 1, 1, 1, 5, values=np.full(64, 3, np.int32))
    feed(e, 1, 0, 5, 1, msg=RW, values=np.full(64, 7, np.int32))  # sums of 5, rewind to 1
    assert only(e, 1) == [(DATA, 1, 1, 9), (ANN, 1, 1, 1)]
    feed(e, 1, 1, 1, 1, fp=(FP, FP))
    assert only(e, 1) == [(DATA, 0, 1, 9)]
    feed(e, 1, 0, 1, 5, values=np.full(64, -1, np.int32))
    feed(e, 1, 1, 5, 9, values=np.full(64, -1, np.int32))
    assert only(e, 1) == [(DATA, 0, 9, EOS)]
    feed(e, 1, 0, 9, EOS, values=np.full(64, 11, np.int32))
    feed(e, 1, 1, EOS, EOS)
    assert not e.active[1]
    out = e.output.finish().reshape(12, 64)
    assert (out[1] == 3).all() and (out[5] == 7).all() and (out[9] == 11).all()


def test_duplicates_and_stale_copies_are_ignored():
    """Cached copies of the last result taken (answers to resends sent before it), and
    in the announce round the previous call's RESULT that ended the slot (the switch's
    last completed round: a closing round, or an announce round that named
    END_OF_STREAM), change nothing."""
    e = make_engine()
    sent(e)
    cached = int(p.Flag.CACHED)
    feed(e, 2, 1, EOS, EOS, flags=cached)  # the last call's closing round, version 1
    assert e.kind[2] == 0 and e.active[2]
    feed(e, 3, 1, EOS, EOS, fp=(FP, FP), flags=cached | ENDED)  # the last call's announce
    assert e.kind[3] == 0 and e.active[3]
    feed(e, 2, 0, EOS, 2, fp=(FP, FP))
    feed(e, 2, 0, EOS, 2, fp=(FP, FP), flags=cached)
    feed(e, 2, 1, 2, 6, values=np.full(64, 2, np.int32))
    ignored = e.stats.results_ignored
    feed(e, 2, 1, 2, 6, values=np.full(64, 2, np.int32), flags=cached)
    assert e.stats.results_ignored == ignored + 1
    assert only(e, 2) == [] and e.cover[2] == 6 and not e.want_rewind[2]
    assert e.block[2] == 6 and e.slot_version[2] == 0


def test_unanswered_queries_turn_into_a_rewind_request():
    e = make_engine(slot_count=4)
    sent(e)
    for s, nxt in ((0, 4), (1, 1), (3, EOS)):  # the other slots run to their end
        feed(e, s, 0, EOS, nxt, fp=(FP, FP), flags=ENDED if nxt == EOS else 0)  # (slot 3 ends)
        if nxt != EOS:
            feed(e, s, 1, nxt, EOS, values=np.ones(64, np.int32))
            feed(e, s, 0, EOS, EOS)
    assert list(np.flatnonzero(e.active)) == [2]
    feed(e, 2, 0, EOS, 2, fp=(FP, FP))
    feed(e, 2, 1, 2, 6, values=np.full(64, 2, np.int32))
    sent(e)
    per_timer = []
    t = T0
    for _ in range(QUERIES_BEFORE_REWIND + 1):
        t += 10.0
        frames = [f for f in decode(e.packets_to_send(t)) if f.header.slot == 2]
        per_timer.append(sorted((f.header.msg_type, f.header.next_block) for f in frames))
    # queries name the round (block 6) and the rank's own next (EOS: nothing in slot 2)
    assert per_timer[:QUERIES_BEFORE_REWIND] == [[(SKIP, EOS)]] * QUERIES_BEFORE_REWIND
    # then the query goes on, with a REWIND request for the coverage (block 6) beside it
    assert per_timer[QUERIES_BEFORE_REWIND] == [(SKIP, EOS), (RW, 6)]
    assert e.stats.queries == QUERIES_BEFORE_REWIND + 1 and e.want_rewind[2]


def test_a_slot_closed_while_a_sum_is_missing_raises():
    """A closing RESULT while the rank lacks a sum (the switch took another packet of it
    for its closing one): the call raises instead of returning the sum without it."""
    e = make_engine()
    sent(e)
    feed(e, 2, 0, EOS, 2, fp=(FP, FP))  # cover 2: block 2's sum is next
    e.raise_if_incomplete()
    feed(e, 2, 1, EOS, EOS)  # a closing RESULT, multicast: the slot is closed
    assert not e.active[2]
    with pytest.raises(IncompleteSum, match=r"slot\(s\) \[2\] closed while this rank lacked"):
        e.raise_if_incomplete()


@pytest.mark.parametrize("k", (64, 256))
def test_a_closing_skip_is_header_only_and_a_query_as_long_as_a_result(k):
    """A closing round's RESULT carries no values, so the closing SKIP is header only at
    every block size; a query may be answered with a data round's sums in its own frame,
    so above 128 values per block (wire.skip_carries_values) it carries K zeros."""
    cfg = load_descriptor(descriptor(0, 2, slot_count=4, round_mode="silent", block_values=k))
    x = np.zeros(12 * k, np.int32)  # rank 0 has nothing: every slot it takes closes or asks
    e = new_engine(cfg, make_payload(x, 2, block_values=k), T0, PARAMS)
    e.packets_to_send(T0, expire=False)
    fp = p.fingerprint(np.int32, x.size)
    feed(e, 3, 0, EOS, 3, fp=(fp, fp))  # the other rank has block 3: rank 0 is silent
    feed(e, 2, 0, EOS, 2, fp=(fp, fp))  # ... and block 2
    assert len(e.packets_to_send(T0, expire=False)) == 0
    feed(e, 3, 1, 3, EOS, values=np.ones(k, np.int32))  # slot 3 closes
    batch = e.packets_to_send(T0, expire=False)
    (closing,) = [batch.frame(i) for i in range(len(batch))]
    frame = p.parse_frame(closing, k)
    assert (frame.header.msg_type, frame.header.slot, frame.header.block) == (SKIP, 3, EOS)
    assert len(closing) == 62 and frame.values is None
    frames = []
    for t in T0 + np.arange(1, 46) / 10:  # unanswered slots' timers: queries go out
        later = e.packets_to_send(t)
        frames += [
            (p.parse_frame(later.frame(i), k), int(later.lengths[i])) for i in range(len(later))
        ]
    queries = [n for f, n in frames if f.header.msg_type == SKIP and f.header.block != EOS]
    assert queries and all(n == (62 + 4 * k if p.skip_carries_values(k) else 62) for n in queries)


def _rack_resend_on_slot_0(e: SilentEngine) -> float:
    """Slot 0's DATA (block 4) goes out before slot 1's (block 1); slot 1's round is
    answered, slot 0's waits (for the other rank, or lost): past RACK's deadline slot 0
    is resent. Returns the time of the resend."""
    sent(e)
    feed(e, 0, 0, EOS, 4, fp=(FP, FP), now=T0 + 0.001)
    assert only(e, 0, T0 + 0.001) == [(DATA, 1, 4, EOS)]
    feed(e, 1, 0, EOS, 1, fp=(FP, FP), now=T0 + 0.002)
    assert only(e, 1, T0 + 0.002) == [(DATA, 1, 1, 9)]
    feed(e, 1, 1, 1, 5, values=np.full(64, 3, np.int32), now=T0 + 0.003)
    late = T0 + 1.0
    resent = [f.header for f in decode(e.packets_to_send(late)) if f.header.slot == 0]
    assert [(h.msg_type, h.block, h.flags & p.Flag.RETRANSMIT) for h in resent] == [
        (DATA, 4, p.Flag.RETRANSMIT)
    ]
    return late


@pytest.mark.parametrize(
    "start, copy, end", [(8, True, 16), (1, True, 2), (8, False, 4), (1, False, 1)]
)
def test_a_cached_answer_to_a_rack_resend_undoes_the_halving_and_widens(start, copy, end):
    """A round's result answering a resend RACK made halves the reordering window (the
    packet was likely lost). When the switch then answers that resend with a cached copy
    of the round already taken, the round had completed without it (a later rank's
    packet, not a loss): the halving is undone and the window widens, as on a STATUS
    (RFC 8985's DSACK). A real loss brings no such copy, and the window stays halved."""
    e = make_engine()
    e.rtt.reorder = start  # (8: widened by earlier calls of the Worker)
    late = _rack_resend_on_slot_0(e)
    feed(e, 0, 1, 4, EOS, values=np.full(64, 7, np.int32), now=late + 0.001)
    assert e.rtt.reorder == max(1, start // 2)
    if copy:
        cached = int(p.Flag.CACHED)
        feed(e, 0, 1, 4, EOS, values=np.full(64, 7, np.int32), now=late + 0.002, flags=cached)
    assert e.rtt.reorder == end
    assert (e.output.finish().reshape(12, 64)[4] == 7).all()


def test_a_cached_answer_after_a_later_transmission_undoes_nothing():
    """Once the slot transmitted again (its next round's packet resent on a timer), a
    cached copy may answer that transmission instead: the halving stands."""
    e = make_engine()
    e.rtt.reorder = 8
    late = _rack_resend_on_slot_0(e)
    feed(e, 0, 1, 4, EOS, values=np.full(64, 7, np.int32), now=late + 0.001)
    assert only(e, 0, late + 0.001) == [(SKIP, 0, EOS, EOS)]  # the closing SKIP
    again = [f.header.slot for f in decode(e.packets_to_send(late + 10.0))]
    assert 0 in again
    feed(
        e,
        0,
        1,
        4,
        EOS,
        values=np.full(64, 7, np.int32),
        now=late + 10.001,
        flags=int(p.Flag.CACHED),
    )
    assert e.rtt.reorder == 4
