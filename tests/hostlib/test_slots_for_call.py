"""How many slots a call uses (p4reduce.job.slots_for_call, docs/hostlib.md "Slots per
call"): a function of the call's block count, the job's slot count and its block size,
bounded by the first two, never fewer than keep busy_slots packets per rank in flight when
the call has that many blocks (16 up to 2 048 values per block, 8 from 4 096), growing by
one slot per BLOCKS_PER_SLOT blocks; and a dense call through the real P4 program uses
that many slots of its job, one announce round per slot used plus one round per block."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hostlib.slots import slots_for_tensor
from hostlib.protocol import ProtocolError
from hostlib.timers import EngineParams
from p4net.harness import SwitchSession
from p4reduce.job import (
    BLOCKS_PER_SLOT,
    BUSY_SLOTS,
    BUSY_VALUES,
    WIDE_BUSY_SLOTS,
    busy_slots,
    slots_for_call,
)
from p4reduce.target import KINDS, default_slots

from test_worker_block_sizes import run_job

WIDTHS = (64, 256, 2048, 3000, 4096, 16000, 65536)


def test_busy_slots_keep_busy_values_in_flight_between_the_bounds():
    """Up to BUSY_VALUES / BUSY_SLOTS values per block a call keeps BUSY_SLOTS packets in
    flight; wider blocks keep as many as hold BUSY_VALUES values, never fewer than
    WIDE_BUSY_SLOTS; never more slots for a wider block."""
    got = [busy_slots(k) for k in range(1, 70_000, 97)]
    assert got == sorted(got, reverse=True)
    assert busy_slots(64) == busy_slots(2048) == BUSY_SLOTS == 16
    assert busy_slots(3000) == BUSY_VALUES // 3000 == 10
    assert busy_slots(4096) == busy_slots(16000) == busy_slots(65536) == WIDE_BUSY_SLOTS == 8


@pytest.mark.parametrize("k", WIDTHS)
@pytest.mark.parametrize("slot_count", [1, 2, 7, BUSY_SLOTS, 16, 32, 64, 1024])
def test_bounded_by_the_job_and_the_call(slot_count, k):
    for blocks in range(0, 40 * BLOCKS_PER_SLOT, 7):
        n = slots_for_call(blocks, slot_count, block_values=k)
        assert 1 <= n <= slot_count
        assert n <= max(1, blocks)  # a slot without a block of the call is never used


@pytest.mark.parametrize("k", WIDTHS)
@pytest.mark.parametrize("slot_count", [BUSY_SLOTS, 16, 64, 1024])
def test_busy_window_then_one_slot_per_blocks_per_slot(slot_count, k):
    busy = busy_slots(k)
    for blocks in range(1, 40 * BLOCKS_PER_SLOT, 5):
        n = slots_for_call(blocks, slot_count, block_values=k)
        if blocks <= busy:
            assert n == blocks  # a short call: every block in its own slot, one round
        elif slot_count >= math.ceil(blocks / BLOCKS_PER_SLOT):
            assert n == max(busy, math.ceil(blocks / BLOCKS_PER_SLOT))
        else:
            assert n == slot_count


@pytest.mark.parametrize("k", WIDTHS)
def test_monotone_in_blocks_and_slots(k):
    prev = 0
    for blocks in range(0, 50 * BLOCKS_PER_SLOT, 3):
        n = slots_for_call(blocks, 64, block_values=k)
        assert n >= prev
        prev = n
    for blocks in (1, 9, 300, 5000):
        got = [slots_for_call(blocks, s, block_values=k) for s in range(1, 200)]
        assert got == sorted(got)


@pytest.mark.parametrize("kind", KINDS)
def test_a_tensors_job_has_only_slots_its_calls_use(kind):
    """slots_for_tensor: a job made for one tensor per call has no slot the call leaves
    unused, never more than the kind's default, and as many as that call uses."""
    for k in (64, 256, 2048, 16000):
        for values in (1, k - 1, k, 17 * k + 3, 1 << 20, 25 << 20):
            blocks = -(-values // k)
            n = slots_for_tensor(values, k, default_slots(kind))
            assert 1 <= n <= min(blocks, default_slots(kind))
            rule = [slots_for_call(blocks, s, block_values=k) for s in (n, default_slots(kind))]
            assert rule == [n, n]


def test_refuses_a_job_without_slots():
    with pytest.raises(ValueError, match="at least one slot"):
        slots_for_call(10, 0, block_values=64)


BLOCKS = 40  # of 64 values each, per rank, on 3 ranks: the calls below


def call_forty_blocks(rng, job_slots: int, fn, k: int = 64, **kw):
    """fn(worker, tensor) on 3 ranks of a job of `job_slots` slots (through the P4 program),
    each tensor BLOCKS random blocks of `k` values; (job, their exact sum, results,
    errors). `kw`: run_job's."""
    xs = [rng.standard_normal(BLOCKS * k).astype(np.float32) for _ in range(3)]
    with SwitchSession.inprocess() as sw:
        job = sw.create_job(3, job_slots, 7, encoding="packed", block_values=k)
        res, errs = run_job(sw, job, lambda w, r: fn(w, xs[r]), **kw)
    return job, np.sum(xs, axis=0), res, errs


@pytest.mark.parametrize("k, job_slots", [(64, "the call's"), (64, 64), (4096, 64)])
def test_a_dense_call_sends_one_packet_per_block_plus_the_slots_rounds(rng, k, job_slots):
    """The engine uses slots_for_call's slots of its job, whether the job has just those or
    more. Each slot the call uses costs a rank its announce, in silent rounds (the
    default) too: every rank has every block, so each slot's last data round, which every
    rank joins knowing every earlier sum, ends it without a closing round. A slot the call
    leaves idle costs nothing. Blocks of 4 096 values keep fewer slots busy (8, not 16)."""
    used = slots_for_call(BLOCKS, 64, block_values=k)
    assert used == (16 if k == 64 else 8)
    slots = used if job_slots == "the call's" else job_slots
    job, total, res, errs = call_forty_blocks(
        rng, slots, lambda w, x: (w.allreduce(x), w.stats), k=k
    )
    assert errs == [None] * 3, errs
    assert job.round_mode == "silent"
    for out, stats in res:
        assert np.allclose(out, total, atol=1e-4)
        sent = stats.last_packets_sent - stats.retransmissions
        assert sent == BLOCKS + used


@pytest.mark.parametrize(
    "named, used", [(None, slots_for_call(BLOCKS, 64, block_values=64)), (24, 24), (64, 40)]
)
def test_a_call_uses_the_slots_its_workers_name_and_reports_them(rng, named, used):
    """Worker(call_slots=N): a call of 40 blocks uses N of the job's 64 slots (at most its
    blocks), as bench/slot_window.py needs to measure calls at counts the rule would not
    pick; by default slots_for_call's. WorkerStats.last_call_slots says which, and the
    packets sent agree with it."""
    job, total, res, errs = call_forty_blocks(
        rng,
        64,
        lambda w, x: (w.allreduce(x), w.stats),
        worker_kw=lambda r: {"call_slots": named},
    )
    assert errs == [None] * 3, errs
    for out, stats in res:
        assert np.allclose(out, total, atol=1e-4)
        assert stats.last_call_slots == used
        sent = stats.last_packets_sent - stats.retransmissions
        assert sent == BLOCKS + used


def test_ranks_that_use_other_slots_return_no_wrong_sum(rng):
    """Ranks of one call that name different call_slots cut the tensor into other
    streams: the first result that names a block outside a rank's stream ends its call
    with a ProtocolError saying so, on every rank; none returns a sum."""
    _, _, res, errs = call_forty_blocks(
        rng,
        64,
        lambda w, x: w.allreduce(x),
        deadline=3.0,
        worker_kw=lambda r: {"call_slots": 16 if r else 20},
    )
    assert res == [None] * 3
    for err in errs:
        assert isinstance(err, ProtocolError), err
        assert "not the next block of its stream" in str(err)


def test_refuses_a_call_of_no_slots():
    with pytest.raises(ValueError, match="call_slots=0"):
        EngineParams(call_slots=0)
