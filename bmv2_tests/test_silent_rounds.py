"""Silent rounds (docs/protocol.md sections 6 and 13): a rank sends only for its own
non-zero blocks, plus an announce packet per slot per call and a closing packet where some
rank sat out the slot's last round (else that round, flagged ENDED, ends it); the switch
keeps
every rank's next block, picks the minimum, and waits only for the ranks that have it.
Queries, REWIND requests and rewinds recover what a silent rank lost. Frames are built by
hand (the harness's codec), the ranks' streams chosen here, and every sum checked against
numpy.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from hostlib import protocol as p
from hostlib.protocol import END_OF_STREAM as END, Flag, MsgType
from p4reduce import wire
from p4reduce.wire import RoundMode

SILENT = RoundMode.SILENT
Streams = dict[int, dict[int, np.ndarray]]  # rank -> {block: values}


def silent_job(switch, job: int, n: int, **kw):
    return switch.add_job(job=job, n=n, round_mode=SILENT, **kw)


def next_after(stream: dict[int, np.ndarray], block: int) -> int:
    """The rank's next non-zero block after `block` (-1: its first), END_OF_STREAM if none."""
    return min((b for b in stream if b > block), default=END)


def check_all(results, msg_type: MsgType, block: int, next_block: int, version: int) -> None:
    """Every rank got the same answer, flagged SILENT, of that round."""
    for res in results.values():
        h = res.header
        assert (h.msg_type, h.block, h.next_block, h.slot_version) == (
            msg_type,
            block,
            next_block,
            version,
        )
        assert h.flags & Flag.SILENT


def run_call(
    job,
    streams: Streams,
    version: int = 0,
    continued: bool = False,
    slot: int = 0,
    covered: bool = False,
):
    """One call on `slot` as silent ranks play it: an announce round, a data round per
    block some rank has (only those ranks send), the closing round -- none where no rank
    has a block: the announce round names END_OF_STREAM and ends the call, flagged ENDED.
    With `covered` every DATA says its sender holds every earlier sum (as a rank without
    loss does), so a last data round that every rank joins ends the call too. Returns the
    sums by block, the packets each rank sent and the version the next call starts in."""
    flags = Flag.CONTINUED if continued else 0
    data_flags = Flag.CONTINUED | (Flag.COVERED if covered else 0)
    cursor = {r: next_after(s, -1) for r, s in streams.items()}
    sent: Counter[int] = Counter()
    for r in streams:
        job.send(r, MsgType.ANNOUNCE, slot=slot, version=version, next_block=cursor[r], flags=flags)
        sent[r] += 1
    results = job.results()
    check_all(results, MsgType.RESULT, END, min(cursor.values()), version)
    sums: dict[int, np.ndarray] = {}
    if min(cursor.values()) == END:
        assert all(res.header.flags & Flag.ENDED for res in results.values())
        return sums, sent, version ^ 1
    while (block := results[0].header.next_block) != END:
        version ^= 1
        senders = [r for r in streams if cursor[r] == block]
        for r in senders:
            cursor[r] = next_after(streams[r], block)
            values = streams[r][block]
            job.send(r, MsgType.DATA, slot=slot, version=version, block=block, values=values,
                     next_block=cursor[r], flags=data_flags)  # fmt: skip
            sent[r] += 1
        results = job.results()
        check_all(results, MsgType.RESULT, block, min(cursor.values()), version)
        sums[block] = results[0].values
        assert all(np.array_equal(res.values, sums[block]) for res in results.values())
    ended = covered and len(senders) == len(streams)
    assert all(bool(res.header.flags & Flag.ENDED) == ended for res in results.values())
    if ended:
        return sums, sent, version ^ 1
    version ^= 1
    for r in streams:  # a closing SKIP is header only at every block size
        job.send(r, MsgType.SKIP, slot=slot, version=version, block=END, flags=Flag.CONTINUED,
                 pad_skip=False)  # fmt: skip
        sent[r] += 1
    results = job.results()
    check_all(results, MsgType.RESULT, END, END, version)
    assert all(res.values is None and res.fingerprint is None for res in results.values())
    return sums, sent, version ^ 1


def numpy_sums(streams: Streams) -> dict[int, np.ndarray]:
    union = sorted({b for s in streams.values() for b in s})
    return {b: sum(s[b] for s in streams.values() if b in s) for b in union}


def random_streams(rng, n: int, blocks: int, k: int, density: list[float]) -> Streams:
    return {
        r: {b: rng.integers(-1000, 1000, k) for b in range(blocks) if rng.random() < density[r]}
        for r in range(n)
    }


@pytest.mark.parametrize("block_values", [64, 2048, 8192, 16000])
def test_a_call_sends_only_non_zero_blocks_and_sums_them(switch, block_values):
    """Four ranks of different sparsity (one all-zero): each sends its non-zero blocks
    plus two packets, and every block of the union comes back summed."""
    job = silent_job(switch, 40, 4, block_values=block_values)
    streams = random_streams(np.random.default_rng(7), 4, 24, block_values, [0.3, 0.15, 0.5, 0])
    sums, sent, _ = run_call(job, streams)
    expected = numpy_sums(streams)
    assert sorted(sums) == sorted(expected)
    for b, s in expected.items():
        assert np.array_equal(sums[b], s)
    for r, s in streams.items():
        assert sent[r] == len(s) + 2
    job.assert_silent(0.2)
    stats = job.stats()
    assert stats["aggregated"] == sum(sent.values())
    assert stats["rounds_completed"] == len(expected) + 2
    assert stats["stale"] == stats["duplicates"] == stats["wrong_encoding"] == 0


def test_ranks_silent_for_many_rounds_and_one_whose_next_block_is_the_last(switch):
    """Rank 0 alone has blocks 0..10; rank 1 only the last one (11); ranks 2 and 3 none:
    three ranks stay silent for eleven rounds and still receive every result."""
    k = p.BLOCK_VALUES
    job = silent_job(switch, 41, 4)
    streams = {0: {b: np.full(k, b + 1) for b in range(12)}, 1: {11: np.full(k, 100)}, 2: {}, 3: {}}
    sums, sent, _ = run_call(job, streams)
    assert [int(sums[b][0]) for b in range(12)] == [*range(1, 12), 112]
    assert dict(sent) == {0: 14, 1: 3, 2: 2, 3: 2}


def test_calls_follow_each_other_in_alternating_versions(switch):
    """The closing round's winner is END_OF_STREAM with every rank expected: the next
    call's announce round (CONTINUED) runs in the version after it, on any slot; so it
    does after an announce round that named END_OF_STREAM (no rank had a block: calls 1
    and 4 end there, each rank sending its ANNOUNCE only)."""
    k = p.BLOCK_VALUES
    job = silent_job(switch, 42, 3, slot_count=2)
    for slot in (0, 1):
        version = 0
        for call in range(5):
            empty = call in (1, 4)
            streams = {0: {call: np.full(k, 1)}, 1: {}, 2: {call + 1: np.full(k, 2)}}
            streams = {r: {} for r in streams} if empty else streams
            sums, sent, version = run_call(job, streams, version, continued=call > 0, slot=slot)
            want = {} if empty else {call: 1, call + 1: 2}
            assert {b: int(v[0]) for b, v in sums.items()} == want
            assert dict(sent) == ({0: 1, 1: 1, 2: 1} if empty else {0: 3, 1: 2, 2: 3})
    assert job.stats()["stale"] == 0


def test_a_lost_packet_naming_a_ranks_next_block_is_sent_again(switch):
    """The one DATA that tells the switch rank 1's next block is lost: the round waits for
    rank 1 (no result), its retransmission completes it, and the winner is that block."""
    k = p.BLOCK_VALUES
    job = silent_job(switch, 43, 3)
    for r, nb in {0: 0, 1: 0, 2: 9}.items():
        job.send(r, MsgType.ANNOUNCE, next_block=nb)
    check_all(job.results(), MsgType.RESULT, END, 0, 0)
    job.send(0, MsgType.DATA, version=1, block=0, values=np.ones(k), next_block=6)
    job.assert_silent(0.3)  # rank 1's DATA (block 0, next 2) was lost
    job.send(1, MsgType.DATA, version=1, block=0, values=np.ones(k), next_block=2,
             flags=Flag.RETRANSMIT)  # fmt: skip
    check_all(job.results(), MsgType.RESULT, 0, 2, 1)
    job.send(1, MsgType.DATA, version=0, block=2, values=np.ones(k), next_block=END)
    results = job.results()  # only rank 1 had block 2
    check_all(results, MsgType.RESULT, 2, 6, 0)
    assert np.array_equal(results[2].values, np.ones(k))


def _three_rounds(job):
    """Announce (v0), round A (v1, block 0: ranks 0, 1), round B (v0, block 1: rank 0);
    returns B's values. Rank 2's first block is 5, rank 1's next after 0 is 5."""
    k = p.BLOCK_VALUES
    for r, nb in {0: 0, 1: 0, 2: 5}.items():
        job.send(r, MsgType.ANNOUNCE, next_block=nb)
    check_all(job.results(), MsgType.RESULT, END, 0, 0)
    job.send(0, MsgType.DATA, version=1, block=0, values=np.full(k, 1), next_block=1)
    job.send(1, MsgType.DATA, version=1, block=0, values=np.full(k, 2), next_block=5)
    check_all(job.results(), MsgType.RESULT, 0, 1, 1)
    return np.full(k, 30)


def test_queries_get_a_status_naming_only_the_ranks_the_round_waits_for(switch):
    job = silent_job(switch, 44, 3)
    _three_rounds(job)
    # round B (v0, block 1) waits for rank 0 only; ranks 1 and 2 ask
    for r in (1, 2):
        job.send(r, MsgType.SKIP, version=0, block=1, next_block=5, flags=Flag.RETRANSMIT)
        status = job.result(r)
        assert status is not None and status.header.msg_type == MsgType.STATUS
        assert status.header.flags & Flag.SILENT
        assert status.contributors == 0b110  # rank 0 is the one not heard from
    job.assert_silent(0.2)  # a query joins nothing: the round still waits
    assert job.stats()["duplicates"] == 2


def test_queries_into_completed_rounds_get_the_cached_result_of_the_right_block(switch):
    k = p.BLOCK_VALUES
    job = silent_job(switch, 45, 3)
    b_values = _three_rounds(job)
    job.send(0, MsgType.DATA, version=0, block=1, values=b_values, next_block=END)
    check_all(job.results(), MsgType.RESULT, 1, 5, 0)
    # rank 2 asks for round B after it completed: the cached copy, by unicast
    job.send(2, MsgType.SKIP, version=0, block=1, next_block=5, flags=Flag.RETRANSMIT)
    res = job.result(2)
    assert res is not None and res.header.flags & Flag.CACHED and res.header.flags & Flag.SILENT
    assert (res.header.slot_version, res.header.block, res.header.next_block) == (0, 1, 5)
    assert np.array_equal(res.values, b_values)
    # rank 2 believes it still waits for round A (v1, block 0): v1 holds round C now, which
    # waits for rank 2 (block 5): the answer is the last completed round, B, in v0
    job.send(2, MsgType.SKIP, version=1, block=0, next_block=5, flags=Flag.RETRANSMIT)
    res = job.result(2)
    assert res is not None and res.header.flags & Flag.CACHED
    assert (res.header.slot_version, res.header.block, res.header.next_block) == (0, 1, 5)
    assert np.array_equal(res.values, b_values)
    job.assert_silent(0.2)  # unicast only
    # round C (block 5) waits for ranks 1 and 2
    job.send(1, MsgType.DATA, version=1, block=5, values=np.full(k, 4), next_block=END)
    job.send(2, MsgType.DATA, version=1, block=5, values=np.full(k, 5), next_block=END)
    results = job.results()
    check_all(results, MsgType.RESULT, 5, END, 1)
    assert np.array_equal(results[0].values, np.full(k, 9))
    # v0 now holds the closing round, in progress; a query for B gets the last round, C
    job.send(2, MsgType.SKIP, version=0, block=1, next_block=END, flags=Flag.RETRANSMIT)
    res = job.result(2)
    assert res is not None and (res.header.slot_version, res.header.block) == (1, 5)
    assert job.stats()["retransmissions_served"] == 3


def test_a_query_with_nothing_to_answer_is_stale(switch):
    job = silent_job(switch, 46, 2)
    job.send(0, MsgType.ANNOUNCE, next_block=0)  # the first round, in progress
    job.send(1, MsgType.SKIP, version=0, block=3, next_block=3, flags=Flag.RETRANSMIT)
    job.assert_silent(0.3)
    assert job.stats()["stale"] == 1


def _rewind_round(job, position: int, version: int, nexts: dict[int, int]):
    """Every rank announces at the rewind position (CONTINUED); returns the results."""
    for r, nb in nexts.items():
        job.send(r, MsgType.ANNOUNCE, version=version, block=position, next_block=nb,
                 flags=Flag.CONTINUED)  # fmt: skip
    results = job.results()
    check_all(results, MsgType.RESULT, position, min(nexts.values()), version)
    return results


@pytest.mark.parametrize("block_values", [64, 2048, 8192, 16000])
def test_rewind_requests_take_the_minimum_and_apply_at_completion(switch, block_values):
    k = block_values
    job = silent_job(switch, 47, 3, block_values=k)
    for r in range(3):
        job.send(r, MsgType.ANNOUNCE, next_block=0)
    check_all(job.results(), MsgType.RESULT, END, 0, 0)
    a = {r: np.full(k, r + 1) for r in range(3)}
    for r, nb in {0: 2, 1: 2, 2: 4}.items():
        job.send(r, MsgType.DATA, version=1, block=0, values=a[r], next_block=nb)
    check_all(job.results(), MsgType.RESULT, 0, 2, 1)
    # round B (v0, block 2) waits for ranks 0 and 1; ranks 2 and 1 ask for rewinds
    job.send(2, MsgType.REWIND, version=0, block=2, next_block=4)
    job.assert_silent(0.3)  # consumed
    job.send(1, MsgType.REWIND, version=0, block=2, next_block=0)
    # B waits for rank 1, which may have missed the result naming its block: it gets the
    # last completed round's (A) by unicast
    res = job.result(1)
    assert res is not None and res.header.msg_type == MsgType.RESULT
    assert res.header.flags & Flag.CACHED
    assert (res.header.slot_version, res.header.block, res.header.next_block) == (1, 0, 2)
    job.assert_silent(0.2)
    b = {0: np.full(k, 7), 1: np.full(k, 8)}
    job.send(0, MsgType.DATA, version=0, block=2, values=b[0], next_block=END)
    job.send(1, MsgType.DATA, version=0, block=2, values=b[1], next_block=END)
    results = job.results()
    check_all(results, MsgType.REWIND, 2, 0, 0)  # B's sum, and the rewind to position 0
    assert all(np.array_equal(res.values, np.full(k, 15)) for res in results.values())
    # a copy of B's result answers as a REWIND too
    job.send(0, MsgType.DATA, version=0, block=2, values=b[0], next_block=END,
             flags=Flag.RETRANSMIT)  # fmt: skip
    res = job.result(0)
    assert res is not None and res.header.msg_type == MsgType.REWIND
    assert res.header.flags & Flag.CACHED and res.header.next_block == 0
    # the rewind round (v1, block 0): every rank announces its first block >= 0
    _rewind_round(job, 0, 1, {0: 0, 1: 0, 2: 0})
    for r in range(3):  # re-aggregated: the same sum as the first time
        job.send(r, MsgType.DATA, version=0, block=0, values=a[r], next_block=END,
                 flags=Flag.CONTINUED)  # fmt: skip
    results = job.results()
    check_all(results, MsgType.RESULT, 0, END, 0)
    assert np.array_equal(results[0].values, np.full(k, 6))
    stats = job.stats()
    assert stats["rewinds"] == 2 and stats["stale"] == 0


def test_a_rewind_request_in_the_closing_round_is_the_senders_closing_contribution(switch):
    job = silent_job(switch, 48, 3)
    for r in range(3):  # rank 1 alone has a block: block 0
        job.send(r, MsgType.ANNOUNCE, next_block=0 if r == 1 else END)
    check_all(job.results(), MsgType.RESULT, END, 0, 0)
    job.send(1, MsgType.DATA, version=1, block=0, values=np.ones(p.BLOCK_VALUES),
             next_block=END, flags=Flag.CONTINUED)  # fmt: skip
    check_all(job.results(), MsgType.RESULT, 0, END, 1)
    job.send(0, MsgType.SKIP, version=0, block=END)
    job.send(2, MsgType.REWIND, version=0, block=END, next_block=3)
    job.assert_silent(0.3)
    job.send(2, MsgType.REWIND, version=0, block=END, next_block=3, flags=Flag.RETRANSMIT)
    status = job.result(2)  # its bit is set: a copy, answered with a STATUS
    assert status is not None and status.header.msg_type == MsgType.STATUS
    assert status.contributors == 0b101
    job.send(1, MsgType.SKIP, version=0, block=END)
    check_all(job.results(), MsgType.REWIND, END, 3, 0)
    _rewind_round(job, 3, 1, {0: END, 1: END, 2: END})
    assert job.stats()["rewinds"] == 1


def test_a_new_incarnation_forgets_a_pending_rewind(switch):
    old = silent_job(switch, 49, 2, slot_count=1, epoch=5)
    for r in range(2):
        old.send(r, MsgType.ANNOUNCE, next_block=r * 5)
    old.results()
    old.send(1, MsgType.REWIND, version=1, block=0, next_block=0)  # pending, never applied
    old.assert_silent(0.3)
    old.remove()
    new = silent_job(switch, 49, 2, slot_count=1, epoch=6)
    for r in range(2):
        new.send(r, MsgType.ANNOUNCE, next_block=4)
    check_all(new.results(), MsgType.RESULT, END, 4, 0)


def test_a_slot_that_lost_the_jobs_state_answers_state_lost_flagged_silent(switch):
    job = silent_job(switch, 50, 2, slot_count=1, epoch=9)
    for r in range(2):
        job.send(r, MsgType.ANNOUNCE, next_block=0)
    job.results()
    switch.lose_state(reinstall=False)  # the switch forgot everything
    job = silent_job(switch, 50, 2, slot_count=1, epoch=9)
    job.send(1, MsgType.SKIP, version=1, block=0, next_block=END,
             flags=Flag.CONTINUED | Flag.RETRANSMIT)  # fmt: skip
    lost = job.result(1)
    assert lost is not None and lost.header.flags & Flag.STATE_LOST
    assert lost.header.flags & Flag.SILENT
    assert job.stats()["state_lost"] == 1


@pytest.mark.parametrize("expected_ranks", [[0], [1, 3], [0, 1, 2, 3]])
def test_a_packed_silent_round_carries_every_ranks_bias(switch, expected_ranks):
    """Lanes come back as sum(q) + N * bias whoever sent: the switch adds the silent
    ranks' bias."""
    n, k = 4, p.BLOCK_VALUES
    bias = ((1 << 31) - 1) // n
    job = silent_job(switch, 51, n, encoding=p.Encoding.PACKED)
    for r in range(n):
        job.send(r, MsgType.ANNOUNCE, next_block=2 if r in expected_ranks else END,
                 flags=Flag.PACKED)  # fmt: skip
    job.results()
    rng = np.random.default_rng(3)
    q = {r: rng.integers(-bias, bias + 1, k) for r in expected_ranks}
    for r in expected_ranks:
        job.send(r, MsgType.DATA, version=1, block=2, values=q[r] + bias, next_block=END,
                 flags=Flag.PACKED)  # fmt: skip
    results = job.results()
    for res in results.values():
        assert res.header.flags == Flag.PACKED | Flag.SILENT and res.header.block == 2
        lanes = res.values.view(np.uint32).astype(np.int64)
        assert np.array_equal(lanes - n * bias, sum(q.values()))


def test_the_two_round_modes_never_mix(switch):
    """A FLAG_SILENT packet in an every-rank job, a packet without it in a silent job and a
    REWIND in an every-rank job are dropped and counted in wrong_encoding; a REWIND whose
    position does not fit 24 bits is malformed."""
    every = switch.add_job(job=52, n=2, job_index=0, slot_base=0)
    silent = silent_job(switch, 53, 2, job_index=1, slot_base=4, ports=[3, 4])
    every.send(0, MsgType.ANNOUNCE, next_block=0, flags=Flag.SILENT)
    every.send(0, MsgType.REWIND, version=1, block=0, next_block=0)
    silent.send(0, MsgType.ANNOUNCE, next_block=0, mode_flag=False)
    every.assert_silent(0.3)
    silent.assert_silent(0.1)
    assert every.stats()["wrong_encoding"] == 2 and silent.stats()["wrong_encoding"] == 1
    before = switch.switch_stats()["drops_malformed"]
    silent.send(1, MsgType.REWIND, version=1, block=0, next_block=1 << 24)
    silent.assert_silent(0.3)
    assert switch.switch_stats()["drops_malformed"] == before + 1
    # neither job's rounds were touched
    for job in (every, silent):
        for r in range(2):
            job.send(r, MsgType.ANNOUNCE, next_block=1)
        assert all(res.header.next_block == 1 for res in job.results().values())


def test_a_rank_that_missed_a_rewind_learns_it_from_its_own_rewind_request(switch):
    """Rank 1 lost the REWIND that started a rewind round, which now waits for it; it asks
    for a rewind itself (naming the round it believes in progress) and gets the last
    completed round's REWIND back, announces, and its own request applies next."""
    k = p.BLOCK_VALUES
    job = silent_job(switch, 54, 2)
    for r in range(2):
        job.send(r, MsgType.ANNOUNCE, next_block=0)
    check_all(job.results(), MsgType.RESULT, END, 0, 0)
    job.send(0, MsgType.DATA, version=1, block=0, values=np.ones(k), next_block=3)
    job.send(0, MsgType.REWIND, version=1, block=0, next_block=0)  # after its DATA
    job.assert_silent(0.3)
    job.send(1, MsgType.DATA, version=1, block=0, values=np.ones(k), next_block=3)
    check_all(job.results(), MsgType.REWIND, 0, 0, 1)  # rank 1's copy is "lost"
    job.send(0, MsgType.ANNOUNCE, block=0, next_block=0, flags=Flag.CONTINUED)
    job.send(1, MsgType.REWIND, version=0, block=3, next_block=3, flags=Flag.CONTINUED)
    res = job.result(1)
    assert res is not None and res.header.msg_type == MsgType.REWIND
    assert res.header.flags & Flag.CACHED
    assert (res.header.slot_version, res.header.block, res.header.next_block) == (1, 0, 0)
    assert np.array_equal(res.values, np.full(k, 2))
    job.assert_silent(0.2)
    job.send(1, MsgType.ANNOUNCE, block=0, next_block=0, flags=Flag.CONTINUED)
    check_all(job.results(), MsgType.REWIND, 0, 3, 0)  # rank 1's request, applied
    assert job.stats()["rewinds"] == 2


def test_a_query_answered_from_an_announce_round_gets_its_fingerprint_range(switch):
    """Rank 1 missed the announce round's result, which named its block: the round in
    progress waits for it, and its query gets the announce round's result back, as an
    announce round's result is: the fingerprint range, no values."""
    job = silent_job(switch, 55, 2)
    for r in range(2):
        job.send(r, MsgType.ANNOUNCE, next_block=0)
    check_all(job.results(), MsgType.RESULT, END, 0, 0)
    job.send(1, MsgType.SKIP, version=1, block=7, next_block=0, flags=Flag.RETRANSMIT)
    res = job.result(1)
    assert res is not None and res.header.flags & Flag.CACHED
    assert (res.header.slot_version, res.header.block, res.header.next_block) == (0, END, 0)
    assert res.values is None and res.fingerprint is not None


@pytest.mark.parametrize("block_values", [64, 2048])
def test_a_last_data_round_that_every_rank_joined_covered_ends_the_call(switch, block_values):
    """Ranks whose DATA say they hold every earlier sum (COVERED): where the slot's last
    block is non-zero on every rank, its round's RESULT names END_OF_STREAM flagged ENDED
    and no closing round follows (a closing SKIP is stale, the next call's ANNOUNCE opens
    it); a copy of a rank's DATA gets that RESULT cached, still flagged ENDED. Where a rank
    lacks the last block the closing round follows as before."""
    k = block_values
    job = silent_job(switch, 67, 3, block_values=k)
    streams = {r: {0: np.full(k, r + 1), 2 + r % 2: np.full(k, 5)} for r in range(3)}
    streams = {r: {**s, 4: np.full(k, 10 * r)} for r, s in streams.items()}
    sums, sent, v = run_call(job, streams, covered=True)  # block 4: every rank's
    assert np.array_equal(sums[4], np.full(k, 30)) and sums[2][0] == 10 and sums[3][0] == 5
    assert dict(sent) == {0: 4, 1: 4, 2: 4}  # an ANNOUNCE and 3 DATA: no closing SKIP
    job.send(1, MsgType.DATA, version=v ^ 1, block=4, values=np.full(k, 10), next_block=END,
             flags=Flag.CONTINUED | Flag.COVERED | Flag.RETRANSMIT)  # fmt: skip
    res = job.result(1)
    assert res is not None and res.header.flags & Flag.CACHED and res.header.flags & Flag.ENDED
    assert (res.header.block, res.header.next_block) == (4, END)
    assert np.array_equal(res.values, np.full(k, 30))
    stale = job.stats()["stale"]
    job.send(0, MsgType.SKIP, version=v, block=END, flags=Flag.CONTINUED)
    job.assert_silent(0.3)  # no closing round: the next call's announce round
    assert job.stats()["stale"] == stale + 1
    streams[2].pop(4)  # the next call: rank 2 lacks the last block, so the call closes
    sums, sent, v = run_call(job, streams, v, continued=True, covered=True)
    assert dict(sent) == {0: 5, 1: 5, 2: 4} and np.array_equal(sums[4], np.full(k, 10))
    assert job.stats()["stale"] == stale + 1 and job.stats()["wrong_encoding"] == 0


def test_a_rewind_request_answered_by_the_round_that_ended_the_call_is_not_kept(switch):
    """A rank that lost the RESULT of the round that ended its call (a last data round
    every rank joined COVERED) may ask for a rewind at that round's block before a copy
    of it comes. That round ended the call: every rank held every earlier sum, so the
    cached RESULT (flagged ENDED) is all the sender lacks, and the position is not kept.
    Kept, it rewound the next call's announce round to a block of this call's streams:
    the next call's ranks got a REWIND naming it (and a rank whose new stream has no such
    block failed the call with a protocol error)."""
    k = p.BLOCK_VALUES
    job = silent_job(switch, 63, 3)
    streams = {r: {0: np.full(k, r + 1), 2: np.full(k, 5)} for r in range(3)}
    sums, _, v = run_call(job, streams, covered=True)  # block 2: every rank's, ENDED
    assert np.array_equal(sums[2], np.full(k, 15))
    rewinds = job.stats()["rewinds"]
    job.send(1, MsgType.REWIND, version=v ^ 1, block=2, next_block=2, flags=Flag.CONTINUED)
    res = job.result(1)
    assert res is not None and res.header.msg_type == MsgType.RESULT
    assert res.header.flags & Flag.CACHED and res.header.flags & Flag.ENDED
    assert (res.header.block, res.header.next_block) == (2, END)
    assert np.array_equal(res.values, np.full(k, 15))
    job.assert_silent(0.2)
    assert job.stats()["rewinds"] == rewinds  # answered, not taken
    # the next call (other streams): its announce round is a RESULT naming their first
    # block, not a REWIND to block 2 (run_call checks every round's answer)
    sums, _, _ = run_call(job, {r: {1: np.full(k, r)} for r in range(3)}, v, continued=True)
    assert np.array_equal(sums[1], np.full(k, 3))


def test_an_announce_round_whose_fingerprints_differ_ends_the_slot_over_a_pending_rewind(
    switch,
):
    """Ranks that disagree on what they reduce end the slot at its announce round, a
    rewind asked for meanwhile too: the position is a block of the asking rank's stream
    (a rank whose announce went unanswered asks for its coverage), which the other ranks'
    streams may not have. The round's RESULT names END_OF_STREAM, flagged ENDED; before,
    it left as a REWIND to that block, and a rank whose shorter call had no such block
    failed with a protocol error instead of the fingerprint mismatch."""
    job = silent_job(switch, 64, 3)
    fps = {0: p.fingerprint(np.int32, 1000), 1: p.fingerprint(np.int32, 1000)}
    fps[2] = p.fingerprint(np.int32, 2000)  # rank 2 reduces something else
    for r in (0, 1):
        job.send(r, MsgType.ANNOUNCE, next_block=0, fingerprint=fps[r])
    job.send(2, MsgType.REWIND, block=0, next_block=0)  # pending: position 0
    job.assert_silent(0.2)
    job.send(2, MsgType.ANNOUNCE, next_block=0, fingerprint=fps[2])
    results = job.results()
    check_all(results, MsgType.RESULT, END, END, 0)
    for res in results.values():
        assert res.header.flags & Flag.ENDED
        assert res.fingerprint == (min(fps.values()), max(fps.values()))


def test_a_data_round_with_a_contribution_not_covered_is_followed_by_the_closing_round(switch):
    """Every rank joins the last round, but one DATA lacks COVERED (its sender saw a gap:
    it sends its REWIND in the closing round instead of its closing SKIP): the RESULT is
    not ENDED, and the closing round takes that REWIND, whose rewind re-runs the slot."""
    k = p.BLOCK_VALUES
    job = silent_job(switch, 68, 2)
    for r in range(2):
        job.send(r, MsgType.ANNOUNCE, next_block=0)
    check_all(job.results(), MsgType.RESULT, END, 0, 0)
    job.send(0, MsgType.DATA, version=1, block=0, values=np.ones(k), next_block=END,
             flags=Flag.CONTINUED | Flag.COVERED)  # fmt: skip
    job.send(1, MsgType.DATA, version=1, block=0, values=np.ones(k), next_block=END,
             flags=Flag.CONTINUED)  # fmt: skip
    results = job.results()
    check_all(results, MsgType.RESULT, 0, END, 1)
    assert not any(res.header.flags & Flag.ENDED for res in results.values())
    job.send(0, MsgType.SKIP, version=0, block=END, flags=Flag.CONTINUED)
    job.send(1, MsgType.REWIND, version=0, block=END, next_block=0, flags=Flag.CONTINUED)
    check_all(job.results(), MsgType.REWIND, END, 0, 0)
    assert job.stats()["rewinds"] == 1


def test_an_announce_round_that_ends_the_call_answers_with_its_fingerprint_range(switch):
    """No rank has a block: the announce round's RESULT names END_OF_STREAM and ends the
    call. It is still an announce round's: a copy of a rank's ANNOUNCE (it lost the
    RESULT) gets it cached with the fingerprint range, not header only as a closing
    round's; the next call's announce round, which needs every rank, has not run, so
    nothing reused the version."""
    job = silent_job(switch, 57, 3)
    for r in range(3):
        job.send(r, MsgType.ANNOUNCE, next_block=END)
    check_all(job.results(), MsgType.RESULT, END, END, 0)
    job.send(2, MsgType.ANNOUNCE, next_block=END, flags=Flag.RETRANSMIT)
    res = job.result(2)
    assert res is not None and res.header.flags & Flag.CACHED
    assert (res.header.slot_version, res.header.block, res.header.next_block) == (0, END, END)
    assert res.values is None and res.fingerprint is not None
    job.assert_silent(0.2)
    assert job.stats()["stale"] == 0 and job.stats()["rounds_completed"] == 1


def test_only_skips_close_and_only_announces_open_a_call(switch):
    """Both a closing round and the next call's announce round aggregate END_OF_STREAM;
    the switch tells them apart by the round before, so a stray ANNOUNCE is no closing
    contribution and a stray closing SKIP joins no announce round: both stale. After an
    announce round that named END_OF_STREAM (no rank had a block) the next round is the
    next call's announce round, which a closing SKIP does not join either."""
    k = p.BLOCK_VALUES
    job = silent_job(switch, 56, 2)
    for r in range(2):
        job.send(r, MsgType.ANNOUNCE, next_block=0)
    check_all(job.results(), MsgType.RESULT, END, 0, 0)
    for r in range(2):
        job.send(r, MsgType.DATA, version=1, block=0, values=np.ones(k), next_block=END,
                 flags=Flag.CONTINUED)  # fmt: skip
    check_all(job.results(), MsgType.RESULT, 0, END, 1)
    job.send(0, MsgType.ANNOUNCE, version=0, next_block=END, flags=Flag.CONTINUED)
    job.assert_silent(0.3)  # the closing round (v0) takes SKIPs only
    for r in range(2):
        job.send(r, MsgType.SKIP, version=0, block=END, flags=Flag.CONTINUED)
    check_all(job.results(), MsgType.RESULT, END, END, 0)
    job.send(1, MsgType.SKIP, version=1, block=END, flags=Flag.CONTINUED)
    job.assert_silent(0.3)  # the next call's announce round (v1) takes ANNOUNCEs only
    assert job.stats()["stale"] == 2
    for r in range(2):
        job.send(r, MsgType.ANNOUNCE, version=1, next_block=END, flags=Flag.CONTINUED)
    check_all(job.results(), MsgType.RESULT, END, END, 1)  # no block: the call ends
    job.send(0, MsgType.SKIP, version=0, block=END, flags=Flag.CONTINUED)
    job.assert_silent(0.3)  # no closing round follows: the next call's announce (v0)
    assert job.stats()["stale"] == 3
    for r in range(2):
        job.send(r, MsgType.ANNOUNCE, next_block=3, flags=Flag.CONTINUED)
    check_all(job.results(), MsgType.RESULT, END, 3, 0)


def test_a_late_first_announce_is_stale_once_a_round_has_run_in_version_1(switch):
    """Rank 1 missed the announce round's result and sends its ANNOUNCE again (not
    CONTINUED: it has had no result) after the round of block 0 ran in version 1 without
    it; version 0 now runs block 1, which waits for rank 1. The late ANNOUNCE must not set
    rank 1's bit there (the round would then never complete): it is stale, and rank 1's
    DATA of block 1 completes the round."""
    k = p.BLOCK_VALUES
    job = silent_job(switch, 58, 2)
    job.send(0, MsgType.ANNOUNCE, next_block=0)
    job.send(1, MsgType.ANNOUNCE, next_block=1)
    check_all(job.results(), MsgType.RESULT, END, 0, 0)
    job.send(0, MsgType.DATA, version=1, block=0, values=np.ones(k), next_block=END,
             flags=Flag.CONTINUED)  # fmt: skip
    check_all(job.results(), MsgType.RESULT, 0, 1, 1)
    stale = job.stats()["stale"]
    job.send(1, MsgType.ANNOUNCE, next_block=1, flags=Flag.RETRANSMIT)
    job.assert_silent(0.3)
    assert job.stats()["stale"] == stale + 1
    job.send(1, MsgType.DATA, version=0, block=1, values=np.full(k, 2), next_block=END)
    results = job.results()
    check_all(results, MsgType.RESULT, 1, END, 0)
    assert np.array_equal(results[0].values, np.full(k, 2))


def test_a_late_copy_answered_from_a_later_round_says_that_rounds_block(switch):
    """Rank 0 sends DATA of block 0 and loses every result after it; rank 1 alone has
    blocks 1 and 2, so their rounds run without rank 0 and the second reuses version 1.
    Rank 0's copy of its DATA (version 1, block 0) then finds version 1 complete with the
    round of block 2: the cached answer must say block 2 (it carries block 2's sum), or
    rank 0 would take block 2's sum for block 0's and skip blocks 1 and 2 unnoticed."""
    k = p.BLOCK_VALUES
    job = silent_job(switch, 59, 2)
    for r in range(2):
        job.send(r, MsgType.ANNOUNCE, next_block=0)
    check_all(job.results(), MsgType.RESULT, END, 0, 0)
    job.send(0, MsgType.DATA, version=1, block=0, values=np.full(k, 1), next_block=END,
             flags=Flag.CONTINUED)  # fmt: skip
    job.send(1, MsgType.DATA, version=1, block=0, values=np.full(k, 2), next_block=1,
             flags=Flag.CONTINUED)  # fmt: skip
    check_all(job.results(), MsgType.RESULT, 0, 1, 1)
    for version, block, nxt in ((0, 1, 2), (1, 2, END)):
        job.send(1, MsgType.DATA, version=version, block=block, values=np.full(k, 10 * block),
                 next_block=nxt, flags=Flag.CONTINUED)  # fmt: skip
        check_all(job.results(), MsgType.RESULT, block, nxt, version)
    job.send(0, MsgType.DATA, version=1, block=0, values=np.full(k, 1), next_block=END,
             flags=Flag.CONTINUED | Flag.RETRANSMIT)  # fmt: skip
    res = job.result(0)
    assert res is not None and res.header.flags & Flag.CACHED
    assert (res.header.slot_version, res.header.block, res.header.next_block) == (1, 2, END)
    assert np.array_equal(res.values, np.full(k, 20))


def test_a_data_copy_does_not_join_a_rewind_round_at_its_block(switch):
    """A rewind round at position 0 runs in version 1, where rank 1 had sent DATA of block
    0. A copy of that DATA names the round's version and block, but a rewind round takes
    ANNOUNCEs only: the copy is stale, and the round waits for rank 1's ANNOUNCE (taken,
    the copy would have set rank 1's bit and added its values to the round's cell)."""
    k = p.BLOCK_VALUES
    job = silent_job(switch, 60, 2)
    for r in range(2):
        job.send(r, MsgType.ANNOUNCE, next_block=0)
    check_all(job.results(), MsgType.RESULT, END, 0, 0)
    for r, nb in {0: 2, 1: 4}.items():
        job.send(r, MsgType.DATA, version=1, block=0, values=np.full(k, r + 1), next_block=nb,
                 flags=Flag.CONTINUED)  # fmt: skip
    check_all(job.results(), MsgType.RESULT, 0, 2, 1)
    job.send(1, MsgType.REWIND, version=0, block=2, next_block=0, flags=Flag.CONTINUED)
    job.assert_silent(0.3)  # a request only: consumed
    job.send(0, MsgType.DATA, version=0, block=2, values=np.full(k, 7), next_block=END,
             flags=Flag.CONTINUED)  # fmt: skip
    check_all(job.results(), MsgType.REWIND, 2, 0, 0)
    stale = job.stats()["stale"]
    job.send(1, MsgType.DATA, version=1, block=0, values=np.full(k, 2), next_block=4,
             flags=Flag.CONTINUED | Flag.RETRANSMIT)  # fmt: skip
    job.assert_silent(0.3)
    assert job.stats()["stale"] == stale + 1
    job.send(0, MsgType.ANNOUNCE, version=1, block=0, next_block=0, flags=Flag.CONTINUED)
    job.assert_silent(0.3)  # the rewind round still waits for rank 1
    job.send(1, MsgType.ANNOUNCE, version=1, block=0, next_block=0, flags=Flag.CONTINUED)
    results = job.results()
    check_all(results, MsgType.RESULT, 0, 0, 1)
    assert all(res.fingerprint is not None and res.values is None for res in results.values())


@pytest.mark.parametrize("k", [64, 16000])
def test_a_closing_round_sums_nothing_and_answers_header_only(switch, k):
    """A closing round's RESULT carries no values, so its SKIPs are header only at every
    block size (one padded with a block, as a REWIND is, is taken too); a copy of a
    closing SKIP gets the cached RESULT, header only, and so does a query the closing
    round answers. Only the closing SKIP may leave its padding out: above
    SKIP_GROWS_TO_VALUES a header-only query is still dropped (wrong_encoding)."""
    job = silent_job(switch, 62, 3, block_values=k)
    sums, _, v = run_call(job, {r: {0: np.full(k, r + 1)} for r in range(3)})
    assert np.array_equal(sums[0], np.full(k, 6))
    for r in range(3):
        job.send(r, MsgType.ANNOUNCE, version=v, next_block=0, flags=Flag.CONTINUED)
    check_all(job.results(), MsgType.RESULT, END, 0, v)
    for r in range(3):
        job.send(r, MsgType.DATA, version=v ^ 1, block=0, values=np.full(k, 2), next_block=END,
                 flags=Flag.CONTINUED)  # fmt: skip
    check_all(job.results(), MsgType.RESULT, 0, END, v ^ 1)
    job.send(0, MsgType.SKIP, version=v, block=END, flags=Flag.CONTINUED)  # padded above 128
    for r in (1, 2):
        job.send(r, MsgType.SKIP, version=v, block=END, flags=Flag.CONTINUED, pad_skip=False)
    results = job.results()
    check_all(results, MsgType.RESULT, END, END, v)
    assert all(res.values is None and res.fingerprint is None for res in results.values())
    job.send(1, MsgType.SKIP, version=v, block=END, flags=Flag.CONTINUED | Flag.RETRANSMIT,
             pad_skip=False)  # fmt: skip
    res = job.result(1)
    assert res is not None and res.header.flags & Flag.CACHED and res.values is None
    assert (res.header.msg_type, res.header.block, res.header.slot_version) == (
        MsgType.RESULT, END, v)  # fmt: skip
    job.send(2, MsgType.SKIP, version=v, block=0, next_block=END,
             flags=Flag.CONTINUED | Flag.RETRANSMIT)  # fmt: skip
    res = job.result(2)
    assert res is not None and res.header.flags & Flag.CACHED and res.values is None
    assert (res.header.block, res.header.slot_version) == (END, v)
    wrong = job.stats()["wrong_encoding"]
    job.send(2, MsgType.SKIP, version=v, block=0, next_block=END,
             flags=Flag.CONTINUED | Flag.RETRANSMIT, pad_skip=False)  # fmt: skip
    if wire.skip_carries_values(k):
        job.assert_silent(0.3)
        assert job.stats()["wrong_encoding"] == wrong + 1
    else:
        assert job.result(2).values is None
    assert job.stats()["stale"] == 0


def test_a_header_only_copy_is_not_answered_with_a_wider_block_than_a_frame_can_grow(switch):
    """simple_switch lets a received frame grow by only 512 bytes (wire.SKIP_GROWS_TO_VALUES).
    In a job's second call, rank 0's copy of its ANNOUNCE (header and fingerprint only)
    finds the announce round's version complete with the data round of block 1, at 256
    values per block: a cached answer would grow the frame by 1 KiB, so the copy is stale
    instead of crashing the switch; rank 0's query, which carries its job's block of
    zeros, then gets that round's result."""
    k = 256
    job = silent_job(switch, 61, 2, block_values=k)
    _, _, v = run_call(job, {r: {0: np.full(k, r + 1)} for r in range(2)})
    for r in range(2):
        job.send(r, MsgType.ANNOUNCE, version=v, next_block=0, flags=Flag.CONTINUED)
    check_all(job.results(), MsgType.RESULT, END, 0, v)
    job.send(0, MsgType.DATA, version=v ^ 1, block=0, values=np.full(k, 1), next_block=END,
             flags=Flag.CONTINUED)  # fmt: skip
    job.send(1, MsgType.DATA, version=v ^ 1, block=0, values=np.full(k, 2), next_block=1,
             flags=Flag.CONTINUED)  # fmt: skip
    check_all(job.results(), MsgType.RESULT, 0, 1, v ^ 1)
    job.send(1, MsgType.DATA, version=v, block=1, values=np.full(k, 5), next_block=END,
             flags=Flag.CONTINUED)  # fmt: skip
    check_all(job.results(), MsgType.RESULT, 1, END, v)
    stale = job.stats()["stale"]
    job.send(0, MsgType.ANNOUNCE, version=v, next_block=0, flags=Flag.CONTINUED | Flag.RETRANSMIT)
    job.assert_silent(0.3)
    assert job.stats()["stale"] == stale + 1
    job.send(0, MsgType.SKIP, version=v, block=0, values=np.zeros(k), next_block=0,
             flags=Flag.CONTINUED | Flag.RETRANSMIT)  # fmt: skip
    res = job.result(0)
    assert res is not None and res.header.flags & Flag.CACHED
    assert (res.header.slot_version, res.header.block, res.header.next_block) == (v, 1, END)
    assert np.array_equal(res.values, np.full(k, 5))
