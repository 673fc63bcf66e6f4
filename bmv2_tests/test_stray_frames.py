"""One stray frame -- a copy with its `slot_version` flipped, a very late retransmission, a
packet of a round that cannot exist yet -- never stops a slot nor changes a sum
(docs/protocol.md section 8, "Rounds a contribution can join").

Every test drives a 3-rank job through real rounds, injects the stray at one moment of a
round, then lets the job go on: every later round must complete, with exact sums, and a
stray the round cannot take is dropped and counted in `stale`."""

from __future__ import annotations

import numpy as np

from hostlib import protocol as p
from hostlib.protocol import END_OF_STREAM as END, Flag, MsgType

BLOCK_VALUES = p.BLOCK_VALUES
N = 3
CONT = Flag.CONTINUED  # what a worker sets once it had a result on the slot


def _values(round_no: int) -> dict[int, np.ndarray]:
    """Rank r's block in data round `round_no` (distinct per rank and round)."""
    return {r: np.arange(BLOCK_VALUES) * (r + 1) + 1000 * round_no for r in range(N)}


def _data(job, rank: int, round_no: int, *, version: int | None = None, **kw) -> None:
    """Rank `rank`'s DATA of data round `round_no` (version round_no % 2, block
    round_no - 1, announcing round_no), with its version overridden when given."""
    job.send(
        rank,
        MsgType.DATA,
        version=round_no % 2 if version is None else version,
        block=round_no - 1,
        next_block=round_no if round_no < 3 else END,
        values=_values(round_no)[rank],
        flags=CONT,
        **kw,
    )


def _announce_all(job) -> None:
    for rank in range(N):
        job.send(rank, MsgType.ANNOUNCE, next_block=0)
    for res in job.results().values():
        assert res.header.next_block == 0


def _finish(job, round_no: int, ranks) -> None:
    """The given ranks send data round `round_no`; every rank must get its exact sum."""
    for rank in ranks:
        _data(job, rank, round_no)
    expected = sum(_values(round_no).values())
    for rank, res in job.results().items():
        assert res.header.msg_type == MsgType.RESULT and not res.header.flags & Flag.CACHED
        assert res.header.block == round_no - 1 and res.header.slot_version == round_no % 2
        assert np.array_equal(res.values, expected), f"rank {rank}, round {round_no}"


def _rest_of_the_job(job, first_round: int) -> None:
    for round_no in range(first_round, 4):
        _finish(job, round_no, range(N))


def _answers_without_joining(job, rank: int) -> None:
    """What a stray copy of a packet of the round in progress may get back: nothing, or
    the previous round's cached result -- never a contribution."""
    got = job.result(rank, timeout=0.4)
    assert got is None or got.header.flags & Flag.CACHED, got


def test_flipped_data_copy_during_a_round_changes_nothing(switch):
    job = switch.add_job(job=60, n=N)
    _announce_all(job)
    _data(job, 0, 1)
    _data(job, 0, 1, version=0)  # rank 0's DATA again, version flipped
    _answers_without_joining(job, 0)
    _finish(job, 1, [1, 2])
    _rest_of_the_job(job, 2)
    assert job.stats()["rounds_completed"] == 4


def test_flipped_data_copy_after_its_round_is_dropped_and_counted(switch):
    job = switch.add_job(job=61, n=N)
    _announce_all(job)
    _finish(job, 1, range(N))
    _data(job, 2, 1, version=0)  # rank 2's round-1 DATA, flipped into round 2's version
    job.assert_silent()
    _finish(job, 2, range(N))
    _rest_of_the_job(job, 3)
    stats = job.stats()
    assert stats["stale"] == 1 and stats["rounds_completed"] == 4


def test_flipped_data_copy_while_the_next_round_runs_is_dropped(switch):
    job = switch.add_job(job=62, n=N)
    _announce_all(job)
    _finish(job, 1, range(N))
    _data(job, 0, 2)
    _data(job, 2, 1, version=0)  # rank 2 has not sent round 2 yet
    job.assert_silent()
    _finish(job, 2, [1, 2])
    _rest_of_the_job(job, 3)
    assert job.stats()["stale"] == 1


def test_flipped_announce_is_dropped_in_the_announce_round_and_after_it(switch):
    job = switch.add_job(job=63, n=N)
    job.send(0, MsgType.ANNOUNCE, next_block=0)
    job.send(0, MsgType.ANNOUNCE, version=1, next_block=0)  # flipped, announce round open
    job.assert_silent()
    for rank in (1, 2):
        job.send(rank, MsgType.ANNOUNCE, next_block=0)
    assert {res.header.next_block for res in job.results().values()} == {0}
    job.send(1, MsgType.ANNOUNCE, version=1, next_block=0)  # flipped, data round 1 not begun
    job.assert_silent()
    _data(job, 0, 1)
    job.send(2, MsgType.ANNOUNCE, version=1, next_block=END)  # flipped, round 1 open
    job.assert_silent()
    _finish(job, 1, [1, 2])
    _rest_of_the_job(job, 2)
    stats = job.stats()
    assert stats["stale"] == 3 and stats["rounds_completed"] == 4


def test_flipped_skip_is_answered_during_its_round_and_dropped_after_it(switch):
    job = switch.add_job(job=64, n=N)
    _announce_all(job)
    skip = dict(version=1, block=0, next_block=2, flags=CONT)
    job.send(1, MsgType.SKIP, **skip)
    job.send(1, MsgType.SKIP, **{**skip, "version": 0})  # flipped during round 1
    _answers_without_joining(job, 1)
    for rank in (0, 2):
        _data(job, rank, 1)
    expected = _values(1)[0] + _values(1)[2]
    for res in job.results().values():
        assert np.array_equal(res.values, expected)
    job.send(1, MsgType.SKIP, **{**skip, "version": 0})  # flipped after round 1
    job.assert_silent()
    _finish(job, 2, range(N))
    _rest_of_the_job(job, 3)
    assert job.stats()["stale"] == 1


def test_very_late_retransmission_of_an_earlier_round_is_dropped(switch):
    job = switch.add_job(job=65, n=N)
    _announce_all(job)
    _finish(job, 1, range(N))
    _finish(job, 2, range(N))
    _data(job, 1, 3)
    job.send(
        0,
        MsgType.DATA,
        version=1,
        block=0,
        next_block=1,
        values=_values(1)[0],
        flags=CONT | Flag.RETRANSMIT,
    )  # rank 0's round-1 DATA, two rounds late, in round 3's version
    job.assert_silent()
    _finish(job, 3, [0, 2])
    assert job.stats()["stale"] == 1


def test_packet_of_a_round_that_cannot_exist_yet_changes_nothing(switch):
    job = switch.add_job(job=66, n=N)
    _announce_all(job)
    _data(job, 0, 1)
    _data(job, 1, 3, version=1)  # round 3's block in round 1's version
    job.assert_silent()
    _data(job, 1, 2)  # round 2 cannot start before round 1 completes
    _answers_without_joining(job, 1)
    _finish(job, 1, [1, 2])
    _rest_of_the_job(job, 2)
    stats = job.stats()
    assert stats["stale"] == 1 and stats["rounds_completed"] == 4
