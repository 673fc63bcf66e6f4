"""Workers of jobs of several block sizes K through the real P4 program (softswitch in this
process, programmed by the controller: p4net.harness), each rank a Worker in its thread.

Checked against numpy: int32 sums exact in both encodings (packed: halves of K values),
float sums within section 10's bound per block of K, a zero block (all K values zero)
never sent, one packet per round, loss recovered by retransmission, and jobs of different
sizes side by side on one switch; and in virtual time (engine_sim), that wide blocks pace
as narrow ones do."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from hostlib import Worker
from hostlib.numerics import sum_error_bound
from p4reduce.job import announce_rounds, slots_for_call
from hostlib.timers import EngineParams
from p4net.harness import SwitchSession

from engine_sim import simulate
from hostlib_helpers import job_transport
from test_pacing import job as pacing_job

SIZES = (64, 256, 2048, 8192, 16000)


@pytest.fixture(scope="module")
def switch():
    with SwitchSession.inprocess() as sw:
        yield sw


def run_job(
    switch, job, fn, *, timeout: float = 0.02, deadline: float = 60.0, worker_kw=lambda r: {}
):
    """fn(worker, rank) on every rank of `job`, each in its own thread, its Worker made
    with worker_kw(rank) besides; (results, errors)."""
    descriptors = switch.descriptors(job)
    n = len(descriptors)
    results: list[object] = [None] * n
    errors: list[BaseException | None] = [None] * n

    def body(r: int) -> None:
        port = job.workers[r].port
        try:
            with Worker(
                descriptors[r],
                transport=job_transport(switch, port, job.block_values),
                timeout=timeout,
                deadline=deadline,
                **worker_kw(r),
            ) as w:
                results[r] = fn(w, r)
        except BaseException as e:  # re-raised by the test
            errors[r] = e

    threads = [threading.Thread(target=body, args=(r,)) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    return results, errors


def block_sparse(rng, n: int, size: int, k: int, density: float, dtype) -> list[np.ndarray]:
    """n tensors whose blocks of k values are non-zero with probability `density` each."""
    blocks = -(-size // k)
    out = []
    for _ in range(n):
        keep = np.repeat(rng.random(blocks) < density, k)[:size]
        if np.dtype(dtype).kind == "i":
            x = rng.integers(-(2**24), 2**24, size)
        else:
            x = rng.standard_normal(size) * 10.0 ** rng.integers(-4, 4, size)
        out.append(np.where(keep, x, 0).astype(dtype))
    return out


def nonzero_union(xs: list[np.ndarray], k: int, halves: bool) -> np.ndarray:
    """Which wire blocks of k values are non-zero on some rank (halves: high, low rows)."""
    blocks = -(-xs[0].size // k)
    union = np.zeros(blocks * (2 if halves else 1), bool)
    for x in xs:
        padded = np.zeros(blocks * k, np.int64)
        padded[: x.size] = x
        rows = padded.reshape(blocks, k)
        if halves:
            rows = np.stack([rows >> 16, rows & 0xFFFF], axis=1).reshape(2 * blocks, k)
        union |= rows.any(axis=1)
    return union


@pytest.mark.parametrize("encoding", ["lanes", "packed"])
@pytest.mark.parametrize("k", SIZES)
def test_int32_exact_one_packet_per_round_at_k(k, encoding, rng, switch):
    n, slots = 3, 8
    xs = block_sparse(rng, n, 9 * k + k // 3, k, 0.5, np.int32)
    job = switch.create_job(n, slots, 7, encoding=encoding, block_values=k, round_mode="every_rank")
    try:
        res, errs = run_job(switch, job, lambda w, r: (w.allreduce(xs[r]), w.stats))
    finally:
        switch.jobs.delete(job.job)
    assert errs == [None] * n, errs
    union = nonzero_union(xs, k, halves=encoding == "packed")
    rounds = announce_rounds(union.size, slots, block_values=k) + int(union.sum())
    exact = np.sum([x.astype(np.int64) for x in xs], axis=0)
    for out, stats in res:
        assert out.dtype == np.int32 and np.array_equal(out, exact)
        assert stats.last_blocks == union.size
        assert stats.last_packets_sent - stats.retransmissions == rounds


@pytest.mark.parametrize("k", SIZES)
def test_float32_within_the_bound_of_each_block_of_k(k, rng, switch):
    """Block floating point over K values: the bound comes from each block's max over the
    ranks; a block zero on every rank comes back as exact zeros; every rank gets the same
    bits. Two calls in a row (the slots' versions go on alternating)."""
    n = 4
    calls = [block_sparse(rng, n, 6 * k - 5, k, 0.6, np.float32) for _ in range(2)]
    for xs in calls:
        for x in xs:
            x[2 * k : 3 * k] = 0  # block 2: zero everywhere
    job = switch.create_job(n, 4, 7, block_values=k, round_mode="every_rank")
    try:
        res, errs = run_job(switch, job, lambda w, r: [w.allreduce(xs[r]) for xs in calls])
    finally:
        switch.jobs.delete(job.job)
    assert errs == [None] * n, errs
    for c, xs in enumerate(calls):
        exact = np.sum([x.astype(np.float64) for x in xs], axis=0)
        pad = -exact.size % k
        peak = np.max([np.abs(np.pad(x, (0, pad))).reshape(-1, k).max(1) for x in xs], axis=0)
        bound = np.repeat(sum_error_bound(peak.astype(np.float64), n), k)[: exact.size]
        bound += np.abs(exact) * np.finfo(np.float32).eps
        for r in range(n):
            got = res[r][c].astype(np.float64)
            assert (np.abs(got - exact) <= bound).all(), (c, r)
            assert (got[2 * k : 3 * k] == 0).all()
            assert np.array_equal(res[r][c], res[0][c])


@pytest.mark.parametrize("k", (256, 2048))
def test_loss_is_recovered_at_k(k, rng, switch):
    """10 % of packets lost each way in the switch: every sum is still exact (int32) or
    within the bound (float32), by retransmission, not by resending everything."""
    n = 3
    ints = block_sparse(rng, n, 24 * k, k, 0.5, np.int32)
    floats = block_sparse(rng, n, 24 * k, k, 0.5, np.float32)
    job = switch.create_job(n, 8, 7, block_values=k, round_mode="every_rank")
    switch.set_loss(job.job, ingress=0.1, egress=0.1, seed=3)
    try:
        res, errs = run_job(
            switch,
            job,
            lambda w, r: (w.allreduce(ints[r]), w.allreduce(floats[r]), w.stats),
            timeout=0.005,
        )
        counters = switch.stats(job)
    finally:
        switch.jobs.delete(job.job)
    assert errs == [None] * n, errs
    exact = np.sum([x.astype(np.int64) for x in ints], axis=0)
    fexact = np.sum([x.astype(np.float64) for x in floats], axis=0)
    peak = np.max([np.abs(x).reshape(-1, k).max(1) for x in floats], axis=0)
    bound = np.repeat(sum_error_bound(peak.astype(np.float64), n), k) + np.abs(fexact) * 2e-7
    retx = sum(s.retransmissions for _, _, s in res)
    sent = sum(s.packets_sent for _, _, s in res)
    assert counters["simulated_drops_ingress"] + counters["simulated_drops_egress"] > 0
    assert 0 < retx < sent
    for out, fout, _ in res:
        assert np.array_equal(out, exact)
        assert (np.abs(fout.astype(np.float64) - fexact) <= bound).all()


def test_jobs_of_different_sizes_side_by_side(rng, switch):
    """A job of 64 and one of 2 048 values per block at once on one switch, on their own
    ports and slots: each gets its own exact sums."""
    jobs = {
        64: switch.create_job(
            2, 8, 7, ports=[1, 2], encoding="lanes", block_values=64, round_mode="every_rank"
        ),
        2048: switch.create_job(
            2, 8, 8, ports=[3, 4], encoding="packed", block_values=2048, round_mode="every_rank"
        ),
    }
    xs = {k: block_sparse(rng, 2, 10 * 2048, k, 0.7, np.int32) for k in jobs}
    out: dict[int, tuple] = {}
    threads = [
        threading.Thread(
            target=lambda k=k: out.__setitem__(
                k, run_job(switch, jobs[k], lambda w, r, k=k: w.allreduce(xs[k][r]))
            )
        )
        for k in jobs
    ]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
    finally:
        for job in jobs.values():
            switch.jobs.delete(job.job)
    for k in jobs:
        res, errs = out[k]
        assert errs == [None, None], (k, errs)
        exact = np.sum([x.astype(np.int64) for x in xs[k]], axis=0)
        assert all(np.array_equal(r, exact) for r in res), k


@pytest.mark.parametrize("k", [256, 2048])
def test_wide_blocks_pace_like_narrow_ones(switch, k):
    """Jobs of K values per block in virtual time, 4 ranks starting 50 ms apart: no
    spurious retransmission without loss; at 10 % loss each way every sum is still the
    lossless one, the timer stays near the round time, and each call's block count is the
    tensor's in blocks of K."""
    tensors = pacing_job(4, 128, 0.25, calls=2, k=k)
    start = [0.0, 0.05, 0.1, 0.15]
    clean = simulate(
        switch, tensors, slots=32, pps=16_000, start=start, block_values=k, round_mode="every_rank"
    )
    sent_, retx = clean.totals()
    assert retx <= 0.01 * sent_, (retx, sent_)
    lossy = simulate(
        switch,
        tensors,
        slots=32,
        pps=16_000,
        loss=0.1,
        seed=3,
        block_values=k,
        round_mode="every_rank",
    )
    assert lossy.counters["simulated_drops_ingress"] > 0
    prm = EngineParams()
    rto_clean = max(r.rto(prm.timeout, prm.max_timeout) for r in clean.rtt)
    rto_lossy = max(r.rto(prm.timeout, prm.max_timeout) for r in lossy.rtt)
    assert rto_lossy <= 2 * rto_clean, (rto_lossy, rto_clean)
    for r in range(4):
        for c in (1, 2):
            # an announce per slot the call uses, a round per non-zero block
            assert clean.calls[r][c].stats.rounds == slots_for_call(128, 32, block_values=k) + 32
            np.testing.assert_allclose(lossy.sums[r][c], clean.sums[r][c])
            exact = np.sum([tensors[q][c].astype(np.float64) for q in range(4)], axis=0)
            np.testing.assert_allclose(clean.sums[r][c], exact, rtol=1e-5, atol=1e-6)
