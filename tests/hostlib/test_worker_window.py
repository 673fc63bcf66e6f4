"""The window a Worker keeps: its descriptor's (the job's target's, set by the controller)
unless the Worker is given one; a descriptor without one, FAIR_SLOTS.

The Worker runs on the in-process softswitch with the real P4 program; its transport is
the harness's, and the test reads how many packets the rank has out before its first
result comes back: the call's first turn opens the window's slots, one ANNOUNCE each.
"""

from __future__ import annotations

import numpy as np
import pytest

from hostlib import Worker
from p4net.harness import InProcessTransport, SwitchSession
from p4reduce.job import BLOCKS_PER_SLOT, FAIR_SLOTS

SLOTS = 48
# a call long enough to use every slot of the job (p4reduce.job.slots_for_call)
BLOCKS = SLOTS * BLOCKS_PER_SLOT


@pytest.fixture(scope="module")
def switch():
    with SwitchSession.inprocess() as sw:
        yield sw


class FirstTurn(InProcessTransport):
    """The harness's transport, counting the frames sent before the first result."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.before_first_result = 0
        self.answered = False

    def send(self, batch) -> int:
        if not self.answered:
            self.before_first_result += len(batch)
        return super().send(batch)

    def recv(self, max_n: int):
        frames, lengths = super().recv(max_n)
        self.answered = self.answered or len(lengths) > 0
        return frames, lengths


def outstanding_at_start(switch, descriptor: dict, port: int, **worker_kw) -> int:
    """Packets a rank of a 1-rank job sent before its first result, in a call whose
    sum is checked against the input."""
    transport = FirstTurn(switch.proc, port)
    x = np.arange(BLOCKS * 64, dtype=np.int32) % 1000 - 500
    with Worker(descriptor, transport=transport, **worker_kw) as w:
        assert np.array_equal(w.allreduce(x), x)
    return transport.before_first_result


@pytest.mark.parametrize(
    "job_window,worker_window,expected",
    [
        (None, None, FAIR_SLOTS),  # bmv2's default: a first-in first-out switch
        (SLOTS, None, SLOTS),  # the descriptor's (softswitch's and Tofino's: every slot)
        (SLOTS, 8, 8),  # the Worker's own, whatever the descriptor says
    ],
)
def test_a_rank_opens_its_descriptors_window_unless_given_one(
    switch, job_window, worker_window, expected
):
    job = switch.create_job(1, SLOTS, 12, encoding="packed", window=job_window)
    try:
        descriptor = switch.descriptors(job)[0]
        assert descriptor["window"] == (FAIR_SLOTS if job_window is None else job_window)
        kw = {} if worker_window is None else {"window": worker_window}
        assert outstanding_at_start(switch, descriptor, job.workers[0].port, **kw) == expected
    finally:
        switch.jobs.delete(job.job)


def test_a_descriptor_without_a_window_keeps_fair_slots(switch):
    """Descriptors written before the field existed: the Worker keeps FAIR_SLOTS."""
    job = switch.create_job(1, SLOTS, 13, encoding="packed", window=SLOTS)
    try:
        descriptor = {k: v for k, v in switch.descriptors(job)[0].items() if k != "window"}
        assert outstanding_at_start(switch, descriptor, job.workers[0].port) == FAIR_SLOTS
    finally:
        switch.jobs.delete(job.job)
