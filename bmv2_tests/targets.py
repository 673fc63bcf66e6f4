"""Switch targets for the packet-level suite: the same veth ports, the same P4Runtime.

A target is a switch process whose ports are the switch ends of veth pairs; the tests send
and receive real frames on the other ends with AF_PACKET sockets and configure the switch
over real P4Runtime gRPC. softswitch and simple_switch_grpc are started the same way, so
the suite's assertions cannot tell them apart -- which is the point.
"""
from __future__ import annotations

import os
import secrets
import select
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from softswitch.targets import SIMPLE_SWITCH_GRPC, SOFTSWITCH, TARGETS, SwitchRunner

__all__ = ["SOFTSWITCH", "SIMPLE_SWITCH_GRPC", "TARGETS", "SwitchProcess", "skip_reason"]
ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4


def running(kind: str, n_ports: int):
    """A started SwitchProcess for a module-scoped fixture, or a pytest skip saying why."""
    import pytest
    reason = skip_reason(kind)
    if reason:
        pytest.skip(f"{kind}: {reason}")
    return SwitchProcess(kind, n_ports=n_ports).start()


def skip_reason(kind: str) -> str | None:
    """Why a target cannot run here, or None when it can."""
    if os.geteuid() != 0:
        return "veth interfaces need root"
    if shutil.which("ip") is None:
        return "iproute2 ('ip') is not installed"
    if kind == SIMPLE_SWITCH_GRPC and shutil.which("simple_switch_grpc") is None:
        return ("simple_switch_grpc is not on PATH (bmv2 cannot be installed from any "
                "package registry; build behavioral-model with PI to run this target)")
    return None


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
            _ip("link", "set", name, "mtu", "9000")
            _ip("link", "set", name, "up")

    def delete(self) -> None:
        _ip("link", "del", self.switch_end, check=False)


@dataclass
class SwitchProcess:
    """One switch on `n_ports` veth ports (numbered 1..n), with its own gRPC/Thrift ports."""
    kind: str
    n_ports: int
    device_id: int = 1
    extra_args: tuple[str, ...] = ()       # passed to the switch (e.g. bmv2's logging)
    pairs: dict[int, VethPair] = field(default_factory=dict)
    sockets: dict[int, socket.socket] = field(default_factory=dict)
    runner: SwitchRunner | None = None

    @property
    def grpc_addr(self) -> str:
        assert self.runner is not None
        return self.runner.grpc_addr

    def start(self, timeout: float = 30.0) -> "SwitchProcess":
        tag = secrets.token_hex(3)
        try:
            for port in range(1, self.n_ports + 1):
                pair = VethPair(f"p4r{tag}{port}s", f"p4r{tag}{port}h")
                self.pairs[port] = pair
                pair.create()
                # protocol 0 receives nothing until bound to the one interface: a socket
                # created for ETH_P_ALL would queue every interface's frames until then
                sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
                sock.bind((pair.host_end, ETH_P_ALL))
                sock.setblocking(False)
                self.sockets[port] = sock
            self.runner = SwitchRunner(self.kind, {port: pair.switch_end for port, pair
                                                   in self.pairs.items()}, self.device_id,
                                       extra_args=self.extra_args)
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
        frames = []
        while (frame := self.recv(port, timeout)) is not None:
            frames.append(frame)
        return frames
