"""Every float32 sum the Worker returns is the section-10 sum, bit for bit.

The bound check of test_worker_loopback allows any result within N·2^(E−1)/⌊M/N⌋ of the
exact sum; a stale block, a result stored in the wrong slot's block, a window/round
mix-up or a lost update in a block with a large exponent could hide inside it. Here the
result must equal what section 10 defines -- per block the largest exponent over ranks,
each rank's rint(x·⌊M/N⌋/2^E), the integer sum, scaled back and rounded to float32 --
computed here with numpy from the protocol text alone. The gradients are shaped like the
click example's (examples/clicks_model.py): a dense MLP part, then an embedding table whose
untouched rows are zero, rows of 32 values (two per block), large and tiny values in one
block, pre-divided by N as DDP does; several calls in a row, any slot count, window and
block size (a job's values per block: 64 holds two rows, 2 048 sixty-four), with and
without packet loss.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hostlib import Worker
from p4net.harness import SwitchSession

from hostlib_helpers import job_transport

LEVEL_M = (1 << 31) - 1


def section10_sum(xs: list[np.ndarray], lanes: int = 64) -> np.ndarray:
    """The protocol's float32 sum of the ranks' tensors (docs/protocol.md section 10) in a
    job of `lanes` values per block."""
    n = len(xs)
    size = xs[0].size
    pad = -size % lanes
    blocks = [np.pad(x.astype(np.float64), (0, pad)).reshape(-1, lanes) for x in xs]
    top = np.max([np.abs(b).max(axis=1) for b in blocks], axis=0)
    frac, k = np.frexp(top)
    exponent = np.maximum(np.where(frac == 0, -128, k - (frac == 0.5)), -128)[:, None]
    level = float(LEVEL_M // n)
    q = sum(np.rint(np.ldexp(b * level, -exponent)).astype(np.int64) for b in blocks)
    return (np.ldexp(q.astype(np.float64), exponent) / level).astype(np.float32).ravel()[:size]


def click_gradients(seed: int, n: int, rows: int, touched: int) -> list[np.ndarray]:
    """One step's gradients of n ranks: an MLP part (dense) and an embedding table of
    `rows` rows × 32 whose rows outside each rank's batch are zero; popular rows are shared
    by ranks (a power law), values spread over six decades within a block."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        dense = rng.standard_normal(300) * 10.0 ** rng.uniform(-4, -1, 300)
        table = np.zeros((rows, 32))
        ids = np.unique((rng.zipf(1.3, touched) - 1) % rows)
        table[ids] = rng.standard_normal((ids.size, 32)) * 10.0 ** rng.uniform(
            -8, -2, (ids.size, 32)
        )
        grad = np.concatenate([dense, table.ravel()]).astype(np.float32)
        out.append(grad / np.float32(n))  # DDP divides before the SUM
    return out


def allreduce_all(session: SwitchSession, job, xs_per_call, **worker_kw) -> list[list]:
    """Each rank's Worker reduces every tensor of `xs_per_call` in order, in its thread."""
    n = len(xs_per_call[0])
    descriptors = session.descriptors(job)
    results: list[list] = [[] for _ in range(n)]
    errors: list[BaseException] = []

    def body(r: int) -> None:
        try:
            port = job.workers[r].port
            with Worker(
                descriptors[r],
                transport=job_transport(session, port, job.block_values),
                **worker_kw,
            ) as w:
                for xs in xs_per_call:
                    results[r].append(w.allreduce(xs[r]))
        except BaseException as e:  # re-raised in the test thread
            errors.append(e)

    threads = [threading.Thread(target=body, args=(r,)) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    if errors:
        raise errors[0]
    return results


@pytest.fixture(scope="module")
def switch():
    with SwitchSession.inprocess() as sw:
        yield sw


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    n=st.sampled_from([2, 3, 4]),
    slots=st.sampled_from([1, 4, 8, 16, 64]),
    window=st.sampled_from([None, 1, 3, 16, 32]),
    rows=st.integers(40, 1500),
    touched=st.integers(1, 200),
    calls=st.integers(1, 3),
    loss=st.sampled_from([0.0, 0.0, 0.1]),
    seed=st.integers(0, 2**32 - 1),
    block_values=st.sampled_from([64, 64, 256, 2048]),
)
def test_float32_sums_are_the_section_10_sums(
    n, slots, window, rows, touched, calls, loss, seed, block_values, switch
):
    xs_per_call = [click_gradients(seed + c, n, rows, touched) for c in range(calls)]
    job = switch.create_job(n, slots, 7, block_values=block_values)
    try:
        if loss:
            switch.set_loss(job.job, ingress=loss, egress=loss, seed=seed % 1000 + 1)
        kw = {"window": window} if window else {}
        results = allreduce_all(switch, job, xs_per_call, timeout=0.005, deadline=60.0, **kw)
    finally:
        switch.jobs.delete(job.job)
    for c, xs in enumerate(xs_per_call):
        expected = section10_sum(xs, block_values)
        exact = np.sum([x.astype(np.float64) for x in xs], axis=0)
        for r in range(n):
            got = results[r][c]
            wrong = np.flatnonzero(got != expected)
            assert wrong.size == 0, (
                f"call {c} rank {r}: {wrong.size} elements differ from section 10's sum, "
                f"first {wrong[0]}: {got[wrong[0]]!r} != {expected[wrong[0]]!r} "
                f"(exact {exact[wrong[0]]!r})"
            )
        assert (expected[exact == 0] == 0).all()  # untouched rows stay exact zeros
