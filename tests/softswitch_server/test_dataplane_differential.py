"""softswitch and simple_switch_grpc send the same frames and count the same for the same
frame sequence (dataplane_differential.py: a real job's traffic with faults mixed in), at
each block size -- the wide ones through softswitch's numpy limbs -- in both round modes
and encodings, and in the leaf role; and the comparison tells two switches apart that were
not given the same frames (it can fail)."""

from __future__ import annotations

import pytest

from p4net.switches import INPROCESS
from p4reduce.target import SOFTSWITCH

from .dataplane_differential import (
    P4R_OFFSET,
    Scenario,
    capture,
    compare,
    differences,
    run,
    with_faults,
)

# seeds whose draws (printed by `python tests/softswitch_server/dataplane_differential.py
# --first-seed N --scenarios 1`), not in the leaf role, cover: 4 096 values, packed,
# silent, sums that overflow; 256, packed, every-rank, 20 % faults, the drop simulator at
# 5 % each way; 16 000, packed, silent; 2 048, packed, every-rank, overflowing sums, 10 %
# faults and 5 % loss. A capture's frame order follows its threads, so a seed draws the
# job, not the very sequence: both targets always get the same one.
SEEDS = (3000, 3017, 3025, 4008)
PROCESS_SEED = 3020  # 2 048 values, packed, every-rank, 20 % faults
CLEAN_SEED = 3033  # 256 values, lanes, silent, dense int32, no fault, no loss
# in the leaf role (its spine the mirror): 4 096 values, packed, every-rank, 5 % faults;
# 128, packed, silent, sums that overflow, 5 % faults
LEAF_SEEDS = (7000, 7004)


@pytest.mark.root
@pytest.mark.bmv2
@pytest.mark.parametrize("seed,leaf", [(s, False) for s in SEEDS] + [(s, True) for s in LEAF_SEEDS])
def test_softswitch_sends_and_counts_what_simple_switch_does(seed, leaf):
    """In the leaf role what goes up the uplink is answered by the mirror spine."""
    frames, stats, diffs = compare(seed, INPROCESS, leaf=leaf)
    assert stats["rounds_completed"] > 0 and not diffs, (Scenario.draw(seed, leaf), diffs)


@pytest.mark.root
@pytest.mark.bmv2
def test_the_softswitch_process_on_veths_too():
    """The same through `python -m softswitch`'s AF_PACKET ports."""
    frames, stats, diffs = compare(PROCESS_SEED, SOFTSWITCH, leaf=False)
    assert stats["rounds_completed"] > 0 and not diffs, diffs


def test_the_comparison_tells_apart_switches_given_other_frames():
    """Two in-process switches given the same frames agree; given one DATA whose last
    value differs, the ports that got its round's result differ, and the comparison says
    where."""
    sc = Scenario.draw(CLEAN_SEED, leaf=False)
    frames = with_faults(capture(sc), sc)
    first = run(INPROCESS, sc, frames)
    assert sum(len(out) for out in first.out.values()) > 0
    assert differences(first, run(INPROCESS, sc, frames)) == []
    data = next(i for i, (_, f) in enumerate(frames) if len(f) > P4R_OFFSET + 64)
    port, frame = frames[data]
    changed = frame[:-1] + bytes([frame[-1] ^ 1])
    other = run(INPROCESS, sc, frames[:data] + [(port, changed)] + frames[data + 1 :])
    diffs = differences(first, other)
    assert diffs and all("port" in d or "counter" in d for d in diffs), diffs
