"""Sparsity patterns per rank for the silent-rounds tests (the model's and the real
program's), and the packet budget a rank keeps to (docs/hostlib.md, "Silent rounds")."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from hostlib.engine import EngineStats

PATTERNS = ("independent", "shared", "all_zero_ranks", "one_rank", "last_block")


def block_mask(
    rng: np.random.Generator, pattern: str, rank: int, n: int, shared: np.ndarray, density: float
) -> np.ndarray:
    """Which of a rank's blocks are non-zero under `pattern` (PATTERNS, or "dense": every
    block), given the blocks non-zero on every rank of a shared pattern (`shared`) and the
    density an independent one draws at."""
    nblocks = shared.size
    if pattern == "independent":
        return rng.random(nblocks) < density
    if pattern == "shared":
        return shared.copy()
    if pattern == "all_zero_ranks":
        return shared & (rank % 2 == 0)
    if pattern == "one_rank":
        return shared if rank == n - 1 else np.zeros(nblocks, bool)
    if pattern == "last_block":
        return np.arange(nblocks) == nblocks - 1
    if pattern == "dense":
        return np.ones(nblocks, bool)
    raise ValueError(f"no sparsity pattern {pattern!r}")


def tensors(pattern: str, n: int, nblocks: int, k: int, seed: int) -> list[np.ndarray]:
    """One int32 tensor of `nblocks` blocks of `k` values per rank: which blocks are
    non-zero follows `pattern` (independent per rank, the same on every rank, some ranks
    all zero, a single rank with any, only the last block)."""
    rng = np.random.default_rng(seed)
    density = rng.uniform(0.05, 0.6)
    shared = rng.random(nblocks) < density
    masks = [block_mask(rng, pattern, r, n, shared, density) for r in range(n)]
    out = []
    for m in masks:
        x = rng.integers(-1000, 1000, (nblocks, k)).astype(np.int32)
        x[x == 0] = 1
        x[~m] = 0
        out.append(x.reshape(-1))
    return out


cases = st.tuples(
    st.sampled_from(PATTERNS),
    st.integers(2, 4),  # ranks
    st.integers(1, 24),  # blocks
    st.integers(1, 4),  # slots
    st.integers(0, 2**31),  # seed
)


def nonzero_blocks(x: np.ndarray, k: int) -> int:
    return int(x.reshape(-1, k).any(axis=1).sum())


def check_budget(
    st_: EngineStats, nonzero: int, slots_used: int, closing: int, lossless: bool
) -> None:
    """Without loss a rank sends exactly one ANNOUNCE per slot used, one closing SKIP per
    slot used whose last round some rank sat out (`closing`: p4reduce.job.closing_rounds) and
    one DATA per non-zero block; under loss, besides those, only resends, queries, rewind
    requests, and per rewind its ANNOUNCE, the DATA it sends again and a closing packet
    again."""
    counts = st_.sent_counts()
    if lossless:
        want = {"ANNOUNCE": slots_used, "DATA": nonzero, "SKIP": closing}
        assert counts == {k: v for k, v in want.items() if v}, counts
        assert st_.retransmissions == 0 and st_.rewind_requests == 0
        return
    first = st_.packets_sent - st_.retransmissions - st_.queries - st_.rewind_requests
    assert first <= nonzero + 2 * slots_used + st_.rewinds * (2 + nonzero), counts
