"""Worker API end to end in one process: N Worker threads <-> the reflector (switch model).

No sockets: LoopbackFabric hands frames straight to ReflectorCore. This exercises the whole
protocol (engine + numerics + reflector) for several ranks, sparsity, dtypes, loss.
"""
from __future__ import annotations

import threading
from typing import Callable

import numpy as np
import pytest

from hostlib import Worker
from hostlib.reflector import LoopbackFabric, Loss, ReflectorCore
from hostlib_helpers import descriptor


def run_ranks(n: int, fn: Callable[[Worker, int], object], *, slots: int = 8,
              loss: Loss | None = None, timeout: float = 0.05, deadline: float = 20.0):
    core = ReflectorCore([descriptor(r, n, slots) for r in range(n)], loss)
    fabric = LoopbackFabric(core)
    results: list[object] = [None] * n
    errors: list[BaseException | None] = [None] * n

    def body(r: int) -> None:
        try:
            with Worker(descriptor(r, n, slots), transport=fabric.port(r), timeout=timeout,
                        deadline=deadline) as w:
                results[r] = fn(w, r)
        except BaseException as e:      # re-raised in the test thread
            errors[r] = e

    threads = [threading.Thread(target=body, args=(r,)) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results, errors, core


def sparse_ints(rng, n, shape, density=0.4):
    xs = []
    for _ in range(n):
        x = rng.integers(-10**6, 10**6, size=shape).astype(np.int32)
        blocks = -(-x.size // 64)
        keep = np.repeat(rng.random(blocks) < density, 64)[:x.size]
        x.reshape(-1)[~keep] = 0
        xs.append(x)
    return xs


@pytest.mark.parametrize("n", [1, 2, 3])
def test_int32_sum_exact_and_one_packet_per_round(n, rng):
    xs = sparse_ints(rng, n, (45, 37))
    res, errs, core = run_ranks(n, lambda w, r: (w.allreduce(xs[r]), w.stats), timeout=5.0)
    assert errs == [None] * n
    exact = np.sum([x.astype(np.int64) for x in xs], axis=0)
    blocks = -(-xs[0].size // 64)
    nz_any = np.zeros(blocks, bool)
    for x in xs:
        padded = np.zeros(blocks * 64, np.int32)
        padded[:x.size] = x.reshape(-1)
        nz_any |= padded.reshape(blocks, 64).any(axis=1)
    rounds = min(8, blocks) + int(nz_any.sum())          # announce + one per non-zero block
    for out, stats in res:
        assert out.dtype == np.int32 and out.shape == xs[0].shape
        assert (out == exact).all()
        assert stats.retransmissions == 0
        assert stats.last_packets_sent == rounds, "every rank sends one packet per round"
    assert core.counters.rounds_completed == rounds


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [2, 3])
def test_float_sum_within_bound_and_zeros_stay_zero(n, dtype, rng):
    xs = []
    for _ in range(n):
        x = (rng.standard_normal(3000) * 10.0 ** rng.integers(-6, 7, 3000)).astype(dtype)
        x[rng.random(3000) < 0.5] = 0
        x[640:1280] = 0                                  # 10 blocks zero in every rank
        xs.append(x)
    res, errs, _ = run_ranks(n, lambda w, r: w.allreduce(xs[r]))
    assert errs == [None] * n
    exact = np.sum([x.astype(np.float64) for x in xs], axis=0)
    blockmax = np.max([np.abs(np.pad(x, (0, 3008 - 3000))).reshape(-1, 64).max(1)
                       for x in xs], axis=0).astype(np.float64)
    bound = np.repeat(blockmax * n ** 2 / (2 ** 31 - n), 64)[:3000]
    eps = np.finfo(dtype).eps
    for out in res:
        assert out.dtype == dtype
        assert (out[640:1280] == 0).all()
        assert (np.abs(out - exact) <= bound + np.abs(exact) * eps).all()
        assert np.array_equal(out, res[0])               # every rank gets the same bits


def test_mean_non_contiguous_and_in_place(rng):
    base = [rng.standard_normal((40, 90)).astype(np.float32) for _ in range(2)]
    views = [b[::2, 1::3] for b in base]                 # non-contiguous
    ints = [rng.integers(-50, 50, (7, 11)).astype(np.int32) for _ in range(2)]

    def fn(w, r):
        m = w.allreduce(views[r], op="mean")
        im = w.allreduce(ints[r], op="mean")
        before = base[r].copy()
        w.allreduce_(views[r])                           # writes through the view
        return m, im, before

    res, errs, _ = run_ranks(2, fn)
    assert errs == [None, None]
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


def test_nan_refused_before_anything_is_sent():
    x = np.ones(500, np.float32)
    x[321] = np.nan

    def fn(w, r):
        with pytest.raises(ValueError, match="NaN"):
            w.allreduce(x)
        return w.stats.packets_sent

    res, errs, core = run_ranks(1, fn)
    assert errs == [None] and res == [0]
    assert core.counters.aggregated == 0


def test_overflow_raises_naming_block_and_next_allreduce_still_works():
    big = np.zeros(64 * 6, np.int32)
    big[64 * 4 + 3] = 2 ** 30 + 5                        # 2 ranks: 2^31 + 10 overflows

    def fn(w, r):
        with pytest.raises(OverflowError, match=r"block 4 \(elements 256\.\.319\)"):
            w.allreduce(big)
        return w.allreduce(np.arange(64 * 6, dtype=np.int32))

    res, errs, core = run_ranks(2, fn)
    assert errs == [None, None]
    assert core.counters.overflows == 1
    for out in res:
        assert (out == 2 * np.arange(64 * 6)).all()


def test_slot_versions_continue_across_calls(rng):
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

    res, errs, _ = run_ranks(2, fn)
    assert errs == [None, None]
    for a, b, c in res:
        assert (a == 0).all()
        assert np.allclose(b, xs[0] + xs[1], atol=1e-6) and np.array_equal(b, c)


@pytest.mark.parametrize("n", [1, 3])
def test_loss_recovered_by_retransmission(n, rng):
    xs = sparse_ints(rng, n, 64 * 40, density=0.6)
    res, errs, core = run_ranks(n, lambda w, r: (w.allreduce(xs[r]), w.stats),
                                loss=Loss(ingress=0.2, egress=0.2, seed=5), timeout=0.002)
    assert errs == [None] * n
    exact = np.sum([x.astype(np.int64) for x in xs], axis=0)
    for out, stats in res:
        assert (out == exact).all()
    assert core.counters.simulated_drops_ingress > 0
    assert core.counters.simulated_drops_egress > 0
    assert sum(s.retransmissions for _, s in res) > 0


def test_unanswered_job_times_out_and_worker_refuses_more():
    """Rank 1 never shows up: rank 0's slots stall; TimeoutError names them."""
    core = ReflectorCore([descriptor(r, 2, 4) for r in range(2)])
    fabric = LoopbackFabric(core)
    with Worker(descriptor(0, 2, 4), transport=fabric.port(0), timeout=0.002,
                deadline=0.3) as w:
        with pytest.raises(TimeoutError, match=r"4 of 4 slots stalled: slot 0 round 0 "
                                               r"\(announce"):
            w.allreduce(np.ones(1000, np.float32))
        assert w.stats.retransmissions > 0
        with pytest.raises(RuntimeError, match="timed out"):
            w.allreduce(np.ones(10, np.float32))


def test_dtype_and_op_checks():
    core = ReflectorCore([descriptor(0, 1)])
    with Worker(descriptor(0, 1), transport=LoopbackFabric(core).port(0)) as w:
        with pytest.raises(TypeError):
            w.allreduce(np.ones(4, np.int16))
        with pytest.raises(ValueError, match="op"):
            w.allreduce(np.ones(4, np.float32), op="max")
        with pytest.raises(TypeError, match="truncate"):
            w.allreduce_(np.ones(4, np.int32), op="mean")
        assert w.allreduce(np.float32(3.5)).shape == ()     # 0-d works
        assert w.allreduce(np.zeros(0, np.float32)).shape == (0,)
