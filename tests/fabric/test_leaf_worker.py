"""A rank behind a leaf (the leaf role, docs/fabric.md), as its worker engine sees it: its
descriptor names its leaf's ranks; its leaf's STATUS names them by their index there and
the spine's, relayed by the leaf, says the round waits above the leaf; a leaf's STATUS
that lacks the rank makes it resend at once; and its timers resend every waiting slot the
switch has not said it holds (crafted packets, no switch:
the engine is the thing under test)."""

from __future__ import annotations

import numpy as np
import pytest

from hostlib import protocol as p
from hostlib.engine import AllreduceEngine, acts_at_once
from hostlib.liveness import SILENT_STATUSES, SILENT_TIMERS, RankSilent
from hostlib.numerics import make_payload
from hostlib.silent import QUERIES_BEFORE_REWIND, SilentEngine
from hostlib.timers import CLEAN_GROWTH, EngineParams
from p4reduce.addresses import Address, WorkerAddress
from p4net.harness import frame_rows
from p4reduce.job import DescriptorError, Job, load_descriptor

EOS = p.END_OF_STREAM
T0 = 100.0
SLOTS = 4
LEAF_RANKS = [4, 5, 9]  # the job-wide ranks behind this leaf, by index there
PARAMS = EngineParams(timeout=0.005, max_timeout=1.0, deadline=30.0)


def leaf_descriptor(
    index: int = 1, ranks: list[int] = LEAF_RANKS, round_mode: str = "every_rank"
) -> dict:
    """What the controller writes for the rank of `index` on a leaf of a 12-rank job."""
    job = Job(
        job=7,
        job_index=7,
        slot_base=0,
        slot_count=SLOTS,
        epoch=1,
        workers=[
            WorkerAddress(i, i + 1, f"02:00:00:00:00:{i + 1:02x}", f"10.0.1.{i + 1}", 0x5030)
            for i in range(len(ranks))
        ],
        encoding="lanes",
        ranks_in_job=ranks,
        job_ranks=12,
        round_mode=round_mode,
    )
    return job.descriptor(index, Address("02:00:00:00:01:01", "10.0.0.240"))


def engine(params: EngineParams = PARAMS) -> AllreduceEngine:
    cfg = load_descriptor(leaf_descriptor())
    x = np.zeros(12 * 64, np.int32)
    x[:] = 7
    return AllreduceEngine(cfg, make_payload(x, cfg.worker_count), T0, params)


def header(msg_type, slot, block, flags=0, next_block=EOS, version=0) -> p.Header:
    fields = {"job": 7, "slot": slot, "rank": 1, "flags": flags, "block": block}
    return p.Header.make(msg_type, next_block=next_block, slot_version=version, **fields)


def fp() -> tuple[int, int]:
    x = p.fingerprint(np.int32, 12 * 64)
    return (x, x)


def test_the_descriptor_names_the_leafs_ranks():
    d = leaf_descriptor()
    assert (d["rank"], d["wire_rank"], d["leaf_ranks"]) == (5, 1, LEAF_RANKS)
    cfg = load_descriptor(d)
    assert cfg.leaf_ranks == tuple(LEAF_RANKS) and cfg.rank_on_wire == 1
    for bad in ([4, 6, 9], [4, 5, 5], [4, 5, 12], "4,5,9"):
        with pytest.raises(DescriptorError, match="leaf_ranks"):
            load_descriptor(d | {"leaf_ranks": bad})


def test_a_leafs_status_names_job_wide_ranks():
    """The leaf's STATUS bitmap counts the ranks by their index on the leaf: index 2 is
    rank 9 of the job, and that is the rank named silent."""
    e = engine()
    e.packets_to_send(T0)
    e.on_result(header(p.MsgType.RESULT, 0, EOS, next_block=0), None, T0 + 0.01, fingerprint=fp())
    status = header(p.MsgType.STATUS, 1, EOS)
    for k in range(SILENT_STATUSES):
        e.on_result(status, None, T0 + 0.02 + 0.5 * k, contributors=0b011)
    with pytest.raises(RankSilent, match=r"rank\(s\) \[9\] sent nothing") as info:
        e.check(T0 + 0.01 + SILENT_TIMERS * PARAMS.max_timeout + 1e-6)
    assert info.value.ranks == [9]


def test_the_spines_status_relayed_names_no_rank_of_the_leaf():
    """The spine's STATUS (relayed, its bitmap counts leaves) says every rank of this
    leaf is heard: no rank is named silent from it, the round is held (no resend before
    its backed-off timer) and the deadline's message says the spine waits."""
    e = engine()
    e.packets_to_send(T0)
    e.on_result(header(p.MsgType.RESULT, 0, EOS, next_block=0), None, T0 + 0.01, fingerprint=fp())
    relayed = header(p.MsgType.STATUS, 1, EOS, flags=p.Flag.RELAYED)
    for k in range(SILENT_STATUSES):
        e.on_result(relayed, None, T0 + 0.02 + 0.5 * k, contributors=0b1)
    assert e.pacer.held()[1]
    e.check(T0 + 0.01 + SILENT_TIMERS * PARAMS.max_timeout + 1e-6)  # no RankSilent
    with pytest.raises(TimeoutError, match="the spine waits for other leaves") as info:
        e.check(T0 + PARAMS.deadline + 1)
    assert not isinstance(info.value, RankSilent)


def test_a_leafs_status_that_lacks_this_rank_resends_its_slot_at_once():
    """The leaf sends its STATUS to every one of its ranks, whichever asked. One whose
    bitmap lacks this rank (index 1) says that its packet was lost on the way: the slot
    goes again at once, long before its timer, and is not held; one that names it holds
    the round (no resend until the held timer)."""
    e = engine()
    e.packets_to_send(T0)
    now = T0 + 0.01
    e.on_result(header(p.MsgType.STATUS, 1, EOS), None, now, contributors=0b101)
    assert not e.pacer.held()[1] and e.pacer.next_timer() <= now
    again = [p.parse_frame(bytes(f)) for f in _frames(e.packets_to_send(now))]
    assert [(f.header.slot, bool(f.header.flags & p.Flag.RETRANSMIT)) for f in again] == [(1, True)]
    e.on_result(header(p.MsgType.STATUS, 2, EOS), None, now, contributors=0b111)
    assert e.pacer.held()[2]
    assert not len(e.packets_to_send(now + 0.001))
    assert e.pacer.next_timer() > now + 0.001


def _frames(batch) -> list:
    return [batch.frame(i) for i in range(len(batch))]


def on_one_switch(cfg):
    """The same rank's configuration in a job of one switch: no leaf."""
    return type(cfg)(**{**vars(cfg), "wire_rank": None, "leaf_ranks": None})


def resent_after_a_timer(e: AllreduceEngine) -> int:
    """The slots `e` resends one initial timer after its first packets (one per slot),
    none of them answered."""
    assert len(e.packets_to_send(T0)) == SLOTS
    return len(e.packets_to_send(T0 + PARAMS.initial_timeout + 0.01))


def test_behind_a_leaf_every_waiting_slot_is_resent_once_its_timer_expires():
    """No answer on any slot for the recent timer: a rank behind a leaf resends every
    slot not held (one lost packet among them is found at once), a rank of a one-switch
    job only the silence probe's lowest slot."""
    flat_cfg = on_one_switch(load_descriptor(leaf_descriptor()))
    x = np.zeros(12 * 64, np.int32)
    flat = AllreduceEngine(flat_cfg, make_payload(x, flat_cfg.worker_count), T0, PARAMS)
    assert [resent_after_a_timer(e) for e in (engine(), flat)] == [SLOTS, 1]


def announce_results(e: SilentEngine, now: float) -> None:
    """Every slot's announce round completes at `now`, naming block s on slot s."""
    for slot in range(SLOTS):
        h = header(p.MsgType.RESULT, slot, EOS, flags=p.Flag.SILENT, next_block=slot)
        e.on_result(h, None, now, fingerprint=fp())


def test_a_silent_rank_behind_a_leaf_resends_only_the_rounds_that_wait_for_it():
    """A rank of a silent job sits most rounds out, and a round it waits for without a
    packet in it lasts the other ranks' packets too: resending every waiting slot at twice
    its own rounds, a silent rank behind a leaf sent 2-3x its packets in Mininet. So those
    rounds keep one switch's timers (the silence probe's lowest slot, no more), while a
    round that waits for the rank's own packet -- here every slot's announce round -- is
    resent once its timer expires, as behind an every-rank leaf: a partial lost on its
    way up stalls every rank of the leaf at once, and one switch's probe, one slot per
    silence, made 5 % loss on every link cost 16 ranks on two leaves 5x every-rank
    rounds' time."""
    cfg = load_descriptor(leaf_descriptor(round_mode="silent"))
    assert cfg.wire_rank is not None and cfg.round_mode == p.RoundMode.SILENT
    x = np.zeros(12 * 64, np.int32)  # no block of its own: it sits out every data round
    leaf, flat = (
        SilentEngine(c, make_payload(x, c.worker_count), T0, PARAMS)
        for c in (cfg, on_one_switch(cfg))
    )
    assert [resent_after_a_timer(e) for e in (leaf, flat)] == [SLOTS, 1]
    now = T0 + PARAMS.initial_timeout + 0.02
    for e in (leaf, flat):  # each announce round names its slot's first block, others'
        announce_results(e, now)
        assert not len(e.packets_to_send(now))
    later = [now + k * PARAMS.max_timeout / 4 for k in range(1, 5)]
    resent = [[len(e.packets_to_send(t)) for t in later] for e in (leaf, flat)]
    # (one switch's rank, whose queries went unanswered, asks for rewinds at the end)
    assert max(resent[0]) <= 1 and sum(resent[0]) <= sum(resent[1]), resent


def silent_engine_in_data_rounds(x: np.ndarray, now: float) -> SilentEngine:
    """A silent rank behind a leaf whose announce rounds named each slot's first block
    (its own, in `x`): it has sent those blocks' DATA by `now`."""
    cfg = load_descriptor(leaf_descriptor(round_mode="silent"))
    e = SilentEngine(cfg, make_payload(x, cfg.worker_count), T0, PARAMS)
    e.packets_to_send(T0)
    announce_results(e, now)
    sent = [p.parse_frame(bytes(f)).header for f in _frames(e.packets_to_send(now))]
    assert [(h.msg_type, h.slot, h.block) for h in sent] == [
        (p.MsgType.DATA, s, s) for s in range(SLOTS)
    ]
    return e


def test_a_silent_leafs_status_that_lacks_this_rank_resends_its_data_at_once():
    """In silent rounds the leaf's STATUS reaches the ranks its round expects, as well as
    the asker: one that lacks this rank in a round it sends in says that its DATA was
    lost on the way, and the DATA goes again at once, not at the rank's timer -- the
    first timer of any rank of the leaf finds the loss; one that names it holds the
    round."""
    now = T0 + 0.01
    e = silent_engine_in_data_rounds(np.full(12 * 64, 7, np.int32), now)
    later = now + 0.01  # past half a round since the DATA, within its timer
    assert later < now + e.pacer.rto()
    status = dict(flags=p.Flag.SILENT, version=1)
    e.on_result(header(p.MsgType.STATUS, 1, 1, **status), None, later, contributors=0b101)
    e.on_result(header(p.MsgType.STATUS, 2, 2, **status), None, later, contributors=0b111)
    assert e.pacer.next_timer() <= later and e.pacer.held()[2] and not e.pacer.held()[1]
    again = [p.parse_frame(bytes(f)).header for f in _frames(e.packets_to_send(later))]
    assert [(h.msg_type, h.slot, bool(h.flags & p.Flag.RETRANSMIT)) for h in again] == [
        (p.MsgType.DATA, 1, True)
    ]


def test_a_silent_rank_that_only_hears_statuses_lacking_it_asks_for_a_rewind():
    """A silent rank that lost its announce round's RESULT and sat out the data round
    after it resends its ANNOUNCE into the closing round of the same version and block
    (END_OF_STREAM), which takes no ANNOUNCE; the leaf's STATUS of that round, sent to
    every rank it expects whoever asked, lacks this rank every time. Each such STATUS
    resent the ANNOUNCE at once and also counted as an answer, so the rank never asked
    for the rewind that gets it its place, and the other ranks took it for dead (a
    fabric job at 10 % loss). After QUERIES_BEFORE_REWIND resends that only such STATUS
    answered, it asks: a query and a REWIND request for its coverage, the slot's first
    block."""
    cfg = load_descriptor(leaf_descriptor(round_mode="silent"))
    e = SilentEngine(cfg, make_payload(np.zeros(12 * 64, np.int32), cfg.worker_count), T0, PARAMS)
    assert len(e.packets_to_send(T0)) == SLOTS
    lacking = header(p.MsgType.STATUS, 0, EOS, flags=p.Flag.SILENT)
    sent, now = [], T0
    for _ in range(QUERIES_BEFORE_REWIND + 1):
        now += 0.05  # past half a round since the rank's latest packet, within its timer
        e.on_result(lacking, None, now, contributors=0b101)
        frames = _frames(e.packets_to_send(now))  # (the other slots' timers: not this)
        sent.append([h for f in frames if (h := p.parse_frame(bytes(f)).header).slot == 0])
    kinds = [[(h.msg_type, h.block, h.next_block) for h in hs] for hs in sent]
    announce = (p.MsgType.ANNOUNCE, EOS, EOS)
    assert kinds[:-1] == [[announce]] * QUERIES_BEFORE_REWIND, kinds
    assert kinds[-1] == [(p.MsgType.SKIP, 0, EOS), (p.MsgType.REWIND, 0, 0), announce], kinds


def test_behind_a_silent_leaf_a_long_clean_round_feeds_the_estimate_whole():
    """Behind an every-rank leaf a clean round counts as at most CLEAN_GROWTH smoothed
    rounds (the test above); a silent rank's rounds vary with when the others' packets
    come, and with its estimate held down so, its timer lagged them: the sparse job of
    bench/fabric.py in the leaf role (Mininet, lossless) sent 85-128 packets a rank per
    call instead of its 64 (31 blocks and 2 per slot). Its clean rounds count whole, as
    on one switch."""
    x = np.zeros(12 * 64, np.int32)
    x[: SLOTS * 64] = 7  # block s of slot s, then nothing: each slot's last round
    now = T0 + 0.01
    e = silent_engine_in_data_rounds(x, now)
    srtt = e.rtt.srtt
    long = now + 10 * srtt
    h = header(p.MsgType.RESULT, 0, 0, flags=p.Flag.SILENT, version=1)
    e.on_result(h, np.zeros(64, np.int32), long)
    assert e.rtt.srtt == pytest.approx(0.875 * srtt + 0.125 * (long - now))


def test_behind_a_leaf_the_timer_is_its_own_not_the_silence_probes():
    """Results far apart make the silence probe's timer long (four gaps between results),
    but behind a leaf no probe is sent: every expired slot is resent at the recent timer,
    so the rank must wake at that timer, not sleep until the probe's (it did: rounds
    waited up to 0.8 s each for a resend due long before)."""
    e = engine()
    e.packets_to_send(T0)
    e.on_result(header(p.MsgType.RESULT, 0, EOS, next_block=0), None, T0 + 0.01, fingerprint=fp())
    e.packets_to_send(T0 + 0.01)
    now = T0 + 0.51
    e.on_result(header(p.MsgType.RESULT, 1, EOS, next_block=1), None, now, fingerprint=fp())
    e.packets_to_send(now)
    pacer = e.pacer
    assert pacer.probe_at > now + 0.5  # the silence probe: a second away
    waiting = pacer.slots.active & ~pacer.held()
    due = float(pacer.xmit_at[waiting].min()) + pacer.recent_timeout()
    assert pacer.next_timer() == pytest.approx(due) and due < pacer.probe_at


def test_a_round_held_by_the_spines_status_gives_no_round_time():
    """A round the relayed STATUS held waited for other leaves: its time includes somebody
    else's repair, so it does not feed the round-time estimator (it would raise the timer
    of every later round); a round nobody held does."""
    e = engine()
    e.packets_to_send(T0)
    e.on_result(header(p.MsgType.RESULT, 0, EOS, next_block=0), None, T0 + 0.01, fingerprint=fp())
    samples, srtt = e.rtt.samples, e.rtt.srtt
    relayed = header(p.MsgType.STATUS, 1, EOS, flags=p.Flag.RELAYED)
    e.on_result(relayed, None, T0 + 0.02, contributors=0b1)
    e.on_result(header(p.MsgType.RESULT, 1, EOS, next_block=1), None, T0 + 0.6, fingerprint=fp())
    assert (e.rtt.samples, e.rtt.srtt) == (samples, srtt)
    e.on_result(header(p.MsgType.RESULT, 2, EOS, next_block=2), None, T0 + 0.61, fingerprint=fp())
    assert e.rtt.samples == samples + 1


def test_behind_a_leaf_a_long_clean_round_raises_the_estimate_by_a_bounded_step():
    """A round another rank's resend completed looks clean to this rank and lasts about
    that rank's timer: fed whole, such rounds raised every rank's timer round after round
    (64 ranks, 5 % loss: 40 ms to 350 ms). Behind a leaf a clean round counts as at most
    CLEAN_GROWTH smoothed rounds, so the estimate rises by at most a quarter of an eighth
    of itself per round (a round shorter than the estimate is taken whole)."""
    e = engine()
    e.packets_to_send(T0)
    e.on_result(header(p.MsgType.RESULT, 0, EOS, next_block=0), None, T0 + 0.01, fingerprint=fp())
    srtt = e.rtt.srtt
    assert srtt == pytest.approx(0.01)
    e.on_result(header(p.MsgType.RESULT, 1, EOS, next_block=1), None, T0 + 0.5, fingerprint=fp())
    assert e.rtt.srtt == pytest.approx(0.875 * srtt + 0.125 * CLEAN_GROWTH * srtt)


def test_a_status_that_lacks_this_rank_just_after_its_packet_is_not_a_loss():
    """A STATUS lacking this rank that comes within half a round of its latest packet was
    on its way before that packet reached the leaf (another rank asked while this one was
    late): resending then only sent the leaf's STATUS to every rank again. The slot keeps
    its timer; the same STATUS later than that is a loss and resends at once."""
    e = engine()
    e.packets_to_send(T0)
    e.on_result(header(p.MsgType.STATUS, 1, EOS), None, T0 + 0.001, contributors=0b101)
    assert not len(e.packets_to_send(T0 + 0.001))
    assert e.pacer.next_timer() > T0 + 0.1
    e.on_result(header(p.MsgType.STATUS, 1, EOS), None, T0 + 0.01, contributors=0b101)
    again = _frames(e.packets_to_send(T0 + 0.01))
    assert [p.parse_frame(bytes(f)).header.slot for f in again] == [1]


def test_a_status_of_the_next_round_fetches_a_lost_result_at_once():
    """The leaf's STATUS for a slot's next round (the other version) says that the round
    this rank waits for completed there and its copy of the result was lost: the slot
    goes again at once (the leaf answers from its cache) instead of at this rank's timer,
    which the other ranks' next round would wait for."""
    e = engine()
    e.packets_to_send(T0)
    now = T0 + 0.05
    ahead = header(p.MsgType.STATUS, 2, 2, version=1)
    e.on_result(ahead, None, now, contributors=0b101)
    assert e.pacer.next_timer() <= now
    again = [p.parse_frame(bytes(f)).header for f in _frames(e.packets_to_send(now))]
    assert [(h.slot, h.slot_version, bool(h.flags & p.Flag.RETRANSMIT)) for h in again] == [
        (2, 0, True)
    ]


def sitting_out(now: float) -> SilentEngine:
    """A silent rank behind a leaf with no block of its own, whose announce rounds
    completed at `now`: it sits out every slot's data rounds (its kept frames are
    queries)."""
    cfg = load_descriptor(leaf_descriptor(round_mode="silent"))
    e = SilentEngine(cfg, make_payload(np.zeros(12 * 64, np.int32), cfg.worker_count), T0, PARAMS)
    e.packets_to_send(T0)
    announce_results(e, now)
    assert not len(e.packets_to_send(now)) and not e.mine.any()
    return e


def closing_status(e: SilentEngine, slot: int, flags: int = 0) -> bytes:
    """The leaf's STATUS of `slot`'s closing round, in the version after the data round
    `e` waits for there, lacking `e`'s rank: the slot's rounds went on without it."""
    h = header(
        p.MsgType.STATUS, slot, EOS, flags=p.Flag.SILENT | flags, version=1 - e.slot_version[slot]
    )
    return p.build_frame(e.cfg.to_switch(), h, contributors=0b101)


def test_a_silent_leafs_status_of_a_later_round_fetches_a_result_the_rank_sat_out_at_once():
    """A rank that sits a round out waits for its RESULT; the leaf multicasts it, and
    sends its STATUS to the ranks a round expects only while that round is in progress,
    with no reordering on the way to the rank. So the leaf's STATUS of a later round (here
    the closing round, which expects every rank) says the awaited RESULT was lost: the
    slot's query goes again at once, and the leaf answers it from its cache. Before, the
    rank ignored such a STATUS and waited for its silence probe -- 1.8 s in a fabric job
    at 5 % loss, while the closing round waited for it. The spine's STATUS, relayed, does
    not prompt it (the every-rank leaf role's rule), nor the leaf's STATUS within half a
    round of the rank's latest packet."""
    now = T0 + 0.01
    later = now + 0.01  # past half a round since the rank's packets, within its timers
    e = sitting_out(now)
    assert now + e.pacer._half_round() < later < e.pacer.next_timer()
    awaited = (int(e.slot_version[1]), int(e.block[1]))
    e.on_frames(*frame_rows([closing_status(e, 1)]), later)
    assert e.pacer.next_timer() <= later
    again = [p.parse_frame(bytes(f)).header for f in _frames(e.packets_to_send(later))]
    assert [
        (h.msg_type, h.slot, (h.slot_version, h.block), bool(h.flags & p.Flag.RETRANSMIT))
        for h in again
    ] == [(p.MsgType.SKIP, 1, awaited, True)]
    relayed = sitting_out(now)
    relayed.on_frames(*frame_rows([closing_status(relayed, 1, p.Flag.RELAYED)]), later)
    assert relayed.pacer.next_timer() > later and not len(relayed.packets_to_send(later))
    early = sitting_out(now)
    early.on_frames(*frame_rows([closing_status(early, 1)]), now + 0.001)
    assert not len(early.packets_to_send(now + 0.001))


def test_a_status_behind_its_predecessors_result_in_one_batch_is_not_a_later_round():
    """The RESULT of the round a rank sat out, then the leaf's STATUS of the round after
    it, in one batch: the STATUS is of the round the rank now waits for, not a later one,
    so nothing goes again (the rank still sits it out). The same STATUS with the RESULT
    lost fetches it at once."""
    now = T0 + 0.01
    later = now + 0.01
    e = sitting_out(now)
    assert now + e.pacer._half_round() < later < e.pacer.next_timer()
    v, b = int(e.slot_version[1]), int(e.block[1])
    result = header(p.MsgType.RESULT, 1, b, flags=p.Flag.SILENT, next_block=5, version=v)
    result_frame = p.build_frame(e.cfg.to_switch(), result, np.zeros(64, np.int32))
    status = header(p.MsgType.STATUS, 1, 5, flags=p.Flag.SILENT, version=1 - v)
    status_frame = p.build_frame(e.cfg.to_switch(), status, contributors=0b101)
    e.on_frames(*frame_rows([result_frame, status_frame]), later)
    assert (int(e.slot_version[1]), int(e.block[1])) == (1 - v, 5)
    assert e.pacer.next_timer() > later and not len(e.packets_to_send(later))
    lost = sitting_out(now)
    lost.on_frames(*frame_rows([status_frame]), later)
    again = _frames(lost.packets_to_send(later))
    assert [p.parse_frame(bytes(f)).header.slot for f in again] == [1]


def test_a_job_that_starts_under_loss_takes_no_repair_for_its_round_time():
    """Before any round time a rank's timer is the initial one. A round during which a
    STATUS came (ranks of the leaf were asking: frames were being lost) most likely ended
    with another rank's repair, at about that rank's timer: taken whole as the first
    sample it doubled every later timer. Such a round counts as at most half the initial
    timer (the timer is twice the estimate) and, once there is an estimate, as at most
    the estimate; a round without any STATUS is taken whole."""
    e = engine()
    e.packets_to_send(T0)
    e.on_result(header(p.MsgType.STATUS, 1, EOS), None, T0 + 0.01, contributors=0b111)
    e.on_result(header(p.MsgType.RESULT, 0, EOS, next_block=0), None, T0 + 0.3, fingerprint=fp())
    assert e.rtt.srtt == pytest.approx(PARAMS.initial_timeout / 2)
    e.on_result(header(p.MsgType.RESULT, 2, EOS, next_block=2), None, T0 + 0.5, fingerprint=fp())
    assert e.rtt.srtt == pytest.approx(PARAMS.initial_timeout / 2)
    quiet = engine()
    quiet.packets_to_send(T0)
    quiet.on_result(
        header(p.MsgType.RESULT, 0, EOS, next_block=0), None, T0 + 0.3, fingerprint=fp()
    )
    assert quiet.rtt.srtt == pytest.approx(0.3)


def test_a_rank_is_woken_only_by_frames_it_acts_on_before_its_timer():
    """The in-process fabric wakes a rank behind a leaf only for frames it acts on before
    its next timer (`acts_at_once`): not for a STATUS that only holds its round (its
    leaf's naming it, the spine's relayed), which its next turn takes in first. Checked
    against the engine: such a STATUS makes nothing due before the timer, while the ones
    that act at once -- its leaf's lacking this rank, its leaf's of the slot's next round
    -- make the slot's resend due at once; a RESULT always acts."""
    cfg = load_descriptor(leaf_descriptor())
    status, relayed = p.MsgType.STATUS, p.Flag.RELAYED
    cases = {
        "its leaf's, naming it": (header(status, 1, EOS), 0b111, False),
        "the spine's, relayed": (header(status, 1, EOS, flags=relayed), 0b1, False),
        "its leaf's, lacking it": (header(status, 1, EOS), 0b101, True),
        "its leaf's, of the next round": (header(status, 2, 2, version=1), 0b101, True),
    }
    now = T0 + 0.05
    for name, (h, contributors, acts) in cases.items():
        frame = p.build_frame(cfg.to_switch(), h, contributors=contributors)
        assert acts_at_once(frame, cfg.rank_on_wire) is acts, name
        e = engine()
        e.packets_to_send(T0)
        e.on_frames(*frame_rows([frame]), now)
        assert (e.pacer.next_timer() <= now) is acts, name
    result = header(p.MsgType.RESULT, 0, EOS, next_block=0)
    assert acts_at_once(p.build_frame(cfg.to_switch(), result, fingerprint=fp()), 1)
