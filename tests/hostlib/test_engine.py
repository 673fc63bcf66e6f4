"""The retransmission / round state machine, driven by crafted RESULT packets.

Rank 0 of a 2-rank job with 4 slots; its tensor has 12 blocks of which 1, 4 and 9 are
non-zero. Slot s owns blocks s, s+4, s+8. Every packet the engine emits is decoded with the
reference codec (protocol.parse_frame), so these tests check bytes, not engine internals.
"""

from __future__ import annotations

import numpy as np
import pytest

from hostlib import protocol as p
from p4reduce.job import load_descriptor
from hostlib.engine import AllreduceEngine
from hostlib.liveness import (
    SILENT_MIN_SPAN,
    SILENT_STATUSES,
    SILENT_TIMERS,
    RankSilent,
    quiet_timers,
)
from hostlib.timers import EngineParams
from hostlib.numerics import make_payload
from hostlib.scratch import Scratch
from hostlib_helpers import decode, descriptor, engine_tensor
from hostlib_helpers import make_engine as shared_make_engine

EOS = p.END_OF_STREAM
T0 = 100.0
PARAMS = EngineParams(timeout=0.005, max_timeout=0.02, double_after=2, deadline=1.0)


tensor = engine_tensor


def make_engine(params: EngineParams = PARAMS, slot_versions=None):
    return shared_make_engine(params, slot_versions)


def result(
    slot, slot_version, block, next_block, values=None, flags=0, next_exponent=0, rank=0, job=7
):
    h = p.Header.make(
        p.MsgType.RESULT,
        job=job,
        slot=slot,
        rank=rank,
        slot_version=slot_version,
        flags=flags,
        block=block,
        next_block=next_block,
        next_exponent=next_exponent,
    )
    return h, values


FP = p.fingerprint(np.int32, 12 * 64)


def feed(e, header_values, now, fingerprint=(FP, FP)):
    """Hand a crafted result to the engine; an announce round's RESULT carries the
    switch's fingerprint range (both ranks agreeing unless told otherwise)."""
    h, values = header_values
    fp = fingerprint if (h.block == EOS and h.msg_type == p.MsgType.RESULT) else None
    e.on_result(h, values, now, fingerprint=fp)


def by_slot(frames):
    return {f.header.slot: f for f in frames}


def test_announce_round_all_slots_in_flight():
    e = make_engine()
    out = by_slot(decode(e.packets_to_send(T0)))
    assert sorted(out) == [0, 1, 2, 3]
    assert all(
        f.header.msg_type == p.MsgType.ANNOUNCE
        and f.header.block == EOS
        and f.header.slot_version == 0
        and f.header.flags == 0
        for f in out.values()
    )
    assert {s: f.header.next_block for s, f in out.items()} == {0: 4, 1: 1, 2: EOS, 3: EOS}
    assert all(len(f.values if f.values is not None else []) == 0 for f in out.values())
    assert e.packets_to_send(T0).lengths.size == 0  # nothing new until results


def test_data_skip_and_end_of_stream_released_by_results():
    e = make_engine()
    e.packets_to_send(T0)
    feed(e, result(1, 0, EOS, 1), T0 + 0.001)  # my block 1 is next: DATA
    feed(e, result(0, 0, EOS, 0), T0 + 0.001)  # the other rank's block 0: SKIP
    feed(e, result(2, 0, EOS, EOS), T0 + 0.001)  # slot 2 is empty everywhere
    out = by_slot(decode(e.packets_to_send(T0 + 0.001)))
    assert sorted(out) == [0, 1]
    d, s = out[1].header, out[0].header
    assert (d.msg_type, d.slot_version, d.block, d.next_block) == (p.MsgType.DATA, 1, 1, 9)
    assert (out[1].values == tensor()[64:128]).all()
    assert (s.msg_type, s.slot_version, s.block, s.next_block) == (p.MsgType.SKIP, 1, 0, 4)
    assert len(decode(e.packets_to_send(T0 + 0.001))) == 0
    assert not e.active[2]


# When timers send what (probes, overtaken packets, backoff): test_pacing.py.


def test_result_resets_the_backoff_of_a_held_slot():
    """A slot the switch holds (STATUS) backs off each time it asks again; the round's
    result ends that: the next round is a fresh send, resent by the rules of one."""
    e = make_engine()
    e.packets_to_send(T0)
    probe = e.next_timer()
    assert list(by_slot(decode(e.packets_to_send(probe)))) == [0]
    for _ in range(3):
        h = p.Header.make(p.MsgType.STATUS, job=7, slot=0, rank=0, block=EOS, next_block=EOS)
        e.on_result(h, None, e.pacer.xmit_at[0] + 0.0001, contributors=0b01)
        while 0 not in by_slot(decode(e.packets_to_send(e.next_timer()))):
            pass  # probes of the other slots first
    assert e.pacer.expired_in_row[0] == 3
    feed(e, result(0, 0, EOS, 0), e.pacer.xmit_at[0] + 0.0001)
    assert e.pacer.expired_in_row[0] == 0 and not e.pacer.retransmitted[0]


def test_duplicate_and_stale_results_ignored():
    e = make_engine()
    e.packets_to_send(T0)
    feed(e, result(1, 0, EOS, 1), T0 + 0.001)
    e.packets_to_send(T0 + 0.001)
    before = e.stats.results_ignored
    feed(e, result(1, 0, EOS, 1), T0 + 0.002)  # duplicate
    feed(e, result(1, 0, EOS, 1, flags=p.Flag.CACHED), T0 + 0.002)  # cached, old round
    feed(e, result(1, 1, 1, 9, np.ones(64), job=8), T0 + 0.002)  # other job
    feed(e, result(1, 1, 1, 9, np.ones(64), rank=1), T0 + 0.002)  # other rank
    assert e.stats.results_ignored == before + 4
    assert decode(e.packets_to_send(T0 + 0.002)) == []
    assert e.round[1] == 1 and e.block[1] == 1


def test_cached_result_completes_round_and_values_are_kept():
    e = make_engine()
    e.packets_to_send(T0)
    feed(e, result(1, 0, EOS, 1), T0)
    e.packets_to_send(T0)
    summed = np.arange(64, dtype=np.int32) * 3
    feed(e, result(1, 1, 1, EOS, summed, flags=p.Flag.CACHED), T0 + 0.001)
    assert not e.active[1]
    assert (e.output.finish()[64:128] == summed).all()
    # the multicast copy arriving late changes nothing
    feed(e, result(1, 1, 1, EOS, summed + 1), T0 + 0.002)
    assert (e.output.finish()[64:128] == summed).all()


def test_two_answers_for_one_slot_in_one_batch_count_once():
    from hostlib.framing import Parsed

    e = make_engine()
    e.packets_to_send(T0)
    h1, _ = result(1, 0, EOS, 1)
    h2, _ = result(1, 0, EOS, 1, flags=p.Flag.CACHED)
    cols = {n: np.array([getattr(h1, n), getattr(h2, n)]) for n in p.FIELD_NAMES}
    e.on_results(
        Parsed(
            cols,
            np.zeros(2, bool),
            np.zeros((2, 64), np.int32),
            np.zeros(2, np.uint32),
            np.zeros((2, 6), np.uint8),
            0,
            extension=np.full(2, int(p.Extension.FINGERPRINT)),
            fingerprint=np.full((2, 2), FP),
            contributors=np.zeros(2),
        ),
        T0,
    )
    assert e.round[1] == 1 and e.stats.results_ignored == 1
    assert len(decode(e.packets_to_send(T0))) == 1


def test_deadline_raises_timeout_naming_stalled_slots_and_rounds():
    e = make_engine()
    e.packets_to_send(T0)
    feed(e, result(1, 0, EOS, 1), T0)
    feed(e, result(0, 0, EOS, EOS), T0)
    feed(e, result(2, 0, EOS, EOS), T0)
    e.check(T0 + 0.999)  # before the deadline: fine
    with pytest.raises(TimeoutError) as ei:
        e.check(T0 + 1.0)
    msg = str(ei.value)
    assert "2 of 4 slots made no progress for 1.000s" in msg
    assert "slot 1 round 1 (block 1" in msg and "slot 3 round 0 (announce" in msg
    assert "slot 0 " not in msg
    assert "the switch did not answer" in msg


def test_deadline_counts_from_each_slots_last_result():
    """A slot that keeps completing rounds is never stalled, however long the call."""
    e = make_engine()
    e.packets_to_send(T0)
    feed(e, result(0, 0, EOS, 0), T0 + 0.9)  # slot 0 progresses late
    for sl in (1, 2, 3):
        feed(e, result(sl, 0, EOS, EOS if sl != 1 else 1), T0 + 0.9)
    e.check(T0 + 1.5)  # 1.5 s since the call: no stall
    with pytest.raises(TimeoutError, match="made no progress"):
        e.check(T0 + 1.9)


def test_the_deadline_is_due_at_the_time_the_engine_asks_to_be_woken():
    """At exactly `deadline` (last progress + the deadline, as a float sum) the check
    raises, even where now - last progress rounds below the deadline: a check that did
    not would leave a loop woken at that time nothing to do but wake again at once."""
    t = 46.717087500000055  # 76.71708750000005 - t == 29.999999999999993
    e = shared_make_engine(EngineParams(timeout=0.005, max_timeout=1.0, deadline=30.0), now=t)
    e.packets_to_send(t)
    assert e.deadline - t < 30.0
    with pytest.raises(TimeoutError, match="made no progress"):
        e.check(e.deadline)


def test_status_names_the_ranks_the_switch_waits_for():
    """The switch answers a retransmission into an incomplete round with STATUS: the
    bitmap of ranks that contributed. It is not progress; the deadline's error names the
    others from the STATUS of whichever active slot had one -- here slot 0, the probed
    one, which is not among the slots that stalled first (before, only stalled slots'
    STATUS counted, and the error blamed the switch)."""
    e = make_engine()
    e.packets_to_send(T0)
    feed(e, result(0, 0, EOS, 4), T0 + 0.4)  # slot 0 progresses; slots 1-3 stall first
    status = p.Header.make(
        p.MsgType.STATUS, job=7, slot=0, rank=0, slot_version=1, block=4, next_block=EOS
    )
    e.on_result(status, None, T0 + 0.9, contributors=0b01)
    assert e.stats.statuses == 1 and e.round.tolist() == [1, 0, 0, 0]
    with pytest.raises(
        TimeoutError,
        match=r"3 of 4 slots made no progress .*not heard from rank\(s\) \[1\] in the "
        r"waiting rounds.*slot 1 round 0 \(announce: no STATUS since its last result\)",
    ) as info:
        e.check(T0 + 1.0)
    assert not isinstance(info.value, RankSilent), "one STATUS is not enough evidence"


def _statuses(e, times, slot=0, slot_version=0, block=EOS, heard=0b01):
    """STATUS replies for the round (slot, slot_version, block) at `times`."""
    h = result(slot, slot_version, block, EOS)[0]._replace(msg_type=p.MsgType.STATUS)
    for t in times:
        e.on_result(h, None, t, contributors=heard)


SILENCE = EngineParams(timeout=0.005, max_timeout=1.0, deadline=30.0)  # the defaults' span


def test_agreeing_status_replies_name_a_silent_rank_before_the_deadline():
    """Mid-call (a round completed: every rank took part), SILENT_STATUSES replies that
    all lack rank 1 and no progress for SILENT_TIMERS x max_timeout (5 s, deadline 30 s):
    RankSilent naming rank 1, the job and the waiting slots."""
    span = SILENT_TIMERS * SILENCE.max_timeout
    e = make_engine(SILENCE)
    e.packets_to_send(T0)
    feed(e, result(0, 0, EOS, 4), T0 + 0.01)
    _statuses(e, [T0 + 0.02 + 0.5 * k for k in range(SILENT_STATUSES)], 0, 1, 4)
    e.check(T0 + 0.01 + span - 0.001)  # not yet: the quiet span counts from the result
    with pytest.raises(RankSilent, match=r"rank\(s\) \[1\] sent nothing for") as info:
        e.check(T0 + 0.01 + span + 1e-9)
    assert isinstance(info.value, TimeoutError)
    assert (info.value.ranks, info.value.job, info.value.slots) == ([1], 7, [0, 1, 2, 3])


def test_the_quiet_span_grows_as_this_ranks_resends_go_unanswered():
    """quiet_timers: without loss the least span, SILENT_TIMERS; more timers as a smaller
    share of this rank's resends is answered (a live rank behind by a round needs a
    round trip of its own through the same loss); none answered leaves it to the
    deadline."""
    assert quiet_timers(1.0) == SILENT_TIMERS
    assert quiet_timers(0.95**2) == SILENT_TIMERS  # 2.5 % loss each way
    assert quiet_timers(0.8**2) == 12  # 20 % each way: docs/protocol.md section 13
    spans = [quiet_timers(a) for a in (0.9, 0.64, 0.4, 0.1, 0.01)]
    assert spans == sorted(spans) and spans[-1] > spans[0]
    assert quiet_timers(0.0) * SILENCE.max_timeout > SILENCE.deadline


def test_unanswered_resends_put_off_naming_a_silent_rank():
    """The same STATUS replies as above, but after resends that mostly went unanswered
    (heavy loss): nobody is named after SILENT_TIMERS x max_timeout, the rank is named
    later, still before the deadline's no-progress error."""
    span = SILENT_TIMERS * SILENCE.max_timeout
    e = make_engine(SILENCE)
    e.packets_to_send(T0)
    feed(e, result(0, 0, EOS, 4), T0 + 0.01)
    for k in range(1, 9):  # resends of the waiting rounds, every half second
        e.packets_to_send(T0 + 0.01 + 0.5 * k)
    sent = e.stats.retransmissions
    answered = (3 * sent) // 4
    assert answered >= SILENT_STATUSES
    _statuses(e, [T0 + 4.2 + 0.001 * k for k in range(answered)], 0, 1, 4)
    e.check(T0 + 0.01 + span + 1e-6)  # no RankSilent: the span is longer under loss
    with pytest.raises(RankSilent, match=r"rank\(s\) \[1\] sent nothing for"):
        e.check(T0 + SILENCE.deadline - 0.01)  # named, before the deadline's error


def test_a_small_max_timeout_still_waits_the_least_quiet_span():
    """max_timeout 20 ms: SILENT_TIMERS timers would be 0.2 s, less than a busy host may
    deschedule a process; the span is SILENT_MIN_SPAN."""
    e = make_engine(EngineParams(timeout=0.005, max_timeout=0.02, deadline=30.0))
    e.packets_to_send(T0)
    feed(e, result(0, 0, EOS, 4), T0)
    _statuses(e, [T0 + 0.02 * (k + 1) for k in range(SILENT_STATUSES)], 0, 1, 4)
    e.check(T0 + SILENT_MIN_SPAN - 0.001)
    with pytest.raises(RankSilent):
        e.check(T0 + SILENT_MIN_SPAN + 1e-9)


def test_progress_or_few_replies_are_no_evidence_of_a_silent_rank():
    """A result on any slot starts the count of STATUS replies again; fewer than
    SILENT_STATUSES since then name nobody early, however long the quiet span."""
    e = make_engine(SILENCE)
    e.packets_to_send(T0)
    feed(e, result(0, 0, EOS, 4), T0 + 0.01)
    _statuses(e, [T0 + 0.02, T0 + 0.03], 0, 1, 4)
    feed(e, result(1, 0, EOS, EOS), T0 + 0.04)  # progress on slot 1
    _statuses(e, [T0 + 0.05 + 0.01 * k for k in range(SILENT_STATUSES - 1)], 0, 1, 4)
    e.check(T0 + 29.0)  # the deadline (30 s) is not reached either


def test_before_any_round_a_silent_rank_gets_half_the_deadline():
    """No round of the call completed: the silent rank may not have started the call
    (it computes): it is named only after half the deadline of silence."""
    e = make_engine(SILENCE)
    e.packets_to_send(T0)
    _statuses(e, [T0 + 0.1 * (k + 1) for k in range(SILENT_STATUSES)])
    e.check(T0 + SILENCE.deadline / 2 - 0.01)
    with pytest.raises(RankSilent, match=r"rank\(s\) \[1\]"):
        e.check(T0 + SILENCE.deadline / 2 + 1e-9)


def test_continued_flag_once_the_slot_had_a_result():
    e = make_engine()
    first = by_slot(decode(e.packets_to_send(T0)))
    assert all(f.header.flags & p.Flag.CONTINUED == 0 for f in first.values())
    feed(e, result(1, 0, EOS, 1), T0 + 0.001)
    feed(e, result(0, 0, EOS, 0), T0 + 0.001)
    out = by_slot(decode(e.packets_to_send(T0 + 0.001)))
    assert all(f.header.flags & p.Flag.CONTINUED for f in out.values())
    assert e.continued.tolist() == [True, True, False, False]


def test_a_held_resend_without_continued_brings_a_continued_copy_of_a_done_slots_frame():
    """Slots 0-2 ended at their announce round (no block anywhere); slot 3's result is
    late. Slot 3's resend cannot say CONTINUED (no result there yet), so a switch that
    restarted would rebuild the slot and hold it (STATUS) for ranks that moved on: once
    the switch said it holds slot 3, its next resend brings slot 0's kept ANNOUNCE,
    flagged CONTINUED (and PROBE: a leaf sends it up to a spine that may have
    restarted), which such a switch answers with STATE_LOST, and each later held
    resend the next done slot's. A resend the switch did not hold (a loss) brings
    nothing more, and neither do CONTINUED resends."""
    e = make_engine()
    sent = by_slot(decode(e.packets_to_send(T0)))
    for slot in range(3):
        feed(e, result(slot, 0, EOS, EOS), T0 + 0.001)
    t = e.next_timer()
    assert sorted(by_slot(decode(e.packets_to_send(t)))) == [3]  # lost: no probe
    status = p.Header.make(p.MsgType.STATUS, job=7, slot=3, rank=0, block=EOS, next_block=EOS)
    e.on_result(status, None, t + 0.001, contributors=0b01)  # held for rank 1
    t = e.next_timer()
    frames = by_slot(decode(e.packets_to_send(t)))
    assert sorted(frames) == [0, 3] and e.stats.state_probes == 1
    h = frames[0].header
    assert h.flags & p.Flag.CONTINUED and h.flags & p.Flag.RETRANSMIT
    assert h.flags & p.Flag.PROBE  # so a leaf sends it up (every-rank rounds)
    assert not frames[3].header.flags & (p.Flag.CONTINUED | p.Flag.PROBE)
    assert (h.msg_type, h.slot_version, h.block) == (p.MsgType.ANNOUNCE, 0, EOS)
    assert h.next_block == sent[0].header.next_block
    # held again: each resend probes the next done slot (the switch may have rebuilt and
    # completed some of them again after a restart, and forgotten others)
    probed = []
    for _ in range(4):
        e.on_result(status, None, t + 0.001, contributors=0b01)
        t = e.next_timer()
        probed += [s for s in by_slot(decode(e.packets_to_send(t))) if s != 3]
    assert probed == [1, 2, 0, 1] and e.stats.state_probes == 5
    feed(e, result(3, 0, EOS, 3), t + 0.001)  # slot 3 goes on, CONTINUED from now
    e.packets_to_send(t + 0.001)
    resent = decode(e.packets_to_send(e.next_timer()))
    assert [f.header.slot for f in resent] == [3] and resent[0].header.flags & p.Flag.CONTINUED
    assert e.stats.state_probes == 5


def test_state_lost_raises_at_once():
    e = make_engine()
    e.packets_to_send(T0)
    h = p.Header.make(
        p.MsgType.RESULT, job=7, slot=2, rank=0, flags=p.Flag.STATE_LOST, block=EOS, next_block=EOS
    )
    from hostlib.engine import SwitchStateLost

    with pytest.raises(SwitchStateLost, match="slot\\(s\\) \\[2\\]"):
        e.on_result(h, None, T0 + 0.001)


def test_other_epoch_is_ignored():
    e = make_engine()
    e.packets_to_send(T0)
    h = p.Header.make(p.MsgType.RESULT, job=7, slot=1, rank=0, epoch=2, block=EOS, next_block=1)
    e.on_result(h, None, T0 + 0.001, fingerprint=(FP, FP))
    assert e.round[1] == 0 and e.stats.results_ignored == 1


def test_fingerprint_range_ends_the_slot_and_announces_on_every_slot():
    """The other rank has 40 blocks (this one 12, 4 slots each way): slot 1's announce
    result shows the range; the slot ends without DATA, and since this rank used all 4
    slots nothing more is announced. With 2 used slots of 8, every other slot of the job
    gets announced -- even though the range's larger fingerprint needs only 3 blocks:
    which rank has the most blocks (a packed int32 rank has two per 64 values) cannot
    be read from the range."""
    e = make_engine()
    e.packets_to_send(T0)
    other = p.fingerprint(np.int32, 40 * 64)
    feed(e, result(1, 0, EOS, 1), T0 + 0.001, fingerprint=(FP, other))
    assert not e.active[1] and e.mismatch == (FP, other)
    assert decode(e.packets_to_send(T0 + 0.001)) == []
    with pytest.raises(ValueError, match="length 768 vs 2560 elements"):
        e.raise_if_mismatched()
    cfg = load_descriptor(descriptor(0, 2, slot_count=8))
    small = AllreduceEngine(cfg, make_payload(np.ones(100, np.float32), 2), T0, PARAMS)
    assert sorted(by_slot(decode(small.packets_to_send(T0)))) == [0, 1]
    mine = p.fingerprint(np.float32, 100)
    other = p.fingerprint(np.int32, 3 * 64)
    small.on_result(
        p.Header.make(p.MsgType.RESULT, job=7, slot=0, rank=0, block=EOS, next_block=0),
        None,
        T0,
        fingerprint=(mine, other),
    )
    extra = by_slot(decode(small.packets_to_send(T0)))
    assert sorted(extra) == [2, 3, 4, 5, 6, 7]
    assert all(
        f.header.msg_type == p.MsgType.ANNOUNCE and f.fingerprint == (mine, mine)
        for f in extra.values()
    )


def test_overflow_flag_raises_naming_block():
    e = make_engine()
    e.packets_to_send(T0)
    feed(e, result(1, 0, EOS, 1), T0)
    feed(e, result(1, 1, 1, EOS, np.zeros(64), flags=p.Flag.OVERFLOW), T0)
    with pytest.raises(OverflowError, match=r"block 1 \(elements 64\.\.127\)"):
        e.raise_if_overflowed()


def test_result_naming_a_block_outside_the_stream_is_a_protocol_error():
    e = make_engine()
    e.packets_to_send(T0)
    with pytest.raises(p.ProtocolError, match="slot 1 names next_block=2"):
        feed(e, result(1, 0, EOS, 2), T0)  # block 2 belongs to slot 2
    e = make_engine()
    e.packets_to_send(T0)
    with pytest.raises(p.ProtocolError, match="announced 4"):
        feed(e, result(0, 0, EOS, 8), T0)  # skips my block 4


def test_data_result_without_values_is_a_protocol_error():
    e = make_engine()
    e.packets_to_send(T0)
    feed(e, result(1, 0, EOS, 1), T0)
    with pytest.raises(p.ProtocolError, match="no values"):
        feed(e, result(1, 1, 1, EOS), T0)


def test_versions_continue_from_previous_allreduce():
    e = make_engine(slot_versions=np.array([1, 0, 1, 0], np.uint8))
    out = by_slot(decode(e.packets_to_send(T0)))
    assert {s: f.header.slot_version for s, f in out.items()} == {0: 1, 1: 0, 2: 1, 3: 0}
    feed(e, result(0, 1, EOS, EOS), T0)
    feed(e, result(1, 0, EOS, 1), T0)
    feed(e, result(1, 1, 1, EOS, np.zeros(64)), T0)
    assert e.final_slot_versions(np.array([1, 0, 1, 0]))[:2].tolist() == [0, 0]


def test_a_workers_calls_keep_their_frames_in_one_scratch_and_only_their_own():
    """Engines given one Scratch (a Worker's calls) keep each slot's frame in the same
    pages, and a call's kept frames are its own: the previous call's bytes are gone where
    this call sent nothing (its tensor of 2 blocks uses 2 of the 4 slots)."""
    cfg = load_descriptor(descriptor(0, 2, slot_count=4))
    scratch = Scratch()
    first = AllreduceEngine(
        cfg, make_payload(tensor(), 2), T0, PARAMS, np.ones(4, np.uint8), scratch=scratch
    )
    small = np.arange(2 * 64, dtype=np.int32)
    second = AllreduceEngine(cfg, make_payload(small, 2), T0, PARAMS, scratch=scratch)
    alone = AllreduceEngine(cfg, make_payload(small, 2), T0, PARAMS)
    assert np.shares_memory(first.last_frames, second.last_frames)
    assert not np.shares_memory(second.last_frames, alone.last_frames)
    assert not alone.last_frames[2:].any()
    np.testing.assert_array_equal(second.last_frames, alone.last_frames)


def test_a_frame_built_in_its_kept_place_is_sent_as_built_when_the_slot_goes_again():
    """A run of consecutive slots is built in the slots' kept frames, and the pending
    batch reads them there; a slot that emits again before packets_to_send (a silent
    round's query or REWIND beside its packet) must not change the frame already
    pending: both go out, each as built."""
    e = make_engine()  # the announces of slots 0..3: one run, built in place
    e.slot_version[1] ^= 1  # the slot's next packet differs from the pending one
    e._announce(np.array([1, 3]))  # not a run: built apart and kept over slot 1's frame
    out = decode(e.packets_to_send(T0))
    assert [(f.header.slot, f.header.slot_version) for f in out] == [
        (0, 0),
        (1, 0),
        (2, 0),
        (3, 0),
        (1, 1),
        (3, 0),
    ]
    kept = e.last_frames[1, : int(e.last_lengths[1])].tobytes()
    assert p.parse_frame(kept).header.slot_version == 1
