"""A few random whole jobs (random_jobs.py: several calls of mixed kinds, patterns,
pauses, a dropping queue, overflow) through the real P4 program in virtual time, without
loss and at 5 % each way: every call of every rank ends as the contract says."""

from __future__ import annotations

import pytest

from hostlib_helpers import allow_silent
from p4net.harness import SwitchSession
from random_jobs import random_job, run


@pytest.fixture(scope="module")
def switch():
    with SwitchSession.inprocess() as sw:
        if not allow_silent(sw):
            pytest.skip("this build of the v1model program runs every-rank rounds only")
        yield sw


@pytest.mark.parametrize("loss", [0.0, 0.05])
@pytest.mark.parametrize("seed", range(1, 9))
def test_a_random_job_keeps_the_contract(switch, seed, loss):
    job = random_job(seed, loss)
    problems = run(switch, job)
    assert not problems, (job.describe(), problems)
