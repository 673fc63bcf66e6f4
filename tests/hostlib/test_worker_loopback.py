"""Worker API end to end in one process: N Worker threads <-> the real P4 program.

No sockets: the p4reduce program (p4src/build) runs on an in-process softswitch programmed
by the controller's JobManager (p4net.harness). This exercises the whole
protocol (engine + numerics + the switch's P4) for several ranks, sparsity, dtypes, loss.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from hostlib import Worker
from hostlib import protocol as p
from hostlib.engine import FingerprintMismatch, SwitchStateLost
from p4net.harness import SwitchSession


@pytest.fixture(scope="module")
def switch():
    with SwitchSession.inprocess() as sw:
        yield sw


@pytest.fixture
def job_of(switch):
    """Creates jobs on the module's switch and deletes them after the test."""
    made = []

    def make(n: int, slots: int = 8, job: int = 7, encoding: str = "packed", int32_halves=None):
        j = switch.create_job(
            n, slots, job, encoding=encoding, int32_halves=int32_halves, round_mode="every_rank"
        )
        made.append(j.job)
        return j

    yield make
    for job in made:
        if job in switch.jobs.table.jobs:
            switch.jobs.delete(job)


def run_ranks(
    switch,
    job,
    fn: Callable[[Worker, int], object],
    *,
    timeout: float = 0.05,
    deadline: float = 20.0,
    ranks=None,
    descriptors=None,
    **worker_kw,
):
    descriptors = descriptors or switch.descriptors(job)
    ranks = list(range(len(descriptors))) if ranks is None else ranks
    results: list[object] = [None] * len(descriptors)
    errors: list[BaseException | None] = [None] * len(descriptors)

    def body(r: int) -> None:
        try:
            with Worker(
                descriptors[r],
                transport=switch.transport(job.workers[r].port),
                timeout=timeout,
                deadline=deadline,
                **worker_kw,
            ) as w:
                results[r] = fn(w, r)
        except BaseException as e:  # re-raised in the test thread
            errors[r] = e

    threads = [threading.Thread(target=body, args=(r,)) for r in ranks]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return results, errors


def sparse_ints(rng, n, shape, density=0.4):
    xs = []
    for _ in range(n):
        x = rng.integers(-(10**6), 10**6, size=shape).astype(np.int32)
        blocks = -(-x.size // 64)
        keep = np.repeat(rng.random(blocks) < density, 64)[: x.size]
        x.reshape(-1)[~keep] = 0
        xs.append(x)
    return xs


@pytest.mark.parametrize("encoding", ["lanes", "packed"])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_int32_sum_exact_and_one_packet_per_round(n, encoding, rng, switch, job_of):
    """lanes: one block per 64 values; packed: int32 travels as 16-bit halves, two blocks
    (high halves, low halves) per 64 values, each sent only if non-zero."""
    xs = sparse_ints(rng, n, (45, 37))
    job = job_of(n, encoding=encoding)
    res, errs = run_ranks(switch, job, lambda w, r: (w.allreduce(xs[r]), w.stats), timeout=5.0)
    assert errs == [None] * n, errs
    exact = np.sum([x.astype(np.int64) for x in xs], axis=0)
    blocks = -(-xs[0].size // 64)
    nz_any = np.zeros(blocks * (2 if encoding == "packed" else 1), bool)
    for x in xs:
        padded = np.zeros(blocks * 64, np.int64)
        padded[: x.size] = x.reshape(-1)
        rows = padded.reshape(blocks, 64)
        if encoding == "packed":
            rows = np.stack([rows // 65536, rows % 65536], axis=1).reshape(2 * blocks, 64)
        nz_any |= rows.any(axis=1)
    rounds = min(8, nz_any.size) + int(nz_any.sum())  # announce + one per non-zero block
    for out, stats in res:
        assert out.dtype == np.int32 and out.shape == xs[0].shape
        assert (out == exact).all()
        assert stats.retransmissions == 0
        assert stats.last_packets_sent == rounds, "every rank sends one packet per round"
    assert switch.stats(job)["rounds_completed"] == rounds


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [2, 3])
def test_float_sum_within_bound_and_zeros_stay_zero(n, dtype, rng, switch, job_of):
    xs = []
    for _ in range(n):
        x = (rng.standard_normal(3000) * 10.0 ** rng.integers(-6, 7, 3000)).astype(dtype)
        x[rng.random(3000) < 0.5] = 0
        x[640:1280] = 0  # 10 blocks zero in every rank
        xs.append(x)
    res, errs = run_ranks(switch, job_of(n), lambda w, r: w.allreduce(xs[r]))
    assert errs == [None] * n, errs
    exact = np.sum([x.astype(np.float64) for x in xs], axis=0)
    blockmax = np.max(
        [np.abs(np.pad(x, (0, 3008 - 3000))).reshape(-1, 64).max(1) for x in xs], axis=0
    ).astype(np.float64)
    bound = np.repeat(blockmax * n**2 / (2**31 - n), 64)[:3000]
    eps = np.finfo(dtype).eps
    for out in res:
        assert out.dtype == dtype
        assert (out[640:1280] == 0).all()
        assert (np.abs(out - exact) <= bound + np.abs(exact) * eps).all()
        assert np.array_equal(out, res[0])  # every rank gets the same bits


def test_mean_non_contiguous_and_in_place(rng, switch, job_of):
    base = [rng.standard_normal((40, 90)).astype(np.float32) for _ in range(2)]
    views = [b[::2, 1::3] for b in base]  # non-contiguous
    ints = [rng.integers(-50, 50, (7, 11)).astype(np.int32) for _ in range(2)]

    def fn(w, r):
        m = w.allreduce(views[r], op="mean")
        im = w.allreduce(ints[r], op="mean")
        before = base[r].copy()
        w.allreduce_(views[r])  # writes through the view
        return m, im, before

    res, errs = run_ranks(switch, job_of(2), fn)
    assert errs == [None, None], errs
    for r, (m, im, before) in enumerate(res):
        orig = [res[k][2][::2, 1::3].astype(np.float64) for k in range(2)]
        s = orig[0] + orig[1]
        assert m.shape == (20, 30) and m.dtype == np.float32
        assert np.allclose(m, s / 2, rtol=0, atol=1e-6)
        assert im.dtype == np.float64 and np.array_equal(im, (ints[0] + ints[1]) / 2)
        assert np.allclose(base[r][::2, 1::3], s, atol=1e-6)
        mask = np.ones(base[r].shape, bool)
        mask[::2, 1::3] = False
        assert np.array_equal(base[r][mask], before[mask]), "only the view was written"


@pytest.mark.parametrize(
    "bad, what", [(np.nan, "NaN or Inf"), (-np.inf, "NaN or Inf"), (2.0**128, "exceeds 2\\^127")]
)
@pytest.mark.parametrize("encoding", ["lanes", "packed"])
def test_nan_on_one_rank_fails_every_rank_and_the_job_goes_on(
    bad, what, encoding, rng, switch, job_of
):
    """A rank whose tensor the protocol cannot carry still takes part in the call (its
    length, a NONFINITE fingerprint, no values): every rank raises at once, and all stay in
    step. Before, that rank raised alone; the others waited for it, and its *next* tensor
    of the same length completed their current call -- a wrong sum on every rank."""
    job = job_of(3, slots=4, encoding=encoding)
    first = [rng.standard_normal(64 * 9) for _ in range(3)]
    first[1][64 * 7 + 5] = bad
    second = [rng.standard_normal(64 * 9) for _ in range(3)]

    def fn(w, r):
        with pytest.raises(ValueError) as info:
            w.allreduce(first[r])
        sent = w.stats.packets_sent
        return str(info.value), type(info.value), sent, w.allreduce(second[r])

    res, errs = run_ranks(switch, job, fn, timeout=0.01, deadline=5.0)
    assert errs == [None, None, None], errs
    message, kind, sent, _ = res[1]
    assert re.search(what, message) and "7" in message and kind is ValueError
    assert sent <= 4, "the refusing rank announced (one per slot at most), sent no values"
    for r in (0, 2):
        assert res[r][1] is FingerprintMismatch and "NaN or Inf" in res[r][0], res[r][0]
    exact = sum(second)
    for _, _, _, after in res:
        assert np.allclose(after, exact, rtol=0, atol=1e-6 * np.abs(exact).max())


def test_nan_on_every_rank_raises_on_every_rank(switch, job_of):
    """All ranks refuse: their fingerprints agree (nothing for the switch to flag), yet each
    raises its own error and the next call is right."""
    job = job_of(2)

    def fn(w, r):
        x = np.ones(100, np.float32)
        x[10 + r] = np.nan
        with pytest.raises(ValueError, match=f"NaN or Inf .*first at flat index {10 + r}"):
            w.allreduce(x)
        return w.allreduce(np.full(100, r + 1.0, np.float32))

    res, errs = run_ranks(switch, job, fn, timeout=0.01, deadline=5.0)
    assert errs == [None, None], errs
    for out in res:
        assert (out == 3.0).all()


@pytest.mark.parametrize(
    "encoding,int32_halves", [("lanes", None), ("packed", None), ("lanes", True)]
)
def test_overflow_raises_naming_block_and_next_allreduce_still_works(
    encoding, int32_halves, switch, job_of
):
    """lanes: the switch flags the round; packed, and lanes with int32_halves (what a
    Tofino job does: its switch cannot flag an overflow): the worker sees the exact sum of
    the halves, out of int32 range."""
    big = np.zeros(64 * 6, np.int32)
    big[64 * 4 + 3] = 2**30 + 5  # 2 ranks: 2^31 + 10 overflows

    def fn(w, r):
        with pytest.raises(OverflowError, match=r"block 4 \(elements 256\.\.319\)"):
            w.allreduce(big)
        return w.allreduce(np.arange(64 * 6, dtype=np.int32))

    job = job_of(2, encoding=encoding, int32_halves=int32_halves)
    assert job.int32_halves == (encoding == "packed" or bool(int32_halves))
    res, errs = run_ranks(switch, job, fn)
    assert errs == [None, None], errs
    assert switch.stats(job)["overflows"] == (0 if job.int32_halves else 1)
    for out in res:
        assert (out == 2 * np.arange(64 * 6)).all()


def test_slot_versions_continue_across_calls(rng, switch, job_of):
    """An all-zero tensor ends every slot after its announce round (version 0). If the
    next call announced in version 0 again, the switch would answer with the cached
    'end of stream' and the sum would silently be zero."""
    zeros = np.zeros(64 * 8, np.float32)
    xs = [rng.standard_normal(64 * 8).astype(np.float32) for _ in range(2)]

    def fn(w, r):
        a = w.allreduce(zeros)
        b = w.allreduce(xs[r])
        c = w.allreduce(xs[r])
        return a, b, c

    res, errs = run_ranks(switch, job_of(2), fn)
    assert errs == [None, None], errs
    for a, b, c in res:
        assert (a == 0).all()
        assert np.allclose(b, xs[0] + xs[1], atol=1e-6) and np.array_equal(b, c)


@pytest.mark.parametrize("n", [1, 3])
def test_loss_recovered_by_retransmission(n, rng, switch, job_of):
    xs = sparse_ints(rng, n, 64 * 40, density=0.6)
    job = job_of(n)
    switch.set_loss(job.job, ingress=0.2, egress=0.2, seed=5)
    res, errs = run_ranks(switch, job, lambda w, r: (w.allreduce(xs[r]), w.stats), timeout=0.002)
    assert errs == [None] * n, errs
    exact = np.sum([x.astype(np.int64) for x in xs], axis=0)
    for out, _stats in res:
        assert (out == exact).all()
    stats = switch.stats(job)
    assert stats["simulated_drops_ingress"] > 0
    assert stats["simulated_drops_egress"] > 0
    assert sum(s.retransmissions for _, s in res) > 0


def test_unanswered_job_times_out_naming_the_missing_rank(switch, job_of):
    """Rank 1 never shows up: rank 0's slots make no progress; the TimeoutError says the
    switch waits for rank 1 (from its STATUS replies), and the Worker refuses more. A
    short first timer: several resends, and so STATUS replies, come before the deadline
    even on a loaded core (with the default 0.2 s one a rank descheduled for a while
    resent once, and its reply was not yet read when the deadline passed)."""
    job = job_of(2, slots=4)
    d = switch.descriptors(job)
    with Worker(
        d[0],
        transport=switch.transport(job.workers[0].port),
        timeout=0.002,
        initial_timeout=0.01,
        deadline=0.5,
    ) as w:
        with pytest.raises(
            TimeoutError,
            match=r"4 of 4 slots made no progress .* "
            r"not heard from rank\(s\) \[1\]",
        ):
            w.allreduce(np.ones(1000, np.float32))
        assert w.stats.retransmissions > 0
        with pytest.raises(RuntimeError, match="timed out"):
            w.allreduce(np.ones(10, np.float32))


def test_timeout_counts_from_the_last_progress_not_the_call(rng, switch, job_of):
    """Heavy loss makes the call last far longer than `deadline`; as long as every slot
    keeps completing rounds it is not a stall. (The call takes ~5 s; a deadline of 1.5 s
    leaves room for a rank thread descheduled that long on a loaded machine.)"""
    deadline = 1.5
    xs = sparse_ints(rng, 2, 64 * 1000, density=1.0)
    job = job_of(2, slots=2)
    switch.set_loss(job.job, ingress=0.1, egress=0.1, seed=3)
    res, errs = run_ranks(
        switch,
        job,
        lambda w, r: (w.allreduce(xs[r]), w.stats.last_time),
        timeout=0.002,
        max_timeout=0.02,
        deadline=deadline,
    )
    assert errs == [None, None], errs
    assert all((out == xs[0] + xs[1]).all() for out, _ in res)
    assert max(t for _, t in res) > deadline, "the test must outlast one deadline"


def test_dtype_and_op_checks(switch, job_of):
    job = job_of(1)
    with Worker(switch.descriptors(job)[0], transport=switch.transport(1)) as w:
        with pytest.raises(TypeError):
            w.allreduce(np.ones(4, np.int16))
        with pytest.raises(ValueError, match="op"):
            w.allreduce(np.ones(4, np.float32), op="max")
        with pytest.raises(TypeError, match="truncate"):
            w.allreduce_(np.ones(4, np.int32), op="mean")
        assert w.allreduce(np.float32(3.5)).shape == ()  # 0-d works
        assert w.allreduce(np.zeros(0, np.float32)).shape == (0,)


# -- ranks that disagree: the switch's fingerprint range ---------------------------------


@pytest.mark.parametrize(
    "shapes, dtypes, what",
    [
        ((1000, 1000), (np.float32, np.int32), "dtype float32 vs int32|dtype int32 vs float32"),
        ((1000, 1001), (np.float32, np.float32), r"length 1000 vs 1001 elements"),
        ((640, 64 * 30), (np.int32, np.int32), r"length 640 vs 1920 elements"),
        ((64 * 30, 1), (np.float64, np.float32), r"dtype float32 vs float64.*length 1 vs 1920"),
    ],
)
def test_ranks_that_disagree_all_raise_the_same_error(shapes, dtypes, what, switch, job_of):
    """float32 on one rank and int32 on another, lengths that differ within one block count
    or across many: every rank raises the same ValueError naming the difference, at once,
    and the job goes on working afterwards."""
    job = job_of(2, slots=8)
    xs = [np.ones(shapes[r], dtypes[r]) for r in range(2)]

    def fn(w, r):
        with pytest.raises(FingerprintMismatch) as info:
            w.allreduce(xs[r])
        after = w.allreduce(np.full(100, r + 1, np.int32))
        return str(info.value), after

    res, errs = run_ranks(switch, job, fn, timeout=0.01, deadline=5.0)
    assert errs == [None, None], errs
    assert res[0][0] == res[1][0], "every rank raises the same message"
    assert isinstance(FingerprintMismatch("x"), ValueError)
    assert re.search(what, res[0][0]), res[0][0]
    for _, after in res:
        assert (after == 3).all()


# Each rank's tensor in a call that disagrees: (dtype, elements); "nonfinite" is a float32
# tensor holding a NaN (the rank announces the NONFINITE code, section 6).
ENCODINGS = {"packed": ("packed", None), "lanes": ("lanes", None), "halves": ("lanes", True)}


def _disagreeing(dtype: str, elements: int) -> np.ndarray:
    if dtype == "nonfinite":
        x = np.ones(elements, np.float32)
        x[elements // 2] = np.nan
        return x
    return np.ones(elements, np.dtype(dtype))


def _fingerprint(dtype: str, elements: int) -> int:
    if dtype == "nonfinite":
        return p.nonfinite_fingerprint(elements)
    return p.fingerprint(np.dtype(dtype), elements)


def _mismatch_then_exact(switch, n, slots, encoding, specs, later, seed=0):
    """Call 0: rank r reduces specs[r] (they disagree); calls 1..: every rank reduces an
    int32 tensor of `later[c]` elements. Returns per rank (call 0's error, later sums),
    the expected sums and the job's deadline."""
    enc, halves = ENCODINGS[encoding]
    job = switch.create_job(n, slots, 7, encoding=enc, int32_halves=halves, round_mode="every_rank")
    rng = np.random.default_rng(seed)
    goods = [[rng.integers(-1000, 1000, size).astype(np.int32) for _ in range(n)] for size in later]
    # "at once" is judged against half of it: a mismatch must not wait for the deadline.
    # 10 s, not 5: at load 12 on two cores a call of 4 rank threads and 58 slots took 2.5 s
    deadline = 10.0

    def fn(w, r):
        t0 = time.monotonic()
        try:
            w.allreduce(_disagreeing(*specs[r]))
            first: BaseException | None = None
        except ValueError as e:
            first = e
        took = time.monotonic() - t0
        return first, took, [w.allreduce(call[r]) for call in goods]

    try:
        res, errs = run_ranks(switch, job, fn, timeout=0.01, deadline=deadline)
    finally:
        switch.jobs.delete(job.job)
    assert errs == [None] * n, errs
    return res, [np.sum(call, axis=0, dtype=np.int64) for call in goods], deadline


def _assert_mismatch_then_exact(res, exact, specs, deadline) -> None:
    messages = set()
    for r, (first, took, sums) in enumerate(res):
        assert isinstance(first, ValueError), f"rank {r} {specs[r]}: no error in call 0"
        assert took < deadline / 2, f"rank {r} waited {took:.1f}s for call 0: not at once"
        if specs[r][0] != "nonfinite":
            assert isinstance(first, FingerprintMismatch), (r, first)
            messages.add(str(first))
        for c, (got, want) in enumerate(zip(sums, exact)):
            wrong = int(np.count_nonzero(got != want))
            assert wrong == 0, f"rank {r} call {c + 1}: {wrong} of {want.size} elements wrong"
    assert len(messages) <= 1, f"ranks raised different messages: {messages}"


@pytest.mark.parametrize("encoding", ["packed", "lanes", "halves"])
@pytest.mark.parametrize(
    "slots, specs, later",
    [
        # a packed int32 rank has twice the blocks of its length (16-bit halves)
        (16, [("int32", 64), ("int32", 640)], [640, 640, 640]),
        (16, [("float32", 640), ("int32", 640)], [640, 640]),
        # the rank with the most blocks is neither the smallest nor the largest fingerprint
        (32, [("float32", 600), ("int32", 640), ("float32", 1000)], [640 * 3, 64]),
        (8, [("float32", 640), ("nonfinite", 64 * 30)], [64 * 30]),
    ],
)
def test_after_a_mismatch_every_later_call_is_exact(slots, specs, later, encoding, switch):
    """A call whose ranks disagree leaves every slot of the job in step on every rank,
    whoever had how many blocks in whichever encoding: each rank raises at once, and the
    next calls are exact on every slot. Before, the ranks announced on the slots of the
    largest fingerprint's length in lanes: in a packed job an int32 rank (two half-blocks
    per 64 values) or a middle rank with more blocks used slots the others never
    announced on, and from then on the ranks were a call apart there (wrong sums with no
    error, or a timeout)."""
    res, exact, deadline = _mismatch_then_exact(switch, len(specs), slots, encoding, specs, later)
    _assert_mismatch_then_exact(res, exact, specs, deadline)


_SPEC = st.tuples(
    st.sampled_from(["int32", "float32", "float64", "nonfinite"]),
    st.integers(0, 64 * 48),
).map(lambda s: (s[0], max(s[1], int(s[0] == "nonfinite"))))  # a NaN needs an element


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    specs=st.lists(_SPEC, min_size=2, max_size=8),
    slots=st.integers(1, 64),
    encoding=st.sampled_from(sorted(ENCODINGS)),
    later=st.lists(st.integers(1, 64 * 96), min_size=1, max_size=2),
    seed=st.integers(0, 2**16),
)
def test_mismatch_of_any_shapes_then_exact_calls(specs, slots, encoding, later, seed, switch):
    """Any (dtype, length) per rank, 2-8 ranks, 1-64 slots, every encoding: after a call
    the ranks disagree on, the next calls are exact on every rank (compared with numpy)."""
    assume(len({_fingerprint(*s) for s in specs}) > 1)
    res, exact, deadline = _mismatch_then_exact(
        switch, len(specs), slots, encoding, specs, later, seed
    )
    _assert_mismatch_then_exact(res, exact, specs, deadline)


# -- incarnations and lost switch state --------------------------------------------------


def test_old_incarnation_never_touches_a_recreated_job(rng, switch, job_of):
    """Job 7 is deleted while rank 0 of it still retransmits; job 7 is created again with
    the same addresses. The old rank's packets carry the old epoch: they are unadmitted,
    and the new job's sums are exact."""
    old = job_of(2, slots=4, job=7)
    old_d = switch.descriptors(old)
    stop = threading.Event()
    errors: list[BaseException] = []

    def stale_rank():
        with Worker(
            old_d[0], transport=switch.transport(old.workers[0].port), timeout=0.001, deadline=2.0
        ) as w:
            try:
                while not stop.is_set():
                    w.allreduce(np.full(64 * 8, 1000, np.int32))
            except TimeoutError as e:
                errors.append(e)

    t = threading.Thread(target=stale_rank)
    t.start()
    try:
        import time

        time.sleep(0.2)  # its rank 1 never comes: it retransmits
        switch.jobs.delete(7)
        new = job_of(2, slots=4, job=7)
        assert new.epoch != old.epoch
        xs = sparse_ints(rng, 2, 64 * 8, density=1.0)
        res, errs = run_ranks(switch, new, lambda w, r: [w.allreduce(xs[r]) for _ in range(5)])
        assert errs == [None, None], errs
        for outs in res:
            for out in outs:
                assert (out == xs[0] + xs[1]).all()
    finally:
        stop.set()
        t.join(10)
    assert errors, "the old incarnation's rank can only time out"
    from controlplane.stats import switch_stats

    assert switch_stats(switch.conn)["drops_unadmitted"] > 0


def test_a_job_restored_lost_fails_even_a_rank_with_no_result_at_once(switch, job_of):
    """The switch restarts before the job's first call and the job comes back lost
    (JobManager.reinstall_all, as the controller restores it): no rank has had a result,
    so no packet says CONTINUED, yet the first ANNOUNCE of each rank is answered
    STATE_LOST and both raise SwitchStateLost at once -- a rank in that position (no
    result anywhere) used to rebuild its slot and wait there."""
    job = job_of(2, slots=4)
    d = switch.descriptors(job)
    switch.lose_state()

    def fn(w, r):
        t0 = time.monotonic()
        with pytest.raises(SwitchStateLost, match="lost the state of job 7"):
            w.allreduce(np.arange(300, dtype=np.int32))
        return time.monotonic() - t0

    res, errs = run_ranks(switch, job, fn, timeout=0.005, deadline=10.0, descriptors=d)
    assert errs == [None, None], errs
    assert max(res) < 2.0, "fails at once, long before the 10 s deadline"
    assert switch.stats(job)["rounds_completed"] == 0


def test_switch_losing_state_fails_every_rank_at_once(switch, job_of):
    """The pipeline is pushed again (as after a switch restart) and the controller
    reinstalls the job: the slots' state is gone. The next packets of ranks that had
    results there carry CONTINUED; the switch answers STATE_LOST and every rank raises
    SwitchStateLost at once (not a timeout), then refuses further calls."""
    job = job_of(2, slots=4)
    d = switch.descriptors(job)
    ready = threading.Barrier(2)
    restarted = threading.Event()

    def fn(w, r):
        w.allreduce(np.arange(300, dtype=np.int32))
        ready.wait()
        if r == 0:
            switch.lose_state()
            restarted.set()
        restarted.wait()
        import time

        t0 = time.monotonic()
        with pytest.raises(SwitchStateLost, match="lost the state of job 7"):
            w.allreduce(np.arange(300, dtype=np.int32))
        took = time.monotonic() - t0
        with pytest.raises(RuntimeError, match="lost the state"):
            w.allreduce(np.arange(3, dtype=np.int32))
        return took

    res, errs = run_ranks(switch, job, fn, timeout=0.005, deadline=10.0, descriptors=d)
    assert errs == [None, None], errs
    assert max(res) < 2.0, "fails at once, long before the 10 s deadline"
    assert switch.stats(job)["state_lost"] >= 2
