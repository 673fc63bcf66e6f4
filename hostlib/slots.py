"""Which slots of a job a rank uses in a call, and in which order (docs/protocol.md
section 5): the streams of blocks per slot, and the window of slots outstanding. How many
slots a call uses is the job model's rule (p4reduce.job.slots_for_call), since the
benchmarks and the demo count a call's rounds by it too.

Why its own unit: how many slots a rank keeps outstanding is the job's fairness toward
other jobs on the switch (docs/reliability.md, "Jobs share the switch"), a rule with its
own bound (`fifo_share`), and every rank must open the same slots in the same order;
neither depends on timers or on what results carry.
"""

from __future__ import annotations

import numpy as np

from p4reduce.job import block_count, slots_for_call

from . import protocol as p

EOS = p.END_OF_STREAM


def slot_streams(nonzero: np.ndarray, nblocks: int, slots: int) -> tuple[np.ndarray, np.ndarray]:
    """Slot s's stream is the non-zero blocks b = s (mod S) in order (protocol.md section
    5). Returns `after`, where after[b] is the first non-zero block of b's stream after
    block b (EOS: none), for every block b < nblocks, and each slot's first block (EOS:
    none). On the (rows, S) grid of block numbers a column is a stream, so a running
    minimum up the rows answers for every block at once: no sort, one int32 array of the
    block count (4 bytes per block; docs/hostlib.md, "Memory")."""
    rows = -(-nblocks // slots)
    grid = np.full((rows + 1, slots), EOS, np.int32)  # row `rows`: the streams' ends
    grid.reshape(-1)[nonzero] = nonzero
    up = grid[::-1]  # then grid[r, s]: the first non-zero block of column s at row >= r
    np.minimum.accumulate(up, axis=0, out=up)
    return grid.reshape(-1)[slots:], grid[0].astype(np.int64)


def fifo_share(slots: int, other_slots: int, window: int) -> float:
    """The share of a first-in first-out switch that a backlogged job of `slots` slots
    gets beside one of `other_slots` slots with as many ranks: each keeps min(slots,
    window) packets per rank queued, and the switch serves them in arrival order."""
    mine, theirs = min(slots, window), min(other_slots, window)
    return mine / (mine + theirs)


def slots_for_tensor(values: int, block_values: int, slot_count: int) -> int:
    """The slots to give a job whose calls each reduce one tensor of `values` float32
    values at `block_values` per block, out of `slot_count` (the switch kind's default,
    p4reduce.target.default_slots): what slots_for_call gives that call, so every slot the
    job has is one its calls use (the benchmarks' jobs and the click example's: every slot
    a call uses costs it an announce round, and in silent rounds a closing round where
    some rank sat out its last round, a large share of a wide-block call's packets)."""
    blocks = block_count(values, False, block_values)
    return slots_for_call(blocks, slot_count, block_values=block_values)


class SlotWindow:
    """The slots of one call: `active` ones have a packet outstanding, `waiting` ones hold
    blocks of this rank but wait for the window, `touched` ones were opened in this call
    (their version alternates for the next). A call opens the lowest `window` slots of
    the `used` (those with a block of this rank); each slot that finishes opens the
    lowest waiting one, so every rank opens the same slots in the same order. Only
    `open` and `finish` change which slots are active or waiting: `done` is kept there,
    since every turn asks it several times."""

    def __init__(self, count: int, used: int, window: int):
        self.count = count
        ids = np.arange(count)
        in_use = ids < used
        self.active = in_use & (ids < max(1, window))
        self.waiting = in_use & ~self.active
        self.touched = self.active.copy()
        self._note()

    def open(self, slots: np.ndarray) -> None:
        """`slots` take part in this call from now on."""
        self.waiting[slots] = False
        self.active[slots] = self.touched[slots] = True
        self._note()

    def finish(self, slots: np.ndarray) -> np.ndarray:
        """`slots` finished (their stream ended, or a disagreement ended them): returns
        the waiting slots to open in their place, the lowest first."""
        self.active[slots] = False
        self._note()
        return np.flatnonzero(self.waiting)[: int(np.size(slots))]

    def unopened(self) -> np.ndarray:
        """Slots of the job this call has not opened (after a disagreement every rank
        announces on them: engine._check_fingerprints)."""
        return np.flatnonzero(~self.touched)

    def _note(self) -> None:
        """`active` or `waiting` changed: whether any slot is left."""
        self._done = not np.count_nonzero(self.active) and not np.count_nonzero(self.waiting)

    @property
    def done(self) -> bool:
        """No slot active or waiting: the call is over."""
        return self._done
