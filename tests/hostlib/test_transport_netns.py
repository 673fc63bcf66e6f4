"""Raw-socket transport on real veth pairs in throw-away namespaces (root only).

Checks the BPF filter (only UDP to p4reduce ports / this IP reaches the socket), that every
mode moves whole batches intact, and that a Worker finds its interface from worker.ip.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import time

import numpy as np
import pytest

from hostlib import netns
from hostlib import protocol as p
from p4reduce.job import load_descriptor
from hostlib.framing import WIDTH, Batch, FrameBuilder

pytestmark = pytest.mark.root  # conftest.py skips it without root, saying why


@pytest.fixture(scope="module")
def topo():
    with netns.Topology(1) as t:
        yield t


@contextlib.contextmanager
def socket_pair(topo, switch: dict, worker: dict):
    """The switch's and the first rank's RawSocket on the two ends of their veth, each
    made in its namespace with its address and the keyword arguments given (`switch`,
    `worker`), both closed after."""
    from hostlib.transport import RawSocket

    cfg = load_descriptor(topo.descriptors[0])
    with netns.in_netns(topo.switch_ns):
        sw = RawSocket(topo.switch_if[0], dst_ip=cfg.switch.ip, **switch)
    try:
        with netns.in_netns(topo.worker_ns[0]):
            wk = RawSocket(topo.worker_if[0], dst_ip=cfg.worker.ip, **worker)
        try:
            yield sw, wk
        finally:
            wk.close()
    finally:
        sw.close()


def recv_all(sock, want: int, timeout: float = 2.0):
    frames, lengths = [], []
    end = time.monotonic() + timeout
    while sum(len(n) for n in lengths) < want and time.monotonic() < end:
        f, got = sock.recv(64)
        if got.size:
            frames.append(f.copy())
            lengths.append(got.copy())
        else:
            sock.wait(0.01)
    if not lengths:
        return np.zeros((0, WIDTH), np.uint8), np.zeros(0, np.int64)
    return np.concatenate(frames), np.concatenate(lengths)


def results_batch(cfg, n, *, dst_port=None, dst_ip=None):
    ep = cfg.from_switch()
    if dst_port is not None or dst_ip is not None:
        ep = p.Endpoints(
            ep.src_mac,
            ep.dst_mac,
            ep.src_ip,
            dst_ip or ep.dst_ip,
            ep.src_port,
            dst_port or ep.dst_port,
        )
    cols = {name: 0 for name in p.FIELD_NAMES}
    cols.update(
        protocol=1,
        msg_type=4,
        job=cfg.job,
        slot=np.arange(n),
        block=np.arange(n),
        next_block=p.END_OF_STREAM,
    )
    with_values = np.arange(n) % 2 == 0
    vals = np.arange(int(with_values.sum()) * 64, dtype=np.int32).reshape(-1, 64)
    return FrameBuilder(ep).build(cols, with_values, vals)


@pytest.mark.parametrize("mode", ["ring", "mmsg"])
def test_the_ring_counts_the_frames_that_wait_without_taking_them(topo, mode):
    """ready(limit): how many received frames wait, up to `limit`, the frames still there
    for the next recv (the Worker's gather asks); a socket without the ring cannot tell."""
    cfg = load_descriptor(topo.descriptors[0])
    pair = socket_pair(topo, dict(mode="ring"), dict(mode=mode, dst_port=cfg.worker.udp_port))
    with pair as (sw, wk):
        if mode != "ring":
            assert wk.ready(8) is None
            return
        assert wk.ready(8) == 0
        sw.send(results_batch(cfg, 5))
        end = time.monotonic() + 2.0
        while wk.ready(8) < 5 and time.monotonic() < end:
            time.sleep(0.005)
        assert (wk.ready(8), wk.ready(3), wk.ready(0)) == (5, 3, 0)
        frames, lengths = recv_all(wk, 5)
        assert lengths.size == 5 and wk.ready(8) == 0


@pytest.mark.parametrize("mode", ["ring", "mmsg", "plain"])
def test_batches_cross_intact_and_filter_drops_other_traffic(topo, mode):
    cfg = load_descriptor(topo.descriptors[0])
    pair = socket_pair(topo, dict(mode=mode), dict(mode=mode, dst_port=cfg.worker.udp_port))
    with pair as (sw, wk):
        assert sw.mode == wk.mode == mode
        good = results_batch(cfg, 300)
        noise = Batch.concat(
            [
                results_batch(cfg, 5, dst_port=9999),  # other port
                results_batch(cfg, 5, dst_port=0x5031),  # not my port
                results_batch(cfg, 5, dst_ip="10.250.0.77"),
            ]
        )  # not my IP
        sw.send(noise)
        sw.send(good)
        frames, lengths = recv_all(wk, 300)
        assert len(lengths) == 300, f"{mode}: got {len(lengths)} of 300 (+15 filtered)"
        got = {bytes(frames[i, : lengths[i]]) for i in range(300)}
        assert got == {good.frame(i) for i in range(300)}
        time.sleep(0.05)
        assert wk.recv(64)[1].size == 0, "filtered frames reached the socket"
        # the worker's own transmissions are not looped back to it
        wk.send(results_batch(cfg, 3))
        f2, l2 = recv_all(sw, 0, timeout=0.1)
        assert wk.recv(64)[1].size == 0


def test_worker_finds_interface_from_descriptor_ip(topo):
    from hostlib.transport import interface_for_ip

    with netns.in_netns(topo.worker_ns[0]):
        assert interface_for_ip(topo.descriptors[0]["worker"]["ip"]) == topo.worker_if[0]
        with pytest.raises(OSError, match="no interface owns"):
            interface_for_ip("10.250.9.9")


def test_auto_falls_back_when_ring_unavailable_and_says_so(topo, monkeypatch):
    """A kernel without PACKET_MMAP: setting up the ring fails, "auto" takes mmsg, and the
    Worker's stats name the mode and the reason."""
    from hostlib import Worker
    from hostlib.transport import RawSocket

    def no_ring(self):
        raise OSError(95, "PACKET_RX_RING not supported")

    monkeypatch.setattr(RawSocket, "_setup_ring", no_ring)
    with netns.in_netns(topo.worker_ns[0]):
        with Worker(topo.descriptors[0]) as w:
            assert w.stats.transport == "mmsg"
            assert "ring: " in w.stats.transport_fallbacks
            assert "not supported" in w.stats.transport_fallbacks


JUMBO_K = 2048  # 62 + 8 192-byte frames: a job that needs MTU 8 240


@pytest.fixture(scope="module")
def jumbo_topo():
    with netns.Topology(1, block_values=JUMBO_K, mtu=9000) as t:
        yield t


@pytest.mark.parametrize("mode", ["ring", "mmsg", "plain"])
def test_jumbo_frames_of_a_wide_job_cross_intact(jumbo_topo, mode):
    """Every mode moves a job's 8 254-byte frames whole, in batches larger than a ring
    block holds, and sizes its buffers from them."""
    from hostlib.transport import ring_frame_bytes

    topo = jumbo_topo
    cfg = load_descriptor(topo.descriptors[0])
    assert cfg.block_values == JUMBO_K
    pair = socket_pair(
        topo,
        dict(mode=mode, block_values=JUMBO_K),
        dict(mode=mode, dst_port=cfg.worker.udp_port, block_values=JUMBO_K),
    )
    with pair as (sw, wk):
        assert wk.width == p.frame_bytes_with_values(JUMBO_K) == 8254
        assert ring_frame_bytes(wk.width) >= wk.width + 66
        cols = {name: 0 for name in p.FIELD_NAMES}
        cols.update(protocol=p.PROTOCOL_VERSION, msg_type=4, job=cfg.job, slot=np.arange(200))
        cols.update(block=np.arange(200), next_block=p.END_OF_STREAM)
        rng = np.random.default_rng(5)
        vals = rng.integers(-(2**31), 2**31, (200, JUMBO_K)).astype(np.int32)
        good = FrameBuilder(cfg.from_switch(), JUMBO_K).build(cols, np.ones(200, bool), vals)
        sw.send(good)
        frames, lengths = recv_all(wk, 200)
        assert len(lengths) == 200, f"{mode}: got {len(lengths)} of 200"
        assert (lengths == 8254).all()
        got = {bytes(frames[i, : lengths[i]]) for i in range(200)}
        assert got == {good.frame(i) for i in range(200)}


@pytest.mark.parametrize("k,link", [(JUMBO_K, 1500), (8192, 9000)])
def test_worker_on_a_link_too_small_for_its_jobs_frames_says_so(capsys, k, link):
    """A job of 2 048 values per block on a 1 500-byte link, or of 8 192 on a jumbo one,
    fails when the Worker starts, naming the interface, its MTU, the job's block size and
    the MTU it needs (48 + 4K); at exactly that MTU it starts."""
    from hostlib import Worker
    from hostlib.transport import MtuTooSmall

    with netns.Topology(1, block_values=k, mtu=link) as topo:
        need = p.mtu_needed(k)
        assert need == 48 + 4 * k > link
        with netns.in_netns(topo.worker_ns[0]):
            with pytest.raises(MtuTooSmall) as err:
                Worker(topo.descriptors[0])
            msg = str(err.value)
            for part in (topo.worker_if[0], f"MTU {link}", f"{k} values per block", str(need)):
                assert part in msg, (part, msg)
        topo.set_mtu(0, need - 1)
        with netns.in_netns(topo.worker_ns[0]):
            with pytest.raises(MtuTooSmall, match=f"MTU {need - 1},"):
                Worker(topo.descriptors[0])
            # the command line: a network setup error (exit 3), one line naming the MTU
            from hostlib.__main__ import EXIT_NETWORK, main

            assert main(["--descriptor", json.dumps(topo.descriptors[0])]) == EXIT_NETWORK
        assert f"MTU {need - 1}, but the job's {k} values per block" in capsys.readouterr().err
        topo.set_mtu(0, need)
        with netns.in_netns(topo.worker_ns[0]):
            with Worker(topo.descriptors[0]) as w:
                assert w.cfg.block_values == k


def test_the_ring_lends_its_frames_until_the_next_receive_and_then_gives_them_back(
    jumbo_topo,
):
    """Ring mode hands out a receive batch as the ring's own frames (no copy) and gives
    them back to the kernel at the next recv: bursts of a wide job's frames totalling
    more than the ring holds all arrive whole, each batch intact until the next recv."""
    topo = jumbo_topo
    cfg = load_descriptor(topo.descriptors[0])
    pair = socket_pair(
        topo, dict(mode="ring", block_values=JUMBO_K), dict(mode="ring", block_values=JUMBO_K)
    )
    with pair as (sw, wk):
        burst = wk.ring_frames // 2 + 7  # three bursts go round the ring's end
        cols = {name: 0 for name in p.FIELD_NAMES}
        cols.update(protocol=p.PROTOCOL_VERSION, msg_type=4, job=cfg.job, slot=0)
        cols.update(next_block=p.END_OF_STREAM)
        builder = FrameBuilder(cfg.from_switch(), JUMBO_K)
        for b in range(3):
            cols["block"] = np.arange(burst) + b * burst
            vals = np.full((burst, JUMBO_K), b, np.int32)
            sent = builder.build(cols, np.ones(burst, bool), vals)
            want = {sent.frame(i) for i in range(burst)}
            sw.send(sent)
            got: set[bytes] = set()
            end = time.monotonic() + 5.0
            while len(got) < burst and time.monotonic() < end:
                frames, lengths = wk.recv(64)
                if not lengths.size:
                    wk.wait(0.01)
                    continue
                assert np.shares_memory(frames, wk._rx8), "a ring batch is copied out"
                got |= {bytes(frames[i, : lengths[i]]) for i in range(lengths.size)}
            assert got == want, f"burst {b}: {len(got)} of {burst} frames"


def udp_counters(ns: str) -> dict[str, int]:
    """The Udp and Icmp counters of /proc/net/snmp as namespace `ns` sees them."""
    text = subprocess.run(
        ["ip", "netns", "exec", ns, "cat", "/proc/net/snmp"],
        capture_output=True,
        text=True,
        check=True,
        timeout=20,
    ).stdout
    out: dict[str, int] = {}
    lines = text.splitlines()
    for names, values in zip(lines[::2], lines[1::2]):
        proto = names.split(":")[0]
        if proto in ("Udp", "Icmp"):
            for k, v in zip(names.split()[1:], values.split()[1:]):
                out[f"{proto}{k}"] = int(v)
    return out


@pytest.mark.parametrize("sink", [True, False])
def test_a_ranks_socket_keeps_its_kernel_from_answering_frames_with_icmp(topo, sink):
    """The kernel of a rank's namespace sees each frame to its port too: with the
    transport's port sink it drops them at the sink's filter (UDP InErrors), queues none
    and sends no ICMP port unreachable; without it, each is a NoPorts and some draw an
    ICMP (the control: the counters do see what the sink prevents)."""
    cfg = load_descriptor(topo.descriptors[0])
    pair = socket_pair(topo, dict(mode="mmsg"), dict(dst_port=cfg.worker.udp_port, sink=sink))
    with pair as (sw, wk):
        assert (wk.sink is not None) == sink and (wk.sink_skipped == "") == sink
        before = udp_counters(topo.worker_ns[0])
        sw.send(results_batch(cfg, 40))
        assert len(recv_all(wk, 40)[1]) == 40
        d = {k: v - before[k] for k, v in udp_counters(topo.worker_ns[0]).items()}
        if sink:
            assert (d["UdpNoPorts"], d["IcmpOutDestUnreachs"], d["UdpInErrors"]) == (0, 0, 40)
            assert d["UdpInDatagrams"] == d["UdpRcvbufErrors"] == 0
            with pytest.raises(BlockingIOError):
                wk.sink.recv(64, socket.MSG_DONTWAIT)
        else:
            # each NoPorts makes the kernel try an ICMP; its rate limits (the per-host
            # one, and the global one that other namespaces' traffic drains on kernels
            # where it is host-wide) may drop them all, and then count them instead
            tried = (
                d["IcmpOutDestUnreachs"]
                + d.get("IcmpOutRateLimitHost", 0)
                + d.get("IcmpOutRateLimitGlobal", 0)
            )
            assert d["UdpNoPorts"] == 40 and tried >= 1, d


def test_two_ranks_share_an_address_and_a_port_held_elsewhere_is_no_error(topo):
    """Two ranks on one address and port (one namespace) both hold a sink (SO_REUSEPORT);
    when another program holds the port, the transport still opens and says why it has
    no sink."""
    from hostlib.transport import RawSocket

    cfg = load_descriptor(topo.descriptors[0])
    addr = (cfg.worker.ip, cfg.worker.udp_port)
    kw = dict(dst_ip=cfg.worker.ip, dst_port=cfg.worker.udp_port, mode="plain")
    with netns.in_netns(topo.worker_ns[0]):
        with RawSocket(topo.worker_if[0], **kw) as a, RawSocket(topo.worker_if[0], **kw) as b:
            assert a.sink is not None and b.sink is not None
        other = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        other.bind(addr)
        try:
            with RawSocket(topo.worker_if[0], **kw) as c:
                assert c.sink is None and "not bound" in c.sink_skipped, c.sink_skipped
        finally:
            other.close()


def test_a_leaf_role_silent_rank_needs_room_for_its_announces_block():
    """In the leaf role of silent rounds above 128 values per block a rank's ANNOUNCEs
    carry a block after the range, 8 bytes more than a DATA: on a link sized exactly for
    its DATA frames the Worker refuses to start, naming those ANNOUNCEs and the MTU they
    need; at that MTU it starts."""
    from hostlib import Worker
    from hostlib.transport import MtuTooSmall

    k = 8192
    with netns.Topology(1, block_values=k, mtu=p.mtu_needed(k)) as topo:
        d = topo.descriptors[0] | {"round_mode": "silent", "wire_rank": 0, "leaf_ranks": [0]}
        need = p.mtu_needed(k, announce_block=True)
        assert need == p.mtu_needed(k) + 8
        with netns.in_netns(topo.worker_ns[0]):
            with pytest.raises(MtuTooSmall) as err:
                Worker(d)
            msg = str(err.value)
            for part in (f"MTU {need - 8},", f"need MTU {need}", "ANNOUNCE frames", "leaf role"):
                assert part in msg, (part, msg)
        topo.set_mtu(0, need)
        with netns.in_netns(topo.worker_ns[0]):
            with Worker(d) as w:
                assert w.cfg.announce_block and w.builder.width == need + 14
