"""The Worker's gather: after a wake-up, a rank with its call's busy window outstanding
(p4reduce.job.busy_slots: 16 slots at 64 values per block, 8 from 4 096) sleeps a little
before its turn (hostlib.worker.GATHER), never past its next timer, and never in a call
with fewer slots outstanding; a gathering rank takes no turn straight after one that took
in less than a batch; without a busy poll, no turn without the transport's wait first.

The Worker runs on the in-process softswitch with the real P4 program; only `time.sleep`
inside hostlib.worker is observed (recorded, then slept as asked).
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from hostlib import Worker
from hostlib import worker as worker_mod
from hostlib.engine import new_engine
from hostlib.numerics import Output, make_payload
from hostlib.timers import EngineParams
from p4net.harness import InProcessTransport, SwitchSession
from p4reduce.job import busy_slots

BUSY = busy_slots(64)  # the busy window at the default block size: 16


@pytest.fixture(scope="module")
def switch():
    with SwitchSession.inprocess() as sw:
        yield sw


@pytest.fixture
def slept(monkeypatch):
    """Every time.sleep the worker module asks for, in order (each is still slept)."""
    asked: list[float] = []
    real = time.sleep

    def sleep(seconds: float) -> None:
        asked.append(seconds)
        real(seconds)

    monkeypatch.setattr(worker_mod.time, "sleep", sleep)
    return asked


def engine_with(switch, slots: int, blocks: int, block_values: int = 64):
    """A real engine of a job of `slots` slots and `block_values` values per block, for
    a call of `blocks` non-zero blocks, and its Worker."""
    job = switch.create_job(1, slots, 11, encoding="packed", block_values=block_values)
    try:
        w = Worker(switch.descriptors(job)[0], transport=switch.transport(job.workers[0].port))
    finally:
        switch.jobs.delete(job.job)
    with w:
        return w, engine_for(w, np.ones(blocks * block_values, np.float32))


def engine_for(w: Worker, x: np.ndarray):
    """A real engine of Worker `w`'s next call, on tensor `x` (its slot versions and
    CONTINUED flags as the Worker has them)."""
    cfg = w.cfg
    payload = make_payload(x, cfg.worker_count, cfg.encoding, block_values=cfg.block_values)
    return new_engine(
        cfg,
        payload,
        time.monotonic(),
        EngineParams(),
        w.slot_versions,
        w.builder,
        None,
        w.continued,
        Output(payload),
    )


def test_gathers_with_many_slots_outstanding(switch, slept):
    w, eng = engine_with(switch, BUSY, 4 * BUSY)
    assert int(np.count_nonzero(eng.active)) == BUSY
    assert w._gathering(eng)
    w._gather(time.monotonic() + 1.0)
    assert slept == [worker_mod.GATHER]


def test_never_past_the_next_timer(switch, slept):
    w, _ = engine_with(switch, BUSY, 4 * BUSY)
    w._gather(time.monotonic() + worker_mod.GATHER / 4)
    assert len(slept) == 1 and 0 < slept[0] <= worker_mod.GATHER / 4
    w._gather(time.monotonic() - 1e-3)  # the timer is due: no sleep at all
    assert len(slept) == 1


def test_no_gather_while_the_results_of_half_the_slots_outstanding_wait(switch, slept):
    """A rank whose switch answers as fast as it sends (here a one-rank job on the
    in-process switch, which answers within the send) finds the results of its slots
    waiting at each wake-up: it takes its turn without the gather's sleep. One whose
    transport cannot count what waits (no `ready`) gathers as before."""
    x = np.ones(4 * BUSY * 64, np.float32)
    for job_id, counted in ((13, True), (14, False)):
        job = switch.create_job(1, BUSY, job_id, encoding="packed")
        try:
            transport = switch.transport(job.workers[0].port)
            if not counted:
                transport.ready = None  # a transport that cannot tell
            with Worker(switch.descriptors(job)[0], transport=transport) as w:
                np.testing.assert_array_equal(w.allreduce(x), x)
                if counted:
                    assert slept == []
                    eng = engine_for(w, x)
                    assert w._gathering(eng) and not w._keeping_up(eng)  # none sent yet
                    w.transport.send(eng.packets_to_send(time.monotonic()))  # announces
                    assert w._keeping_up(eng)
        finally:
            switch.jobs.delete(job.job)
    assert worker_mod.GATHER in slept


def test_no_gather_with_few_slots_or_when_off(switch):
    w, eng = engine_with(switch, BUSY - 1, 4 * BUSY)
    assert not w._gathering(eng)
    w2, eng2 = engine_with(switch, BUSY, 4 * BUSY)
    w2.gather = 0.0
    assert not w2._gathering(eng2)


def test_no_gather_in_a_short_call(switch):
    """A call of fewer than GATHER_ROUNDS non-zero blocks per busy slot is bound by
    latency."""
    short = worker_mod.GATHER_ROUNDS * BUSY - 1
    w, eng = engine_with(switch, BUSY, short)
    assert int(np.count_nonzero(eng.active)) == BUSY
    assert not w._gathering(eng)


@pytest.mark.parametrize("block_values", [4096, 16000])
def test_a_wide_block_call_gathers_with_its_busy_window_outstanding(switch, block_values):
    """A call of wide blocks keeps fewer slots busy (8 from 4 096 values per block): it
    gathers once those are outstanding and it is long enough, not with one fewer."""
    busy = busy_slots(block_values)
    assert busy < BUSY
    w, eng = engine_with(switch, busy, worker_mod.GATHER_ROUNDS * busy, block_values)
    assert int(np.count_nonzero(eng.active)) == busy and w._gathering(eng)
    w, eng = engine_with(switch, busy - 1, worker_mod.GATHER_ROUNDS * busy, block_values)
    assert not w._gathering(eng)
    w, eng = engine_with(switch, busy, worker_mod.GATHER_ROUNDS * busy - 1, block_values)
    assert not w._gathering(eng)


def test_sums_with_gather(switch):
    """A call of 16 slots on 2 ranks, gathering: the exact sums come back."""
    two_ranks_sum(switch, BUSY, 64, seed=3)


def two_ranks_sum(switch, slots: int, blocks: int, seed: int, port=None, **worker_kw) -> None:
    """A job of `slots` slots on 2 ranks, each a Worker (`worker_kw`) in a thread on its
    port (`port(switch, p)`'s transport, else the session's) reducing `blocks` blocks of
    random int32: each gets the exact sum."""
    job = switch.create_job(2, slots, 12, encoding="packed")
    rng = np.random.default_rng(seed)
    xs = [rng.integers(-1000, 1000, blocks * 64).astype(np.int32) for _ in range(2)]
    out: list[np.ndarray | None] = [None, None]
    try:
        descriptors = switch.descriptors(job)

        def body(r: int) -> None:
            at = job.workers[r].port
            transport = port(switch, at) if port else switch.transport(at)
            with Worker(descriptors[r], transport=transport, **worker_kw) as w:
                out[r] = w.allreduce(xs[r])

        threads = [threading.Thread(target=body, args=(r,)) for r in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        switch.jobs.delete(job.job)
    for r in range(2):
        np.testing.assert_array_equal(out[r], xs[0] + xs[1])


class RecordedPort(InProcessTransport):
    """An in-process port whose receives (with how many frames each took) and waits are
    recorded in order."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls: list[tuple[str, int]] = []

    def recv(self, max_n: int):
        frames, lengths = super().recv(max_n)
        self.calls.append(("recv", int(lengths.size)))
        return frames, lengths

    def wait(self, timeout: float) -> None:
        self.calls.append(("wait", 0))
        super().wait(timeout)


@pytest.mark.parametrize("busy_poll", [0.0, 50e-6])
def test_without_a_busy_poll_no_turn_without_asking_the_transport(switch, busy_poll):
    """busy_poll=0 (ranks that share one core, p4net.harness.RANK_BUSY_POLL): after a
    turn that took in less than a batch the loop sleeps in the transport's wait (which
    returns at once when frames wait) before its next turn -- no empty turn to find out;
    with a busy poll it takes such turns. The sums are exact either way."""
    ports: list[RecordedPort] = []

    def recorded(session, at: int) -> RecordedPort:
        ports.append(RecordedPort(session.proc, at))
        return ports[-1]

    two_ranks_sum(switch, 4, 16, seed=5, port=recorded, busy_poll=busy_poll)
    unasked = sum(
        a[0] == b[0] == "recv" and a[1] < 256
        for port in ports
        for a, b in zip(port.calls, port.calls[1:])
    )
    assert (unasked == 0) is (busy_poll == 0), unasked


def test_a_gathering_rank_takes_no_turn_straight_after_a_partial_one(switch, monkeypatch):
    """While a call gathers (busy poll on), a turn that took in less than a batch is
    followed by the transport's wait and the gather, not by another turn at once: the
    few frames that came while its Python ran wait for the next gathered turn. The sums
    are exact."""
    real = Worker._gathering

    def gathering(self, eng, *window) -> bool:
        answer = real(self, eng, *window)
        self.transport.calls.append(("gathering", answer))  # in the rank's own record
        return answer

    monkeypatch.setattr(Worker, "_gathering", gathering)
    ports: list[RecordedPort] = []

    def recorded(session, at: int) -> RecordedPort:
        ports.append(RecordedPort(session.proc, at))
        return ports[-1]

    slots = BUSY
    two_ranks_sum(switch, slots, worker_mod.GATHER_ROUNDS * slots, seed=7, port=recorded)
    after_partial = [
        c
        for port in ports
        for a, g, c in zip(port.calls, port.calls[1:], port.calls[2:])
        if a[0] == "recv" and 0 < a[1] < 256 and g == ("gathering", True)
    ]
    assert after_partial, "no gathering turn took in frames"
    assert all(c[0] == "wait" for c in after_partial), after_partial
