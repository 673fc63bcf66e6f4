"""softswitch.inprocess.InProcessFabric's links: a frame crosses the fabric along the
controller's forwarding within one send, link ends count and lose frames as told, a reader
is woken by frames for its own port only (and, with a wake filter, only by the frames the
filter takes), a fabric with a wrong link is refused, and rank threads sharing this
process are interleaved finely."""

from __future__ import annotations

import sys
import threading
import time

import pytest

from controlplane.config import parse
from controlplane.fabric import FabricController
from p4net.harness import RANK_SWITCH_INTERVAL, ranks_interleaved
from softswitch.inprocess import InProcessFabric

from .conftest import HOSTS, fabric_config, host_mac, new_fabric


def l2_frame(dst: str, src: str, n: int) -> bytes:
    """An ordinary (not p4reduce) Ethernet frame: forwarded by l2_forward alone."""
    mac = lambda text: bytes.fromhex(text.replace(":", ""))  # noqa: E731
    return mac(dst) + mac(src) + b"\x88\xb5" + n.to_bytes(4, "big") + bytes(46)


def crossed(fab: InProcessFabric, frames: int) -> int:
    """Frames from l1's host 1 to l2's host 1 that arrive (each crosses both uplinks)."""
    for n in range(frames):
        fab.switch("l1").send(1, l2_frame(host_mac(2, 1), host_mac(1, 1), n))
    return len(fab.switch("l2").recv_all(1))


def waiting_reader(switch, port: int) -> tuple[threading.Thread, list[float]]:
    """A thread waiting on `switch`'s `port` until a frame is queued there, already
    waiting when this returns, and the times (from its start) at which its waits
    returned."""
    woke: list[float] = []
    started = threading.Event()

    def reader() -> None:
        started.set()
        t0 = time.monotonic()
        while not switch.queues[port]:
            switch.wait(port, 5.0)
            woke.append(time.monotonic() - t0)

    t = threading.Thread(target=reader)
    t.start()
    started.wait()
    time.sleep(0.05)
    return t, woke


@pytest.fixture
def programmed(tmp_path):
    """A two-leaf fabric, its forwarding programmed by the fabric controller."""
    with new_fabric(("l1", "l2")) as fab:
        ctl = FabricController(parse(fabric_config(fab, tmp_path)))
        try:
            ctl.up(retries=3)
            yield fab
        finally:
            ctl.close()


def test_a_frame_crosses_both_uplinks_within_one_send(programmed):
    fab = programmed
    assert crossed(fab, 5) == 5
    counts = fab.link_counts()
    assert counts[("l1", HOSTS + 1)].frames == 5  # up from l1
    assert counts[("s", 2)].frames == 5  # down to l2
    assert ("l2", HOSTS + 1) not in counts or counts[("l2", HOSTS + 1)].frames == 0


def test_a_tap_sees_each_frame_as_each_switch_takes_it_in_and_sends_it_out(programmed):
    """The fabric's tap: one frame from l1's host 1 to l2's host 1 enters and leaves each
    switch on its way, in order, unchanged; without the tap nothing more is seen."""
    fab = programmed
    seen: list[tuple[str, str, int, bytes]] = []
    fab.set_tap(lambda name, direction, port, frame: seen.append((name, direction, port, frame)))
    frame = l2_frame(host_mac(2, 1), host_mac(1, 1), 0)  # what `crossed` sends first
    assert crossed(fab, 1) == 1
    assert [(n, d, port) for n, d, port, _ in seen] == [
        ("l1", "in", 1),
        ("l1", "out", HOSTS + 1),
        ("s", "in", 1),
        ("s", "out", 2),
        ("l2", "in", HOSTS + 1),
        ("l2", "out", 1),
    ]
    assert all(bytes(f) == frame for *_, f in seen)
    fab.set_tap(None)
    assert crossed(fab, 1) == 1 and len(seen) == 6


def test_loss_is_seeded(programmed):
    fab = programmed
    fab.set_loss(0.3, seed=7)
    first = crossed(fab, 200)
    lost = {end: c.lost for end, c in fab.link_counts().items()}
    assert 0 < first < 200 and sum(lost.values()) == 200 - first
    fab.set_loss(0.3, seed=7)  # the same draws again
    assert crossed(fab, 200) == first
    fab.set_loss(0.0)
    assert crossed(fab, 10) == 10


def test_a_reader_is_woken_by_its_own_ports_frames_only(programmed):
    """A reader waiting on l2's port 1 sleeps through frames queued on l2's port 2 (each
    port has its own condition: one for all woke every reader per frame) and wakes as soon
    as a frame for its port is queued."""
    fab = programmed
    l1, l2 = fab.switch("l1"), fab.switch("l2")
    t, woke = waiting_reader(l2, 1)
    for n in range(20):  # to l2's host 2: not the reader's port
        l1.send(1, l2_frame(host_mac(2, 2), host_mac(1, 1), n))
    time.sleep(0.2)
    assert woke == [] and len(l2.recv_all(2)) == 20
    l1.send(1, l2_frame(host_mac(2, 1), host_mac(1, 1), 99))
    t.join(5.0)
    assert not t.is_alive() and len(woke) == 1 and woke[0] < 1.0
    assert len(l2.recv_all(1)) == 1


def test_a_reader_with_a_wake_filter_sleeps_through_the_frames_it_refuses(programmed):
    """With a wake filter on its port, a reader sleeps through frames the filter refuses
    -- queued all the same, and taken with the next frame that wakes it -- and wakes at
    once for a frame the filter takes; without the filter again, any frame wakes it."""
    fab = programmed
    l1, l2 = fab.switch("l1"), fab.switch("l2")
    l2.set_wake_filter(1, lambda frame: frame[17] == 99)  # the frame's number, n < 256
    t, woke = waiting_reader(l2, 1)
    for n in range(5):  # refused by the filter
        l1.send(1, l2_frame(host_mac(2, 1), host_mac(1, 1), n))
    time.sleep(0.2)
    assert woke == []
    l1.send(1, l2_frame(host_mac(2, 1), host_mac(1, 1), 99))
    t.join(5.0)
    assert not t.is_alive() and len(woke) == 1 and woke[0] < 1.0
    assert [f[17] for f in l2.recv_all(1)] == [0, 1, 2, 3, 4, 99]
    l1.send(1, l2_frame(host_mac(2, 1), host_mac(1, 1), 7))
    t0 = time.monotonic()
    l2.wait(1, 0.3)  # a refused frame queued: the wait lasts its timeout
    assert time.monotonic() - t0 >= 0.25
    l2.set_wake_filter(1, None)
    t0 = time.monotonic()
    l2.wait(1, 2.0)  # the same frame wakes a reader without the filter
    assert time.monotonic() - t0 < 1.0 and len(l2.recv_all(1)) == 1


def test_wrong_links_are_refused():
    with pytest.raises(ValueError, match=r"port 9 is not 1..2"):
        InProcessFabric({"s": 2, "l1": 3}, [(("l1", 3), ("s", 9))])
    with pytest.raises(ValueError, match="linked twice"):
        InProcessFabric({"s": 2, "l1": 3}, [(("l1", 3), ("s", 1)), (("l1", 2), ("s", 1))])
    with pytest.raises(ValueError, match="no switch 'x'"):
        InProcessFabric({"s": 2}, [(("x", 1), ("s", 1))])
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        InProcessFabric({"s": 2}).set_loss(1.0)


def test_rank_threads_run_interleaved_finely():
    """While ranks run as threads of this process (allreduce_on_leaves, bench/fabric.py)
    the interpreter switches threads at most every RANK_SWITCH_INTERVAL, never less often
    than it did, and the interval it had comes back afterwards, also after an error."""
    before = sys.getswitchinterval()
    try:
        sys.setswitchinterval(0.005)  # Python's default (the interpreter keeps whole µs)
        with ranks_interleaved():
            assert sys.getswitchinterval() == pytest.approx(RANK_SWITCH_INTERVAL, rel=0.05)
        assert sys.getswitchinterval() == pytest.approx(0.005, rel=0.05)
        sys.setswitchinterval(1e-4)  # already finer: kept
        with pytest.raises(KeyError), ranks_interleaved():
            assert sys.getswitchinterval() == pytest.approx(1e-4, rel=0.05)
            raise KeyError("a rank failed")
        assert sys.getswitchinterval() == pytest.approx(1e-4, rel=0.05)
    finally:
        sys.setswitchinterval(before)
