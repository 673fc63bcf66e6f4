"""The Worker's gather: after a wake-up, a rank with many slots outstanding sleeps a little
before its turn (hostlib.worker.GATHER), never past its next timer, and never in a call
with few slots outstanding.

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
from hostlib.framing import FrameBuilder
from hostlib.numerics import Output, make_payload
from hostlib.timers import EngineParams
from p4net.harness import SwitchSession


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


def engine_with(switch, slots: int, blocks: int):
    """A real engine of a job of `slots` slots, for a call of `blocks` non-zero blocks,
    and its Worker."""
    job = switch.create_job(1, slots, 11, encoding="packed")
    try:
        w = Worker(switch.descriptors(job)[0], transport=switch.transport(job.workers[0].port))
    finally:
        switch.jobs.delete(job.job)
    with w:
        cfg = w.cfg
        payload = make_payload(
            np.ones(blocks * cfg.block_values, np.float32),
            cfg.worker_count,
            cfg.encoding,
            block_values=cfg.block_values,
        )
        eng = new_engine(
            cfg,
            payload,
            time.monotonic(),
            EngineParams(),
            np.zeros(slots, np.uint8),
            FrameBuilder(cfg.to_switch(), cfg.block_values),
            None,
            np.zeros(slots, bool),
            Output(payload),
        )
        return w, eng


def test_gathers_with_many_slots_outstanding(switch, slept):
    w, eng = engine_with(switch, worker_mod.GATHER_SLOTS, 4 * worker_mod.GATHER_SLOTS)
    assert int(np.count_nonzero(eng.active)) == worker_mod.GATHER_SLOTS
    assert w._gathering(eng)
    w._gather(time.monotonic() + 1.0)
    assert slept == [worker_mod.GATHER]


def test_never_past_the_next_timer(switch, slept):
    w, _ = engine_with(switch, worker_mod.GATHER_SLOTS, 4 * worker_mod.GATHER_SLOTS)
    w._gather(time.monotonic() + worker_mod.GATHER / 4)
    assert len(slept) == 1 and 0 < slept[0] <= worker_mod.GATHER / 4
    w._gather(time.monotonic() - 1e-3)  # the timer is due: no sleep at all
    assert len(slept) == 1


def test_no_gather_with_few_slots_or_when_off(switch):
    w, eng = engine_with(switch, worker_mod.GATHER_SLOTS - 1, 4 * worker_mod.GATHER_SLOTS)
    assert not w._gathering(eng)
    w2, eng2 = engine_with(switch, worker_mod.GATHER_SLOTS, 4 * worker_mod.GATHER_SLOTS)
    w2.gather = 0.0
    assert not w2._gathering(eng2)


def test_no_gather_in_a_short_call(switch):
    """A call of fewer than GATHER_ROUNDS non-zero blocks per slot is bound by latency."""
    short = worker_mod.GATHER_ROUNDS * worker_mod.GATHER_SLOTS - 1
    w, eng = engine_with(switch, worker_mod.GATHER_SLOTS, short)
    assert int(np.count_nonzero(eng.active)) == worker_mod.GATHER_SLOTS
    assert not w._gathering(eng)


def test_sums_with_gather(switch):
    """A call of 16 slots on 2 ranks, gathering: the exact sums come back."""
    job = switch.create_job(2, worker_mod.GATHER_SLOTS, 12, encoding="packed")
    rng = np.random.default_rng(3)
    xs = [rng.integers(-1000, 1000, 64 * 64).astype(np.int32) for _ in range(2)]
    out: list[np.ndarray | None] = [None, None]
    try:
        descriptors = switch.descriptors(job)

        def body(r: int) -> None:
            with Worker(descriptors[r], transport=switch.transport(job.workers[r].port)) as w:
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
