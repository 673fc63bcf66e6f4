"""Ports: in-process queues, and AF_PACKET raw sockets over real veth pairs."""

from __future__ import annotations

import contextlib
import secrets
import select
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest
from p4.v1 import p4runtime_pb2

from p4reduce.p4rt import P4InfoIndex
from softswitch import handover
from softswitch.p4runtime_server import Device
from softswitch.ports import (
    PACKET_AUXDATA,
    _RX_BATCH,
    AfPacketPorts,
    InProcessPorts,
    parse_interface_spec,
)
from p4reduce.afpacket import ETH_P_ALL, PACKET_OUTGOING, SOL_PACKET, TP_STATUS_VLAN_VALID

from .helpers import SetAction, Update, device_config, ethernet, exact_entry, load_p4info

IFF_PROMISC = 0x100
DST1 = bytes.fromhex("020000000001")
DST2 = bytes.fromhex("020000000002")
DST9 = bytes.fromhex("020000000009")


def test_parse_interface_spec():
    assert parse_interface_spec("1@veth1") == (1, "veth1")
    assert parse_interface_spec("0x10@eth0") == (16, "eth0")
    for bad in ("veth1", "1@", "@veth1", "x@veth1", "-1@veth1"):
        with pytest.raises(ValueError):
            parse_interface_spec(bad)


def test_in_process_ports_queue_per_port():
    class Echo:
        transmit = None

        def receive(self, port, frame):
            self.transmit(port + 1, frame[::-1])

    ports = InProcessPorts()
    echo = Echo()
    ports.attach(echo)
    ports.inject(1, b"abc")
    assert ports.pending() == {2: 1}
    assert ports.get(2, timeout=0.1) == b"cba"
    with pytest.raises(TimeoutError):
        ports.get(2, timeout=0.05)
    assert ports.poll(2) is None
    ports.transmit(5, b"x")
    ports.transmit(5, b"y")
    assert ports.drain(5) == [b"x", b"y"]
    assert ports.stats[1]["rx"] == 1 and ports.stats[2]["tx"] == 1


def test_in_process_ports_survive_a_device_that_raises():
    class Broken:
        transmit = None

        def receive(self, port, frame):
            raise RuntimeError("boom")

    ports = InProcessPorts()
    ports.attach(Broken())
    ports.inject(1, b"abc")  # must not raise
    assert ports.stats[1]["rx_errors"] == 1


# -- AF_PACKET over veth -------------------------------------------------------------------


def _ip(*args: str, check: bool = True) -> None:
    subprocess.run(["ip", *args], check=check, capture_output=True)


class Veths:
    """veth pairs with unique names (switch end s, host end h), deleted on close."""

    def __init__(self, n: int) -> None:
        tag = secrets.token_hex(3)
        self.pairs: dict[int, tuple[str, str]] = {}
        self.socks: dict[int, socket.socket] = {}
        try:
            for port in range(1, n + 1):
                s, h = f"sst{tag}{port}s", f"sst{tag}{port}h"
                _ip("link", "add", s, "type", "veth", "peer", "name", h)
                self.pairs[port] = (s, h)
                for name in (s, h):
                    Path(f"/proc/sys/net/ipv6/conf/{name}/disable_ipv6").write_text("1")
                    _ip("link", "set", name, "up")
                # protocol 0 until bound: an ETH_P_ALL socket sees every interface before
                sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
                sock.bind((h, ETH_P_ALL))
                sock.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
                sock.setblocking(False)
                self.socks[port] = sock
        except BaseException:
            self.close()
            raise

    def switch_ends(self) -> dict[int, str]:
        return {p: s for p, (s, _h) in self.pairs.items()}

    def send(self, port: int, frame: bytes) -> None:
        self.socks[port].send(frame)

    def recv(self, port: int, timeout: float = 2.0) -> bytes | None:
        """Next frame the switch sent out of ``port``, VLAN tag put back from the aux data
        (the kernel strips it on receive, for this socket as for the switch's)."""
        sock = self.socks[port]
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            if not select.select([sock], [], [], left)[0]:
                return None
            data, anc, _flags, addr = sock.recvmsg(65535, socket.CMSG_SPACE(20))
            if addr[2] == PACKET_OUTGOING:
                continue
            for level, ctype, cdata in anc:
                if level == SOL_PACKET and ctype == PACKET_AUXDATA:
                    status, _l, _s, _m, _n, tci, tpid = struct.unpack_from("IIIHHHH", cdata)
                    if status & TP_STATUS_VLAN_VALID:
                        data = data[:12] + struct.pack("!HH", tpid or 0x8100, tci) + data[12:]
            return data
        return None

    def close(self) -> None:
        for sock in self.socks.values():
            sock.close()
        for s, _h in self.pairs.values():
            _ip("link", "del", s, check=False)


def promisc(ifname: str) -> bool:
    return bool(int(Path(f"/sys/class/net/{ifname}/flags").read_text(), 16) & IFF_PROMISC)


def loaded_device() -> tuple[Device, P4InfoIndex]:
    info = load_p4info()
    ids = P4InfoIndex.from_proto(info)
    device = Device(device_id=1, cpu_port=255)
    config = p4runtime_pb2.ForwardingPipelineConfig(p4info=info, p4_device_config=device_config())
    device.set_pipeline(SetAction.VERIFY_AND_COMMIT, config)
    req = p4runtime_pb2.WriteRequest(device_id=1)
    req.updates.add(type=Update.INSERT).entity.CopyFrom(exact_entry(ids, DST2, 2))
    assert device.write(req) == [None]
    return device, ids


@contextlib.contextmanager
def forwarding_ports() -> Iterator[tuple[Device, Veths, AfPacketPorts]]:
    """A loaded device (DST2 -> port 2) on AfPacketPorts over two veth pairs; afterwards
    no frame made the device fail."""
    device, _ids = loaded_device()
    veths = Veths(2)
    ports = AfPacketPorts(veths.switch_ends())
    try:
        ports.attach(device)
        ports.start()
        yield device, veths, ports
    finally:
        ports.stop()
        veths.close()
    assert device.counters["process_errors"] == 0


@pytest.mark.root
def test_af_packet_ports_forward_between_veths():
    with forwarding_ports() as (device, veths, ports):
        s1, s2 = veths.pairs[1][0], veths.pairs[2][0]
        assert promisc(s1) and promisc(s2)

        frame = ethernet(DST2, payload=bytes(range(46)))
        veths.send(1, frame)
        assert veths.recv(2) == frame

        # a VLAN tag the kernel may have moved to metadata is put back (as libpcap does)
        tagged = (
            DST2
            + b"\x02\x00\x00\x00\x00\x01"
            + struct.pack("!HH", 0x8100, 0x0064)
            + b"\x08\x00"
            + bytes(46)
        )
        veths.send(1, tagged)
        assert veths.recv(2) == tagged

        # what the switch itself sends on port 2 is not switch input
        time.sleep(0.2)
        assert ports.stats[2]["rx"] == 0 and ports.stats[2]["tx"] == 2

        # a truncated frame: parser error, counted, dropped (no entry for DST9); the port
        # keeps working
        veths.send(1, DST9 + b"\x02\x00\x00\x00\x00\x01\x88\xb5\x01")
        time.sleep(0.2)
        assert device.active.switch.stats().get("parser_errors", 0) == 1
        veths.send(1, frame)
        assert veths.recv(2) == frame


@pytest.mark.root
def test_af_packet_ports_receive_ring_grows_with_the_mtu():
    """Each port reads a receive ring whose slots hold a frame of its interface's MTU. A
    link whose MTU grows after the switch started: the first frame too long for the slots
    is read whole from the socket's queue, and the port is handed to a socket with a ring
    for the new MTU; no frame is lost or reordered."""
    with forwarding_ports() as (_device, veths, ports):
        assert set(ports.ring_frames()) == {1, 2}
        assert 1514 <= ports.ring_frames()[1] < 9014
        small = ethernet(DST2, payload=bytes(1486))
        veths.send(1, small)
        assert veths.recv(2) == small
        set_mtu(veths, 9000)
        big = [ethernet(DST2, payload=bytes([k]) * 8986) for k in range(5)]
        for frame in big:
            veths.send(1, frame)
        assert [veths.recv(2) for _ in big] == big
        # the frames may be out before the handover ends (the old ring's are sent first)
        assert eventually(lambda: ports.stats[1]["rx_ring_refits"] == 1)
        assert ports.ring_frames()[1] >= 9014
        assert ports.stats[1]["rx_truncated"] == 0
        assert 1 <= ports.stats[1]["rx_longer_than_ring"] <= len(big)
        longer = ports.stats[1]["rx_longer_than_ring"]
        veths.send(1, big[0])
        assert veths.recv(2) == big[0]
        assert ports.stats[1]["rx_longer_than_ring"] == longer
        # a second growth hands the port over again, through the same fanout group
        set_mtu(veths, 20000)
        huge = ethernet(DST2, payload=bytes(19986))
        veths.send(1, huge)
        assert veths.recv(2) == huge
        assert eventually(lambda: ports.stats[1]["rx_ring_refits"] == 2)
        assert ports.ring_frames()[1] >= 20014


@pytest.mark.root
def test_af_packet_ports_handed_over_port_ignores_what_it_sends_without_the_fanout_flag(
    monkeypatch: pytest.MonkeyPatch,
):
    """A kernel whose fanout groups cannot ignore the frames this host sends (no
    PACKET_FANOUT_FLAG_IGNORE_OUTGOING) delivers them to a group's sockets whatever the
    sockets' own option says (except a member's own sends): the handed-over socket's
    filter drops them in the kernel, so neither what the switch sends out of that port
    nor what another sender on this host puts on its interface reaches its ring."""
    make_group = handover.make_group
    monkeypatch.setattr(handover, "make_group", lambda sock: make_group(sock, False))
    with forwarding_ports() as (device, veths, ports):
        ids = P4InfoIndex.from_proto(load_p4info())
        req = p4runtime_pb2.WriteRequest(device_id=1)
        req.updates.add(type=Update.INSERT).entity.CopyFrom(exact_entry(ids, DST1, 1))
        assert device.write(req) == [None]
        set_mtu(veths, 9000)
        big = ethernet(DST2, payload=bytes(8986))
        veths.send(1, big)
        assert veths.recv(2) == big
        assert eventually(lambda: ports.stats[1]["rx_ring_refits"] == 1)
        assert not ports._groups[1] & handover.PACKET_FANOUT_FLAG_IGNORE_OUTGOING << 16
        back = [ethernet(DST1, payload=bytes([k]) * 100) for k in range(5)]
        for frame in back:
            veths.send(2, frame)
        assert [veths.recv(1) for _ in back] == back
        with socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0) as other:
            other.bind((veths.pairs[1][0], 0))
            for frame in back:
                other.send(ethernet(DST2, payload=frame[14:]))
        assert veths.recv(2, timeout=0.5) is None  # not switch input: not forwarded
        assert ports.stats[1]["tx"] == len(back)
        assert ports.stats[1]["rx"] == 1
        assert ports.stats[1]["rx_outgoing_ignored"] == 0


def eventually(cond: Callable[[], bool], timeout: float = 3.0) -> bool:
    """Whether `cond` holds within `timeout` seconds (polled)."""
    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.02)
    return cond()


def set_mtu(veths: Veths, mtu: int) -> None:
    for s, h in veths.pairs.values():
        for name in (s, h):
            _ip("link", "set", name, "mtu", str(mtu))


# Sends numbered frames out of a veth's host end at a steady pace: `small` ones until a
# line arrives on stdin, then as many alternating long and small ones; never pausing.
_SENDER = r"""
import select, socket, struct, sys, time
ifname, small, long_payload = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
sock.bind((ifname, 0))
head = bytes.fromhex("020000000002020000000001") + b"\x08\x00"
seq, grown = 0, False
while seq < 2 * small:
    if not grown and seq >= small:
        grown = bool(select.select([sys.stdin], [], [], 0)[0])
    pad = long_payload if grown and seq % 2 else 46
    if grown or seq < small:
        sock.send(head + struct.pack("!I", seq) + bytes(pad))
        seq += 1
    time.sleep(0.001)
print(seq, flush=True)
"""


@pytest.mark.root
def test_af_packet_ports_hand_a_port_to_a_larger_ring_under_steady_traffic():
    """Frames keep arriving, a millisecond apart, while the link's MTU grows and the
    first long frames arrive: the port is handed to a socket with a larger ring in the
    middle of that traffic, and the switch gets every frame once, in the order sent."""
    import threading

    class Recorder:
        transmit = None

        def __init__(self) -> None:
            self.first_commit = threading.Event()
            self.first_commit.set()
            self.seqs: list[int] = []

        def receive(self, port: int, frame: bytes) -> None:
            if frame[12:14] == b"\x08\x00":
                self.seqs.append(struct.unpack_from("!I", frame, 14)[0])

    rec = Recorder()
    veths = Veths(1)
    ports = AfPacketPorts(veths.switch_ends())
    sender = None
    small = 400
    try:
        ports.attach(rec)
        ports.start()
        sender = subprocess.Popen(
            [sys.executable, "-c", _SENDER, veths.pairs[1][1], str(small), "8986"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        eventually(lambda: len(rec.seqs) >= small // 2, timeout=10)
        set_mtu(veths, 9000)
        assert sender.stdin is not None
        sender.stdin.write("grown\n")
        sender.stdin.flush()
        out, _ = sender.communicate(timeout=30)
        assert int(out) == 2 * small
        eventually(lambda: len(rec.seqs) >= 2 * small, timeout=5)
        assert rec.seqs == list(range(2 * small))
        assert ports.stats[1]["rx_ring_refits"] == 1
        assert ports.ring_frames()[1] >= 9014
        assert ports.stats[1]["rx_truncated"] == 0
    finally:
        if sender is not None and sender.poll() is None:
            sender.kill()
            sender.wait()
        ports.stop()
        veths.close()


@pytest.mark.root
def test_af_packet_ports_count_a_link_going_down_and_forward_once_it_is_up():
    """An interface that goes down leaves an error (ENETDOWN) on its packet socket, which
    keeps the socket ready until read; a ring port never calls recv, so the ports read the
    error, count it once (rx_errors) and sleep again instead of waking without end. Once
    the link is up again the port forwards as before."""
    with forwarding_ports() as (_device, veths, ports):
        s1 = veths.pairs[1][0]
        assert 1 in ports.ring_frames()
        _ip("link", "set", s1, "down")
        deadline = time.monotonic() + 5
        while ports.stats[1]["rx_errors"] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)  # an error not cleared by reading it would be counted again
        assert ports.stats[1]["rx_errors"] == 1
        _ip("link", "set", s1, "up")
        frame = ethernet(DST2, payload=bytes(range(46)))
        deadline = time.monotonic() + 5
        got = None
        while got is None and time.monotonic() < deadline:  # until the link has carrier
            veths.send(1, frame)
            got = veths.recv(2, timeout=0.2)
        assert got == frame
        assert ports.stats[1]["rx_errors"] == 1


@pytest.mark.root
def test_af_packet_ports_promisc_off_after_stop_and_bad_interface():
    veths = Veths(1)
    try:
        s1 = veths.pairs[1][0]
        ports = AfPacketPorts({1: s1})
        ports.start()
        assert promisc(s1)
        ports.stop()
        assert not promisc(s1)
        with pytest.raises(OSError, match="no such interface"):
            AfPacketPorts({1: s1, 2: "sstnonexist0"}).start()
        assert not promisc(s1)  # the partially opened set was closed again
    finally:
        veths.close()
    with pytest.raises(ValueError):
        AfPacketPorts([(1, "a"), (1, "b")])


@pytest.mark.root
def test_af_packet_ports_start_reading_at_the_first_commit():
    """As bmv2: ports are read from the first committed pipeline on; a frame that arrived
    earlier waits in the kernel and is then forwarded by that pipeline."""
    info = load_p4info()
    ids = P4InfoIndex.from_proto(info)
    device = Device(device_id=1, cpu_port=255)
    veths = Veths(2)
    ports = AfPacketPorts(veths.switch_ends())
    try:
        ports.attach(device)
        ports.start()
        frame = ethernet(DST2)
        veths.send(1, frame)
        assert veths.recv(2, timeout=0.3) is None
        config = p4runtime_pb2.ForwardingPipelineConfig(
            p4info=info, p4_device_config=device_config()
        )
        device.set_pipeline(SetAction.VERIFY_AND_SAVE, config)
        req = p4runtime_pb2.WriteRequest(device_id=1)
        req.updates.add(type=Update.INSERT).entity.CopyFrom(exact_entry(ids, DST2, 2))
        assert device.write(req) == [None]
        assert veths.recv(2, timeout=0.3) is None  # saved, not committed
        device.set_pipeline(SetAction.COMMIT, p4runtime_pb2.ForwardingPipelineConfig())
        assert veths.recv(2) == frame
    finally:
        ports.stop()
        veths.close()


@pytest.mark.root
def test_af_packet_ports_serve_a_short_queue_before_a_long_backlog():
    """Ports are served round robin a few frames each: 4 frames waiting on port 2 behind
    200 that arrived first on port 1 are all processed within the first two turns, not
    after port 1's backlog (a job of many slots would otherwise hold back another job's
    next round by its whole backlog; docs/reliability.md, "Jobs share the switch")."""
    import threading

    class Recorder:
        transmit = None

        def __init__(self) -> None:
            self.first_commit = threading.Event()
            self.order: list[int] = []

        def receive(self, port: int, frame: bytes) -> None:
            self.order.append(port)

    rec = Recorder()
    veths = Veths(2)
    ports = AfPacketPorts(veths.switch_ends())
    try:
        ports.attach(rec)
        ports.start()
        for _ in range(200):
            veths.send(1, ethernet(DST2))
        for _ in range(4):
            veths.send(2, ethernet(DST2))
        time.sleep(0.2)  # all waiting in the kernel: nothing is read before the commit
        rec.first_commit.set()
        deadline = time.monotonic() + 5
        while len(rec.order) < 204 and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        ports.stop()
        veths.close()
    assert rec.order.count(1) == 200 and rec.order.count(2) == 4
    last = max(i for i, port in enumerate(rec.order) if port == 2)
    assert last < 2 * _RX_BATCH + 4, rec.order[: last + 1]
