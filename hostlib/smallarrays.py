"""Reductions and selections of a turn's own arrays: a batch of one or a few frames or
results.

Why its own unit: a worker's turn handles arrays of 1 to a few dozen elements (a batch's
slots, frames, timers), where each numpy call's fixed cost is several times the work, and
a turn's fixed cost is most of a rank's CPU with small blocks or sparse calls
(docs/hostlib.md, "Engine"). These give numpy's result, over a Python list where the
array is small and through numpy otherwise (`selection`: every row as a slice, a view,
when a mask keeps them all); nothing here reads a tensor's values.
"""

from __future__ import annotations

import numpy as np

# Up to this many elements a Python sum or max over an array's list beats numpy's
# reduction, whose fixed cost is several times a small list's: what a turn's own arrays
# (a batch of one or a few frames or results) are reduced with (`total`, `largest`).
SMALL_REDUCE = 32


def total(x: np.ndarray) -> int:
    """int(x.sum()) of an integer array, without numpy's reduction where x is small."""
    return int(sum(x.tolist())) if x.size <= SMALL_REDUCE else int(x.sum())


def largest(x: np.ndarray) -> float:
    """float(x.max()) of a non-empty array, without numpy's reduction where x is small."""
    return float(max(x.tolist())) if x.size <= SMALL_REDUCE else float(x.max())


def increasing(x: np.ndarray) -> bool:
    """Whether x is strictly increasing (np.unique would return it as it is, with its
    first indices in order: a batch's results of distinct slots in slot order, mostly),
    without numpy's fixed costs where x is small."""
    if x.size <= SMALL_REDUCE:
        xs = x.tolist()
        return all(a < b for a, b in zip(xs, xs[1:]))
    return not np.count_nonzero(np.diff(x) <= 0)


def common_step(x: np.ndarray) -> int | None:
    """d when x (at least two elements) is x[0], x[0] + d, x[0] + 2d, ... with d > 0, else
    None: without np.diff's fixed cost where x is small (a batch's blocks of consecutive
    slots, each turn)."""
    if x.size <= SMALL_REDUCE:
        xs = x.tolist()
        d = xs[1] - xs[0]
        ok = d > 0 and all(b - a == d for a, b in zip(xs, xs[1:]))
    else:
        d = int(x[1]) - int(x[0])
        ok = d > 0 and not np.count_nonzero(np.diff(x) != d)
    return d if ok else None


def once_each(x: np.ndarray) -> slice | np.ndarray | None:
    """The index that puts x in increasing order when no value occurs twice (every row
    as a slice when x is increasing already), else None: where np.unique would return
    every row, its first indices, without np.unique's fixed costs (a batch's results of
    distinct slots, mostly, whose slots wrap around the last one now and then)."""
    if increasing(x):
        return slice(None)
    if x.size <= SMALL_REDUCE:
        xs = x.tolist()
        if len(set(xs)) < len(xs):
            return None
        return np.argsort(x)
    order = np.argsort(x, kind="stable")
    return None if np.count_nonzero(np.diff(x[order]) == 0) else order


def consecutive(x: np.ndarray) -> slice | None:
    """x as the slice x[0]..x[-1] when it is a run of consecutive increasing integers (a
    batch's slots one after another), else None. Its ends are compared first: a batch
    spread over the slots, most of a silent rank's, is refused without a numpy call."""
    if not x.size:
        return None
    first, last = int(x[0]), int(x[-1])
    if last - first != x.size - 1 or (x.size > 2 and not increasing(x)):
        return None
    return slice(first, last + 1)


def tally(counts: np.ndarray, kinds: np.ndarray) -> None:
    """counts += bincount(kinds) (kinds < counts.size), without numpy's fixed cost where
    kinds is small (a turn's frames)."""
    if kinds.size <= SMALL_REDUCE:
        for k in kinds.tolist():
            counts[k] += 1
    else:
        counts += np.bincount(kinds, minlength=counts.size)[: counts.size]


def least(x: np.ndarray) -> float:
    """float(x.min()) of a non-empty array, without numpy's reduction where x is small."""
    return float(min(x.tolist())) if x.size <= SMALL_REDUCE else float(x.min())


def selection(mask: np.ndarray) -> tuple[int, slice | np.ndarray]:
    """How many rows `mask` keeps, and an index that picks them: `mask` itself, or every
    row as a slice when it keeps all (the usual batch: every result a data round, every
    slot going on), whose indexing is a view instead of a gather per array."""
    kept = int(np.count_nonzero(mask))
    return kept, (slice(None) if kept == mask.size else mask)
