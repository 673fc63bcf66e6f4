"""A few random whole jobs across a two-level fabric (random_fabric_jobs.py: ranks on both
leaves, several calls of mixed kinds, both encodings, overflow, lengths that differ) on
in-process softswitches in real time, without loss, at 5 % on every link each way, and at
20 % with ranks starting calls late: every call of every rank ends as the contract says
(exact int32 sums or OverflowError, float32 within its bound, FingerprintMismatch on every
rank); and with a switch of the fabric rebooted mid-job, where a rank may also end in
SwitchStateLost."""

from __future__ import annotations

import pytest

from .conftest import LEAVES, new_fabric
from .random_fabric_jobs import (
    FrameTrace,
    describe_problems,
    fabric_controller,
    random_fabric_job,
    run,
)

JOB_IDS = iter(range(40, 100))


@pytest.fixture(scope="module")
def fabric(tmp_path_factory):
    """One fabric and its controller for the module's jobs (each job is created and
    deleted by `run`)."""
    with new_fabric(LEAVES) as fab:
        ctl = fabric_controller(fab, tmp_path_factory.mktemp("fabric_state"))
        try:
            yield fab, ctl
        finally:
            ctl.close()


@pytest.mark.parametrize("loss", [0.0, 0.05])
@pytest.mark.parametrize("seed", range(1, 6))
def test_a_random_job_across_the_fabric_keeps_the_contract(fabric, seed, loss):
    fj = random_fabric_job(seed, loss)
    problems = run(*fabric, fj, next(JOB_IDS))
    assert not problems, describe_problems(fj.describe(), problems)


@pytest.mark.parametrize("seed", [1002, 1030])
def test_a_random_job_under_20_percent_loss_and_late_ranks_keeps_the_contract(fabric, seed):
    fj = random_fabric_job(seed, 0.2, ranks_per_leaf=12, skew=0.3)
    problems = run(*fabric, fj, next(JOB_IDS))
    assert not problems, describe_problems(fj.describe(), problems)


@pytest.mark.parametrize("seed", [24, 31, 9, 13])
def test_a_random_job_whose_switch_reboots_keeps_the_contract(fabric, seed):
    """Seed 24 reboots the spine after its result of a slot's first round reached one
    leaf's ranks and was lost on the way to the other leaf (in some runs: the timing is
    the threads'): the other leaf's ranks resend that round without CONTINUED, which a
    spine restored as live would take as a fresh round and hold them in; restored lost,
    with the job lost on the leaves too, it fails them at once."""
    fj = random_fabric_job(seed, restart=True)
    problems = run(*fabric, fj, next(JOB_IDS))
    assert not problems, describe_problems(fj.describe(), problems)


@pytest.mark.parametrize("seed", [1101, 1141])
def test_a_random_job_whose_switch_reboots_with_late_ranks_keeps_the_contract(fabric, seed):
    """Up to 8 ranks per leaf, some starting calls late: a rank that missed the spine's
    STATE_LOST (or had ended its call before it came) starts its next call, which its
    leaf would hold for the ranks that stopped; the job is lost at its leaf too (marked
    by the controller, and by the STATE_LOST passing it), so it fails at once."""
    fj = random_fabric_job(seed, ranks_per_leaf=8, skew=0.2, restart=True)
    problems = run(*fabric, fj, next(JOB_IDS))
    assert not problems, describe_problems(fj.describe(), problems)


@pytest.mark.parametrize("seed,loss", [(70003, 0.05), (70098, 0.1)])
def test_a_random_silent_job_in_the_leaf_role_keeps_the_contract(fabric, seed, loss):
    """34 ranks in silent rounds (more than one switch's bitmap holds), in the leaf and
    spine roles of silent rounds: each leaf's ranks send only their blocks, the leaf a
    partial every round; at 10 % loss on every link rank after rank misses a result
    copy, asks its leaf, and asks for rewinds that the leaf sends up. Seed 70098 (one
    block, 16 and 17 ranks) once stalled a closing round: a rank that lost every result
    of the call took the leaf's STATUS of the closing round, multicast to all its ranks,
    for one of its announce round, and never asked for a rewind. In some runs (the timing
    is the threads') it also stalled a call's closing round for a rank that lost the
    announce round's result: its ANNOUNCE resends, which that round does not take, met
    only the leaf's STATUS lacking it, counted as answers, so it asked for no rewind
    until the other ranks took it for dead."""
    fj = random_fabric_job(seed, loss, silent_leaf_role=True)
    problems = run(*fabric, fj, next(JOB_IDS))
    assert not problems, describe_problems(fj.describe(), problems)


def test_the_trace_of_a_job_is_its_frames_at_every_switch(fabric, tmp_path):
    """`--trace`'s file (FrameTrace): each frame of the job each switch took in or sent
    out, one decoded line each -- here, lossless, every rank's first ANNOUNCE entering its
    leaf, and RESULTs leaving the leaves towards ranks."""
    fj = random_fabric_job(1, 0.0)
    trace = FrameTrace(fabric[0])
    try:
        job_id = next(JOB_IDS)
        assert not run(*fabric, fj, job_id)
    finally:
        fabric[0].set_tap(None)
    path = tmp_path / "seed1.txt"
    trace.write(path, job_id, fj.job.block_values)
    lines = [line.split() for line in path.read_text().splitlines()]
    # (time, switch, in/out, port, then hostlib.protocol.frame_text: message, "job", its
    # job, "slot", its slot, "version", its version, "rank", its rank, ...)
    at_leaves = [w for w in lines if w[1] != "s"]
    assert all(w[5:7] == ["job", str(job_id)] and w[11] == "rank" for w in lines)
    announced = {(w[1], w[12]) for w in at_leaves if w[2] == "in" and w[4] == "ANNOUNCE"}
    assert len(announced) == sum(fj.per_leaf), announced
    assert any(w[2] == "out" and w[4] == "RESULT" for w in at_leaves)
