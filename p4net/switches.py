"""The switch under test, whatever its kind: one interface to send and receive frames.

Every kind serves real P4Runtime over gRPC on loopback, so it is configured with the
controller's own modules (p4net.harness), and every kind has the same frame interface
(`SwitchUnderTest`: send, recv, recv_all, drain, restart, stop):

- ``inprocess``: softswitch's in-process target (softswitch.inprocess), no root needed.
- ``softswitch``: ``python -m softswitch`` on veth pairs (needs root).
- ``simple_switch_grpc``: bmv2 on veth pairs (needs root and the binary on PATH).

`start_switch` brings one up; a process kind gets veth pairs and its own gRPC/Thrift ports
(softswitch.runner.SwitchRunner knows both command lines) and is stopped by PID.
"""

from __future__ import annotations

import secrets
import select
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from softswitch.inprocess import INPROCESS, InProcessSwitch
from p4reduce.afpacket import ETH_P_ALL, PACKET_OUTGOING, SO_RCVBUFFORCE
from p4reduce.target import SIMPLE_SWITCH_GRPC, SOFTSWITCH, V1MODEL_BLOCK_SIZES
from p4reduce.wire import mtu_needed
from softswitch.runner import SwitchRunner

# every kind of switch under test, and those that run as a process on real interfaces
# (what Mininet hosts can reach)
KINDS = (INPROCESS, SOFTSWITCH, SIMPLE_SWITCH_GRPC)
PROCESS_KINDS = (SOFTSWITCH, SIMPLE_SWITCH_GRPC)
# the veths carry a DATA of the largest block size, and an ANNOUNCE with a block of it
# (the leaf role of silent rounds: 64 056 bytes of IPv4 at 16 000 values)
VETH_MTU = mtu_needed(max(V1MODEL_BLOCK_SIZES), announce_block=True)
HOST_RCVBUF = 32 << 20  # bytes a test's socket on a port's host end queues


class SwitchUnderTest(Protocol):
    """What the packet-level and controller tests use, whatever the kind of switch."""

    kind: str

    @property
    def grpc_addr(self) -> str: ...
    def send(self, port: int, frame: bytes) -> None: ...
    def recv(self, port: int, timeout: float = 2.0) -> bytes | None: ...
    def recv_all(self, port: int, timeout: float = 0.5) -> list[bytes]: ...
    def drain(self) -> None: ...
    def restart(self, timeout: float = 30.0) -> None: ...
    def log(self) -> str: ...
    def stop(self) -> None: ...


def start_switch(kind: str, n_ports: int) -> SwitchUnderTest:
    """A started switch of `kind` with ports 1..n_ports (the caller stops it)."""
    if kind == INPROCESS:
        return InProcessSwitch(n_ports).start()
    if kind in PROCESS_KINDS:
        return VethSwitch(kind, n_ports=n_ports).start()
    raise ValueError(f"unknown switch kind {kind!r} ({', '.join(KINDS)})")


def _recv_all(switch: SwitchUnderTest, port: int, timeout: float) -> list[bytes]:
    frames = []
    while (frame := switch.recv(port, timeout)) is not None:
        frames.append(frame)
    return frames


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


@dataclass
class VethPair:
    switch_end: str
    host_end: str

    def create(self) -> None:
        _ip("link", "add", self.switch_end, "type", "veth", "peer", "name", self.host_end)
        for name in (self.switch_end, self.host_end):
            # no IPv6 router/neighbour solicitations: the only frames are the test's own
            Path(f"/proc/sys/net/ipv6/conf/{name}/disable_ipv6").write_text("1")
            _ip("link", "set", name, "mtu", str(VETH_MTU))
            _ip("link", "set", name, "up")

    def delete(self) -> None:
        _ip("link", "del", self.switch_end, check=False)


@dataclass
class VethSwitch:
    """One switch process on `n_ports` veth ports (numbered 1..n), with its own gRPC/Thrift
    ports; the tests send and receive real frames on the host ends with AF_PACKET sockets."""

    kind: str
    n_ports: int
    device_id: int = 1
    extra_args: tuple[str, ...] = ()  # passed to the switch (e.g. bmv2's logging)
    pairs: dict[int, VethPair] = field(default_factory=dict)
    sockets: dict[int, socket.socket] = field(default_factory=dict)
    runner: SwitchRunner | None = None

    @property
    def grpc_addr(self) -> str:
        assert self.runner is not None
        return self.runner.grpc_addr

    def start(self, timeout: float = 30.0) -> "VethSwitch":
        tag = secrets.token_hex(3)
        try:
            for port in range(1, self.n_ports + 1):
                pair = VethPair(f"p4r{tag}{port}s", f"p4r{tag}{port}h")
                self.pairs[port] = pair
                pair.create()
                # protocol 0 receives nothing until bound to the one interface: a socket
                # created for ETH_P_ALL would queue every interface's frames until then
                sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
                # a few 64 KB frames fill net.core.rmem_max: a test that reads one port
                # while the switch answers on others must not lose the frames behind
                sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, HOST_RCVBUF)
                sock.bind((pair.host_end, ETH_P_ALL))
                sock.setblocking(False)
                self.sockets[port] = sock
            self.runner = SwitchRunner(
                self.kind,
                {port: pair.switch_end for port, pair in self.pairs.items()},
                self.device_id,
                extra_args=self.extra_args,
            )
            self.runner.start(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def restart(self, timeout: float = 30.0) -> None:
        """A switch reboot on the same ports: it comes back with no pipeline and no state."""
        assert self.runner is not None
        self.runner.restart(timeout)

    def log(self) -> str:
        return self.runner.log() if self.runner is not None else ""

    def stop(self) -> None:
        """Stop what this object started, by PID, and delete its interfaces."""
        if self.runner is not None:
            self.runner.stop()
        for sock in self.sockets.values():
            sock.close()
        self.sockets.clear()
        for pair in self.pairs.values():
            pair.delete()
        self.pairs.clear()

    # ---- frames --------------------------------------------------------------------
    def send(self, port: int, frame: bytes) -> None:
        self.sockets[port].send(frame)

    def drain(self) -> None:
        for sock in self.sockets.values():
            while True:
                try:
                    sock.recv(65535)
                except BlockingIOError:
                    break

    def recv(self, port: int, timeout: float = 2.0) -> bytes | None:
        """Next frame the switch sent out of `port` (frames we sent ourselves are skipped)."""
        sock = self.sockets[port]
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([sock], [], [], remaining)
            if not ready:
                return None
            data, addr = sock.recvfrom(65535)
            if addr[2] == PACKET_OUTGOING:
                continue
            return data

    def recv_all(self, port: int, timeout: float = 0.5) -> list[bytes]:
        """Every frame out of `port` until `timeout` passes with none."""
        return _recv_all(self, port, timeout)
