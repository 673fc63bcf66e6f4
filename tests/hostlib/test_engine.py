"""The retransmission / round state machine, driven by crafted RESULT packets.

Rank 0 of a 2-rank job with 4 slots; its tensor has 12 blocks of which 1, 4 and 9 are
non-zero. Slot s owns blocks s, s+4, s+8. Every packet the engine emits is decoded with the
reference codec (protocol.parse_frame), so these tests check bytes, not engine internals.
"""
from __future__ import annotations

import numpy as np
import pytest

from hostlib import protocol as p
from hostlib.config import load_descriptor
from hostlib.engine import AllreduceEngine, EngineParams
from hostlib.numerics import make_payload
from hostlib_helpers import decode, descriptor

EOS = p.END_OF_STREAM
T0 = 100.0
PARAMS = EngineParams(timeout=0.005, max_timeout=0.02, double_after=2, deadline=1.0)


def tensor() -> np.ndarray:
    x = np.zeros(12 * 64, np.int32)
    for b in (1, 4, 9):
        x[b * 64:(b + 1) * 64] = np.arange(64) + 1000 * b
    return x


def make_engine(params: EngineParams = PARAMS, versions=None):
    cfg = load_descriptor(descriptor(0, 2, slot_count=4))
    return AllreduceEngine(cfg, make_payload(tensor(), 2), T0, params, versions)


def result(slot, version, block, next_block, values=None, flags=0, next_exponent=0, rank=0,
           job=7):
    h = p.Header.make(p.MsgType.RESULT, job=job, slot=slot, rank=rank, slot_version=version,
                      flags=flags, block=block, next_block=next_block,
                      next_exponent=next_exponent)
    return h, values


def by_slot(frames):
    return {f.header.slot: f for f in frames}


def test_announce_round_all_slots_in_flight():
    e = make_engine()
    out = by_slot(decode(e.packets_to_send(T0)))
    assert sorted(out) == [0, 1, 2, 3]
    assert all(f.header.msg_type == p.MsgType.ANNOUNCE and f.header.block == EOS
               and f.header.slot_version == 0 and f.header.flags == 0 for f in out.values())
    assert {s: f.header.next_block for s, f in out.items()} == {0: 4, 1: 1, 2: EOS, 3: EOS}
    assert all(len(f.values if f.values is not None else []) == 0 for f in out.values())
    assert e.packets_to_send(T0) .lengths.size == 0          # nothing new until results


def test_data_skip_and_end_of_stream_released_by_results():
    e = make_engine()
    e.packets_to_send(T0)
    e.on_result(*result(1, 0, EOS, 1), T0 + 0.001)        # my block 1 is next: DATA
    e.on_result(*result(0, 0, EOS, 0), T0 + 0.001)        # the other rank's block 0: SKIP
    e.on_result(*result(2, 0, EOS, EOS), T0 + 0.001)      # slot 2 is empty everywhere
    out = by_slot(decode(e.packets_to_send(T0 + 0.001)))
    assert sorted(out) == [0, 1]
    d, s = out[1].header, out[0].header
    assert (d.msg_type, d.slot_version, d.block, d.next_block) == (p.MsgType.DATA, 1, 1, 9)
    assert (out[1].values == tensor()[64:128]).all()
    assert (s.msg_type, s.slot_version, s.block, s.next_block) == (p.MsgType.SKIP, 1, 0, 4)
    assert len(decode(e.packets_to_send(T0 + 0.001))) == 0
    assert not e.active[2]


def test_timeout_retransmits_same_packet_with_flag_and_doubles_capped():
    e = make_engine()
    first = by_slot(decode(e.packets_to_send(T0)))
    assert decode(e.packets_to_send(T0 + 0.004)) == []        # not yet
    sent_at, gaps = T0, []
    now = T0
    for _ in range(6):
        nxt = e.next_timer()
        gaps.append(round(nxt - sent_at, 6))
        now = nxt
        again = by_slot(decode(e.packets_to_send(now)))
        assert sorted(again) == [0, 1, 2, 3]
        for s, f in again.items():
            assert f.header.flags == p.Flag.RETRANSMIT
            assert f.header._replace(flags=0) == first[s].header   # same packet otherwise
        sent_at = now
    # 5 ms, 5 ms (doubling starts after 2 expiries in a row), then 10, 20, capped at 20
    assert gaps == [0.005, 0.005, 0.01, 0.02, 0.02, 0.02]
    assert e.stats.retransmissions == 24


def test_result_resets_timer_and_backoff():
    e = make_engine()
    e.packets_to_send(T0)
    for k in range(3):
        e.packets_to_send(e.next_timer())
    now = e.next_timer() - 0.001
    e.on_result(*result(1, 0, EOS, 1), now)
    assert e.timeout[1] >= PARAMS.timeout and e.expired_in_row[1] == 0
    assert e.expires[1] == pytest.approx(now + e.timeout[1])


def test_duplicate_and_stale_results_ignored():
    e = make_engine()
    e.packets_to_send(T0)
    e.on_result(*result(1, 0, EOS, 1), T0 + 0.001)
    e.packets_to_send(T0 + 0.001)
    before = e.stats.results_ignored
    e.on_result(*result(1, 0, EOS, 1), T0 + 0.002)                       # duplicate
    e.on_result(*result(1, 0, EOS, 1, flags=p.Flag.CACHED), T0 + 0.002)  # cached, old round
    e.on_result(*result(1, 1, 1, 9, np.ones(64), job=8), T0 + 0.002)     # other job
    e.on_result(*result(1, 1, 1, 9, np.ones(64), rank=1), T0 + 0.002)    # other rank
    assert e.stats.results_ignored == before + 4
    assert decode(e.packets_to_send(T0 + 0.002)) == []
    assert e.round[1] == 1 and e.block[1] == 1


def test_cached_result_completes_round_and_values_are_kept():
    e = make_engine()
    e.packets_to_send(T0)
    e.on_result(*result(1, 0, EOS, 1), T0)
    e.packets_to_send(T0)
    summed = np.arange(64, dtype=np.int32) * 3
    e.on_result(*result(1, 1, 1, EOS, summed, flags=p.Flag.CACHED), T0 + 0.001)
    assert not e.active[1]
    assert (e.sums[1] == summed).all()
    # the multicast copy arriving late changes nothing
    e.on_result(*result(1, 1, 1, EOS, summed + 1), T0 + 0.002)
    assert (e.sums[1] == summed).all()


def test_two_answers_for_one_slot_in_one_batch_count_once():
    from hostlib.framing import Parsed
    e = make_engine()
    e.packets_to_send(T0)
    h1, _ = result(1, 0, EOS, 1)
    h2, _ = result(1, 0, EOS, 1, flags=p.Flag.CACHED)
    cols = {n: np.array([getattr(h1, n), getattr(h2, n)]) for n in p.FIELD_NAMES}
    e.on_results(Parsed(cols, np.zeros(2, bool), np.zeros((2, 64), np.int32),
                        np.zeros(2, np.uint32), np.zeros((2, 6), np.uint8), 0), T0)
    assert e.round[1] == 1 and e.stats.results_ignored == 1
    assert len(decode(e.packets_to_send(T0))) == 1


def test_deadline_raises_timeout_naming_stalled_slots_and_rounds():
    e = make_engine()
    e.packets_to_send(T0)
    e.on_result(*result(1, 0, EOS, 1), T0)
    e.on_result(*result(0, 0, EOS, EOS), T0)
    e.on_result(*result(2, 0, EOS, EOS), T0)
    e.check(T0 + 0.999)                                  # before the deadline: fine
    with pytest.raises(TimeoutError) as ei:
        e.check(T0 + 1.0)
    msg = str(ei.value)
    assert "2 of 4 slots stalled" in msg
    assert "slot 1 round 1 (block 1" in msg and "slot 3 round 0 (announce" in msg
    assert "slot 0 " not in msg


def test_overflow_flag_raises_naming_block():
    e = make_engine()
    e.packets_to_send(T0)
    e.on_result(*result(1, 0, EOS, 1), T0)
    e.on_result(*result(1, 1, 1, EOS, np.zeros(64), flags=p.Flag.OVERFLOW), T0)
    with pytest.raises(OverflowError, match=r"block 1 \(elements 64\.\.127\)"):
        e.raise_if_overflowed()


def test_result_naming_a_block_outside_the_stream_is_a_protocol_error():
    e = make_engine()
    e.packets_to_send(T0)
    with pytest.raises(p.ProtocolError, match="slot 1 names next_block=2"):
        e.on_result(*result(1, 0, EOS, 2), T0)          # block 2 belongs to slot 2
    e = make_engine()
    e.packets_to_send(T0)
    with pytest.raises(p.ProtocolError, match="announced 4"):
        e.on_result(*result(0, 0, EOS, 8), T0)          # skips my block 4


def test_data_result_without_values_is_a_protocol_error():
    e = make_engine()
    e.packets_to_send(T0)
    e.on_result(*result(1, 0, EOS, 1), T0)
    with pytest.raises(p.ProtocolError, match="no values"):
        e.on_result(*result(1, 1, 1, EOS), T0)


def test_versions_continue_from_previous_allreduce():
    e = make_engine(versions=np.array([1, 0, 1, 0], np.uint8))
    out = by_slot(decode(e.packets_to_send(T0)))
    assert {s: f.header.slot_version for s, f in out.items()} == {0: 1, 1: 0, 2: 1, 3: 0}
    e.on_result(*result(0, 1, EOS, EOS), T0)
    e.on_result(*result(1, 0, EOS, 1), T0)
    e.on_result(*result(1, 1, 1, EOS, np.zeros(64)), T0)
    assert e.final_versions()[:2].tolist() == [0, 0]
